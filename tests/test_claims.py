"""The claims on hand-built traces, with known answers: pairing, tests, CIs, Holm, ceilings, verdicts,
the format rule, training seeds and the rule-change check."""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict

import numpy as np
import pytest
import yaml

from mmrag.evaluate import claims, papers, stats
from mmrag.evaluate.__main__ import main as cli
from mmrag.io import write_json, write_jsonl, write_traces
from mmrag.schema import Question, Step, Trace

RULES = claims.load_prereg().raw["rules"]


def infoseek(n: int) -> list[Question]:
    return [Question(id=f"i{k:03d}", text=f"Who makes {k}?", answer="Helix", dataset="infoseek",
                     split="test_unseen_entity") for k in range(n)]


def traces(qs: list[Question], system: str, right: list[int], broken: int = 0) -> list[Trace]:
    return [Trace(question_id=q.id, system=system, answer="Helix" if r else "Orbis", format_errors=int(i < broken),
                  steps=[Step(action="answer", text="<answer>x</answer>")]) for i, (q, r) in enumerate(zip(qs, right))]


def world(tmp_path, qs: list[Question], runs: dict[str, list[int]], stage="two_axis_eval", qset="infoseek",
          broken: dict[str, int] | None = None):
    write_jsonl(tmp_path / "world" / "questions" / f"{qset}.jsonl", [q.to_dict() for q in qs])
    for system, right in runs.items():
        write_traces(stage, system, qset, traces(qs, system, right, (broken or {}).get(system, 0)), data=tmp_path)


def spec(**kw) -> dict:
    """A claims.yaml entry: SFT over the base (MM-R2 Table 3 (a), All: 0.538 - 0.112), unless told."""
    base = {"id": "c", "paper": "MM-R2", "claim": "SFT beats base", "stage": "two_axis_eval", "set": "infoseek",
            "a": "mmr2_sft", "b": "mmr2_base", "metric": "accuracy", "direction": 1, "type": "model",
            "cells": {"a": ["Table 3 (a)", "SFT", "All"], "b": ["Table 3 (a)", "Qwen2-VL (base)", "All"]}}
    base.update(kw)
    return base


def prereg(tmp_path, *entries: dict, diagnostics: tuple = ()) -> claims.Prereg:
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"rules": RULES, "claims": list(entries), "diagnostics": list(diagnostics)},
                                   allow_unicode=True, sort_keys=False))
    return claims.load_prereg(path)


def one(tmp_path, pre: claims.Prereg, **kw) -> claims.Claim:
    return claims.registry(prereg=pre, **kw)[0]


def decide(tmp_path, c: claims.Claim, limit: float | None = None, **kw) -> claims.Decision:
    qs = {q.id: q for q in claims.load_questions(claims.question_file(c.question_set, tmp_path))}
    return claims.decide(c, qs, {}, tmp_path, reps=500, seed=1, max_format_errors=limit, **kw)


def evaluate(tmp_path, pre: claims.Prereg, **kw) -> dict:
    return claims.evaluate(tmp_path, 0.05, 0.8, 500, 1, [], prereg=pre, **kw)


# --------------------------------------------------------------------------- the four verdicts on known data
def test_a_claim_whose_ci_holds_the_papers_effect_is_reproduced(tmp_path):
    # 100 paired questions: SFT right on 50, the base on 8 (inside SFT's): +0.42, the paper's +0.426
    qs = infoseek(100)
    world(tmp_path, qs, {"mmr2_sft": [1] * 50 + [0] * 50, "mmr2_base": [1] * 8 + [0] * 92})
    d = decide(tmp_path, one(tmp_path, prereg(tmp_path, spec())))
    assert d.estimate == pytest.approx(0.42) and d.ci_low < 0.426 < d.ci_high
    assert d.p_value == pytest.approx(stats.mcnemar_exact(42, 0), abs=1e-6)
    assert d.verdict == "reproduced" and "+0.426 lies in the CI" in d.reason
    assert d.paper_value == [pytest.approx(0.538), pytest.approx(0.112)]  # the paper's cells, not typed
    assert d.n_needed == stats.n_paired(0.538, 0.112)


def test_the_right_direction_with_a_ci_below_the_papers_effect_is_weaker_and_above_it_stronger(tmp_path):
    qs = infoseek(200)
    world(tmp_path, qs, {"mmr2_sft": [1] * 30 + [0] * 170, "mmr2_base": [0] * 200,
                         "ablation_km": [1] * 120 + [0] * 80, "ablation_flat": [0] * 200})
    pre = prereg(tmp_path, spec(), spec(id="km", a="ablation_km", b="ablation_flat", type="method", cells={
        "a": ["Table 3 (b)", "Intent ✗ / KM Routing ✓ / Agentic Loop ✗", "Acc."],
        "b": ["Table 3 (b)", "Intent ✗ / KM Routing ✗ / Agentic Loop ✗", "Acc."]}))
    weak, strong = claims.registry(prereg=pre)
    d = decide(tmp_path, weak)  # +0.15 [0.10, 0.20]: the direction, far below the paper's +0.426
    assert d.ci_low > 0 and d.ci_high < 0.426 and d.verdict == "weaker" and "smaller here" in d.reason
    d = decide(tmp_path, strong)  # +0.60 against the paper's +0.081
    assert d.ci_low > 0.081 and d.verdict == "stronger" and "larger here" in d.reason


