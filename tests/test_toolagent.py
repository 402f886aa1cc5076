"""DnC tools, handler, parsers, strategies and teacher on a small corpus built here."""

from __future__ import annotations

import dataclasses
import hashlib
import re

import numpy as np
import pytest

from mmrag.models.llm import Generation
from mmrag.schema import Document, Image, Question, Section, SubQuestion, Table, Turn
from mmrag.toolagent import strategies, teacher, tools
from mmrag.toolagent.system import DnC, ReAct, ToolsAnswer

ATTRS = {"product": {"colour": ("red", "blue", "green"), "pattern": ("plain", "striped"),
                     "logo_colour": ("red", "white")}}


def prompts(kind: str, attr: str, value: str) -> list[str]:
    return [f"a photo of a thing whose {attr.replace('_', ' ')} is {value}"]


class BagEncoder:
    """Hashed bag of words: a deterministic stand-in for the sentence encoder."""

    def encode(self, texts, **kw):
        out = np.zeros((len(texts), 512), np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 512] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


class FakeClip:
    """'Sees' the gold attributes: image and prompt vectors are one-hots of (attribute, value)."""

    def __init__(self):
        self.slots = {(a, v): i for i, (a, v) in enumerate(
            (a, v) for a, vs in ATTRS["product"].items() for v in vs)}

    def encode_images(self, images):
        out = np.zeros((len(images), len(self.slots)), np.float32)
        for i, attrs in enumerate(images):
            for a, v in attrs.items():
                out[i, self.slots[(a, v)]] = 1
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def encode_texts(self, texts):
        out = np.zeros((len(texts), len(self.slots)), np.float32)
        for i, t in enumerate(texts):
            m = re.match(r"a photo of a thing whose (.+) is (.+)", t)
            out[i, self.slots[(m.group(1).replace(" ", "_"), m.group(2))]] = 1
        return out


IMAGE_ATTRS = {"img/vx2.png": {"colour": "red", "pattern": "striped", "logo_colour": "white"},
               "img/bq1.png": {"colour": "blue", "pattern": "plain", "logo_colour": "red"}}


def corpus() -> list[Document]:
    vx2 = Document("d1", "Vorkel X2", entity_id="e1", summary="The Vorkel X2 is a tracker.",
                   sections=[Section("d1-s0", "d1", "Design",
                                     "Engineers refined the grip. The Vorkel X2 was designed by "
                                     "Ada Quill. It went on sale in 2031."),
                             Section("d1-s1", "d1", "Manufacturing",
                                     "Production of the Vorkel X2 takes place at Brindle Works.")],
                   tables=[Table("d1-t0", "d1", ["Property", "Value"],
                                 [["Price (USD)", "420"], ["Weight (g)", "180"]])],
                   images=[Image("d1-i0", "d1", "img/vx2.png", "The Vorkel X2.", entity_id="e1")])
    bq1 = Document("d2", "Brant Q1", entity_id="e2",
                   sections=[Section("d2-s0", "d2", "Design", "Brant Q1 was designed by Lio Marsh.")],
                   images=[Image("d2-i0", "d2", "img/bq1.png", "Brant Q1.", entity_id="e2")])
    org = Document("d3", "Helix Labs", entity_id="e3",
                   sections=[Section("d3-s0", "d3", "Overview", "Helix Labs was founded in 2009.")],
                   tables=[Table("d3-t0", "d3", ["Product", "Category", "Release year", "Weight (g)"],
                                 [["Vorkel X2", "tracker", "2031", "180"],
                                  ["Brant Q1", "tracker", "2029", "240"],
                                  ["Cosa Z", "speaker", "2030", "900"]], title="Line-up of Helix Labs")])
    return [vx2, bq1, org]


TYPES = {"Vorkel X2": "product", "Brant Q1": "product", "Cosa Z": "product",
         "Helix Labs": "organisation", "Ada Quill": "person", "Lio Marsh": "person",
         "Brindle Works": "place"}


@pytest.fixture(scope="module")
def toolset():
    return tools.build_tools(corpus(), BagEncoder(), TYPES, clip=FakeClip(),
                         load_image=IMAGE_ATTRS.__getitem__, attributes=ATTRS, prompts=prompts,
                         entity_names={"e1": "Vorkel X2", "e2": "Brant Q1"})


