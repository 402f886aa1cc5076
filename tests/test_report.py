"""The report stage's helpers on a hand-built set of stage metrics (no pipeline run)."""

from __future__ import annotations

from mmrag.io import write_json
from mmrag.stages import report as stage

EVAL = {"judge": "lexical-proxy",
        "training_table": {"SFT": {"unseen_entity": 0.5, "unseen_question": 0.25, "overall": 0.375}},
        "mmr2": {"mmr2_grpo": {"accuracy": 0.5, "route_recall@1": 1.0}},
        "cross_system": [{"system": "a", "question_set": "mmqa", "n": 2, "accuracy": 0.5,
                          "tokens_per_q": 10.0, "sparsity_tokens": 3.0}],
        "effects": {"GRPO beats SFT": True, "SFT beats the zero-shot base": False}}


def test_stage_tables_flatten_nested_metrics_and_skip_lists():
    metrics = {"world": {"pages": 3, "questions": {"mmqa": 5, "ids": [1, 2]}}}
    assert list(stage.flat(metrics["world"])) == [("pages", 3), ("questions.mmqa", 5)]
    table = stage.stage_table(metrics, "world", contains="mmqa")
    assert table.values.tolist() == [["questions.mmqa", 5]]
    assert stage.corpora_table({}) is None
    assert list(stage.corpora_table(metrics).stage) == ["world", "world"]


def test_read_metrics_skips_stages_not_run_and_the_report_itself(tmp_path):
    write_json(tmp_path / "world" / "metrics.json", {"pages": 3})
    write_json(tmp_path / "report" / "metrics.json", {"old": 1})
    got = stage.read_metrics({"world": {}, "clip": {}, "report": {}}, results=tmp_path)
    assert got == {"world": {"pages": 3}}


def test_headline_and_metrics_from_two_axis_eval():
    cross = stage.cross_table(EVAL)
    assert list(cross.columns) == stage.CROSS_COLUMNS  # every column, in the report's order
    text = stage.headline(cross, EVAL, digits=3, policy="qwen2.5-coder-0.5b-instruct")
    assert "judge: lexical-proxy" in text and "**MM-R2 training stages**" in text
    assert "(ours, qwen2.5-coder-0.5b-instruct on CPU" in text  # the policy that read them, not a typed name
    assert "sparsity" not in text.split("**MM-R2")[0]  # the headline keeps task axis and cost only
    assert stage.headline(stage.cross_table({}), {}, 3, policy="p") == "*No results yet: run `dvc repro`.*\n"
    decisions = [{"paper": "BRIT", "verdict": "reproduced"}, {"paper": "DnC", "verdict": "inconclusive"},
                 {"paper": "MM-R2", "verdict": "reproduced"}]
    got = stage.report_metrics({"two_axis_eval": EVAL}, cross, decisions)
    # counted over all three papers' claims, not MM-R2's direction checks
    assert got["effects_reproduced"] == 2 and got["claims_checked"] == 3
    assert got["verdicts"]["BRIT"] == {"reproduced": 1} and got["verdicts"]["DnC"] == {"inconclusive": 1}
    rerun = stage.rerun_table({"world": {"params": ["base", {"params.yaml": ["world.a", "world.b"]}]}},
                              {"world": {}})
    assert rerun.iloc[0].to_dict() == {"stage": "world", "command": "dvc repro world",
                                       "params": "base, world.a,world.b",
                                       "report": "results/world/world.html", "has metrics": True}


def decision(id_, paper, verdict, **kw):
    base = {"id": id_, "paper": paper, "table": "T", "claim": "SFT beats base", "metric": "accuracy",
            "paper_value": [0.538, 0.112], "paper_effect": 0.426, "scaled_effect": 0.426, "estimate": 0.1,
            "ci_low": -0.05, "ci_high": 0.25, "p_value": 0.2, "p_adj": 0.4, "n": 24, "mde": 0.3, "n_needed": 20,
            "verdict": verdict, "reason": "the CI holds 0", "cite": {"section": "§6.4"}, "diagnostic": False,
            "rule_check": "traces not in git: cannot check", "rule_changed": None}
    base.update(kw)
    return base


def test_the_headline_counts_the_paper_claims_per_paper_and_leaves_the_diagnostics_apart():
    decisions = [decision("mmr2.sft", "MM-R2", "inconclusive"), decision("mmr2.grpo", "MM-R2", "weaker"),
                 decision("brit.x", "BRIT", "reproduced")]
    diagnostics = [decision("brit.diag.y", "BRIT", "within ±0.05", diagnostic=True)]
    text = stage.headline(stage.cross_table(EVAL), EVAL, 3, decisions, policy="p", diagnostics=diagnostics)
    first = text.split("\n\n")[0]
    assert first.startswith(stage.HEADLINE_LEAD)
    assert "MM-R2 2: 1 weaker, 1 inconclusive" in first and "BRIT 1: 1 reproduced" in first
    assert "1 diagnostics of ours apart, not counted" in first and "within ±" not in first
    assert "| paper | claims | reproduced | weaker |" in text
    assert text.index("| BRIT |") < text.index("| all | 3 | 1 | 1 |")  # the papers, then all
    assert "No claim's rule changed after its traces were written." in text
    assert "**MM-R2 training stages**" in text  # the training table stays
    flagged = [decision("brit.x", "BRIT", "reproduced", rule_changed=True, rule_check="changed after ...")]
    assert "Rules changed after their traces were written: brit.x." in stage.claims_headline(flagged)
    got = stage.report_metrics({"two_axis_eval": EVAL}, stage.cross_table(EVAL), decisions,
                               diagnostics, "abc")
    assert got["verdicts"]["all"] == {"inconclusive": 1, "weaker": 1, "reproduced": 1}
    assert got["diagnostics"] == 1 and got["claims_yaml"] == "abc" and got["rules_changed_after_traces"] == []


def test_a_headline_of_another_profile_says_its_samples_are_smaller():
    decisions = [decision("brit.x", "BRIT", "inconclusive")]
    quick = stage.claims_headline(decisions, profile="quick")
    assert quick.startswith("*Profile `quick`: smaller samples") and stage.HEADLINE_LEAD in quick
    assert stage.claims_headline(decisions).startswith(stage.HEADLINE_LEAD)  # the default: no note
def test_the_claims_table_carries_p_adj_and_rates_carry_their_interval():
    table = stage.claims_table([decision("mmr2.sft", "MM-R2", "inconclusive")])
    row = table.iloc[0]
    assert row["ours (95% CI)"] == "+0.100 [-0.050, +0.250]" and row["p_adj"] == "0.4" and row["where"] == "§6.4"
    evaluation = dict(EVAL, training_ci={"SFT": {"overall": [0.1, 0.6, 8]}},
                      cross_system=[dict(EVAL["cross_system"][0], ci={"accuracy": [0.1, 0.9, 2]})])
    assert stage.training_table(evaluation).set_index("model").loc["SFT", "overall 95% CI (ours)"] == \
        "[10.0, 60.0] n=8"
    assert stage.cross_table(evaluation).accuracy.iloc[0] == "0.5 [0.1, 0.9] n=2"
