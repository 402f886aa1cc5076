"""The paper's flat baselines (§5.2): top-k by embedding similarity over text chunks and images.

- ``clip``: one CLIP space for everything; question (plus the query image, when there is one)
  against text chunks (CLIP text tower) and images (CLIP image tower), top-k = 2 of the mixed pool.
- ``dual``: a second encoder pair standing in for the paper's BLIP-2 baseline: the text encoder
  ranks text chunks, CLIP ranks images, and the top-k = 2 items are split one text, one image.
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


@dataclass
class FlatRetriever:
    """Top-k over chunks and images (``mode`` clip | dual); returns the same Retrieved as BRIT."""

    chunks: list[Chunk]
    image_ids: list[str]
    image_emb: np.ndarray
    clip: Any
    root: Path
    mode: str  # clip | dual
    k: int
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
        out = Retrieved()
        if self.mode == "clip":
            txt_s = self._chunk_emb @ cq
            pool = [(float(s), 0, i) for i, s in enumerate(txt_s)] + \
                   [(float(s), 1, i) for i, s in enumerate(img_s)]
            pool.sort(key=lambda x: (-x[0], x[1], x[2]))
            picks = pool[: self.k]
        else:
            q = self.text_encode([question])[0]  # type: ignore[misc]
            txt_s = self._chunk_emb @ q
            n_img = self.k // 2
            picks = [(0.0, 0, int(i)) for i in np.argsort(-txt_s, kind="stable")[: self.k - n_img]]
            picks += [(0.0, 1, int(i)) for i in np.argsort(-img_s, kind="stable")[:n_img]]
        for _, kind, i in picks:
            if kind == 0:
                out.texts.append(self.chunks[i].text)
                out.text_sources.append(self.chunks[i].section_id)
            else:
                out.images.append(self.image_ids[i])
        return out
