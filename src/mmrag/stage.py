"""Run one pipeline stage: its notebook, executed by papermill with its params injected.

``python -m mmrag.stage world`` (what dvc.yaml calls, through ``bin/py``):

1. validates the whole params.yaml (a typo fails here, before any work);
2. executes ``notebooks/NN_world.ipynb`` with the sections the stage declares under
   ``params:`` in dvc.yaml injected after its ``parameters`` cell;
3. writes ``results/world/world.ipynb`` and ``results/world/world.html`` atomically, and the
   wall time to ``results/world/cost.json`` (kept out of metrics.json, which must be
   byte-identical across runs with the same seed).

What the notebook prints goes to the console as it runs and to ``results/world/world.log``.
A failure ends with one line: the stage, the cell, the exception's own message; the whole
traceback stays in ``results/world/world.failed.ipynb`` and the log.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from mmrag import config
from mmrag.io import RESULTS, ROOT, write_json, write_text
from mmrag.models.registry import PROVISIONED, ModelError, offline_env, resolve

NOTEBOOKS = ROOT / "notebooks"
KERNEL = "python3"


def notebook_for(stage: str) -> Path:
    """notebooks/NN_<stage>.ipynb (NN orders the notebooks as the pipeline runs them)."""
    found = sorted(NOTEBOOKS.glob(f"[0-9][0-9]_{stage}.ipynb"))
    if len(found) != 1:
        raise SystemExit(f"stage '{stage}': expected one notebooks/NN_{stage}.ipynb, "
                         f"found {[p.name for p in found]}")
    return found[0]


def declared_sections(stage: str, dvc_file: Path = ROOT / "dvc.yaml") -> list[str]:
    """The params sections a stage declares in dvc.yaml: the only ones it may read."""
    stages = yaml.safe_load(dvc_file.read_text())["stages"]
    if stage not in stages:
        raise SystemExit(f"stage '{stage}' is not in dvc.yaml (stages: {', '.join(stages)})")
    sections = []
    for item in stages[stage].get("params", []):
        if isinstance(item, str):
            sections.append(item.split(".")[0])
        elif isinstance(item, dict):  # {params.yaml: [a, b]}
            for keys in item.values():
                sections.extend(k.split(".")[0] for k in keys)
    return sorted(set(sections), key=sections.index)


def model_keys(params: config.Params, declared: list[str]) -> dict[str, tuple[str, Any]]:
    """The declared keys that name a model the stage will load now: key -> (kind, value). A section
    marks such a field with ``mmrag.params.model`` metadata, so the runner knows no stage by name."""
    keys = {}
    for name in config.SECTIONS:
        section = getattr(params, name)
        for f in dataclasses.fields(section):
            kind, when = f.metadata.get("model"), f.metadata.get("model_when")
            key = f"{name}.{f.name}"
            if kind and (key in declared or name in declared) and (when is None or when(section)):
                keys[key] = (kind, getattr(section, f.name))
    return keys


def declared_keys(stage: str, dvc_file: Path = ROOT / "dvc.yaml") -> list[str]:
    """The params a stage declares, as written (a whole section, or a dotted key)."""
    items = yaml.safe_load(dvc_file.read_text())["stages"][stage].get("params", [])
    return [k for i in items for k in ([i] if isinstance(i, str) else [x for v in i.values() for x in v])]


def model_problems(stage: str, params: config.Params) -> list[str]:
    """Models the stage will load that are not there (not provisioned, no such path, a hub id
    offline): found in a second, not after minutes of work. The models stage provisions them."""
    if stage == "models":
        return []
    problems = []
    for key, (kind, value) in model_keys(params, declared_keys(stage)).items():
        for model in value if isinstance(value, tuple) else [value]:
            if kind == "spacy" and model not in PROVISIONED:
                continue  # an installed spaCy package name: spacy.load finds it
            try:
                resolve(model, kind, params.base.allow_network)
            except ModelError as e:
                problems.append(f"{key}: {e}")
    return problems


def parameters_for(stage: str, params: config.Params) -> dict[str, Any]:
    full = config.as_dict(params)
    return {s: full[s] for s in declared_sections(stage)}


def html_of(notebook: Path) -> str:
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(notebook), as_version=4)
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    return body


class StageFailed(RuntimeError):
    """A stage's notebook raised; the message is the one line a user needs."""


def failure_line(stage: str, error: BaseException, source: Path, failed: Path) -> str:
    """One line: where it failed and the exception's own message (not papermill's traceback)."""
    from papermill.exceptions import PapermillExecutionError

    rel = lambda p: p.relative_to(ROOT) if p.is_relative_to(ROOT) else p  # noqa: E731
    if isinstance(error, PapermillExecutionError):
        message = " ".join(str(error.evalue).split()) or "(no message)"
        where = f"cell {error.exec_count} of {rel(source)} (`{failing_line(error)[:60]}`)"
        what = f"{error.ename}: {message}"
    else:
        where, what = f"{rel(source)}", f"{type(error).__name__}: {error}"
    return f"stage {stage} failed in {where}: {what} [traceback: {rel(failed)}]"


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CELL_LINE = re.compile(r"Cell\s+In\s*\[\d+\],\s*line\s+(\d+)")


