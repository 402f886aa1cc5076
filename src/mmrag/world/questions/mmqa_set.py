"""MultiModalQA-style multi-hop questions in 14 kinds, each with a gold decomposition and path.

One builder per kind. The compositional kinds share a walk that picks the first hop (an image
selection, a table selection, or a text bridge); :func:`mmqa` runs the builders in a fixed
order on one ``rng``, so the draws, and therefore the question set, depend only on the seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mmrag.schema import Question, SubQuestion
from mmrag.world import phrasing as PH
from mmrag.world.generator import VISUAL, Entity, World
from mmrag.world.questions.common import Gold, Hop, _cap, _dedupe, _split, _sub, _take_balanced, _uniq

_NOUN = {"product": "product", "person": "employee"}


class Pools(dict[str, list[Question]]):
    """Candidate questions per kind, in the order the builders found them."""

    def add(self, kind: str, text: str, answer: str, subs: list[SubQuestion], path: list[Hop],
            **meta: Any) -> None:
        """Append one question; its gold evidence is every sub-question's, in order."""
        ev = _uniq([i for s in subs for i in s.evidence_ids])
        self.setdefault(kind, []).append(Question(
            id="", text=text, answer=answer, dataset="mmqa", kind=kind, gold_evidence=ev,
            decomposition=subs, meta={"path": path, **meta}))


@dataclass
class Selection:
    """A first hop that picks one entity (by its picture or a table cell): the Compose bridge."""

    kind: str          # "product" or "person": what the selection picks
    target: Entity     # the picked entity
    phrase: str        # how the question names it ("the Acme product released in 2031")
    sub: SubQuestion   # the selection as a sub-question
    hop: Hop           # the selection as an oracle hop


@dataclass
class Bridge:
    """A first hop that reaches one entity through a sentence about another."""

    source: Entity     # the entity the sentence is about
    entity: Entity     # the bridge entity the sentence names
    phrase: str        # how the question names it ("the designer of the Acme X")
    sub: SubQuestion
    hop: Hop


def _sorted_entities(world: World) -> list[Entity]:
    return sorted(world.entities.values(), key=lambda x: x.id)


def _products_of(world: World, org: Entity) -> list[Entity]:
    """An organisation's product line-up, in world order."""
    return [p for p in world.by_type("product") if org.id in p.objects("developed_by")]


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


# --------------------------------------------------------------------------- single hop
def text_q(world: World, gold: Gold, rng: random.Random, pools: Pools) -> None:
    """TextQ: a relation or property stated in a sentence of the subject's page."""
    E = world.entities
    for e in _sorted_entities(world):
        for r in e.relations:
            rel, o = r["relation"], r["object_id"]
            if rel not in PH.FORWARD or len(e.objects(rel)) != 1:
                continue
            text = rng.choice(PH.FORWARD[rel]).format(x=e.ref())
            hop, sid = gold.text_hop(e.id, rel, o)
            pools.add("TextQ", _cap(text), E[o].name, [_sub(_cap(text), "TextQA", E[o].name, [sid])],
                      [hop])
        for prop in ("release_year", "role", "city", "opened_year", "founded_year", "attendees"):
            if prop in e.properties:
                text = _cap(rng.choice(PH.FORWARD[prop]).format(x=e.ref()))
                hop, sid = gold.text_hop(e.id, prop, str(e.properties[prop]))
                pools.add("TextQ", text, str(e.properties[prop]),
                          [_sub(text, "TextQA", str(e.properties[prop]), [sid])], [hop])


def table_q(world: World, gold: Gold, rng: random.Random, pools: Pools) -> None:
    """TableQ: a cell of the entity's own key/value table."""
    for e in _sorted_entities(world):
        for prop, asks in PH.TABLE_ASK.items():
            if prop in e.properties and prop in PH.TABLE_KEY:
                text = _cap(rng.choice(asks).format(x=e.ref()))
                ans = str(e.properties[prop])
                hop = gold.table_hop(e.id, prop)
                pools.add("TableQ", text, ans, [_sub(text, "TableQA", ans, [gold.table_id(e.id)])],
                          [hop])


