"""The evidence that travels with the repository: every trace the claims are decided from, packed
small enough for git, so a clone can recompute claims.json without rerunning anything.

An evidence folder mirrors the layout of data/ (``<stage>/traces/<system>__<set>.jsonl``,
``<corpus>/questions/<set>.jsonl``, ...) with every file gzip-compressed deterministically (no
name, no time stamp in the gzip header: the same traces give the same bytes on any machine) and a
``MANIFEST.json`` of each file's size and sha256. :func:`unpacked` restores the layout into a
temporary folder, so the registry reads a pack exactly as it reads data/.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from mmrag.io import atomic_dir, read_json, read_jsonl, write_json, write_jsonl

MANIFEST = "MANIFEST.json"
# what the claims registry reads under data/, besides the traces and the question sets they answer
SIDE_FILES = ("brit_linking/sensitivity.json",)
UNITS = "knowledge_map/world/passages.jsonl"  # only its passage -> unit columns are packed


def gzip_bytes(data: bytes) -> bytes:
    """gzip with an empty name and mtime 0: the bytes depend on the content only."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def files_to_pack(data: Path, question_sets: Iterable[str]) -> list[str]:
    """Paths (relative to ``data``) of every trace file, the question files of ``question_sets``
    and the side files the registry reads."""
    rel = [p.relative_to(data).as_posix() for p in sorted(data.glob("*/traces/*.jsonl"))]
    rel += [p.relative_to(data).as_posix() for s in sorted(set(question_sets))
            for p in sorted(data.glob(f"*/questions/{s}.jsonl"))]
    rel += [f for f in SIDE_FILES if (data / f).exists()]
    return rel


def pack(data: Path, out: Path, question_sets: Iterable[str]) -> dict[str, dict[str, int | str]]:
    """Write the evidence folder ``out`` from ``data`` (replacing it whole); its manifest."""
    manifest: dict[str, dict[str, int | str]] = {}
    with atomic_dir(out) as tmp:
        for rel in files_to_pack(data, question_sets):
            raw = (data / rel).read_bytes()
            _write(tmp, rel, raw, manifest)
        if (data / UNITS).exists():  # passages carry their text; the registry needs only their units
            rows = [{"passage_id": str(r.get("passage_id", r.get("id"))), "unit": str(r["unit"])}
                    for r in read_jsonl(data / UNITS)]
            reduced = tmp / "_units.jsonl"
            write_jsonl(reduced, rows)
            _write(tmp, UNITS, reduced.read_bytes(), manifest)
            reduced.unlink()
        write_json(tmp / MANIFEST, manifest)
    return manifest


def _write(root: Path, rel: str, raw: bytes, manifest: dict[str, dict[str, int | str]]) -> None:
    target = root / f"{rel}.gz"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(gzip_bytes(raw))
    manifest[rel] = {"bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}


def is_pack(folder: Path) -> bool:
    return (folder / MANIFEST).is_file()


def unpack(evidence: Path, into: Path) -> list[str]:
    """Restore a pack's files into ``into`` (checked against the manifest); their relative paths."""
    manifest = read_json(evidence / MANIFEST)
    for rel, meta in manifest.items():
        packed = evidence / f"{rel}.gz"
        if not packed.exists():
            raise FileNotFoundError(f"evidence: {packed} is in {MANIFEST} but missing; repack with the report stage")
        raw = gzip.decompress(packed.read_bytes())
        if hashlib.sha256(raw).hexdigest() != meta["sha256"]:
            raise ValueError(f"evidence: {packed} does not match its checksum in {MANIFEST}; repack it")
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        (into / rel).write_bytes(raw)
    return sorted(manifest)


@contextlib.contextmanager
def unpacked(folder: Path) -> Iterator[Path]:
    """A data folder to read: ``folder`` itself, or, when it is an evidence pack, its files
    restored into a temporary folder that is removed afterwards."""
    if not is_pack(folder):
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="mmrag-evidence-") as tmp:
        unpack(folder, Path(tmp))
        yield Path(tmp)


def weight(folder: Path) -> int:
    """Bytes the pack takes in git."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
