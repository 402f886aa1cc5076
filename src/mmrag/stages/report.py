"""Stage `report`: the repository's own paper, every table read from the stages' metrics.json.

Nothing is computed from data here and nothing is typed by hand: the corpora, BRIT and DnC
tables, MM-R2's training/ablation/process tables, the cross-system comparison, the papers'
effects checked on our data, how to rerun each number, and the headline table that the README
quotes (``results/report/headline.md``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from mmrag import config
from mmrag.evaluate import tables as eval_tables
from mmrag.io import RESULTS, ROOT, read_json, stage_dirs, write_json, write_text
from mmrag.stages import StageResult

# the cross-system table's columns, in the order shown
CROSS_COLUMNS = ["question_set", "system", "n", "accuracy", "f1", "recall@5", "route_recall@1",
                 "sparsity_tokens", "judge_support", "tokens_per_q", "tool_calls_per_q"]
# the headline keeps the task axis, routing and cost
HEADLINE_COLUMNS = ["question_set", "system", "n", "accuracy", "f1", "recall@5", "route_recall@1",
                    "tokens_per_q", "tool_calls_per_q"]
# MM-R2's module ablation: the row label -> the run of two_axis_eval it reads
ABLATION_ROWS = eval_tables.ABLATION_RUNS
PROCESS_ROWS = {"base": "mmr2_base", "SFT": "mmr2_sft", "SFT+GRPO": "mmr2_grpo"}


@dataclass
class ReportResult(StageResult):
    """The tables, the headline markdown, and the stages' metrics it was read from."""

    headline: str = ""
    stage_metrics: dict[str, Any] = field(default_factory=dict)
    stages: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- reading
def pipeline_stages(dvc_file: Path = ROOT / "dvc.yaml") -> dict[str, Any]:
    """The stages of dvc.yaml (name -> spec), in pipeline order."""
    return yaml.safe_load(dvc_file.read_text())["stages"]


def read_metrics(stages: Mapping[str, Any], results: Path = RESULTS) -> dict[str, Any]:
    """Every other stage's metrics.json that exists (a stage not run yet is left out)."""
    return {s: read_json(results / s / "metrics.json") for s in stages
            if s != "report" and (results / s / "metrics.json").exists()}