def image_q(world: World, gold: Gold, rng: random.Random, pools: Pools) -> None:
    """ImageQ: a visual attribute read off one of the entity's pictures."""
    for e in _sorted_entities(world):
        if e.type not in VISUAL:
            continue
        for attr, value in sorted(e.attributes.items()):
            text = _cap(rng.choice(PH.ASK[(e.type, attr)]).format(x=e.ref()))
            img = gold.image_of(e.id, rng)
            pools.add("ImageQ", text, value, [_sub(text, "ImageQA", value, [img])],
                      [{"op": "image_attr", "evidence": [img], "subject": e.name, "attribute": attr}])


# --------------------------------------------------------------------------- image selections
def image_selections(world: World, gold: Gold, rng: random.Random) -> Iterator[Selection]:
    """Each member of an organisation's products (or staff) that one visual value singles out.

    Draws one image per member of a group before yielding the group's selections.
    """
    groups: list[tuple[Entity, str, list[Entity]]] = []
    for org in world.by_type("organisation"):
        groups.append((org, "product", _products_of(world, org)))
        groups.append((org, "person", [p for p in world.by_type("person")
                                       if org.id in p.objects("works_for")]))
    for org, kind, members in groups:
        if len(members) < 2:
            continue
        imgs = [gold.image_of(m.id, rng) for m in members]
        for target, attr, value in _visual_constraints(world, members):
            c = PH.constraint(kind, attr, value)
            sel_hop = {"op": "image_select", "evidence": imgs, "attribute": attr, "value": value}
            sel_text = f"Which {org.name} {_NOUN[kind]} is {c}?" if kind == "person" else \
                f"Which {org.name} product is the one {c}?"
            sel_sub = _sub(sel_text, "ImageQA", target.name, imgs)
            yield Selection(kind, target, f"the {org.name} {_NOUN[kind]} {c}", sel_sub, sel_hop)


def image_list_q(sel: Selection, pools: Pools) -> None:
    """ImageListQ: which member of the group shows the value."""
    pools.add("ImageListQ", sel.sub.text, sel.target.name, [sel.sub], [sel.hop])


def compose_text_image(world: World, gold: Gold, rng: random.Random, pools: Pools,
                       sel: Selection) -> None:
    """Compose(TextQ,ImageQ): the image picks the entity, a sentence answers about it."""
    E, target = world.entities, sel.target
    for rel in (("designed_by", "manufactured_in") if sel.kind == "product" else ("based_in",)):
        o = target.one(rel)
        hop, sid = gold.text_hop(target.id, rel, o)
        hop["subject"] = "$1"
        q2 = _cap(rng.choice(PH.FORWARD[rel]).format(x=target.ref()))
        text = _cap(rng.choice(PH.FORWARD[rel]).format(x=sel.phrase))
        pools.add("Compose(TextQ,ImageQ)", text, E[o].name,
                  [sel.sub, _sub(q2, "TextQA", E[o].name, [sid])], [sel.hop, hop])


def compose_table_image(gold: Gold, rng: random.Random, pools: Pools, sel: Selection) -> None:
    """Compose(TableQ,ImageQ): the image picks the entity, its table answers."""
    target = sel.target
    for prop in (("price_usd", "weight_g") if sel.kind == "product" else ("joined_year",)):
        ans = str(target.properties[prop])
        hop = gold.table_hop(target.id, prop, "$1")
        text = _cap(rng.choice(PH.TABLE_ASK[prop]).format(x=sel.phrase))
        q2 = _cap(rng.choice(PH.TABLE_ASK[prop]).format(x=target.ref()))
        pools.add("Compose(TableQ,ImageQ)", text, ans,
                  [sel.sub, _sub(q2, "TableQA", ans, [gold.table_id(target.id)])], [sel.hop, hop])