def test_the_opposite_direction_or_a_ruled_out_effect_is_contradicted(tmp_path):
    qs = infoseek(200)
    world(tmp_path, qs, {"mmr2_sft": [0] * 200, "mmr2_base": [1] * 30 + [0] * 170,
                         "mmr2_grpo": [k % 10 == 0 for k in range(200)], "mmr2_x": [k % 10 == 1 for k in range(200)]})
    pre = prereg(tmp_path, spec(), spec(id="flat", a="mmr2_grpo", b="mmr2_x"))
    opposite, flat = claims.registry(prereg=pre)
    d = decide(tmp_path, opposite)
    assert d.ci_high < 0 and d.verdict == "contradicted" and "opposite direction" in d.reason
    d = decide(tmp_path, flat)  # ~0 [-0.06, +0.06]: no effect, and the paper's +0.426 is far outside
    assert d.ci_low < 0 < d.ci_high and d.verdict == "contradicted" and "excludes the paper's effect" in d.reason


def test_a_ci_excluding_zero_is_inconclusive_when_holm_across_the_papers_claims_says_no(tmp_path):
    # GRPO over SFT: 12 questions only GRPO gets right, 3 only SFT: McNemar p = 0.035 alone, but the
    # paper has three tested claims here and this p is the second smallest: 2 x 0.035 = 0.07
    qs = infoseek(100)
    sft = [1] * 40 + [0] * 60
    grpo = [1] * 37 + [0] * 3 + [1] * 12 + [0] * 48
    world(tmp_path, qs, {"mmr2_sft": sft, "mmr2_base": [0] * 100, "mmr2_grpo": grpo,
                         "ablation_km": [1] * 20 + [0] * 80, "ablation_flat": [1] * 20 + [0] * 80})
    grpo_spec = spec(id="grpo", a="mmr2_grpo", b="mmr2_sft", cells={"a": ["Table 3 (a)", "SFT+RL (GRPO)", "All"],
                                                                     "b": ["Table 3 (a)", "SFT", "All"]})
    none = spec(id="none", a="ablation_km", b="ablation_flat", magnitude={"compare": False, "why": "test"})
    alone = decide(tmp_path, one(tmp_path, prereg(tmp_path, grpo_spec)))
    assert alone.p_value == pytest.approx(stats.mcnemar_exact(12, 3), abs=1e-6) and alone.p_value < 0.05
    assert alone.ci_low > 0 and alone.verdict == "stronger"  # alone: the direction, above the paper's +0.005
    # a fourth claim whose effect (+0.005) needs ~10^5 questions is untestable before Holm: not in the family
    tiny = dict(grpo_spec, id="tiny", a="ablation_km", b="ablation_flat")
    doc = evaluate(tmp_path, prereg(tmp_path, spec(), grpo_spec, none, tiny))
    got = {d["id"]: d for d in doc["claims"]}
    assert got["tiny"]["verdict"] == "untestable here" and got["tiny"]["p_adj"] is None
    assert got["grpo"]["p_adj"] == pytest.approx(2 * alone.p_value, abs=1e-5)
    assert got["grpo"]["extra"]["holm"] == {"k": 3, "multiplier": 2}
    assert got["grpo"]["verdict"] == "inconclusive"
    assert "not significant after Holm across MM-R2's 3 tested claims" in got["grpo"]["reason"]
    assert got["c"]["verdict"] == "reproduced" and got["c"]["p_adj"] < 1e-6  # +0.40 holds the paper's +0.426
    assert got["none"]["p_adj"] == 1.0 and got["none"]["verdict"] == "inconclusive"
    assert doc["counts"]["MM-R2"] == {"reproduced": 1, "inconclusive": 2, "untestable here": 1}


def test_a_tiny_effect_beyond_the_sets_size_is_untestable_here(tmp_path):
    qs = infoseek(12)
    world(tmp_path, qs, {"mmr2_grpo": [1] + [0] * 11, "mmr2_sft": [1] + [0] * 11})
    c = one(tmp_path, prereg(tmp_path, spec(a="mmr2_grpo", b="mmr2_sft", cells={
        "a": ["Table 3 (a)", "SFT+RL (GRPO)", "All"], "b": ["Table 3 (a)", "SFT", "All"]})))
    d = decide(tmp_path, c, pool=381)
    assert d.verdict == "untestable here" and d.n_needed > 100_000 and "381" in d.reason


