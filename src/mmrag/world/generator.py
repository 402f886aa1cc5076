"""The generated enterprise wiki: entities, relations, pages with sections, images and tables.

A controlled benchmark in the spirit of CLEVR. Every fact is generated, so every question
built on it carries complete gold: which sentence states it, which section and layout page
hold the sentence, which image shows which entity with which visual attributes. Everything
is drawn from one ``random.Random(seed)`` in a fixed order, so the same seed gives
byte-identical files.

Layout of ``data/world/`` (see :func:`write_world`):

- ``documents.jsonl`` — one :class:`~mmrag.schema.Document` per entity page;
- ``entities.jsonl`` — ``{id, name, type, domain, attributes, properties, relations}``;
- ``facts.jsonl`` — every stated fact: ``{id, doc_id, section_id, page, subject, relation,
  object, sentence}`` (the gold triplets a graph builder should recover);
- ``images.jsonl`` + ``images/`` — every rendered image with its entity, gold attributes,
  split (``train``: on a page; ``heldout``: on no page, kept for CLIP tests and query images),
  caption and caption kind (``naming`` | ``descriptive``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from mmrag.schema import Document, Image, Section, Table
from mmrag.world import render
from mmrag.world import templates as T
from mmrag.world.domains import DOMAINS, Domain
from mmrag.world.names import NameBook

VISUAL = ("product", "person", "place")


@dataclass
class Entity:
    """One thing the wiki is about; relations point to other entity ids."""

    id: str
    name: str
    type: str  # product | person | organisation | place | event
    domain: str  # domain slug
    attributes: dict[str, str] = field(default_factory=dict)  # gold visual attributes
    properties: dict[str, Any] = field(default_factory=dict)  # literals (years, prices, ...)
    relations: list[dict[str, str]] = field(default_factory=list)  # {relation, object_id}

    def objects(self, relation: str) -> list[str]:
        """Ids this entity points to through ``relation``."""
        return [r["object_id"] for r in self.relations if r["relation"] == relation]

    def one(self, relation: str) -> str | None:
        found = self.objects(relation)
        return found[0] if found else None

    def ref(self) -> str:
        """How running text names it: products take an article ('the Vorkel X2')."""
        return f"the {self.name}" if self.type == "product" else self.name

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "type": self.type, "domain": self.domain,
                "attributes": dict(self.attributes), "properties": dict(self.properties),
                "relations": [dict(r) for r in self.relations]}


@dataclass
class Fact:
    """One sentence of the corpus that states one triplet."""

    id: str
    doc_id: str
    section_id: str
    subject: str  # entity id
    relation: str
    object: str  # entity id or literal value (as text)
    sentence: str
    page: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class World:
    """Everything generated: entities, pages, stated facts, and the image index."""

    entities: dict[str, Entity]
    documents: list[Document]
    facts: list[Fact]
    images: list[dict[str, Any]]  # index rows, pages' images and held-out ones
    domains: list[Domain]

    def by_type(self, kind: str) -> list[Entity]:
        return [e for e in self.entities.values() if e.type == kind]

    def doc_of(self, entity_id: str) -> Document:
        return self._docs[entity_id]

    def subjects(self, relation: str, object_id: str) -> list[str]:
        """Ids of entities with ``relation`` to ``object_id`` (the reverse lookup)."""
        return [e.id for e in self.entities.values() if object_id in e.objects(relation)]

    def facts_about(self, subject: str, relation: str, obj: str | None = None,
                    doc_id: str | None = None) -> list[Fact]:
        return [f for f in self.facts if f.subject == subject and f.relation == relation
                and (obj is None or f.object == obj) and (doc_id is None or f.doc_id == doc_id)]

    def images_of(self, entity_id: str, split: str | None = "train") -> list[dict[str, Any]]:
        return [r for r in self.images if r["entity_id"] == entity_id
                and (split is None or r["split"] == split)]

    def __post_init__(self) -> None:
        self._docs = {d.entity_id: d for d in self.documents}
        self.sections = {s.id: s for d in self.documents for s in d.sections}
        self.tables = {t.id: t for d in self.documents for t in d.tables}
        self.image_rows = {r["id"]: r for r in self.images}


# --------------------------------------------------------------------------- entities
def _unique_attributes(kind: str, renderer: ModuleType, rng: random.Random,
                       taken: set[tuple[tuple[str, str], ...]]) -> dict[str, str]:
    """Visual attributes no other entity of the same kind has (so an image identifies it)."""
    for _ in range(1000):
        attrs = renderer.sample_attributes(kind, rng)
        key = tuple(sorted(attrs.items()))
        if key not in taken:
            taken.add(key)
            return dict(attrs)
    raise RuntimeError(f"render.ATTRIBUTES['{kind}'] has too few combinations for this many "
                       f"entities; lower the per-domain counts in params world")


def make_entities(cfg: Any, rng: random.Random, book: NameBook,
                  renderer: ModuleType) -> tuple[dict[str, Entity], list[Domain]]:
    """Organisations, places, people, events and products per domain, with their relations."""
    if cfg.domains > len(DOMAINS):
        raise ValueError(f"world.domains = {cfg.domains}, but only {len(DOMAINS)} domains are "
                         f"defined in mmrag/world/domains.py")
    domains = list(DOMAINS[: cfg.domains])
    ents: dict[str, Entity] = {}
    counters: dict[str, int] = {}
    taken: dict[str, set] = {k: set() for k in VISUAL}

    def new(kind: str, name: str, dom: Domain) -> Entity:
        counters[kind] = counters.get(kind, 0) + 1
        e = Entity(f"{kind}-{counters[kind]:03d}", name, kind, dom.slug)
        if kind in VISUAL:
            e.attributes = _unique_attributes(kind, renderer, rng, taken[kind])
        ents[e.id] = e
        return e

    for dom in domains:
        org = new("organisation", book.organisation(), dom)
        org.properties = {"founded_year": rng.randint(1985, 2020),
                          "employees": rng.randrange(40, 6000, 10)}
        places = []
        for _ in range(cfg.places_per_domain):
            pl = new("place", book.place(), dom)
            pl.properties = {"city": book.city(), "opened_year": rng.randint(1990, 2024),
                             "floor_area_m2": rng.randrange(2000, 90000, 500)}
            pl.relations.append({"relation": "owned_by", "object_id": org.id})
            places.append(pl)
        org.relations.append({"relation": "headquartered_in", "object_id": places[0].id})
        people = []
        for _ in range(cfg.people_per_domain):
            pe = new("person", book.person(), dom)
            pe.properties = {"role": rng.choice(T.ROLES), "joined_year": rng.randint(2005, 2025)}
            pe.relations += [{"relation": "works_for", "object_id": org.id},
                             {"relation": "based_in", "object_id": rng.choice(places).id}]
            people.append(pe)
        events = []
        for _ in range(cfg.events_per_domain):
            year = rng.randint(2026, 2034)
            ev = new("event", book.event(year), dom)
            ev.properties = {"year": year, "attendees": rng.randrange(800, 40000, 100)}
            ev.relations += [{"relation": "held_in", "object_id": rng.choice(places).id},
                             {"relation": "organised_by", "object_id": org.id}]
            events.append(ev)
        designers = [p.id for p in people]
        rng.shuffle(designers)
        products: list[Entity] = []
        for i in range(cfg.products_per_domain):
            pr = new("product", book.product(), dom)
            pred = rng.choice(products) if products and rng.random() < 0.5 else None
            base_year = pred.properties["release_year"] + rng.randint(1, 2) if pred else \
                rng.randint(2024, 2031)
            pr.properties = {"category": dom.categories[i % len(dom.categories)],
                             "release_year": base_year, "price_usd": rng.randrange(49, 2999, 10),
                             "weight_g": rng.randrange(80, 9000, 10)}
            pr.relations += [{"relation": "designed_by", "object_id": designers[i % len(designers)]},
                             {"relation": "developed_by", "object_id": org.id},
                             {"relation": "manufactured_in", "object_id": rng.choice(places).id}]
            shown = sorted(rng.sample([e.id for e in events], k=rng.randint(1, min(2, len(events)))))
            pr.relations += [{"relation": "shown_at", "object_id": x} for x in shown]
            if pred is not None:
                pr.relations.append({"relation": "successor_of", "object_id": pred.id})
            products.append(pr)
    return ents, domains


# --------------------------------------------------------------------------- pages
@dataclass
class _Draft:
    """A section being written: its sentences, the facts they state, images to place."""

    title: str
    sentences: list[str] = field(default_factory=list)
    facts: list[tuple[str, str, str, str]] = field(default_factory=list)  # s, rel, o, sentence
    core: bool = True


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _say_relation(subj: Entity, rel: str, obj: Entity, on_subject_page: bool,
                  rng: random.Random) -> str:
    side = T.RELATIONS[rel][0 if on_subject_page else 1]
    return _cap(rng.choice(side).format(s=subj.ref(), o=obj.ref()))


def _say_literal(e: Entity, prop: str, ents: dict[str, Entity], rng: random.Random) -> str:
    org_id = e.one("works_for") or e.one("developed_by") or e.one("owned_by")
    org = ents[org_id].name if org_id else ""
    return _cap(rng.choice(T.LITERALS[prop]).format(s=e.ref(), v=e.properties[prop], org=org))


def _distractor(e: Entity, dom: Domain, rng: random.Random) -> str:
    return _cap(rng.choice(T.DISTRACTORS).format(s=e.ref(), feature=rng.choice(dom.features),
                                                 category=rng.choice(dom.categories)))


def _section_plan(e: Entity, ents: dict[str, Entity]) -> list[tuple[str, list[tuple]]]:
    """(title, items) per core section; an item is ('lit', prop) or ('rel', s_id, rel, o_id)."""
    rev = lambda rel: sorted(x.id for x in ents.values() if e.id in x.objects(rel))  # noqa: E731
    R = lambda rel: [("rel", e.id, rel, o) for o in e.objects(rel)]  # noqa: E731
    Rv = lambda rel: [("rel", s, rel, e.id) for s in rev(rel)]  # noqa: E731
    if e.type == "product":
        return [("Overview", R("developed_by") + [("lit", "release_year")]),
                ("Design", R("designed_by")), ("Manufacturing", R("manufactured_in")),
                ("Exhibitions", R("shown_at")),
                ("Lineage", R("successor_of") + Rv("successor_of")), ("Specifications", [])]
    if e.type == "person":
        return [("Overview", [("lit", "role")] + R("works_for")),
                ("Career", [("lit", "joined_year")]), ("Workplace", R("based_in")),
                ("Projects", Rv("designed_by")), ("Profile", [])]
    if e.type == "organisation":
        return [("Overview", [("lit", "founded_year")]), ("Headquarters", R("headquartered_in")),
                ("Products", Rv("developed_by")), ("People", Rv("works_for")),
                ("Sites", Rv("owned_by")), ("Events", Rv("organised_by")), ("Line-up", [])]
    if e.type == "place":
        return [("Overview", [("lit", "city")] + R("owned_by")),
                ("History", [("lit", "opened_year")]), ("Production", Rv("manufactured_in")),
                ("Staff", Rv("based_in")), ("Events", Rv("held_in")),
                ("Headquarters", Rv("headquartered_in")), ("Facts", [])]
    if e.type == "event":
        return [("Overview", R("organised_by")), ("Venue", R("held_in")),
                ("Exhibits", Rv("shown_at")), ("Attendance", [("lit", "attendees")]),
                ("Exhibitors", [])]
    raise ValueError(f"unknown entity type {e.type!r}")


def _table_for(e: Entity, ents: dict[str, Entity]) -> tuple[str, list[str], list[list[str]]]:
    """The page's table: a spec sheet, a profile, a line-up or an exhibitor list."""
    name = lambda i: ents[i].name if i else "-"  # noqa: E731
    p = e.properties
    if e.type == "product":
        return (f"Specifications of the {e.name}", ["Property", "Value"],
                [["Category", p["category"]], ["Release year", str(p["release_year"])],
                 ["Price (USD)", str(p["price_usd"])], ["Weight (g)", str(p["weight_g"])],
                 ["Developer", name(e.one("developed_by"))], ["Designer", name(e.one("designed_by"))]])
    if e.type == "person":
        return (f"Profile of {e.name}", ["Field", "Value"],
                [["Role", p["role"]], ["Employer", name(e.one("works_for"))],
                 ["Joined", str(p["joined_year"])], ["Base", name(e.one("based_in"))]])
    if e.type == "organisation":
        prods = sorted((x for x in ents.values() if e.id in x.objects("developed_by")),
                       key=lambda x: x.id)
        return (f"Line-up of {e.name}",
                ["Product", "Category", "Release year", "Price (USD)", "Weight (g)"],
                [[x.name, x.properties["category"], str(x.properties["release_year"]),
                  str(x.properties["price_usd"]), str(x.properties["weight_g"])] for x in prods])
    if e.type == "place":
        return (f"Facts about {e.name}", ["Field", "Value"],
                [["City", p["city"]], ["Opened", str(p["opened_year"])],
                 ["Owner", name(e.one("owned_by"))], ["Floor area (m2)", str(p["floor_area_m2"])]])
    shown = sorted((x for x in ents.values() if e.id in x.objects("shown_at")), key=lambda x: x.id)
    return (f"Exhibitors at {e.name}", ["Exhibit", "Developer", "Designer"],
            [[x.name, name(x.one("developed_by")), name(x.one("designed_by"))] for x in shown])


