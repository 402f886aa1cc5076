"""The paper's flat baselines (§5.2): top-k by embedding similarity over text chunks and images.

Both return the best text chunks (at most ``k``, within a budget of ``words`` text words) and the
top ``n_images`` images, as the paper's CLIP / BLIP-2 top-k rows do (its Table 2: 206 words and
2.00 images per question); a baseline given two items from one mixed pool is starved, not weak.

- ``clip``: one CLIP space for everything; question (plus the query image, when there is one)
  against text chunks (CLIP text tower) and images (CLIP image tower).
- ``dual``: a second encoder pair standing in for the paper's BLIP-2 baseline: the text encoder
  ranks text chunks, CLIP ranks images.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mmrag.brit.retrieval import Retrieved


@dataclass(frozen=True)
class Chunk:
    id: str
    doc_id: str
    section_id: str
    text: str


def chunk_sections(documents: list[Any], max_words: int = 40) -> list[Chunk]:
    """Sections cut at sentence ends into chunks of at most ``max_words`` (CLIP reads 77 tokens)."""
    out = []
    for doc in documents:
        for sec in doc.sections:
            cur: list[str] = []
            n = 0
            for sent in re.split(r"(?<=[.!?])\s+", sec.text.strip()):
                w = len(sent.split())
                if cur and n + w > max_words:
                    out.append(Chunk(f"{sec.id}#{len(out)}", doc.id, sec.id, " ".join(cur)))
                    cur, n = [], 0
                if sent:
                    cur.append(sent)
                    n += w
            if cur:
                out.append(Chunk(f"{sec.id}#{len(out)}", doc.id, sec.id, " ".join(cur)))
    return out


def within_budget(ranked: list[int], chunks: list[Chunk], k: int, words: int | None) -> list[int]:
    """The best chunks in rank order, at most ``k``, stopping before the one that would take the
    text past ``words`` words (None: no budget); the best chunk is always kept."""
    out, n = [], 0
    for i in ranked[:k]:
        w = len(chunks[i].text.split())
        if out and words is not None and n + w > words:
            break
        out.append(i)
        n += w
    return out


@dataclass
class FlatRetriever:
    """Top-k chunks (within a word budget) and top images (``mode`` clip | dual); returns the
    same Retrieved as BRIT."""

    chunks: list[Chunk]
    image_ids: list[str]
    image_emb: np.ndarray
    clip: Any
    root: Path
    mode: str  # clip | dual
    k: int  # at most this many text chunks
    n_images: int  # top images
    words: int | None  # text words budget (None: k chunks, whatever their length)
    text_encode: Callable[[list[str]], np.ndarray] | None = None
    _chunk_emb: np.ndarray | None = field(default=None, repr=False)
    _image_cache: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in ("clip", "dual"):
            raise ValueError(f"baseline mode {self.mode!r}: choose clip or dual")
        if self.mode == "dual" and self.text_encode is None:
            raise ValueError("the dual baseline needs text_encode (the text encoder)")
        texts = [c.text for c in self.chunks]
        self._chunk_emb = (self.clip.encode_texts(texts) if self.mode == "clip"
                           else self.text_encode(texts))  # type: ignore[misc]

    def _clip_query(self, question: str, image_path: str | None) -> np.ndarray:
        q = self.clip.encode_texts([question])[0]
        if image_path:
            if image_path not in self._image_cache:
                self._image_cache[image_path] = self.clip.encode_images([self.root / image_path])[0]
            q = q + self._image_cache[image_path]
            q = q / max(np.linalg.norm(q), 1e-9)
        return q

    def retrieve(self, question: str, image_path: str | None = None) -> Retrieved:
        cq = self._clip_query(question, image_path)
        img_s = self.image_emb @ cq if len(self.image_ids) else np.zeros(0)
        q = cq if self.mode == "clip" else self.text_encode([question])[0]  # type: ignore[misc]
        txt_s = self._chunk_emb @ q if len(self.chunks) else np.zeros(0)
        out = Retrieved()
        ranked = [int(i) for i in np.argsort(-txt_s, kind="stable")]
        for i in within_budget(ranked, self.chunks, self.k, self.words):
            out.texts.append(self.chunks[i].text)
            out.text_sources.append(self.chunks[i].section_id)
        out.images = [self.image_ids[int(i)] for i in np.argsort(-img_s, kind="stable")[: self.n_images]]
        return out
