"""The README tells the truth: CI runs its test command, its pipeline graph names every stage,
and its results block is the report stage's generated table, not hand-typed numbers."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_ci_runs_the_readme_test_command():
    assert "make test" in README
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_dag_block_names_every_stage():
    block = re.search(r"<!-- dag:start -->(.*?)<!-- dag:end -->", README, re.S).group(1)
    for name in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]:
        assert re.search(rf"\b{name}\b", block), f"README dag is missing '{name}': run scripts/update_readme.py"


def test_results_block_is_generated_from_the_report():
    block = re.search(r"<!-- results:start -->\n(.*?)\n<!-- results:end -->", README, re.S).group(1)
    headline = ROOT / "results" / "report" / "headline.md"
    if headline.exists():
        assert headline.read_text().strip() in block, "run scripts/update_readme.py"
    else:
        assert not re.search(r"\d+\.\d+", block), "no numbers in the README before the report exists"
