"""TableQA: tables as records; rows by entity name, columns by attribute words, min/max, counts."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from mmrag.schema import Document, Evidence
from mmrag.toolagent.tools.common import (
    _NUM_WORDS,
    NO_ANSWER,
    Encoder,
    ToolAnswer,
    content_words,
    encode,
    mentions,
    question_type,
)


@dataclass
class Record:
    """One table row as entity -> {attribute: value}."""

    table_id: str
    doc_id: str
    doc_title: str
    row: int
    entity: str
    values: dict[str, str]
    table_title: str = ""


_KV_HEADERS = {"attribute", "property", "field", "key", "spec", "specification", "feature",
               "item", "parameter"}


def table_records(documents: Sequence[Document]) -> list[Record]:
    """Key-value spec tables -> one record for the page's entity; relational tables -> a record per row."""
    out = []
    for d in documents:
        for t in d.tables:
            cols = [c.strip() for c in t.columns]
            if not cols or not t.rows:
                continue
            if len(cols) == 2 and cols[0].lower() in _KV_HEADERS:
                vals = {r[0]: r[1] for r in t.rows if len(r) >= 2}
                out.append(Record(t.id, d.id, d.title, 0, d.title, vals, t.title))
                continue
            for i, r in enumerate(t.rows):
                if not r:
                    continue
                vals = {c: v for c, v in zip(cols[1:], r[1:])}
                out.append(Record(t.id, d.id, d.title, i, r[0], vals, t.title))
    return out


def as_number(value: str) -> float | None:
    """A cell as a number ('1,200 g' -> 1200.0, 'three' -> 3.0), or None."""
    v = value.strip().lower()
    if v in _NUM_WORDS:
        return float(_NUM_WORDS[v])
    m = re.search(r"-?\d[\d,]*(?:\.\d+)?", v)
    return float(m.group().replace(",", "")) if m else None


_MAX_WORDS = ("highest", "most", "largest", "biggest", "greatest", "latest", "newest", "heaviest",
              "longest", "tallest", "maximum", "more", "higher", "larger", "bigger", "later",
              "heavier", "longer", "taller", "greater", "most expensive", "costlier", "newer",
              "recent")
_MIN_WORDS = ("lowest", "least", "smallest", "fewest", "earliest", "oldest", "lightest",
              "shortest", "cheapest", "minimum", "less", "lower", "smaller", "fewer", "earlier",
              "lighter", "shorter", "cheaper", "older", "first")


# Comparative and superlative words name a column without sharing a word with it.
_ATTR_HINTS = {"heav": "weight", "light": "weight", "expensive": "price", "cheap": "price",
               "cost": "price", "later": "year", "latest": "year", "earlie": "year",
               "newe": "year", "olde": "year", "recent": "year", "first": "year",
               "bigger": "area", "biggest": "area", "larger": "area", "largest": "area",
               "visitor": "attendees", "attend": "attendees", "crowd": "attendees",
               "weigh": "weight", "gram": "weight", "dollar": "price", "usd": "price",
               "square": "area", "join": "joined", "open": "opened", "releas": "release"}


def _direction(question: str) -> str | None:
    """'max' or 'min' when the question asks for an extreme or a comparison."""
    q = question.lower()
    lo = min((m.start() for w in _MIN_WORDS for m in re.finditer(rf"\b{w}\b", q)), default=None)
    hi = min((m.start() for w in _MAX_WORDS for m in re.finditer(rf"\b{w}\b", q)), default=None)
    if lo is None and hi is None:
        return None
    if lo is None:
        return "max"
    if hi is None:
        return "min"
    return "max" if hi < lo else "min"


