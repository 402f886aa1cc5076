"""Result tables: ours beside the MM-R2 paper's numbers, and the cross-system comparison.

The paper's numbers are constants below, each labelled as the paper's; ours always come from
evaluator summaries. Tables are pandas DataFrames; :func:`markdown` renders any of them without
extra dependencies (the report writes ``results/report/headline.md`` with it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

# MM-R2 paper, InfoSeek accuracy (%) by split, for its three training stages (§6.2, §6.4:
# 13.3 / 53.6 / 54.1 are the unseen-question split, 11.1 / 55.1 / 56.0 the unseen-entity one).
PAPER_TRAINING = {
    "base (zero-shot)": {"unseen_question": 13.3, "unseen_entity": 11.1, "overall": 11.2},
    "SFT": {"unseen_question": 53.6, "unseen_entity": 55.1, "overall": 53.8},
    "SFT+GRPO": {"unseen_question": 54.1, "unseen_entity": 56.0, "overall": 54.3},
}
# MM-R2 paper, module ablation (overall accuracy %). Its 30.2 is KnowledgeMap routing alone (no
# intent binding); the intent-only configuration is ours, with no paper number.
PAPER_ABLATION = {
    "flat retrieval (no intent, no KM, no loop)": 22.1,
    "KM routing only (no intent, no loop)": 30.2,
    "intent binding only (no KM, no loop; not in the paper)": None,
    "intent + KM routing (no loop)": 38.7,
    "intent + KM routing + agentic loop (full)": 54.3,
    "oracle-like router: intent + the unit whose card lists the referent (not in the paper)": None,
}
# the module ablation's rows -> the two_axis_eval run each reads. The paper's four rows: direct
# retrieval, "KM routing only" (the raw question routed to the nearest unit centroid), "+ intent"
# (the intent's query routed the same way) and the full agent. The card-lookup row (the unit whose
# card lists Φ's referent: a name lookup close to an oracle router) is kept, named as such.
ABLATION_RUNS = {"flat retrieval (no intent, no KM, no loop)": "ablation_flat",
                 "KM routing only (no intent, no loop)": "ablation_km",
                 "intent binding only (no KM, no loop; not in the paper)": "ablation_intent",
                 "intent + KM routing (no loop)": "ablation_intent_km",
                 "intent + KM routing + agentic loop (full)": "mmr2_grpo",
                 "oracle-like router: intent + the unit whose card lists the referent (not in the paper)":
                     "ablation_intent_card"}
# MM-R2 paper, retrieval budget: passages per search (overall accuracy %).
PAPER_BUDGET = {1: 47.9, 2: 51.0, 5: 54.3}
# MM-R2 paper, process-level metrics: the weaker agent it compares against -> MM-R2.
PAPER_PROCESS = {
    "route_recall@1": (0.2339, 0.7400),
    "judge_consistency": (0.6677, 0.7620),
    "judge_support": (0.7414, 0.7660),
    "sparsity_tokens": (24.58, 18.28),
    "fidelity": (None, 0.9011),
}
SPLITS = {"test_unseen_entity": "unseen_entity", "test_unseen_question": "unseen_question"}


def pct(x: float | None) -> float | None:
    """A fraction as a percentage with one decimal (paper style)."""
    return None if x is None else round(100 * float(x), 1)


def training_table(ours: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> pd.DataFrame:
    """Accuracy (%) per training stage and split: ours beside the paper's.

    ``ours[variant][split]`` is an evaluator summary; splits are ``unseen_entity``,
    ``unseen_question`` and ``overall``.
    """
    rows = []
    for variant in dict.fromkeys([*PAPER_TRAINING, *ours]):
        row: dict[str, Any] = {"model": variant}
        for split in ("unseen_question", "unseen_entity", "overall"):
            summary = ours.get(variant, {}).get(split)
            row[f"{split} (ours)"] = pct(summary.get("accuracy")) if summary else None
            row[f"{split} 95% CI (ours)"] = ci_text(summary, "accuracy", percent=True) if summary else None
            row[f"{split} (paper)"] = PAPER_TRAINING.get(variant, {}).get(split)
        rows.append(row)
    return pd.DataFrame(rows)


def ablation_table(ours: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Module ablation: accuracy (%) per configuration, ours (with n and 95 % CI, or "not run")
    beside the paper's; a paper number is never shown against a run of another configuration."""
    rows = []
    for name in dict.fromkeys([*PAPER_ABLATION, *ours]):
        s = ours.get(name) or {}
        ran = s.get("accuracy") is not None
        rows.append({"configuration": name,
                     "accuracy (ours)": pct(s["accuracy"]) if ran else "not run",
                     "n": s.get("n"), "95% CI (ours)": ci_text(s, "accuracy", percent=True),
                     "accuracy (paper)": PAPER_ABLATION.get(name),
                     "route_recall@1 (ours)": s.get("route_recall@1"),
                     "recall@5 (ours)": s.get("recall@5")})
    return pd.DataFrame(rows)


