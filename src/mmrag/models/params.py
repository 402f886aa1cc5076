"""The `models` and `inference` sections: which models the pipeline provisions and loads by name, and how
the generation service runs them.

Each field's comment is the key's only documentation (params.yaml says which value is used)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mmrag.params import model, rng


@dataclass(frozen=True)
class Models:
    """Which models the `models` stage provisions, and which every later stage loads by name."""

    llm: str = field(metadata=model("llm"))
    # Extra causal LMs to provision for size sweeps; a name whose package is absent is
    # reported and skipped (the stage still runs).
    extra_llms: tuple[str, ...]
    text_encoder: str = field(metadata=model("text_encoder"))
    spacy: str = field(metadata=model("spacy"))
    # the vision-language encoder: the clip stage's folder (trained here, or a pointer to clip.pretrained)
    clip: str
    sample_prompt: str
    sample_max_new_tokens: int = field(metadata=rng(ge=1, le=512))
    # The model ladder: LLMs provisioned as GGUF for the llama.cpp engine (HF weights only for
    # llm and extra_llms, the training bases) and measured on the models stage's probe.
    ladder: tuple[str, ...]
    engine: Literal["llamacpp", "hf", "openai"]  # engine of the sample generations and the probe



@dataclass(frozen=True)
class Inference:
    """How the generation service runs models (src/mmrag/models/generation.py)."""

    threads: int = field(metadata=rng(ge=1))  # llama.cpp CPU threads
    slots: int = field(metadata=rng(ge=1, le=64))  # concurrent sequences (continuous batching)
    ctx_per_slot: int = field(metadata=rng(ge=256))  # tokens each slot holds (prompt + reply)
    hf_batch_size: int = field(metadata=rng(ge=1))  # engine hf: generate() batch
    cache_dir: str  # LoRA adapters exported to GGUF on demand (and Q4_0 copies)
    weights: Literal["shipped", "q4_0"]  # llama.cpp's weights: the provisioned GGUF or a Q4_0 copy
