"""Notebook hygiene: every stage has one output-free source notebook with one `parameters` cell
that declares exactly the params sections the stage lists in dvc.yaml."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest
import yaml

from mmrag import stage

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))  # the stages' (explore.ipynb is not one)
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def test_every_stage_has_exactly_one_notebook_and_vice_versa():
    names = {p.stem.split("_", 1)[1] for p in NOTEBOOKS}
    assert names == set(STAGES), "each dvc stage runs notebooks/NN_<stage>.ipynb, and only those"
    for name in STAGES:
        assert stage.notebook_for(name).exists()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_source_notebook_is_clean(path):
    nb = nbformat.read(str(path), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), \
        f"{path.name}: commit source notebooks without outputs"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: exactly one cell must be tagged 'parameters'"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# "), \
        f"{path.name}: a notebook opens with its title"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_parameters_cell_declares_the_stage_sections(path):
    nb = nbformat.read(str(path), as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    names = {t.id for node in ast.parse(cell.source).body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name)}
    name = path.stem.split("_", 1)[1]
    assert names == set(stage.declared_sections(name)), \
        f"{path.name}: parameters cell must define exactly {stage.declared_sections(name)}"


@pytest.mark.parametrize("name", list(STAGES))
def test_stage_declares_its_notebook_metrics_and_outs(name):
    spec = STAGES[name]
    assert spec["cmd"] == f"bin/py -m mmrag.stage {name}"
    assert str(stage.notebook_for(name).relative_to(ROOT)) in spec["deps"]
    metrics = [next(iter(m)) if isinstance(m, dict) else m for m in spec.get("metrics", [])]
    assert f"results/{name}/metrics.json" in metrics
    outs = [next(iter(o)) if isinstance(o, dict) else o for o in spec.get("outs", [])]
    assert f"results/{name}/{name}.html" in outs
    assert "base" in stage.declared_sections(name)


MAX_CODE_LINES = 60


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_a_paper_over_its_stage_module(path):
    """Experiment logic lives in src/mmrag/stages/<stage>.py, where tests and linters see it."""
    nb = nbformat.read(str(path), as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    lines = [ln for ln in code.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert len(lines) <= MAX_CODE_LINES, f"{path.name}: {len(lines)} code lines; move logic to its stage module"
    tree = ast.parse(code)
    defined = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))]
    assert not defined, f"{path.name} defines {defined}: functions belong in src/"
    short = [a.asname for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
             for a in n.names if a.asname and len(a.asname) == 1]
    assert not short, f"{path.name}: single-letter module aliases {short}"
    name = path.stem.split("_", 1)[1]
    assert f"mmrag.stages import {name}" in code or f"mmrag.stages.{name}" in code, \
        f"{path.name}: the notebook calls mmrag.stages.{name}.run"