def test_missing_traces_and_declared_limits_are_untestable_with_the_missing_run(tmp_path):
    world(tmp_path, infoseek(4), {"mmr2_sft": [1, 1, 0, 0]})
    d = decide(tmp_path, one(tmp_path, prereg(tmp_path, spec())))
    assert d.verdict == "untestable here" and "no traces of mmr2_base" in d.reason and d.n == 0
    d = decide(tmp_path, one(tmp_path, prereg(tmp_path, spec(untestable="no prior method (missing run: X)"))))
    assert d.verdict == "untestable here" and d.reason == "no prior method (missing run: X)"


# --------------------------------------------------------------------------- ceilings
def test_the_papers_effect_is_scaled_to_our_ceiling_and_chance(tmp_path):
    # four-option questions: chance 0.25; our reader's gold-evidence ceiling 0.50 (results metrics):
    # the paper's +0.19 becomes 0.19 x (0.50 - 0.25) / (1 - 0.25) = +0.0633
    qs = [Question(id=f"b{k:03d}", text="?", answer="Helix", dataset="brit", kind="Text-Image", split="test",
                   choices=["Helix", "Orbis", "Vantor", "Kestrel"]) for k in range(300)]
    world(tmp_path, qs, {"brit__ca_ls_si": [1] * 110 + [0] * 190, "no_linking": [1] * 90 + [0] * 210},
          stage="brit_linking", qset="brit")
    write_json(tmp_path / "results" / "brit_linking" / "metrics.json",
               {"table1_accuracy": {"reader ceiling (gold evidence)": {"avg": 0.5}}})
    entry = spec(id="nl", paper="BRIT", stage="brit_linking", set="brit", a="brit__ca_ls_si", b="no_linking",
                 kinds=["Text-Image"], cells={"a": ["Table 1", "BRIT (Ours-Full)", "Average"],
                                              "b": ["Table 1", "BRIT (No-linking)", "Average"]},
                 ceiling={"metrics": "brit_linking", "path": ["table1_accuracy", "reader ceiling (gold evidence)",
                                                              "avg"]})
    c = one(tmp_path, prereg(tmp_path, entry))
    d = decide(tmp_path, c, results=tmp_path / "results")
    assert d.scaling["ceiling"] == 0.5 and d.scaling["chance"] == 0.25
    assert d.scaling["factor"] == pytest.approx(1 / 3, abs=1e-4)
    assert d.paper_effect == pytest.approx(0.19) and d.scaled_effect == pytest.approx(0.19 / 3, abs=1e-4)
    assert d.scaling["scaled_effect"] == d.scaled_effect and "metrics.json" in d.scaling["source"]
    # n needed for the scaled rates: 0.25 + (0.80 - 0.25) / 3 against 0.25 + (0.61 - 0.25) / 3
    assert d.n_needed == stats.n_paired(0.25 + 0.55 / 3, 0.25 + 0.36 / 3)
    assert d.estimate == pytest.approx(20 / 300, abs=1e-4) and d.verdict == "reproduced"  # +0.067 holds +0.063
    # a ceiling at chance leaves nothing to see
    write_json(tmp_path / "results" / "brit_linking" / "metrics.json",
               {"table1_accuracy": {"reader ceiling (gold evidence)": {"avg": 0.25}}})
    d = decide(tmp_path, c, results=tmp_path / "results")
    assert d.verdict == "untestable here" and "at or below chance" in d.reason


def test_a_ceiling_run_scales_an_open_answer_claim_and_power_uses_it(tmp_path):
    qs = infoseek(100)
    world(tmp_path, qs, {"mmr2_sft": [1] * 21 + [0] * 79, "mmr2_base": [0] * 100, "ceiling_sft": [1] * 50 + [0] * 50})
    pre = prereg(tmp_path, spec(ceiling={"traces": "ceiling_sft", "set": "infoseek"}))
    d = decide(tmp_path, one(tmp_path, pre))
    assert d.scaling["ceiling"] == 0.5 and d.scaling["chance"] == 0.0 and d.scaled_effect == pytest.approx(0.213)
    assert d.verdict == "reproduced"  # +0.21: the paper's +0.426 halved by a reader that answers half
    rows = claims.power_table(claims.registry(prereg=pre), 0.05, 0.8, tmp_path)
    assert rows[0]["scaled_effect"] == pytest.approx(0.213) and rows[0]["ceiling"] == 0.5
    assert rows[0]["n_needed"] == stats.n_paired(0.538 * 0.5, 0.112 * 0.5)
    unscaled = claims.power_table(claims.registry(prereg=pre), 0.05, 0.8, tmp_path / "nowhere")
    assert unscaled[0]["scaled_effect"] == pytest.approx(0.426) and unscaled[0]["ceiling"] is None