# --------------------------------------------------------------------------- table selections
def table_selections(world: World, gold: Gold) -> Iterator[Selection]:
    """Each product that its organisation's line-up table singles out by release year or price."""
    for org in world.by_type("organisation"):
        members = _products_of(world, org)
        tid = gold.table_id(org.id)
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
                yield Selection("product", p, f"the {org.name} product {phrase.format(v=v)}",
                                sel_sub, sel_hop)


def compose_text_table(world: World, gold: Gold, rng: random.Random, pools: Pools,
                       sel: Selection) -> None:
    """Compose(TextQ,TableQ): the table picks the product, a sentence answers about it."""
    E, p = world.entities, sel.target
    for rel in ("designed_by", "manufactured_in"):
        o = p.one(rel)
        hop, sid = gold.text_hop(p.id, rel, o)
        hop["subject"] = "$1"
        text = _cap(rng.choice(PH.FORWARD[rel]).format(x=sel.phrase))
        q2 = _cap(rng.choice(PH.FORWARD[rel]).format(x=p.ref()))
        pools.add("Compose(TextQ,TableQ)", text, E[o].name,
                  [sel.sub, _sub(q2, "TextQA", E[o].name, [sid])], [sel.hop, hop])


def compose_image_table(gold: Gold, rng: random.Random, pools: Pools, sel: Selection) -> None:
    """Compose(ImageQ,TableQ): the table picks the product, its picture answers."""
    p = sel.target
    for attr in ("colour", "shape", "pattern", "logo_colour"):
        img = gold.image_of(p.id, rng)
        value = p.attributes[attr]
        text = _cap(rng.choice(PH.ASK[("product", attr)]).format(x=sel.phrase))
        q2 = _cap(rng.choice(PH.ASK[("product", attr)]).format(x=p.ref()))
        pools.add("Compose(ImageQ,TableQ)", text, value,
                  [sel.sub, _sub(q2, "ImageQA", value, [img])],
                  [sel.hop, {"op": "image_attr", "evidence": [img], "subject": "$1",
                             "attribute": attr}])


# --------------------------------------------------------------------------- text bridges
def text_bridges(world: World, gold: Gold, rng: random.Random) -> Iterator[Bridge]:
    """Each sentence that names a single bridge entity (draws the first hop's wording)."""
    E = world.entities
    for e in _sorted_entities(world):
        for r in e.relations:
            rel, o = r["relation"], r["object_id"]
            if rel not in PH.OBJECT_OF or len(e.objects(rel)) != 1:
                continue
            bridge = E[o]
            hop1, sid1 = gold.text_hop(e.id, rel, o)
            q1 = _cap(rng.choice(PH.FORWARD[rel]).format(x=e.ref()))
            sub1 = _sub(q1, "TextQA", bridge.name, [sid1])
            yield Bridge(e, bridge, PH.OBJECT_OF[rel].format(s=e.ref()), sub1, hop1)


def compose_image_text(gold: Gold, rng: random.Random, pools: Pools, br: Bridge) -> None:
    """Compose(ImageQ,TextQ): a sentence names the bridge, the bridge's picture answers."""
    bridge = br.entity
    if bridge.type not in VISUAL:
        return
    for attr in sorted(bridge.attributes):
        if attr == "count":
            continue
        img = gold.image_of(bridge.id, rng)
        value = bridge.attributes[attr]
        text = _cap(rng.choice(PH.ASK[(bridge.type, attr)]).format(x=br.phrase))
        q2 = _cap(rng.choice(PH.ASK[(bridge.type, attr)]).format(x=bridge.ref()))
        pools.add("Compose(ImageQ,TextQ)", text, value,
                  [br.sub, _sub(q2, "ImageQA", value, [img])],
                  [{**br.hop, "answer": bridge.name},
                   {"op": "image_attr", "evidence": [img], "subject": "$1", "attribute": attr}])


