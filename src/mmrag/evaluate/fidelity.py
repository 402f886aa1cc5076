"""Fidelity: does the summary a trace exposed carry the answer? Acc(summary only) / Acc(full).

MM-R2's explanation-fidelity test: give the *same backbone* the question and the exposed
summaries only (no retrieved passages, no image), let it answer, and compare that accuracy with
the accuracy of the full trace. A ratio near 1 means the summaries are a faithful account of
what the agent used; far below 1 means the answer came from somewhere the summaries hide.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mmrag.evaluate.metrics import accuracy, summaries
from mmrag.schema import Question, Trace

_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.S)

SYSTEM = ("Answer the question using only the notes below. Reply with the answer alone inside "
          "<answer></answer>.")


def summary_only_prompt(question: Question, trace: Trace) -> list[dict]:
    """Chat messages holding the question and the trace's exposed summaries, nothing else."""
    notes = "\n".join(f"- {s}" for s in summaries(trace)) or "(no notes)"
    user = f"Notes:\n{notes}\n\nQuestion: {question.text}"
    if question.choices:
        user += "\nChoices: " + "; ".join(question.choices)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def extract_answer(text: str) -> str:
    """The text inside <answer> tags, else the first non-empty line."""
    m = _ANSWER.search(text)
    if m:
        return m.group(1).strip()
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def summary_only_answers(llm, items: Sequence[tuple[Question, Trace]],
                         max_new_tokens: int = 32) -> list[str]:
    """The backbone's answer to each question from the trace's summaries alone (greedy)."""
    replies = llm.generate([summary_only_prompt(q, t) for q, t in items],
                           max_new_tokens=max_new_tokens, temperature=0.0, stop=["</answer>"])
    return [extract_answer(r.text + "</answer>" if "<answer>" in r.text else r.text)
            for r in replies]


def fidelity(items: Sequence[tuple[Question, Trace]], summary_answers: Sequence[str],
             min_correct: int) -> dict:
    """Acc(summary only), Acc(full) and their ratio; the ratio is undefined (None, with the reason)
    when fewer than ``min_correct`` full answers are right: 1/1 is not a fidelity of 1.0."""
    if len(items) != len(summary_answers):
        raise ValueError(f"fidelity: {len(items)} traces but {len(summary_answers)} answers")
    n = len(items)
    right_sum = sum(accuracy(a, q) for (q, _), a in zip(items, summary_answers))
    right_full = sum(accuracy(t.answer, q) for q, t in items)
    out = {"n": n, "correct_full": int(right_full), "correct_summary_only": int(right_sum),
           "acc_summary_only": right_sum / n if n else 0.0, "acc_full": right_full / n if n else 0.0,
           "fidelity": right_sum / right_full if right_full and right_full >= min_correct else None}
    if out["fidelity"] is None:
        out["undefined_because"] = (f"{int(right_full)} correct full answers < minimum "
                                    f"{min_correct} (two_axis_eval.fidelity_min_correct)")
    return out
