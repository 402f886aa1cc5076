"""DnC's toolagent_eval on a user's text-only question set (HotpotQA- or MuSiQue-like): no image in
the corpus, no gold decomposition, every question in the test split.

ImageQA is asked questions that name visual values (the ones that used to crash it), through
ToolsAnswer and through a scripted DnC agent; the most-frequent-answer baseline is taken
leave-one-out when there is no train split; the per-hop tool table says a question has no gold hops.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from test_toolagent import BagEncoder, ScriptLLM

from mmrag import config
from mmrag.io import write_jsonl
from mmrag.schema import Document, Question, Section, Step, SubQuestion, Trace
from mmrag.stages import toolagent_eval
from mmrag.toolagent import strategies, tools
from mmrag.toolagent.system import ToolsAnswer
from mmrag.toolagent.tools.image import NO_IMAGE
from mmrag.world import render

PAGES = [("Mara Quell", "Mara Quell is a singer born in Tarsine. She wears a black hat on stage."),
         ("Tarsine", "Tarsine is a mountain village known for its glass. Its church has a red roof."),
         ("Helix Corp", "Helix Corp is a company founded by Mara Quell in 1998.")]
# Each names a visual value (black, red, two) and a kind cue (who, building, product), so ImageQA
# goes on to score every pictured entity of that kind: none, on this corpus.
VISUAL = ["Who is the singer that wears a black hat on stage?",
          "Which building in Tarsine has a red roof?",
          "Which product has two logos?"]


class NoImagesClip:
    """A CLIP that must never be asked to look: the corpus has nothing to show it."""

    def encode_images(self, images):
        raise AssertionError(f"ImageQA encoded {len(images)} images of a text-only corpus")

    def encode_texts(self, texts):
        raise AssertionError("ImageQA scored prompts without an image to score them against")


def documents() -> list[Document]:
    return [Document(f"d{i}", title, sections=[Section(f"d{i}-s0", f"d{i}", "Intro", text)])
            for i, (title, text) in enumerate(PAGES)]


@pytest.fixture(scope="module")
def text_tools():
    """The four tools as load_tools builds them for a folder without entities.jsonl."""
    docs = documents()
    return tools.build_tools(docs, BagEncoder(), {d.title: "entity" for d in docs}, clip=NoImagesClip(),
                             load_image=str, attributes=render.ATTRIBUTES, prompts=render.prompts)


def question(i: int, text: str, answer: str = "Mara Quell", split: str = "test") -> Question:
    return Question(f"q{i}", text, answer, "folder", kind="bridge", split=split)


@pytest.mark.parametrize("text", VISUAL)
def test_imageqa_abstains_on_visual_questions_over_a_text_only_corpus(text_tools, text):
    a = text_tools["ImageQA"](text)
    assert (a.answer, a.note, a.evidence) == (tools.NO_ANSWER, NO_IMAGE, [])


def test_tools_answer_reads_imageqa_abstaining_on_every_question(text_tools):
    qs = [question(i, t) for i, t in enumerate(VISUAL)]
    traces = ToolsAnswer(ScriptLLM(lambda c: "Mara Quell"), text_tools, "ta").answer(qs)
    assert [t.answer for t in traces] == ["Mara Quell"] * 3
    for t in traces:
        image_step = next(s for s in t.steps if s.target == "ImageQA")
        assert image_step.summary == tools.NO_ANSWER and image_step.evidence == []
        assert f"ImageQA: {tools.NO_ANSWER}" in t.meta["dialogue"][1]["content"]  # the LLM reads it


def test_a_dnc_call_to_imageqa_falls_back_to_websearch(text_tools):
    replies = iter(["Sub-question: Who wears a black hat on stage? (Tool=ImageQA)", "[Answer: Mara Quell]"])
    t = strategies.run_agent("dnc", [question(0, VISUAL[0])], ScriptLLM(lambda c: next(replies)), text_tools,
                             "dnc", max_calls=4, max_new_tokens=48)[0]
    assert t.answer == "Mara Quell" and t.format_errors == 0
    assert t.tool_calls == 2  # ImageQA's abstention, then the fallback, both count toward the cap
    assert t.meta["dialogue"][3]["content"].startswith("Answer from the WebSearch Tool: ")


# --------------------------------------------------------------------------- the most frequent answer
def answers_set(answers: list[str], split: str = "test") -> list[Question]:
    return [question(i, f"question {i}?", a, split) for i, a in enumerate(answers)]


def leave_one_out_longhand(qs: list[Question]) -> list[str]:
    """The definition, one count per question: the other questions' most frequent answer."""
    out = []
    for q in qs:
        counts = Counter(o.answer for o in qs if o.id != q.id and o.answer)
        out.append(min(counts, key=lambda a: (-counts[a], a)) if counts else "")
    return out


@pytest.mark.parametrize("answers,expected", [
    (["a", "a", "b"], ["a", "a", "a"]),  # an 'a' sees a:1, b:1 (tie: alphabetical); 'b' sees a:2
    (["a", "a", "b", "b", "c"], ["b", "b", "a", "a", "a"]),  # a balanced set: the prior never wins
    (["b", "b", "b", "a"], ["b", "b", "b", "b"]),
    (["x"], [""]),  # no other question
])
def test_leave_one_out_gives_each_question_the_others_most_frequent_answer(answers, expected):
    qs = answers_set(answers)
    assert toolagent_eval.leave_one_out_answers(qs, qs) == expected


