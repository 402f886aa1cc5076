"""Question sets over the generated world, each question with complete gold.

Five sets, in the formats of the papers' benchmarks (CONTRACTS in the README of the world):

- ``mmqa`` — MultiModalQA-style multi-hop questions over text, tables and images, with a gold
  decomposition into single-hop sub-questions (tool, intermediate answer, evidence);
- ``mmcoqa`` — conversations whose later turns refer back ("When was it released?");
- ``infoseek`` — (image, question) pairs answered by a passage about the pictured entity,
  with unseen-entity and unseen-question test splits;
- ``brit`` / ``brit_nea`` — BRIT's multiple-choice Text-Image, Image-Text and Image-Image
  questions, validated against their source text, and Named Entity Anonymization pairs.

Besides the human-readable decomposition every question carries ``meta['path']``: the same
hops as operations on the corpus (read a table cell, read an image's attributes, select the
images that show a value, find a sentence) that :mod:`mmrag.corpora.oracle` executes to prove
that the gold evidence leads to the gold answer.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from mmrag.corpora import phrasing as PH
from mmrag.corpora.world import VISUAL, Entity, World
from mmrag.schema import Question, SubQuestion

Hop = dict[str, Any]


# --------------------------------------------------------------------------- gold helpers
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


# --------------------------------------------------------------------------- MultiModalQA
def _visual_constraints(w: World, group: list[Entity]) -> list[tuple[Entity, str, str]]:
    """(entity, attr, value) where the value picks exactly that entity within the group."""
    out = []
    for e in group:
        for attr, value in sorted(e.attributes.items()):
            if attr == "count":
                continue
            if sum(1 for x in group if x.attributes.get(attr) == value) == 1:
                out.append((e, attr, value))
    return out


def mmqa(world: World, n: int, rng: random.Random, dev: float = 0.1,
         test: float = 0.2) -> list[Question]:
    """MultiModalQA-style questions in 13 kinds, balanced, with gold decomposition and path."""
    G = Gold(world)
    E = world.entities
    pools: dict[str, list[Question]] = {}

    def add(kind: str, text: str, answer: str, subs: list[SubQuestion], path: list[Hop],
            **meta: Any) -> None:
        ev = _uniq([i for s in subs for i in s.evidence_ids])
        pools.setdefault(kind, []).append(Question(
            id="", text=text, answer=answer, dataset="mmqa", kind=kind, gold_evidence=ev,
            decomposition=subs, meta={"path": path, **meta}))

    products = world.by_type("product")
    orgs = world.by_type("organisation")
    # --- TextQ
    for e in sorted(E.values(), key=lambda x: x.id):
        for r in e.relations:
            rel, o = r["relation"], r["object_id"]
            if rel not in PH.FORWARD or len(e.objects(rel)) != 1:
                continue
            text = rng.choice(PH.FORWARD[rel]).format(x=e.ref())
            hop, sid = G.text_hop(e.id, rel, o)
            add("TextQ", _cap(text), E[o].name, [_sub(_cap(text), "TextQA", E[o].name, [sid])],
                [hop])
        for prop in ("release_year", "role", "city", "opened_year", "founded_year", "attendees"):
            if prop in e.properties:
                text = _cap(rng.choice(PH.FORWARD[prop]).format(x=e.ref()))
                hop, sid = G.text_hop(e.id, prop, str(e.properties[prop]))
                add("TextQ", text, str(e.properties[prop]),
                    [_sub(text, "TextQA", str(e.properties[prop]), [sid])], [hop])
    # --- TableQ
    for e in sorted(E.values(), key=lambda x: x.id):
        for prop, asks in PH.TABLE_ASK.items():
            if prop in e.properties and prop in PH.TABLE_KEY:
                text = _cap(rng.choice(asks).format(x=e.ref()))
                ans = str(e.properties[prop])
                hop = G.table_hop(e.id, prop)
                add("TableQ", text, ans, [_sub(text, "TableQA", ans, [G.table_id(e.id)])], [hop])
    # --- ImageQ
    for e in sorted(E.values(), key=lambda x: x.id):
        if e.type not in VISUAL:
            continue
        for attr, value in sorted(e.attributes.items()):
            text = _cap(rng.choice(PH.ASK[(e.type, attr)]).format(x=e.ref()))
            img = G.image_of(e.id, rng)
            add("ImageQ", text, value, [_sub(text, "ImageQA", value, [img])],
                [{"op": "image_attr", "evidence": [img], "subject": e.name, "attribute": attr}])
    # groups: an organisation's products / staff; an image of each member
    groups: list[tuple[Entity, str, list[Entity]]] = []
    for org in orgs:
        groups.append((org, "product", [p for p in products if org.id in p.objects("developed_by")]))
        groups.append((org, "person", [p for p in world.by_type("person")
                                       if org.id in p.objects("works_for")]))
    noun = {"product": "product", "person": "employee"}
    for org, kind, members in groups:
        if len(members) < 2:
            continue
        imgs = [G.image_of(m.id, rng) for m in members]
        for target, attr, value in _visual_constraints(world, members):
            c = PH.constraint(kind, attr, value)
            sel_hop = {"op": "image_select", "evidence": imgs, "attribute": attr, "value": value}
            sel_text = f"Which {org.name} {noun[kind]} is {c}?" if kind == "person" else \
                f"Which {org.name} product is the one {c}?"
            sel_sub = _sub(sel_text, "ImageQA", target.name, imgs)
            # ImageListQ
            add("ImageListQ", sel_text, target.name, [sel_sub], [sel_hop])
            x = f"the {org.name} {noun[kind]} {c}"
            # Compose(TextQ,ImageQ): image picks the entity, text answers about it
            for rel in (("designed_by", "manufactured_in") if kind == "product" else
                        ("based_in",)):
                o = target.one(rel)
                hop, sid = G.text_hop(target.id, rel, o)
                hop["subject"] = "$1"
                q2 = _cap(rng.choice(PH.FORWARD[rel]).format(x=target.ref()))
                text = _cap(rng.choice(PH.FORWARD[rel]).format(x=x))
                add("Compose(TextQ,ImageQ)", text, E[o].name,
                    [sel_sub, _sub(q2, "TextQA", E[o].name, [sid])], [sel_hop, hop])
            # Compose(TableQ,ImageQ): image picks the entity, its table answers
            for prop in (("price_usd", "weight_g") if kind == "product" else ("joined_year",)):
                ans = str(target.properties[prop])
                hop = G.table_hop(target.id, prop, "$1")
                text = _cap(rng.choice(PH.TABLE_ASK[prop]).format(x=x))
                q2 = _cap(rng.choice(PH.TABLE_ASK[prop]).format(x=target.ref()))
                add("Compose(TableQ,ImageQ)", text, ans,
                    [sel_sub, _sub(q2, "TableQA", ans, [G.table_id(target.id)])], [sel_hop, hop])
    # line-up selections: the org's table picks a product by year or price
    for org in orgs:
        members = [p for p in products if org.id in p.objects("developed_by")]
        tid = G.table_id(org.id)
        for col, prop, phrase in (("Release year", "release_year", "released in {v}"),
                                  ("Price (USD)", "price_usd", "priced at {v} dollars")):
            for p in members:
                v = str(p.properties[prop])
                if sum(1 for m in members if str(m.properties[prop]) == v) != 1:
                    continue
                sel_text = f"Which {org.name} product was {phrase.format(v=v)}?" if \
                    prop == "release_year" else f"Which {org.name} product is {phrase.format(v=v)}?"
                sel_hop = {"op": "table_select", "evidence": [tid], "column": col, "value": v,
                           "return": "Product"}
                sel_sub = _sub(sel_text, "TableQA", p.name, [tid])
                x = f"the {org.name} product {phrase.format(v=v)}"
                # Compose(TextQ,TableQ)
                for rel in ("designed_by", "manufactured_in"):
                    o = p.one(rel)
                    hop, sid = G.text_hop(p.id, rel, o)
                    hop["subject"] = "$1"
                    text = _cap(rng.choice(PH.FORWARD[rel]).format(x=x))
                    q2 = _cap(rng.choice(PH.FORWARD[rel]).format(x=p.ref()))
                    add("Compose(TextQ,TableQ)", text, E[o].name,
                        [sel_sub, _sub(q2, "TextQA", E[o].name, [sid])], [sel_hop, hop])
                # Compose(ImageQ,TableQ)
                for attr in ("colour", "shape", "pattern", "logo_colour"):
                    img = G.image_of(p.id, rng)
                    value = p.attributes[attr]
                    text = _cap(rng.choice(PH.ASK[("product", attr)]).format(x=x))
                    q2 = _cap(rng.choice(PH.ASK[("product", attr)]).format(x=p.ref()))
                    add("Compose(ImageQ,TableQ)", text, value,
                        [sel_sub, _sub(q2, "ImageQA", value, [img])],
                        [sel_hop, {"op": "image_attr", "evidence": [img], "subject": "$1",
                                   "attribute": attr}])
    # text bridges: a sentence names the bridge entity
    for e in sorted(E.values(), key=lambda x: x.id):
        for r in e.relations:
            rel, o = r["relation"], r["object_id"]
            if rel not in PH.OBJECT_OF or len(e.objects(rel)) != 1:
                continue
            bridge = E[o]
            hop1, sid1 = G.text_hop(e.id, rel, o)
            q1 = _cap(rng.choice(PH.FORWARD[rel]).format(x=e.ref()))
            sub1 = _sub(q1, "TextQA", bridge.name, [sid1])
            x = PH.OBJECT_OF[rel].format(s=e.ref())
            # Compose(ImageQ,TextQ): the bridge's picture answers
            if bridge.type in VISUAL:
                for attr in sorted(bridge.attributes):
                    if attr == "count":
                        continue
                    img = G.image_of(bridge.id, rng)
                    value = bridge.attributes[attr]
                    text = _cap(rng.choice(PH.ASK[(bridge.type, attr)]).format(x=x))
                    q2 = _cap(rng.choice(PH.ASK[(bridge.type, attr)]).format(x=bridge.ref()))
                    add("Compose(ImageQ,TextQ)", text, value,
                        [sub1, _sub(q2, "ImageQA", value, [img])],
                        [{**hop1, "answer": bridge.name},
                         {"op": "image_attr", "evidence": [img], "subject": "$1",
                          "attribute": attr}])
            # Compose(TableQ,TextQ): the bridge's table answers
            for prop, asks in PH.TABLE_ASK.items():
                if prop in bridge.properties and prop != "release_year":
                    ans = str(bridge.properties[prop])
                    text = _cap(rng.choice(asks).format(x=x))
                    q2 = _cap(rng.choice(asks).format(x=bridge.ref()))
                    add("Compose(TableQ,TextQ)", text, ans,
                        [sub1, _sub(q2, "TableQA", ans, [G.table_id(bridge.id)])],
                        [hop1, G.table_hop(bridge.id, prop, "$1")])
            # Compose(TextQ,TextQ): a second sentence on the bridge's page answers
            for r2 in bridge.relations:
                rel2, o2 = r2["relation"], r2["object_id"]
                if rel2 not in PH.FORWARD or len(bridge.objects(rel2)) != 1 or o2 == e.id:
                    continue
                hop2, sid2 = G.text_hop(bridge.id, rel2, o2)
                hop2["subject"] = "$1"
                text = _cap(rng.choice(PH.FORWARD[rel2]).format(x=x))
                q2 = _cap(rng.choice(PH.FORWARD[rel2]).format(x=bridge.ref()))
                add("Compose(TextQ,TextQ)", text, E[o2].name,
                    [sub1, _sub(q2, "TextQA", E[o2].name, [sid2])], [hop1, hop2])
    # Intersect(TextQ,ImageQ): products designed by P ∩ products of the org with a value
    for person in world.by_type("person"):
        designed = [p for p in products if person.id in p.objects("designed_by")]
        org = E[person.one("works_for")]
        members = [p for p in products if org.id in p.objects("developed_by")]
        if not designed:
            continue
        imgs = [G.image_of(m.id, rng) for m in members]
        for attr in ("colour", "shape", "pattern", "logo_colour", "logo_position"):
            for value in sorted({m.attributes[attr] for m in designed}):
                a_set = [p for p in designed]
                b_set = [m for m in members if m.attributes[attr] == value]
                inter = [p for p in a_set if p in b_set]
                if len(inter) != 1 or (len(a_set) < 2 and len(b_set) < 2):
                    continue
                t = inter[0]
                c = PH.constraint("product", attr, value)
                sids = [G.fact_section(p.id, "designed_by", person.id, page_of=person.id)
                        for p in a_set]
                sids = _uniq(sids)
                q1 = f"Which products did {person.name} design?"
                q2 = f"Which {org.name} products are the ones {c}?"
                text = f"Which product designed by {person.name} is the one {c}?"
                add("Intersect(TextQ,ImageQ)", text, t.name,
                    [_sub(q1, "TextQA", ", ".join(p.name for p in a_set), sids),
                     _sub(q2, "ImageQA", ", ".join(m.name for m in b_set), imgs)],
                    [{"op": "text_list", "evidence": sids, "subject": person.name,
                      "answers": [p.name for p in a_set]},
                     {"op": "image_select", "evidence": imgs, "attribute": attr, "value": value,
                      "many": True},
                     {"op": "intersect", "args": [1, 2]}])
    # Intersect(TableQ,TextQ): line-up by year ∩ exhibits of an event
    for org in orgs:
        members = [p for p in products if org.id in p.objects("developed_by")]
        tid = G.table_id(org.id)
        for ev in [x for x in world.by_type("event") if x.one("organised_by") == org.id]:
            shown = [p for p in products if ev.id in p.objects("shown_at")]
            sids = _uniq([G.fact_section(p.id, "shown_at", ev.id, page_of=ev.id) for p in shown])
            for year in sorted({str(m.properties["release_year"]) for m in members}):
                a_set = [m for m in members if str(m.properties["release_year"]) == year]
                inter = [p for p in a_set if p in shown]
                if len(inter) != 1 or (len(a_set) < 2 and len(shown) < 2):
                    continue
                t = inter[0]
                text = f"Which {org.name} product released in {year} was shown at {ev.name}?"
                add("Intersect(TableQ,TextQ)", text, t.name,
                    [_sub(f"Which {org.name} products were released in {year}?", "TableQA",
                          ", ".join(m.name for m in a_set), [tid]),
                     _sub(f"Which products were shown at {ev.name}?", "TextQA",
                          ", ".join(p.name for p in shown), sids)],
                    [{"op": "table_select", "evidence": [tid], "column": "Release year",
                      "value": year, "return": "Product", "many": True},
                     {"op": "text_list", "evidence": sids, "subject": ev.name,
                      "answers": [p.name for p in shown]},
                     {"op": "intersect", "args": [1, 2]}])
    # Compare(TableQ,TableQ)
    pairs = [(a, b) for i, a in enumerate(products) for b in products[i + 1:]]
    rng.shuffle(pairs)
    for a, b in pairs[: 40 * max(1, n // 100)]:
        for prop, more, less in (("price_usd", "costs more", "costs less"),
                                 ("weight_g", "is heavier", "is lighter"),
                                 ("release_year", "was released later", "was released earlier")):
            va, vb = a.properties[prop], b.properties[prop]
            if va == vb:
                continue
            pick = rng.choice(("max", "min"))
            ans = (a if (va > vb) == (pick == "max") else b).name
            verb = more if pick == "max" else less
            text = f"Which {verb}, the {a.name} or the {b.name}?"
            asks = PH.TABLE_ASK[prop]
            add("Compare(TableQ,TableQ)", text, ans,
                [_sub(_cap(asks[0].format(x=a.ref())), "TableQA", str(va), [G.table_id(a.id)]),
                 _sub(_cap(asks[0].format(x=b.ref())), "TableQA", str(vb), [G.table_id(b.id)])],
                [G.table_hop(a.id, prop), G.table_hop(b.id, prop),
                 {"op": "compare", "args": [1, 2], "names": [a.name, b.name], "pick": pick}])
    for k in pools:
        pools[k] = _dedupe(pools[k])
    chosen = _take_balanced(pools, n, rng)
    for i, q in enumerate(chosen):
        q.id = f"mmqa-{i:05d}"
        q.split = _split(rng, dev, test)
    return chosen


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


# --------------------------------------------------------------------------- InfoSeek
INFOSEEK_RELATIONS: dict[str, tuple[str, ...]] = {
    "product": ("designed_by", "developed_by", "manufactured_in", "release_year", "successor_of"),
    "person": ("works_for", "based_in", "role", "joined_year"),
    "place": ("owned_by", "city", "opened_year"),
}


def infoseek(world: World, n: int, rng: random.Random, unseen_entity_share: float = 0.2,
             dev: float = 0.1, passages_of: Callable[[str], dict[str, str]] | None = None
             ) -> tuple[list[Question], dict[str, Any]]:
    """(image, question) pairs answered by the pictured entity's page; InfoSeek's four splits.

    ``passages_of(doc_id)`` maps passage id -> text (default: the MM-R2 chunking); a question
    whose answer sentence falls in no passage (truncated away) is counted and skipped.
    """
    from mmrag.corpora.passages import to_passages

    if passages_of is None:
        by_doc: dict[str, dict[str, str]] = {}
        for p in to_passages(world.documents):
            by_doc.setdefault(p.doc_id, {})[p.id] = p.text
        passages_of = lambda d: by_doc.get(d, {})  # noqa: E731
    G = Gold(world)
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
            pas = [pid for pid, txt in sorted(passages_of(f.doc_id).items()) if f.sentence in txt]
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


# --------------------------------------------------------------------------- BRIT
Similarity = Callable[[list[str], list[str]], list[float]]  # pairwise cosine (q_i, source_i)

REVERSE: dict[str, str] = {  # a question from the object's side (answer: the subject)
    "designed_by": "Which product did {x} design?", "held_in": "Which event took place at {x}?",
    "headquartered_in": "Which organisation has its head office at {x}?",
    "manufactured_in": "Which product is made at {x}?", "successor_of": "Which product replaced {x}?",
}


def _choices(answer: str, pool: Sequence[str], rng: random.Random, k: int = 4) -> list[str]:
    others = sorted(set(pool) - {answer})
    opts = rng.sample(others, min(k - 1, len(others))) + [answer]
    rng.shuffle(opts)
    return opts


def _shift(path: list[Hop], by: int) -> list[Hop]:
    """Renumber ``$k`` references after prepending ``by`` hops."""
    out = []
    for hop in path:
        h = dict(hop)
        for key in ("subject",):
            if isinstance(h.get(key), str) and h[key].startswith("$"):
                h[key] = f"${int(h[key][1:]) + by}"
        if "args" in h:
            h["args"] = [a + by for a in h["args"]]
        out.append(h)
    return out


def _descriptions(world: World, x: Entity) -> list[tuple[str, tuple[str, str, str], str]]:
    """Phrases that pick visual entity x through one relation: (phrase, fact, named entity id)."""
    E, out = world.entities, []
    if x.type == "product":
        p = x.one("designed_by")
        if p and len(world.subjects("designed_by", p)) == 1:
            out.append((f"the product designed by {E[p].name}", (x.id, "designed_by", p), p))
        z = x.one("successor_of")
        if z and len(world.subjects("successor_of", z)) == 1:
            out.append((f"the product that replaced {E[z].ref()}", (x.id, "successor_of", z), z))
    elif x.type == "person":
        for y in world.subjects("designed_by", x.id):
            out.append((f"the designer of {E[y].ref()}", (y, "designed_by", x.id), y))
    elif x.type == "place":
        for o in world.subjects("headquartered_in", x.id):
            out.append((f"the head office of {E[o].name}", (o, "headquartered_in", x.id), o))
        for ev in world.subjects("held_in", x.id):
            out.append((f"the venue of {E[ev].name}", (ev, "held_in", x.id), ev))
    return out


def _rich_attrs(renderer_attrs: dict[str, dict[str, tuple[str, ...]]], kind: str) -> list[str]:
    """Attributes with at least four values: the ones a 4-option question can ask about."""
    return sorted(a for a, v in renderer_attrs[kind].items() if len(v) >= 4)


def brit_candidates(world: World, rng: random.Random,
                    attributes: dict[str, dict[str, tuple[str, ...]]]) -> dict[str, list[Question]]:
    """Every BRIT question the world supports, pooled by kind/source, before validation."""
    G, E = Gold(world), world.entities
    pools: dict[str, list[Question]] = {}
    visual = [e for e in E.values() if e.type in VISUAL]
    by_type = {t: [e.name for e in E.values() if e.type == t] for t in
               ("product", "person", "place", "organisation", "event")}
    cities = [e.properties["city"] for e in world.by_type("place")]

    def add(kind: str, source: str, q: Question, source_text: str, named: str | None) -> None:
        q.kind = kind
        q.meta.update({"source": source, "source_text": source_text, "named": named})
        pools.setdefault(f"{kind}/{source}", []).append(q)

    def pool_for(answer_id_or_value: str, rel: str) -> list[str]:
        if answer_id_or_value in E:
            return by_type[E[answer_id_or_value].type]
        return cities

    for x in visual:
        x_imgs = G.all_images(x.id)
        attrs = _rich_attrs(attributes, x.type)
        # Text-Image / section: a sentence identifies x, its picture answers
        for phrase, (s, rel, o), named in _descriptions(world, x):
            page = rng.choice([s, o])
            sid = G.fact_section(s, rel, o, page_of=page)
            sent = world.facts_about(s, rel, o, f"doc-{page}")[0].sentence
            for attr in attrs:
                val = x.attributes[attr]
                img = rng.choice(x_imgs)
                text = _cap(rng.choice(PH.ASK[(x.type, attr)]).format(x=phrase))
                add("Text-Image", "section", Question(
                    id="", text=text, answer=val, dataset="brit",
                    choices=_choices(val, attributes[x.type][attr], rng),
                    gold_evidence=[sid] + x_imgs, gold_entity=x.id, gold_domain=x.domain,
                    decomposition=[_sub(f"Which {x.type} is {phrase}?", "TextQA", x.name, [sid]),
                                   _sub(_cap(PH.ASK[(x.type, attr)][0].format(x=x.ref())),
                                        "ImageQA", val, [img])],
                    meta={"path": [{"op": "text", "evidence": [sid], "subject": E[named].name,
                                    "answer": x.name},
                                   {"op": "image_attr", "evidence": [img], "subject": "$1",
                                    "attribute": attr}]}), sent, named)
        # Image-Text / section and Image-Image: the query picture identifies x
        query_imgs = [r["id"] for r in world.images_of(x.id, "heldout")]
        for r in x.relations:
            rel, o = r["relation"], r["object_id"]
            if rel not in PH.FORWARD or len(x.objects(rel)) != 1:
                continue
            qimg = rng.choice(query_imgs)
            sid = G.fact_section(x.id, rel, o)
            sent = world.facts_about(x.id, rel, o, f"doc-{x.id}")[0].sentence
            who = rng.choice(PH.IN_IMAGE[x.type])
            text = _cap(rng.choice(PH.FORWARD[rel]).format(x=who))
            add("Image-Text", "section", Question(
                id="", text=text, answer=E[o].name, dataset="brit", image_id=qimg,
                image_path=world.image_rows[qimg]["path"],
                choices=_choices(E[o].name, pool_for(o, rel), rng),
                gold_evidence=[sid] + x_imgs, gold_entity=x.id, gold_domain=x.domain,
                decomposition=[_sub(f"Which {x.type} is shown in the image?", "ImageQA", x.name,
                                    [qimg]),
                               _sub(_cap(PH.FORWARD[rel][0].format(x=x.ref())), "TextQA",
                                    E[o].name, [sid])],
                meta={"path": [{"op": "image_entity", "evidence": [qimg]},
                               {"op": "text", "evidence": [sid], "subject": "$1",
                                "answer": E[o].name}]}), sent, None)
            y = E[o]
            if y.type in VISUAL and rel in PH.OBJECT_OF:
                y_imgs = G.all_images(y.id)
                phrase = PH.OBJECT_OF[rel].format(s=who)
                for attr in _rich_attrs(attributes, y.type):
                    yimg = rng.choice(y_imgs)
                    val = y.attributes[attr]
                    text = _cap(rng.choice(PH.ASK[(y.type, attr)]).format(x=phrase))
                    add("Image-Image", "section", Question(
                        id="", text=text, answer=val, dataset="brit", image_id=qimg,
                        image_path=world.image_rows[qimg]["path"],
                        choices=_choices(val, attributes[y.type][attr], rng),
                        gold_evidence=_uniq(x_imgs + [sid] + y_imgs), gold_entity=y.id,
                        gold_domain=y.domain,
                        decomposition=[
                            _sub(f"Which {x.type} is shown in the image?", "ImageQA", x.name, [qimg]),
                            _sub(_cap(PH.FORWARD[rel][0].format(x=x.ref())), "TextQA", y.name, [sid]),
                            _sub(_cap(PH.ASK[(y.type, attr)][0].format(x=y.ref())), "ImageQA",
                                 val, [yimg])],
                        meta={"path": [{"op": "image_entity", "evidence": [qimg]},
                                       {"op": "text", "evidence": [sid], "subject": "$1",
                                        "answer": y.name},
                                       {"op": "image_attr", "evidence": [yimg], "subject": "$2",
                                        "attribute": attr}]}), sent, None)
    # captions: Text-Image (the caption names x) and Image-Text (the caption states a fact)
    for row in world.images:
        if row["split"] != "train" or row["caption_kind"] != "naming":
            continue
        x = E[row["entity_id"]]
        caption = row["caption"]
        if x.name in caption:
            for attr in _rich_attrs(attributes, x.type):
                val = x.attributes[attr]
                text = _cap(rng.choice(PH.ASK[(x.type, attr)]).format(x=x.ref()))
                add("Text-Image", "caption", Question(
                    id="", text=text, answer=val, dataset="brit",
                    choices=_choices(val, attributes[x.type][attr], rng),
                    gold_evidence=[row["id"]], gold_entity=x.id, gold_domain=x.domain,
                    decomposition=[_sub(_cap(PH.ASK[(x.type, attr)][0].format(x=x.ref())),
                                        "ImageQA", val, [row["id"]])],
                    meta={"path": [{"op": "caption", "evidence": [row["id"]], "subject": x.name,
                                    "answer": x.name},
                                   {"op": "image_attr", "evidence": [row["id"]], "subject": x.name,
                                    "attribute": attr}]}), caption, x.id)
        fact = row["caption_fact"]
        if not fact:
            continue
        s, rel, o = fact["subject"], fact["relation"], fact["object"]
        query_imgs = [r["id"] for r in world.images_of(x.id, "heldout")]
        who = rng.choice(PH.IN_IMAGE[x.type])
        if x.id == s and rel in PH.FORWARD and len(x.objects(rel)) == 1:
            text, ans = _cap(rng.choice(PH.FORWARD[rel]).format(x=who)), o
        elif x.id == o and rel in REVERSE and len(world.subjects(rel, o)) == 1:
            text, ans = _cap(REVERSE[rel].format(x=who)), s
        else:
            continue
        qimg = rng.choice(query_imgs)
        add("Image-Text", "caption", Question(
            id="", text=text, answer=E[ans].name, dataset="brit", image_id=qimg,
            image_path=world.image_rows[qimg]["path"],
            choices=_choices(E[ans].name, by_type[E[ans].type], rng),
            gold_evidence=[row["id"]], gold_entity=x.id, gold_domain=x.domain,
            decomposition=[_sub(f"Which {x.type} is shown in the image?", "ImageQA", x.name, [qimg]),
                           _sub(f"What does the caption of the picture of {x.name} say?",
                                "ImageQA", E[ans].name, [row["id"]])],
            meta={"path": [{"op": "image_entity", "evidence": [qimg]},
                           {"op": "caption", "evidence": [row["id"]], "subject": "$1",
                            "answer": E[ans].name}]}), caption, None)
    for k in pools:
        pools[k] = _dedupe(pools[k])
    return pools


def validate(pools: dict[str, list[Question]], similarity: Similarity,
             threshold: float) -> tuple[dict[str, list[Question]], dict[str, dict[str, float]]]:
    """BRIT's check: drop a question whose similarity to its source text exceeds the threshold."""
    kept, report = {}, {}
    for key, qs in pools.items():
        sims = similarity([q.text for q in qs], [q.meta["source_text"] for q in qs]) if qs else []
        ok = []
        for q, s in zip(qs, sims):
            q.meta["source_similarity"] = round(float(s), 4)
            if s <= threshold:
                ok.append(q)
        kept[key] = ok
        report[key] = {"candidates": len(qs), "rejected": len(qs) - len(ok),
                       "rejection_rate": round((len(qs) - len(ok)) / len(qs), 4) if qs else 0.0}
    return kept, report


