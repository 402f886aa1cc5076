"""Helpers the dataset loaders share: finding the documented files, reading JSON lines."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path


class DatasetError(FileNotFoundError):
    """A dataset file is missing or malformed; the message names the file and the fix."""


def find(root: Path, *patterns: str, required: bool = True) -> list[Path]:
    """Files under root matching any glob pattern (searched recursively), sorted."""
    hits = sorted({p for pat in patterns for p in root.rglob(pat) if p.is_file()})
    if required and not hits:
        raise DatasetError(f"{root}: no file matching {' or '.join(patterns)}; download the "
                           f"dataset as its authors document it and point corpora.datasets at "
                           f"the folder")
    return hits


def open_text(path: Path):
    """Open .gz or plain text as UTF-8."""
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else \
        path.open(encoding="utf-8")


def jsonl(path: Path) -> Iterator[dict]:
    """Rows of a JSON-lines file (.gz or not); a malformed line raises with its number."""
    with open_text(path) as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    raise DatasetError(f"{path}:{n}: not valid JSON ({e.msg})") from e


def short_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]
