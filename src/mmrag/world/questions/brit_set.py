"""BRIT's multiple-choice Text-Image, Image-Text and Image-Image questions and NEA pairs.

The three kinds as the MM-RAG test set defines them:

- **Text-Image**: the answer is in a picture that the question cannot identify directly: a
  sentence (source ``section``) or a caption's fact (source ``caption``) says which entity the
  question's description picks, and one of its pictures shows the asked attribute;
- **Image-Text**: a query picture identifies the entity, and a sentence (``section``) or a
  caption (``caption``) of the corpus states the asked fact;
- **Image-Image**: the simple single-image baseline questions: the question names the entity
  (as its picture's caption does) and asks what any of its pictures shows. Flat CLIP top-k does
  best on these; Named Entity Anonymization is applied to them, as in the paper.

A three-hop chain (query picture -> sentence -> the related entity's picture) is also generated, as
:data:`CHAIN`, into the candidate pools and the validation report, but is not part of the ``brit``
set (its kinds are :data:`PAPER_KINDS`).

Candidates come from sentences and captions that identify an entity; BRIT's validation drops a
question too similar to its source text; Named Entity Anonymization pairs replace the named
entity by an alias that only a bridging sentence added to the corpus resolves.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from typing import Any

from mmrag.schema import Question
from mmrag.world import phrasing as PH
from mmrag.world.generator import VISUAL, Entity, World
from mmrag.world.questions.common import Gold, Hop, _cap, _dedupe, _sub, _take_balanced, _uniq

Similarity = Callable[[list[str], list[str]], list[float]]  # pairwise cosine (q_i, source_i)

PAPER_KINDS = ("Text-Image", "Image-Text", "Image-Image")  # the kinds of the ``brit`` set
CHAIN = "Image-Text-Image"  # the 3-hop chain (query picture -> sentence -> another picture)
NEA_KIND = "Image-Image"  # the kind whose named entity NEA anonymises (paper Table 3)

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
                    add(CHAIN, "section", Question(
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
    # captions: Image-Image (the caption names x, the question too), Text-Image (the caption's
    # fact is the only description of x the question gives) and Image-Text (the caption states a fact)
    for row in world.images:
        if row["split"] != "train" or row["caption_kind"] != "naming":
            continue
        x = E[row["entity_id"]]
        caption = row["caption"]
        x_imgs = _uniq([row["id"]] + G.all_images(x.id))
        if x.name in caption:
            for attr in _rich_attrs(attributes, x.type):
                val = x.attributes[attr]
                text = _cap(rng.choice(PH.ASK[(x.type, attr)]).format(x=x.ref()))
                add("Image-Image", "caption", Question(
                    id="", text=text, answer=val, dataset="brit",
                    choices=_choices(val, attributes[x.type][attr], rng),
                    gold_evidence=x_imgs, gold_entity=x.id, gold_domain=x.domain,
                    decomposition=[_sub(_cap(PH.ASK[(x.type, attr)][0].format(x=x.ref())),
                                        "ImageQA", val, [row["id"]])],
                    meta={"path": [{"op": "caption", "evidence": [row["id"]], "subject": x.name,
                                    "answer": x.name},
                                   {"op": "image_attr", "evidence": [row["id"]], "subject": x.name,
                                    "attribute": attr}]}), caption, x.id)
        fact_row = row["caption_fact"]
        fact = (fact_row["subject"], fact_row["relation"], fact_row["object"]) if fact_row else None
        for phrase, (s, rel, o), named in _descriptions(world, x):
            if (s, rel, o) != fact or E[named].name not in caption:
                continue
            for attr in _rich_attrs(attributes, x.type):
                val = x.attributes[attr]
                text = _cap(rng.choice(PH.ASK[(x.type, attr)]).format(x=phrase))
                add("Text-Image", "caption", Question(
                    id="", text=text, answer=val, dataset="brit",
                    choices=_choices(val, attributes[x.type][attr], rng),
                    gold_evidence=x_imgs, gold_entity=x.id, gold_domain=x.domain,
                    decomposition=[_sub(f"Which {x.type} is {phrase}?", "ImageQA", x.name,
                                        [row["id"]]),
                                   _sub(_cap(PH.ASK[(x.type, attr)][0].format(x=x.ref())),
                                        "ImageQA", val, [row["id"]])],
                    meta={"path": [{"op": "caption", "evidence": [row["id"]],
                                    "subject": E[named].name, "answer": x.name},
                                   {"op": "image_attr", "evidence": [row["id"]], "subject": "$1",
                                    "attribute": attr}]}), caption, named)
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
            # 2 places: the CPU moves MiniLM's 4th digit, which would change data/world's hash per machine
            q.meta["source_similarity"] = round(float(s), 2)
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
    pools = brit_candidates(world, rng, attributes)
    kept, report = validate(pools, similarity, threshold)
    chosen = _take_balanced({k: v for k, v in kept.items() if k.split("/")[0] in PAPER_KINDS}, n, rng)
    chosen.sort(key=lambda q: (q.kind, q.meta["source"], q.text, q.image_id or ""))
    for i, q in enumerate(chosen):
        q.id = f"brit-{i:05d}"
    # Named Entity Anonymization
    E = world.entities
    nea_docs = copy.deepcopy(world.documents)
    secs = {s.id: s for d in nea_docs for s in d.sections}
    eligible = [q for q in chosen if q.kind == NEA_KIND and q.meta.get("named")
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
