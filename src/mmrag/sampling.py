"""Seeded samples that do not depend on file order: the same seed picks the same items.

Every sample of questions or documents in the pipeline goes through here, so a sample is
fixed before any outcome is seen, and two stages that sample "the same way" really do.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")


def seeded_key(seed: int, item_id: str, salt: str = "") -> str:
    """A stable pseudo-random sort key for an id (sha1 of ``{salt}{seed}:{id}``)."""
    return hashlib.sha1(f"{salt}{seed}:{item_id}".encode()).hexdigest()


def seeded_unit(seed: int, item_id: str, salt: str = "") -> float:
    """A stable number in [0, 1] for an id: a hash-based coin that survives reordering."""
    return int(seeded_key(seed, item_id, salt)[:8], 16) / 0xFFFFFFFF


def seeded_order(items: Iterable[T], seed: int, salt: str = "",
                 key: Callable[[T], str] = lambda x: x.id) -> list[T]:  # type: ignore[attr-defined]
    """Items sorted by their seeded key: a shuffle that adding or removing items does not disturb."""
    return sorted(items, key=lambda x: seeded_key(seed, key(x), salt))


def seeded_sample(items: Iterable[T], n: int, seed: int, salt: str = "",
                  key: Callable[[T], str] = lambda x: x.id) -> list[T]:  # type: ignore[attr-defined]
    """The first ``n`` items of :func:`seeded_order` (all of them when ``n`` is 0 or larger)."""
    ordered = seeded_order(items, seed, salt, key)
    return ordered[:n] if n > 0 else ordered


def round_robin(items: Sequence[T], n: int, seed: int, by: Callable[[T], Hashable]) -> list[T]:
    """``n`` items drawn in turn from each group (sorted group names), each group shuffled by ``seed``.

    Balances question kinds in a small sample (each kind gets ``n / kinds`` until it runs out).
    """
    groups: dict[Hashable, list[T]] = defaultdict(list)
    for item in items:
        groups[by(item)].append(item)
    rng = random.Random(seed)
    for name in groups:
        rng.shuffle(groups[name])
    out: list[T] = []
    names = sorted(groups, key=str)
    while len(out) < n and any(groups.values()):
        for name in names:
            if groups[name] and len(out) < n:
                out.append(groups[name].pop())
    return out


def proportional(items: Sequence[T], n: int, seed: int, by: Callable[[T], Hashable], salt: str = "",
                 key: Callable[[T], str] = lambda x: x.id) -> list[T]:  # type: ignore[attr-defined]
    """About ``n`` items spread over groups in proportion to their size (at least one per group),
    each group in :func:`seeded_order`; returned in input order (all items when ``n`` is 0 or
    covers them all).

    Subsamples a large corpus while keeping every gold domain represented.
    """
    if not n or len(items) <= n:
        return list(items)
    groups: dict[Hashable, list[T]] = defaultdict(list)
    for item in seeded_order(items, seed, salt, key):
        groups[by(item)].append(item)
    out: list[T] = []
    for name in sorted(groups, key=str):
        out += groups[name][: max(1, round(n * len(groups[name]) / len(items)))]
    keep = {key(x) for x in out[:n]}
    return [x for x in items if key(x) in keep]
