"""Teacher dialogues for fine-tuning: the paper's LLM teacher, and a scripted fallback per strategy.

The paper's teacher is 8-shot ChatGPT talking to the real tools, its dialogues kept when they
reach the answer. :func:`llm_teacher` does the same for every strategy alike with a ladder model
of the generation service (the default profile: Qwen2.5-Coder-1.5B, the strongest one that
runs on 2 cores): DnC with scripted shots in the paper's Table 1 format, mm-ReAct with
hand-written shots (:data:`REACT_SHOTS`, about entities that are not in the world) and the
tool descriptions only. A dialogue is kept when the teacher itself answered (not the tool-call
cap ending it), with no format error and no repeated call, and its answer passes the gold check;
each kept turn is stored as the loop read it (:func:`as_read`), without what the model wrote after
its call (usually tool answers it imagined), so that a student never learns to write them.

The scripted teachers fill in the questions the LLM teacher does not attempt (the time budget,
``toolagent_data.teacher_questions``), and are the whole teacher in the smoke profile:

- **DnC** (:func:`dnc_dialogue`) asks *one* unimodal sub-question per turn, written with the
  answer it just got (Table 1: 'Sub-question: ... (Tool=TextQA)', 'Answer from the TextQA Tool:
  ...'), and ends with 'Based on the answers, the final answer is: [Answer: ...]'. It is
  scripted from the gold decomposition (the paper's DnC shots are hand-made decompositions too).
- **mm-ReAct** (:func:`react_dialogue`) never reads the gold decomposition: it asks the tools
  the question itself, one tool per step in the order of the tool descriptions, and answers
  with the first informative observation; kept only when that is right (mostly single-hop
  questions) -- what vanilla mm-ReAct does with the tool descriptions alone.

Both read their observations from an ``observe(tool, query)`` callable: the gold answers of the
decomposition (DnC only: the default without tools) or the real tools.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mmrag.schema import Question
from mmrag.toolagent.strategies import (
    MODULE,
    context_block,
    dnc_prompt,
    observation,
    parse_dnc,
    parse_react,
    react_prompt,
    run_agent,
)
from mmrag.toolagent.tools import NO_ANSWER, ToolHandler

Observe = Callable[[str, str], str]  # (tool, query) -> the observation's text

# mm-ReAct's hand-written shots: entities that are not in the generated world, the tool descriptions'
# format only; the agent reasons from each observation (the paper's shots are manually created).
REACT_SHOTS = """Examples:

User: Question: Who founded the company that makes the Orrin K7 kettle?
Agent: Thought: I should find out which company makes the Orrin K7 kettle.
Action: (Tool=TextQA) Which company makes the Orrin K7 kettle?
Tool: Observation: Talvane Works
Agent: Thought: The kettle is made by Talvane Works. Now I need its founder.
Action: (Tool=TextQA) Who founded Talvane Works?
Tool: Observation: Mira Casell
Agent: Thought: That answers the question.
Final Answer: Mira Casell

User: Question: What colour is the roof of the museum in Pell Harbour?
Agent: Thought: I need the name of the museum first.
Action: (Tool=TextQA) Which museum is in Pell Harbour?
Tool: Observation: Dunmore Museum
Agent: Thought: A roof colour is seen in a picture of the Dunmore Museum.
Action: (Tool=ImageQA) What colour is the roof of the Dunmore Museum?
Tool: Observation: green
Agent: Thought: I have everything I need.
Final Answer: green

User: Question: Which is heavier, the Sarn 2 or the Sarn 3?
Agent: Thought: Weights are listed in tables.
Action: (Tool=TableQA) What is the weight of the Sarn 2?
Tool: Observation: 210
Agent: Thought: The Sarn 2 weighs 210. I also need the Sarn 3.
Action: (Tool=TableQA) What is the weight of the Sarn 3?
Tool: Observation: 340
Agent: Thought: 340 is more than 210, so the Sarn 3 is heavier.
Final Answer: Sarn 3"""

REACT_TOOL_ORDER = ("TextQA", "TableQA", "ImageQA", "WebSearch")  # as the tool descriptions list them


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:1].isupper() and not text[1:2].isupper() else text


# --------------------------------------------------------------------------- the question's path
@dataclass(frozen=True)
class Hop:
    """One unimodal sub-question with ``#k`` where it needs the answer of hop k (1-based)."""

    tool: str
    template: str
    needs: tuple[int, ...]  # earlier hops this one reads (empty: independent)


