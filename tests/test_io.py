"""io.py: writes are atomic (an exception leaves the old file intact) and JSON is deterministic."""

from __future__ import annotations

import pytest

from mmrag import io


def test_atomic_write_keeps_old_content_on_failure(tmp_path):
    target = tmp_path / "a.json"
    io.write_json(target, {"v": 1})
    with pytest.raises(RuntimeError):
        with io.atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert io.read_json(target) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"], "no temp file left behind"


def test_atomic_dir_replaces_whole_folder_only_on_success(tmp_path):
    target = tmp_path / "index"
    with io.atomic_dir(target) as tmp:
        (tmp / "x").write_text("1")
    with pytest.raises(ValueError):
        with io.atomic_dir(target) as tmp:
            (tmp / "y").write_text("2")
            raise ValueError
    assert sorted(p.name for p in target.iterdir()) == ["x"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]


def test_json_is_byte_identical_regardless_of_key_order(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    io.write_json(a, {"b": 1, "a": [1.5, 2]})
    io.write_json(b, {"a": [1.5, 2], "b": 1})
    assert a.read_bytes() == b.read_bytes()


def test_jsonl_roundtrip_and_bad_line_is_located(tmp_path):
    p = tmp_path / "x.jsonl"
    io.write_jsonl(p, [{"a": 1}, {"a": 2}])
    assert io.read_jsonl(p) == [{"a": 1}, {"a": 2}]
    p.write_text('{"a": 1}\n{oops\n')
    with pytest.raises(ValueError, match=r"x\.jsonl:2"):
        io.read_jsonl(p)


def test_atomic_writes_follow_the_umask_not_owner_only(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        io.write_json(tmp_path / "m.json", {"v": 1})
        with io.atomic_dir(tmp_path / "d") as tmp:
            (tmp / "x").write_text("1")
    finally:
        os.umask(old)
    assert (tmp_path / "m.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o755