def compose_table_text(gold: Gold, rng: random.Random, pools: Pools, br: Bridge) -> None:
    """Compose(TableQ,TextQ): a sentence names the bridge, the bridge's table answers."""
    bridge = br.entity
    for prop, asks in PH.TABLE_ASK.items():
        if prop in bridge.properties and prop != "release_year":
            ans = str(bridge.properties[prop])
            text = _cap(rng.choice(asks).format(x=br.phrase))
            q2 = _cap(rng.choice(asks).format(x=bridge.ref()))
            pools.add("Compose(TableQ,TextQ)", text, ans,
                      [br.sub, _sub(q2, "TableQA", ans, [gold.table_id(bridge.id)])],
                      [br.hop, gold.table_hop(bridge.id, prop, "$1")])


def compose_text_text(world: World, gold: Gold, rng: random.Random, pools: Pools,
                      br: Bridge) -> None:
    """Compose(TextQ,TextQ): a sentence names the bridge, a second one on its page answers."""
    E, bridge = world.entities, br.entity
    for r2 in bridge.relations:
        rel2, o2 = r2["relation"], r2["object_id"]
        if rel2 not in PH.FORWARD or len(bridge.objects(rel2)) != 1 or o2 == br.source.id:
            continue
        hop2, sid2 = gold.text_hop(bridge.id, rel2, o2)
        hop2["subject"] = "$1"
        text = _cap(rng.choice(PH.FORWARD[rel2]).format(x=br.phrase))
        q2 = _cap(rng.choice(PH.FORWARD[rel2]).format(x=bridge.ref()))
        pools.add("Compose(TextQ,TextQ)", text, E[o2].name,
                  [br.sub, _sub(q2, "TextQA", E[o2].name, [sid2])], [br.hop, hop2])


# --------------------------------------------------------------------------- intersect, compare
def intersect_text_image(world: World, gold: Gold, rng: random.Random, pools: Pools) -> None:
    """Intersect(TextQ,ImageQ): products designed by P ∩ products of the org with a value."""
    E, products = world.entities, world.by_type("product")
    for person in world.by_type("person"):
        designed = [p for p in products if person.id in p.objects("designed_by")]
        org = E[person.one("works_for")]
        members = _products_of(world, org)
        if not designed:
            continue
        imgs = [gold.image_of(m.id, rng) for m in members]
        for attr in ("colour", "shape", "pattern", "logo_colour", "logo_position"):
            for value in sorted({m.attributes[attr] for m in designed}):
                a_set = [p for p in designed]
                b_set = [m for m in members if m.attributes[attr] == value]
                inter = [p for p in a_set if p in b_set]
                if len(inter) != 1 or (len(a_set) < 2 and len(b_set) < 2):
                    continue
                t = inter[0]
                c = PH.constraint("product", attr, value)
                sids = [gold.fact_section(p.id, "designed_by", person.id, page_of=person.id)
                        for p in a_set]
                sids = _uniq(sids)
                q1 = f"Which products did {person.name} design?"
                q2 = f"Which {org.name} products are the ones {c}?"
                text = f"Which product designed by {person.name} is the one {c}?"
                pools.add("Intersect(TextQ,ImageQ)", text, t.name,
                          [_sub(q1, "TextQA", ", ".join(p.name for p in a_set), sids),
                           _sub(q2, "ImageQA", ", ".join(m.name for m in b_set), imgs)],
                          [{"op": "text_list", "evidence": sids, "subject": person.name,
                            "answers": [p.name for p in a_set]},
                           {"op": "image_select", "evidence": imgs, "attribute": attr,
                            "value": value, "many": True},
                           {"op": "intersect", "args": [1, 2]}])


