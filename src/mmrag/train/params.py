"""The `clip` section: the vision-language encoder trained here with open_clip (or a pretrained one).

Each key's meaning is documented in params.yaml, the only place (here: types, ranges and model metadata)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mmrag.params import rng


@dataclass(frozen=True)
class Clip:
    """The vision-language encoder (stage `clip`): a small open_clip trained on attribute captions."""

    corpus: str
    pretrained: str
    image_size: int = field(metadata=rng(ge=32, le=512))
    embed_dim: int = field(metadata=rng(ge=8))
    vision_width: int = field(metadata=rng(ge=8))
    vision_layers: tuple[int, ...]
    text_width: int = field(metadata=rng(ge=16))
    text_layers: int = field(metadata=rng(ge=1))
    text_heads: int = field(metadata=rng(ge=1))
    context_length: int = field(metadata=rng(ge=8, le=77))
    extra_images: int = field(metadata=rng(ge=0))
    render_size: int = field(metadata=rng(ge=32, le=512))
    steps: int = field(metadata=rng(ge=1))
    batch_size: int = field(metadata=rng(ge=2))
    lr: float = field(metadata=rng(gt=0))
    weight_decay: float = field(metadata=rng(ge=0))
    warmup_steps: int = field(metadata=rng(ge=0))
    caption_drop: float = field(metadata=rng(ge=0, le=1))
    kind_batches: float = field(metadata=rng(ge=0, le=1))
    attribute_weight: float = field(metadata=rng(ge=0))
    log_every: int = field(metadata=rng(ge=1))
    eval_every: int = field(metadata=rng(ge=1))
    threads: int = field(metadata=rng(ge=1))
    checkpoint_every: int = field(metadata=rng(ge=0))
    examples: int = field(metadata=rng(ge=1))
