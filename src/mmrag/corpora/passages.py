"""Documents -> retrievable passages: the unit every text retriever here indexes.

MM-R2's recipe (also used by the flat baselines and DnC's TextQA): a page's text is its title,
summary and section contents, truncated at ``max_chars`` and split into ``chunk_chars``
windows that overlap by ``overlap`` characters. Windows end on a word boundary when one is
near, so a chunk rarely starts or ends mid-word. Passage ids are ``<doc_id>#p<k>`` (k from 0),
stable for a given document text and chunking.

The three knobs live in params ``knowledge_map.max_chars/chunk_chars/overlap`` and nowhere
else: they define every passage id, so the gold passage ids the world and corpora stages write
match the knowledge map's passages only when all three stages chunk with the same values
(:class:`Chunking` carries them; no function here has a default).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from mmrag.schema import Document, Passage


class Chunking(NamedTuple):
    """How pages are cut into passages; it defines every passage id (``to_passages(docs, *chunking)``)."""

    max_chars: int
    chunk_chars: int
    overlap: int

    @classmethod
    def of(cls, section: Any) -> Chunking:
        """The chunking of a params section that holds the three knobs (``params.knowledge_map``)."""
        return cls(section.max_chars, section.chunk_chars, section.overlap)


def document_text(doc: Document) -> tuple[str, list[tuple[int, str]]]:
    """The page as one string, and (offset, section_id) where each section's content starts."""
    parts = [doc.title.strip()]
    if doc.summary.strip():
        parts.append(doc.summary.strip())
    text = "\n".join(p for p in parts if p)
    starts: list[tuple[int, str]] = []
    for sec in doc.sections:
        body = " ".join(x for x in (sec.title.strip(), sec.text.strip()) if x)
        if not body:
            continue
        text += "\n"
        starts.append((len(text), sec.id))
        text += body
    return text, starts


def _word_end(text: str, lo: int, end: int) -> int:
    """Pull ``end`` back to the last whitespace in [lo, end) if it would cut a word."""
    if end >= len(text) or text[end].isspace():
        return end
    cut = max(text.rfind(c, lo, end) for c in " \n")
    return cut if cut > lo else end


def chunk_spans(n: int, text: str, chunk_chars: int, overlap: int) -> list[tuple[int, int]]:
    """(start, end) windows over text[:n]; each ends on whitespace when one lies in its last fifth."""
    spans: list[tuple[int, int]] = []
    start = 0
    while start < n:
        last = start + chunk_chars >= n
        end = min(start + chunk_chars, n)
        end = _word_end(text, max(start + 1, end - chunk_chars // 5), end)
        spans.append((start, end))
        if last:
            break
        start = max(end - overlap, start + 1)
        if not text[start - 1].isspace():  # mid-word: move on to the next word
            ws = [i for i in (text.find(c, start, end) for c in " \n") if i >= 0]
            start = min(ws) if ws else start
        while start < n and text[start].isspace():
            start += 1
    return spans


def _section_at(offset: int, starts: list[tuple[int, str]]) -> str | None:
    """The section whose content contains ``offset`` (None: the title/summary head)."""
    found = None
    for at, sid in starts:
        if at <= offset:
            found = sid
        else:
            break
    return found


def kept_share(documents: Iterable[Document], max_chars: int) -> float:
    """Share of the documents' characters (as :func:`to_passages` reads them) inside the first
    ``max_chars`` of each page, i.e. what truncation keeps (1.0 for no text)."""
    total = kept = 0
    for doc in documents:
        n = len(document_text(doc)[0])
        total, kept = total + n, kept + min(n, max_chars)
    return kept / total if total else 1.0


def to_passages(documents: Iterable[Document], max_chars: int, chunk_chars: int,
                overlap: int) -> list[Passage]:
    """Title + summary + sections, truncated at max_chars, chunked with overlap; gold copied over."""
    if chunk_chars <= 0 or max_chars <= 0:
        raise ValueError(f"to_passages: chunk_chars ({chunk_chars}) and max_chars ({max_chars}) "
                         f"must be positive")
    if not 0 <= overlap < chunk_chars:
        raise ValueError(f"to_passages: overlap ({overlap}) must be >= 0 and smaller than "
                         f"chunk_chars ({chunk_chars})")
    out: list[Passage] = []
    for doc in documents:
        text, starts = document_text(doc)
        n = min(len(text), max_chars)
        for k, (a, b) in enumerate(chunk_spans(n, text, chunk_chars, overlap)):
            chunk = text[a:b].strip()
            if not chunk:
                continue
            out.append(Passage(id=f"{doc.id}#p{k}", doc_id=doc.id, title=doc.title, text=chunk,
                               section_id=_section_at(a, starts), domain=doc.domain,
                               entity_id=doc.entity_id))
    return out