@pytest.mark.parametrize("seed", range(5))
def test_leave_one_out_matches_its_definition(seed):
    rng = random.Random(seed)
    qs = answers_set([rng.choice("abcde") if rng.random() > 0.1 else "" for _ in range(30)])
    assert toolagent_eval.leave_one_out_answers(qs, qs) == leave_one_out_longhand(qs)
    assert toolagent_eval.leave_one_out_answers(qs, qs[:7]) == leave_one_out_longhand(qs)[:7]


def test_the_prior_is_taken_outside_the_split_when_a_train_split_exists():
    qs = answers_set(["yes", "yes", "no"], "train") + answers_set(["no", "no"])
    qs = [Question(f"q{i}", q.text, q.answer, q.dataset, split=q.split) for i, q in enumerate(qs)]
    prior = toolagent_eval.most_frequent_prior(qs, "test")
    assert (prior.how, prior.answer) == ("outside split", "yes")
    assert prior.description == "most frequent answer outside 'test': 'yes'"


def test_the_prior_without_a_train_split_is_leave_one_out_or_not_applicable():
    assert toolagent_eval.most_frequent_prior(answers_set(["a", "a", "b"]), "test").how == "leave-one-out"
    for answers in (["a", "b", "c"], ["a"], []):  # no answer repeats: no prior to speak of
        prior = toolagent_eval.most_frequent_prior(answers_set(answers), "test")
        assert prior.how == "not applicable" and prior.description.startswith("not applicable: ")


@pytest.fixture()
def corpus_dir(tmp_path: Path) -> Path:
    write_jsonl(tmp_path / "documents.jsonl", [d.to_dict() for d in documents()])
    return tmp_path


def prior_rows(table):
    return table[table.system.str.startswith("most frequent answer")].set_index("questions")


def test_baselines_with_a_train_split_keep_their_columns_and_single_answer(corpus_dir):
    qs = [question(0, "q?", "Tarsine", "train"), question(1, "q?", "Tarsine", "train"),
          question(2, "q?", "Tarsine"), question(3, "q?", "Mara Quell"), question(4, "q?", "Tarsine")]
    table = toolagent_eval.baseline_table({}, qs, qs[2:4], "test", corpus_dir)
    assert list(table.columns) == ["system", "questions", "n", "k", "EM", "F1", "answer_in_context"]
    rows = prior_rows(table)
    assert list(rows.system) == ["most frequent answer"] * 2
    assert (rows.loc["sample", "EM"], rows.loc["all test", "EM"]) == (0.5, round(2 / 3, 4))


def test_baselines_without_a_train_split_score_leave_one_out_and_say_so(corpus_dir):
    qs = [question(i, "q?", a) for i, a in enumerate(["Helix Corp", "Helix Corp", "Tarsine"])]
    rows = prior_rows(toolagent_eval.baseline_table({}, qs, qs[2:], "test", corpus_dir))
    assert list(rows.system) == ["most frequent answer (leave-one-out)"] * 2
    # leave-one-out gives all three 'Helix Corp' (the [a, a, b] case above)
    assert (rows.loc["sample", "EM"], rows.loc["all test", "EM"]) == (0.0, round(2 / 3, 4))
    assert rows.loc["all test", "note"].startswith("leave-one-out: ")


def test_baselines_without_any_repeated_answer_report_a_null_row(corpus_dir):
    qs = [question(i, "q?", a) for i, a in enumerate(["Tarsine", "Helix Corp", "Mara Quell"])]
    table = toolagent_eval.baseline_table({}, qs, qs[:2], "test", corpus_dir)
    rows = prior_rows(table)
    assert list(rows.system) == ["most frequent answer"] * 2 and rows.EM.isna().all() and rows.F1.isna().all()
    assert rows.note.str.startswith("not applicable: ").all()
    assert table[~table.system.str.startswith("most frequent")].note.isna().all()  # BM25 rows have none


# --------------------------------------------------------------------------- the rest of run()'s tables
def test_calls_by_modality_says_a_question_has_no_gold_hops():
    plain = question(0, VISUAL[0])
    decomposed = Question("q1", "x?", "y", "folder", decomposition=[SubQuestion("a?", "TextQA", "b")])
    calls = [Step(action="tool", target="ImageQA"), Step(action="tool", target="WebSearch")]
    traces = {("dnc__m__base", "qa"): [Trace("q0", "dnc__m__base", "", steps=calls),
                                         Trace("q1", "dnc__m__base", "", steps=calls)]}
    table = toolagent_eval.calls_by_modality(traces, {"q0": plain, "q1": decomposed}).reset_index()
    got = {(r.question_set, r.gold_hop_tool): (r.ImageQA, r.WebSearch)
           for r in table.rename(columns={"set": "question_set"}).itertuples()}
    assert got == {("qa", "no gold hops"): (1, 1), ("qa", "TextQA"): (1, 0), ("qa", "beyond gold hops"): (0, 1)}


def test_a_conversational_set_without_test_questions_is_left_out():
    cfg = config.load().toolagent_eval
    sets = {cfg.question_set: answers_set(["a", "b"]), cfg.conv_set: answers_set(["c"], "train")}
    test = toolagent_eval.test_questions(sets, cfg, seed=0)
    assert list(test) == [cfg.question_set]
