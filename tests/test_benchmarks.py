"""The benchmarks are a DVC pipeline (benchmarks/dvc.yaml): every bench script has a stage, each
stage's code deps are its import closure (they cannot drift), its params exist, and its outputs
are results/bench/*.json kept in git, each with the machine beside the numbers."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, load_script

BENCH = ROOT / "benchmarks"
SPEC = yaml.safe_load((BENCH / "dvc.yaml").read_text())["stages"]
HELPERS = {"machine", "deps"}  # modules of benchmarks/ that are not benches
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py") if p.stem not in HELPERS)
_VAR = re.compile(r"\$\{(key|item\.\w+)\}")


def _resolve(value: Any, key: str, item: dict[str, Any]) -> Any:
    """A foreach body with ${key} and ${item.x} filled in (the only interpolation this file uses)."""
    if isinstance(value, str):
        return _VAR.sub(lambda m: key if m.group(1) == "key" else str(item[m.group(1)[5:]]), value)
    if isinstance(value, list):
        return [_resolve(v, key, item) for v in value]
    if isinstance(value, dict):
        return {_resolve(k, key, item): _resolve(v, key, item) for k, v in value.items()}
    return value


def stages() -> dict[str, dict[str, Any]]:
    """Every stage as DVC names it (``name@key`` for a foreach stage's items), resolved."""
    out = {}
    for name, spec in SPEC.items():
        if "foreach" in spec:
            for key, item in spec["foreach"].items():
                out[f"{name}@{key}"] = _resolve(spec["do"], key, item)
        else:
            out[name] = spec
    return out


def _name(entry: Any) -> str:
    return next(iter(entry)) if isinstance(entry, dict) else str(entry)


def _cmds(spec: dict[str, Any]) -> list[str]:
    return [spec["cmd"]] if isinstance(spec["cmd"], str) else list(spec["cmd"])


def test_bench_scripts_live_in_benchmarks_not_scripts():
    assert not list((ROOT / "scripts").glob("bench_*.py")) and not (ROOT / "scripts" / "ablate_clip.py").exists()
    assert "bench_inference" in SCRIPTS and "ablate_clip" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_bench_script_has_a_stage(script):
    runners = [n for n, s in stages().items() if any(f"benchmarks/{script}.py" in c for c in _cmds(s))]
    assert runners, f"benchmarks/{script}.py: no stage of benchmarks/dvc.yaml runs it"


def test_every_stage_runs_from_the_repo_root_with_bin_py():
    for name, spec in stages().items():
        assert spec.get("wdir") == "..", f"{name}: wdir must be .. (repo-relative paths)"
        for cmd in _cmds(spec):
            assert cmd.startswith("bin/py benchmarks/"), f"{name}: {cmd}"


def test_code_deps_are_the_import_closure():
    deps = load_script("deps")
    found = deps.problems()
    assert not found, "\n".join(found)


def test_closure_follows_benchmark_modules():
    deps = load_script("deps")
    files = deps.script_sources("bench_lora")
    assert {"benchmarks/bench_lora.py", "benchmarks/bench_quant.py", "benchmarks/machine.py"} <= set(files)
    assert "src/mmrag/models/generation.py" in files and "src/mmrag/config.py" in files
    assert not any(f.startswith("benchmarks/deps") for f in files)


def test_outs_are_bench_json_kept_in_git_and_named_in_the_cmd():
    for name, spec in stages().items():
        outs = spec.get("outs", [])
        jsons = [_name(o) for o in outs if _name(o).endswith(".json")]
        assert jsons, f"{name}: no results/bench/*.json out"
        for out in outs:
            path, opts = _name(out), out[_name(out)] if isinstance(out, dict) else {}
            assert opts.get("cache") is False and opts.get("persist") is True, \
                f"{name}: {path} needs cache: false and persist: true"
            if path.endswith(".json"):
                assert Path(path).parent == Path("results/bench"), f"{name}: {path} is not in results/bench/"
                assert all(f"--out {path}" in c for c in _cmds(spec)), f"{name}: its cmd does not write {path}"
            else:  # a kept adapter another bench reads
                assert path.startswith("data/.cache/bench_"), f"{name}: {path}"
                assert any(f"--keep {path}" in c for c in _cmds(spec)), f"{name}: its cmd does not keep {path}"


def test_every_result_file_is_made_by_a_stage():
    made = {_name(o) for s in stages().values() for o in s.get("outs", [])}
    for path in sorted((ROOT / "results" / "bench").glob("*.json")):
        assert str(path.relative_to(ROOT)) in made, f"{path.name}: no stage of benchmarks/dvc.yaml makes it"


def test_params_keys_exist_in_params_yaml():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for name, spec in stages().items():
        for key in spec.get("params", []):
            assert isinstance(key, str), f"{name}: params of another file are not expected: {key}"
            node = params
            for part in key.split("."):
                assert isinstance(node, dict) and part in node, f"{name}: params.yaml has no {key}"
                node = node[part]


def test_deps_on_kept_adapters_come_from_a_stage():
    made = {_name(o) for s in stages().values() for o in s.get("outs", [])}
    for name, spec in stages().items():
        for dep in map(_name, spec.get("deps", [])):
            if dep.startswith("data/.cache/"):
                assert dep in made, f"{name}: reads {dep}, which no bench stage keeps"


def test_every_bench_records_the_machine_through_the_helper():
    for script in SCRIPTS:
        text = (BENCH / f"{script}.py").read_text()
        assert re.search(r"^from machine import .*with_load_after", text, re.M), script
        assert '"machine": with_load_after(' in text, f"{script}: its JSON lacks the machine"
        assert "getloadavg" not in text or script == "bench_training_seeds", f"{script}: load read by hand"


def test_machine_snapshot_has_cores_cpu_and_load():
    machine = load_script("machine")
    before = machine.snapshot()
    assert before["cores"] >= 1 and before["cpu_model"] and isinstance(before["load_1min"], float)
    after = machine.with_load_after(before)
    assert set(after) == set(before) | {"load_1min_after"}


def test_cpu_model_reads_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Example CPU @ 2.0GHz\n")
    assert load_script("machine").cpu_model(info) == "Example CPU @ 2.0GHz"


def test_cmds_parse_as_shell_words():
    for name, spec in stages().items():
        for cmd in _cmds(spec):
            assert "${" not in cmd, f"{name}: unresolved {cmd}"
            shlex.split(cmd)


def test_dvc_loads_every_pipeline_of_the_repository():
    """DVC reads every dvc.yaml before any repro: one invalid bench stage (a dvc.yaml as a dep, say)
    would stop the main pipeline too."""
    proc = subprocess.run([str(ROOT / "bin" / "py"), "-m", "dvc", "stage", "list", "--all"], cwd=ROOT,
                          text=True, capture_output=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "bench_judge" in proc.stdout and "two_axis_eval" in proc.stdout


def test_ask_bench_splits_the_cold_answer_from_the_warm_ones():
    bench = load_script("bench_ask")
    answers = [{"seconds": 9.0, "tokens_in": 900, "tokens_out": 40, "answer": "Helix"},
               {"seconds": 2.0, "tokens_in": 500, "tokens_out": 20, "answer": "Corp"},
               {"seconds": 4.0, "tokens_in": 700, "tokens_out": 30, "answer": ""},
               {"seconds": 3.0, "tokens_in": 600, "tokens_out": 10, "answer": "Vantor"}]
    row = bench.summarise(12.5, answers)
    assert row["cold_seconds"] == 21.5 and row["first_answer_seconds"] == 9.0
    warm = (row["warm_n"], row["warm_median_seconds"], row["warm_min_seconds"], row["warm_max_seconds"])
    assert warm == (3, 3.0, 2.0, 4.0)
    assert row["warm_tokens_in_median"] == 600 and row["answered"] == 3
    assert bench.meets("brit", row) is True and bench.meets("bm25", row) is None
    assert bench.meets("brit", {**row, "warm_median_seconds": 5.5}) is False
