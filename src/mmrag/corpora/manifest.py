"""A manifest of a folder's files (path, size, sha256): what DVC tracks so that an edit reruns `corpora`.

The folder of your documents lives outside the repository and its path is a param, so DVC cannot
hash it itself. The ``folder_manifest`` stage (always run) writes this manifest; ``corpora``
depends on it, so an edited, added or removed file reruns ``corpora`` and everything after it,
and an unchanged folder leaves the manifest byte-identical, so nothing reruns.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

CHUNK = 1 << 20  # bytes hashed per read


def resolve(path: str | None, root: Path) -> Path | None:
    """The folder a ``corpora.folder.path`` names (relative to the repository root), or None."""
    if not path:
        return None
    p = Path(path)
    return p if p.is_absolute() else root / p


def sha256(path: Path) -> str:
    """The file's sha256, read in chunks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def folder_manifest(folder: Path | None) -> dict[str, Any]:
    """{"files": [{path, bytes, sha256}] sorted by path}: hidden files and folders (a leading dot)
    are left out; None (the demo folder, built from data/wiki) has no files."""
    if folder is None:
        return {"files": [], "note": "corpora.folder.path is null: the demo folder is built from data/wiki"}
    if not folder.is_dir():
        raise FileNotFoundError(f"corpora.folder.path: '{folder}' is not a folder")
    files = sorted((p for p in folder.rglob("*") if p.is_file()
                    and not any(part.startswith(".") for part in p.relative_to(folder).parts)),
                   key=lambda p: p.relative_to(folder).as_posix())
    return {"files": [{"path": p.relative_to(folder).as_posix(), "bytes": p.stat().st_size, "sha256": sha256(p)}
                      for p in files]}
