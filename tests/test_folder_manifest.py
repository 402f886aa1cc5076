"""The folder manifest DVC tracks for `corpora`: byte-identical while nothing changes, different
after an edit, an added or a removed file; hidden files do not count."""

from __future__ import annotations

import dataclasses

import pytest

from mmrag import config, io
from mmrag.corpora.manifest import folder_manifest, resolve
from mmrag.stages import folder_manifest as stage


def make_folder(root):
    (root / "questions").mkdir(parents=True)
    (root / "a.md").write_text("# A\n\nAlpha.\n")
    (root / "questions" / "qa.jsonl").write_text('{"question": "A?", "answer": "Alpha"}\n')
    (root / ".DS_Store").write_bytes(b"\0")
    return root


def test_manifest_is_sorted_and_changes_only_with_the_files(tmp_path):
    folder = make_folder(tmp_path / "docs")
    first = folder_manifest(folder)
    assert [f["path"] for f in first["files"]] == ["a.md", "questions/qa.jsonl"]  # hidden file left out
    assert folder_manifest(folder) == first
    (folder / ".DS_Store").write_bytes(b"\1")
    assert folder_manifest(folder) == first
    (folder / "a.md").write_text("# A\n\nAlpha, edited.\n")
    edited = folder_manifest(folder)
    assert edited != first and edited["files"][0]["sha256"] != first["files"][0]["sha256"]
    (folder / "b.md").write_text("# B\n")
    assert [f["path"] for f in folder_manifest(folder)["files"]] == ["a.md", "b.md", "questions/qa.jsonl"]
    assert folder_manifest(None)["files"] == []
    with pytest.raises(FileNotFoundError, match="corpora.folder.path"):
        folder_manifest(tmp_path / "nowhere")
    assert resolve("rel/dir", tmp_path) == tmp_path / "rel" / "dir" and resolve(None, tmp_path) is None


def test_stage_rewrites_a_byte_identical_manifest_until_a_file_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(io, "DATA", tmp_path / "data")
    monkeypatch.setattr(io, "RESULTS", tmp_path / "results")
    folder = make_folder(tmp_path / "docs")
    p = config.load()
    params = dataclasses.replace(p, corpora=dataclasses.replace(
        p.corpora, folder=dataclasses.replace(p.corpora.folder, path=str(folder))))
    out = stage.run(params).artifacts["manifest"]
    before = out.read_bytes()
    assert stage.run(params).metrics == {"files": 2, "bytes": sum(f.stat().st_size for f in
                                                                   [folder / "a.md", folder / "questions/qa.jsonl"])}
    assert out.read_bytes() == before
    (folder / "questions" / "qa.jsonl").write_text('{"question": "A?", "answer": "Alpha!"}\n')
    stage.run(params)
    assert out.read_bytes() != before
