"""The evidence pack: the traces behind the claims, compressed for git, restored byte for byte."""

from __future__ import annotations

import json

import pytest

from mmrag.evaluate import evidence


def _data(root):
    (root / "brit_linking" / "traces").mkdir(parents=True)
    (root / "brit_linking" / "traces" / "brit_full__brit.jsonl").write_text('{"question_id": "q1"}\n' * 50)
    (root / "brit_linking" / "sensitivity.json").write_text('[{"knob": "top_k"}]')
    (root / "world" / "questions").mkdir(parents=True)
    (root / "world" / "questions" / "brit.jsonl").write_text('{"id": "q1"}\n')
    (root / "world" / "questions" / "unused.jsonl").write_text('{"id": "u"}\n')
    (root / "knowledge_map" / "world").mkdir(parents=True)
    (root / "knowledge_map" / "world" / "passages.jsonl").write_text(
        json.dumps({"passage_id": "p1", "unit": "u3", "text": "a long passage " * 40}) + "\n")
    return root


def test_a_pack_restores_what_the_registry_reads_and_nothing_else(tmp_path):
    data = _data(tmp_path / "data")
    manifest = evidence.pack(data, tmp_path / "ev", ["brit"])
    assert set(manifest) == {"brit_linking/traces/brit_full__brit.jsonl", "world/questions/brit.jsonl",
                             "brit_linking/sensitivity.json", "knowledge_map/world/passages.jsonl"}
    with evidence.unpacked(tmp_path / "ev") as restored:
        for rel in ("brit_linking/traces/brit_full__brit.jsonl", "world/questions/brit.jsonl",
                    "brit_linking/sensitivity.json"):
            assert (restored / rel).read_bytes() == (data / rel).read_bytes()
        units = [json.loads(line) for line in (restored / evidence.UNITS).read_text().splitlines()]
        assert units == [{"passage_id": "p1", "unit": "u3"}]  # the passage text stays behind
    assert not restored.exists()
    assert evidence.weight(tmp_path / "ev") < sum(p.stat().st_size for p in data.rglob("*") if p.is_file())


def test_the_same_traces_pack_to_the_same_bytes(tmp_path):
    data = _data(tmp_path / "data")
    evidence.pack(data, tmp_path / "a", ["brit"])
    evidence.pack(data, tmp_path / "b", ["brit"])
    for f in (tmp_path / "a").rglob("*"):
        if f.is_file():
            assert f.read_bytes() == (tmp_path / "b" / f.relative_to(tmp_path / "a")).read_bytes(), f


def test_a_damaged_pack_is_named_not_read(tmp_path):
    data = _data(tmp_path / "data")
    evidence.pack(data, tmp_path / "ev", ["brit"])
    packed = tmp_path / "ev" / "world" / "questions" / "brit.jsonl.gz"
    packed.write_bytes(evidence.gzip_bytes(b'{"id": "tampered"}\n'))
    with pytest.raises(ValueError, match="does not match its checksum"):
        evidence.unpack(tmp_path / "ev", tmp_path / "out")


def test_a_plain_data_folder_is_read_in_place(tmp_path):
    data = _data(tmp_path / "data")
    with evidence.unpacked(data) as folder:
        assert folder == data