def _summary(e: Entity, dom: Domain) -> str:
    kind = {"product": f"a {e.properties.get('category', 'product')}", "person": "a person",
            "organisation": "an organisation", "place": "a site", "event": "an event"}[e.type]
    return _cap(f"{e.ref()} is {kind} in the {dom.name} part of the wiki.")


def _image_plan(e: Entity, ents: dict[str, Entity]) -> list[tuple[str, str, str | None]]:
    """(depicted entity id, section title, relation linking it to the page) in priority order."""
    own = [(e.id, t, None) for t in ("Overview", "Gallery", "Gallery")] if e.type in VISUAL else []
    links: list[tuple[str, str, str | None]] = []
    for title, items in _section_plan(e, ents):
        for item in items:
            if item[0] != "rel":
                continue
            _, s, rel, o = item
            other = o if s == e.id else s
            if ents[other].type in VISUAL:
                links.append((other, title, rel))
    first = own[:1] + links[:1] + own[1:] + links[1:]
    return first


def _caption(e: Entity, depicted: Entity, rel: str | None, ents: dict[str, Entity], cfg: Any,
             renderer: ModuleType, rng: random.Random) -> tuple[str, str, dict | None]:
    """(caption, kind, fact stated by the caption) — naming or descriptive-only."""
    if rng.random() < cfg.descriptive_caption_share:
        return (renderer.describe(depicted.type, depicted.attributes, rng,
                                  cfg.caption_attribute_drop), "descriptive", None)
    if rel is None:
        events = depicted.objects("shown_at")
        if events and rng.random() < 0.5:
            ev = ents[rng.choice(events)]
            tpl = rng.choice(T.CAPTION_RELATION["shown_at"])
            return (_cap(tpl.format(s=depicted.ref(), o=ev.ref())), "naming",
                    {"subject": depicted.id, "relation": "shown_at", "object": ev.id})
        return _cap(rng.choice(T.OWN_CAPTIONS).format(s=depicted.ref())), "naming", None
    subj, obj = (depicted, e) if rel in {r["relation"] for r in depicted.relations} and \
        e.id in depicted.objects(rel) else (e, depicted)
    tpl = rng.choice(T.CAPTION_RELATION.get(rel, ("{s} and {o}.",)))
    return (_cap(tpl.format(s=subj.ref(), o=obj.ref())), "naming",
            {"subject": subj.id, "relation": rel, "object": obj.id})


