"""The machine's state a benchmark figure is read against: cores and load average before the run
(and after it), so a figure timed on a busy machine says so."""

from __future__ import annotations

import os


def load_before() -> dict[str, float | int | None]:
    """Cores and the 1- and 5-minute load averages, taken before the timed work starts."""
    load1, load5, _ = os.getloadavg()
    return {"cores": os.cpu_count(), "load_1min_before": round(load1, 2), "load_5min_before": round(load5, 2)}


def with_load_after(before: dict[str, float | int | None]) -> dict[str, float | int | None]:
    """``before`` plus the 1-minute load average now, at the end of the timed work."""
    return {**before, "load_1min_after": round(os.getloadavg()[0], 2)}