def hops_of(q: Question) -> list[Hop]:
    """The decomposition as templates: an earlier answer quoted in a later sub-question becomes #k."""
    hops: list[Hop] = []
    for i, sub in enumerate(q.decomposition):
        text, needs = sub.text, []
        for k, prev in enumerate(q.decomposition[:i], start=1):
            a = prev.answer.strip()
            if a and a != NO_ANSWER and re.search(rf"(?<!\w){re.escape(a)}(?!\w)", text):
                text = re.sub(rf"(?<!\w){re.escape(a)}(?!\w)", f"#{k}", text)
                needs.append(k)
        hops.append(Hop(sub.tool, text, tuple(needs)))
    return hops


def fill(template: str, answers: Sequence[str]) -> str:
    """A hop's query with #k replaced by the k-th observation."""
    return re.sub(r"#(\d+)", lambda m: answers[int(m.group(1)) - 1]
                  if int(m.group(1)) <= len(answers) else m.group(0), template)


def _items(text: str) -> list[str]:
    return [x.strip() for x in re.split(r",|\band\b", text) if x.strip()]


def _number(text: str) -> float | None:
    m = re.search(r"-?\d+(?:\.\d+)?", text.replace(",", ""))
    return float(m.group(0)) if m else None


def compose(q: Question, answers: Sequence[str]) -> str:
    """The final answer from the hops' observations, by the last operation of the question's path.

    compose: the last observation; intersect: the items both lists share; compare: the name
    whose value is the smallest / largest. Without a path, the last observation.
    """
    path = (q.meta or {}).get("path") or []
    op = path[-1] if path else {}
    if op.get("op") == "intersect" and len(answers) >= 2:
        first = _items(answers[0])
        rest = [{x.lower() for x in _items(a)} for a in answers[1:]]
        both = [x for x in first if all(x.lower() in r for r in rest)]
        return ", ".join(both) if both else NO_ANSWER
    if op.get("op") == "compare" and len(answers) >= 2 and op.get("names"):
        values = [_number(a) for a in answers[:len(op["names"])]]
        if any(v is None for v in values):
            return NO_ANSWER
        pick = min if op.get("pick") == "min" else max
        return op["names"][values.index(pick(values))]
    return answers[-1] if answers else NO_ANSWER


def gold_observer(q: Question) -> Observe:
    """Observations from the gold decomposition: the answer of the sub-question asked, else 'unknown'."""
    by_text = {s.text.strip().lower(): s.answer for s in q.decomposition}

    def observe(tool: str, query: str) -> str:
        return by_text.get(query.strip().lower(), NO_ANSWER)

    return observe


def tool_observer(tools: dict[str, Any], max_calls: int) -> Callable[[], Observe]:
    """A factory of observers over the real tools (one handler, with its WebSearch fallback and
    call cap, per dialogue: exactly what the agent sees at evaluation)."""

    def new() -> Observe:
        handler = ToolHandler(tools, max_calls=max_calls)
        return lambda tool, query: handler.call(tool, query).answer

    return new


# --------------------------------------------------------------------------- the scripted teachers
def dnc_dialogue(q: Question, observe: Observe | None = None) -> tuple[list[dict[str, str]], str]:
    """(messages, composed answer): one sub-question per turn, written with the answers so far
    (the paper's Table 1), then the final answer."""
    observe = observe or gold_observer(q)
    hops = hops_of(q)
    msgs = dnc_prompt(q)
    answers: list[str] = []
    for i, h in enumerate(hops):
        ask = fill(h.template, answers)
        module = MODULE.get(h.tool, h.tool)
        if i == 0:
            lead = f"To answer this question, I first need to know this from the {module} module."
        elif h.needs:
            lead = (f"The answer is {answers[h.needs[-1] - 1]}. Now, I need to know this from the "
                    f"{module} module.")
        else:
            lead = f"Now, I also need to know this from the {module} module."
        msgs.append({"role": "assistant", "content": f"{lead} So, I need to ask this sub-question: "
                                                     f"Sub-question: {ask} (Tool={h.tool})"})
        answers.append(observe(h.tool, ask))
        msgs.append({"role": "user", "content": observation("dnc", h.tool, answers[-1])})
    final = compose(q, answers)
    msgs.append({"role": "assistant", "content": f"Based on the answers, the final answer is: [Answer: {final}]"})
    return msgs, final


def react_dialogue(q: Question, rng: random.Random,
                   observe: Observe | None = None) -> tuple[list[dict[str, str]], str]:
    """(messages, final answer): vanilla mm-ReAct from the tool descriptions alone, without the
    gold decomposition: it asks the question itself, one tool per step (the descriptions'
    order), and answers with the first informative observation."""
    observe = observe or (lambda tool, query: NO_ANSWER)
    msgs = react_prompt(q)
    query = context_block(q).replace("Conversation so far:\n", "") if q.history else q.text
    seen = NO_ANSWER
    for i, tool in enumerate(REACT_TOOL_ORDER):
        thought = (f"I will ask {tool} the question." if i == 0
                   else f"{REACT_TOOL_ORDER[i - 1]} found nothing. I will try {tool}.")
        msgs.append({"role": "assistant", "content": f"Thought: {thought}\nAction: (Tool={tool}) {query}"})
        seen = observe(tool, query)
        msgs.append({"role": "user", "content": observation("react", tool, seen)})
        if seen != NO_ANSWER:
            break
    end = rng.choice(("The observation answers the question.", "That answers the question."))
    msgs.append({"role": "assistant", "content": f"Thought: {end}\nFinal Answer: {seen}"})
    return msgs, seen