def failing_line(error: Any) -> str:
    """The cell line that raised (from the cell frame of the traceback), else the cell's first line."""
    lines = str(error.source).splitlines()
    for frame in error.traceback or []:
        found = _CELL_LINE.search(_ANSI.sub("", str(frame)))
        if found and 0 < int(found.group(1)) <= len(lines):
            return lines[int(found.group(1)) - 1].strip()
    return next((ln.strip() for ln in lines if ln.strip()), "")


def _log_to(path: Path) -> logging.Handler:
    """Papermill's cell output (what the notebook prints, progress included) also goes to a log."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("papermill")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return handler


def declared_outputs(stage: str, dvc_file: Path = ROOT / "dvc.yaml") -> list[Path]:
    """Every out, metric and plot file a stage declares in dvc.yaml."""
    spec = yaml.safe_load(dvc_file.read_text())["stages"][stage]
    items = [*spec.get("outs", []), *spec.get("metrics", []), *spec.get("plots", [])]
    return [ROOT / (next(iter(i)) if isinstance(i, dict) else i) for i in items]


def backup_of(path: Path) -> Path:
    return path.with_name(f".{path.name}.previous")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def set_aside(outputs: list[Path]) -> list[Path]:
    """Move the last good outputs beside themselves, so this run writes fresh ones (no stale
    file survives inside a folder) and a failed run can put them back. dvc.yaml marks every
    out `persist: true`, so DVC leaves them to us instead of deleting them first."""
    kept = []
    for out in outputs:
        backup = backup_of(out)
        if backup.exists():  # a run was killed before it could clean up: that is the good copy
            _remove(out)
        elif out.exists():
            os.replace(out, backup)
        else:
            continue
        kept.append(out)
    return kept


def put_back(outputs: list[Path], declared: list[Path] = ()) -> None:
    """After a failure or an interrupt: drop what the run wrote (a declared output that did not exist
    before the run is removed too: a figure of an unfinished run is not a result) and restore the
    last good outputs."""
    for out in declared:
        if out not in outputs:
            _remove(out)
    for out in outputs:
        _remove(out)
        os.replace(backup_of(out), out)


def discard_previous(outputs: list[Path]) -> None:
    for out in outputs:
        _remove(backup_of(out))


def run(stage: str) -> Path:
    import papermill

    params = config.load()
    problems = config.preflight(params, declared_sections(stage)) + model_problems(stage, params)
    if problems:  # cheap checks first: a wrong path or a missing model must not cost minutes of work
        raise config.ConfigError("; ".join(problems))
    if not params.base.allow_network:
        offline_env()
    source = notebook_for(stage)
    out_dir = RESULTS / stage
    out_dir.mkdir(parents=True, exist_ok=True)
    out_nb = out_dir / f"{stage}.ipynb"
    started = time.time()
    running = out_dir / f".{stage}.running.ipynb"
    failed = out_dir / f"{stage}.failed.ipynb"
    outputs = declared_outputs(stage)
    previous = set_aside(outputs)
    handler = _log_to(out_dir / f"{stage}.log")
    try:
        try:
            print(f"stage {stage}: running {source.relative_to(ROOT) if source.is_relative_to(ROOT) else source} "
                  f"(its output follows; also in {handler.baseFilename})", file=sys.stderr, flush=True)
            papermill.execute_notebook(  # what the notebook prints (progress bars too) reaches the console
                str(source), str(running), parameters=parameters_for(stage, params), kernel_name=KERNEL,
                cwd=str(ROOT), progress_bar=False, log_output=True, stdout_file=sys.stdout, stderr_file=sys.stderr)
        except Exception as e:
            if running.exists():  # keep the partial notebook for debugging; never as the result
                os.replace(running, failed)
            raise StageFailed(failure_line(stage, e, source, failed)) from e
        os.replace(running, out_nb)
        write_text(out_dir / f"{stage}.html", html_of(out_nb))
        missing = [p for p in outputs if not p.exists()]
        if missing:
            names = ", ".join(str(p.relative_to(ROOT)) for p in missing)
            raise StageFailed(f"stage {stage} finished without writing {names}, which dvc.yaml declares; "
                              f"write it in the stage module or remove it from the stage's outs")
    except BaseException:  # Ctrl-C included: the last good outputs come back
        running.unlink(missing_ok=True)
        put_back(previous, outputs)
        raise
    finally:
        logging.getLogger("papermill").removeHandler(handler)
        handler.close()
    discard_previous(previous)
    failed.unlink(missing_ok=True)
    write_json(out_dir / "cost.json", {"stage": stage, "wall_seconds": round(time.time() - started, 1)})
    return out_nb


def interrupt_on_sigterm() -> None:
    """Treat SIGTERM (``kill``, a job scheduler's or ``timeout``'s stop) as Ctrl-C: without this
    Python dies at once and the last good outputs stay set aside instead of coming back."""
    def interrupted(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)


def main(argv: list[str] | None = None) -> int:
    interrupt_on_sigterm()
    ap = argparse.ArgumentParser(prog="python -m mmrag.stage", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage")
    args = ap.parse_args(argv)
    try:
        out = run(args.stage)
    except config.ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except StageFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"stage {args.stage} interrupted: its last good outputs are back in place; a rerun resumes "
              f"training from data/.checkpoints where there is one", file=sys.stderr)
        return 130
    print(f"{args.stage}: wrote {out.relative_to(ROOT)} and its .html")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
