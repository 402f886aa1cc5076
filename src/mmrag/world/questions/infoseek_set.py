"""InfoSeek-style (image, question) pairs answered by a passage about the pictured entity.

Four splits as in InfoSeek: train/dev from seen entities and relations, ``test_unseen_entity``
and ``test_unseen_question`` from entities and relations held out of training.
"""

from __future__ import annotations

import random
from typing import Any

from mmrag.corpora.passages import Chunking, to_passages
from mmrag.schema import Question
from mmrag.world import phrasing as PH
from mmrag.world.generator import VISUAL, World
from mmrag.world.questions.common import _cap, _sub

INFOSEEK_RELATIONS: dict[str, tuple[str, ...]] = {
    "product": ("designed_by", "developed_by", "manufactured_in", "release_year", "successor_of"),
    "person": ("works_for", "based_in", "role", "joined_year"),
    "place": ("owned_by", "city", "opened_year"),
}


def infoseek(world: World, n: int, rng: random.Random, unseen_entity_share: float,
             dev: float, chunking: Chunking) -> tuple[list[Question], dict[str, Any]]:
    """(image, question) pairs answered by the pictured entity's page; InfoSeek's four splits.

    Gold passages are the ids ``to_passages(pages, *chunking)`` gives the passages holding the
    answer sentence (the knowledge map's chunking, params ``knowledge_map``); a question whose
    answer sentence falls in no passage (truncated away) is counted and skipped.
    """
    by_doc: dict[str, dict[str, str]] = {}
    for p in to_passages(world.documents, *chunking):
        by_doc.setdefault(p.doc_id, {})[p.id] = p.text
    visual = [e for e in world.entities.values() if e.type in VISUAL]
    unseen = set(e.id for e in rng.sample(visual, max(1, round(unseen_entity_share * len(visual)))))
    held_rel = {k: rng.choice(v) for k, v in INFOSEEK_RELATIONS.items()}
    cands: list[Question] = []
    skipped = {"no_fact": 0, "not_in_passage": 0}
    for e in visual:
        heldout = [r["id"] for r in world.images_of(e.id, "heldout")]
        for rel in INFOSEEK_RELATIONS[e.type]:
            obj = e.one(rel) if rel not in e.properties else str(e.properties[rel])
            if obj is None:
                continue
            facts = world.facts_about(e.id, rel, obj, f"doc-{e.id}")
            if not facts:
                skipped["no_fact"] += 1
                continue
            f = facts[0]
            pas = [pid for pid, txt in sorted(by_doc.get(f.doc_id, {}).items()) if f.sentence in txt]
            if not pas:
                skipped["not_in_passage"] += len(heldout) * len(PH.FORWARD[rel])
                continue
            answer = world.entities[obj].name if obj in world.entities else obj
            if e.id in unseen:
                split = "test_unseen_entity" if rel != held_rel[e.type] else None
            else:
                split = "test_unseen_question" if rel == held_rel[e.type] else "seen"
            if split is None:
                continue
            for img in heldout:
                for tpl in PH.FORWARD[rel]:
                    x = rng.choice(PH.IN_IMAGE[e.type])
                    text = _cap(tpl.format(x=x))
                    cands.append(Question(
                        id="", text=text, answer=answer, dataset="infoseek", kind=rel,
                        split=split, image_id=img, image_path=world.image_rows[img]["path"],
                        gold_evidence=[f.section_id], gold_entity=e.id, gold_passages=pas,
                        gold_domain=e.domain,
                        decomposition=[
                            _sub(f"Which {e.type} is shown in the image?", "ImageQA", e.name, [img]),
                            _sub(_cap(tpl.format(x=e.ref())), "TextQA", answer, [f.section_id])],
                        meta={"path": [{"op": "image_entity", "evidence": [img]},
                                       {"op": "text", "evidence": [f.section_id], "subject": "$1",
                                        "answer": answer}],
                              "entity_type": e.type}))
    rng.shuffle(cands)
    chosen = cands[:n]
    chosen.sort(key=lambda q: (q.gold_entity, q.kind, q.image_id, q.text))
    for i, q in enumerate(chosen):
        q.id = f"infoseek-{i:05d}"
        if q.split == "seen":
            q.split = "dev" if rng.random() < dev else "train"
    info = {"unseen_entities": sorted(unseen), "unseen_relations": held_rel,
            "skipped": skipped, "candidates": len(cands)}
    return chosen, info