def flat(d: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """A nested metrics dict as (key path, value) rows (lists are left out)."""
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            yield from flat(v, key)
        elif not isinstance(v, list):
            yield key, v


def stage_table(metrics: Mapping[str, Any], stage: str, contains: str | None = None) -> pd.DataFrame:
    """One stage's metrics as a two-column table (optionally only keys containing a word)."""
    rows = [(k, v) for k, v in flat(metrics.get(stage, {})) if not contains or contains in k]
    return pd.DataFrame(rows, columns=["metric", "value"])


# --------------------------------------------------------------------------- tables
def corpora_table(metrics: Mapping[str, Any]) -> pd.DataFrame | None:
    """The corpus stages' metrics (world, corpora), first 40 rows; None before either ran."""
    parts = [stage_table(metrics, name).assign(stage=name) for name in ("world", "corpora")
             if name in metrics]
    return pd.concat(parts).head(40) if parts else None


def training_table(evaluation: Mapping[str, Any]) -> pd.DataFrame:
    """MM-R2's training stages (accuracy by split) beside the paper's."""
    return eval_tables.training_table({v: {sp: {"accuracy": a} for sp, a in d.items()}
                                       for v, d in evaluation["training_table"].items()})


def mmr2_tables(evaluation: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """MM-R2's training, module-ablation and process tables from two_axis_eval's metrics."""
    mm = evaluation.get("mmr2", {})
    return {"training": training_table(evaluation),
            "ablation": eval_tables.ablation_table({row: mm.get(run, {})
                                                    for row, run in ABLATION_ROWS.items()}),
            "process": eval_tables.process_table({row: mm.get(run, {})
                                                  for row, run in PROCESS_ROWS.items()},
                                                 judge=evaluation.get("judge", ""))}


def cross_table(evaluation: Mapping[str, Any]) -> pd.DataFrame:
    """Every system on every question set, scored on the questions all of them answered."""
    cross = eval_tables.cross_system_table(evaluation.get("cross_system", []),
                                           columns=CROSS_COLUMNS[3:])
    return cross[[c for c in CROSS_COLUMNS if c in cross.columns]] if len(cross) else cross


def effects_table(evaluation: Mapping[str, Any]) -> pd.DataFrame:
    """The papers' claims, each checked by direction on our data."""
    return pd.DataFrame([{"claim": c, "reproduced here": ok, "source": "40_two_axis_eval"}
                         for c, ok in evaluation.get("effects", {}).items()])


def rerun_table(stages: Mapping[str, Any], metrics: Mapping[str, Any]) -> pd.DataFrame:
    """How to rerun each stage's numbers: its command, its params, its rendered notebook."""
    return pd.DataFrame([{"stage": s, "command": f"dvc repro {s}",
                          "params": ", ".join(x if isinstance(x, str) else ",".join(next(iter(x.values())))
                                              for x in spec.get("params", [])),
                          "report": f"results/{s}/{s}.html", "has metrics": s in metrics}
                         for s, spec in stages.items()])


def headline(cross: pd.DataFrame, evaluation: Mapping[str, Any], digits: int) -> str:
    """The headline markdown: the cross-system table and MM-R2's training stages."""
    parts = []
    if len(cross):
        parts.append("**Every system, one evaluator** (task axis: accuracy, F1, Recall@5; process axis: "
                     "Route Recall@1; cost: tokens and tool calls per question; questions all systems "
                     f"of a set answered; judge: {evaluation.get('judge', 'n/a')}).\n")
        parts.append(eval_tables.markdown(cross[[c for c in HEADLINE_COLUMNS if c in cross.columns]],
                                          digits))
    if evaluation:
        parts.append("\n**MM-R2 training stages**, accuracy % on the world's InfoSeek-style test splits "
                     "(ours, SmolLM2-135M on CPU) beside the paper's (InfoSeek, 7B VLM).\n")
        parts.append(eval_tables.markdown(training_table(evaluation), 1))
    return "\n".join(parts) if parts else "*No results yet: run `dvc repro`.*\n"


def report_metrics(metrics: Mapping[str, Any], cross: pd.DataFrame,
                   evaluation: Mapping[str, Any]) -> dict[str, Any]:
    """What the report found: which stages have metrics, how many rows and effects."""
    return {"stages_with_metrics": sorted(metrics), "cross_system_rows": int(len(cross)),
            "effects_reproduced": int(sum(bool(v) for v in evaluation.get("effects", {}).values())),
            "effects_checked": len(evaluation.get("effects", {}))}


# --------------------------------------------------------------------------- the stage
def run(params: config.Params) -> ReportResult:
    """Read every stage's metrics and write the headline table and the report's metrics."""
    _, out_dir = stage_dirs("report")
    stages = pipeline_stages()
    metrics = read_metrics(stages)
    print(f"profile {params.base.profile}; metrics found for {len(metrics)} of {len(stages) - 1} stages")
    evaluation = metrics.get("two_axis_eval", {})

    tables: dict[str, pd.DataFrame] = {}
    corpora = corpora_table(metrics)
    if corpora is not None:
        tables["corpora"] = corpora
    for stage in ("brit_linking", "toolagent_eval", "mmr2_train"):
        if stage in metrics:
            tables[stage] = stage_table(metrics, stage)
    if evaluation:
        tables.update(mmr2_tables(evaluation))
    tables["cross_system"] = cross = cross_table(evaluation)
    tables["effects"] = effects_table(evaluation)
    tables["rerun"] = rerun_table(stages, metrics)

    text = headline(cross, evaluation, params.report.headline_digits)
    write_text(out_dir / "headline.md", text)
    result_metrics = report_metrics(metrics, cross, evaluation)
    write_json(out_dir / "metrics.json", result_metrics)
    return ReportResult(metrics=result_metrics, tables=tables,
                        artifacts={"headline": out_dir / "headline.md", "metrics": out_dir / "metrics.json"},
                        headline=text, stage_metrics=metrics, stages=stages)
