"""One module per DVC stage: ``run(params) -> <Stage>Result``.

The notebook of a stage is its paper (question, method, figures, what we see); the stage
module is its experiment: everything it computes, testable and importable by benchmark and
ablation scripts. A result carries tables (DataFrames), figures (matplotlib Figures, already
saved under results/<stage>/), the metrics written to results/<stage>/metrics.json, and the
paths of the artifacts it wrote.

This package file is infrastructure, like the runner (``mmrag.stage``): it only carries results
to the notebook and displays figures, so it is in no stage's DVC deps. It must not compute or
write anything a stage outputs (``tests/test_stage.py`` holds it to that).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class StageResult:
    """What every stage returns to its notebook."""

    metrics: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, Any] = field(default_factory=dict)  # name -> pandas.DataFrame
    figures: dict[str, Any] = field(default_factory=dict)  # name -> matplotlib Figure
    artifacts: dict[str, Path] = field(default_factory=dict)  # name -> path written


def new_figure(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """A Figure and its axes outside pyplot, so it shows where the notebook displays it, not
    where ``run`` made it (arguments as for ``plt.subplots``, plus ``figsize`` and ``layout``)."""
    from matplotlib.figure import Figure

    class NotebookFigure(Figure):
        def _repr_png_(self) -> bytes:
            import io

            buf = io.BytesIO()
            self.savefig(buf, format="png", bbox_inches="tight")
            return buf.getvalue()

    fig = NotebookFigure(figsize=kwargs.pop("figsize", None), layout=kwargs.pop("layout", None))
    axes = fig.subplots(*args, **kwargs)
    return fig, axes
