"""The conquerors: unimodal single-hop question answerers, and the handler that dispatches calls.

Each tool answers one question with a short answer (not a page of text) and the evidence it
used. They are deterministic components, not LLMs, so each has a measurable ceiling: its
accuracy on the world's gold single-hop sub-questions.

- TextQA: dense retrieval over sentences (page title prepended, so "It was designed by ..."
  keeps its subject) with the text encoder, then extraction of the span of the asked type
  (a known entity of the right kind, a year, a number, a colour, a capitalised name).
- TableQA: tables become records (entity -> attribute -> value); the question picks rows by
  entity name, the column by attribute words, and counting, min/max or comparison when asked.
- ImageQA: the trained CLIP scores every candidate value of the asked visual attribute against
  the named entity's images (or every candidate entity for "which of ... has ...").
- WebSearch: the offline fallback, TextQA over everything (sentences, table rows as sentences,
  image captions).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from mmrag.schema import Document, Evidence

TOOLS = ("TextQA", "TableQA", "ImageQA", "WebSearch")
MAX_TOOL_CALLS = 12
NO_ANSWER = "unknown"

_STOP = {"the", "a", "an", "of", "is", "was", "are", "were", "what", "which", "who", "whom",
         "where", "when", "how", "does", "did", "do", "in", "on", "at", "by", "for", "to", "and",
         "or", "it", "its", "this", "that", "with", "from", "as", "be", "has", "have", "had",
         "many", "much", "there", "their", "his", "her", "name", "s"}
_LEAD = {"The", "It", "Its", "This", "That", "These", "A", "An", "In", "On", "At", "He", "She",
         "They", "His", "Her", "Their", "After", "Before", "Since", "When", "Its", "As", "By",
         "For", "From", "With", "Every", "Each", "Today", "Later", "Also", "Both", "One",
         "Photographs", "Photograph", "Pictures", "Picture", "Images", "Image", "Views", "Photo",
         "Visitors", "Production", "Every", "Design", "Sales", "About"}
_NUM_WORDS = {"zero": 0, "none": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
              "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11,
              "twelve": 12}
COLOURS = ("red", "orange", "yellow", "green", "blue", "purple", "black", "white", "brown",
           "blonde", "grey", "gray", "pink", "silver", "gold")


class Encoder(Protocol):
    def encode(self, sentences: list[str], **kwargs: Any) -> np.ndarray: ...


class ImageEncoder(Protocol):
    def encode_images(self, images: list[Any]) -> np.ndarray: ...

    def encode_texts(self, texts: list[str]) -> np.ndarray: ...


@dataclass
class ToolAnswer:
    """A tool's reply: the short answer, and what it read to get there."""

    tool: str
    answer: str
    evidence: list[Evidence] = field(default_factory=list)
    note: str = ""

    @property
    def informative(self) -> bool:
        return bool(self.answer) and self.answer != NO_ANSWER


def words(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return re.findall(r"[a-z0-9]+", text.lower())


def content_words(text: str) -> set[str]:
    """Words that carry meaning (stop words out, plural 's' folded)."""
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words(text)} - _STOP


def sentences(text: str) -> list[str]:
    """Split prose into sentences."""
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])|\n+", text)
    return [p.strip() for p in parts if len(p.strip()) > 2]


def encode(encoder: Encoder, texts: list[str]) -> np.ndarray:
    """Normalised float32 embeddings (empty input -> (0, 1))."""
    if not texts:
        return np.zeros((0, 1), dtype=np.float32)
    emb = encoder.encode(texts, normalize_embeddings=True, convert_to_numpy=True,
                         show_progress_bar=False, batch_size=64)
    return np.asarray(emb, dtype=np.float32)


def mentions(text: str, names: Iterable[str]) -> list[str]:
    """Names that occur in text as whole words (longest first, overlaps dropped)."""
    low = text.lower()
    found: list[tuple[int, int, str]] = []
    for name in sorted(set(names), key=len, reverse=True):
        if len(name) < 2:
            continue
        for m in re.finditer(r"(?<![\w])" + re.escape(name.lower()) + r"(?![\w])", low):
            if not any(a < m.end() and m.start() < b for a, b, _ in found):
                found.append((m.start(), m.end(), name))
    return [n for _, _, n in sorted(found)]


