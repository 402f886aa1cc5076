"""Where an interrupted training resumes from, and when it may.

Checkpoints live under data/.checkpoints/<stage>/, outside the stage's outputs: a failed or
interrupted stage gets its last good outputs back (mmrag.stage), and its checkpoints stay for
the rerun. A checkpoint is resumed only by a run of the same model, data and settings.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import mmrag
from mmrag import io
from mmrag.schema import Trace

STAMP = "FINGERPRINT"


def checkpoint_dir(stage: str, *parts: str, data: Path | None = None) -> Path:
    """data/.checkpoints/<stage>/<parts...>: one training's (or evaluation's) checkpoints; ``data``
    is the data folder at call time, so a test that redirects DATA is never written past."""
    root = (io.DATA if data is None else data) / ".checkpoints" / stage
    return root / Path(*parts) if parts else root


def claim(folder: str | Path, stamp: str, log: Callable[[str], None]) -> Path:
    """Make ``folder`` this run's: checkpoints of another run (a different stamp) are wiped."""
    folder = Path(folder)
    mark = folder / STAMP
    if folder.exists() and (not mark.exists() or mark.read_text() != stamp) and any(folder.iterdir()):
        log(f"{folder} holds checkpoints of another run (model, data or settings changed); starting over")
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    mark.write_text(stamp)
    return folder


def last_checkpoint(folder: Path) -> str | None:
    """The newest checkpoint-N of a claimed folder, or None."""
    from transformers.trainer_utils import get_last_checkpoint  # heavy: imports torch and peft (seconds)

    return get_last_checkpoint(str(folder)) if folder.exists() else None


def release(folder: Path, keep: bool) -> None:
    """After a finished run only its outputs are needed (unless asked to keep the checkpoints)."""
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)


# --------------------------------------------------------------------------- finished evaluation runs
def digest(paths: Iterable[Path]) -> str:
    """sha256 over the files' names and bytes, in a fixed order (no folder: a clone elsewhere matches)."""
    h = hashlib.sha256()
    for f in sorted(paths):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def package_files(*modules: str) -> list[Path]:
    """The .py files of mmrag's ``modules`` (a sub-package or one file, relative to src/mmrag)."""
    pkg = Path(mmrag.__file__).parent
    return [f for m in modules for f in ((pkg / m).rglob("*.py") if (pkg / m).is_dir() else [pkg / m])]


def fingerprint(settings: Mapping[str, Any], code: Iterable[Path], files: Iterable[Path]) -> str:
    """One sha256 over the settings (as JSON), the code's bytes and the input files' bytes:
    what an evaluation run's traces depend on, so a saved run is reused only when they match."""
    return hashlib.sha256("\n".join([io.dumps(dict(settings), indent=None), digest(code),
                                      digest(f for f in files if f.is_file())]).encode()).hexdigest()


def saved_run(folder: Path, name: str, stamp: str) -> list[Trace] | None:
    """A finished run's traces kept by an earlier run of the stage (one that was interrupted, or one
    before a change that cannot alter them), when its fingerprint matches; else None."""
    f = folder / f"{name}.json"
    if not f.exists():
        return None
    saved = io.read_json(f)
    return [Trace.from_dict(t) for t in saved["traces"]] if saved.get("fingerprint") == stamp else None


def save_run(folder: Path, name: str, stamp: str, traces: Sequence[Trace]) -> Path:
    """Keep a finished run under data/.checkpoints (outside the stage's outputs, which a failed
    stage gets back from before it ran), written atomically."""
    return io.write_json(folder / f"{name}.json", {"fingerprint": stamp, "traces": [t.to_dict() for t in traces]})
