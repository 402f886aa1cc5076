"""DVC deps are computed from imports: a stage whose code changes must rerun."""

from __future__ import annotations

from pathlib import Path

from mmrag import deps


def _package(tmp: Path) -> Path:
    src = tmp / "src"
    pkg = src / "mmrag"
    (pkg / "stages").mkdir(parents=True)
    (pkg / "sub").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "stage.py").write_text("from mmrag import config\n")
    (pkg / "config.py").write_text("")
    (pkg / "stages" / "__init__.py").write_text("")
    (pkg / "stages" / "demo.py").write_text(
        "from mmrag.sub import helper\n\ndef run():\n    from mmrag.sub.lazy import x  # inside a function\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "helper.py").write_text("from . import rel\nSYSTEMS = {'a': 'mmrag.sub.named:Cls'}\n")
    (pkg / "sub" / "rel.py").write_text("")
    (pkg / "sub" / "lazy.py").write_text("x = 1\n")
    (pkg / "sub" / "named.py").write_text("class Cls: ...\n")
    (pkg / "sub" / "unused.py").write_text("")
    (tmp / "notebooks").mkdir()
    (tmp / "notebooks" / "00_demo.ipynb").write_text(
        '{"cells": [{"cell_type": "code", "source": ["%matplotlib inline\\n", "import mmrag.config\\n"]}]}')
    return src


def test_closure_follows_function_relative_and_registry_imports(tmp_path):
    _package(tmp_path)
    found = set(deps.stage_sources("demo", tmp_path))
    expected = {f"src/mmrag/{p}" for p in (
        "config.py", "stages/demo.py", "sub/__init__.py", "sub/helper.py", "sub/rel.py", "sub/lazy.py", "sub/named.py")}
    assert found == expected  # sub/unused.py is never imported; the runner and package files are infrastructure


def test_problems_name_the_missing_and_the_useless_dep(tmp_path):
    _package(tmp_path)
    listed = [s for s in deps.stage_sources("demo", tmp_path) if not s.endswith("lazy.py")]
    dvc = tmp_path / "dvc.yaml"
    dvc.write_text("stages:\n  demo:\n    deps:\n" + "".join(f"      - {s}\n" for s in listed)
                   + "      - src/mmrag/sub/unused.py\n")
    found = deps.problems(dvc, tmp_path)
    assert any("runs src/mmrag/sub/lazy.py" in p for p in found)
    assert any("lists src/mmrag/sub/unused.py" in p for p in found)
    assert deps.write(dvc, tmp_path)
    assert deps.problems(dvc, tmp_path) == []


def test_every_stage_in_dvc_yaml_lists_exactly_the_modules_it_runs():
    found = deps.problems()
    assert not found, "\n".join(found)


def test_a_data_file_a_module_names_beside_itself_is_a_dep(tmp_path):
    """papers.py reads paper_tables.yaml: a corrected cell must rerun what reads it."""
    src = _package(tmp_path)
    (src / "mmrag" / "sub" / "tables.yaml").write_text("cells: []\n")
    (src / "mmrag" / "sub" / "lazy.py").write_text('x = 1\nTABLES = "tables.yaml"\nOTHER = "absent.yaml"\n')
    found = set(deps.stage_sources("demo", tmp_path))
    assert "src/mmrag/sub/tables.yaml" in found and "src/mmrag/sub/absent.yaml" not in found


def test_a_data_file_a_notebook_names_by_its_repo_path_is_its_stages_dep():
    """The fidelity table a notebook shows is read when the stage runs: an edit to it must rerun
    that stage, and only the stages whose notebooks name it."""
    assert "src/mmrag/brit/fidelity.yaml" in deps.stage_sources("brit_linking")
    assert "src/mmrag/toolagent/fidelity.yaml" in deps.stage_sources("toolagent_eval")
    assert "src/mmrag/mmr2/fidelity.yaml" in deps.stage_sources("two_axis_eval")
    assert not any(f.endswith("fidelity.yaml") for f in deps.stage_sources("brit_seeds"))
    assert deps.notebook_data_files('load("src/mmrag/nowhere.yaml")', deps.ROOT) == set()