def ci_text(summary: Mapping[str, Any], key: str, percent: bool = False) -> str | None:
    """A summary's 95 % interval for ``key`` as "[lo, hi] n=N" (None when it has none)."""
    ci = (summary.get("ci") or {}).get(key)
    if not ci or ci[0] is None:
        return None
    lo, hi = (pct(ci[0]), pct(ci[1])) if percent else (round(ci[0], 3), round(ci[1], 3))
    return f"[{lo}, {hi}] n={ci[2]}" if len(ci) > 2 else f"[{lo}, {hi}]"


def budget_table(ours: Mapping[int, Mapping[str, Any]]) -> pd.DataFrame:
    """Retrieval budget (passages per search): accuracy (%) ours, with n and 95 % CI, beside the paper's."""
    return pd.DataFrame([{"top_k": k, "accuracy (ours)": pct(ours[k].get("accuracy"))
                          if k in ours else None, "n": ours.get(k, {}).get("n"),
                          "95% CI (ours)": ci_text(ours.get(k, {}), "accuracy", percent=True),
                          "accuracy (paper)": PAPER_BUDGET.get(k),
                          "tokens_per_q (ours)": ours.get(k, {}).get("tokens_per_q")}
                         for k in sorted({*PAPER_BUDGET, *ours})])


def process_table(ours: Mapping[str, Mapping[str, Any]], judge: str = "") -> pd.DataFrame:
    """Process-level metrics: each of our agents (label -> summary) beside the paper's two."""
    rows = []
    for key, (p0, p1) in PAPER_PROCESS.items():
        row: dict[str, Any] = {"metric": key + (f" [{judge}]" if judge and key.startswith("judge") else "")}
        row.update({f"{label} (ours)": s.get(key) for label, s in ours.items()})
        row.update({"baseline (paper)": p0, "MM-R2 (paper)": p1})
        rows.append(row)
    return pd.DataFrame(rows)


CROSS_COLUMNS = ("accuracy", "f1", "recall@5", "route_recall@1", "sparsity_tokens",
                 "judge_consistency", "judge_support", "tokens_per_q", "tool_calls_per_q",
                 "seconds_per_q")


RATES = ("accuracy", "em", "f1", "route_recall@1")


def cross_system_table(summaries: Sequence[Mapping[str, Any]],
                       columns: Sequence[str] = CROSS_COLUMNS, ci: bool = False) -> pd.DataFrame:
    """One row per (question set, system): both axes and cost, sorted by set then system (never
    by our score). ``ci``: rate cells read "value [low, high]" (95 %). A retrieval-only run (no
    reader) is labelled so, its answer columns empty."""
    rows = []
    for s in summaries:
        system = str(s.get("system"))
        if s.get("retrieval_only"):
            system += " (retrieval only, no reader)"
        row = {"question_set": s.get("question_set"), "system": system, "n": s.get("n")}
        for c in columns:
            row[c] = s.get("cost", {}).get(c) if c == "seconds_per_q" else s.get(c)
            if ci and row[c] is not None and (c in RATES or c.startswith("recall@")):
                interval = ci_text(s, c)
                row[c] = f"{round(float(row[c]), 3)} {interval}" if interval else row[c]
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    return df.sort_values(["question_set", "system"], ignore_index=True)


def _cell(v: Any, digits: int) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}".rstrip("0").rstrip(".") if abs(v) < 1e6 else f"{v:.3g}"
    return str(v).replace("|", "\\|")


def markdown(df: pd.DataFrame, digits: int = 3) -> str:
    """A GitHub markdown table of a DataFrame (None/NaN shown as an en dash)."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for rec in df.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v, digits) for v in rec) + " |")
    return "\n".join(lines) + "\n"
