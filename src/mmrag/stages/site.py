"""Stage `site`: the rendered notebooks, the claims and the lab notes of this run as one static site.

The last stage of the pipeline: it reads every stage's executed notebook and metrics, the report's
claims.json and the traces for the explorer, and writes ``docs/`` (in git). Because it is a stage,
``dvc.lock`` ties the site to the same run as claims.json: a site older than its claims cannot be
committed with a clean ``dvc status``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from mmrag.io import RESULTS, ROOT, read_json, write_json
from mmrag.params import Base, Sections
from mmrag.site.build import build
from mmrag.stages import StageResult

SITE = ROOT / "docs"
BUDGET_BYTES = 15 * 2**20  # what a repository page should stay under (tests/test_site.py reads it here)


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base


@dataclass
class SiteResult(StageResult):
    pages: list[str] = field(default_factory=list)


def claims_agree(site: Path, results: Path) -> bool | None:
    """Whether the site shows the report's claims.json as it is (None: the report has none)."""
    report = results / "report" / "claims.json"
    shown = site / "metrics" / "report.claims.json"
    if not report.exists():
        return None
    return shown.exists() and shown.read_bytes() == report.read_bytes()


def run(params: Params, results: Path = RESULTS, out: Path = SITE) -> SiteResult:
    """Build the site from ``results`` into ``out`` and check it against the report."""
    info = build(results, out)
    agree = claims_agree(out, results)
    figures = sum(1 for p in (out / "figures").glob("*") if p.is_file()) if (out / "figures").exists() else 0
    notes = sorted(p.stem for p in (out / "notes").glob("*.html")) if (out / "notes").exists() else []
    metrics: dict[str, Any] = {"pages": len(info["pages"]), "figures": figures, "lab_notes": len(notes),
                               "stages_missing": info["missing"], "within_budget": info["bytes"] <= BUDGET_BYTES,
                               "claims_match_report": agree, "profile": params.base.profile}
    write_json(results / "site" / "metrics.json", metrics)
    pages = pd.DataFrame({"page": info["pages"]})
    claims = read_json(out / "metrics" / "report.claims.json") if agree else {}
    verdicts = pd.DataFrame(claims.get("claims", []))
    tables = {"pages": pages}
    if not verdicts.empty:
        tables["claims"] = verdicts[["id", "paper", "verdict"]]
    print(f"site: {len(info['pages'])} pages, {figures} figures, {len(notes)} lab notes, "
          f"{info['bytes'] / 2**20:.1f} MiB (budget {BUDGET_BYTES / 2**20:.0f} MiB) in {out.name}/")
    return SiteResult(metrics=metrics, tables=tables, artifacts={"site": out}, pages=info["pages"])