def _render_image(renderer: ModuleType, e: Entity, image_id: str, out_dir: Path | None,
                  size: int, rng: random.Random) -> tuple[str, int]:
    seed = rng.randrange(2**31)
    path = f"images/{image_id}.png"
    if out_dir is not None:
        img = renderer.render(e.type, e.attributes, seed=seed, size=size)
        img.save(out_dir / path, format="PNG")
    return path, seed


def build_pages(ents: dict[str, Entity], domains: list[Domain], cfg: Any, rng: random.Random,
                renderer: ModuleType, out_dir: Path | None) -> World:
    """One page per entity, with sections, facts, a table, images and layout pages."""
    dom_of = {d.slug: d for d in domains}
    docs: list[Document] = []
    facts: list[Fact] = []
    images: list[dict[str, Any]] = []
    if out_dir is not None:
        (out_dir / "images").mkdir(parents=True, exist_ok=True)
    img_no = 0
    for e in ents.values():
        dom = dom_of[e.domain]
        doc_id = f"doc-{e.id}"
        drafts: list[_Draft] = []
        for title, items in _section_plan(e, ents):
            d = _Draft(title)
            for item in items:
                if item[0] == "lit":
                    sent = _say_literal(e, item[1], ents, rng)
                    d.facts.append((e.id, item[1], str(e.properties[item[1]]), sent))
                else:
                    _, s, rel, o = item
                    sent = _say_relation(ents[s], rel, ents[o], s == e.id, rng)
                    d.facts.append((s, rel, o, sent))
                d.sentences.append(sent)
            if title in ("Specifications", "Profile", "Line-up", "Facts", "Exhibitors"):
                d.sentences.append(_cap(f"The table below summarises {e.ref()}."))
            if not d.facts and title not in ("Specifications", "Profile", "Line-up", "Facts",
                                             "Exhibitors"):
                continue
            for _ in range(rng.randint(1, 2)):
                d.sentences.insert(rng.randint(0, len(d.sentences)), _distractor(e, dom, rng))
            drafts.append(d)
        target = rng.choice(cfg.sections_per_page)
        fillers = list(T.FILLER_TITLES[e.type])
        rng.shuffle(fillers)
        gallery_needed = e.type in VISUAL
        while len(drafts) + (1 if gallery_needed else 0) < target and fillers:
            d = _Draft(fillers.pop(), core=False)
            d.sentences = [_distractor(e, dom, rng) for _ in range(rng.randint(2, 3))]
            drafts.append(d)
        if gallery_needed:
            drafts.append(_Draft("Gallery", [f"Photographs of {e.ref()}."], core=False))
        # layout pages: a new page every `triplets_per_page` stated facts
        sections, n_trip = [], 0
        for k, d in enumerate(drafts):
            sid = f"{doc_id}-s{k:02d}"
            page = n_trip // cfg.triplets_per_page
            n_trip += len(d.facts)
            sections.append(Section(id=sid, doc_id=doc_id, title=d.title,
                                    text=" ".join(d.sentences), page=page))
            for s, rel, o, sent in d.facts:
                facts.append(Fact(f"fact-{len(facts):05d}", doc_id, sid, s, rel, o, sent, page))
        by_title = {s.title: s for s in sections}
        tab_title, cols, rows = _table_for(e, ents)
        tab_sec = sections[[d.title for d in drafts].index(next(
            t for t in ("Specifications", "Profile", "Line-up", "Facts", "Exhibitors")
            if t in by_title))]
        table = Table(id=f"{doc_id}-t00", doc_id=doc_id, columns=cols, rows=rows, title=tab_title,
                      section_id=tab_sec.id)
        tab_sec.table_ids.append(table.id)
        # images
        plan = _image_plan(e, ents)
        n_img = rng.choice(cfg.images_per_page)
        doc_images: list[Image] = []
        for j in range(n_img if plan else 0):
            ent_id, sec_title, rel = plan[j % len(plan)]
            depicted = ents[ent_id]
            sec = by_title.get(sec_title) or by_title.get("Gallery") or sections[0]
            img_id = f"img-{img_no:05d}"
            img_no += 1
            caption, ckind, cfact = _caption(e, depicted, rel, ents, cfg, renderer, rng)
            path, seed = _render_image(renderer, depicted, img_id, out_dir, cfg.image_size, rng)
            doc_images.append(Image(id=img_id, doc_id=doc_id, path=path, caption=caption,
                                    section_id=sec.id, page=sec.page, entity_id=depicted.id,
                                    attributes=dict(depicted.attributes)))
            sec.image_ids.append(img_id)
            images.append({"id": img_id, "path": path, "entity_id": depicted.id,
                           "kind": depicted.type, "attributes": dict(depicted.attributes),
                           "split": "train", "doc_id": doc_id, "section_id": sec.id,
                           "caption": caption, "caption_kind": ckind, "caption_fact": cfact,
                           "seed": seed})
        docs.append(Document(id=doc_id, title=e.name, sections=sections, images=doc_images,
                             tables=[table], summary=_summary(e, dom), domain=dom.slug,
                             entity_id=e.id, source="world", meta={"type": e.type}))
    for e in ents.values():  # held-out images: on no page
        if e.type not in VISUAL:
            continue
        for _ in range(cfg.heldout_images):
            img_id = f"img-{img_no:05d}"
            img_no += 1
            path, seed = _render_image(renderer, e, img_id, out_dir, cfg.image_size, rng)
            images.append({"id": img_id, "path": path, "entity_id": e.id, "kind": e.type,
                           "attributes": dict(e.attributes), "split": "heldout", "doc_id": None,
                           "section_id": None, "caption": renderer.describe(
                               e.type, e.attributes, rng, cfg.caption_attribute_drop),
                           "caption_kind": "descriptive", "caption_fact": None, "seed": seed})
    return World(ents, docs, facts, images, domains)


def generate(cfg: Any, seed: int, renderer: ModuleType | None = None,
             out_dir: Path | None = None) -> World:
    """The whole world from one seed; images are rendered into ``out_dir/images`` when given."""
    if renderer is None:
        renderer = render
    rng = random.Random(seed)
    book = NameBook(random.Random(rng.randrange(2**31)))
    ents, domains = make_entities(cfg, rng, book, renderer)
    world = build_pages(ents, domains, cfg, rng, renderer, out_dir)
    world.book = book  # type: ignore[attr-defined]  (aliases for NEA come from the same book)
    return world