def question_type(question: str) -> str:
    """The kind of answer a question asks for."""
    q = question.lower()
    if re.search(r"\bhow many\b|\bnumber of\b|\bcount\b", q):
        return "number"
    if re.search(r"\bwhat year\b|\bwhich year\b|\bwhen\b|\bin what year\b", q):
        return "year"
    if re.search(r"\bwhat colou?r\b|\bwhich colou?r\b", q):
        return "colour"
    if re.search(r"\b(role|position|profession|job)\b", q):
        return "role"
    if re.search(r"\bwho\b|\bwhich person\b|\bwhose\b", q):
        return "person"
    if re.search(r"\bwhere\b|\bwhich (city|place|country|town|site|location)\b", q):
        return "place"
    if re.search(r"\bwhich (organi[sz]ation|company|firm|team|lab|group)\b", q):
        return "organisation"
    if re.search(r"\bwhich (products?|device|model)\b|\bpredecessor\b|\bsuccessor\b", q):
        return "product"
    if re.search(r"\bwhich (event|conference|fair|expo|show)\b", q):
        return "event"
    if re.match(r"\s*(is|are|was|were|does|do|did|has|have|can)\b", q):
        return "yesno"
    return "any"


def _cap_spans(sentence: str) -> list[str]:
    """Capitalised multi-word spans (invented codenames, people, places)."""
    spans = re.findall(r"[A-Z][\w'\-]*(?:\s+(?:of |de |van |von |the )?[A-Z0-9][\w'\-]*)*", sentence)
    out = []
    for s in spans:
        toks = s.split()
        while toks and (toks[0] in _LEAD or toks[0] in ("of", "de", "van", "von", "the")):
            toks = toks[1:]
        if toks:
            out.append(" ".join(toks))
    return out


class Extractor:
    """Short answers out of a sentence, typed by the question and by the known entity names."""

    def __init__(self, entity_types: dict[str, str] | None = None):
        self.entity_types = {k: v for k, v in (entity_types or {}).items() if k}
        self._lower = {k.lower(): k for k in self.entity_types}

    def candidates(self, sentence: str, qtype: str, strict: bool = True) -> list[str]:
        """Spans of the asked type in sentence order (strict: known entities of that type only)."""
        known = mentions(sentence, self.entity_types)
        if qtype in ("person", "place", "organisation", "product", "event"):
            typed = [n for n in known if self.entity_types[n] == qtype]
            if strict:
                return typed
            return [n for n in known if n not in typed] + \
                [s for s in _cap_spans(sentence) if s not in known]
        if qtype == "role":
            return [m.strip() for m in re.findall(
                r"(?:works as an?|position of|profession [^,.]*? is an?|is an?) ([a-z][a-z ]+?)(?=[.,;]|$)",
                sentence)]
        if qtype == "year":
            return re.findall(r"\b(1[5-9]\d\d|2[01]\d\d)\b", sentence)
        if qtype == "number":
            nums = re.findall(r"\b\d+(?:[.,]\d+)?\b", sentence)
            nums += [w for w in words(sentence) if w in _NUM_WORDS]
            return nums
        if qtype == "colour":
            return [w for w in words(sentence) if w in COLOURS]
        return known + [s for s in _cap_spans(sentence) if s not in known] + \
            re.findall(r"\b\d+(?:[.,]\d+)?\b", sentence)

    def extract(self, question: str, sentence: str, strict: bool = True) -> str | None:
        """The first candidate of the asked type that the question does not already contain."""
        qtype = question_type(question)
        qlow = question.lower()
        qwords = set(words(question))
        for cand in self.candidates(sentence, qtype, strict):
            cw = set(words(cand))
            if cand.lower() in qlow or (cw and cw <= qwords):
                continue
            return cand
        return None


@dataclass
class Unit:
    """One retrievable sentence with where it came from."""

    id: str
    doc_id: str
    title: str
    text: str
    kind: str = "text"  # text | table | caption