@pytest.mark.parametrize("question,answer", [
    ("Who designed the Vorkel X2?", "Ada Quill"),
    ("Who designed Brant Q1?", "Lio Marsh"),
    ("In what year did the Vorkel X2 go on sale?", "2031"),
    ("Where is the Vorkel X2 manufactured?", "Brindle Works"),
    ("When was Helix Labs founded?", "2009"),
])
def test_textqa_known_answers(toolset, question, answer):
    assert toolset["TextQA"](question).answer == answer


@pytest.mark.parametrize("question,answer", [
    ("What is the price of the Vorkel X2 in USD?", "420"),
    ("What is the weight of the Vorkel X2?", "180"),
    ("Which product in the line-up of Helix Labs is the heaviest by weight?", "Cosa Z"),
    ("Which product of Helix Labs has the earliest release year?", "Brant Q1"),
    ("Which is heavier, Vorkel X2 or Brant Q1?", "Brant Q1"),
    ("How many products of Helix Labs are in the tracker category?", "2"),
    ("What is the release year of the Cosa Z?", "2030"),
])
def test_tableqa_known_answers(toolset, question, answer):
    assert toolset["TableQA"](question).answer == answer


@pytest.mark.parametrize("question,answer", [
    ("What colour is the body of the Vorkel X2?", "red"),
    ("What colour is the logo of the Vorkel X2?", "white"),
    ("What colour is the logo of Brant Q1?", "red"),
    ("What pattern does the Brant Q1 have?", "plain"),
    ("Which of Vorkel X2 and Brant Q1 has a striped pattern?", "Vorkel X2"),
    ("Is the Brant Q1 striped?", "no"),
])
def test_imageqa_known_answers(toolset, question, answer):
    assert toolset["ImageQA"](question).answer == answer


def image_qa(documents: list[Document], groups: dict[str, list[str]] | None = None) -> tools.ImageQA:
    return tools.ImageQA(documents, FakeClip(), TYPES, ATTRS, prompts, IMAGE_ATTRS.__getitem__,
                         {"e1": "Vorkel X2", "e2": "Brant Q1"}, groups)


@pytest.mark.parametrize("question", [
    "Which product is red?",  # scored every pictured product: an empty pool before
    "Which of Vorkel X2 and Brant Q1 has a striped pattern?",
    "What colour is the body of the Vorkel X2?",
    "Is the Brant Q1 striped?",
])
def test_imageqa_abstains_on_a_corpus_without_images(question):
    text_only = [dataclasses.replace(d, images=[]) for d in corpus()]
    a = image_qa(text_only)(question)
    assert (a.answer, a.note, a.evidence) == (tools.NO_ANSWER, tools.image.NO_IMAGE, [])
    assert not a.informative  # so the handler falls back to WebSearch


def test_imageqa_abstains_when_no_member_of_the_named_group_is_pictured():
    question = "Which product of Helix Labs is red?"
    a = image_qa(corpus(), groups={"Helix Labs": ["Cosa Z"]})(question)  # Cosa Z has no picture
    assert (a.answer, a.note) == (tools.NO_ANSWER, f"{tools.image.NO_IMAGE} (no pictured product)")
    # with a pictured member the same question is scored as before
    a = image_qa(corpus(), groups={"Helix Labs": ["Vorkel X2", "Cosa Z"]})(question)
    assert (a.answer, a.note, [e.id for e in a.evidence]) == ("Vorkel X2", "colour=red", ["d1-i0"])


def test_websearch_reads_tables_and_tools_say_unknown_when_empty(toolset):
    assert toolset["WebSearch"]("What is the category of Cosa Z?").answer != ""
    assert toolset["TableQA"]("Who designed the moon?").answer == tools.NO_ANSWER


def test_handler_caps_tool_calls_and_falls_back():
    calls = []

    def echo(q):
        calls.append(q)
        return tools.ToolAnswer("TextQA", "x")

    h = tools.ToolHandler({"TextQA": echo, "WebSearch": echo}, max_calls=12)
    answers = [h.call("TextQA", f"q{i}") for i in range(15)]
    assert len(calls) == 12 and len(h.calls) == 12 and h.exhausted
    assert answers[11].answer == "x" and answers[12].answer == tools.NO_ANSWER
    assert "cap" in answers[14].note
    h.reset()
    assert h.call("textqa", "again").answer == "x"  # tool names are case-insensitive
    empty = tools.ToolHandler({"TextQA": lambda q: tools.ToolAnswer("TextQA", tools.NO_ANSWER),
                               "WebSearch": lambda q: tools.ToolAnswer("WebSearch", "found")}, max_calls=12)
    got = empty.call("TextQA", "q")
    assert got.answer == "found" and got.tool == "WebSearch" and len(empty.calls) == 2
    assert tools.ToolHandler({}, max_calls=12).call("Nope", "q").answer == tools.NO_ANSWER