def intersect_table_text(world: World, gold: Gold, pools: Pools) -> None:
    """Intersect(TableQ,TextQ): the line-up released in a year ∩ the exhibits of an event."""
    products = world.by_type("product")
    for org in world.by_type("organisation"):
        members = _products_of(world, org)
        tid = gold.table_id(org.id)
        for ev in [x for x in world.by_type("event") if x.one("organised_by") == org.id]:
            shown = [p for p in products if ev.id in p.objects("shown_at")]
            sids = _uniq([gold.fact_section(p.id, "shown_at", ev.id, page_of=ev.id) for p in shown])
            for year in sorted({str(m.properties["release_year"]) for m in members}):
                a_set = [m for m in members if str(m.properties["release_year"]) == year]
                inter = [p for p in a_set if p in shown]
                if len(inter) != 1 or (len(a_set) < 2 and len(shown) < 2):
                    continue
                t = inter[0]
                text = f"Which {org.name} product released in {year} was shown at {ev.name}?"
                pools.add("Intersect(TableQ,TextQ)", text, t.name,
                          [_sub(f"Which {org.name} products were released in {year}?", "TableQA",
                                ", ".join(m.name for m in a_set), [tid]),
                           _sub(f"Which products were shown at {ev.name}?", "TextQA",
                                ", ".join(p.name for p in shown), sids)],
                          [{"op": "table_select", "evidence": [tid], "column": "Release year",
                            "value": year, "return": "Product", "many": True},
                           {"op": "text_list", "evidence": sids, "subject": ev.name,
                            "answers": [p.name for p in shown]},
                           {"op": "intersect", "args": [1, 2]}])


def compare_table_table(world: World, gold: Gold, rng: random.Random, pools: Pools,
                        n: int) -> None:
    """Compare(TableQ,TableQ): which of two products has more (or less) of a table value."""
    products = world.by_type("product")
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
            pools.add("Compare(TableQ,TableQ)", text, ans,
                      [_sub(_cap(asks[0].format(x=a.ref())), "TableQA", str(va), [gold.table_id(a.id)]),
                       _sub(_cap(asks[0].format(x=b.ref())), "TableQA", str(vb), [gold.table_id(b.id)])],
                      [gold.table_hop(a.id, prop), gold.table_hop(b.id, prop),
                       {"op": "compare", "args": [1, 2], "names": [a.name, b.name], "pick": pick}])


# --------------------------------------------------------------------------- the set
def candidates(world: World, rng: random.Random, n: int) -> Pools:
    """Every candidate question per kind (the builders in their fixed order, on one rng)."""
    gold, pools = Gold(world), Pools()
    text_q(world, gold, rng, pools)
    table_q(world, gold, rng, pools)
    image_q(world, gold, rng, pools)
    for sel in image_selections(world, gold, rng):
        image_list_q(sel, pools)
        compose_text_image(world, gold, rng, pools, sel)
        compose_table_image(gold, rng, pools, sel)
    for sel in table_selections(world, gold):
        compose_text_table(world, gold, rng, pools, sel)
        compose_image_table(gold, rng, pools, sel)
    for br in text_bridges(world, gold, rng):
        compose_image_text(gold, rng, pools, br)
        compose_table_text(gold, rng, pools, br)
        compose_text_text(world, gold, rng, pools, br)
    intersect_text_image(world, gold, rng, pools)
    intersect_table_text(world, gold, pools)
    compare_table_table(world, gold, rng, pools, n)
    return pools


def mmqa(world: World, n: int, rng: random.Random, dev: float,
         test: float) -> list[Question]:
    """MultiModalQA-style questions in 14 kinds, balanced, with gold decomposition and path."""
    pools = candidates(world, rng, n)
    for k in pools:
        pools[k] = _dedupe(pools[k])
    chosen = _take_balanced(pools, n, rng)
    for i, q in enumerate(chosen):
        q.id = f"mmqa-{i:05d}"
        q.split = _split(rng, dev, test)
    return chosen