NEA_BRIDGES = ("{alias} is the internal codename for {name}.",
               "Inside the company, {name} is referred to as {alias}.",
               "Internal documents call {name} by the name {alias}.")


def brit(world: World, n: int, nea_pairs: int, rng: random.Random, similarity: Similarity,
         threshold: float, attributes: dict[str, dict[str, tuple[str, ...]]], aliases: Callable[[], str]
         ) -> tuple[list[Question], list[Question], list[Any], dict[str, Any]]:
    """(brit questions, NEA pair rows, NEA corpus documents, validation report)."""
    import copy

    pools = brit_candidates(world, rng, attributes)
    kept, report = validate(pools, similarity, threshold)
    chosen = _take_balanced(kept, n, rng)
    chosen.sort(key=lambda q: (q.kind, q.meta["source"], q.text, q.image_id or ""))
    for i, q in enumerate(chosen):
        q.id = f"brit-{i:05d}"
    # Named Entity Anonymization
    E = world.entities
    nea_docs = copy.deepcopy(world.documents)
    secs = {s.id: s for d in nea_docs for s in d.sections}
    eligible = [q for q in chosen if q.kind == "Text-Image" and q.meta.get("named")
                and E[q.meta["named"]].name in q.text]
    rng.shuffle(eligible)
    rows: list[Question] = []
    for k, q in enumerate(sorted(eligible[:nea_pairs], key=lambda q: q.id)):
        named = E[q.meta["named"]]
        alias = aliases()
        bridge = rng.choice(NEA_BRIDGES).format(alias=alias, name=named.name)
        sid = f"doc-{named.id}-s00"
        secs[sid].text = f"{secs[sid].text} {bridge}"
        orig = copy.deepcopy(q)
        orig.id = f"nea-{k:04d}-orig"
        orig.meta.update({"pair_id": k, "nea": False, "pair_of": q.id})
        anon = copy.deepcopy(q)
        anon.id = f"nea-{k:04d}-anon"
        anon.text = q.text.replace(named.name, alias)
        anon.gold_evidence = _uniq([sid] + q.gold_evidence)
        path = _shift([dict(h) for h in q.meta["path"]], 1)
        for h in path:
            if h.get("subject") == named.name:
                h["subject"] = "$1"
        anon.meta.update({"pair_id": k, "nea": True, "pair_of": q.id, "alias": alias,
                          "original_name": named.name, "bridge_sentence": bridge,
                          "bridge_section_id": sid,
                          "path": [{"op": "text", "evidence": [sid], "subject": alias,
                                    "answer": named.name}] + path})
        anon.decomposition = [_sub(f"Which entity is called {alias}?", "TextQA", named.name,
                                   [sid])] + anon.decomposition
        rows += [orig, anon]
    return chosen, rows, nea_docs, report


