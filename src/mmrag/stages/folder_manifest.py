"""Stage ``folder_manifest``: hash every file of ``corpora.folder.path`` into data/folder_manifest.

DVC runs it on every ``dvc repro`` (``always_changed``); the manifest it writes is byte-identical
while the folder is unchanged, so ``corpora`` (which depends on it) reruns only after an edit.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mmrag.corpora.manifest import folder_manifest, resolve
from mmrag.corpora.params import Corpora
from mmrag.io import ROOT, stage_dirs, write_json
from mmrag.params import Base, Sections
from mmrag.stages import StageResult

STAGE = "folder_manifest"


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    corpora: Corpora


@dataclass
class FolderManifestResult(StageResult):
    """The manifest's files as a table."""


def run(params: Params) -> FolderManifestResult:
    """Write data/folder_manifest/manifest.json (atomically; sorted, no time stamps) and its counts."""
    data_dir, out_dir = stage_dirs(STAGE)
    manifest = folder_manifest(resolve(params.corpora.folder.path, ROOT))
    path = write_json(data_dir / "manifest.json", manifest)
    files = pd.DataFrame(manifest["files"], columns=["path", "bytes", "sha256"])
    metrics = {"files": len(files), "bytes": int(files["bytes"].sum()) if len(files) else 0}
    print(f"{metrics['files']} files, {metrics['bytes']:,} bytes" if len(files) else manifest.get("note", ""))
    write_json(out_dir / "metrics.json", metrics)
    return FolderManifestResult(metrics=metrics, tables={"files": files},
                                artifacts={"manifest": path, "metrics": out_dir / "metrics.json"})