@pytest.mark.parametrize("text,kind,tool,query,answer", [
    ("Who designed the Vorkel X2? (Tool=TextQA)", "call", "TextQA", "Who designed the Vorkel X2?", ""),
    ("(Tool=TableQA) What is the price of X?", "call", "TableQA", "What is the price of X?", ""),
    ("[Answer: Ada Quill]", "answer", "", "", "Ada Quill"),
    ("The answer is [ Answer : 2031 ] done", "answer", "", "", "2031"),
    ("Based on the answers, the final answer is: Ada Quill", "answer", "", "", "Ada Quill"),
    ("I think it is red.", "error", "", "", ""),
    ("What? (Tool=Google)", "error", "", "", ""),
    ("(Tool=TextQA)", "error", "", "", ""),
    # Table 1's turn: the reasoning, then 'Sub-question: ... (Tool=Text)'; the paper's tool names work
    ("To answer this question, I first need to know the designer from the text module. So, I need to ask "
     "this sub-question: Sub-question: Who designed X? (Tool=Text)", "call", "TextQA", "Who designed X?", ""),
    # a plan line is never the query: the call is the line after it ...
    ("Sub-questions: 1) Who designed X? [TextQA] 2) Price of #1? [TableQA]\nWho designed X? (Tool=TextQA)",
     "call", "TextQA", "Who designed X?", ""),
    ("Sub-questions: 1) Who designed X? (Tool=TextQA) 2) Price of #1? (Tool=TableQA)\n"
     "Sub-question: Which product is red? (Tool=ImageQA)", "call", "ImageQA", "Which product is red?", ""),
    # ... and a turn that is only a plan asks its first item (never the whole line)
    ("Sub-questions: 1) Who designed X? (Tool=TextQA) 2) Price of #1? (Tool=TableQA)",
     "call", "TextQA", "Who designed X?", ""),
    ("1. Who designed X? (Tool=Text)\n2. What is the price of #1? (Tool=Table)", "call", "TextQA",
     "Who designed X?", ""),
    ("", "error", "", "", ""),
])
def test_parse_divider_turns(text, kind, tool, query, answer):
    p = strategies.parse_dnc(text)
    assert (p.kind, p.tool, p.query, p.answer) == (kind, tool, query, answer)
    assert not strategies.is_plan_line(p.query)


def test_parse_react_turns():
    p = strategies.parse_react("Thought: need the designer\nAction: (Tool=TextQA) Who designed X?")
    assert (p.kind, p.tool, p.query, p.thought) == ("call", "TextQA", "Who designed X?", "need the designer")
    assert strategies.parse_react("Thought: done\nFinal Answer: Ada Quill").answer == "Ada Quill"
    assert strategies.parse_react("Action: search the web").kind == "error"


class ScriptLLM:
    """Replies from a function of the conversation; counts tokens like LocalLLM."""

    name = "script"

    def __init__(self, reply):
        self.reply = reply

    def generate(self, conversations, max_new_tokens=48, **kw):
        return [Generation(self.reply(c), 10, 5) for c in conversations]


def question() -> Question:
    return Question("q1", "What is the price of the product designed by Ada Quill?", "420", "mmqa",
                    kind="Compose(TableQ,TextQ)", split="train",
                    decomposition=[SubQuestion("Which product was designed by Ada Quill?", "TextQA",
                                               "Vorkel X2"),
                                   SubQuestion("What is the price of the Vorkel X2 in USD?",
                                               "TableQA", "420")])


def test_malformed_divider_output_is_counted_not_raised(toolset):
    traces = strategies.run_agent("dnc", [question()], ScriptLLM(lambda c: "blah blah\nmore"), toolset, "dnc",
                                  max_calls=12, max_new_tokens=48, max_format_errors=1)
    t = traces[0]
    assert t.format_errors == 1 and t.tool_calls == 0 and t.answer == "blah blah"
    assert t.steps[0].format_error
    # by default a malformed turn gets a reminder and the dialogue goes on
    replies = iter(["blah", "Sub-question: Which product was designed by Ada Quill? (Tool=TextQA)", "[Answer: 420]"])
    t = strategies.run_agent("dnc", [question()], ScriptLLM(lambda c: next(replies)), toolset, "dnc",
                             max_calls=12, max_new_tokens=48)[0]
    assert t.format_errors == 1 and t.tool_calls == 1 and t.answer == "420"
    assert t.meta["dialogue"][3]["content"].startswith("Format error:")
    assert t.meta["dialogue"][5]["content"] == "Answer from the TextQA Tool: Vorkel X2"


