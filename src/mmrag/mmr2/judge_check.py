"""How far to trust the process-axis judge: its agreement with labels known by construction.

For each of a few of the world's questions (gold passage known, answer known) three traces are
built whose correct judgement is certain:

- **supported**: the gold passage retrieved, a summary quoting its answer sentence, the gold
  answer -> consistency 1, support 1;
- **unsupported**: a passage of another page (without the answer) retrieved and summarised, the
  gold answer given anyway -> consistency 0, support 0;
- **contradicted**: the gold passage retrieved and its answer sentence summarised, another
  question's answer given -> consistency 0, support 0.

A judge's scores are read as yes at >= 0.5; :func:`agreement` reports, per axis, the share of
items where it says what the label says and Cohen's kappa (agreement beyond chance), with n.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mmrag.mmr2.trajectories import _sentence_with, answer_matches
from mmrag.sampling import seeded_order
from mmrag.schema import Evidence, Question, Step, Trace

CASES = ("supported", "unsupported", "contradicted")


@dataclass
class CheckItem:
    question: Question
    trace: Trace
    case: str
    consistency: int  # the label
    support: int


def _trace(q: Question, case: str, passage: Any, summary: str, answer: str) -> Trace:
    ev = [Evidence(id=passage.id, kind="passage", content=passage.text, doc_id=passage.doc_id)]
    steps = [Step(action="search", text="<think>I look it up.</think>", query=q.text, evidence=ev),
             Step(action="answer", text=f"<summary>{summary}</summary><answer>{answer}</answer>",
                  summary=summary)]
    return Trace(question_id=q.id, system=f"judge_check:{case}", answer=answer, steps=steps)


def check_items(questions: Sequence[Question], kmap: Any, n: int, seed: int) -> list[CheckItem]:
    """Three labelled traces for each of the first ``n`` usable questions in seeded order
    (usable: a gold passage in the map whose text holds the answer in one sentence)."""
    pool = seeded_order([q for q in questions if q.answer and q.gold_passages], seed)
    passages = seeded_order(list(kmap.passages), seed)
    answers = [q.answer for q in pool]
    items: list[CheckItem] = []
    for i, q in enumerate(pool):
        if len(items) >= 3 * n:
            break
        gold = next((kmap.passages[kmap.pid_index[p]] for p in q.gold_passages if p in kmap.pid_index), None)
        sentence = _sentence_with(gold.text, q.answer) if gold is not None else None
        if not sentence:
            continue
        other = next((p for p in passages if p.doc_id != gold.doc_id
                      and not _sentence_with(p.text, q.answer)), None)
        wrong = next((a for a in answers[i + 1:] + answers[:i]
                      if not answer_matches(a, q.answer, q.answer_aliases)), None)
        if other is None or wrong is None:
            continue
        first = other.text.split(". ")[0][:220]
        items += [CheckItem(q, _trace(q, "supported", gold, sentence, q.answer), "supported", 1, 1),
                  CheckItem(q, _trace(q, "unsupported", other, first, q.answer), "unsupported", 0, 0),
                  CheckItem(q, _trace(q, "contradicted", gold, sentence, wrong), "contradicted", 0, 0)]
    return items


def _kappa(pred: Sequence[int], gold: Sequence[int]) -> float | None:
    n = len(gold)
    if not n:
        return None
    po = sum(p == g for p, g in zip(pred, gold)) / n
    p1, g1 = sum(pred) / n, sum(gold) / n
    pe = p1 * g1 + (1 - p1) * (1 - g1)
    return None if pe == 1 else round((po - pe) / (1 - pe), 4)


def agreement(judge: Any, items: Sequence[CheckItem]) -> dict[str, Any]:
    """Per axis: share of items where the judge (score >= 0.5 = yes) matches the label, Cohen's
    kappa, and how many replies gave no score (counted as disagreement)."""
    verdicts = judge.judge([(it.question, it.trace) for it in items])
    out: dict[str, Any] = {"judge": judge.name, "n": len(items)}
    for axis, k in (("consistency", 0), ("support", 1)):
        gold = [getattr(it, axis) for it in items]
        raw = [v[k] for v in verdicts]
        pred = [int(x >= 0.5) if x is not None else 1 - g for x, g in zip(raw, gold)]
        out[f"{axis}_agreement"] = round(sum(p == g for p, g in zip(pred, gold)) / len(gold), 4) if gold else None
        out[f"{axis}_kappa"] = _kappa(pred, gold)
        out[f"{axis}_unscored"] = sum(x is None for x in raw)
    def yes(case: str, k: int) -> int:
        return sum(int((v[k] or 0) >= 0.5) for it, v in zip(items, verdicts) if it.case == case)

    out["by_case"] = {c: {"n": sum(it.case == c for it in items), "consistency_yes": yes(c, 0),
                          "support_yes": yes(c, 1)} for c in CASES}
    return out
