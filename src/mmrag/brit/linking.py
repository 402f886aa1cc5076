"""Image -> text-node links, the bridges of BRIT's unified graph (paper §3.1).

Each linker is a pure function of one document (its triplets, its caption entities, its image
embeddings), so a document can be added or deleted without touching the links of any other:
this is what makes incremental updates exact. Linkers are switchable and combinable; every link
remembers which linker made it, so one graph built with all linkers serves every combination.

- CA (caption): the entities named in an image's caption become (or join) text nodes and are
  linked to the image.
- SI (similarity): each image to its top-``k`` text nodes of the same page by CLIP similarity
  between the image and the node's name.
- LP (layout, page): each image to every node of triplets on the same layout page.
- LS (layout, section): each image to every node of triplets of the same section.
- PI (page-as-image, reserved): a rendered page screenshot as an image node; not built yet,
  the name is reserved so that params can list it when it lands.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

LINKERS = ("CA", "SI", "LP", "LS")
RESERVED = ("PI",)
Link = tuple[str, str, str]  # (image_id, text node key, linker)
# the linker sets of the paper's Table 2, in its row order
COMBINATIONS: list[tuple[str, ...]] = [(), ("CA",), ("LP",), ("LS",), ("SI",), ("CA", "LP"),
                                       ("CA", "LS"), ("CA", "SI"), ("LP", "SI"), ("LS", "SI"),
                                       ("CA", "LP", "SI"), ("CA", "LS", "SI")]


def label(linkers: Iterable[str]) -> str:
    """'CA+LS+SI' (or 'no linking')."""
    linkers = tuple(linkers)
    return "+".join(linkers) if linkers else "no linking"


def check_linkers(names: Iterable[str]) -> tuple[str, ...]:
    """Validate a linker list from params (order-free, no repeats); clear error otherwise."""
    names = tuple(names)
    bad = [n for n in names if n not in LINKERS]
    if bad:
        hint = " (page-as-image linking is reserved but not implemented yet)" if \
            set(bad) & set(RESERVED) else ""
        raise ValueError(f"unknown linker(s) {bad}{hint}: choose from {list(LINKERS)}")
    return tuple(n for n in LINKERS if n in names)


def caption_links(image_id: str, caption_nodes: list[str]) -> list[Link]:
    """CA: the image to each node named in its caption."""
    return [(image_id, n, "CA") for n in dict.fromkeys(caption_nodes)]


def similarity_links(image_ids: list[str], image_emb: np.ndarray, node_keys: list[str],
                     node_clip_emb: np.ndarray, top: int) -> list[Link]:
    """SI: each image to its ``top`` most CLIP-similar nodes (ties broken by node key)."""
    if not node_keys or not image_ids:
        return []
    sim = image_emb @ node_clip_emb.T
    links = []
    for i, img in enumerate(image_ids):
        order = sorted(range(len(node_keys)), key=lambda j: (-round(float(sim[i, j]), 6), node_keys[j]))
        links.extend((img, node_keys[j], "SI") for j in order[:top])
    return links


def layout_links(image_id: str, nodes_of_unit: dict[object, list[str]], unit: object,
                 linker: str) -> list[Link]:
    """LP / LS: the image to every node of its layout unit (page number or section id)."""
    if unit is None:
        return []
    return [(image_id, n, linker) for n in dict.fromkeys(nodes_of_unit.get(unit, []))]