# --------------------------------------------------------------------------- the format rule
def test_the_format_rule_makes_a_method_contrast_untestable_and_a_model_contrast_reports_clean_questions(tmp_path):
    qs = infoseek(40)
    # A answers 2 of 40 and breaks the format on 36; B answers 12 and holds it
    world(tmp_path, qs, {"a_sys": [1] * 2 + [0] * 38, "b_sys": [0] * 28 + [1] * 12}, broken={"a_sys": 36})
    method = one(tmp_path, prereg(tmp_path, spec(a="a_sys", b="b_sys", type="method")))
    d = decide(tmp_path, method, limit=0.5)
    assert d.verdict == "untestable here" and d.extra["verdict_if_read"] == "contradicted"
    assert "a_sys on 90%" in d.reason and d.estimate == -0.25  # the measurement stays visible
    assert decide(tmp_path, method, limit=0.95).verdict == "contradicted"  # below the limit: decided
    model = one(tmp_path, prereg(tmp_path, spec(a="a_sys", b="b_sys", type="model")))
    d = decide(tmp_path, model, limit=0.5)  # learning the format is what training buys: decided
    assert d.verdict == "contradicted"
    clean = d.extra["format_clean"]  # the 4 questions on which neither side broke the format: B right on all
    assert clean["n"] == 4 and clean["estimate"] == -1.0
    assert "format-clean questions" in claims.narrative([asdict(d)])


# --------------------------------------------------------------------------- pairing
def test_nea_halves_are_paired_by_pair_id_across_two_sets(tmp_path):
    # 30 pairs: the baseline recalls 20 originals and keeps 13 anonymised; pairs are matched by meta.pair_id
    pairs = [Question(id=f"nea-{k:04d}-{half}", text=f"q{k}", answer="Helix", dataset="brit", split="test",
                      gold_evidence=["img-1"], meta={"pair_id": k, "nea": half == "anon"})
             for k in range(30) for half in ("orig", "anon")]
    write_jsonl(tmp_path / "world" / "questions" / "brit_nea.jsonl", [q.to_dict() for q in pairs])
    from mmrag.schema import Evidence

    def run(half: str, hits: int) -> list[Trace]:
        return [Trace(question_id=f"nea-{k:04d}-{half}", system="x", answer="", steps=[Step(
            action="retrieve", evidence=[Evidence(id="img-1" if k < hits else "img-9", kind="image")])])
            for k in range(30)]

    write_traces("brit_linking", "text_enc__clip_top_k", "brit_nea_orig", run("orig", 20), data=tmp_path)
    write_traces("brit_linking", "text_enc__clip_top_k", "brit_nea", run("anon", 13), data=tmp_path)
    c = next(c for c in claims.registry() if c.id == "brit.nea_baseline_drops")
    assert (c.question_set, c.b_set, c.pair_by, c.direction) == ("brit_nea", "brit_nea_orig", "pair_id", -1)
    d = decide(tmp_path, c)
    assert d.n == 30 and d.estimate == pytest.approx((13 - 20) / 30, abs=1e-4)
    assert d.test.startswith("Newcombe") and d.p_value == pytest.approx(stats.mcnemar_exact(0, 7), abs=1e-6)
    assert d.paper_effect == pytest.approx(0.58 - 0.82) and d.pool == 30 and d.verdict == "reproduced"
    write_traces("brit_linking", "text_enc__clip_top_k", "brit_nea", run("anon", 0), data=tmp_path)
    claims._SCORED.clear()
    d = decide(tmp_path, c)  # all 20 lost: a drop far beyond the paper's -0.24
    assert d.estimate == pytest.approx(-20 / 30, abs=1e-4) and d.verdict == "stronger"


def test_mmcoqa_claims_resample_and_flip_whole_conversations(tmp_path):
    qs = [Question(id=f"t{k:02d}", text="?", answer="Helix", dataset="mmcoqa", split="test",
                   meta={"conversation_id": f"c{k // 4}"}) for k in range(24)]
    world(tmp_path, qs, {"dnc__m__ft": [1] * 12 + [0] * 12, "tools_answer__m__base": [0] * 24},
          stage="toolagent_eval", qset="mmcoqa")
    c = next(c for c in claims.registry(["m"]) if c.id == "dnc.conversational.m")
    d = decide(tmp_path, c)
    assert d.test.startswith("conversation-level bootstrap") and d.extra["conversations"] == 6
    assert d.estimate == 0.5 and d.ci_low < 0.5 < d.ci_high
    # three conversations all right for DnC: flipping whole conversations, p = 2 / 2^3 (the exact test)
    assert d.p_value == pytest.approx(stats.cluster_sign_flip_p([1.0] * 12 + [0.0] * 12,
                                                                [f"c{k // 4}" for k in range(24)]))
    assert d.p_value == pytest.approx(0.25)