# --------------------------------------------------------------------------- MMCoQA
def _turn_pool(world: World, x: Entity, rng: random.Random) -> list[dict[str, Any]]:
    """Single-hop turns about x: (question with a pronoun, self-contained rewrite, gold)."""
    G, E = Gold(world), world.entities
    it = {"product": ("it", "its"), "person": ("they", "their"), "place": ("it", "its")}[x.type]
    pool: list[dict[str, Any]] = []

    def text_turn(short: str, rel: str) -> None:
        obj = x.one(rel) if rel not in x.properties else str(x.properties[rel])
        if obj is None or (rel not in x.properties and len(x.objects(rel)) != 1):
            return
        hop, sid = G.text_hop(x.id, rel, obj)
        ans = E[obj].name if obj in E else obj
        pool.append({"short": short, "rewrite": _cap(PH.FORWARD[rel][0].format(x=x.ref())),
                     "answer": ans, "kind": "TextQ", "tool": "TextQA", "evidence": [sid],
                     "path": [hop]})

    def table_turn(short: str, prop: str) -> None:
        ans = str(x.properties[prop])
        pool.append({"short": short, "rewrite": _cap(PH.TABLE_ASK[prop][0].format(x=x.ref())),
                     "answer": ans, "kind": "TableQ", "tool": "TableQA",
                     "evidence": [G.table_id(x.id)], "path": [G.table_hop(x.id, prop)]})

    def image_turn(short: str, attr: str) -> None:
        img = G.image_of(x.id, rng)
        pool.append({"short": short, "rewrite": _cap(PH.ASK[(x.type, attr)][0].format(x=x.ref())),
                     "answer": x.attributes[attr], "kind": "ImageQ", "tool": "ImageQA",
                     "evidence": [img], "path": [{"op": "image_attr", "evidence": [img],
                                                  "subject": x.name, "attribute": attr}]})

    p, pp = it
    if x.type == "product":
        text_turn(f"Who designed {p}?", "designed_by")
        text_turn(f"Which company makes {p}?", "developed_by")
        text_turn(f"Where is {p} made?", "manufactured_in")
        text_turn(f"When was {p} released?", "release_year")
        table_turn(f"How much does {p} cost in dollars?", "price_usd")
        table_turn(f"How heavy is {p} in grams?", "weight_g")
        image_turn(f"What colour is {pp} body?", "colour")
        image_turn(f"What shape does {p} have?", "shape")
        image_turn(f"And the colour of {pp} logo?", "logo_colour")
    elif x.type == "person":
        text_turn(f"What is {pp} role?", "role")
        text_turn(f"Who do {p} work for?", "works_for")
        text_turn(f"Where are {p} based?", "based_in")
        table_turn(f"When did {p} join?", "joined_year")
        image_turn(f"What colour is {pp} hair?", "hair_colour")
        image_turn(f"What colour do {p} wear?", "clothing_colour")
    else:
        text_turn(f"Which city is {p} in?", "city")
        text_turn(f"Who owns {p}?", "owned_by")
        text_turn(f"When did {p} open?", "opened_year")
        table_turn(f"How large is {pp} floor area in square metres?", "floor_area_m2")
        image_turn(f"What colour is {pp} roof?", "roof_colour")
        image_turn(f"What kind of building is {p}?", "building")
    return pool


