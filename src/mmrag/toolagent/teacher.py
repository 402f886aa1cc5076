"""Teacher dialogues for fine-tuning the divider: programmatic from gold decompositions, or an LLM.

The paper's teacher is 8-shot ChatGPT talking to the real tools, its dialogues kept when the
final answer is right. Here the default teacher is programmatic: it walks the world's gold
decomposition (every sub-question, its tool and its intermediate answer), so every dialogue is
correct by construction. The LLM teacher (any OpenAI-compatible chat model, paper profile)
runs the DnC loop with the real tools and few-shot programmatic examples, and keeps a dialogue
only when its answer matches the gold.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from mmrag.schema import Question
from mmrag.toolagent.strategies import dnc_prompt, react_prompt, run_agent

_THOUGHTS_FIRST = ("I need to find out: {q}", "First I should look up: {q}",
                   "To answer, I first need this: {q}")
_THOUGHTS_NEXT = ("The answer was {a}. Next: {q}", "Now I know {a}. I still need: {q}",
                  "Given {a}, the next step is: {q}")
_THOUGHTS_END = ("I now know the final answer.", "That answers the question.",
                 "I have everything I need.")


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:1].isupper() and not text[1:2].isupper() else text


def dnc_dialogue(q: Question) -> list[dict[str, str]]:
    """The DnC dialogue of a question's gold path (Table 1 format)."""
    msgs = dnc_prompt(q)
    for sub in q.decomposition:
        msgs.append({"role": "assistant", "content": f"{sub.text} (Tool={sub.tool})"})
        msgs.append({"role": "user", "content": sub.answer})
    msgs.append({"role": "assistant", "content": f"[Answer: {q.answer}]"})
    return msgs


def react_dialogue(q: Question, rng: random.Random) -> list[dict[str, str]]:
    """The mm-ReAct dialogue of a question's gold path (thought, action, observation)."""
    msgs = react_prompt(q)
    prev = None
    for sub in q.decomposition:
        tpl = rng.choice(_THOUGHTS_FIRST if prev is None else _THOUGHTS_NEXT)
        thought = tpl.format(q=_lower_first(sub.text), a=prev)
        msgs.append({"role": "assistant",
                     "content": f"Thought: {thought}\nAction: (Tool={sub.tool}) {sub.text}"})
        msgs.append({"role": "user", "content": f"Observation: {sub.answer}"})
        prev = sub.answer
    msgs.append({"role": "assistant", "content": f"Thought: {rng.choice(_THOUGHTS_END)}\n"
                                                 f"Final Answer: {q.answer}"})
    return msgs


def usable(q: Question, max_calls: int) -> str | None:
    """Why a question cannot give a teacher dialogue (None when it can)."""
    if not q.decomposition:
        return "no gold decomposition"
    if len(q.decomposition) > max_calls:
        return f"more than {max_calls} sub-questions"
    if any(not s.text.strip() or not s.tool for s in q.decomposition):
        return "empty sub-question or tool"
    return None


def programmatic(questions: Sequence[Question], *, seed: int,
                 max_calls: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(rows, skipped reasons): one DnC and one mm-ReAct dialogue per usable question."""
    rng = random.Random(seed)
    rows, skipped = [], {}
    for q in questions:
        why = usable(q, max_calls)
        if why:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        base = {"question_id": q.id, "dataset": q.dataset, "kind": q.kind, "split": q.split,
                "hops": len(q.decomposition), "teacher": "programmatic"}
        rows.append({**base, "strategy": "dnc", "messages": dnc_dialogue(q)})
        rows.append({**base, "strategy": "react", "messages": react_dialogue(q, rng)})
    return rows, skipped


def few_shot(rows: Sequence[dict[str, Any]], n: int) -> str:
    """n programmatic DnC dialogues as text examples for an LLM teacher's instruction."""
    out = []
    for r in [r for r in rows if r["strategy"] == "dnc"][:n]:
        turns = [m for m in r["messages"] if m["role"] != "system"]
        out.append("\n".join(f"{'Divider' if m['role'] == 'assistant' else 'User' if i == 0 else 'Tool'}: "
                             f"{m['content']}" for i, m in enumerate(turns)))
    return "Examples:\n\n" + "\n\n".join(out)


def llm_teacher(questions: Sequence[Question], chat: Any, tools: dict[str, Any], shots: str,
                correct: Callable[[str, Question], bool], *, max_calls: int,
                batch: int = 8) -> tuple[list[dict[str, Any]], int]:
    """(rows, attempted): DnC dialogues written by an LLM with the real tools, kept when correct."""
    rows = []
    for i in range(0, len(questions), batch):
        chunk = list(questions[i:i + batch])
        traces = run_agent("dnc", chunk, chat, tools, system="teacher", max_calls=max_calls,
                           max_new_tokens=96, examples=shots)
        for q, t in zip(chunk, traces):
            if t.format_errors == 0 and correct(t.answer, q):
                msgs = [m for m in t.meta["dialogue"]]
                msgs[0] = dnc_prompt(q)[0]  # train on the plain instruction, not the shots
                rows.append({"question_id": q.id, "dataset": q.dataset, "kind": q.kind,
                             "split": q.split, "hops": t.tool_calls, "teacher": "llm",
                             "strategy": "dnc", "messages": msgs})
    return rows, len(questions)
