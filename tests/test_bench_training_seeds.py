"""The training-seed bench's summary: a claim's verdict under each seed and how often it is the
committed run's (what the README's training-seed block reports)."""

from __future__ import annotations

from conftest import load_script


def bench():
    return load_script("bench_training_seeds")


def decision(claim: str, estimate: float, verdict: str) -> dict:
    return {"id": claim, "claim": claim, "estimate": estimate, "ci_low": estimate - 0.1, "ci_high": estimate + 0.1,
            "n": 100, "verdict": verdict}


def test_summary_counts_the_seeds_that_keep_the_committed_verdict():
    outcomes = {0: (0.27, "reproduced", 0.1, "inconclusive"), 1: (0.14, "inconclusive", 0.2, "reproduced"),
                2: (0.08, "inconclusive", 0.0, "inconclusive")}
    runs = [{"seed": s, "claims": [decision("brit.nea", a, va), decision("brit.new", b, vb)]}
            for s, (a, va, b, vb) in outcomes.items()]
    committed = {"brit.nea": {"verdict": "reproduced", "estimate": 0.28}}
    rows = {r["id"]: r for r in bench().summarise(runs, committed)}
    nea = rows["brit.nea"]
    assert nea["holds"] == "1/3" and nea["verdict_counts"] == {"reproduced": 1, "inconclusive": 2}
    assert nea["estimates"] == {0: 0.27, 1: 0.14, 2: 0.08} and nea["committed_estimate"] == 0.28
    assert nea["cis"][1] == [0.14 - 0.1, 0.14 + 0.1]
    # a claim the committed run does not have is reported without a "holds" figure
    assert rows["brit.new"]["holds"] is None and rows["brit.new"]["committed_verdict"] is None
