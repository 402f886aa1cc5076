"""Atomic artifact writes and the few file formats the pipeline uses.

Every write goes to a temporary file in the same folder and is renamed into place, so an
interrupted stage never leaves a half-written artifact that a rerun would trust.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
RESULTS = ROOT / "results"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _as_umask_allows(path: Path, mode: int) -> None:
    """mkstemp/mkdtemp create owner-only files; give them the mode a plain open() would."""
    os.chmod(path, mode & ~_umask())


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; it replaces ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    _as_umask_allows(tmp_path, 0o666)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """Save a matplotlib figure atomically (a partial PNG never survives an interrupted stage)."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format=Path(path).suffix.lstrip(".") or "png")
    return Path(path)


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temporary folder that replaces ``path`` (whole) only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    _as_umask_allows(tmp, 0o777)
    try:
        yield tmp
        old = path.with_name(f".{path.name}.old")
        if old.exists():
            shutil.rmtree(old)
        if path.exists():
            path.rename(old)
        tmp.rename(path)
        if old.exists():
            shutil.rmtree(old)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def write_text(path: str | Path, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes(path: str | Path, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def _default(obj: Any) -> Any:
    """JSON for the numpy scalars and arrays that metrics naturally come out as."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    raise TypeError(f"not JSON-serializable: {type(obj).__name__}")


def dumps(obj: Any, indent: int | None = 2) -> str:
    """Deterministic JSON: sorted keys, so the same result is byte-identical."""
    return json.dumps(obj, indent=indent, sort_keys=True, ensure_ascii=False, default=_default)


def write_json(path: str | Path, obj: Any) -> Path:
    return write_text(path, dumps(obj) + "\n")


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_jsonl(path: str | Path, rows: Iterable[Any]) -> Path:
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(dumps(row, indent=None) + "\n")
    return Path(path)


def read_jsonl(path: str | Path) -> list[Any]:
    """Read JSON lines; a malformed line raises with its line number."""
    out = []
    with Path(path).open(encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{i}: not valid JSON ({e.msg})") from e
    return out


def stage_dirs(stage: str) -> tuple[Path, Path]:
    """(data/<stage>, results/<stage>), created."""
    d, r = DATA / stage, RESULTS / stage
    d.mkdir(parents=True, exist_ok=True)
    r.mkdir(parents=True, exist_ok=True)
    return d, r


# --------------------------------------------------------------------------- traces
TRACE_SEP = "__"


def trace_path(stage: str, system: str, question_set: str, data: Path | None = None) -> Path:
    """data/<stage>/traces/<system>__<set>.jsonl: where every system's traces live (``data``: the
    data folder at call time, so a test that redirects DATA is never written past)."""
    return (DATA if data is None else data) / stage / "traces" / f"{system}{TRACE_SEP}{question_set}.jsonl"


def trace_name(path: str | Path) -> tuple[str, str]:
    """(system, question set) of a trace file written by :func:`write_traces` (the set follows the
    last ``__``); a file named otherwise is a system of its own name on a set of that name."""
    stem = Path(path).name.removesuffix(".jsonl")
    system, sep, question_set = stem.rpartition(TRACE_SEP)
    return (system, question_set) if sep else (stem, stem)


def write_traces(stage: str, system: str, question_set: str, traces: Iterable[Any],
                 data: Path | None = None) -> Path:
    """Write one system's traces on one question set (read back by ``schema.load_traces``)."""
    return write_jsonl(trace_path(stage, system, question_set, data), [t.to_dict() for t in traces])
