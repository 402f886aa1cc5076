"""Stage `report`: the repository's own paper, every table read from the stages' metrics.json.

Nothing is typed by hand: the corpora, BRIT and DnC tables, MM-R2's training/ablation/process
tables, the cross-system comparison (every rate with its 95 % CI and n), every claim of
``claims.yaml`` decided from the traces in ``data/`` (:mod:`mmrag.evaluate.claims`: ``claims.json``
with claims.yaml's blob hash, the diagnostics apart, and a forest plot), how to rerun each number,
and the headline that the README quotes (``results/report/headline.md``: the paper claims' verdicts
counted per paper, its first paragraph the README's headline block).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from mmrag.brit.params import BritLinking
from mmrag.evaluate import claims as eval_claims
from mmrag.evaluate import evidence
from mmrag.evaluate import tables as eval_tables
from mmrag.evaluate.params import Report, TwoAxisEval
from mmrag.io import DATA, RESULTS, ROOT, read_json, save_figure, stage_dirs, write_json, write_text
from mmrag.mmr2.params import Mmr2Train
from mmrag.params import Base, Sections
from mmrag.stages import StageResult
from mmrag.toolagent.params import ToolagentEval

# the cross-system table's columns, in the order shown
CROSS_COLUMNS = ["question_set", "system", "n", "accuracy", "f1", "recall@5", "route_recall@1",
                 "sparsity_tokens", "judge_support", "tokens_per_q", "tool_calls_per_q"]
# the headline keeps the task axis, routing and cost
HEADLINE_COLUMNS = ["question_set", "system", "n", "accuracy", "f1", "recall@5", "route_recall@1",
                    "tokens_per_q", "tool_calls_per_q"]
# MM-R2's module ablation: the row label -> the run of two_axis_eval it reads
ABLATION_ROWS = eval_tables.ABLATION_RUNS
PROCESS_ROWS = {"base": "mmr2_base", "SFT": "mmr2_sft", "SFT+GRPO": "mmr2_grpo"}


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    report: Report
    toolagent_eval: ToolagentEval
    brit_linking: BritLinking
    two_axis_eval: TwoAxisEval
    mmr2_train: Mmr2Train


@dataclass
class ReportResult(StageResult):
    """The tables, the headline markdown, and the stages' metrics it was read from."""

    headline: str = ""
    narrative: str = ""  # "what we see": every claim's verdict, estimate, CI and n (claims.narrative)
    diagnostics: list[dict[str, Any]] = field(default_factory=list)  # our own checks, not counted
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
    """The corpus stages' metrics (world, wiki, corpora), first 40 rows; None before any ran."""
    parts = [stage_table(metrics, name).assign(stage=name) for name in ("world", "wiki", "corpora")
             if name in metrics]
    return pd.concat(parts).head(40) if parts else None


