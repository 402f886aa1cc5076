"""The models BRIT builds and queries its graph with, loaded as params name them: the spaCy
pipeline (entities, triplets), the sentence-transformers text encoder and CLIP; and the memoised
encoders over them (the same strings recur across every system and query, so each is encoded once).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from mmrag.brit.graph import Encoders, sentence_transformer_fn
from mmrag.models import registry


def memo_texts(fn: Callable[[list[str]], np.ndarray]) -> Callable[[list[str]], np.ndarray]:
    """An encode function that never encodes the same string twice (queries repeat per system)."""
    cache: dict[str, np.ndarray] = {}

    def encode(texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if missing:
            for t, v in zip(missing, fn(missing)):
                cache[t] = v
        if not texts:
            return fn([])
        return np.stack([cache[t] for t in texts])
    return encode


class MemoClip:
    """A ClipEncoder whose text and image-path embeddings are computed once."""

    def __init__(self, clip: Any):
        self.clip = clip
        self.encode_texts = memo_texts(clip.encode_texts)
        self._paths = memo_texts(lambda paths: clip.encode_images(list(paths)))

    @property
    def dim(self) -> int:
        """Embedding width (a text-only corpus sizes its empty image matrix with it)."""
        return int(self.clip.dim)

    def encode_images(self, images: list[Any]) -> np.ndarray:
        if all(isinstance(i, (str, Path)) for i in images):
            return self._paths([str(i) for i in images])
        return self.clip.encode_images(images)


def encoders_for(text_model: Any, clip: Any, root: Path) -> Encoders:
    """Memoised encoders from a sentence-transformers model and a ClipEncoder."""
    return Encoders(memo_texts(sentence_transformer_fn(text_model)), MemoClip(clip), Path(root))


def load_model_parts(spacy: str, text_encoder: str, clip: str, allow_network: bool) -> tuple[Any, Any, Any]:
    """(spaCy pipeline, sentence-transformers text model, CLIP encoder), loaded in this order."""
    from mmrag.models.clip import load_clip  # imports torch and open_clip: only when a CLIP is loaded

    nlp = registry.load_spacy(spacy)
    text_model = registry.load_text_encoder(text_encoder, allow_network=allow_network, device="cpu")
    return nlp, text_model, load_clip(clip, allow_network=allow_network)


def load_models(spacy: str, text_encoder: str, clip: str, corpus_dir: Path, allow_network: bool
                ) -> tuple[Any, Encoders]:
    """(spaCy pipeline, memoised text and CLIP encoders rooted at the corpus): what a graph is
    built with and what its queries are encoded with."""
    nlp, text_model, clip_model = load_model_parts(spacy, text_encoder, clip, allow_network)
    return nlp, encoders_for(text_model, clip_model, corpus_dir)
