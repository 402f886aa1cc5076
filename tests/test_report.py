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
    text = stage.headline(cross, EVAL, digits=3)
    assert "judge: lexical-proxy" in text and "**MM-R2 training stages**" in text
    assert "sparsity" not in text.split("**MM-R2")[0]  # the headline keeps task axis and cost only
    assert stage.headline(stage.cross_table({}), {}, 3) == "*No results yet: run `dvc repro`.*\n"
    assert stage.report_metrics({"two_axis_eval": EVAL}, cross, EVAL) == {
        "stages_with_metrics": ["two_axis_eval"], "cross_system_rows": 1,
        "effects_reproduced": 1, "effects_checked": 2}
    rerun = stage.rerun_table({"world": {"params": ["base", {"params.yaml": ["world.a", "world.b"]}]}},
                              {"world": {}})
    assert rerun.iloc[0].to_dict() == {"stage": "world", "command": "dvc repro world",
                                       "params": "base, world.a,world.b",
                                       "report": "results/world/world.html", "has metrics": True}
