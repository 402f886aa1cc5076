"""BRIT's Table 1 (Khan, Yamada and Akella, 2025) as its rows here name it, read from the paper's cells.

No number is typed here: every figure is a cell of ``src/mmrag/evaluate/paper_tables.yaml``
(transcribed from the paper text and checked against it by ``mmrag.evaluate.papers --verify``).
This module keeps only what is not a paper number: which of the paper's rows each of our methods
reads, and the kind names. Table 1's "Average" is the paper's printed average over the two complex
(cross-modal) kinds; Image-Image is the simple kind, on which the flat baselines beat BRIT.
"""

from __future__ import annotations

from mmrag.evaluate import papers

TABLE1_SOURCE = "BRIT Table 1, from src/mmrag/evaluate/paper_tables.yaml (the paper's cells)"
KINDS = ("Image-Image", "Text-Image", "Image-Text")
CROSS = ("Text-Image", "Image-Text")  # the complex kinds, averaged in Table 1's "Average"
# our method name -> the paper's Table 1 row
ROWS = {"CLIP": "CLIP", "BLIP": "BLIP2", "BRIT": "BRIT (Ours-Full)"}


def cell(method: str, column: str) -> float:
    """One Table 1 cell of one of our method names (``ROWS``)."""
    return papers.value("BRIT", "Table 1", ROWS[method], column)


def table1() -> dict[str, dict[str, float]]:
    """Table 1 per method and kind, as the paper prints it."""
    return {m: {k: cell(m, k) for k in KINDS} for m in ROWS}


TABLE1 = table1()


def complex_mean(method: str) -> float:
    """The paper's average for one method: its printed Average over the two cross-modal kinds."""
    return cell(method, "Average")


def best_baseline(kind: str) -> float:
    """The best flat baseline's accuracy on one kind ("complex": the printed Average)."""
    flat = [m for m in ROWS if m != "BRIT"]
    return max(complex_mean(m) if kind == "complex" else cell(m, kind) for m in flat)


def brit_vs_best_baseline(kind: str) -> tuple[float, float]:
    """(BRIT, the best flat baseline) on one kind or on "complex"."""
    brit = complex_mean("BRIT") if kind == "complex" else cell("BRIT", kind)
    return brit, best_baseline(kind)
