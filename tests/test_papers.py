"""The papers' tables as data (src/mmrag/evaluate/paper_tables.yaml): it loads, every cell is unique
and has a known unit, known answers read back as printed, and every cell is found in the paper texts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import PAPERS_DIR, needs_papers

from mmrag.evaluate import papers

ROOT = Path(__file__).resolve().parents[1]




def test_the_file_loads_with_cells_for_every_paper_and_notes():
    tables = papers.load()
    assert {c.paper for c in tables.cells} == set(papers.PAPERS)
    assert {(c.paper, c.table) for c in tables.cells} >= {
        ("BRIT", "Table 1"), ("BRIT", "Table 2"), ("BRIT", "Table 3"), ("DnC", "Table 3"), ("DnC", "Table 4"),
        ("MM-R2", "Table 1"), ("MM-R2", "Table 2"), ("MM-R2", "Table 3 (a)"), ("MM-R2", "Table 3 (b)"),
        ("MM-R2", "§6.3"), ("MM-R2", "Appendix B")}
    assert {n.paper for n in tables.notes} == set(papers.PAPERS)


def test_no_cell_is_listed_twice():
    keys = [c.key for c in papers.cells()]
    assert len(keys) == len(set(keys))


def test_every_unit_is_known_and_every_value_is_the_printed_number():
    for c in papers.cells():
        assert c.unit in papers.UNITS, c.name()
        assert papers._number(c.printed) == pytest.approx(c.value), c.name()


def test_brit_table1_full_row_is_as_the_paper_prints_it():
    row = {col: papers.cell("BRIT", "Table 1", "BRIT (Ours-Full)", col).printed
           for col in ("Image-Image", "Text-Image", "Image-Text", "Average")}
    assert row == {"Image-Image": "0.78", "Text-Image": "0.72", "Image-Text": "0.89", "Average": "0.80"}
    assert papers.value("BRIT", "Table 1", "BRIT (Ours-Full)", "Average") == pytest.approx(0.80)
    # the text's "0.73 vs 0.81" is kept apart, and the conflict is a note
    assert papers.value("BRIT", "§6.1", "BRIT", "complex QA accuracy") == pytest.approx(0.81)
    assert any("0.73 vs 0.81" in n.what and "0.80" in n.what for n in papers.notes("BRIT"))


def test_known_answers_of_the_other_tables():
    assert papers.cell("BRIT", "Table 2", "BRIT [CA+LS+SI]", "Words").printed == "261.0"
    assert papers.value("BRIT", "Table 3", "BRIT (Ours-Full)", "w/ NEA") == pytest.approx(0.98)
    assert papers.cell("DnC", "Table 4", "StableLM∗ 7b Ours", "F1").printed == "16.36"
    assert papers.value("DnC", "Table 3", "ChatGPT NA Ours", "Average Tool Calls") == pytest.approx(5.07)
    assert papers.cell("MM-R2", "§6.3", "MM-R2", "Route Recall@1").printed == "0.7400"
    assert papers.value("MM-R2", "§6.3", "MM-R2", "Explanation Sparsity") == pytest.approx(18.282)
    traj = papers.cell("MM-R2", "Appendix B", "MM-R2-Traj", "trajectories with two or three retrieval steps")
    assert (traj.printed, traj.value, traj.unit) == ("22K", 22000, "count")


def test_value_gives_percentages_as_fractions_and_other_units_as_printed():
    assert papers.value("DnC", "Table 3", "ChatGPT NA Ours", "EM") == pytest.approx(0.4371)
    assert papers.value("MM-R2", "Table 1", "MM-R2", "InfoSeek All") == pytest.approx(0.543)
    assert papers.value("MM-R2", "Table 2", "MM-R2", "Top-1") == pytest.approx(0.479)
    assert papers.value("BRIT", "Table 1", "CLIP", "Image-Text") == pytest.approx(0.76)  # a fraction stays
    assert papers.value("BRIT", "Table 2", "CLIP (k=2)", "Words") == pytest.approx(206.2)  # words stay words
    assert papers.value("DnC", "Table 2", "MultiModalQA", "Train") == 23817


def test_lookup_ignores_latex_the_finetuned_mark_and_case():
    assert papers.value("DnC", "Table 3", "StableLM 7b mm-ReAct", "$F_{1}$") == pytest.approx(0.145)
    assert papers.value("BRIT", "Table 3", "CLIP ($k$=2)", "w/o NEA") == pytest.approx(0.82)


def test_an_unknown_cell_is_a_key_error_naming_the_closest():
    with pytest.raises(KeyError, match=r"BRIT \(Ours-Full\)"):
        papers.value("BRIT", "Table 1", "BRIT (Full)", "Average")
    with pytest.raises(KeyError, match="unknown paper"):
        papers.cells("GPT")


@pytest.mark.parametrize("change, message", [
    ("unit: fraction", "unit 'fractions' is not one of"),
    ("value: 0.81", "value must be a number"),
    ("row: \"CLIP\"", "duplicates cell"),
])
def test_a_malformed_file_is_a_one_line_error_naming_the_cell(tmp_path, change, message):
    good = ("tables:\n  - {paper: BRIT, table: T, caption: c, start: a, end: b}\ncells:\n"
            "  - {paper: BRIT, table: T, row: \"CLIP\", column: X, value: 0.81, unit: fraction, source: s}\n")
    bad = {"unit: fraction": "unit: fractions", "value: 0.81": "value: \"0.81\""}.get(change)
    second = "  - {paper: BRIT, table: T, row: \"CLIP\", column: X, value: 0.70, unit: fraction, source: s}\n"
    text = good.replace(change, bad) if bad else good + second
    path = tmp_path / "tables.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(papers.TablesError) as e:
        papers.load(path)
    assert message in str(e.value) and "BRIT / T / CLIP / X" in str(e.value) and "\n" not in str(e.value)


def test_cli_json_lists_the_cells(capsys):
    assert papers.main(["--json", "--paper", "BRIT"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == len(papers.cells("BRIT"))
    assert {"paper": "BRIT", "table": "Table 1", "row": "BRIT (Ours-Full)", "column": "Average",
            "value": 0.8} in rows
    assert all(set(r) == {"paper", "table", "row", "column", "value"} for r in rows)


def test_cli_prints_a_table_per_paper_table(capsys):
    assert papers.main(["--paper", "DnC"]) == 0
    out = capsys.readouterr().out
    assert "## DnC Table 3" in out and "## DnC Table 4" in out and "43.71" in out and "note [DnC" in out


@needs_papers
def test_every_cell_is_found_in_the_paper_texts():
    proc = subprocess.run([str(ROOT / "bin" / "py"), "-m", "mmrag.evaluate.papers", "--verify", str(PAPERS_DIR)],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(papers.cells())} cells, 0 problem(s)" in proc.stdout


@needs_papers
@pytest.mark.parametrize("old, new, found", [
    # a number changed in a tab-separated table: its row's numbers no longer match the text
    ("row: \"BRIT [CA+LS]\", column: \"Words\", value: 245.7", "row: \"BRIT [CA+LS]\", column: \"Words\", value: 254.7",
     "BRIT / Table 2 / BRIT [CA+LS]: the text prints 0.87 0.71 0.79 245.7 1.78"),
    # two linker rows swapped by name
    ("\"BRIT [LP]\"", "\"BRIT [LX]\"", "row 'BRIT [LX]' stands where the text's row is 'BRIT [LP]'"),
    # a text-stated figure that its quote does not hold
    ("column: \"Top-2\", value: 51.0", "column: \"Top-2\", value: 51.9", "Top-2 = 51.9: not in its quote"),
    # a quote that is not the paper's
    ("RL further improves performance to", "RL further improved performance to", "quote not in the paper"),
])
def test_verify_reports_a_cell_the_text_does_not_print(tmp_path, old, new, found):
    text = papers.TABLES_FILE.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "tables.yaml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    problems = papers.verify(PAPERS_DIR, path)
    assert any(found in p for p in problems), problems
    assert papers.main(["--verify", str(PAPERS_DIR), "--tables", str(path)]) == 1