def text_units(documents: Sequence[Document]) -> list[Unit]:
    """Every sentence of every page (summary and sections), title attached."""
    out = []
    for d in documents:
        blocks = [(f"{d.id}#summary", d.summary)] + [(s.id, s.text) for s in d.sections]
        for bid, text in blocks:
            for i, s in enumerate(sentences(text or "")):
                out.append(Unit(f"{bid}#s{i}", d.id, d.title, s))
    return out


def extra_units(documents: Sequence[Document], records: Sequence["Record"]) -> list[Unit]:
    """Table rows and image captions as sentences (what WebSearch adds to TextQA's index)."""
    out = [Unit(f"{r.table_id}#r{r.row}", r.doc_id, r.doc_title,
                f"{r.entity}: " + "; ".join(f"{k} is {v}" for k, v in r.values.items()), "table")
           for r in records]
    for d in documents:
        for im in d.images:
            if im.caption:
                out.append(Unit(im.id, d.id, d.title, im.caption, "caption"))
    return out


class SentenceIndex:
    """Dense sentence retrieval with a bonus for sentences from a page the question names."""

    def __init__(self, units: list[Unit], encoder: Encoder, title_bonus: float = 0.25,
                 reuse: "SentenceIndex | None" = None):
        """reuse: an index over a prefix of ``units`` whose embeddings are kept, not recomputed."""
        self.units, self.encoder, self.title_bonus = units, encoder, title_bonus
        n = len(reuse.units) if reuse is not None else 0
        if reuse is not None and [u.id for u in units[:n]] != [u.id for u in reuse.units]:
            raise ValueError("SentenceIndex: reuse must index a prefix of units")
        rest = encode(encoder, [f"{u.title}: {u.text}" for u in units[n:]])
        self.emb = np.concatenate([reuse.emb, rest]) if n and len(units) > n else \
            (reuse.emb if n else rest)
        self.titles = sorted({u.title for u in units if u.title})

    def search(self, query: str, k: int = 8) -> list[tuple[Unit, float]]:
        if not self.units:
            return []
        q = encode(self.encoder, [query])[0]
        scores = self.emb @ q
        named = {t.lower() for t in mentions(query, self.titles)}
        if named:
            scores = scores + self.title_bonus * np.array(
                [u.title.lower() in named for u in self.units], dtype=np.float32)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(self.units[i], float(scores[i])) for i in order]


class TextQA:
    """Dense sentence retrieval, then typed span extraction from the best sentences."""

    name = "TextQA"

    def __init__(self, index: SentenceIndex, extractor: Extractor, k: int = 8):
        self.index, self.extractor, self.k = index, extractor, k

    def __call__(self, question: str) -> ToolAnswer:
        hits = self.index.search(question, self.k)
        ev = [Evidence(id=u.id, kind=u.kind if u.kind != "text" else "text", content=u.text,
                       score=round(s, 4), doc_id=u.doc_id) for u, s in hits]
        qtype = question_type(question)
        if qtype == "yesno" and hits:
            return ToolAnswer(self.name, self._yes_no(question, hits[0][0].text), ev[:3])
        if qtype in ("product", "person", "place", "organisation", "event") and \
                re.search(r"\bwhich (products|people|persons|employees|sites|places|events)\b",
                          question.lower()):
            many = self._many(question, hits)
            if many:
                return ToolAnswer(self.name, ", ".join(many), ev[:3], note="list")
        for strict in (True, False):  # a typed entity anywhere in the top k, then any span
            for u, _ in hits:
                ans = self.extractor.extract(question, u.text, strict)
                if ans:
                    return ToolAnswer(self.name, ans, ev[:3])
        return ToolAnswer(self.name, NO_ANSWER, ev[:3], note="no span of the asked type")

    def _many(self, question: str, hits: list[tuple[Unit, float]]) -> list[str]:
        """Every typed entity in the retrieved sentences that also name the question's entity."""
        named = [n.lower() for n in mentions(question, self.index.titles)]
        out: list[str] = []
        for u, _ in hits:
            if named and not (u.title.lower() in named or any(n in u.text.lower() for n in named)):
                continue
            for c in self.extractor.candidates(u.text, question_type(question), strict=True):
                if c.lower() not in question.lower() and c not in out:
                    out.append(c)
        return out

    @staticmethod
    def _yes_no(question: str, sentence: str) -> str:
        """Yes when the question's content words (beyond the verb) all appear in the sentence."""
        need = content_words(question)
        have = content_words(sentence)
        return "yes" if need and len(need & have) >= max(1, len(need) - 1) else "no"


