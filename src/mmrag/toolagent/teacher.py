"""Teacher dialogues for fine-tuning the divider: one teacher per strategy, programmatic or an LLM.

The paper's teacher is 8-shot ChatGPT talking to the real tools, its dialogues kept when the
final answer is right, and each strategy is trained on its own teacher's dialogues. Here the
two programmatic teachers behave as their strategies do:

- **DnC** (:func:`dnc_dialogue`) *divides first*: its first turn lists every unimodal
  sub-question with its tool (a later one refers to an earlier answer as ``#1``), then it
  *conquers* them one per turn, filling ``#k`` from the answers, and finally *composes*
  (``#1 = …; #2 = …`` and ``[Answer: …]``).
- **mm-ReAct** (:func:`react_dialogue`) has no plan: each turn is a thought about the last
  observation, one tool call whose query is built from that observation, and it decides
  after every observation whether it can answer (an empty observation makes it retry with
  WebSearch).

Both read their observations from an ``observe(tool, query)`` callable: the gold answers of the
decomposition (default, no model needed) or the real tools. A dialogue is kept only when its
composed answer matches the gold (the paper's filter), so a tool mistake never becomes a
training target. The LLM teacher (:func:`llm_teacher`) runs a strategy's real loop with any
chat model of the generation service and few-shot programmatic examples, with the same filter.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mmrag.schema import Question
from mmrag.toolagent.strategies import dnc_prompt, react_prompt, run_agent
from mmrag.toolagent.tools import NO_ANSWER, ToolHandler

Observe = Callable[[str, str], str]  # (tool, query) -> the observation's text

_THOUGHTS_FIRST = ("I need to find out: {q}", "First I should look up: {q}",
                   "To answer, I first need this: {q}")
_THOUGHTS_NEXT = ("The observation says {a}. Next I need: {q}", "Now I know it is {a}. I still need: {q}",
                  "So it is {a}. With that, I can ask: {q}")
_THOUGHTS_OTHER = ("Noted: {a}. I also need: {q}", "I have {a}. Now the other part: {q}")
_THOUGHTS_RETRY = ("{tool} found nothing. I will search more widely: {q}",)
_THOUGHTS_END = ("The observation answers the question.", "That answers the question.",
                 "I have everything I need.")
_THOUGHTS_COMBINE = ("Combining {obs}, the answer is {a}.", "From {obs}, I can answer: {a}.")


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


# --------------------------------------------------------------------------- the two teachers
def dnc_dialogue(q: Question, observe: Observe | None = None) -> tuple[list[dict[str, str]], str]:
    """(messages, composed answer): divide (the whole plan first), conquer each hop, compose."""
    observe = observe or gold_observer(q)
    hops = hops_of(q)
    msgs = dnc_prompt(q)
    plan = "Sub-questions: " + " ".join(f"{i}) {h.template} [{h.tool}]" for i, h in enumerate(hops, 1))
    answers: list[str] = []
    for i, h in enumerate(hops):
        ask = f"{fill(h.template, answers)} (Tool={h.tool})"
        msgs.append({"role": "assistant", "content": f"{plan}\n{ask}" if i == 0 else ask})
        answers.append(observe(h.tool, fill(h.template, answers)))
        msgs.append({"role": "user", "content": answers[-1]})
    final = compose(q, answers)
    bindings = "; ".join(f"#{i} = {a}" for i, a in enumerate(answers, 1))
    msgs.append({"role": "assistant", "content": f"{bindings}\n[Answer: {final}]"})
    return msgs, final


def react_dialogue(q: Question, rng: random.Random,
                   observe: Observe | None = None) -> tuple[list[dict[str, str]], str]:
    """(messages, final answer): thought, one action, observation; the next step from the observation.

    The teacher never writes a plan: at each step it knows only the next thing it needs and
    builds the query from what it has observed; an empty observation makes it retry the same
    query with WebSearch before it moves on.
    """
    observe = observe or gold_observer(q)
    hops = hops_of(q)
    msgs = react_prompt(q)
    answers: list[str] = []
    for i, h in enumerate(hops):
        query = fill(h.template, answers)
        if i == 0:
            thought = rng.choice(_THOUGHTS_FIRST).format(q=_lower_first(query))
        elif h.needs:
            thought = rng.choice(_THOUGHTS_NEXT).format(a=answers[h.needs[-1] - 1], q=_lower_first(query))
        else:
            thought = rng.choice(_THOUGHTS_OTHER).format(a=answers[-1], q=_lower_first(query))
        msgs.append({"role": "assistant", "content": f"Thought: {thought}\nAction: (Tool={h.tool}) {query}"})
        seen = observe(h.tool, query)
        msgs.append({"role": "user", "content": f"Observation: {seen}"})
        if seen == NO_ANSWER and h.tool != "WebSearch":
            thought = rng.choice(_THOUGHTS_RETRY).format(tool=h.tool, q=_lower_first(query))
            msgs.append({"role": "assistant", "content": f"Thought: {thought}\nAction: (Tool=WebSearch) {query}"})
            seen = observe("WebSearch", query)
            msgs.append({"role": "user", "content": f"Observation: {seen}"})
        answers.append(seen)
    final = compose(q, answers)
    end = (rng.choice(_THOUGHTS_END) if len(answers) < 2 or final == answers[-1]
           else rng.choice(_THOUGHTS_COMBINE).format(obs=" and ".join(answers), a=final))
    msgs.append({"role": "assistant", "content": f"Thought: {end}\nFinal Answer: {final}"})
    return msgs, final


def usable(q: Question, max_calls: int) -> str | None:
    """Why a question cannot give a teacher dialogue (None when it can)."""
    if not q.decomposition:
        return "no gold decomposition"
    if len(q.decomposition) > max_calls:
        return f"more than {max_calls} sub-questions"
    if any(not s.text.strip() or not s.tool for s in q.decomposition):
        return "empty sub-question or tool"
    return None


def programmatic(questions: Sequence[Question], *, seed: int, max_calls: int,
                 correct: Callable[[str, Question], bool] | None = None,
                 observer: Callable[[], Observe] | None = None
                 ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(rows, skipped reasons): each strategy's own teacher dialogue per usable question.

    ``observer`` makes a fresh observer per dialogue (default: the gold answers); ``correct``
    is the gold check, and a dialogue whose answer fails it is skipped (counted per strategy).
    """
    rng = random.Random(seed)
    correct = correct or (lambda a, q: a.strip().lower() == q.answer.strip().lower())
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
        react, react_answer = react_dialogue(q, rng, observer() if observer else None)
        for strategy, msgs, answer in (("dnc", dnc, dnc_answer), ("react", react, react_answer)):
            if correct(answer, q):
                rows.append({**base, "strategy": strategy, "messages": msgs})
            else:
                skip(f"{strategy}: answer fails the gold check")
    return rows, skipped