def test_agent_loop_stops_at_the_tool_call_cap(toolset):
    n = iter(range(100))
    ask = lambda c: f"Who designed Brant Q1 {next(n)}? (Tool=TextQA)"  # noqa: E731
    t = strategies.run_agent("dnc", [question()], ScriptLLM(ask), toolset, "dnc", max_calls=5,
                             max_new_tokens=48)[0]
    assert t.tool_calls == 5 and t.answer == "Lio Marsh"
    # the paper's cap: 12 calls, whatever the model asks
    t = strategies.run_agent("dnc", [question()], ScriptLLM(ask), toolset, "dnc", max_calls=12,
                             max_new_tokens=48)[0]
    assert t.tool_calls == 12 and t.steps[-1].format_error == "tool-call cap of 12 reached"


def test_a_repeated_tool_call_gets_the_earlier_answer_counts_and_goes_on(toolset):

    def once_then_answer(c):
        n = sum(m["role"] == "assistant" for m in c)
        return "Who designed Brant Q1? (Tool=TextQA)" if n < 3 else "[Answer: Lio Marsh]"

    t = strategies.run_agent("dnc", [question()], ScriptLLM(once_then_answer), toolset, "dnc", max_calls=5,
                             max_new_tokens=48)[0]
    assert t.answer == "Lio Marsh" and t.format_errors == 0 and t.meta["repeated_calls"] == 2
    assert t.tool_calls == 3  # the repeats count toward the cap
    tool_turns = [m["content"] for m in t.meta["dialogue"] if m["role"] == "user"][1:]
    assert tool_turns == ["Answer from the TextQA Tool: Lio Marsh"] * 3
    # repeating forever runs into the cap, with the tool called once
    calls = []
    counting = dict(toolset, TextQA=lambda q: (calls.append(q), toolset["TextQA"](q))[1])
    t = strategies.run_agent("dnc", [question()], ScriptLLM(lambda c: "Who designed Brant Q1? (Tool=TextQA)"),
                             counting, "dnc", max_calls=5, max_new_tokens=48)[0]
    assert len(calls) == 1 and t.tool_calls == 5 and t.answer == "Lio Marsh" and t.format_errors == 0


def replay(msgs):
    turns = [m["content"] for m in msgs if m["role"] == "assistant"]
    return ScriptLLM(lambda c: turns[sum(m["role"] == "assistant" for m in c)])


def test_teacher_dialogue_replayed_reaches_gold(toolset):
    q = question()
    gold, answer = teacher.dnc_dialogue(q)
    assert answer == "420"
    assert [m["role"] for m in gold] == ["system", "user", "assistant", "user", "assistant", "user",
                                         "assistant"]
    assert gold[-1]["content"] == "Based on the answers, the final answer is: [Answer: 420]"
    t = strategies.run_agent("dnc", [q], replay(gold), toolset, "dnc", max_calls=12, max_new_tokens=48)[0]
    assert t.answer == "420" and t.tool_calls == 2 and t.format_errors == 0
    assert [s.summary for s in t.steps if s.action == "tool"] == ["Vorkel X2", "420"]
    assert t.meta["dialogue"][1:] == gold[1:]  # the tools answer as the gold observations did
    rows, skipped = teacher.programmatic([q, Question("q2", "x", "y", "mmqa")], seed=0, max_calls=12)
    # without tools mm-ReAct's scripted teacher (no decomposition) gets no answer: nothing kept
    assert [r["strategy"] for r in rows] == ["dnc"]
    assert skipped == {"no gold decomposition": 1, "react: answer fails the gold check": 1}


