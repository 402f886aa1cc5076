"""The three papers' printed results, cell by cell: ``paper_tables.yaml`` loaded, checked and looked up.

``cells(paper)`` lists them, ``value(paper, table, row, column)`` gives one as a float (a fraction
where the unit is percent or fraction), ``notes(paper)`` the conflicts and ambiguities found while
transcribing, and ``verify(DIR)`` finds every cell in the paper texts (brit.txt, dnc.txt, mmr2.txt):
a quoted figure in its quote, the quote in its section; a table cell in its table's stretch of text,
and for tab-separated tables every printed row, label and numbers in order.

CLI: ``python -m mmrag.evaluate.papers [--json] [--paper BRIT] [--verify DIR]``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

TABLES_FILE = Path(__file__).with_name("paper_tables.yaml")
PAPERS = {"BRIT": "brit.txt", "DnC": "dnc.txt", "MM-R2": "mmr2.txt"}
UNITS = ("fraction", "percent", "words", "images", "calls", "tokens", "count", "ratio")
MAX_QUOTE_WORDS = 25
_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_SCALED = re.compile(r"(\d+(?:\.\d+)?)([KM])")


@dataclass(frozen=True)
class Cell:
    paper: str
    table: str
    row: str
    column: str
    value: float
    unit: str
    source: str
    printed: str  # the number exactly as the paper prints it ("0.80", "23,817", "900K")

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.paper, self.table, self.row, self.column)

    @property
    def quote(self) -> str | None:
        """The quoted words of a text-stated figure's source (None for a table cell's caption)."""
        m = re.search(r'"(.+)"', self.source)
        return m.group(1) if m else None

    @property
    def fraction(self) -> float:
        """The value as a fraction where the unit is percent (else as printed)."""
        return self.value / 100 if self.unit == "percent" else self.value

    def name(self) -> str:
        return " / ".join(self.key)


@dataclass(frozen=True)
class Note:
    paper: str
    where: str
    what: str


@dataclass(frozen=True)
class TableSpec:
    """Where one table's numbers stand in its paper's text (see the head of paper_tables.yaml)."""
    paper: str
    table: str
    caption: str
    start: str
    end: str
    after: str | None = None
    grid: bool = False
    labels: int = 1
    linkers: tuple[str, ...] = ()
    linker_row: str = "{}"
    no_linker_row: str = ""


@dataclass(frozen=True)
class Tables:
    cells: tuple[Cell, ...]
    notes: tuple[Note, ...]
    specs: dict[tuple[str, str], TableSpec] = field(default_factory=dict)


class TablesError(ValueError):
    """paper_tables.yaml is malformed; the message is one line naming the entry."""


class _Printed(str):
    """A YAML number kept as the text it was written as (so 0.80 is not read back as 0.8)."""


class _Loader(yaml.SafeLoader):
    pass


def _keep_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> _Printed:
    return _Printed(node.value)


_Loader.add_constructor("tag:yaml.org,2002:float", _keep_text)
_Loader.add_constructor("tag:yaml.org,2002:int", _keep_text)


def _number(text: str) -> float:
    """'23,817' -> 23817, '900K' -> 900000, '0.80' -> 0.8."""
    m = _SCALED.fullmatch(text)
    if m:
        return float(m.group(1)) * {"K": 1e3, "M": 1e6}[m.group(2)]
    return float(text.replace(",", ""))


def _str(entry: dict, key: str, where: str) -> str:
    v = entry.get(key)
    if not isinstance(v, str) or isinstance(v, _Printed) or not v.strip():
        raise TablesError(f"{where}: '{key}' must be a non-empty string, got {v!r}")
    return v


def _cell(i: int, entry: object, path: Path) -> Cell:
    if not isinstance(entry, dict):
        raise TablesError(f"{path}: cell {i}: expected a mapping, got {entry!r}")
    label = " / ".join(str(entry.get(k, "?")) for k in ("paper", "table", "row", "column"))
    where = f"{path.name}: cell {i} ({label})"
    known = {"paper", "table", "row", "column", "value", "unit", "source", "printed"}
    if set(entry) - known:
        raise TablesError(f"{where}: unknown field(s) {sorted(set(entry) - known)}")
    paper, table, row, column, unit, source = (_str(entry, k, where)
                                               for k in ("paper", "table", "row", "column", "unit", "source"))
    if paper not in PAPERS:
        raise TablesError(f"{where}: paper '{paper}' is not one of {', '.join(PAPERS)}")
    if unit not in UNITS:
        raise TablesError(f"{where}: unit '{unit}' is not one of {', '.join(UNITS)}")
    raw = entry.get("value")
    if not isinstance(raw, _Printed):
        raise TablesError(f"{where}: value must be a number, got {raw!r}")
    value = float(raw)
    printed = entry.get("printed", str(raw))
    if not isinstance(printed, str) or not printed:
        raise TablesError(f"{where}: printed must be a string, got {printed!r}")
    try:
        ok = abs(_number(printed) - value) < 1e-9
    except ValueError:
        ok = False
    if not ok:
        raise TablesError(f"{where}: printed '{printed}' is not the value {raw}")
    quote = re.search(r'"(.+)"', source)
    if quote and len(quote.group(1).split()) > MAX_QUOTE_WORDS:
        raise TablesError(f"{where}: the quote has {len(quote.group(1).split())} words (at most {MAX_QUOTE_WORDS})")
    return Cell(paper, table, row, column, value, unit, source, printed)


def _spec(i: int, entry: object, path: Path) -> TableSpec:
    where = f"{path.name}: tables[{i}]"
    if not isinstance(entry, dict):
        raise TablesError(f"{where}: expected a mapping, got {entry!r}")
    where = f"{where} ({entry.get('paper')} / {entry.get('table')})"
    known = {f.name for f in TableSpec.__dataclass_fields__.values()}
    if set(entry) - known:
        raise TablesError(f"{where}: unknown field(s) {sorted(set(entry) - known)}")
    kw = {k: _str(entry, k, where) for k in ("paper", "table", "caption", "start", "end")}
    if kw["paper"] not in PAPERS:
        raise TablesError(f"{where}: paper '{kw['paper']}' is not one of {', '.join(PAPERS)}")
    if "after" in entry:
        kw["after"] = _str(entry, "after", where)
    for k in ("linker_row", "no_linker_row"):
        if k in entry:
            kw[k] = _str(entry, k, where)
    return TableSpec(**kw, grid=entry.get("grid") is True, labels=int(entry.get("labels", 1)),
                     linkers=tuple(entry.get("linkers") or ()))


def load(path: str | Path | None = None) -> Tables:
    """Read and validate the tables file (default: the package's paper_tables.yaml)."""
    return _load(Path(path or TABLES_FILE).resolve())


@lru_cache(maxsize=4)
def _load(path: Path) -> Tables:
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    except (OSError, yaml.YAMLError) as e:
        raise TablesError(f"{path}: cannot be read ({type(e).__name__}: {str(e).splitlines()[0]})") from e
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        raise TablesError(f"{path}: expected a mapping with a 'cells' list")
    cells = tuple(_cell(i, e, path) for i, e in enumerate(raw["cells"]))
    seen: dict[tuple, int] = {}
    for i, c in enumerate(cells):
        if c.key in seen:
            raise TablesError(f"{path.name}: cell {i} ({c.name()}) duplicates cell {seen[c.key]}")
        seen[c.key] = i
    notes = []
    for i, n in enumerate(raw.get("notes") or []):
        where = f"{path.name}: notes[{i}]"
        if not isinstance(n, dict):
            raise TablesError(f"{where}: expected a mapping, got {n!r}")
        note = Note(*(_str(n, k, where) for k in ("paper", "where", "what")))
        if note.paper not in PAPERS:
            raise TablesError(f"{where}: paper '{note.paper}' is not one of {', '.join(PAPERS)}")
        notes.append(note)
    specs = {}
    for i, e in enumerate(raw.get("tables") or []):
        s = _spec(i, e, path)
        if (s.paper, s.table) in specs:
            raise TablesError(f"{path.name}: tables[{i}] ({s.paper} / {s.table}) is listed twice")
        specs[(s.paper, s.table)] = s
    for i, c in enumerate(cells):
        if (c.paper, c.table) not in specs:
            raise TablesError(f"{path.name}: cell {i} ({c.name()}): table '{c.table}' of {c.paper} is not "
                              f"under tables:")
    return Tables(cells, tuple(notes), specs)


def cells(paper: str | None = None, path: str | Path | None = None) -> list[Cell]:
    """All cells, or one paper's, in the file's order."""
    if paper is not None and paper not in PAPERS:
        raise KeyError(f"unknown paper '{paper}'; the papers are {', '.join(PAPERS)}")
    return [c for c in load(path).cells if paper is None or c.paper == paper]


def notes(paper: str | None = None, path: str | Path | None = None) -> list[Note]:
    return [n for n in load(path).notes if paper is None or n.paper == paper]


def _norm(s: str) -> str:
    """Lookup spelling: case, spaces, LaTeX markup and the finetuned mark ∗ do not count."""
    return re.sub(r"[\s$*∗{}_]", "", s).casefold()


def cell(paper: str, table: str, row: str, column: str, path: str | Path | None = None) -> Cell:
    """The one cell at (paper, table, row, column); KeyError naming the closest ones otherwise."""
    all_cells = load(path).cells
    want = (paper, table, row, column)
    for c in all_cells:
        if c.key == want:
            return c
    hits = [c for c in all_cells if tuple(map(_norm, c.key)) == tuple(map(_norm, want))]
    if len(hits) == 1:
        return hits[0]
    names = [c.name() for c in all_cells if _norm(c.paper) == _norm(paper)] or [c.name() for c in all_cells]
    close = difflib.get_close_matches(" / ".join(want), names, n=5, cutoff=0.4)
    raise KeyError(f"no cell {' / '.join(want)}; closest: {'; '.join(close) if close else 'none'}")


def value(paper: str, table: str, row: str, column: str, path: str | Path | None = None) -> float:
    """One cell's value: a fraction where the unit is percent or fraction (54.1 % -> 0.541), else the
    printed number (words, images, calls, tokens, counts, ratios)."""
    return cell(paper, table, row, column, path).fraction


# ---------------------------------------------------------------- verification against the texts

def _marker(words: str) -> re.Pattern:
    return re.compile(r"\s+".join(map(re.escape, words.split())))


def _region(text: str, spec: TableSpec) -> tuple[str | None, str]:
    """(the text of the table's stretch, or None, and why not)."""
    pos = 0
    if spec.after:
        m = _marker(spec.after).search(text)
        if not m:
            return None, f"'after' marker not found: {spec.after!r}"
        pos = m.end()
    m = _marker(spec.start).search(text, pos)
    if not m:
        return None, f"start marker not found: {spec.start!r}"
    e = _marker(spec.end).search(text, m.start())
    if not e:
        return None, f"end marker not found after the start: {spec.end!r}"
    return text[m.start():e.start()], ""


def _occurs(printed: str, text: str) -> bool:
    """The printed number stands in the text as a number of its own (0.8 is not found in 0.81)."""
    return re.search(rf"(?<![\d.,]){re.escape(printed)}(?!\d)", text) is not None


def _flat(s: str) -> str:
    return " ".join(s.split())


def _row_label(parts: list[str], spec: TableSpec) -> str:
    if spec.linkers:
        marks = [p.strip() for p in parts[1:1 + len(spec.linkers)]]
        if not any(m == "-" for m in marks):
            ticked = [name for name, m in zip(spec.linkers, marks) if m == "✓"]
            return spec.linker_row.format("+".join(ticked)) if ticked else spec.no_linker_row
    head = [p.strip() for p in parts[:spec.labels]]
    return " ".join(p.replace("$", "") for p in head if p and p != "-")


def _grid_problems(region: str, spec: TableSpec, table_cells: list[Cell]) -> list[str]:
    """Each tab-separated line with numbers is one row: its label and its numbers, in order."""
    printed_rows = []
    for line in region.splitlines():
        if "\t" not in line:
            continue
        parts = line.split("\t")
        nums = [t.strip() for p in parts for t in p.split(";") if _NUMBER.fullmatch(t.strip())]
        if nums:
            printed_rows.append((_row_label(parts, spec), nums))
    rows: dict[str, list[Cell]] = {}
    for c in table_cells:
        rows.setdefault(c.row, []).append(c)
    where = f"{spec.paper} / {spec.table}"
    out = []
    if len(printed_rows) != len(rows):
        out.append(f"{where}: the text prints {len(printed_rows)} rows of numbers, the file has {len(rows)}")
    for (label, nums), (row, cs) in zip(printed_rows, rows.items()):
        if label != row:
            out.append(f"{where}: row '{row}' stands where the text's row is '{label}'")
        if nums != [c.printed for c in cs]:
            out.append(f"{where} / {row}: the text prints {' '.join(nums)}, the file has "
                       f"{' '.join(c.printed for c in cs)} ({', '.join(c.column for c in cs)})")
    return out


def verify(papers_dir: str | Path, path: str | Path | None = None, paper: str | None = None) -> list[str]:
    """Every cell found in the paper texts under papers_dir; returns the problems (empty: all found)."""
    tables = load(path)
    folder = Path(papers_dir)
    texts, problems = {}, []
    for p, name in PAPERS.items():
        if paper in (None, p):
            try:
                texts[p] = (folder / name).read_text(encoding="utf-8")
            except OSError as e:
                problems.append(f"{p}: cannot read {folder / name} ({type(e).__name__})")
    regions = {}
    for key, spec in tables.specs.items():
        if spec.paper not in texts:
            continue
        text = texts[spec.paper]
        if _flat(spec.caption) not in _flat(text):
            problems.append(f"{spec.paper} / {spec.table}: caption not found: {spec.caption!r}")
        region, why = _region(text, spec)
        if region is None:
            problems.append(f"{spec.paper} / {spec.table}: {why}")
        regions[key] = region
    for c in tables.cells:
        if c.paper not in texts:
            continue
        region = regions.get((c.paper, c.table))
        if region is None:
            problems.append(f"{c.name()} = {c.printed}: not checked (no table text)")
            continue
        quote = c.quote
        if quote is not None:
            if _flat(quote) not in _flat(texts[c.paper]):
                problems.append(f"{c.name()} = {c.printed}: quote not in the paper: {quote!r}")
            elif _flat(quote) not in _flat(region):
                problems.append(f"{c.name()} = {c.printed}: quote not in {c.table}'s text: {quote!r}")
            if not _occurs(c.printed, quote):
                problems.append(f"{c.name()} = {c.printed}: not in its quote {quote!r}")
        elif not _occurs(c.printed, region):
            problems.append(f"{c.name()} = {c.printed}: not in {c.table}'s text")
    for key, spec in tables.specs.items():
        if spec.grid and regions.get(key) is not None:
            problems += _grid_problems(regions[key], spec, [c for c in tables.cells if (c.paper, c.table) == key])
    return problems


# ---------------------------------------------------------------- CLI

def _render(table_cells: list[Cell]) -> str:
    """One paper table as aligned text: rows down, columns across, values as printed."""
    rows, cols = list(dict.fromkeys(c.row for c in table_cells)), list(dict.fromkeys(c.column for c in table_cells))
    at = {(c.row, c.column): c.printed for c in table_cells}
    units = list(dict.fromkeys(c.unit for c in table_cells))
    grid = [["", *cols]] + [[r, *(at.get((r, k), "") for k in cols)] for r in rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(grid[0]))]
    lines = ["  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(line, widths)))
             for line in grid]
    return "\n".join([*lines, f"(unit: {', '.join(units)})"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mmrag.evaluate papers", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print the cells as a JSON list of "
                                                        "{paper, table, row, column, value}")
    ap.add_argument("--paper", choices=list(PAPERS), help="only this paper's cells")
    ap.add_argument("--verify", metavar="DIR", help="find every cell in the paper texts in DIR "
                                                    "(brit.txt, dnc.txt, mmr2.txt); exit 1 if any is not found")
    ap.add_argument("--tables", metavar="YAML", help=f"another tables file (default: {TABLES_FILE.name})")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        chosen = cells(args.paper, args.tables)
        if args.verify:
            if not Path(args.verify).is_dir():
                print(f"error: --verify {args.verify}: not a folder", file=sys.stderr)
                return 2
            problems = verify(args.verify, args.tables, args.paper)
            for p in problems:
                print(f"not found: {p}")
            print(f"{len(chosen)} cells, {len(problems)} problem(s) against {args.verify}")
            return 1 if problems else 0
    except TablesError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        out = [{"paper": c.paper, "table": c.table, "row": c.row, "column": c.column,
                "value": int(c.value) if c.value.is_integer() and "." not in c.printed else c.value}
               for c in chosen]
        print(json.dumps(out, ensure_ascii=False, indent=1))
        return 0
    by_table: dict[tuple[str, str], list[Cell]] = {}
    for c in chosen:
        by_table.setdefault((c.paper, c.table), []).append(c)
    specs = load(args.tables).specs
    for (paper, table), tc in by_table.items():
        print(f"## {paper} {table} ({specs[(paper, table)].caption})")
        print(_render(tc))
        print()
    for n in notes(args.paper, args.tables):
        print(f"note [{n.paper}, {n.where}]: {n.what}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