def few_shot(rows: Sequence[dict[str, Any]], n: int, strategy: str = "dnc") -> str:
    """n programmatic dialogues of a strategy, one per question kind first, as text examples."""
    pool = [r for r in rows if r["strategy"] == strategy]
    seen, picked = set(), []
    for r in pool:
        if r["kind"] not in seen and len(picked) < n:
            seen.add(r["kind"])
            picked.append(r)
    picked += [r for r in pool if r not in picked][:max(0, n - len(picked))]
    speaker = {"dnc": ("Divider", "Tool"), "react": ("Agent", "Tool")}[strategy]
    out = []
    for r in picked:
        turns = [m for m in r["messages"] if m["role"] != "system"]
        out.append("\n".join(f"{speaker[0] if m['role'] == 'assistant' else 'User' if i == 0 else speaker[1]}: "
                             f"{m['content']}" for i, m in enumerate(turns)))
    return "Examples:\n\n" + "\n\n".join(out)


def llm_teacher(questions: Sequence[Question], chat: Any, tools: dict[str, Any], shots: str,
                correct: Callable[[str, Question], bool], *, max_calls: int, strategy: str = "dnc",
                max_new_tokens: int = 96, name: str = "llm") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(kept rows, one check row per question): a strategy's dialogues written by an LLM with the
    real tools, kept when they have no format error and the answer passes the gold check.

    All questions go to ``chat.generate`` together each round (the llama.cpp engine runs them
    concurrently over its slots).
    """
    traces = run_agent(strategy, list(questions), chat, tools, system="teacher", max_calls=max_calls,
                       max_new_tokens=max_new_tokens, examples=shots)
    prompt = dnc_prompt if strategy == "dnc" else react_prompt
    rows, checks = [], []
    for q, t in zip(questions, traces):
        ok = t.format_errors == 0 and correct(t.answer, q)
        checks.append({"question_id": q.id, "strategy": strategy, "kind": q.kind,
                       "hops": len(q.decomposition), "answer": t.answer, "gold": q.answer,
                       "format_errors": t.format_errors, "tool_calls": t.tool_calls, "kept": ok,
                       "tokens_out": t.tokens_out, "seconds": t.seconds})
        if ok:
            msgs = list(t.meta["dialogue"])
            msgs[0] = prompt(q)[0]  # train on the plain instruction, not the shots
            rows.append({"question_id": q.id, "dataset": q.dataset, "kind": q.kind, "split": q.split,
                         "hops": len(q.decomposition), "teacher": name, "strategy": strategy,
                         "messages": msgs})
    return rows, checks
