"""What every tool shares: the reply type, encoder protocols, and the word-level helpers."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from mmrag.schema import Evidence

TOOLS = ("TextQA", "TableQA", "ImageQA", "WebSearch")
NO_ANSWER = "unknown"

_STOP = {"the", "a", "an", "of", "is", "was", "are", "were", "what", "which", "who", "whom",
         "where", "when", "how", "does", "did", "do", "in", "on", "at", "by", "for", "to", "and",
         "or", "it", "its", "this", "that", "with", "from", "as", "be", "has", "have", "had",
         "many", "much", "there", "their", "his", "her", "name", "s"}

_NUM_WORDS = {"zero": 0, "none": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
              "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11,
              "twelve": 12}


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