def test_brit_recall_is_the_any_of_cover_of_every_gold_group(tmp_path):
    from mmrag.schema import Evidence

    q = Question(id="b1", text="?", answer="red", dataset="brit", kind="Image-Text", choices=["red", "blue"],
                 gold_evidence=["doc-a-s01", "img-001", "img-002"])
    t = Trace(question_id="b1", system="x", answer="red", steps=[Step(
        action="retrieve", evidence=[Evidence(id="img-002", kind="image")])])
    scored = claims.evaluator.score([t], [q], (5,))[0]
    assert claims.value(scored, "brit_recall") == 0.0  # the section is missing
    t.steps[0].evidence.append(Evidence(id="doc-a-s01", kind="triplet"))
    assert claims.value(claims.evaluator.score([t], [q], (5,))[0], "brit_recall") == 1.0


# --------------------------------------------------------------------------- equivalence and levels
@pytest.mark.parametrize("est, lo, hi, p, verdict", [(0.0, -0.03, 0.03, 0.001, "reproduced"),
                                                     (0.0, -0.03, 0.03, 0.2, "inconclusive"),
                                                     (0.1, 0.06, 0.14, 0.9, "contradicted"),
                                                     (0.03, -0.01, 0.07, 0.3, "inconclusive")])
def test_an_equivalence_verdict_reads_the_whole_ci_against_the_margin_and_the_adjusted_tost(est, lo, hi, p, verdict):
    si = next(c for c in claims.registry() if c.id == "brit.table1_si")
    assert si.direction == 0 and si.margin == 0.05
    d = claims.Decision("x", "BRIT", "T", "c", "", "accuracy", [], None, "", estimate=est, ci_low=lo, ci_high=hi,
                        p_value=p, p_adj=p)
    assert claims.verdict(si, d)[0] == verdict


def fidelity_world(tmp_path, full: list[int], summary_only: list[str]) -> None:
    qs = infoseek(len(full))
    world(tmp_path, qs, {"mmr2_grpo": full})
    write_traces("two_axis_eval", "mmr2_grpo" + claims.SUMMARY_ONLY, "infoseek",
                 [Trace(question_id=q.id, system="s", answer=a) for q, a in zip(qs, summary_only)], data=tmp_path)


def fidelity(**kw) -> claims.Claim:
    return next(c for c in claims.registry(**kw) if c.id == "mmr2.fidelity")


def test_fidelity_is_a_ratio_of_right_answers_decided_as_a_level_against_the_papers_value(tmp_path):
    # 400 right full answers, 360 kept by the summaries alone: 0.90, a CI of about +-0.03 around it
    fidelity_world(tmp_path, [1] * 400 + [0] * 100, ["Helix"] * 360 + ["Orbis"] * 140)
    d = decide(tmp_path, fidelity())
    assert d.estimate == pytest.approx(0.9) and d.paper_effect == pytest.approx(0.9011)
    assert 0.9011 - 0.05 < d.ci_low and d.ci_high < 0.9011 + 0.05 and d.p_value < 0.05
    assert d.verdict == "reproduced" and "within ±0.05 of the paper's 0.9011" in d.reason


def test_fidelity_far_below_is_weaker_and_undefined_below_the_minimum(tmp_path):
    fidelity_world(tmp_path, [1] * 40, ["Helix"] * 10 + ["Orbis"] * 30)
    d = decide(tmp_path, fidelity())  # 10/40 = 0.25
    assert d.estimate == pytest.approx(0.25) and d.ci_high < 0.9011 and d.verdict == "weaker"
    fidelity_world(tmp_path, [1] * 3 + [0] * 77, ["Helix"] * 3 + [""] * 77)
    d = decide(tmp_path, fidelity(fidelity_min_correct=10))  # 3/3 is not a fidelity of 1.0
    assert d.verdict == "untestable here" and d.estimate is None and "3 of 80" in d.reason


# --------------------------------------------------------------------------- seeds
def test_holds_counts_training_seed_reruns_not_bootstrap_redraws(tmp_path):
    qs = infoseek(100)
    world(tmp_path, qs, {"mmr2_sft": [1] * 50 + [0] * 50, "mmr2_base": [1] * 8 + [0] * 92})
    pre = prereg(tmp_path, spec(seeds="policy"))
    only = evaluate(tmp_path, pre)["claims"][0]
    assert only["holds"] == "1 seed" and "trained once" in only["holds_reason"]
    # seed 1 retrained SFT: the same verdict; seed 2: SFT no better than the base (the paper's effect ruled out)
    write_traces("two_axis_eval", "mmr2_sft@seed1", "infoseek", traces(qs, "s", [1] * 48 + [0] * 52), data=tmp_path)
    write_traces("two_axis_eval", "mmr2_sft@seed2", "infoseek", traces(qs, "s", [1] * 8 + [0] * 92), data=tmp_path)
    assert claims.seed_runs("two_axis_eval", ["mmr2_sft", "mmr2_base"], ["infoseek"], tmp_path) == [1, 2]
    got = evaluate(tmp_path, pre)["claims"][0]
    assert got["verdict"] == "reproduced" and got["seeds"] == {"1": "reproduced", "2": "contradicted"}
    assert got["holds"] == "2/3" and "seeds 1, 2" in got["holds_reason"]


