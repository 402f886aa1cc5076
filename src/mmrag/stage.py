"""Run one pipeline stage: its notebook, executed by papermill with its params injected.

``python -m mmrag.stage world`` (what dvc.yaml calls, through ``bin/py``):

1. validates the whole params.yaml (a typo fails here, before any work);
2. executes ``notebooks/NN_world.ipynb`` with the sections the stage declares under
   ``params:`` in dvc.yaml injected after its ``parameters`` cell;
3. writes ``results/world/world.ipynb`` and ``results/world/world.html`` atomically, and what
   the run cost to ``results/world/cost.json``: the wall time with what a reader needs to judge
   it (the 1-minute load average at start and at end, the CPU count, the peak memory of the
   stage's processes). It is kept out of metrics.json, which must be byte-identical across runs
   with the same seed.

What the notebook prints goes to the console as it runs and to ``results/world/world.log``.
A failure ends with one line: the stage, the cell, the exception's own message; the whole
traceback stays in ``results/world/world.failed.ipynb`` and the log. An interrupt (Ctrl-C,
SIGTERM) ends with one line too: the kernel is killed, what the run wrote is removed and the
last good outputs are put back; a second Ctrl-C meanwhile is ignored, so that cannot be cut short.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import glob
import logging
import os
import re
import resource
import shutil
import signal
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar


def _interrupted_while_loading(signum: int, frame: Any) -> None:
    """Ctrl-C before the runner has touched anything ends in one line, not in an import's traceback."""
    print(f"stage {' '.join(sys.argv[1:2])} interrupted before it started; nothing was changed", file=sys.stderr)
    raise SystemExit(130)


if __name__ == "__main__":  # before the imports below, which take a second or more on a busy machine
    signal.signal(signal.SIGINT, _interrupted_while_loading)

import yaml  # noqa: E402
from jupyter_client.manager import AsyncKernelManager  # noqa: E402

from mmrag import config  # noqa: E402
from mmrag.io import RESULTS, ROOT, write_json, write_text  # noqa: E402
from mmrag.models.registry import PROVISIONED, ModelError, offline_env, resolve  # noqa: E402

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


def partial_writes(out: Path) -> list[Path]:
    """What an atomic write of ``out`` (mmrag.io) leaves beside it when its process is killed
    mid-write: the temporary file or folder, and a folder's old copy it had moved aside."""
    name = glob.escape(out.name)
    return [*out.parent.glob(f".{name}.*.tmp"), *out.parent.glob(f".{name}.old")]


def put_back(outputs: list[Path], declared: list[Path] = ()) -> None:
    """After a failure or an interrupt: drop what the run wrote (a declared output that did not exist
    before the run is removed too: a figure of an unfinished run is not a result; so is a killed
    kernel's half-written temporary file) and restore the last good outputs."""
    for out in declared:
        for partial in partial_writes(out):
            _remove(partial)
        if out not in outputs:
            _remove(out)
    for out in outputs:
        _remove(out)
        os.replace(backup_of(out), out)


def discard_previous(outputs: list[Path]) -> None:
    for out in outputs:
        _remove(backup_of(out))


class StageKernel(AsyncKernelManager):
    """The notebook's kernel, as nbclient starts and stops it, except that an interrupted stage kills it.

    jupyter_client's polite shutdown interrupts the kernel and at once asks it to quit, so a kernel
    stopped inside a cell answers on a socket that is already closed and prints a ZMQError traceback
    after the runner's one-line summary. Killed (its whole process group: workers too), it prints
    nothing and writes nothing once the last good outputs are back in place."""

    stopping: ClassVar[threading.Event] = threading.Event()
    started: ClassVar[weakref.WeakSet[StageKernel]] = weakref.WeakSet()

    async def start_kernel(self, **kw: Any) -> None:
        StageKernel.started.add(self)
        await super().start_kernel(**kw)

    async def shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:
        await super().shutdown_kernel(now=now or self.stopping.is_set(), restart=restart)


def kill_kernels() -> None:
    """Kill every kernel this process started that still runs. nbclient shuts its kernel down when a
    cell is interrupted, but not when the interrupt comes while the kernel is starting (or while it
    is being shut down); left alive, it would print its own farewell after the summary line."""
    from jupyter_core.utils import run_sync

    for kernel in list(StageKernel.started):
        if kernel.has_kernel:
            run_sync(kernel.shutdown_kernel)(now=True)


@contextlib.contextmanager
def stop_on_interrupt() -> Iterator[None]:
    """Ctrl-C and SIGTERM (``kill``, a job scheduler's or ``timeout``'s stop) raise KeyboardInterrupt
    once; later ones are ignored, so the second Ctrl-C of an impatient user cannot cut short the clean-up
    that puts the last good outputs back (a second at most). Without the SIGTERM handler Python would die
    at once, leaving the outputs set aside until the next run."""
    def interrupted(signum: int, frame: Any) -> None:
        if StageKernel.stopping.is_set():
            return
        StageKernel.stopping.set()
        raise KeyboardInterrupt(f"signal {signum}")

    StageKernel.stopping.clear()
    previous = {s: signal.signal(s, interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def cpu_count() -> int:
    """The CPUs this process may run on (a container or ``taskset`` may allow fewer than the machine has)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def peak_rss_mb() -> float:
    """The peak resident memory of the runner or of its largest finished child (the kernel, which does
    the work), in MB. ru_maxrss is in kilobytes on Linux, in bytes on macOS."""
    unit = 1 if sys.platform == "darwin" else 1024
    peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return round(peak * unit / 1e6, 1)


def cost(stage: str, wall_seconds: float, load_at_start: float) -> dict[str, Any]:
    """The wall time, with what a reader needs to judge it: how busy the machine was (the 1-minute load
    average at start and at end, against the CPU count) and how much memory the stage took."""
    return {"stage": stage, "wall_seconds": round(wall_seconds, 1), "load_1min_start": round(load_at_start, 2),
            "load_1min_end": round(os.getloadavg()[0], 2), "cpu_count": cpu_count(), "peak_rss_mb": peak_rss_mb()}


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
    started, load_at_start = time.monotonic(), os.getloadavg()[0]
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
                cwd=str(ROOT), progress_bar=False, log_output=True, stdout_file=sys.stdout, stderr_file=sys.stderr,
                kernel_manager_class=StageKernel)
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
        kill_kernels()  # before the put-back: a live kernel could still write an output
        running.unlink(missing_ok=True)
        put_back(previous, outputs)
        raise
    finally:
        logging.getLogger("papermill").removeHandler(handler)
        handler.close()
    discard_previous(previous)
    failed.unlink(missing_ok=True)
    write_json(out_dir / "cost.json", cost(stage, time.monotonic() - started, load_at_start))
    return out_nb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mmrag.stage", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage")
    args = ap.parse_args(argv)
    try:
        with stop_on_interrupt():
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
