"""The `world` section: the size and shape of the generated enterprise wiki and its question sets.

Each key's meaning is documented in params.yaml, the only place (here: types, ranges and model metadata)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mmrag.params import rng


@dataclass(frozen=True)
class World:
    """The generated enterprise wiki (stage `world`): its size, pages, images and question sets."""

    domains: int = field(metadata=rng(ge=2, le=12))
    products_per_domain: int = field(metadata=rng(ge=2, le=8))
    people_per_domain: int = field(metadata=rng(ge=2, le=8))
    places_per_domain: int = field(metadata=rng(ge=1, le=4))
    events_per_domain: int = field(metadata=rng(ge=1, le=4))
    images_per_page: tuple[int, ...]
    sections_per_page: tuple[int, ...]
    heldout_images: int = field(metadata=rng(ge=1, le=10))
    image_size: int = field(metadata=rng(ge=32, le=512))
    triplets_per_page: int = field(metadata=rng(ge=1))
    descriptive_caption_share: float = field(metadata=rng(ge=0, le=1))
    caption_attribute_drop: float = field(metadata=rng(ge=0, le=1))
    brit_questions: int = field(metadata=rng(ge=5))
    brit_nea_pairs: int = field(metadata=rng(ge=0))
    mmqa_questions: int = field(metadata=rng(ge=13))
    mmcoqa_conversations: int = field(metadata=rng(ge=3))
    infoseek_questions: int = field(metadata=rng(ge=10))
    infoseek_unseen_entity_share: float = field(metadata=rng(gt=0, lt=1))
    dev_share: float = field(metadata=rng(ge=0, lt=1))
    test_share: float = field(metadata=rng(gt=0, lt=1))
    validation_threshold: float = field(metadata=rng(gt=0, le=1))
    samples: int = field(metadata=rng(ge=1))