def mmcoqa(world: World, conversations: int, rng: random.Random, dev: float = 0.1,
           test: float = 0.2) -> list[Question]:
    """Conversations of 3-6 turns about one entity; later turns use pronouns, gold per turn."""
    topics = sorted((e for e in world.entities.values() if e.type in VISUAL), key=lambda e: e.id)
    order: list[Entity] = []
    while len(order) < conversations:
        batch = list(topics)
        rng.shuffle(batch)
        order += batch
    out: list[Question] = []
    for c, x in enumerate(order[:conversations]):
        pool = _turn_pool(world, x, rng)
        rng.shuffle(pool)
        turns = pool[: rng.randint(3, min(6, len(pool)))]
        split = _split(rng, dev, test)
        history: list[Any] = []
        from mmrag.schema import Turn

        for t, spec in enumerate(turns, 1):
            text = spec["rewrite"] if t == 1 else spec["short"]
            out.append(Question(
                id=f"mmcoqa-{c:04d}-t{t}", text=text, answer=spec["answer"], dataset="mmcoqa",
                kind=spec["kind"], split=split, gold_evidence=list(spec["evidence"]),
                gold_entity=x.id, gold_domain=x.domain, history=list(history),
                decomposition=[_sub(spec["rewrite"], spec["tool"], spec["answer"], spec["evidence"])],
                meta={"conversation_id": f"mmcoqa-{c:04d}", "turn": t, "rewrite": spec["rewrite"],
                      "path": spec["path"]}))
            history.append(Turn(question=text, answer=spec["answer"]))
    return out
