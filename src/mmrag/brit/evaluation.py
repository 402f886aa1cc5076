"""Scoring BRIT's pieces against the world's gold: triplet precision/recall, retrieval recall."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterable

from mmrag.brit.triplets import Triplet, normalize
from mmrag.evaluate import stats


def _field(fact: Any, key: str) -> Any:
    """A gold fact's field, whether the fact is a row of facts.jsonl or an object with attributes."""
    return fact[key] if isinstance(fact, Mapping) else getattr(fact, key)


def triplet_scores(triplets: Iterable[Triplet], facts: Iterable[Any], names: dict[str, str]
                   ) -> dict[str, float]:
    """Precision/recall of extracted triplets against gold facts, matched per section.

    A triplet matches a fact stated in the same section when its two arguments are the fact's
    subject and object names (either order; the relation wording is free, as in open IE).
    ``names`` maps entity ids to names; a fact object that is not an id is a literal. Facts are
    rows of ``facts.jsonl`` (or objects with ``section_id``, ``subject`` and ``object``).
    """
    gold: dict[str, set[frozenset[str]]] = {}
    n_gold = 0
    for f in facts:
        subject, obj = _field(f, "subject"), _field(f, "object")
        pair = frozenset({normalize(names.get(subject, subject)), normalize(names.get(obj, str(obj)))})
        gold.setdefault(_field(f, "section_id"), set()).add(pair)
    n_gold = sum(len(v) for v in gold.values())
    found: dict[str, set[frozenset[str]]] = {}
    tp_pred = n_pred = 0
    for t in triplets:
        if t.source != "section":
            continue
        n_pred += 1
        pair = frozenset({normalize(t.subject), normalize(t.object)})
        if pair in gold.get(str(t.section_id), set()):
            tp_pred += 1
            found.setdefault(str(t.section_id), set()).add(pair)
    hit = sum(len(v) for v in found.values())
    p = tp_pred / n_pred if n_pred else 0.0
    r = hit / n_gold if n_gold else 0.0
    p_ci, r_ci = stats.wilson(tp_pred, n_pred), stats.wilson(hit, n_gold)
    return {"precision": round(p, 4), "recall": round(r, 4),
            "f1": round(2 * p * r / (p + r), 4) if p + r else 0.0,
            "extracted": n_pred, "gold_facts": n_gold,
            # 95 % Wilson intervals and their n (triplets for precision, gold facts for recall)
            "precision_ci": [_round(p_ci[0]), _round(p_ci[1]), n_pred],
            "recall_ci": [_round(r_ci[0]), _round(r_ci[1]), n_gold]}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def covers(retrieved: set[str], gold: Iterable[str], sections: set[str] | frozenset[str]) -> bool:
    """Recalled: one gold section (if any is gold) and one gold image (if any) were retrieved.

    The world lists every image of the entity a question needs as alternatives (any one of
    them shows the attribute), and the section that states the fact; a caption counts as
    retrieved with its image.
    """
    gold = set(gold)
    if not gold:
        return False
    g_sec = gold & set(sections)
    g_img = gold - g_sec
    return (not g_sec or bool(g_sec & retrieved)) and (not g_img or bool(g_img & retrieved))


def relation_scores(triplets: Iterable[Triplet], entities: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Corpus-level precision/recall of entity pairs against the world's gold relations.

    Gold: every (entity, related entity) pair of ``entities.jsonl``; predicted: every distinct
    (subject, object) pair of the extracted section triplets whose two names are both world
    entities (pairs with a non-entity argument, such as a year, are counted apart). Either order
    matches: open IE relation wording and direction are free ("designed by" vs "designed").
    """
    entities = list(entities)
    name = {e["id"]: normalize(e["name"]) for e in entities}
    known = set(name.values())
    gold = {frozenset({name[e["id"]], name[r["object_id"]]}) for e in entities
            for r in e.get("relations", []) if r.get("object_id") in name}
    pred_all = {frozenset({normalize(t.subject), normalize(t.object)}) for t in triplets
                if t.source == "section"}
    pred = {p for p in pred_all if p <= known and len(p) == 2}
    tp = len(pred & gold)
    p = tp / len(pred) if pred else 0.0
    r = tp / len(gold) if gold else 0.0
    return {"precision": round(p, 4), "recall": round(r, 4),
            "f1": round(2 * p * r / (p + r), 4) if p + r else 0.0,
            "entity_pairs": len(pred), "gold_pairs": len(gold),
            "non_entity_pairs": len(pred_all) - len(pred)}