def test_dnc_teacher_asks_one_subquestion_per_turn_from_the_last_answer():
    msgs, answer = teacher.dnc_dialogue(question())
    asks = [m["content"] for m in msgs if m["role"] == "assistant"][:-1]
    for turn in asks:  # one sub-question and one tool per turn, no plan, no placeholder
        assert turn.count("Sub-question:") == 1 and len(re.findall(r"\(Tool=", turn)) == 1
        assert "Sub-questions" not in turn and "#1" not in turn
        assert not any(strategies.is_plan_line(line) for line in turn.splitlines())
    assert asks[0].startswith("To answer this question, I first need to know this from the Text module.")
    assert "Vorkel X2" not in asks[0]  # the first turn knows no answer yet
    assert asks[1].endswith("Sub-question: What is the price of the Vorkel X2 in USD? (Tool=TableQA)")
    assert "The answer is Vorkel X2" in asks[1]  # built from the tool's reply
    assert msgs[3]["content"] == "Answer from the TextQA Tool: Vorkel X2"
    assert [strategies.parse_dnc(t).query for t in asks] == [
        "Which product was designed by Ada Quill?", "What is the price of the Vorkel X2 in USD?"]
    assert strategies.parse_dnc(msgs[-1]["content"]).answer == "420" == answer
    assert msgs[1]["content"] == "Open Question: " + question().text


def _gold_texts(q):
    return [s.text for s in q.decomposition] + [h.template for h in teacher.hops_of(q)]


def test_react_never_sees_the_gold_decomposition(toolset):
    import random

    q = question()
    seen = []

    def observe(tool, query):
        seen.append((tool, query))
        return "unknown" if tool == "TextQA" else "420"

    msgs, answer = teacher.react_dialogue(q, random.Random(0), observe)
    assert seen == [("TextQA", q.text), ("TableQA", q.text)] and answer == "420"
    text = "\n".join(m["content"] for m in msgs)
    assert not any(g in text for g in _gold_texts(q))
    prompt = "\n".join(m["content"] for m in strategies.react_prompt(q))
    assert not any(g in prompt for g in _gold_texts(q)) and "Sub-question" not in prompt
    assert teacher.few_shot([], 8, "react") == teacher.REACT_SHOTS
    assert not any(g in teacher.REACT_SHOTS for g in _gold_texts(q))
    # the LLM teacher's mm-ReAct dialogue: its instruction, shots and turns hold no decomposition either
    seen_prompts = []

    def agent(c):
        seen_prompts.append(c[0]["content"])
        n = sum(m["role"] == "assistant" for m in c)
        return ["Thought: look it up\nAction: (Tool=TableQA) What is the price of the Vorkel X2 in USD?",
                "Thought: done\nFinal Answer: 420"][n]

    kept, checks = teacher.llm_teacher([q], ScriptLLM(agent), toolset, teacher.few_shot([], 8, "react"),
                                       lambda a, q: a == q.answer, max_calls=12, strategy="react")
    assert checks[0]["kept"] and kept[0]["messages"][0]["content"] == strategies.REACT_INSTRUCTION
    assert all(not any(g in p for g in [s.text for s in q.decomposition[:1]]) for p in seen_prompts)


def test_compose_intersects_and_compares_from_the_path():
    inter = Question("i", "?", "Deshu X1", "mmqa", meta={"path": [{}, {}, {"op": "intersect", "args": [1, 2]}]})
    assert teacher.compose(inter, ["Deshu X1, Lio", "Staemax Mini, Deshu X1"]) == "Deshu X1"
    comp = Question("c", "?", "Lionel 7", "mmqa",
                    meta={"path": [{}, {}, {"op": "compare", "names": ["Lionel 7", "Deshu X1"], "pick": "min"}]})
    assert teacher.compose(comp, ["470", "4290"]) == "Lionel 7"
    assert teacher.compose(comp, ["470", "unknown"]) == tools.NO_ANSWER
    assert teacher.compose(question(), ["Vorkel X2", "420"]) == "420"
    assert [h.template for h in teacher.hops_of(question())] == [
        "Which product was designed by Ada Quill?", "What is the price of the #1 in USD?"]