def usable(q: Question, max_calls: int) -> str | None:
    """Why a question cannot give a teacher dialogue (None when it can)."""
    if not q.decomposition:
        return "no gold decomposition"
    if len(q.decomposition) > max_calls:
        return f"more than {max_calls} sub-questions"
    if any(not s.text.strip() or not s.tool for s in q.decomposition):
        return "empty sub-question or tool"
    return None


def _tools_of(msgs: Sequence[dict[str, str]], strategy: str) -> list[str]:
    """The tools a dialogue called, in order."""
    from mmrag.toolagent.strategies import parse_dnc, parse_react

    parse = parse_dnc if strategy == "dnc" else parse_react
    return [p.tool for p in (parse(m["content"]) for m in msgs if m["role"] == "assistant") if p.kind == "call"]


def programmatic(questions: Sequence[Question], *, seed: int, max_calls: int,
                 correct: Callable[[str, Question], bool] | None = None,
                 observer: Callable[[], Observe] | None = None,
                 react_observer: Callable[[], Observe] | None = None,
                 checks: list[dict[str, Any]] | None = None,
                 ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(rows, skipped reasons): each strategy's scripted dialogue per usable question.

    ``observer`` makes a fresh observer per DnC dialogue (default: the gold answers);
    ``react_observer`` one per mm-ReAct dialogue (default: ``observer`` when given; mm-ReAct
    asks the question itself, so the gold answers of sub-questions cannot answer it: without
    tools it keeps nothing). ``correct`` is the gold check; a dialogue whose answer fails it is
    skipped (counted per strategy). ``checks`` (a list) receives one row per attempted
    dialogue: kept, tool calls and tools, for the teacher comparison.
    """
    rng = random.Random(seed)
    correct = correct or (lambda a, q: a.strip().lower() == q.answer.strip().lower())
    react_observer = react_observer or observer
    rows, skipped = [], {}

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    for q in questions:
        why = usable(q, max_calls)
        if why:
            skip(why)
            continue
        base = {"question_id": q.id, "dataset": q.dataset, "kind": q.kind, "split": q.split,
                "hops": len(q.decomposition), "teacher": "programmatic"}
        dnc, dnc_answer = dnc_dialogue(q, observer() if observer else None)
        react, react_answer = react_dialogue(q, rng, react_observer() if react_observer else None)
        for strategy, msgs, answer in (("dnc", dnc, dnc_answer), ("react", react, react_answer)):
            ok = correct(answer, q)
            if checks is not None:
                used = _tools_of(msgs, strategy)
                checks.append({"question_id": q.id, "strategy": strategy, "teacher": "scripted",
                               "kind": q.kind, "hops": len(q.decomposition), "split": q.split,
                               "answer": answer, "gold": q.answer, "format_errors": 0,
                               "tool_calls": len(used), "tools": used, "kept": ok})
            if ok:
                rows.append({**base, "strategy": strategy, "messages": msgs})
            else:
                skip(f"{strategy}: answer fails the gold check")
    return rows, skipped


def few_shot(rows: Sequence[dict[str, Any]], n: int, strategy: str = "dnc",
             exclude: Sequence[str] = ()) -> str:
    """The LLM teacher's shots. DnC: n scripted dialogues (Table 1 format) of questions not in
    ``exclude``, one per question kind first. mm-ReAct: the hand-written :data:`REACT_SHOTS`
    (its scripted dialogues are not what an mm-ReAct agent should imitate)."""
    if strategy == "react":
        return REACT_SHOTS
    skip = set(exclude)
    pool = [r for r in rows if r["strategy"] == strategy and r["question_id"] not in skip
            and r.get("teacher", "programmatic") == "programmatic"]
    seen, picked = set(), []
    for r in pool:
        if r["kind"] not in seen and len(picked) < n:
            seen.add(r["kind"])
            picked.append(r)
    picked += [r for r in pool if r not in picked][:max(0, n - len(picked))]
    out = []
    for r in picked:
        turns = [m for m in r["messages"] if m["role"] != "system"]
        out.append("\n".join(f"{'Divider' if m['role'] == 'assistant' else 'User' if i == 0 else 'Tool'}: "
                             f"{m['content']}" for i, m in enumerate(turns)))
    return "Examples:\n\n" + "\n\n".join(out)


def as_read(text: str, strategy: str) -> str:
    """A teacher's turn cut after the line the loop acted on: the shortest leading run of lines that
    the strategy's parser reads exactly as it reads the whole turn (the same call, or the same
    answer). A 1.5B often goes on after its call, writing the tool's answer and its next turns
    itself; those lines were never read, and a student trained on them would learn to invent
    observations. A turn the parser cannot read is kept whole."""
    parse = parse_dnc if strategy == "dnc" else parse_react
    whole = parse(text)
    if whole.kind == "error":
        return text
    lines = text.splitlines()
    for i in range(1, len(lines) + 1):
        head = "\n".join(lines[:i])
        p = parse(head)
        if (p.kind, p.tool, p.query, p.answer) == (whole.kind, whole.tool, whole.query, whole.answer):
            return head.rstrip()
    return text


def answered_itself(steps: Sequence[Any]) -> bool:
    """Whether a dialogue ended with the model's own answer, not the tool-call cap or a third
    format error (both also end a dialogue, with the last tool answer or a stray line)."""
    return bool(steps) and steps[-1].action == "answer" and not steps[-1].format_error


def llm_teacher(questions: Sequence[Question], chat: Any, tools: dict[str, Any], shots: str,
                correct: Callable[[str, Question], bool], *, max_calls: int, strategy: str = "dnc",
                max_new_tokens: int = 96, name: str = "llm") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(kept rows, one check row per question): a strategy's dialogues written by an LLM with the
    real tools, kept when the LLM answered itself with no format error and no repeated call, and
    the answer passes the gold check; each kept assistant turn as the loop read it (:func:`as_read`).

    The LLM sees the strategy's own instruction and the shots, nothing else (mm-ReAct: the tool
    descriptions and hand-written shots, never a decomposition). All questions go to
    ``chat.generate`` together each round (the llama.cpp engine runs them over its slots).
    """
    traces = run_agent(strategy, list(questions), chat, tools, system="teacher", max_calls=max_calls,
                       max_new_tokens=max_new_tokens, examples=shots)
    prompt = dnc_prompt if strategy == "dnc" else react_prompt
    rows, checks = [], []
    for q, t in zip(questions, traces):
        itself, repeats = answered_itself(t.steps), int(t.meta.get("repeated_calls", 0))
        ok = t.format_errors == 0 and itself and not repeats and correct(t.answer, q)
        used = [s.target for s in t.steps if s.action == "tool"]
        checks.append({"question_id": q.id, "strategy": strategy, "teacher": name, "kind": q.kind,
                       "hops": len(q.decomposition), "split": q.split, "answer": t.answer, "gold": q.answer,
                       "format_errors": t.format_errors, "answered_itself": itself, "repeated_calls": repeats,
                       "tool_calls": t.tool_calls, "tools": used,
                       "kept": ok, "tokens_out": t.tokens_out, "seconds": t.seconds})
        if ok:
            msgs = [{**m, "content": as_read(m["content"], strategy)} if m["role"] == "assistant" else m
                    for m in t.meta["dialogue"]]
            msgs[0] = prompt(q)[0]  # train on the plain instruction, not the shots
            rows.append({"question_id": q.id, "dataset": q.dataset, "kind": q.kind, "split": q.split,
                         "hops": len(q.decomposition), "teacher": name, "strategy": strategy,
                         "messages": msgs})
    return rows, checks


