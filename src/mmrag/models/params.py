"""The `models` and `inference` sections: which models the pipeline provisions and loads by name, and how
the generation service runs them.

Each key's meaning is documented in params.yaml, the only place (here: types, ranges and model metadata)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mmrag.params import model, rng


@dataclass(frozen=True)
class Models:
    """Which models the `models` stage provisions, and which every later stage loads by name."""

    llm: str = field(metadata=model("llm"))
    extra_llms: tuple[str, ...]
    text_encoder: str = field(metadata=model("text_encoder"))
    spacy: str = field(metadata=model("spacy"))
    clip: str
    sample_prompt: str
    sample_max_new_tokens: int = field(metadata=rng(ge=1, le=512))
    ladder: tuple[str, ...]
    engine: Literal["llamacpp", "hf", "openai"]



@dataclass(frozen=True)
class Inference:
    """How the generation service runs models (src/mmrag/models/generation.py)."""

    threads: int = field(metadata=rng(ge=1))
    slots: int = field(metadata=rng(ge=1, le=64))
    ctx_per_slot: int = field(metadata=rng(ge=256))
    hf_batch_size: int = field(metadata=rng(ge=1))
    cache_dir: str
    weights: Literal["shipped", "q4_0"]