# --------------------------------------------------------------------------- tables
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


# --------------------------------------------------------------------------- images
_ATTR_CUES: dict[str, list[tuple[str, str]]] = {
    "product": [(r"\blogo\b.*\b(colou?r)\b|\b(colou?r)\b.*\blogo\b", "logo_colour"),
                (r"\blogo\b", "logo_position"), (r"\b(shape|shaped)\b", "shape"),
                (r"\b(pattern|striped|dotted|checked|plain)\b", "pattern"),
                (r"\b(how many|units|copies|count)\b", "count"), (r"\b(colou?r|body|painted)\b", "colour")],
    "person": [(r"\b(hat|cap|headwear)\b", "hat"),
               (r"\b(glasses|eyewear|sunglasses|eyes)\b", "glasses"),
               (r"\bhair\b", "hair_colour"),
               (r"\b(clothes|clothing|shirt|wear|wearing|dress|outfit|jacket|colou?r)\b", "clothing_colour")],
    "place": [(r"\broof\b", "roof_colour"), (r"\bwindow", "windows"), (r"\btree", "trees"),
              (r"\b(day|night|time)\b", "time"), (r"\b(building|kind|type|structure)\b", "building")],
}


class ImageQA:
    """CLIP scores each candidate answer (attribute value, or candidate entity) against images."""

    name = "ImageQA"

    def __init__(self, documents: Sequence[Document], clip: ImageEncoder,
                 entity_kinds: dict[str, str], attributes: dict[str, dict[str, tuple[str, ...]]],
                 prompts: Callable[[str, str, str], list[str]],
                 load_image: Callable[[str], Any], entity_names: dict[str, str] | None = None,
                 groups: dict[str, list[str]] | None = None):
        """entity_kinds: name -> render kind; entity_names: id -> name; groups: owner -> members."""
        self._id_names = dict(entity_names or {})
        self.groups = {k: list(v) for k, v in (groups or {}).items()}
        self.kinds = {n: k for n, k in entity_kinds.items() if k in attributes}
        self.attributes, self.prompts, self.clip = attributes, prompts, clip
        self.images: dict[str, list[str]] = {}  # entity name (lower) -> image ids
        paths, ids, name_of_id = [], [], {}
        for d in documents:
            for im in d.images:
                name = self._name_of(im.entity_id, d)
                if name is None:
                    continue
                self.images.setdefault(name.lower(), []).append(im.id)
                paths.append(im.path)
                ids.append(im.id)
                name_of_id[im.id] = name
        self._row = {i: n for n, i in enumerate(ids)}
        self.emb = (np.asarray(clip.encode_images([load_image(p) for p in paths]), np.float32)
                    if paths else np.zeros((0, 1), np.float32))
        self._text_cache: dict[tuple[str, str, str], np.ndarray] = {}
        self._doc_entity = {d.entity_id: d.title for d in documents if d.entity_id}

    def _name_of(self, entity_id: str | None, doc: Document) -> str | None:
        """The name of the entity an image depicts (the page title when it is the page's entity)."""
        if entity_id is None:
            return None
        if entity_id == doc.entity_id:
            return doc.title
        return self._id_names.get(entity_id)

    def _text(self, kind: str, attr: str, value: str) -> np.ndarray:
        key = (kind, attr, value)
        if key not in self._text_cache:
            self._text_cache[key] = np.asarray(
                self.clip.encode_texts(self.prompts(kind, attr, value)), np.float32)
        return self._text_cache[key]

    def attribute(self, question: str, kind: str) -> str | None:
        """The visual attribute a question asks about, from its cue words."""
        q = question.lower()
        for pattern, attr in _ATTR_CUES.get(kind, []):
            if attr in self.attributes[kind] and re.search(pattern, q):
                return attr
        return None

    def value_scores(self, entity: str, kind: str, attr: str) -> dict[str, float]:
        """Mean over the entity's images of the best prompt similarity, per candidate value."""
        rows = [self._row[i] for i in self.images.get(entity.lower(), [])]
        if not rows:
            return {}
        img = self.emb[rows]
        return {v: float((img @ self._text(kind, attr, v).T).max(axis=1).mean())
                for v in self.attributes[kind][attr]}

    def _mentioned_values(self, question: str, kind: str) -> list[tuple[str, str]]:
        q = question.lower()
        out = []
        for attr, values in self.attributes[kind].items():
            for v in values:
                if v != "none" and re.search(r"(?<![\w])" + re.escape(v) + r"(?![\w])", q):
                    out.append((attr, v))
        return out

    def __call__(self, question: str) -> ToolAnswer:
        named = [n for n in mentions(question, self.kinds) if self.images.get(n.lower())]
        kinds = [self.kinds[n] for n in named]
        if len(named) == 1:
            ent, kind = named[0], kinds[0]
            attr = self.attribute(question, kind)
            mentioned = self._mentioned_values(question, kind)
            if question_type(question) == "yesno" and mentioned and " or " not in question.lower():
                attr, value = mentioned[-1]
                scores = self.value_scores(ent, kind, attr)
                ans = "yes" if max(scores, key=scores.get) == value else "no"
                return ToolAnswer(self.name, ans, self._ev(ent), note=f"{attr}: {scores}")
            if attr is None:
                return ToolAnswer(self.name, NO_ANSWER, self._ev(ent), note="no visual attribute asked")
            scores = self.value_scores(ent, kind, attr)
            return ToolAnswer(self.name, max(scores, key=scores.get), self._ev(ent),
                              note=f"{ent}.{attr}")
        # Which of these (or: which <kind>) has <value>?  Score candidate entities.
        kind = kinds[0] if kinds else self._kind_in(question)
        if kind is None:
            return ToolAnswer(self.name, NO_ANSWER, note="no pictured entity in the question")
        mentioned = self._mentioned_values(question, kind)
        if not mentioned and re.search(r"\b(without|no)\b", question.lower()):
            cue = self.attribute(question, kind)
            mentioned = [(cue, "none")] if cue and "none" in self.attributes[kind][cue] else []
        if not mentioned:
            return ToolAnswer(self.name, NO_ANSWER, note="no visual value to look for")
        cue = self.attribute(question, kind)
        ql = question.lower()
        attr, value = max(mentioned, key=lambda av: (av[0] == cue, sum(
            part in ql for part in av[0].split("_") if part != "colour")))
        if re.search(r"\b(without|no)\b", ql) and "none" in self.attributes[kind][attr]:
            value = "none"
        owners = mentions(question, self.groups)
        pool = named or [n for n, k in self.kinds.items() if k == kind and self.images.get(n.lower())
                         and (not owners or n in self.groups[owners[0]])]
        probs = {}
        for ent in pool:
            s = self.value_scores(ent, kind, attr)
            z = np.exp((np.array(list(s.values())) - max(s.values())) * 100.0)
            probs[ent] = float(z[list(s).index(value)] / z.sum())
        best = max(sorted(probs), key=lambda e: probs[e])
        if re.search(r"\b(are|were) the ones\b|\bwhich \w+ \w*s are\b", question.lower()):
            many = [e for e in sorted(probs, key=lambda e: -probs[e]) if probs[e] >= 0.5]
            return ToolAnswer(self.name, ", ".join(many or [best]), self._ev(best),
                              note=f"{attr}={value}, several")
        return ToolAnswer(self.name, best, self._ev(best), note=f"{attr}={value}")

    def _kind_in(self, question: str) -> str | None:
        q = question.lower()
        for kind, cue in (("product", r"\b(products?|device|model)\b"),
                          ("person", r"\b(person|people|employees?|staff|who)\b"),
                          ("place", r"\bplace|building|site|location|where\b")):
            if kind in self.attributes and re.search(cue, q):
                return kind
        return None

    def _ev(self, entity: str) -> list[Evidence]:
        return [Evidence(id=i, kind="image") for i in self.images.get(entity.lower(), [])[:3]]