def test_tool_observer_and_llm_teacher_keep_only_gold_passing_dialogues(toolset):
    q = question()
    checks = []
    rows, skipped = teacher.programmatic([q], seed=0, max_calls=12,
                                         observer=teacher.tool_observer(toolset, max_calls=12), checks=checks)
    assert "dnc" in [r["strategy"] for r in rows]
    assert [c["strategy"] for c in checks] == ["dnc", "react"] and checks[0]["tools"] == ["TextQA", "TableQA"]
    gold, _ = teacher.dnc_dialogue(q)
    shots = teacher.few_shot(rows, 1, "dnc")
    assert "Examples:" in shots and "Divider:" in shots and "Sub-question:" in shots
    assert teacher.few_shot(rows, 1, "dnc", exclude=[q.id]) == "Examples:\n\n"  # a question is never its own shot
    exact = lambda a, q: a == q.answer  # noqa: E731
    kept, llm_checks = teacher.llm_teacher([q], replay(gold), toolset, "Examples: ...", exact, max_calls=12,
                                           name="llm:x")
    assert len(kept) == 1 and llm_checks[0]["kept"] and kept[0]["messages"][0]["content"] == strategies.DNC_INSTRUCTION
    kept, bad = teacher.llm_teacher([q], ScriptLLM(lambda c: "[Answer: 999]"), toolset, "", exact, max_calls=12,
                                    name="llm:x")
    assert kept == [] and bad[0]["kept"] is False and bad[0]["answer"] == "999"
    table = teacher.comparison(checks + llm_checks)
    dnc = table[table.strategy == "dnc"].set_index("teacher")
    assert dnc.loc["llm:x", "kept_share"] == 1.0 and dnc.loc["llm:x", "calls"] == 2.0
    assert dnc.loc["llm:x", "TextQA"] == 0.5 and dnc.loc["scripted", "attempted"] == 1


def test_llm_teacher_drops_a_dialogue_the_call_cap_ended_or_that_repeated_a_call(toolset):
    """A 1.5B asking the same sub-question until the cap ends it 'answers' with the tool's last
    answer, which may pass the gold check; such a dialogue never answers itself and must not be
    kept, nor one that repeated a call and then answered."""
    q = question()
    exact = lambda a, q: a == q.answer  # noqa: E731
    loop = ScriptLLM(lambda c: "Sub-question: What is the price of the Vorkel X2 in USD? (Tool=TableQA)")
    kept, checks = teacher.llm_teacher([q], loop, toolset, "", exact, max_calls=4, name="llm:x")
    assert checks[0]["answer"] == "420" and checks[0]["tool_calls"] == 4  # the tool's answer, at the cap
    assert kept == [] and checks[0]["answered_itself"] is False and checks[0]["kept"] is False

    def twice_then_answer(c):
        n = sum(m["role"] == "assistant" for m in c)
        return "[Answer: 420]" if n == 2 else "Sub-question: What is the price of the Vorkel X2 in USD? (Tool=TableQA)"

    kept, checks = teacher.llm_teacher([q], ScriptLLM(twice_then_answer), toolset, "", exact, max_calls=12)
    assert checks[0]["answered_itself"] and checks[0]["repeated_calls"] == 1 and kept == []


def test_a_kept_turn_is_stored_as_the_loop_read_it_without_the_observations_it_imagined(toolset):
    q = question()
    call = "Sub-question: What is the price of the Vorkel X2 in USD? (Tool=TableQA)"
    rambling = call + "\nTool: Answer from the TableQA Tool: 9999\nDivider: so the answer is 9999"

    final = "Based on the answers, the final answer is: [Answer: 420]"

    def turn(c):
        return rambling if sum(m["role"] == "assistant" for m in c) == 0 else final + "\nUser: thanks"

    kept, checks = teacher.llm_teacher([q], ScriptLLM(turn), toolset, "", lambda a, q: a == q.answer, max_calls=12)
    assert checks[0]["kept"]
    said = [m["content"] for m in kept[0]["messages"] if m["role"] == "assistant"]
    assert said == [call, final]
    assert teacher.as_read("Thought: look\nAction: (Tool=TextQA) Who?\nObservation: me", "react") == \
        "Thought: look\nAction: (Tool=TextQA) Who?"
    assert teacher.as_read("no protocol here", "dnc") == "no protocol here"


def test_conversation_history_is_in_the_prompt():
    q = Question("c1", "When was it released?", "2031", "mmcoqa",
                 history=[Turn("Who designed the Vorkel X2?", "Ada Quill")])
    text = strategies.dnc_prompt(q)[1]["content"]
    assert "Who designed the Vorkel X2?" in text and text.endswith("Question: When was it released?")


