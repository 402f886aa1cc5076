"""MM-R2's fidelity table loads, every implementation it names exists, and the shared loader
rejects a malformed entry in one line."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from mmrag.evaluate import fidelity_table

TABLE = Path(__file__).resolve().parents[1] / "src" / "mmrag" / "mmr2" / "fidelity.yaml"


def test_mmr2_fidelity_table_loads_and_names_real_code():
    df = fidelity_table.load(TABLE)
    assert len(df) >= 25 and set(df["status"]) == {"same", "deviation"}
    for ours in df["ours"]:
        module, _, name = ours.partition(":")
        obj = importlib.import_module(module)
        for part in filter(None, name.split(".")):
            obj = getattr(obj, part)
    dev = df[df["status"] == "deviation"]
    assert (dev["why"].str.len() > 0).all() and (dev["effect"].str.len() > 0).all()


@pytest.mark.parametrize("entry, message", [
    ({"component": "x", "section": "§1", "quote": "q", "ours": "m:f", "params": "", "status": "maybe"}, "status"),
    ({"component": "x", "section": "§1", "quote": "q", "ours": "m:f", "status": "same"}, "missing params"),
    ({"component": "x", "section": "§1", "quote": "q", "ours": "m:f", "params": "", "status": "deviation"},
     "why and effect"),
    ({"component": "x", "section": "§1", "quote": " ".join(["w"] * 26), "ours": "m:f", "params": "",
      "status": "same"}, "26 words"),
    ({"component": "x", "section": "§1", "quote": "q", "ours": "m:f", "params": "", "status": "same",
      "colour": "red"}, "unknown key"),
])
def test_a_malformed_entry_is_named_in_one_line(tmp_path, entry, message):
    import yaml

    f = tmp_path / "fidelity.yaml"
    f.write_text(yaml.safe_dump({"entries": [entry]}))
    with pytest.raises(ValueError) as e:
        fidelity_table.load(f)
    assert message in str(e.value) and "\n" not in str(e.value) and "entry 0" in str(e.value)
