"""BRIT's own numbers (Khan, Yamada and Akella, 2025), the one place this repository keeps them.

Table 1 is QA accuracy by question type as the authors' project page gives it; "complex" is the
mean of the two cross-modal kinds, the average the paper reports (Image-Image is the simple kind,
on which the flat baselines match BRIT).
"""

from __future__ import annotations

TABLE1_SOURCE = "BRIT Table 1 as on the authors' project page (ast-fri.github.io/BRIT)"
TABLE1 = {
    "CLIP": {"Image-Image": 0.81, "Text-Image": 0.70, "Image-Text": 0.76},
    "BLIP": {"Image-Image": 0.82, "Text-Image": 0.68, "Image-Text": 0.78},
    "BRIT": {"Image-Image": 0.81, "Text-Image": 0.89, "Image-Text": 0.81},
}
CROSS = ("Text-Image", "Image-Text")


def complex_mean(method: str) -> float:
    """The paper's average for one method: the mean over the two cross-modal kinds."""
    return round(sum(TABLE1[method][k] for k in CROSS) / len(CROSS), 4)


def best_baseline(kind: str) -> float:
    """The best flat baseline's accuracy on one kind ("complex": the mean of the cross-modal ones)."""
    flat = [m for m in TABLE1 if m != "BRIT"]
    return max(complex_mean(m) if kind == "complex" else TABLE1[m][kind] for m in flat)


def brit_vs_best_baseline(kind: str) -> tuple[float, float]:
    """(BRIT, the best flat baseline) on one kind or on "complex": a claim's paper values."""
    brit = complex_mean("BRIT") if kind == "complex" else TABLE1["BRIT"][kind]
    return brit, best_baseline(kind)
