"""The two-axis evaluator: trace files + questions -> per-question scores -> one summary per system.

It reads only ``schema.Trace`` jsonl files (``data/<stage>/traces/<system>__<set>.jsonl``) and
``schema.Question`` jsonl files, so BRIT, DnC, MM-R2, a baseline or a user's own system are
scored identically. A question without a trace counts as unanswered (wrong); a trace for an
unknown question is counted and skipped.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmrag.evaluate import stats
from mmrag.evaluate.judge import Judge, LexicalJudge
from mmrag.evaluate.metrics import Scored, count_tokens, mean, score_trace
from mmrag.io import trace_name
from mmrag.schema import Question, Trace, load_questions, load_traces

TASK_KEYS = ("accuracy", "em", "f1")
ROUND = 4


@dataclass
class Pairing:
    """Traces matched to questions, with what could not be matched."""

    items: list[tuple[Question, Trace | None]]
    unknown: list[str] = field(default_factory=list)  # trace question ids not in the set
    duplicates: list[str] = field(default_factory=list)  # question ids traced twice (first kept)


def pair(traces: Sequence[Trace], questions: Sequence[Question]) -> Pairing:
    """Match traces to questions by id, in question order."""
    by_id: dict[str, Trace] = {}
    known = {q.id for q in questions}
    out = Pairing(items=[])
    for t in traces:
        if t.question_id not in known:
            out.unknown.append(t.question_id)
        elif t.question_id in by_id:
            out.duplicates.append(t.question_id)
        else:
            by_id[t.question_id] = t
    out.items = [(q, by_id.get(q.id)) for q in questions]
    return out


def score(traces: Sequence[Trace], questions: Sequence[Question], ks: Sequence[int],
          unit_of: dict[str, str] | None = None, judge: Judge | None = None,
          tokens: Callable[[str], int] = count_tokens, system: str | None = None) -> list[Scored]:
    """Score every question of the set (missing traces included) on both axes."""
    pairing = pair(traces, questions)
    if pairing.unknown or pairing.duplicates:
        warnings.warn(f"{len(pairing.unknown)} traces name unknown questions and "
                      f"{len(pairing.duplicates)} repeat a question; they were skipped "
                      f"(check that --questions is the set these traces answer)", stacklevel=2)
    name = system or next((t.system for t in traces if t.system), "")
    scored = [score_trace(t, q, ks, unit_of, tokens) for q, t in pairing.items]
    for s in scored:
        s.system = s.system or name
    judge = judge or LexicalJudge()
    present = [(i, q, t) for i, (q, t) in enumerate(pairing.items) if t is not None]
    verdicts = judge.judge([(q, t) for _, q, t in present]) if present else []
    for (i, _, _), (cons, sup) in zip(present, verdicts):
        scored[i].judge_consistency, scored[i].judge_support = cons, sup
    for s, (_, t) in zip(scored, pairing.items):
        if t is None:
            s.judge_support = 0.0
    return scored


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), ROUND)


def summarize(scored: Sequence[Scored]) -> dict[str, Any]:
    """System-level numbers (rounded, deterministic); timings are under ``cost`` only."""
    n = len(scored)
    if n == 0:
        return {"n": 0}
    rows = [s.row() for s in scored]
    out: dict[str, Any] = {"n": n, "answered": sum(s.answered for s in scored)}
    # retrieval only (no reader: BRIT's NEA runs): there is no answer to score, not a wrong one
    out["retrieval_only"] = not any(s.reads for s in scored)
    for key in TASK_KEYS:
        out[key] = None if out["retrieval_only"] else _r(mean(r[key] for r in rows))
    for col in sorted(k for k in rows[0] if k.startswith(("recall@", "unit_hit@"))):
        out[col] = _r(mean(r[col] for r in rows))
    routes = any(s.routed for s in scored)
    out["route_recall@1"] = _r(mean(s.route_recall_at_1 for s in scored)) if routes else None
    out["route_precision"] = _r(mean(s.route_precision for s in scored)) if routes else None
    out["sparsity_tokens"] = _r(mean(s.sparsity for s in scored))
    # sparsity is a mean over the questions that exposed a summary: say how many did
    out["sparsity_n"] = sum(s.sparsity is not None for s in scored)
    out["with_summaries"] = sum(s.n_summaries > 0 for s in scored)
    out["judge_consistency"] = _r(mean(s.judge_consistency for s in scored))
    out["judge_support"] = _r(mean(s.judge_support for s in scored))
    out["judged_consistency_n"] = sum(s.judge_consistency is not None for s in scored)
    out["format_errors_per_q"] = _r(mean(s.format_errors for s in scored))
    out["tokens_per_q"] = _r(mean(s.tokens for s in scored))
    out["tool_calls_per_q"] = _r(mean(s.tool_calls for s in scored))
    out["ci"] = intervals(rows, [k for k in (*TASK_KEYS, "route_recall@1", *(c for c in rows[0]
                                   if c.startswith("recall@"))) if out.get(k) is not None])
    out["cost"] = {"seconds_per_q": _r(mean(s.seconds for s in scored))}
    return out


def intervals(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> dict[str, list]:
    """95 % interval and n of each rate (Wilson for 0/1 values, else a seeded bootstrap)."""
    out = {}
    for key in keys:
        col = "route_recall_at_1" if key == "route_recall@1" else key
        vals = [r[col] for r in rows if r.get(col) is not None]
        lo, hi = stats.mean_ci(vals, seed=0)
        out[key] = [_r(lo), _r(hi), len(vals)]
    return out


def summarize_by(scored: Sequence[Scored], key: str) -> dict[str, dict[str, Any]]:
    """One summary per value of a Scored attribute (``split``, ``kind``), sorted by value."""
    groups: dict[str, list[Scored]] = {}
    for s in scored:
        groups.setdefault(str(getattr(s, key)), []).append(s)
    return {k: summarize(v) for k, v in sorted(groups.items())}


def evaluate_file(traces_path: str | Path, questions_path: str | Path, ks: Sequence[int],
                  unit_of: dict[str, str] | None = None, judge: Judge | None = None,
                  splits: Sequence[str] | None = None, only_traced: bool = False,
                  ) -> tuple[list[Scored], dict[str, Any]]:
    """Score one trace file against its question file.

    ``splits`` restricts the questions to those splits; ``only_traced`` to the questions the
    file has a trace for (a system run on a sample), otherwise an untraced question is wrong.
    """
    traces = load_traces(traces_path)
    questions = load_questions(questions_path)
    traced = {t.question_id for t in traces}
    if traced and not traced & {q.id for q in questions}:
        raise ValueError(f"{traces_path}: none of its {len(traced)} traces answers a question of "
                         f"{questions_path}; pass the question file these traces were made for.")
    if splits:
        questions = [q for q in questions if q.split in set(splits)]
    if only_traced:
        questions = [q for q in questions if q.id in traced]
    if splits or only_traced:
        keep = {q.id for q in questions}
        traces = [t for t in traces if t.question_id in keep]
    system, qset = trace_name(traces_path)
    scored = score(traces, questions, ks, unit_of, judge, system=system)
    summary = summarize(scored)
    summary.update(system=system, question_set=qset, judge=(judge or LexicalJudge()).name)
    return scored, summary
