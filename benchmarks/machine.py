"""The machine a benchmark figure is read against, recorded beside the figure in every bench's JSON
(``"machine": {...}``): the cores, the CPU model and the load average before the timed work (and the
1-minute load after it), so that a figure timed on a busy or a different machine says so.

    before = snapshot()                  # before the timed work starts
    ...
    write_json(out, {"machine": with_load_after(before), ...})

Files written before this helper existed (results/bench/*.json of earlier runs) carry
``load_1min_before`` / ``load_5min_before`` instead of ``load_1min`` / ``load_5min`` and no
``cpu_model``; their numbers are left as they were measured.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name (Linux: /proc/cpuinfo's ``model name``; elsewhere what platform says)."""
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")) and ":" in line:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def snapshot() -> dict[str, Any]:
    """Cores, CPU model, the 1- and 5-minute load averages and the OpenMP wait policy, taken before
    the timed work starts."""
    load1, load5, _ = os.getloadavg()
    return {"cores": os.cpu_count(), "cpu_model": cpu_model(), "load_1min": round(load1, 2),
            "load_5min": round(load5, 2),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "libgomp default")}


def with_load_after(before: dict[str, Any]) -> dict[str, Any]:
    """``before`` plus the 1-minute load average now, at the end of the timed work."""
    return {**before, "load_1min_after": round(os.getloadavg()[0], 2)}
