"""Flat retrieval baselines a reader can trust on real text: BM25 (``bm25s``) and dense top-k.

Every retrieval and QA table puts these two rows beside the paper's systems: if a graph or a
knowledge map cannot beat a lexical ranker over the same texts, the table should say so. Both
rank the same texts (BRIT's section chunks, the knowledge map's passages, DnC's pages) with the
question as the query, and are scored by **answer in retrieved context**: the share of
questions whose gold answer (or an alias, normalised, as whole words) occurs in the top-k
texts, with the number of questions it is a share of.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import bm25s
import numpy as np

from mmrag.evaluate.metrics import golds, normalize
from mmrag.schema import Question

# Lucene's (and bm25s's) BM25 constants; not tuned here, so the baseline is the textbook one
K1, B = 1.5, 0.75
STOPWORDS = "en"


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Lower-cased word tokens without English stopwords (bm25s's tokenizer)."""
    return bm25s.tokenize(list(texts), stopwords=STOPWORDS, return_ids=False, show_progress=False)


@dataclass
class BM25:
    """A BM25 index over ``texts``; scores every text for a query (ties keep corpus order)."""

    texts: list[str]
    _index: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._vocab: set[str] = {w for t in tokenize(self.texts) for w in t} if self.texts else set()
        if self._vocab:  # bm25s cannot index a corpus without a single word
            self._index = bm25s.BM25(k1=K1, b=B)
            self._index.index(bm25s.tokenize(list(self.texts), stopwords=STOPWORDS, show_progress=False),
                              show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """One BM25 score per text (zeros when no query word is in the corpus)."""
        words = [w for w in tokenize([query])[0] if w in self._vocab]
        if not words:
            return np.zeros(len(self.texts), np.float32)
        return np.asarray(self._index.get_scores(words), np.float32)

    def top(self, query: str, k: int) -> list[int]:
        """Indices of the ``k`` best texts, best first."""
        return top_k(self.scores(query), k)


@dataclass
class Dense:
    """Cosine top-k over ``texts`` with a text encoder (``encode(texts) -> unit vectors``)."""

    texts: list[str]
    encode: Callable[[list[str]], np.ndarray]
    _emb: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._emb = np.asarray(self.encode(list(self.texts)), np.float32)

    def scores(self, query: str) -> np.ndarray:
        """One cosine similarity per text."""
        return self._emb @ np.asarray(self.encode([query])[0], np.float32)  # type: ignore[operator]

    def top(self, query: str, k: int) -> list[int]:
        """Indices of the ``k`` best texts, best first."""
        return top_k(self.scores(query), k)


def top_k(scores: np.ndarray, k: int) -> list[int]:
    """The ``k`` highest scores' indices, best first, ties in index order."""
    return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]


def encoder_fn(model: Any) -> Callable[[list[str]], np.ndarray]:
    """A sentence-transformers model as ``encode(texts) -> unit vectors`` (float32)."""
    def encode(texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, model.get_sentence_embedding_dimension()), np.float32)
        return np.asarray(model.encode(texts, normalize_embeddings=True, show_progress_bar=False), np.float32)
    return encode


def answer_in_context(answers: Iterable[str], texts: Iterable[str]) -> bool:
    """Whether a gold answer (normalised, as whole words) occurs in the retrieved texts."""
    ctx = f" {normalize(' '.join(texts))} "
    return any(g and f" {g} " in ctx for g in (normalize(a) for a in answers))


def context_rows(rankers: dict[str, Any], texts: Sequence[str], questions: Sequence[Question],
                 ks: Sequence[int]) -> list[dict[str, Any]]:
    """Per ranker and k: questions with a gold answer (n) and the share with it in the top-k texts."""
    scored = [q for q in questions if golds(q)]
    rows = []
    for name, ranker in rankers.items():
        ranked = [ranker.top(q.text, max(ks)) for q in scored]
        for k in ks:
            hits = [answer_in_context(golds(q), [texts[i] for i in r[:k]]) for q, r in zip(scored, ranked)]
            rows.append({"system": name, "k": k, "n": len(scored),
                         "answer_in_context": round(float(np.mean(hits)), 4) if hits else None})
    return rows


def trace_context(traces: Sequence[Any], qmap: dict[str, Question]) -> dict[str, Any]:
    """{n, answer_in_context} of a system's traces: of the questions with a gold answer, the
    share whose answer occurs in the evidence the trace retrieved (any step)."""
    hits = [answer_in_context(golds(qmap[t.question_id]), [e.content for s in t.steps for e in s.evidence])
            for t in traces if t.question_id in qmap and golds(qmap[t.question_id])]
    return {"n": len(hits), "answer_in_context": round(float(np.mean(hits)), 4) if hits else None}