class WebSearch:
    """Offline web search: TextQA over the whole corpus (sentences, table rows, captions)."""

    name = "WebSearch"

    def __init__(self, index: SentenceIndex, extractor: Extractor, k: int = 8):
        self.inner = TextQA(index, extractor, k)

    def __call__(self, question: str) -> ToolAnswer:
        a = self.inner(question)
        return ToolAnswer(self.name, a.answer, a.evidence, a.note)


# --------------------------------------------------------------------------- handler
@dataclass
class ToolCall:
    tool: str
    query: str
    answer: ToolAnswer


class ToolHandler:
    """Dispatches `(Tool=X)` calls to the tools and enforces the per-question cap."""

    def __init__(self, tools: dict[str, Callable[[str], ToolAnswer]],
                 max_calls: int = MAX_TOOL_CALLS, fallback: str | None = "WebSearch"):
        self.tools, self.max_calls, self.fallback = tools, max_calls, fallback
        self.calls: list[ToolCall] = []

    @property
    def exhausted(self) -> bool:
        return len(self.calls) >= self.max_calls

    def reset(self) -> None:
        self.calls = []

    def call(self, tool: str, query: str) -> ToolAnswer:
        """Run one tool; an unknown tool name or an exhausted budget is answered, not raised."""
        if self.exhausted:
            return ToolAnswer(tool, NO_ANSWER, note=f"tool-call cap of {self.max_calls} reached")
        name = next((t for t in self.tools if t.lower() == tool.strip().lower()), None)
        if name is None:
            ans = ToolAnswer(tool, NO_ANSWER, note=f"unknown tool {tool!r}; use one of {list(self.tools)}")
        else:
            ans = self.tools[name](query)
            if not ans.informative and self.fallback and name != self.fallback \
                    and self.fallback in self.tools and len(self.calls) + 1 < self.max_calls:
                # The paper's fallback: WebSearch when a tool has nothing informative.
                self.calls.append(ToolCall(name, query, ans))
                fb = self.tools[self.fallback](query)
                ans = ToolAnswer(fb.tool, fb.answer, fb.evidence, note=f"fallback after {name}")
                name = self.fallback
        self.calls.append(ToolCall(name or tool, query, ans))
        return ans


