"""The stage runner: a failure or an interrupt ends with one line; cost.json says what the run cost."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from papermill.exceptions import PapermillExecutionError

from mmrag import stage

DEMO_OUTPUTS = ("data/demo", "results/demo/figure.png")
# the demo stage's cell: a partial output of each declared out (and a half-written temporary file, as a
# killed atomic write leaves), then work that an interrupt stops
DEMO_WORK = ("import pathlib, time\n"
             "for out in ('data/demo/rows.jsonl', 'results/demo/figure.png', 'results/demo/.figure.png.x1.tmp'):\n"
             "    pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)\n"
             "    pathlib.Path(out).write_text('partial')\n"
             "print('working', flush=True)\n"
             "time.sleep(60)\n")


def demo_notebook(path: Path, code: str) -> Path:
    """A stage notebook: its parameters cell, then ``code``."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# demo"),
                nbformat.v4.new_code_cell("base = {}", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(code)]
    nb.metadata = {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"},
                   "language_info": {"name": "python"}}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def make_sandbox(dest: Path, versioned: bool = False) -> Path:
    """A scratch repository the runner accepts, with one stage, `demo` (DEMO_WORK), declaring DEMO_OUTPUTS:
    bin/, src/ and params.yaml copied (src is copied, not linked, so the runner's root is the copy),
    .venv linked. ``versioned``: also a git and DVC repository, for `dvc exp run`."""
    root = Path(stage.ROOT)
    shutil.copytree(root / "bin", dest / "bin")
    shutil.copytree(root / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy2(root / "params.yaml", dest / "params.yaml")
    if (root / ".venv").exists():
        os.symlink(os.path.realpath(root / ".venv"), dest / ".venv")
    spec = {"cmd": "bin/py -m mmrag.stage demo", "params": ["base"],
            "outs": [{out: {"persist": True}} for out in DEMO_OUTPUTS]}
    (dest / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"demo": spec}}, sort_keys=False))
    demo_notebook(dest / "notebooks" / "99_demo.ipynb", DEMO_WORK)
    if versioned:
        (dest / ".gitignore").write_text(".venv\n__pycache__/\n/data/\n/results/\n*.previous\n")
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
        for cmd in (["git", "init", "-q"], [str(dest / "bin" / "py"), "-m", "dvc", "init", "-q"],
                    ["git", "add", "-A"], ["git", "commit", "-qm", "sandbox"]):
            subprocess.run(cmd, cwd=dest, env=env, check=True, capture_output=True)
    return dest