class TableQA:
    """Row by entity, column by attribute words; counting, min/max and comparison when asked."""

    name = "TableQA"

    def __init__(self, records: list[Record], encoder: Encoder | None = None):
        self.records = records
        self.encoder = encoder
        self.by_entity: dict[str, list[Record]] = {}
        for r in records:
            self.by_entity.setdefault(r.entity.lower(), []).append(r)
        self.attributes = sorted({a for r in records for a in r.values})
        self._attr_emb = encode(encoder, self.attributes) if encoder and self.attributes else None

    def attribute(self, question: str, candidates: Iterable[str] | None = None) -> str | None:
        """The column the question asks about: most shared words, then embedding similarity."""
        attrs = sorted(set(candidates)) if candidates is not None else self.attributes
        if not attrs:
            return None
        qw = content_words(question)
        qw |= {col for cue, col in _ATTR_HINTS.items() if re.search(rf"\b{cue}", question.lower())}
        overlap = [(len(content_words(a) & qw), -len(a), a) for a in attrs]
        best = max(overlap)
        if best[0] > 0:
            return best[2]
        if self._attr_emb is not None and self.encoder is not None:
            q = encode(self.encoder, [question])[0]
            idx = [self.attributes.index(a) for a in attrs]
            sims = self._attr_emb[idx] @ q
            return attrs[int(np.argmax(sims))]
        return None

    def _evidence(self, recs: Iterable[Record]) -> list[Evidence]:
        seen, out = set(), []
        for r in recs:
            if r.table_id not in seen:
                seen.add(r.table_id)
                out.append(Evidence(id=r.table_id, kind="table", doc_id=r.doc_id,
                                    content=f"{r.entity}: {r.values}"))
        return out[:3]

    def __call__(self, question: str) -> ToolAnswer:
        named = mentions(question, [r.entity for r in self.records])
        recs = [r for n in named for r in self.by_entity.get(n.lower(), [])]
        qtype = question_type(question)
        direction = _direction(question)
        # Comparison of two named entities.
        if len({n.lower() for n in named}) >= 2 and direction:
            return self._extreme(question, recs, direction, named)
        # An extreme over a table: rows of the tables the question's words best match.
        if direction and qtype != "number" and len(named) <= 1:
            pool = self._rows_of_best_table(question, exclude=named)
            if pool:
                return self._extreme(question, pool, direction, None)
        if qtype == "number" and not recs:
            return self._count(question)
        if not recs:
            picked = self._select(question)
            if picked is not None:
                return picked
        if recs:
            attr = self.attribute(question, [a for r in recs for a in r.values])
            if attr:
                for r in recs:
                    if attr in r.values:
                        return ToolAnswer(self.name, r.values[attr].strip(), self._evidence([r]),
                                          note=f"row {r.entity}, column {attr}")
        if qtype == "number":
            return self._count(question)
        return ToolAnswer(self.name, NO_ANSWER, note="no table row names an entity of the question")

    def _rows_of_best_table(self, question: str, exclude: Sequence[str]) -> list[Record]:
        """Rows of the relational table whose title/page/cells share most words with the question."""
        qw = content_words(question)
        tables: dict[str, list[Record]] = {}
        for r in self.records:
            tables.setdefault(r.table_id, []).append(r)
        best, best_score = None, 0
        for tid, rows in tables.items():
            if len(rows) < 2:
                continue
            text = " ".join([rows[0].table_title, rows[0].doc_title, *rows[0].values])
            score = len(content_words(text) & qw)
            if rows[0].doc_title.lower() in question.lower():
                score += 3
            if score > best_score:
                best, best_score = tid, score
        return tables.get(best, []) if best else []

    def _extreme(self, question: str, recs: list[Record], direction: str,
                 named: Sequence[str] | None) -> ToolAnswer:
        attrs = [a for r in recs for a, v in r.values.items() if as_number(v) is not None]
        attr = self.attribute(question, attrs) if attrs else None
        scored = [(as_number(r.values[attr]), r) for r in recs if attr and attr in r.values
                  and as_number(r.values[attr]) is not None]
        if not scored:
            return ToolAnswer(self.name, NO_ANSWER, note="no numeric column to compare")
        pick = max if direction == "max" else min
        value, rec = pick(scored, key=lambda x: x[0])
        return ToolAnswer(self.name, rec.entity, self._evidence(r for _, r in scored),
                          note=f"{direction} of {attr} = {value:g}")

    def _select(self, question: str) -> ToolAnswer | None:
        """'Which X product was released in 2031?': rows whose cells hold the question's values."""
        pool = self._rows_of_best_table(question, exclude=())
        ql = question.lower()
        hits = []
        for r in pool:
            vals = [v for v in r.values.values() if v and re.search(
                r"(?<![\w])" + re.escape(v.lower()) + r"(?![\w])", ql)]
            if vals:
                hits.append((len(vals), r))
        if not hits:
            return None
        best = max(n for n, _ in hits)
        rows = [r for n, r in hits if n == best]
        return ToolAnswer(self.name, ", ".join(dict.fromkeys(r.entity for r in rows)),
                          self._evidence(rows), note="rows selected by cell value")

    def _count(self, question: str) -> ToolAnswer:
        """Rows of the best-matching table whose cells contain a value named in the question."""
        pool = self._rows_of_best_table(question, exclude=())
        if not pool:
            return ToolAnswer(self.name, NO_ANSWER, note="no table to count in")
        ql = question.lower()
        conds = {v.lower() for r in pool for v in r.values.values()
                 if v and re.search(r"(?<![\w])" + re.escape(v.lower()) + r"(?![\w])", ql)}
        rows = [r for r in pool if not conds or conds & {v.lower() for v in r.values.values()}]
        return ToolAnswer(self.name, str(len(rows)), self._evidence(rows),
                          note=f"count where {sorted(conds)}")
