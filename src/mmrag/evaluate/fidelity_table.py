"""Fidelity tables: what a paper states, where this repository implements it, and where they differ.

A paper's fidelity file (``src/mmrag/<paper>/fidelity.yaml``) is a mapping with ``paper`` (its title)
and ``entries`` (or the bare list of entries), one entry per component, setting or number the paper
states::

    - component: graph filter threshold          # what it is
      section: "§5.3"                            # where the paper states it
      quote: "we set the threshold of 0.75 to prune G_d"   # the paper's words, 25 at most
      ours: "mmrag.brit.retrieval:BritRetriever.retrieve"   # module:function (or module:Class.method)
      params: "brit_linking.threshold"           # the params key(s) that set it ("": none)
      status: same                               # same | deviation
      why: ""                                    # deviation: why (offline, CPU, model size, ...)
      effect: ""                                 # deviation: what it does to the claim it feeds
      claim: "Table 1, Table 2"                  # the claim(s) / tables it feeds (optional)
      paper_value: "0.75"                        # optional: the paper's setting or number
      our_value: "0.75"                          # optional: ours

:func:`load` reads one into a pandas DataFrame (one row per entry, :data:`COLUMNS`) and stops at the
first malformed entry with a one-line error (:class:`FidelityError`, a ValueError) naming the file,
the entry and what is wrong; :func:`check_implementations` lists entries whose ``ours`` does not
resolve to real code.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

REQUIRED = ("component", "section", "quote", "ours", "params", "status")
OPTIONAL = ("why", "effect", "claim", "paper_value", "our_value")
COLUMNS = REQUIRED + OPTIONAL
STATUSES = ("same", "deviation")
MAX_QUOTE_WORDS = 25


class FidelityError(ValueError):
    """A malformed fidelity file; the message is one line (file, entry, what is wrong)."""


def _entry(i: int, raw: Any, name: str) -> dict[str, str]:
    where = f"{name}: entry {i}"
    if not isinstance(raw, dict):
        raise FidelityError(f"{where}: expected a mapping, got {type(raw).__name__}")
    if raw.get("component"):
        where += f" ({raw['component']})"
    unknown = sorted(set(raw) - set(COLUMNS))
    if unknown:
        raise FidelityError(f"{where}: unknown key {', '.join(map(str, unknown))} (allowed: {', '.join(COLUMNS)})")
    for key in REQUIRED:
        if key not in raw or raw[key] is None or (key != "params" and str(raw[key]).strip() == ""):
            raise FidelityError(f"{where}: missing {key}")
    out = {k: " ".join(str(raw.get(k) or "").split()) for k in COLUMNS}
    if out["status"] not in STATUSES:
        raise FidelityError(f"{where}: status {out['status']!r}: choose {' or '.join(STATUSES)}")
    if out["status"] == "deviation" and not (out["why"] and out["effect"]):
        raise FidelityError(f"{where}: a deviation needs why and effect")
    words = len(out["quote"].split())
    if words > MAX_QUOTE_WORDS:
        raise FidelityError(f"{where}: quote has {words} words (at most {MAX_QUOTE_WORDS})")
    module, _, func = out["ours"].partition(":")
    if not module or not func:
        raise FidelityError(f"{where}: ours {out['ours']!r}: write module:function")
    return out


def load(path: str | Path) -> pd.DataFrame:
    """A fidelity file as a DataFrame (columns :data:`COLUMNS`, one row per entry, in file order);
    :class:`FidelityError` (one line) at the first malformed entry."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise FidelityError(f"{path.name}: cannot read: {' '.join(str(e).split())}") from None
    entries = raw.get("entries") if isinstance(raw, dict) else raw
    if not isinstance(entries, list) or not entries:
        raise FidelityError(f"{path.name}: expected a list of entries (or a mapping with 'entries')")
    return pd.DataFrame([_entry(i, e, path.name) for i, e in enumerate(entries)], columns=list(COLUMNS))


def resolve(ours: str) -> Any:
    """The object ``module:function`` (or ``module:Class.method``) names; raises if it does not exist."""
    module, _, attr = ours.partition(":")
    obj: Any = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def check_implementations(table: pd.DataFrame) -> list[str]:
    """One line per entry whose ``ours`` does not resolve (empty: every one does)."""
    bad = []
    for i, row in table.iterrows():
        try:
            resolve(row["ours"])
        except (ImportError, AttributeError) as e:
            bad.append(f"entry {i} ({row['component']}): {row['ours']}: {e}")
    return bad


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Entries per status: how much of the paper is implemented as stated."""
    return table.groupby("status").agg(entries=("component", "count"))


def show(table: pd.DataFrame, deviations_only: bool = False) -> pd.DataFrame:
    """The table as a notebook shows it (paper vs ours, status, why, effect), indexed by component."""
    out = table[table["status"] == "deviation"] if deviations_only else table
    cols = [c for c in ("section", "paper_value", "our_value", "status", "why", "effect", "claim", "ours", "params")
            if out[c].astype(bool).any() or c in ("status", "ours")]
    return out.set_index("component")[cols]
