"""Where an interrupted training resumes from, and when it may.

Checkpoints live under data/.checkpoints/<stage>/, outside the stage's outputs: a failed or
interrupted stage gets its last good outputs back (mmrag.stage), and its checkpoints stay for
the rerun. A checkpoint is resumed only by a run of the same model, data and settings.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from mmrag import io

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
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(folder)) if folder.exists() else None


def release(folder: Path, keep: bool) -> None:
    """After a finished run only its outputs are needed (unless asked to keep the checkpoints)."""
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