def world_maps(entities: Sequence[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str],
                                                              dict[str, list[str]]]:
    """(name -> type, id -> name, owner name -> member names) from entities.jsonl rows."""
    types = {e["name"]: e["type"] for e in entities}
    names = {e["id"]: e["name"] for e in entities}
    groups: dict[str, list[str]] = {}
    for e in entities:
        for r in e.get("relations", []):
            if r["relation"] in ("developed_by", "works_for") and r["object_id"] in names:
                groups.setdefault(names[r["object_id"]], []).append(e["name"])
    return types, names, groups


def build_tools(documents: Sequence[Document], encoder: Encoder, entity_types: dict[str, str],
                clip: ImageEncoder | None = None, load_image: Callable[[str], Any] | None = None,
                attributes: dict[str, dict[str, tuple[str, ...]]] | None = None,
                prompts: Callable[[str, str, str], list[str]] | None = None,
                entity_names: dict[str, str] | None = None,
                groups: dict[str, list[str]] | None = None, k: int = 8) -> dict[str, Callable[[str], ToolAnswer]]:
    """The four tools over one corpus (ImageQA only when a CLIP is given)."""
    extractor = Extractor(entity_types)
    records = table_records(documents)
    text_index = SentenceIndex(text_units(documents), encoder)
    web_index = SentenceIndex(text_index.units + extra_units(documents, records), encoder,
                              reuse=text_index)
    tools: dict[str, Callable[[str], ToolAnswer]] = {
        "TextQA": TextQA(text_index, extractor, k), "TableQA": TableQA(records, encoder)}
    if clip is not None and load_image is not None and attributes and prompts:
        tools["ImageQA"] = ImageQA(documents, clip, entity_types, attributes, prompts, load_image,
                                   entity_names, groups)
    tools["WebSearch"] = WebSearch(web_index, extractor, k)
    return tools
