"""TextQA: dense sentence retrieval, then extraction of the span of the asked type."""

from __future__ import annotations

import re
from collections.abc import Sequence
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
    sentences,
    words,
)

_LEAD = {"The", "It", "Its", "This", "That", "These", "A", "An", "In", "On", "At", "He", "She",
         "They", "His", "Her", "Their", "After", "Before", "Since", "When", "Its", "As", "By",
         "For", "From", "With", "Every", "Each", "Today", "Later", "Also", "Both", "One",
         "Photographs", "Photograph", "Pictures", "Picture", "Images", "Image", "Views", "Photo",
         "Visitors", "Production", "Every", "Design", "Sales", "About"}

# Words the extractor accepts as a colour answer.
COLOURS = ("red", "orange", "yellow", "green", "blue", "purple", "black", "white", "brown",
           "blonde", "grey", "gray", "pink", "silver", "gold")


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