def training_table(evaluation: Mapping[str, Any]) -> pd.DataFrame:
    """MM-R2's training stages (accuracy by split, with 95 % CI and n) beside the paper's."""
    cis = evaluation.get("training_ci", {})
    return eval_tables.training_table({v: {sp: {"accuracy": a, "ci": {"accuracy": cis.get(v, {}).get(sp)}}
                                           for sp, a in d.items()}
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
                                           columns=CROSS_COLUMNS[3:], ci=True)
    return cross[[c for c in CROSS_COLUMNS if c in cross.columns]] if len(cross) else cross


def claims_table(decisions: list[dict[str, Any]]) -> pd.DataFrame:
    """Every claim (or diagnostic) with its paper effect, estimate, 95 % CI, p, p_adj, n, verdict."""
    return eval_claims.table(decisions)


def rerun_table(stages: Mapping[str, Any], metrics: Mapping[str, Any]) -> pd.DataFrame:
    """How to rerun each stage's numbers: its command, its params, its rendered notebook."""
    return pd.DataFrame([{"stage": s, "command": f"dvc repro {s}",
                          "params": ", ".join(x if isinstance(x, str) else ",".join(next(iter(x.values())))
                                              for x in spec.get("params", [])),
                          "report": f"results/{s}/{s}.html", "has metrics": s in metrics}
                         for s, spec in stages.items()])


# every trace the claims are decided from, packed for git (mmrag.evaluate.evidence): a clone recomputes
# claims.json from it, byte for byte, with `bin/py -m mmrag.evaluate claims`
EVIDENCE = RESULTS / "report" / "evidence"
HEADLINE_LEAD = "**The papers' claims, by verdict:**"  # the headline's first words (scripts/update_readme.py)


def counts_line(decisions: list[dict[str, Any]], n_diagnostics: int = 0) -> str:
    """One sentence: the paper claims' verdicts counted per paper (diagnostics apart): the README's
    headline block."""
    tally = eval_claims.counts(decisions)
    per = "; ".join(f"{paper} {sum(c.values())}: " + ", ".join(f"{c[v]} {v}" for v in eval_claims.VERDICTS if v in c)
                    for paper, c in tally.items() if paper != "all")
    diag = f"; {n_diagnostics} diagnostics of ours apart, not counted" if n_diagnostics else ""
    return (f"{HEADLINE_LEAD} {per} (rules fixed in `claims.yaml`: Holm within each paper, the paper's effect "
            f"scaled to our ceilings; every record in `results/report/claims.json`{diag}).")


def profile_note(profile: str) -> str:
    """A line for a run of another profile than the default: its samples are smaller than the ones
    claims.yaml sizes the claims for, so a reader must not read its verdicts as the default run's."""
    if profile == "default":
        return ""
    return (f"*Profile `{profile}`: smaller samples than the pre-registered ones, so many claims are "
            "inconclusive or untestable here (n below n needed: each claim's reason says so); the README "
            "and the site show the default profile's run.*\n\n")


def claims_headline(decisions: list[dict[str, Any]], diagnostics: list[dict[str, Any]] = (),
                    profile: str = "default") -> str:
    """The README's headline: the counts sentence, then the paper claims' verdicts per paper as a
    table, and which verdicts' rules changed after their traces (the claims themselves: the report)."""
    if not decisions:
        return ""
    tally = eval_claims.counts(decisions)
    rows = [{"paper": paper, "claims": sum(c.values()), **{v: c.get(v, 0) for v in eval_claims.VERDICTS}}
            for paper, c in tally.items()]
    changed = [d["id"] for d in decisions if d.get("rule_changed")]
    check = (f"Rules changed after their traces were written: {', '.join(changed)}." if changed
             else "No claim's rule changed after its traces were written.")
    return (profile_note(profile) + counts_line(decisions, len(diagnostics)) + "\n\n"
            + eval_tables.markdown(pd.DataFrame(rows)) + "\n\n"
            + "reproduced = the paper's direction and its effect (scaled to our ceiling) inside the 95 % CI; "
            "weaker / stronger = the direction, the effect below / above the CI; contradicted, inconclusive, "
            "untestable here: each with its reason in the report. " + check + "\n")


def headline(cross: pd.DataFrame, evaluation: Mapping[str, Any], digits: int,
             decisions: list[dict[str, Any]] | None = None, *, policy: str,
             diagnostics: list[dict[str, Any]] = (), profile: str = "default") -> str:
    """The headline markdown: the claims' verdict counts, then MM-R2's training stages (the claims
    table and the cross-system table stay in the report); ``policy`` names the MM-R2 policy those
    rows were read by."""
    parts = []
    if decisions:
        parts.append(claims_headline(decisions, list(diagnostics), profile))
    elif len(cross):
        parts.append("**Every system, one evaluator** (task axis: accuracy, F1, Recall@5; process axis: "
                     "Route Recall@1; cost: tokens and tool calls per question; questions all systems "
                     f"of a set answered; judge: {evaluation.get('judge', 'n/a')}).\n")
        parts.append(eval_tables.markdown(cross[[c for c in HEADLINE_COLUMNS if c in cross.columns]],
                                          digits))
    if evaluation:
        parts.append("\n**MM-R2 training stages**, accuracy % on the world's InfoSeek-style test splits "
                     f"(ours, {policy} on CPU, with 95 % CI and n) beside the paper's (InfoSeek, 7B VLM).\n")
        parts.append(eval_tables.markdown(training_table(evaluation), 1))
    return "\n".join(parts) if parts else "*No results yet: run `dvc repro`.*\n"


def report_metrics(metrics: Mapping[str, Any], cross: pd.DataFrame,
                   decisions: list[dict[str, Any]], diagnostics: list[dict[str, Any]] = (),
                   claims_yaml: str | None = None) -> dict[str, Any]:
    """What the report found: which stages have metrics, and the paper claims' verdicts per paper
    (claims.yaml's claims; its diagnostics are counted apart, never among the verdicts)."""
    counts = eval_claims.counts(decisions)
    return {"stages_with_metrics": sorted(metrics), "cross_system_rows": int(len(cross)),
            "claims_checked": len(decisions),
            "effects_reproduced": counts.get("all", {}).get("reproduced", 0),
            "verdicts": counts, "diagnostics": len(diagnostics),
            "rules_changed_after_traces": sorted(d["id"] for d in decisions if d.get("rule_changed")),
            "claims_yaml": claims_yaml}


# --------------------------------------------------------------------------- the stage
def run(params: Params) -> ReportResult:
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
    rep = params.report
    sets = eval_claims.ClaimSets.from_params(params)
    packed = evidence.pack(DATA, EVIDENCE, sets.all())
    print(f"evidence: {len(packed)} files of traces and questions packed into {EVIDENCE.relative_to(ROOT)} "
          f"({evidence.weight(EVIDENCE) / 2**20:.1f} MiB in git)")
    # the last report's claims.json (the stage runner sets it aside as .claims.json.previous while the
    # stage runs): whether a rule changed after its traces is read against it
    last = next((p for p in (out_dir / "claims.json", out_dir / ".claims.json.previous") if p.exists()), None)
    previous = read_json(last) if last else None
    with evidence.unpacked(EVIDENCE) as data:  # decided from the committed evidence, as a clone would
        doc = eval_claims.evaluate(data, rep.alpha, rep.power, rep.bootstrap, params.base.seed,
                                   list(params.toolagent_eval.llms), list(params.toolagent_eval.size_llms),
                                   margin=rep.stability_margin,
                                   fidelity_min_correct=params.two_axis_eval.fidelity_min_correct,
                                   sets=sets, max_format_errors=rep.max_format_errors, results=RESULTS,
                                   previous=previous if isinstance(previous, dict) else None)
    decisions, diagnostics = doc["claims"], doc["diagnostics"]
    write_json(out_dir / "claims.json", doc)
    tables["claims"] = claims_table(decisions)
    tables["diagnostics"] = claims_table(diagnostics)
    figure = eval_claims.forest(decisions)
    save_figure(figure, out_dir / "claims.png", dpi=100)
    tables["rerun"] = rerun_table(stages, metrics)

    text = headline(cross, evaluation, rep.headline_digits, decisions, policy=params.mmr2_train.policy,
                    diagnostics=diagnostics, profile=params.base.profile)
    write_text(out_dir / "headline.md", text)
    result_metrics = report_metrics(metrics, cross, decisions, diagnostics, doc["claims_yaml"]["blob"])
    write_json(out_dir / "metrics.json", result_metrics)
    return ReportResult(metrics=result_metrics, tables=tables, figures={"claims": figure},
                        artifacts={"headline": out_dir / "headline.md", "metrics": out_dir / "metrics.json",
                                   "claims": out_dir / "claims.json", "claims.png": out_dir / "claims.png"},
                        headline=text, narrative=eval_claims.narrative(decisions), stage_metrics=metrics,
                        stages=stages, diagnostics=diagnostics)
