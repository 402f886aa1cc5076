"""Before / after the DnC fidelity fixes (notebook 22).

**Before** is the committed ``results/toolagent_eval/metrics.json`` of the previous round (made by
the default profile with the old code: plan-first DnC teacher, mm-ReAct taught the gold
sub-questions, one malformed turn ending a dialogue, a repeated call counted as a format error),
kept in ``before_after.json`` beside this file so it reads without git. **After** is a run of the
current code. The default numbers are comparable only with a default-profile run (the same 150
mmqa / 91 mmcoqa questions); the smoke before/after (old and new code on the same smoke
questions) is stored in the same file by :func:`record_smoke` when it is measured.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FILE = Path(__file__).with_name("before_after.json")
KEYS = ["llm", "strategy", "model"]
COLS = ["n", "EM", "EM 95% CI", "F1", "tool_calls", "format_errors"]


def stored() -> dict[str, Any]:
    return json.loads(FILE.read_text()) if FILE.exists() else {}


def _pair(before: list[dict[str, Any]], after: Any, comparable: bool) -> Any:
    import pandas as pd

    b = pd.DataFrame(before)
    a = after if isinstance(after, pd.DataFrame) else pd.DataFrame(after)
    if a.empty:
        a = pd.DataFrame(columns=KEYS + COLS)
    a = a.rename(columns=lambda c: c if c in KEYS else c).copy()
    ci = next((c for c in a.columns if c.startswith("EM ") and c.endswith("CI")), None)
    if ci and ci != "EM 95% CI":
        a = a.rename(columns={ci: "EM 95% CI"})
    keep = [c for c in KEYS + COLS if c in a.columns]
    t = b[[c for c in KEYS + COLS if c in b.columns]].merge(a[keep], on=KEYS, how="outer",
                                                            suffixes=(" before", " after"))
    t["comparable"] = comparable
    return t.set_index(KEYS)


def table(after_table3: Any, questions: dict[str, int]) -> Any:
    """Table 3 rows before (default profile, the previous round) and after (this run), side by side;
    ``comparable`` is True only when this run evaluated the same question counts (the default
    profile), i.e. the same seeded questions."""
    data = stored().get("default_before", {})
    comparable = questions == data.get("questions")
    return _pair(data.get("table3_mmqa", []), after_table3, comparable)


def smoke_table() -> Any:
    """The smoke before/after: the previous round's code and this round's on the same smoke questions
    (Table 3 rows), as measured when the fixes were made; empty when it was not measured."""
    import pandas as pd

    smoke = stored().get("smoke")
    if not smoke:
        return pd.DataFrame({"smoke before/after": ["not measured (see the report of the fix)"]})
    return _pair(smoke["before"], smoke["after"], True).assign(note=smoke.get("note", ""))


def record_smoke(before_metrics: Path, after_metrics: Path, note: str) -> dict[str, Any]:
    """Store the smoke before/after from two toolagent_eval metrics.json files (old and new code)."""
    data = stored()
    b, a = json.loads(Path(before_metrics).read_text()), json.loads(Path(after_metrics).read_text())
    if b.get("questions") != a.get("questions"):
        raise ValueError(f"not the same questions: {b.get('questions')} vs {a.get('questions')}")
    data["smoke"] = {"questions": a["questions"], "before": b["table3_mmqa"], "after": a["table3_mmqa"],
                     "before_mmcoqa": b.get("table4_mmcoqa", []), "after_mmcoqa": a.get("table4_mmcoqa", []),
                     "note": note}
    FILE.write_text(json.dumps(data, indent=1) + "\n")
    return data
