"""The claims registry on hand-built traces: pairing by question id, tests, CIs and verdicts."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from mmrag.evaluate import claims, stats
from mmrag.evaluate.__main__ import main as cli
from mmrag.io import write_jsonl, write_traces
from mmrag.schema import Question, Step, Trace


def infoseek(n: int) -> list[Question]:
    return [Question(id=f"i{k}", text=f"Who makes {k}?", answer="Helix", dataset="infoseek",
                     split="test_unseen_entity") for k in range(n)]


def traces(qs: list[Question], system: str, right: list[int]) -> list[Trace]:
    return [Trace(question_id=q.id, system=system, answer="Helix" if r else "Orbis",
                  steps=[Step(action="answer", text="<answer>x</answer>")]) for q, r in zip(qs, right)]


def world(tmp_path, qs: list[Question], runs: dict[str, list[int]], stage="two_axis_eval", qset="infoseek"):
    write_jsonl(tmp_path / "world" / "questions" / f"{qset}.jsonl", [q.to_dict() for q in qs])
    for system, right in runs.items():
        write_traces(stage, system, qset, traces(qs, system, right), data=tmp_path)


def claim(**kw) -> claims.Claim:
    base = dict(id="c", paper="MM-R2", table="T", claim="SFT beats base", stage="two_axis_eval",
                question_set="infoseek", a="mmr2_sft", b="mmr2_base", metric="accuracy",
                paper_value=(0.538, 0.112))
    base.update(kw)
    return claims.Claim(**base)


def decide(tmp_path, c: claims.Claim, pool: int | None = None, limit: float | None = None) -> claims.Decision:
    qs = {q.id: q for q in claims.load_questions(tmp_path / "world" / "questions" / f"{c.question_set}.jsonl")}
    return claims.decide(c, qs, {}, tmp_path, reps=500, seed=1, pool=pool, max_format_errors=limit)


def test_a_paired_claim_is_decided_by_question_and_its_mcnemar_p_is_the_exact_one(tmp_path):
    qs = infoseek(40)
    sft = [1] * 20 + [0] * 20
    base = [0] * 18 + [1] * 2 + [0] * 20  # discordant: 18 only SFT, 0 only base
    # traces in another order than the questions: pairing is by id, not by position
    world(tmp_path, qs, {"mmr2_sft": sft, "mmr2_base": base})
    d = decide(tmp_path, claim())
    assert d.n == 40 and d.estimate == pytest.approx(0.45)
    assert d.p_value == pytest.approx(stats.mcnemar_exact(18, 0), abs=1e-6)
    assert d.ci_low > 0 and d.verdict == "reproduced"
    assert d.n_needed == stats.n_paired(0.538, 0.112) and d.mde is not None


def test_a_ci_that_excludes_the_papers_effect_contradicts_it(tmp_path):
    qs = infoseek(200)
    world(tmp_path, qs, {"mmr2_sft": [k % 10 == 0 for k in range(200)],
                         "mmr2_base": [k % 10 == 1 for k in range(200)]})
    d = decide(tmp_path, claim())  # ours ~0 [-0.06, +0.06]; the paper's +0.426 is far outside
    assert d.verdict == "contradicted" and "paper's effect" in d.reason


def test_a_tiny_effect_beyond_the_sets_size_is_untestable_here(tmp_path):
    qs = infoseek(12)
    world(tmp_path, qs, {"mmr2_grpo": [1] + [0] * 11, "mmr2_sft": [1] + [0] * 11})
    d = decide(tmp_path, claim(a="mmr2_grpo", b="mmr2_sft", paper_value=(0.543, 0.538)), pool=381)
    assert d.verdict == "untestable here" and d.n_needed > 100_000 and "381" in d.reason


def test_few_one_sided_discordant_pairs_do_not_contradict_a_tiny_paper_effect(tmp_path):
    # GRPO vs SFT as measured: 80 paired questions, SFT alone right on 2; the paper's +0.005 needs
    # ~10^5 questions. A percentile bootstrap ends at exactly 0 here and "excluded" +0.005.
    qs = infoseek(80)
    world(tmp_path, qs, {"mmr2_grpo": [1] * 6 + [0] * 74, "mmr2_sft": [1] * 8 + [0] * 72})
    d = decide(tmp_path, claim(a="mmr2_grpo", b="mmr2_sft", paper_value=(0.543, 0.538)), pool=381)
    assert d.test.startswith("Newcombe") and d.estimate == pytest.approx(-0.025)
    assert d.ci_low < d.estimate and d.ci_high > 0
    assert d.verdict == "untestable here" and "381" in d.reason
    assert "contradicted" not in d.extra["redrawn_verdicts"]


def test_missing_traces_and_declared_limits_are_untestable_with_a_reason(tmp_path):
    world(tmp_path, infoseek(4), {"mmr2_sft": [1, 1, 0, 0]})
    d = decide(tmp_path, claim())
    assert d.verdict == "untestable here" and "mmr2_base" in d.reason and d.n == 0
    d = decide(tmp_path, claim(untestable="not traced"))
    assert d.verdict == "untestable here" and d.reason == "not traced"


def test_mmcoqa_claims_resample_whole_conversations(tmp_path):
    qs = [Question(id=f"t{k}", text="?", answer="Helix", dataset="mmcoqa", split="test",
                   meta={"conversation_id": f"c{k // 4}"}) for k in range(24)]
    world(tmp_path, qs, {"dnc__m__ft": [1] * 12 + [0] * 12, "tools_answer__m__base": [0] * 24},
          stage="toolagent_eval", qset="mmcoqa")
    c = claim(stage="toolagent_eval", question_set="mmcoqa", a="dnc__m__ft", b="tools_answer__m__base",
              metric="em", paper_value=(), conversational=True)
    d = decide(tmp_path, c)
    assert d.test.startswith("conversation-level bootstrap") and d.extra["conversations"] == 6
    assert d.estimate == 0.5 and d.ci_low < 0.5 < d.ci_high


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


def test_registry_covers_the_three_papers_and_the_cli_writes_claims_json(tmp_path, capsys):
    reg = claims.registry(["small", "big"])
    assert {c.paper for c in reg} == {"BRIT", "DnC", "MM-R2"} and len({c.id for c in reg}) == len(reg)
    assert any(c.id == "dnc.model_size" and c.a == "dnc__big__ft" for c in reg)
    sized = claims.registry(["small"], size_llms=["big"])  # the bigger LLM runs DnC only: no per-LLM claims
    assert {c.id for c in sized if c.id.endswith(".big")} == set()
    assert any(c.id == "dnc.model_size" and (c.a, c.b) == ("dnc__big__ft", "dnc__small__ft") for c in sized)
    world(tmp_path, infoseek(30), {"mmr2_sft": [1] * 30, "mmr2_base": [0] * 30})
    out = tmp_path / "claims.json"
    assert cli(["claims", "--data", str(tmp_path), "--out", str(out), "--llms", "small"]) == 0
    records = {r["id"]: r for r in json.loads(out.read_text())}
    assert records["mmr2.sft"]["verdict"] == "reproduced" and records["mmr2.sft"]["n"] == 30
    keys = {"paper", "claim", "paper_value", "estimate", "ci_low", "ci_high", "n", "mde", "n_needed", "verdict"}
    assert keys <= set(records["mmr2.sft"])
    counts = claims.counts(list(records.values()))
    assert counts["MM-R2"]["reproduced"] == 1 and sum(counts["all"].values()) == len(records)
    assert "| paper |" in capsys.readouterr().out


def test_retrieval_only_traces_are_scored_against_their_question_set(tmp_path):
    from mmrag.evaluate import claims

    (tmp_path / "world" / "questions").mkdir(parents=True)
    (tmp_path / "world" / "questions" / "brit.jsonl").write_text("")
    assert claims.question_file("brit_retrieval", tmp_path) == tmp_path / "world" / "questions" / "brit.jsonl"
    recall = [c for c in claims.registry() if c.metric == "brit_recall" and c.question_set == claims.RETRIEVAL]
    assert {c.id for c in recall} >= {"brit.recall_vs_baseline", "brit.ls_vs_lp", "brit.linker_ca"}
    assert all(not c.untestable for c in recall if c.table != "§5 sensitivity")  # that one: no sensitivity.json


def test_the_readers_default_to_the_data_folder_at_call_time(tmp_path, monkeypatch):
    from mmrag.evaluate import claims
    from mmrag.io import write_jsonl

    monkeypatch.setattr("mmrag.io.DATA", tmp_path)
    write_jsonl(tmp_path / "world" / "questions" / "brit.jsonl", [])
    write_jsonl(tmp_path / "knowledge_map" / "world" / "passages.jsonl", [{"id": "p0", "unit": 3}])
    assert claims.question_file("brit_claim") == tmp_path / "world" / "questions" / "brit.jsonl"
    assert claims.unit_map() == {"p0": "3"}
    assert claims.per_question("two_axis_eval", "nobody", "infoseek", "accuracy", (), {}, {}) is None



def test_the_nea_claim_compares_each_systems_change_over_the_pairs(monkeypatch):
    # 30 NEA pairs: BRIT recalls 20 originals and keeps 18 anonymised; the baseline recalls 20, keeps 4
    pairs = [Question(id=f"nea-{k:04d}-{half}", text=f"q{k}", answer="Helix", dataset="brit", split="test",
                      meta={"pair_id": k, "nea": half == "anon"}) for k in range(30) for half in ("orig", "anon")]
    kept = {"brit__ca_ls_si": 18, "text_enc__clip_top_k": 4}

    def recall(stage, system, question_set, metric, kinds, questions, units, data):
        half = "orig" if question_set == "brit_nea_orig" else "anon"
        hits = 20 if half == "orig" else kept[system]
        return {f"nea-{k:04d}-{half}": float(k < hits) for k in range(30)}

    monkeypatch.setattr(claims, "per_question", recall)
    claim = next(c for c in claims.registry() if c.id == "brit.nea")
    assert claims.question_file("brit_nea_orig") == claims.question_file("brit_nea")
    d = claims.decide(claim, {q.id: q for q in pairs}, {}, reps=500, seed=1)
    assert d.n == 30, d.reason
    assert d.estimate == pytest.approx((18 - 20) / 30 - (4 - 20) / 30, abs=1e-4)  # BRIT lost 2, the baseline 16
    assert d.ci_low > 0 and d.verdict == "reproduced" and d.p_value is None
    kept["text_enc__clip_top_k"] = 18  # both lose the same: no evidence either way
    assert claims.decide(claim, {q.id: q for q in pairs}, {}, reps=500, seed=1).verdict == "inconclusive"


def test_the_narrative_is_written_from_the_decisions(tmp_path):
    qs = infoseek(40)
    world(tmp_path, qs, {"mmr2_sft": [1] * 20 + [0] * 20, "mmr2_base": [0] * 18 + [1] * 2 + [0] * 20})
    found = claims.compute(tmp_path, 0.05, 0.8, 300, 1, [], papers=("MM-R2",))
    assert {d["paper"] for d in found} == {"MM-R2"}
    text = claims.narrative(found)
    sft = next(d for d in found if d["id"] == "mmr2.sft")
    assert f"{sft['estimate']:+.3f} [{sft['ci_low']:+.3f}, {sft['ci_high']:+.3f}], n = 40" in text
    assert text.startswith(f"{len(found)} claims: 1 reproduced") and "untestable here" in text


def test_a_clear_effect_holds_on_every_redrawn_sample_and_a_borderline_one_does_not(tmp_path):
    qs = infoseek(120)
    # clear: 60 discordant pairs all for SFT; borderline: 16 for A, 7 for B (the CI's edge at 0)
    world(tmp_path, qs, {"mmr2_sft": [1] * 60 + [0] * 60, "mmr2_base": [0] * 120,
                         "mmr2_grpo": [1] * 16 + [0] * 104, "mmr2_x": [0] * 16 + [1] * 7 + [0] * 97})
    clear = decide(tmp_path, claim())
    assert clear.verdict == "reproduced" and clear.verdict_holds == "3/3"
    assert clear.extra["redrawn_verdicts"] == ["reproduced"] * 3
    edge = decide(tmp_path, claim(a="mmr2_grpo", b="mmr2_x", paper_value=()))
    assert edge.verdict == "inconclusive" and -0.01 < edge.ci_low < 0
    assert edge.verdict_holds != "3/3" and "reproduced" in edge.extra["redrawn_verdicts"]  # it hinges on the draw
    # the redraws are seeded: deciding again gives the same verdicts
    assert decide(tmp_path, claim(a="mmr2_grpo", b="mmr2_x", paper_value=())).extra == edge.extra


def test_conversational_redraws_draw_whole_conversations(monkeypatch):
    import numpy as np

    seen = []
    real = claims.interval

    def spy(xa, xb, clusters, *args):
        seen.append((xa.copy(), list(clusters) if clusters is not None else None))
        return real(xa, xb, clusters, *args)

    monkeypatch.setattr(claims, "interval", spy)
    c = claim(question_set="mmcoqa", metric="f1", paper_value=(), conversational=True)
    xa = np.array([float(k // 4) for k in range(16)])  # each turn's value names its conversation
    clusters = [f"c{k // 4}" for k in range(16)]
    verdicts = claims.redrawn_verdicts(c, xa, np.zeros(16), clusters, False, 0.05, 300, 0)
    assert len(verdicts) == 3 and len(seen) == 3
    for values, drawn in seen:
        assert drawn is not None and len(values) == 16
        for label in set(drawn):  # one drawn conversation = all 4 turns of one original conversation
            turns = values[[i for i, x in enumerate(drawn) if x == label]]
            assert len(turns) == 4 and len(set(turns)) == 1 and label.startswith(f"c{int(turns[0])}#")


SETTINGS = [{"knob": "threshold", "value": 0.4, "params_value": 0.9, "system": "brit__ca_ls_si_threshold_0_4",
             "params_system": "brit__ca_ls_si"},
            {"knob": "top_k", "value": 10, "params_value": 5, "system": "brit__ca_ls_si_top_k_10",
             "params_system": "brit__ca_ls_si"}]


def test_brits_sensitivity_is_one_equivalence_claim_per_moved_knob(monkeypatch):
    """Inert knob: the CI hugs 0 inside the margin (reproduced); a knob that moves recall by 20
    points on 200 questions: the CI lies outside it (contradicted)."""
    assert [c.id for c in claims.registry() if c.table == "§5 sensitivity"] == ["brit.threshold_pcst"]
    assert next(c for c in claims.registry() if c.table == "§5 sensitivity").untestable
    with pytest.raises(ValueError, match="stability_margin"):
        claims.registry(sensitivity=SETTINGS)
    reg = [c for c in claims.registry(sensitivity=SETTINGS, margin=0.05) if c.table == "§5 sensitivity"]
    assert [(c.id, c.a, c.b, c.margin) for c in reg] == [
        ("brit.sensitivity.threshold=0.4", "brit__ca_ls_si_threshold_0_4", "brit__ca_ls_si", 0.05),
        ("brit.sensitivity.top_k=10", "brit__ca_ls_si_top_k_10", "brit__ca_ls_si", 0.05)]
    qs = {f"q{i:03d}": Question(id=f"q{i:03d}", text="t", answer="a", dataset="brit", split="test",
                                kind="Text-Image") for i in range(200)}
    hits = {"brit__ca_ls_si": 100, "brit__ca_ls_si_threshold_0_4": 100, "brit__ca_ls_si_top_k_10": 140}
    monkeypatch.setattr(claims, "per_question", lambda stage, system, *a: {q: float(int(q[1:]) < hits[system])
                                                                           for q in qs})
    inert, moved = (claims.decide(c, qs, {}, reps=300, seed=1) for c in reg)
    assert inert.n == 200 and inert.estimate == 0 and inert.verdict == "reproduced", inert.reason
    assert moved.estimate == pytest.approx(0.2) and moved.ci_low > 0.05 and moved.verdict == "contradicted"


@pytest.mark.parametrize("est, lo, hi, verdict", [(0.0, -0.03, 0.03, "reproduced"), (0.1, 0.06, 0.14, "contradicted"),
                                                  (-0.1, -0.14, -0.06, "contradicted"),
                                                  (0.03, -0.01, 0.07, "inconclusive")])
def test_an_equivalence_verdict_reads_the_whole_ci_against_the_margin(est, lo, hi, verdict):
    claim = claims.registry(sensitivity=SETTINGS[:1], margin=0.05)
    claim = next(c for c in claim if c.margin is not None)
    assert claims.verdict(est, lo, hi, claim)[0] == verdict


def fidelity_world(tmp_path, full: list[int], summary_only: list[str], margin: float | None = 0.05) -> claims.Claim:
    qs = infoseek(len(full))
    world(tmp_path, qs, {"mmr2_grpo": full})
    write_traces("two_axis_eval", "mmr2_grpo" + claims.SUMMARY_ONLY, "infoseek",
                 [Trace(question_id=q.id, system="s", answer=a) for q, a in zip(qs, summary_only)], data=tmp_path)
    return next(c for c in claims.registry(fidelity_min_correct=10, margin=margin) if c.id == "mmr2.fidelity")


def test_fidelity_is_the_ratio_of_right_answers_paired_by_question_and_empty_answers_count_as_wrong(tmp_path):
    # 40 right full answers; the summaries alone keep 36 of them, plus one the full trace missed:
    # (36 + 1) / 40 = 0.925. The last 20 summary-only answers are empty: wrong, not dropped.
    full = [1] * 40 + [0] * 40
    summary = ["Helix"] * 36 + ["Orbis"] * 4 + ["Helix"] + ["Orbis"] * 19 + [""] * 20
    d = decide(tmp_path, fidelity_world(tmp_path, full, summary))
    assert d.n == 80 and d.extra["right_a"] == 37 and d.extra["right_b"] == 40
    assert d.estimate == pytest.approx(0.925) and d.ci_low < 0.9011 < d.ci_high
    assert d.test == "paired bootstrap of the ratio" and d.verdict_holds is not None
    assert d.paper_effect == pytest.approx(0.9011)
    # 40 right answers leave a CI far wider than +-0.05: it holds the paper's 0.90 and much else
    assert d.ci_high - d.ci_low > 0.1 and d.verdict == "inconclusive" and "wider than ±0.05" in d.reason


def test_a_level_is_reproduced_only_when_its_ci_lies_within_the_margin_of_the_papers_value(tmp_path):
    # 400 right full answers, 360 of them kept by the summaries alone: 0.90, a CI of about +-0.03
    full, summary = [1] * 400 + [0] * 100, ["Helix"] * 360 + ["Orbis"] * 140
    d = decide(tmp_path, fidelity_world(tmp_path, full, summary))
    assert d.estimate == pytest.approx(0.9) and 0.9011 - 0.05 < d.ci_low and d.ci_high < 0.9011 + 0.05
    assert d.verdict == "reproduced" and "within ±0.05 of the paper's 0.9011" in d.reason
    # the same CI with no margin to call it equal stays inconclusive
    d = decide(tmp_path, fidelity_world(tmp_path, full, summary, margin=None))
    assert d.verdict == "inconclusive" and "no equivalence margin" in d.reason
    # and the level rule never reads an A - B equivalence around 0
    level = next(c for c in claims.registry(margin=0.05) if c.id == "mmr2.fidelity")
    assert claims.verdict(0.0, -0.01, 0.01, level)[0] == "contradicted"


def test_fidelity_far_below_the_papers_is_contradicted_and_undefined_below_the_minimum(tmp_path):
    lost = fidelity_world(tmp_path, [1] * 40, ["Helix"] * 10 + ["Orbis"] * 30)
    d = decide(tmp_path, lost)  # 10/40 = 0.25
    assert d.estimate == pytest.approx(0.25) and d.ci_high < 0.9011 and d.verdict == "contradicted"
    few = fidelity_world(tmp_path, [1] * 3 + [0] * 77, ["Helix"] * 3 + [""] * 77)
    d = decide(tmp_path, few)  # 3/3 is not a fidelity of 1.0
    assert d.verdict == "untestable here" and d.estimate is None and "3 of 80" in d.reason
    assert "fidelity_min_correct" in d.reason


def test_the_size_claim_compares_the_smallest_and_biggest_llm_of_one_tuning():
    def size_claim(llms, size_llms=()):
        return next(c for c in claims.registry(llms, size_llms) if c.id == "dnc.model_size")

    # listed biggest first, and a base model among chat models: ordered by parameters, base left out
    c = size_claim(["qwen2.5-coder-0.5b-instruct", "gemma3-270m"], ["smollm2-135m-instruct"])
    assert (c.a, c.b) == ("dnc__qwen2.5-coder-0.5b-instruct__ft", "dnc__smollm2-135m-instruct__ft")
    assert "all instruction-tuned" in c.claim and "gemma3-270m" in c.claim
    lonely = size_claim(["smollm2-135m-instruct", "gemma3-270m"])  # one chat, one base: no fair pair
    assert lonely.untestable.startswith("no two comparable LLMs")
    assert claims.size_sweep(["b/hub", "a/hub"])[0] == ["b/hub", "a/hub"]  # unknown sizes: as given


def test_a_verdict_between_readers_that_break_the_format_says_so(tmp_path):
    qs = infoseek(30)
    write_jsonl(tmp_path / "world" / "questions" / "infoseek.jsonl", [q.to_dict() for q in qs])
    for system, broken in (("mmr2_sft", 0), ("mmr2_base", 24)):
        write_traces("two_axis_eval", system, "infoseek",
                     [Trace(question_id=q.id, system=system, answer="Orbis", format_errors=int(i < broken),
                            steps=[Step(action="answer", text="x")]) for i, q in enumerate(qs)], data=tmp_path)
    d = decide(tmp_path, claim(), limit=0.5)  # a training claim: decided, and the narrative says why to doubt it
    assert d.extra["format_error_share"] == {"mmr2_sft": 0.0, "mmr2_base": 0.8} and d.verdict == "contradicted"
    assert "80% of mmr2_base's questions" in claims.narrative([asdict(d)])


def test_the_cli_decides_one_papers_claims_when_only_its_stages_ran(tmp_path, capsys):
    world(tmp_path, infoseek(30), {"mmr2_sft": [1] * 30, "mmr2_base": [0] * 30})
    out = tmp_path / "mmr2.json"
    assert cli(["claims", "--data", str(tmp_path), "--out", str(out), "--papers", "MM-R2"]) == 0
    assert {r["paper"] for r in json.loads(out.read_text())} == {"MM-R2"}
    with pytest.raises(SystemExit):
        cli(["claims", "--papers", "ICLR"])
    assert "invalid choice" in capsys.readouterr().err


def dnc_run(tmp_path, qs: list[Question], qset: str, corpus: str, runs: dict[str, tuple[list[int], int]]) -> None:
    """Write ``qs`` under data/<corpus>/questions/<qset>.jsonl and one toolagent_eval trace file per
    system: (right answers, how many of the first questions broke the format)."""
    write_jsonl(tmp_path / corpus / "questions" / f"{qset}.jsonl", [q.to_dict() for q in qs])
    for system, (right, broken) in runs.items():
        write_traces("toolagent_eval", system, qset,
                     [Trace(question_id=q.id, system=system, answer="Helix" if r else "Orbis",
                            format_errors=int(i < broken), steps=[Step(action="answer", text="x")])
                      for i, (q, r) in enumerate(zip(qs, right))], data=tmp_path)


def multihop(n: int) -> list[Question]:
    return [Question(id=f"m{k}", text=f"Which firm owns {k}?", answer="Helix", dataset="mine", split="test")
            for k in range(n)]


def test_claims_are_decided_on_the_question_sets_the_stages_were_given(tmp_path, capsys):
    # a user's own set "mine" in data/folder: the DnC claims read the traces written under that name
    dnc_run(tmp_path, multihop(40), "mine", "folder", {"dnc__m__ft": ([1] * 30 + [0] * 10, 0),
                                                       "tools_answer__m__base": ([0] * 40, 0)})
    sets = claims.ClaimSets(brit="b", nea="b_nea", multihop="mine", conversational="", infoseek="i")
    reg = {c.id: c for c in claims.registry(["m"], sets=sets)}
    assert reg["dnc.vs_toolsanswer.em.m"].question_set == "mine"
    assert reg["brit.recall_vs_baseline"].question_set == "b_retrieval"
    assert (reg["brit.nea"].question_set, reg["brit.nea"].twin_set) == ("b_nea", "b_nea_orig")
    assert reg["dnc.conversational.m"].untestable.startswith("no conversational set")
    found = {d["id"]: d for d in claims.compute(tmp_path, 0.05, 0.8, 300, 1, ["m"], papers=("DnC",), sets=sets)}
    assert found["dnc.vs_toolsanswer.em.m"]["n"] == 40 and found["dnc.vs_toolsanswer.em.m"]["verdict"] == "reproduced"
    # the world's names find nothing there; the CLI's --sets points the claims at the user's set
    world_names = claims.compute(tmp_path, 0.05, 0.8, 300, 1, ["m"], papers=("DnC",))
    assert next(d for d in world_names if d["id"] == "dnc.vs_toolsanswer.em.m")["reason"].startswith("no traces")
    out = tmp_path / "mine.json"
    assert cli(["claims", "--data", str(tmp_path), "--out", str(out), "--papers", "DnC", "--llms", "m",
                "--sets", "multihop=mine"]) == 0
    assert {r["id"]: r for r in json.loads(out.read_text())}["dnc.vs_toolsanswer.em.m"]["n"] == 40
    with pytest.raises(SystemExit):
        cli(["claims", "--data", str(tmp_path), "--sets", "tables=mine"])
    assert "ROLE one of brit, nea, multihop" in capsys.readouterr().err


def test_a_strategy_contrast_whose_agent_breaks_the_format_is_untestable_not_contradicted(tmp_path):
    # DnC answers 2 of 40 (36 format errors), ToolsAnswer 12: "contradicted" would say ToolsAnswer is the
    # better strategy when it only holds a format DnC's agent cannot
    dnc_run(tmp_path, multihop(40), "mmqa", "world", {"dnc__m__ft": ([1] * 2 + [0] * 38, 36),
                                                      "tools_answer__m__base": ([0] * 28 + [1] * 12, 0),
                                                      "dnc__m__base": ([0] * 40, 40)})
    found = {d["id"]: d for d in claims.compute(tmp_path, 0.05, 0.8, 300, 1, ["m"], papers=("DnC",),
                                                max_format_errors=0.5)}
    ta = found["dnc.vs_toolsanswer.em.m"]
    assert ta["verdict"] == "untestable here" and ta["extra"]["verdict_if_read"] == "contradicted"
    assert "dnc__m__ft on 90%" in ta["reason"] and ta["estimate"] == -0.25  # the measurement stays visible
    assert ta["verdict_holds"] is None
    # fine-tuning is a training claim: learning the format is part of its effect, so it is decided
    assert found["dnc.finetuning.m"]["verdict"] != "untestable here"
    # with no limit (or a limit above the share) the same traces are decided as measured
    loose = {d["id"]: d for d in claims.compute(tmp_path, 0.05, 0.8, 300, 1, ["m"], papers=("DnC",),
                                                max_format_errors=0.95)}
    assert loose["dnc.vs_toolsanswer.em.m"]["verdict"] == "contradicted"
    assert "format" in claims.narrative([ta])


def test_brits_table1_claims_carry_the_papers_numbers_and_their_power(tmp_path):
    reg = {c.id: c for c in claims.registry(margin=0.05)}
    assert reg["brit.table1_accuracy"].paper_effect == pytest.approx(0.12)  # 0.85 vs 0.73 (both baselines)
    assert reg["brit.table1_text_image"].paper_effect == pytest.approx(0.19)
    assert reg["brit.table1_accuracy"].question_set == "brit_claim"  # the claim pair's whole sample
    assert claims.question_file("brit_claim", tmp_path) is None
    assert reg["brit.table1_image_image"].margin == 0.05 and reg["brit.table1_image_image"].kinds == ("Image-Image",)
    assert "brit.table1_image_image" not in {c.id for c in claims.registry()}  # no margin, no equivalence claim
    d = claims.Decision("x", "BRIT", "Table 1", "c", "", "accuracy", [0.85, 0.73], 0.12, "")
    n = claims.needed(reg["brit.table1_accuracy"], True, d, 0.05, 0.8)
    assert n == stats.n_paired(0.85, 0.73) and 100 < n < 400  # a 12-point effect needs a few hundred pairs
    assert claims.needed(reg["brit.table1_image_image"], True, d, 0.05, 0.8) is None  # equivalence: no n
    assert all(c.paper_source for c in reg.values() if c.paper == "DnC")  # says why DnC has no paper numbers


def test_the_power_table_needs_no_trace_and_sizes_each_paper_effect(capsys, tmp_path):
    rows = {r["id"]: r for r in claims.power_table(claims.registry(["m"], margin=0.05), 0.05, 0.8)}
    assert rows["mmr2.sft"]["n_needed"] == stats.n_paired(0.538, 0.112)
    assert rows["mmr2.grpo"]["n_needed"] > 10_000 and not rows["mmr2.grpo"]["at_least_10_points"]
    assert rows["mmr2.sparsity"]["n_needed"] is None  # a mean: its sd comes from traces
    assert "brit.table1_image_image" not in rows and "dnc.vs_react.em.m" not in rows  # equivalence / no numbers
    out = tmp_path / "power.json"
    assert cli(["power", "--llms", "m", "--out", str(out)]) == 0
    assert "brit.table1_accuracy" in capsys.readouterr().out and json.loads(out.read_text())


def test_a_metric_undefined_for_one_system_names_that_system_and_why(tmp_path):
    # the zero-shot base writes no summaries: sparsity is undefined on every one of its questions
    qs = infoseek(10)
    world(tmp_path, qs, {"mmr2_base": [1] * 10})
    summarised = [Trace(question_id=q.id, system="mmr2_grpo", answer="Helix",
                        steps=[Step(action="search", summary="Helix makes it."),
                               Step(action="answer", text="<answer>Helix</answer>")]) for q in qs]
    write_traces("two_axis_eval", "mmr2_grpo", "infoseek", summarised, data=tmp_path)
    sparsity = next(c for c in claims.registry() if c.id == "mmr2.sparsity")
    d = decide(tmp_path, sparsity)
    assert d.n == 0 and d.verdict == "untestable here"
    assert d.reason.startswith("mmr2_base has no question with sparsity defined") and "no summary" in d.reason
