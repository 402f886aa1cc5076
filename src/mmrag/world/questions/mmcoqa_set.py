"""MMCoQA-style conversations: later turns refer back with pronouns, gold per turn."""

from __future__ import annotations

import random
from typing import Any

from mmrag.schema import Question, Turn
from mmrag.world import phrasing as PH
from mmrag.world.generator import VISUAL, Entity, World
from mmrag.world.questions.common import Gold, _cap, _split, _sub


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


def mmcoqa(world: World, conversations: int, rng: random.Random, dev: float,
           test: float) -> list[Question]:
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
