"""The stage runner: a failure ends with one line naming the stage, the cell and the cause."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from papermill.exceptions import PapermillExecutionError

from mmrag import stage


def test_failure_line_is_one_line_with_the_exception_own_message(tmp_path):
    error = PapermillExecutionError(
        cell_index=3, exec_count=2, source="docs = ingest(folder)\nmore()", ename="FileNotFoundError",
        evalue="corpora.folder.path: '/nope' is not a folder;\n point it at a folder of .html files",
        traceback=["long", "traceback"])
    line = stage.failure_line("corpora", error, tmp_path / "03_corpora.ipynb", tmp_path / "corpora.failed.ipynb")
    assert "\n" not in line
    assert line.startswith("stage corpora failed in cell 2 of ")
    assert "`docs = ingest(folder)`" in line
    assert "FileNotFoundError: corpora.folder.path: '/nope' is not a folder; point it at a folder" in line
    assert "corpora.failed.ipynb" in line


@pytest.mark.slow
def test_a_failing_notebook_keeps_its_traceback_and_log_and_prints_one_line(tmp_path, monkeypatch, capsys):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# t"),
                nbformat.v4.new_code_cell("base = {}", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("print('working on it')\n"
                                          "raise ValueError('x.y must be positive; set x.y: 1')")]
    nb.metadata = {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"},
                   "language_info": {"name": "python"}}
    source = tmp_path / "99_demo.ipynb"
    nbformat.write(nb, str(source))
    monkeypatch.setattr(stage, "notebook_for", lambda name: source)
    monkeypatch.setattr(stage, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(stage, "parameters_for", lambda name, params: {"base": {}})
    assert stage.main(["demo"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: stage demo failed in cell ")
    assert err[-1].endswith("]") and "ValueError: x.y must be positive; set x.y: 1" in err[-1]
    out = tmp_path / "results" / "demo"
    assert (out / "demo.failed.ipynb").exists() and not (out / "demo.ipynb").exists()
    assert "working on it" in (out / "demo.log").read_text()


def test_a_declared_output_the_run_did_not_write_is_named(tmp_path):
    import os
    import time

    fresh, old, missing, folder = (tmp_path / "a.json", tmp_path / "b.png", tmp_path / "c.csv", tmp_path / "d")
    fresh.write_text("{}")
    old.write_text("x")
    os.utime(old, (time.time() - 100, time.time() - 100))
    folder.mkdir()
    assert stage.stale_outputs([fresh, old, missing, folder], time.time() - 10) == [old, missing]


def test_every_stage_declares_outputs_the_runner_can_check():
    for name in stage.yaml.safe_load((Path(stage.ROOT) / "dvc.yaml").read_text())["stages"]:
        outs = stage.declared_outputs(name)
        assert any(p.name == "metrics.json" for p in outs), name