def comparison(checks: Sequence[dict[str, Any]]) -> Any:
    """The teachers side by side on the questions both attempted, per strategy: attempted, kept
    share, mean tool calls (all / kept dialogues) and the tools called (share of calls)."""
    import pandas as pd

    cols = ["strategy", "teacher", "attempted", "kept", "kept_share", "calls", "calls_kept",
            "TextQA", "TableQA", "ImageQA", "WebSearch"]
    if not checks:
        return pd.DataFrame(columns=cols)
    d = pd.DataFrame(checks)
    both = set.intersection(*[set(g.question_id) for _, g in d.groupby("teacher")])
    d = d[d.question_id.isin(both)]
    out = []
    for (strategy, who), g in d.groupby(["strategy", "teacher"]):
        calls = [t for ts in g.tools for t in ts]
        kept = g[g.kept.astype(bool)]
        out.append({"strategy": strategy, "teacher": who, "attempted": len(g), "kept": int(kept.shape[0]),
                    "kept_share": round(len(kept) / len(g), 3) if len(g) else None,
                    "calls": round(float(g.tool_calls.mean()), 2),
                    "calls_kept": round(float(kept.tool_calls.mean()), 2) if len(kept) else None,
                    **{t: round(calls.count(t) / len(calls), 3) if calls else 0.0
                       for t in ("TextQA", "TableQA", "ImageQA", "WebSearch")}})
    return pd.DataFrame(out, columns=cols)