# --------------------------------------------------------------------------- the rule-change check
def test_a_rule_changed_after_its_traces_were_written_is_flagged_and_the_flag_sticks(tmp_path):
    root = tmp_path / "repo"
    (root / "data").mkdir(parents=True)
    pre = prereg(root, spec())
    (root / "data" / "t.jsonl").write_text("{}\n")
    traces = claims.traces_sha(["t.jsonl"], root / "data")
    rule = claims.rule_sha("c", pre)
    assert claims.rule_check(None, rule, None) == ("no traces: nothing to check", None)
    assert claims.rule_check(traces, rule, None) == ("first decision of these traces", False)
    first = {"extra": {"traces_sha": traces, "rule_sha": rule}, "rule_check": "first decision of these traces",
             "rule_changed": False}
    assert claims.rule_check(traces, rule, first) == ("first decision of these traces", False)
    moved = claims.rule_sha("c", prereg(root, spec(direction=-1)))  # the entry edited after the traces
    text, changed = claims.rule_check(traces, moved, first)
    assert changed is True and text.startswith("rule changed after its traces were written")
    flagged = {"extra": {"traces_sha": traces, "rule_sha": moved}, "rule_check": text, "rule_changed": True}
    assert claims.rule_check(traces, moved, flagged) == (text, True), "a recompute keeps the finding"
    (root / "data" / "t.jsonl").write_text('{"new": 1}\n')  # a rerun writes new traces under the rule
    fresh = claims.traces_sha(["t.jsonl"], root / "data")
    assert claims.rule_check(fresh, moved, flagged)[1] is False


# --------------------------------------------------------------------------- the registry and the CLI
def test_the_registry_is_claims_yaml_with_the_papers_cells():
    reg = {c.id: c for c in claims.registry(["small", "big"])}
    assert {c.paper for c in reg.values()} == {"BRIT", "DnC", "MM-R2"}
    t1 = reg["brit.table1_accuracy"]
    assert t1.paper_value == (papers.value("BRIT", "Table 1", "BRIT (Ours-Full)", "Average"),
                              papers.value("BRIT", "Table 1", "CLIP", "Average")) == (0.80, 0.73)
    assert t1.cells == ("Table 1 / BRIT (Ours-Full) / Average", "Table 1 / CLIP / Average")
    assert t1.question_set == "brit_claim" and t1.cite["section"] == "§6.1"
    assert reg["dnc.model_size"].a == "dnc__big__ft" and not reg["dnc.model_size"].magnitude
    assert reg["dnc.vs_react.em.small"].paper_effect == pytest.approx(0.185 - 0.0132)
    assert not any(c.diagnostic for c in reg.values()) and not any("sensitivity" in c.id for c in reg.values())
    assert all(c.diagnostic for c in claims.diagnostics())
    # one LLM: the size claim is kept, untestable with its reason; no LLM: DnC's per-LLM claims say so
    lonely = {c.id: c for c in claims.registry(["smollm2-135m-instruct"])}
    assert lonely["dnc.model_size"].untestable.startswith("one LLM configured")
    none = [c for c in claims.registry() if c.paper == "DnC"]
    assert none and all(c.untestable for c in none)


def test_the_size_claim_compares_the_smallest_and_biggest_llm_of_one_tuning():
    def size_claim(llms, size_llms=()):
        return next(c for c in claims.registry(llms, size_llms) if c.id == "dnc.model_size")

    c = size_claim(["qwen2.5-coder-0.5b-instruct", "gemma3-270m"], ["smollm2-135m-instruct"])
    assert (c.a, c.b) == ("dnc__qwen2.5-coder-0.5b-instruct__ft", "dnc__smollm2-135m-instruct__ft")
    assert "all instruction-tuned" in c.claim and "gemma3-270m" in c.claim
    lonely = size_claim(["smollm2-135m-instruct", "gemma3-270m"])  # one chat, one base: no fair pair
    assert lonely.untestable.startswith("no two comparable LLMs")