def interrupt_when_working(cmd: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``cmd`` in its own process group and, once the demo stage prints that it is working, send
    SIGINT to the whole group, as a terminal's Ctrl-C does; (exit code, stdout and stderr together)."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.strip() == "working":
            os.killpg(proc.pid, signal.SIGINT)
    return proc.wait(timeout=60), "".join(lines)


def left_in(root: Path) -> list[str]:
    """Every file under data/ and results/ (what a run could leave behind)."""
    return sorted(str(p.relative_to(root)) for d in ("data", "results") if (root / d).exists()
                  for p in (root / d).rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory) -> Path:
    return make_sandbox(tmp_path_factory.mktemp("sandbox"))


def test_failure_line_is_one_line_with_the_exception_own_message(tmp_path):
    error = PapermillExecutionError(
        cell_index=3, exec_count=2, source="import json\n\ndocs = ingest(folder)\nmore()", ename="FileNotFoundError",
        evalue="corpora.folder.path: '/nope' is not a folder;\n point it at a folder of .html files",
        traceback=["----", "\x1b[36mCell\x1b[39m\x1b[36m \x1b[39m\x1b[32mIn[2]\x1b[39m\x1b[32m, line 3\x1b[39m\n..."])
    line = stage.failure_line("corpora", error, tmp_path / "03_corpora.ipynb", tmp_path / "corpora.failed.ipynb")
    assert "\n" not in line
    assert line.startswith("stage corpora failed in cell 2 of ")
    assert "`docs = ingest(folder)`" in line
    assert "FileNotFoundError: corpora.folder.path: '/nope' is not a folder; point it at a folder" in line
    assert "corpora.failed.ipynb" in line


def run_in_process(tmp_path: Path, monkeypatch, code: str) -> Path:
    """Point the runner at a demo notebook running ``code`` in tmp_path, its one output data/demo/ holding
    a last good result.json; the path of that file."""
    source = demo_notebook(tmp_path / "99_demo.ipynb", code)
    monkeypatch.setattr(stage, "notebook_for", lambda name: source)
    monkeypatch.setattr(stage, "ROOT", tmp_path)
    monkeypatch.setattr(stage, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(stage, "parameters_for", lambda name, params: {"base": {}})
    monkeypatch.setattr(stage, "declared_sections", lambda name: ["base"])
    monkeypatch.setattr(stage, "model_problems", lambda name, params: [])
    good = tmp_path / "data" / "demo" / "result.json"
    good.parent.mkdir(parents=True)
    good.write_text("last good run")
    monkeypatch.setattr(stage, "declared_outputs", lambda name: [good.parent])
    return good


@pytest.mark.slow
def test_a_failing_notebook_keeps_its_traceback_and_log_and_prints_one_line(tmp_path, monkeypatch, capsys):
    good = run_in_process(tmp_path, monkeypatch, "print('working on it')\n"
                                                  "raise ValueError('x.y must be positive; set x.y: 1')")
    assert stage.main(["demo"]) == 1
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert err[-1].startswith("error: stage demo failed in cell ")
    assert err[-1].endswith("]") and "ValueError: x.y must be positive; set x.y: 1" in err[-1]
    out = tmp_path / "results" / "demo"
    assert (out / "demo.failed.ipynb").exists() and not (out / "demo.ipynb").exists()
    assert "working on it" in (out / "demo.log").read_text()
    assert "working on it" in captured.out, "what the notebook prints reaches the console as it runs"
    assert good.read_text() == "last good run", "a failed stage keeps the previous outputs"


@pytest.mark.slow
def test_cost_json_holds_the_wall_time_and_the_machine_load_beside_it(tmp_path, monkeypatch):
    result = tmp_path / "data" / "demo" / "result.json"
    good = run_in_process(tmp_path, monkeypatch, f"import pathlib\nout = pathlib.Path({str(result)!r})\n"
                                                  "out.parent.mkdir()\nout.write_text('new')")
    assert stage.main(["demo"]) == 0
    assert good.read_text() == "new"
    cost = json.loads((tmp_path / "results" / "demo" / "cost.json").read_text())
    assert sorted(cost) == ["cpu_count", "load_1min_end", "load_1min_start", "peak_rss_mb", "stage", "wall_seconds"]
    assert cost["stage"] == "demo" and cost["cpu_count"] == stage.cpu_count() >= 1
    assert cost["wall_seconds"] > 0 and cost["load_1min_start"] >= 0 and cost["load_1min_end"] >= 0
    assert 10 < cost["peak_rss_mb"] < 100_000, "MB, not kB or bytes: a Python kernel takes tens of MB"
    assert not (good.parent / "metrics.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("earlier_run", [False, True], ids=["first-run", "with-last-good-outputs"])
def test_ctrl_c_ends_a_stage_in_one_line_and_leaves_no_partial_output(sandbox, earlier_run):
    """Ctrl-C reaches the runner (the kernel has its own session): the kernel is killed, not asked to
    shut down inside its cell (which printed a ZMQError traceback), and every partial output goes."""
    for d in ("data", "results"):
        shutil.rmtree(sandbox / d, ignore_errors=True)
    if earlier_run:
        for out, text in (("data/demo/rows.jsonl", "good rows"), ("results/demo/figure.png", "good figure")):
            (sandbox / out).parent.mkdir(parents=True, exist_ok=True)
            (sandbox / out).write_text(text)
    code, output = interrupt_when_working([str(sandbox / "bin" / "py"), "-m", "mmrag.stage", "demo"], sandbox)
    assert code == 130, output
    assert "Traceback" not in output and "Error" not in output, output
    assert output.strip().splitlines()[-1].startswith("stage demo interrupted: its last good outputs are back"), output
    expected = ["data/demo/rows.jsonl", "results/demo/figure.png"] if earlier_run else []
    assert left_in(sandbox) == sorted([*expected, "results/demo/demo.log"]), "the log of the run stays, nothing else"
    if earlier_run:
        assert (sandbox / "results/demo/figure.png").read_text() == "good figure"


def test_outputs_are_set_aside_and_put_back_whole_after_a_failure(tmp_path):
    folder, metrics, absent = tmp_path / "data" / "world", tmp_path / "metrics.json", tmp_path / "new.png"
    folder.mkdir(parents=True)
    (folder / "good.jsonl").write_text("good")
    metrics.write_text("{}")
    kept = stage.set_aside([folder, metrics, absent])
    assert kept == [folder, metrics] and not folder.exists() and not metrics.exists()
    folder.mkdir()
    (folder / "half.jsonl").write_text("partial")  # the failed run's partial output
    absent.write_bytes(b"a figure of the failed run")  # declared, but there was no good copy of it
    stage.put_back(kept, [folder, metrics, absent])
    assert sorted(p.name for p in folder.iterdir()) == ["good.jsonl"] and metrics.read_text() == "{}"
    assert not stage.backup_of(folder).exists()
    assert not absent.exists(), "an output the failed run created is not left behind as a result"


def test_a_killed_kernels_half_written_files_go_with_the_run(tmp_path):
    """mmrag.io writes through a temporary file beside the output (a folder through a temporary
    folder and an .old copy): a kernel killed mid-write leaves them, and they are not results."""
    figure, folder = tmp_path / "figure.png", tmp_path / "world"
    figure.write_text("good")
    kept = stage.set_aside([figure, folder])
    leftovers = [tmp_path / ".figure.png.k2j4.tmp", tmp_path / ".world.old", tmp_path / ".world.x9.tmp"]
    for path in leftovers:
        path.mkdir() if "world" in path.name else path.write_text("half")
    unrelated = tmp_path / ".figure.png.notes"
    unrelated.write_text("not a write of ours")
    stage.put_back(kept, [figure, folder])
    assert figure.read_text() == "good" and not any(p.exists() for p in leftovers) and unrelated.exists()


def test_a_killed_run_leaves_the_good_copy_to_the_next_one(tmp_path):
    out = tmp_path / "metrics.json"
    out.write_text("good")
    stage.set_aside([out])
    out.write_text("partial")  # killed here: no put_back ran
    kept = stage.set_aside([out])  # the next run
    assert not out.exists() and stage.backup_of(out).read_text() == "good"
    out.write_text("fresh")
    stage.discard_previous(kept)
    assert out.read_text() == "fresh" and not stage.backup_of(out).exists()


def test_every_stage_declares_outputs_the_runner_can_check():
    for name in stage.yaml.safe_load((Path(stage.ROOT) / "dvc.yaml").read_text())["stages"]:
        outs = stage.declared_outputs(name)
        assert any(p.name == "metrics.json" for p in outs), name
        spec = stage.yaml.safe_load((Path(stage.ROOT) / "dvc.yaml").read_text())["stages"][name]
        for item in [*spec.get("outs", []), *spec.get("metrics", []), *spec.get("plots", [])]:
            path, opts = next(iter(item.items())) if isinstance(item, dict) else (item, {})
            why = "the runner keeps the last good copy; DVC must not delete it first"
            assert (opts or {}).get("persist") is True, f"{name}: {path} must be persist: true ({why})"


def test_a_missing_model_is_named_before_the_stage_starts(monkeypatch):
    from mmrag import config as cfg_module

    raw = cfg_module.read_raw(cfg_module.PARAMS_FILE)
    raw["toolagent_eval"]["llms"] = ["smollm2-135m-instruct", "no-such-model"]
    raw["models"]["text_encoder"] = "org/some-hub-encoder"
    params = cfg_module.from_dict(raw)
    found = stage.model_problems("toolagent_eval", params)
    assert any(p.startswith("toolagent_eval.llms: model 'no-such-model' is neither a provisioned name") for p in found)
    assert not any("text_encoder" in p for p in found), "toolagent_eval does not declare models.text_encoder"
    found = stage.model_problems("knowledge_map", params)
    assert found and found[0].startswith("models.text_encoder: model 'org/some-hub-encoder' looks like a hub id")
    assert stage.model_problems("models", params) == []  # it is the stage that provisions them


def test_the_mmr2_policy_is_its_own_key_checked_by_every_stage_that_loads_it():
    """The MM-R2 policy has its own key, mmr2_train.policy (so a policy size reruns MM-R2 only, not
    every stage after `models`); each stage that loads it names a missing one up front."""
    from mmrag import config as cfg_module

    raw = cfg_module.read_raw(cfg_module.PARAMS_FILE)
    raw["mmr2_train"]["policy"] = "no-such-policy"
    params = cfg_module.from_dict(raw)
    for name in ("mmr2_traj", "mmr2_train", "two_axis_eval"):
        assert any(p.startswith("mmr2_train.policy: model 'no-such-policy'")
                   for p in stage.model_problems(name, params)), name
        assert "models.llm" not in stage.declared_keys(name), f"{name} would rerun on the models stage's LLM"
    assert not any("no-such-policy" in p for p in stage.model_problems("knowledge_map", params))


def test_a_conditionally_loaded_llm_is_checked_only_when_its_setting_uses_it():
    from mmrag import config as cfg_module

    raw = cfg_module.read_raw(cfg_module.PARAMS_FILE)
    raw["toolagent_finetune"]["zero_shot_llms"] = ["no-such-zero-shot"]
    raw["brit_linking"]["reader_llm"] = "no-such-reader"
    params = cfg_module.from_dict(raw)
    assert any(p.startswith("toolagent_finetune.zero_shot_llms: model 'no-such-zero-shot'")
               for p in stage.model_problems("toolagent_finetune", params))
    raw["brit_linking"]["reader"] = "llm"
    assert any(p.startswith("brit_linking.reader_llm: model 'no-such-reader'")
               for p in stage.model_problems("brit_linking", cfg_module.from_dict(raw)))
    raw["brit_linking"]["reader"] = "similarity"  # the cheap scorer loads no LLM: nothing to check
    assert not any("reader_llm" in p for p in stage.model_problems("brit_linking", cfg_module.from_dict(raw)))


def test_sigterm_interrupts_like_ctrl_c_and_a_second_signal_cannot_cut_the_clean_up_short():
    """`kill` (SIGTERM) is an interrupt: without that the runner would end at once, leaving
    data/.<out>.previous set aside and no outputs in place until the next run. An impatient second
    Ctrl-C is ignored while the last good outputs are put back."""
    code = ("import time\nfrom mmrag import stage\n"
            "with stage.stop_on_interrupt():\n"
            "    try:\n        print('ready', flush=True)\n        time.sleep(60)\n"
            "    except KeyboardInterrupt:\n        print('cleaning up', flush=True)\n        time.sleep(1)\n"
            "        print('cleaned up', flush=True)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline().strip() == "cleaning up"
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert "cleaned up" in out and proc.returncode == 0


def test_traces_and_checkpoints_follow_the_data_folder_at_call_time(tmp_path, monkeypatch):
    """write_traces and checkpoint_dir bound data/ when they were defined, so a test that redirected
    mmrag.io.DATA (tests/test_text_only.py) wrote its traces into the real data/brit_linking."""
    from mmrag import io
    from mmrag.schema import Trace
    from mmrag.train.checkpoints import checkpoint_dir

    monkeypatch.setattr(io, "DATA", tmp_path)
    written = io.write_traces("some_stage", "sys", "qa", [Trace("q1", "sys", "a")])
    assert written == tmp_path / "some_stage" / "traces" / "sys__qa.jsonl" and written.exists()
    assert checkpoint_dir("some_stage", "run") == tmp_path / ".checkpoints" / "some_stage" / "run"


def test_every_stage_reads_exactly_the_sections_dvc_yaml_declares():
    """A stage's Params class is the list of sections it may read; DVC tracks the same list, so a
    section the code reads but dvc.yaml does not declare cannot exist."""
    import dataclasses
    import importlib

    for name in stage.yaml.safe_load((Path(stage.ROOT) / "dvc.yaml").read_text())["stages"]:
        module = importlib.import_module(f"mmrag.stages.{name}")
        fields = [f.name for f in dataclasses.fields(module.Params)]
        assert sorted(fields) == sorted(stage.declared_sections(name)), name


def test_the_runner_knows_no_stage_and_no_model_key_by_name():
    """Model keys are field metadata of the sections, so adding a model setting edits only its
    section's module, never the runner (which no stage's deps list)."""
    source = (Path(stage.ROOT) / "src" / "mmrag" / "stage.py").read_text()
    for name in stage.yaml.safe_load((Path(stage.ROOT) / "dvc.yaml").read_text())["stages"]:
        assert f'"{name}.' not in source and f'p.{name}' not in source, name


def test_the_infrastructure_out_of_the_deps_computes_nothing():
    """The runner, the stages package file and the package marker are in no stage's deps; that is
    honest only while the package files import no module that computes a result."""
    from mmrag import deps

    for name in ("mmrag", "mmrag.stages"):
        path = deps.module_file(name)
        assert deps.imported_names(path.read_text(), name, True) <= {"mmrag.io"}, name
    for name in stage.yaml.safe_load((Path(stage.ROOT) / "dvc.yaml").read_text())["stages"]:
        listed = set(deps.stage_sources(name))
        assert not listed & {"src/mmrag/stage.py", "src/mmrag/stages/__init__.py", "src/mmrag/__init__.py"}, name