def test_tools_answer_calls_every_tool_once(toolset):
    t = strategies.run_tools_answer([question()], ScriptLLM(lambda c: "420\nextra"), toolset, "ta")[0]
    assert t.tool_calls == 4 and t.answer == "420"
    assert [s.target for s in t.steps[:4]] == list(tools.TOOLS)
    assert all(s.query == question().text for s in t.steps[:4])  # the original question to every tool
    prompt = t.meta["dialogue"][1]["content"]
    assert prompt.startswith("Question: " + question().text) and "Sub-question" not in prompt


def test_systems_wrap_the_strategies(toolset):
    q = question()
    dnc = DnC(ScriptLLM(lambda c: "[Answer: 420]"), toolset, "dnc__x__ft", max_calls=3, max_new_tokens=8)
    react = ReAct(ScriptLLM(lambda c: "Thought: ok\nFinal Answer: 420"), toolset, max_calls=12, max_new_tokens=48)
    fused = ToolsAnswer(ScriptLLM(lambda c: "420"), toolset, "ta")
    assert [t.answer for t in dnc.answer([q])] == ["420"] and dnc.name == "dnc__x__ft"
    assert react.name == "react" and react.answer([q])[0].meta["strategy"] == "react"
    t = fused.answer([q])[0]
    assert t.system == "ta" and t.tool_calls == 4
    from mmrag.systems import System, system_class

    assert system_class("dnc") is DnC and system_class("react") is ReAct
    assert system_class("tools_answer") is ToolsAnswer
    assert all(isinstance(s, System) for s in (dnc, react, fused))


def test_teacher_forced_check_scores_each_turn_against_the_teacher():
    from mmrag.toolagent import heldout

    rows, _ = teacher.programmatic([question()], seed=0, max_calls=12)
    dnc = [r for r in rows if r["strategy"] == "dnc"]
    turns = [m["content"] for m in dnc[0]["messages"] if m["role"] == "assistant"]
    perfect = ScriptLLM(lambda c: turns[sum(m["role"] == "assistant" for m in c)])
    got = heldout.teacher_forced(dnc, perfect, "dnc", max_new_tokens=32)
    assert len(got) == 3 and got.exact.all() and got.match.all() and got.final.tolist() == [False, False, True]
    wrong = heldout.teacher_forced(dnc, ScriptLLM(lambda c: "Who made it? (Tool=TextQA)"), "dnc", max_new_tokens=32)
    assert not wrong.match.any() and wrong.tool.tolist() == [True, False, False] and wrong.format_ok.all()
    table = heldout.summary(got.assign(llm="x", variant="ft", seconds=1.0))
    row = table.loc[("x", "ft", "dnc")]
    assert row.answer_EM == 1.0 and row.call_tool == 1.0 and row.turns == 3 and row.dialogues == 1


def test_a_one_slot_engine_runs_each_dialogue_to_its_end_before_the_next(toolset):
    """The next turn of a dialogue is an append to the slot's cached prompt only if no other
    dialogue ran in that slot in between; the replies are those of the stepped-together run."""
    q = question()
    turns = [m["content"] for m in teacher.dnc_dialogue(q)[0] if m["role"] == "assistant"]

    class OneSlot(ScriptLLM):
        dialogue_width = 1

        def __init__(self, reply):
            super().__init__(reply)
            self.sizes: list[int] = []

        def generate(self, conversations, **kw):
            self.sizes.append(len(conversations))
            return super().generate(conversations, **kw)

    reply = lambda c: turns[sum(m["role"] == "assistant" for m in c)]  # noqa: E731
    qs = [q, dataclasses.replace(q, id="q2")]
    one = OneSlot(reply)
    seq = strategies.run_agent("dnc", qs, one, toolset, "dnc", max_calls=12, max_new_tokens=48)
    assert one.sizes == [1] * 6  # 3 turns of q1, then 3 of q2
    together = strategies.run_agent("dnc", qs, ScriptLLM(reply), toolset, "dnc", max_calls=12, max_new_tokens=48)
    assert [(t.answer, t.tool_calls, t.meta["dialogue"]) for t in seq] == \
        [(t.answer, t.tool_calls, t.meta["dialogue"]) for t in together]


def test_the_fidelity_table_loads_and_names_existing_code():
    from pathlib import Path

    from mmrag.evaluate import fidelity_table

    df = fidelity_table.load(Path(strategies.__file__).with_name("fidelity.yaml"))
    assert fidelity_table.check_implementations(df) == []
    assert {"same", "deviation"} == set(df.status)
    cap = df[df.component == "tool-call cap"].iloc[0]
    assert cap.status == "same" and cap.paper_value == "12"