def test_claims_are_decided_on_the_question_sets_the_stages_were_given(tmp_path):
    qs = [Question(id=f"m{k}", text="?", answer="Helix", dataset="mine", split="test") for k in range(40)]
    world(tmp_path, qs, {"dnc__m__ft": [1] * 30 + [0] * 10, "tools_answer__m__base": [0] * 40},
          stage="toolagent_eval", qset="mine")
    sets = claims.ClaimSets(brit="b", nea="b_nea", multihop="mine", conversational="", infoseek="i")
    reg = {c.id: c for c in claims.registry(["m"], sets=sets)}
    assert reg["dnc.vs_toolsanswer.em.m"].question_set == "mine"
    assert reg["brit.recall_vs_baseline"].question_set == "b_retrieval"
    assert reg["dnc.conversational.m"].untestable.startswith("no conversational set")
    found = {d["id"]: d for d in claims.compute(tmp_path, 0.05, 0.8, 300, 1, ["m"], papers=("DnC",), sets=sets)}
    assert found["dnc.vs_toolsanswer.em.m"]["n"] == 40 and found["dnc.vs_toolsanswer.em.m"]["verdict"] != \
        "untestable here"


def test_the_cli_writes_claims_json_with_the_blob_hash_and_the_diagnostics_apart(tmp_path, capsys):
    world(tmp_path, infoseek(100), {"mmr2_sft": [1] * 50 + [0] * 50, "mmr2_base": [1] * 8 + [0] * 92})
    out = tmp_path / "claims.json"
    assert cli(["claims", "--data", str(tmp_path), "--out", str(out), "--llms", "small"]) == 0
    doc = json.loads(out.read_text())
    blob = subprocess.run(["git", "hash-object", str(claims.PREREG)], capture_output=True, text=True).stdout.strip()
    assert doc["claims_yaml"]["blob"] == blob == claims.load_prereg().blob
    records = {r["id"]: r for r in doc["claims"]}
    assert records["mmr2.sft"]["verdict"] == "reproduced" and records["mmr2.sft"]["n"] == 100
    keys = {"paper", "claim", "cite", "cells", "paper_value", "scaled_effect", "estimate", "ci_low", "ci_high",
            "p_value", "p_adj", "n", "n_needed", "verdict", "reason", "holds", "rule_check"}
    assert keys <= set(records["mmr2.sft"])
    assert all(d["diagnostic"] for d in doc["diagnostics"]) and not any(d["diagnostic"] for d in doc["claims"])
    assert doc["counts"]["MM-R2"]["reproduced"] == 1 and sum(doc["counts"]["all"].values()) == len(doc["claims"])
    assert doc["rules"]["alpha"] == 0.05 and doc["rules"]["overridden"] == []
    text = capsys.readouterr().out
    assert "| paper |" in text and "diagnostics (ours, not counted)" in text
    assert cli(["claims", "--data", str(tmp_path), "--papers", "MM-R2", "--alpha", "0.1"]) == 0
    assert "rules overridden on the command line: alpha" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli(["claims", "--sets", "tables=mine"])
    assert "ROLE one of brit, nea, multihop" in capsys.readouterr().err


def test_the_power_table_needs_no_trace(capsys, tmp_path):
    rows = {r["id"]: r for r in claims.power_table(claims.registry(["m"]), 0.05, 0.8, tmp_path)}
    assert rows["mmr2.sft"]["n_needed"] == stats.n_paired(0.538, 0.112)
    assert rows["mmr2.grpo"]["n_needed"] > 10_000 and not rows["mmr2.grpo"]["at_least_10_points"]
    # equivalence, no paper number, a size not compared (tokens), untestable: no row
    assert not {"brit.table1_si", "dnc.finetuning.m", "mmr2.sparsity", "mmr2.judge_consistency"} & set(rows)
    assert rows["brit.table1_accuracy"]["n"] == 192  # brit_linking.claim_questions
    out = tmp_path / "power.json"
    assert cli(["power", "--llms", "m", "--data", str(tmp_path), "--out", str(out)]) == 0
    assert "brit.table1_accuracy" in capsys.readouterr().out and json.loads(out.read_text())


def test_the_narrative_and_table_are_written_from_the_decisions(tmp_path):
    world(tmp_path, infoseek(40), {"mmr2_sft": [1] * 20 + [0] * 20, "mmr2_base": [0] * 18 + [1] * 2 + [0] * 20})
    found = claims.compute(tmp_path, 0.05, 0.8, 300, 1, [], papers=("MM-R2",))
    assert {d["paper"] for d in found} == {"MM-R2"}
    sft = next(d for d in found if d["id"] == "mmr2.sft")
    text = claims.narrative(found)
    assert f"{sft['estimate']:+.3f} [{sft['ci_low']:+.3f}, {sft['ci_high']:+.3f}], n = 40" in text
    assert f"p_adj {sft['p_adj']:.3g}" in text and "untestable here" in text
    table = claims.table(found)
    assert list(table.columns)[:4] == ["paper", "id", "where", "claim"] and "p_adj" in table.columns


