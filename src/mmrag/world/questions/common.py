"""Shared pieces of the question sets: gold lookups, sub-questions, splits, balancing, dedupe."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from mmrag.schema import Question, SubQuestion
from mmrag.world import phrasing as PH
from mmrag.world.generator import World

Hop = dict[str, Any]


class Gold:
    """Lookups that turn world facts into evidence ids and oracle hops."""

    def __init__(self, world: World) -> None:
        self.w = world
        self.E = world.entities

    def name(self, eid: str) -> str:
        return self.E[eid].name

    def fact_section(self, subject: str, relation: str, obj: str | None = None,
                     page_of: str | None = None) -> str:
        """The section stating the fact, on ``page_of``'s page (default: the subject's)."""
        doc_id = f"doc-{page_of or subject}"
        found = self.w.facts_about(subject, relation, obj, doc_id)
        if not found:
            raise KeyError(f"no fact {subject} {relation} {obj} on {doc_id}")
        return found[0].section_id

    def text_hop(self, subject: str, relation: str, obj: str, page_of: str | None = None,
                 about: str | None = None) -> tuple[Hop, str]:
        """A hop answered by a sentence: returns (hop, section id)."""
        sid = self.fact_section(subject, relation, obj, page_of)
        s_name = self.name(subject)
        answer = self.name(obj) if obj in self.E else obj
        key = about if about is not None else s_name
        ans = answer if key == s_name else s_name
        return {"op": "text", "evidence": [sid], "subject": key, "answer": ans}, sid

    def table_id(self, eid: str) -> str:
        return self.w.doc_of(eid).tables[0].id

    def table_hop(self, eid: str, prop: str, subject: str | None = None) -> Hop:
        """Read a key/value cell of the entity's own table."""
        return {"op": "table", "evidence": [self.table_id(eid)], "key": PH.TABLE_KEY[prop],
                "subject": subject or self.name(eid)}

    def image_of(self, eid: str, rng: random.Random, split: str = "train") -> str:
        rows = self.w.images_of(eid, split)
        if not rows:
            raise KeyError(f"entity {eid} has no {split} image")
        return rng.choice(rows)["id"]

    def all_images(self, eid: str) -> list[str]:
        return [r["id"] for r in self.w.images_of(eid, "train")]


def _uniq(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _sub(text: str, tool: str, answer: str, evidence: list[str]) -> SubQuestion:
    return SubQuestion(text=text, tool=tool, answer=answer, evidence_ids=list(evidence))


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _split(rng: random.Random, dev: float, test: float) -> str:
    r = rng.random()
    return "test" if r < test else "dev" if r < test + dev else "train"


def _take_balanced(pools: dict[str, list[Question]], n: int, rng: random.Random) -> list[Question]:
    """Up to n questions, as even across kinds as the pools allow (deterministic)."""
    for pool in pools.values():
        rng.shuffle(pool)
    kinds = [k for k in pools if pools[k]]
    out: list[Question] = []
    idx = {k: 0 for k in kinds}
    while len(out) < n and kinds:
        for k in list(kinds):
            if len(out) >= n:
                break
            if idx[k] >= len(pools[k]):
                kinds.remove(k)
                continue
            out.append(pools[k][idx[k]])
            idx[k] += 1
    return out


def _dedupe(qs: list[Question]) -> list[Question]:
    seen, out = set(), []
    for q in qs:
        key = (q.text, q.image_id, tuple((t.question for t in q.history)))
        if key not in seen:
            seen.add(key)
            out.append(q)
    return out