def test_a_metric_undefined_for_one_system_names_that_system_and_why(tmp_path):
    qs = infoseek(10)
    world(tmp_path, qs, {"mmr2_base": [1] * 10})
    summarised = [Trace(question_id=q.id, system="mmr2_grpo", answer="Helix",
                        steps=[Step(action="search", summary="Helix makes it."),
                               Step(action="answer", text="<answer>Helix</answer>")]) for q in qs]
    write_traces("two_axis_eval", "mmr2_grpo", "infoseek", summarised, data=tmp_path)
    d = decide(tmp_path, next(c for c in claims.registry() if c.id == "mmr2.sparsity"))
    assert d.n == 0 and d.verdict == "untestable here"
    assert d.reason.startswith("mmr2_base has no question with sparsity defined") and "no summary" in d.reason


# --------------------------------------------------------------------------- diagnostics
SETTINGS = [{"knob": "threshold", "value": 0.4, "params_value": 0.9, "system": "brit__ca_ls_si_threshold_0_4",
             "params_system": "brit__ca_ls_si"},
            {"knob": "top_k", "value": 10, "params_value": 5, "system": "brit__ca_ls_si_top_k_10",
             "params_system": "brit__ca_ls_si"}]


def test_brits_sensitivity_is_a_diagnostic_per_moved_knob_never_a_claim(monkeypatch):
    assert not any("sensitivity" in c.id for c in claims.registry())
    none = [c for c in claims.diagnostics() if c.id.startswith("brit.diag.sensitivity")]
    assert len(none) == 1 and none[0].untestable.startswith("data/brit_linking/sensitivity.json lists no")
    reg = [c for c in claims.diagnostics(SETTINGS) if c.id.startswith("brit.diag.sensitivity")]
    assert [(c.id, c.a, c.b, c.margin) for c in reg] == [
        ("brit.diag.sensitivity.threshold=0.4", "brit__ca_ls_si_threshold_0_4", "brit__ca_ls_si", 0.05),
        ("brit.diag.sensitivity.top_k=10", "brit__ca_ls_si_top_k_10", "brit__ca_ls_si", 0.05)]
    assert reg[0].claim == "recall stays within the margin when threshold moves from 0.9 to 0.4"
    qs = {f"q{i:03d}": Question(id=f"q{i:03d}", text="t", answer="a", dataset="brit", split="test",
                                kind="Text-Image") for i in range(200)}
    hits = {"brit__ca_ls_si": 100, "brit__ca_ls_si_threshold_0_4": 100, "brit__ca_ls_si_top_k_10": 140}
    monkeypatch.setattr(claims, "per_question", lambda stage, system, *a, **k: {q: float(int(q[1:]) < hits[system])
                                                                                for q in qs})
    inert, moved = (claims.decide(c, qs, {}, reps=300, seed=1) for c in reg)
    assert inert.estimate == 0 and inert.verdict == "within ±0.05" and inert.diagnostic
    assert moved.estimate == pytest.approx(0.2) and moved.verdict == "outside ±0.05"


def test_the_loop_firing_rate_counts_episodes_that_search_twice(tmp_path):
    qs = infoseek(10)
    write_jsonl(tmp_path / "world" / "questions" / "infoseek.jsonl", [q.to_dict() for q in qs])
    write_traces("two_axis_eval", "mmr2_grpo", "infoseek",
                 [Trace(question_id=q.id, system="g", answer="Helix",
                        steps=[Step(action="search")] * (2 if i < 3 else 1) + [Step(action="answer")])
                  for i, q in enumerate(qs)], data=tmp_path)
    loop = next(c for c in claims.diagnostics() if c.id == "mmr2.diag.loop_firing")
    d = decide(tmp_path, loop)
    assert d.estimate == pytest.approx(0.3) and d.verdict == "measured" and d.test == "Wilson interval"


def test_the_readers_default_to_the_data_folder_at_call_time(tmp_path, monkeypatch):
    monkeypatch.setattr("mmrag.io.DATA", tmp_path)
    write_jsonl(tmp_path / "world" / "questions" / "brit.jsonl", [])
    write_jsonl(tmp_path / "knowledge_map" / "world" / "passages.jsonl", [{"id": "p0", "unit": 3}])
    assert claims.question_file("brit_claim") == tmp_path / "world" / "questions" / "brit.jsonl"
    assert claims.question_file("brit_retrieval") == claims.question_file("brit")
    assert claims.unit_map() == {"p0": "3"}
    assert claims.per_question("two_axis_eval", "nobody", "infoseek", "accuracy", (), {}, {}) is None
    assert np.isclose(claims.chance_of({"q": Question(id="q", text="", answer="a", dataset="d",
                                                      choices=["a", "b", "c", "d"])}, ["q"]), 0.25)
