"""Realistic "your own corpus" folders, written at test time in the official file formats.

Three folders, each the shape a user would drop into ``corpora.folder.path``:

* :func:`write_hotpotqa`: ``questions/<set>.json``, a HotpotQA JSON array (``_id``, ``question``,
  ``answer``, ``type``, ``level``, ``supporting_facts``, ``context``) of bridge and comparison
  questions, each with its two gold paragraphs among distractors, and nothing else in the folder;
* :func:`write_musique`: ``questions/<set>.jsonl``, MuSiQue records (``id``, ``paragraphs``,
  ``question``, ``question_decomposition``, ``answer``, ``answer_aliases``, ``answerable``) of 2 to
  4 hops, a few of them unanswerable as in MuSiQue-Full;
* :func:`write_zim`: a Kiwix ZIM archive (libzim's writer) of illustrated HTML articles with
  infoboxes, thumbnails, figures, a site logo on every page and tiny icons, and a hand-written
  ``questions/<set>.jsonl`` beside it, some questions asking about a picture.

Every entity is invented (:class:`World`), every draw is seeded, and each builder returns what
ingestion should find, computed from its own plan rather than from the ingester, so a test can hold
the two against each other. Nothing downloaded, nothing committed but this code.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image, ImageDraw

# syllables of the invented names: no real person, firm or place is meant
_ONSETS = ["b", "br", "c", "d", "dr", "f", "g", "h", "k", "l", "m", "n", "p", "qu", "r", "s", "t", "th", "v", "w",
           "z", "st", "gr", "tr"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou"]
_CODAS = ["", "n", "r", "l", "s", "th", "m", "nd", "rk", "x"]
_GIVEN = ["Mara", "Tobin", "Ilse", "Corvin", "Yara", "Edran", "Lisbet", "Oskar", "Nell", "Haldor", "Petra", "Anselm",
          "Runa", "Fenwick", "Sabine", "Idris", "Elowen", "Bastian", "Greta", "Lucan"]
_JOBS = ["engineer", "chemist", "architect", "economist", "film director", "geologist", "inventor", "publisher"]
_SUBJECTS = ["physics", "chemistry", "law", "mathematics", "architecture", "geology", "medicine", "history"]
_INDUSTRIES = ["shipbuilding", "software", "textile", "brewing", "optics", "rail", "glassmaking", "aerospace"]
_PRODUCTS = ["lantern", "loom", "drone", "barometer", "tram", "kettle", "telescope", "radio"]
_GENRES = ["drama", "comedy", "thriller", "documentary", "western", "musical"]
_KNOWN = ["blown glass", "salt marshes", "a clock tower", "its spring fair", "dark ale", "a stone bridge"]
_SEAS = ["Calder Sea", "Gulf of Varn", "Northmere Sea", "Bay of Oster"]
_REGIONS = ["Vell", "Ostrand", "Marrow", "Tessaly Reach"]


def _name(rng: random.Random, taken: set[str], syllables: int = 2) -> str:
    """A fresh pronounceable invented word (capitalised), unique within ``taken``."""
    while True:
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)) + rng.choice(_CODAS)
        word = word.capitalize()
        if word not in taken and 4 <= len(word) <= 11:
            taken.add(word)
            return word


# --------------------------------------------------------------------------- the invented world
@dataclass
class Entity:
    """One invented thing: its title and its facts as sentences, each under a key a question cites."""

    title: str
    kind: str  # person | company | town | river | university | film
    facts: dict[str, str] = field(default_factory=dict)  # key -> sentence (in the order written)
    attrs: dict[str, object] = field(default_factory=dict)

    def sentences(self) -> list[str]:
        """HotpotQA's sentence list: each after the first carries its own leading space, as there."""
        return [s if i == 0 else f" {s}" for i, s in enumerate(self.facts.values())]

    def sent_idx(self, key: str) -> int:
        return list(self.facts).index(key)

    def paragraphs(self) -> list[tuple[list[str], str]]:
        """MuSiQue's paragraphs of this title: (fact keys, text); the lead, then the rest, which
        names its subject instead of opening on "It" (a paragraph is read on its own there)."""
        keys = list(self.facts)
        cut = max(1, len(keys) // 2)
        rest = " ".join(self.facts[k] for k in keys[cut:])
        if rest.startswith("It "):
            rest = f"{self.attrs.get('subject', self.title)} {rest[3:]}"
        return [(keys[:cut], " ".join(self.facts[k] for k in keys[:cut])), (keys[cut:], rest)]


@dataclass
class World:
    """Towns on rivers, universities in towns, people born in towns, companies and films they made."""

    rivers: list[Entity]
    towns: list[Entity]
    universities: list[Entity]
    people: list[Entity]
    companies: list[Entity]
    films: list[Entity]

    def all(self) -> list[Entity]:
        return self.rivers + self.towns + self.universities + self.people + self.companies + self.films

    def by_title(self) -> dict[str, Entity]:
        return {e.title: e for e in self.all()}


def _a(word: str) -> str:
    """The indefinite article and the word."""
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def make_world(seed: int, rivers: int = 8, towns: int = 12, universities: int = 6, people: int = 16,
               companies: int = 12, films: int = 8) -> World:
    """A seeded invented world whose compared numbers never tie (distinct founding years, sizes,
    lengths) and whose dates agree (a founder is 25 to 50 at the founding, a director 28 to 60, a
    university older than its student)."""
    rng = random.Random(seed)
    taken: set[str] = set()
    river_km = rng.sample(range(40, 900), rivers)
    rv = []
    for i in range(rivers):
        name = f"{_name(rng, taken)} River"
        region, sea = rng.choice(_REGIONS), rng.choice(_SEAS)
        rv.append(Entity(name, "river", {
            "intro": f"The {name} is a river in the {region} region.",
            "length": f"It is {river_km[i]} km long.",
            "source": f"It rises in the hills above {_name(rng, taken)} and is fed by {rng.randint(3, 12)} "
                      "tributaries.",
            "mouth": f"It flows into the {sea}.",
        }, {"length": river_km[i], "mouth": sea, "region": region, "subject": f"The {name}"}))
    pops = rng.sample(range(4_000, 400_000), towns)
    tw = []
    for i in range(towns):
        name, river = _name(rng, taken), rv[i % rivers]
        region = rng.choice(_REGIONS)
        tw.append(Entity(name, "town", {
            "intro": f"{name} is a market town in the {region} region.",
            "river": f"It lies on the banks of the {river.title}.",
            "population": f"At the 2020 census it had a population of {pops[i]:,}.",
            "known": f"The town is known for {rng.choice(_KNOWN)}.",
        }, {"river": river.title, "population": pops[i], "region": region}))
    uni_years = rng.sample(range(1650, 1990), universities)
    un = []
    for i in range(universities):
        town = tw[rng.randrange(towns)]
        name = f"University of {_name(rng, taken)}"
        un.append(Entity(name, "university", {
            "intro": f"The {name} is a public research university in {town.title}.",
            "founded": f"It was founded in {uni_years[i]}.",
            "students": f"It enrols about {rng.randint(20, 400) * 100:,} students.",
        }, {"town": town.title, "founded": uni_years[i], "subject": f"The {name}"}))
    found_years = rng.sample(range(1850, 2015), companies)
    pp = []
    given = rng.sample(_GIVEN, min(people, len(_GIVEN)))
    for i in range(people):
        surname = _name(rng, taken)
        name = f"{given[i % len(given)]} {surname}"
        born = found_years[i] - rng.randint(25, 50) if i < companies else rng.randint(1890, 1990)
        town = tw[rng.randrange(towns)]
        open_then = [u for u in un if int(u.attrs["founded"]) <= born + 18]  # a university that existed
        uni = rng.choice(open_then) if open_then else min(un, key=lambda u: int(u.attrs["founded"]))
        pp.append(Entity(name, "person", {
            "intro": f"{name} (born {born}) is {_a(rng.choice(_JOBS))}.",
            "birthplace": f"{surname} was born in {town.title}.",
            "school": f"{surname} studied {rng.choice(_SUBJECTS)} at the {uni.title}.",
        }, {"born": born, "birthplace": town.title, "school": uni.title, "subject": surname}))
    co = []
    for i in range(companies):
        name = f"{_name(rng, taken)} {rng.choice(['Corp', 'Works', 'Ltd', 'Group'])}"
        founder, seat = pp[i % people], tw[rng.randrange(towns)]
        product = f"{_name(rng, taken)} {rng.choice(_PRODUCTS)}"
        co.append(Entity(name, "company", {
            "intro": f"{name} is {_a(rng.choice(_INDUSTRIES))} company based in {seat.title}.",
            "founded": f"It was founded in {found_years[i]} by {founder.title}.",
            "product": f"Its best-known product is the {product}.",
            "staff": f"The company employs about {rng.randint(50, 9000):,} people.",
        }, {"founded": found_years[i], "founder": founder.title, "seat": seat.title, "product": product,
            "subject": name}))
        founder.facts["founder"] = f"{founder.attrs['subject']} founded {name} in {found_years[i]}."
    fm = []
    for i in range(films):
        name = f"The {_name(rng, taken)} {rng.choice(['Affair', 'Crossing', 'Winter', 'Letters', 'Tide'])}"
        director = pp[(i * 3 + 1) % people]
        year = int(director.attrs["born"]) + rng.randint(28, 60)
        fm.append(Entity(name, "film", {
            "intro": f"{name} is a {year} {rng.choice(_GENRES)} film directed by {director.title}.",
            "plot": f"It follows {_a(rng.choice(_JOBS))} who returns to {tw[rng.randrange(towns)].title}.",
            "release": f"It premiered at the {tw[rng.randrange(towns)].title} Film Festival.",
        }, {"year": year, "director": director.title, "subject": name}))
    return World(rv, tw, un, pp, co, fm)


# --------------------------------------------------------------------------- HotpotQA
@dataclass(frozen=True)
class HotpotFixture:
    """A HotpotQA folder and what ingestion should make of it."""

    folder: Path
    set_name: str
    records: list[dict]  # the file's items, as written
    titles: list[str]  # distinct context titles (one document each)


def _hotpot_id(seed: int, i: int) -> str:
    return hashlib.md5(f"hotpot-{seed}-{i}".encode()).hexdigest()[:24]


def hotpot_items(world: World, seed: int, n_bridge: int = 20, n_comparison: int = 16) -> list[dict]:
    """Bridge and comparison questions, each with its 2 gold paragraphs and 2 to 8 distractors."""
    rng = random.Random(seed)
    ents = world.by_title()
    facts: list[tuple[str, str, str, list[tuple[str, str]]]] = []  # type, question, answer, [(title, key)]
    bridges = []
    for c in world.companies:
        founder = ents[c.attrs["founder"]]
        bridges.append((f"In which town was the founder of {c.title} born?", founder.attrs["birthplace"],
                        [(c.title, "founded"), (founder.title, "birthplace")]))
        town = ents[c.attrs["seat"]]
        bridges.append((f"On which river lies the town where {c.title} is based?", town.attrs["river"],
                        [(c.title, "intro"), (town.title, "river")]))
    for p in world.people:
        uni = ents[p.attrs["school"]]
        bridges.append((f"In what year was the university where {p.title} studied founded?",
                        str(uni.attrs["founded"]), [(p.title, "school"), (uni.title, "founded")]))
    for f in world.films:
        d = ents[f.attrs["director"]]
        bridges.append((f"Where was the director of {f.title} born?", d.attrs["birthplace"],
                        [(f.title, "intro"), (d.title, "birthplace")]))
    for t in world.towns:
        r = ents[t.attrs["river"]]
        bridges.append((f"How long is the river on whose banks {t.title} lies?", f"{r.attrs['length']} km",
                        [(t.title, "river"), (r.title, "length")]))
    for q, a, sf in rng.sample(bridges, n_bridge):
        facts.append(("bridge", q, a, sf))

    comparisons = []
    for a, b in _pairs(rng, world.companies, 6):
        first = a if a.attrs["founded"] < b.attrs["founded"] else b
        comparisons.append((f"Which company was founded first, {a.title} or {b.title}?", first.title,
                            [(a.title, "founded"), (b.title, "founded")]))
    for a, b in _pairs(rng, world.towns, 4):
        big = a if a.attrs["population"] > b.attrs["population"] else b
        comparisons.append((f"Which town has the larger population, {a.title} or {b.title}?", big.title,
                            [(a.title, "population"), (b.title, "population")]))
    for a, b in _pairs(rng, world.rivers, 3):
        long = a if a.attrs["length"] > b.attrs["length"] else b
        comparisons.append((f"Which river is longer, the {a.title} or the {b.title}?", long.title,
                            [(a.title, "length"), (b.title, "length")]))
    for a, b in _pairs(rng, world.people, 3):
        same = a.attrs["birthplace"] == b.attrs["birthplace"]
        comparisons.append((f"Were {a.title} and {b.title} born in the same town?", "yes" if same else "no",
                            [(a.title, "birthplace"), (b.title, "birthplace")]))
    for q, a, sf in comparisons[:n_comparison]:
        facts.append(("comparison", q, a, sf))

    items = []
    levels = ["easy", "medium", "hard"]
    for i, (kind, question, answer, sf) in enumerate(facts):
        gold = list(dict.fromkeys(t for t, _ in sf))
        kin = [e.title for e in world.all() if e.kind == ents[gold[-1]].kind and e.title not in gold]
        rest = [e.title for e in world.all() if e.title not in gold and e.title not in kin]
        n_distract = rng.randint(2, 8)
        take = rng.sample(kin, min(len(kin), (n_distract + 1) // 2))
        distract = take + rng.sample(rest, n_distract - len(take))
        titles = gold + distract
        rng.shuffle(titles)
        items.append({
            "_id": _hotpot_id(seed, i), "question": question, "answer": answer, "type": kind,
            "level": levels[i % 3],
            "supporting_facts": [[t, ents[t].sent_idx(k)] for t, k in sf],
            "context": [[t, ents[t].sentences()] for t in titles],
        })
    return items


def _pairs(rng: random.Random, ents: list[Entity], n: int) -> list[tuple[Entity, Entity]]:
    """``n`` distinct unordered pairs, seeded."""
    out: list[tuple[Entity, Entity]] = []
    while len(out) < n:
        a, b = rng.sample(ents, 2)
        if (a, b) not in out and (b, a) not in out:
            out.append((a, b))
    return out


def write_hotpotqa(root: Path, seed: int = 11, set_name: str = "hotpot_dev_distractor_v1") -> HotpotFixture:
    """A folder holding only ``questions/<set_name>.json``, an official HotpotQA array."""
    items = hotpot_items(make_world(seed), seed)
    (root / "questions").mkdir(parents=True)
    (root / "questions" / f"{set_name}.json").write_text(json.dumps(items, ensure_ascii=False))
    titles = list(dict.fromkeys(t for it in items for t, _ in it["context"]))
    return HotpotFixture(root, set_name, items, titles)


# --------------------------------------------------------------------------- MuSiQue
@dataclass(frozen=True)
class MusiqueFixture:
    """A MuSiQue folder and what ingestion should make of it."""

    folder: Path
    set_name: str
    records: list[dict]  # every line as written (the unanswerable ones too)

    @property
    def answerable(self) -> list[dict]:
        return [r for r in self.records if r["answerable"]]


# hop chains: (id shape, question template, steps); a step is (question template, entity key of the
# previous answer's title or the start, the fact key whose paragraph supports it, the attribute answered)
_CHAINS = {
    "2hop": ("On which river lies the birthplace of {p}?",
             [("Where was {p} born?", "birthplace"), ("On which river does #1 lie?", "river")]),
    "2hop_b": ("Where did the founder of {c} study?",
               [("Who founded {c}?", "founder"), ("Where did #1 study?", "school")]),
    "2hop_c": ("In what year was the director of {f} born?",
               [("Who directed {f}?", "director"), ("When was #1 born?", "born")]),
    "3hop1": ("On which river lies the birthplace of the founder of {c}?",
              [("Who founded {c}?", "founder"), ("Where was #1 born?", "birthplace"),
               ("On which river does #2 lie?", "river")]),
    "3hop2": ("In what year was the university attended by the director of {f} founded?",
              [("Who directed {f}?", "director"), ("Where did #1 study?", "school"),
               ("When was #2 founded?", "founded")]),
    "4hop1": ("Into which sea flows the river of the birthplace of the founder of {c}?",
              [("Who founded {c}?", "founder"), ("Where was #1 born?", "birthplace"),
               ("On which river does #2 lie?", "river"), ("Into which sea does #3 flow?", "mouth")]),
    "4hop3": ("Into which sea flows the river of the birthplace of the director of {f}?",
              [("Who directed {f}?", "director"), ("Where was #1 born?", "birthplace"),
               ("On which river does #2 lie?", "river"), ("Into which sea does #3 flow?", "mouth")]),
}
# fact key -> the attribute that answers it
_FACT_OF = {"birthplace": "birthplace", "river": "river", "founder": "founded", "school": "school",
            "director": "intro", "born": "intro", "founded": "founded", "mouth": "mouth"}


def musique_items(world: World, seed: int, per_chain: int = 5, paragraphs: int = 14,
                  unanswerable: int = 4) -> list[dict]:
    """MuSiQue records: ``per_chain`` questions of every chain, then ``unanswerable`` ones whose
    supporting paragraph of one hop is missing (``answerable: false``, as in MuSiQue-Full)."""
    rng = random.Random(seed)
    ents = world.by_title()
    pool: list[tuple[str, str, list[str]]] = []  # (title, text, fact keys): every paragraph of the world
    for e in world.all():
        for keys, text in e.paragraphs():
            pool.append((e.title, text, keys))
    para_no = {(t, text): 1000 + i for i, (t, text, _) in enumerate(pool)}  # MuSiQue's numeric ids

    def para_of(title: str, fact: str) -> tuple[str, str]:
        return next((t, text) for t, text, keys in pool if t == title and fact in keys)

    records = []
    jobs = [(chain, k) for chain in _CHAINS for k in range(per_chain)]
    jobs += [(rng.choice(list(_CHAINS)), per_chain + k) for k in range(unanswerable)]
    used: set[tuple[str, str]] = set()  # (chain, start): each chain asks about a start once
    for chain, k in jobs:
        template, steps = _CHAINS[chain]
        start_kind = "c" if "{c}" in template else "f" if "{f}" in template else "p"
        starts = {"c": world.companies, "f": world.films, "p": world.people}[start_kind]
        start = next(s for s in rng.sample(starts, len(starts)) if (chain, s.title) not in used)
        used.add((chain, start.title))
        answers: list[str] = []
        support: list[tuple[str, str]] = []
        cur = start
        for _, attr in steps:
            value = str(cur.attrs["founder" if attr == "founder" else attr])
            support.append(para_of(cur.title, _FACT_OF[attr]))
            answers.append(value)
            cur = ents.get(value, cur)
        drop = rng.randrange(len(support)) if k >= per_chain else None
        chosen = list(dict.fromkeys(s for i, s in enumerate(support) if i != drop))
        others = [(t, text) for t, text, _ in pool if (t, text) not in chosen and (t, text) not in support]
        near = [p for p in others if p[0] in {s[0] for s in support}]
        distract = near + rng.sample([p for p in others if p not in near], paragraphs - len(chosen) - len(near))
        paras = chosen + distract
        rng.shuffle(paras)
        idx = {p: i for i, p in enumerate(paras)}
        decomposition = [{
            "id": para_no[support[i]], "question": q.format(p=start.title, c=start.title, f=start.title),
            "answer": answers[i], "paragraph_support_idx": idx.get(support[i])}
            for i, (q, _) in enumerate(steps)]
        shape = chain.split("_")[0]
        final = answers[-1]
        aliases = [final.removesuffix(" River"), f"the {final}"] if final.endswith(" River") else \
            [f"the {final}"] if final in _SEAS else []
        records.append({
            "id": f"{shape}__" + "_".join(str(para_no[s]) for s in support),
            "paragraphs": [{"idx": i, "title": t, "paragraph_text": text, "is_supporting": (t, text) in support
                            and (t, text) in chosen} for i, (t, text) in enumerate(paras)],
            "question": template.format(p=start.title, c=start.title, f=start.title),
            "question_decomposition": decomposition,
            "answer": final, "answer_aliases": aliases, "answerable": drop is None,
        })
    return records


def write_musique(root: Path, seed: int = 23, set_name: str = "musique_full_v1_0_dev", as_array: bool = False
                  ) -> MusiqueFixture:
    """A folder holding only ``questions/<set_name>.jsonl`` (MuSiQue's official JSONL), or, with
    ``as_array``, the same records as one JSON array in ``questions/<set_name>.json``."""
    records = musique_items(make_world(seed), seed)
    (root / "questions").mkdir(parents=True)
    if as_array:
        (root / "questions" / f"{set_name}.json").write_text(json.dumps(records, ensure_ascii=False))
    else:
        (root / "questions" / f"{set_name}.jsonl").write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return MusiqueFixture(root, set_name, records)


# --------------------------------------------------------------------------- ZIM
_COLOURS = {"red": (200, 30, 40), "blue": (30, 70, 200), "green": (30, 150, 60), "yellow": (235, 200, 20),
            "black": (20, 20, 20), "orange": (240, 130, 20), "purple": (120, 40, 150), "white": (250, 250, 250),
            "teal": (20, 140, 140), "grey": (130, 130, 130)}
_SHAPES = ["circle", "triangle", "square", "diamond", "cross", "stripe", "star", "crescent"]


def _png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False)
    return buf.getvalue()


def flag_png(field_colour: str, shape: str, shape_colour: str) -> bytes:
    """A 72x48 flag: one shape on a plain field."""
    img = Image.new("RGB", (72, 48), _COLOURS[field_colour])
    d, c = ImageDraw.Draw(img), _COLOURS[shape_colour]
    box = (24, 12, 48, 36)
    if shape == "circle":
        d.ellipse(box, fill=c)
    elif shape == "triangle":
        d.polygon([(0, 0), (0, 48), (36, 24)], fill=c)
    elif shape == "square":
        d.rectangle(box, fill=c)
    elif shape == "diamond":
        d.polygon([(36, 6), (58, 24), (36, 42), (14, 24)], fill=c)
    elif shape == "cross":
        d.rectangle((30, 0, 42, 48), fill=c)
        d.rectangle((0, 18, 72, 30), fill=c)
    elif shape == "stripe":
        d.rectangle((0, 16, 72, 32), fill=c)
    elif shape == "star":
        d.polygon([(36, 8), (41, 20), (54, 20), (44, 28), (48, 41), (36, 33), (24, 41), (28, 28), (18, 20),
                   (31, 20)], fill=c)
    else:  # crescent
        d.ellipse(box, fill=c)
        d.ellipse((30, 12, 54, 36), fill=_COLOURS[field_colour])
    return _png(img)


def blob_png(rng: random.Random, colour: str, size: int = 64) -> bytes:
    """A map- or photo-like picture: a seeded polygon of one colour on a pale ground."""
    img = Image.new("RGB", (size, size), (236, 232, 220))
    pts = [(rng.randint(4, size - 4), rng.randint(4, size - 4)) for _ in range(7)]
    ImageDraw.Draw(img).polygon(pts, fill=_COLOURS[colour], outline=(40, 40, 40))
    return _png(img)


def bird_png(colour: str, size: int = 56) -> bytes:
    """A bird-like picture: an oval body, a head and a beak, in the bird's colour."""
    img = Image.new("RGB", (size, size), (210, 230, 245))
    d = ImageDraw.Draw(img)
    d.ellipse((8, 22, 40, 44), fill=_COLOURS[colour])
    d.ellipse((34, 14, 48, 28), fill=_COLOURS[colour])
    d.polygon([(48, 20), (55, 22), (48, 24)], fill=(230, 160, 20))
    return _png(img)


def icon_png(side: int, colour: str) -> bytes:
    """A tiny interface icon (below ``min_image_side``): ingestion skips it as ``tiny_image``."""
    img = Image.new("RGB", (side, side), (255, 255, 255))
    ImageDraw.Draw(img).rectangle((1, 1, side - 2, side - 2), outline=_COLOURS[colour])
    return _png(img)


@dataclass
class Article:
    """One ZIM article as planned: its path, title, HTML and the content images it shows."""

    path: str
    title: str
    html: str
    images: list[tuple[str, bool]]  # (ZIM path, has a caption): the content images, in order


@dataclass(frozen=True)
class ZimFixture:
    """A folder with one ZIM archive and a questions file beside it, and what ingestion should find."""

    folder: Path
    set_name: str
    articles: list[Article]
    questions: list[dict]
    tiny_icons: int  # distinct icons below min_image_side
    logo_pages: int  # articles showing the site logo (dropped as decorative)

    @property
    def images(self) -> int:
        return sum(len(a.images) for a in self.articles)

    @property
    def captioned(self) -> int:
        return sum(c for a in self.articles for _, c in a.images)

    @property
    def distinct_images(self) -> int:
        return len({p for a in self.articles for p, _ in a.images})

    @property
    def shared_images(self) -> int:
        """Content images on more than one article (each on at most max_image_repeats: kept)."""
        pages: dict[str, int] = {}
        for a in self.articles:
            for p in {p for p, _ in a.images}:
                pages[p] = pages.get(p, 0) + 1
        return sum(n > 1 for n in pages.values())


_PAGE = ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title>'
         '<link rel="stylesheet" href="../-/style.css"></head><body>'
         '<div class="banner"><img src="../I/site_logo.png" alt="Calder Encyclopedia"></div>'
         '<div id="content"><h1 class="firstHeading">{title}</h1>{body}</div></body></html>')
_EXT = '<img src="../I/ext_link.png" alt="" width="10" height="10">'
_AUDIO = '<img src="../I/speaker.png" alt="listen" width="12" height="12">'


def _zim_world(seed: int) -> dict:
    """Regions with capitals, rivers and flags; birds that nest in them; landmarks in the capitals."""
    rng = random.Random(seed)
    taken: set[str] = set()
    colours = list(_COLOURS)
    regions = []
    for i, shape in enumerate(rng.sample(_SHAPES, 8)):
        field_c, shape_c = rng.sample([c for c in colours if c != "grey"], 2)
        regions.append({"name": _name(rng, taken), "capital": _name(rng, taken), "river": f"{_name(rng, taken)} River",
                        "shape": shape, "field": field_c, "shape_colour": shape_c,
                        "population": rng.randint(50, 900) * 1000, "founded": rng.randint(1100, 1900),
                        "map_colour": colours[i % len(colours)]})
    birds = []
    for i, colour in enumerate(rng.sample([c for c in colours if c not in ("white",)], 5)):
        birds.append({"name": f"{colour.capitalize()} {_name(rng, taken)}", "colour": colour,
                      "region": regions[(i * 3) % len(regions)]["name"], "wingspan": rng.randint(18, 95)})
    landmarks = [{"name": f"{_name(rng, taken)} {kind}", "region": regions[i]["name"],
                  "capital": regions[i]["capital"], "built": rng.randint(1200, 1950),
                  "colour": colours[(i + 4) % len(colours)]}
                 for i, kind in enumerate(["Lighthouse", "Bridge", "Cathedral"])]
    return {"regions": regions, "birds": birds, "landmarks": landmarks}


def _region_article(r: dict, birds: list[dict]) -> Article:
    name, flag, mp = r["name"], f"I/flag_{r['name'].lower()}.png", f"I/map_{r['name'].lower()}.png"
    photo = f"I/view_{r['name'].lower()}.png"
    nesting = [b["name"] for b in birds if b["region"] == name]
    body = (
        f'<table class="infobox"><tr><th colspan="2">{name}</th></tr>'
        f'<tr><td colspan="2"><img src="../{flag}" width="72" height="48"></td></tr>'
        f'<tr><td colspan="2">Flag of {name}</td></tr>'
        f'<tr><th>Capital</th><td>{r["capital"]}</td></tr>'
        f'<tr><th>Population</th><td>{r["population"]:,}</td></tr></table>'
        f'<p><b>{name}</b> is a region of the Calder Union. Its capital is {r["capital"]}, '
        f'which lies on the {r["river"]}.</p>'
        f'<h2>History</h2><p>{name} was first chartered in {r["founded"]}. It joined the Calder Union '
        f'after the treaty of the three harbours.</p>'
        f'<h2>Geography</h2><div class="thumb tright"><div class="thumbinner">'
        f'<img src="../{mp}" width="64" height="64"><div class="thumbcaption">Location of {name} in the '
        f'Calder Union</div></div></div><p>The region is drained by the {r["river"]}, which flows past '
        f'{r["capital"]}. {name} had {r["population"]:,} inhabitants at the last count.</p>'
        f'<h2>Symbols</h2><p>The flag of {name} shows a {r["shape_colour"]} {r["shape"]} on a '
        f'{r["field"]} field. The {r["shape"]} stands for the region\'s oldest guild. '
        f'Anthem {_AUDIO}</p>'
        f'<h2>Culture</h2><figure><img src="../{photo}" alt="{name} landscape">'
        f'<figcaption>Farmland near {r["capital"]}, {name}</figcaption></figure>'
        f'<p>{name} is known for its harvest fair.'
        + (f' The {", ".join(nesting)} nests in its marshes.' if nesting else "") + '</p>'
        f'<h2>External links</h2><ul><li><a href="#">Regional council</a> {_EXT}</li></ul>')
    return Article(f"A/{name}", name, _PAGE.format(title=name, body=body), [(flag, True), (mp, True), (photo, True)])


def _capital_article(r: dict) -> Article:
    cap, mp = r["capital"], f"I/map_{r['name'].lower()}.png"  # the region's map again: on two pages, kept
    body = (f'<p><b>{cap}</b> is the capital of {r["name"]}. It stands on the {r["river"]}.</p>'
            f'<h2>Geography</h2><div class="thumb"><div class="thumbinner"><img src="../{mp}">'
            f'<div class="thumbcaption">{r["name"]}, with {cap} on the {r["river"]}</div></div></div>'
            f'<p>The old town spreads along both banks of the {r["river"]}.</p>'
            f'<h2>Economy</h2><p>{cap} is the market town of {r["name"]} and its main river port.</p>'
            f'<h2>External links</h2><p>Town hall {_EXT}</p>')
    return Article(f"A/{cap}", cap, _PAGE.format(title=cap, body=body), [(mp, True)])


def _bird_article(b: dict, with_caption: bool) -> Article:
    pic, nest = f"I/bird_{b['colour']}.png", f"I/nest_{b['colour']}.png"
    figure = (f'<figure><img src="../{pic}" alt=""><figcaption>An adult {b["name"]} in flight</figcaption></figure>'
              if with_caption else f'<img src="../{pic}" alt="{b["name"]}">')
    body = (f'<p>The <b>{b["name"]}</b> is a bird of the Calder Union. Its plumage is {b["colour"]}.</p>{figure}'
            f'<h2>Description</h2><p>Adults have a wingspan of {b["wingspan"]} cm. Call {_AUDIO}</p>'
            f'<h2>Habitat</h2><p>It nests in the marshes of {b["region"]}.</p>'
            f'<div class="gallery"><img src="../{nest}"></div>'  # no caption, no alt: uncaptioned
            f'<h2>External links</h2><p>Bird atlas {_EXT}</p>')
    return Article(f"A/{b['name'].replace(' ', '_')}", b["name"], _PAGE.format(title=b["name"], body=body),
                   [(pic, True), (nest, False)])


def _landmark_article(m: dict) -> Article:
    pic = f"I/landmark_{m['name'].split()[0].lower()}.png"
    body = (f'<p>The <b>{m["name"]}</b> is a landmark in {m["capital"]}, {m["region"]}.</p>'
            f'<h2>History</h2><p>It was built in {m["built"]}.</p>'
            f'<figure><img src="../{pic}"><figcaption>The {m["name"]} at dusk</figcaption></figure>'
            f'<h2>Visiting</h2><p>It is open to visitors every day but Monday.</p>')
    return Article(f"A/{m['name'].replace(' ', '_')}", m["name"], _PAGE.format(title=m["name"], body=body),
                   [(pic, True)])


def zim_questions(world: dict, image_dir: str) -> list[dict]:
    """Hand-written-style questions: facts, two hops, pictures described in the text, and pictures
    given with the question (``image``, with choices)."""
    regions, birds, marks = world["regions"], world["birds"], world["landmarks"]
    qs = []
    for r in regions:
        qs.append({"question": f"What is the capital of {r['name']}?", "answer": r["capital"]})
        qs.append({"question": f"What shape is on the flag of {r['name']}?", "answer": r["shape"]})
    for r in regions[:5]:
        qs.append({"question": f"Which river flows through the capital of {r['name']}?", "answer": r["river"]})
    for b in birds:
        qs.append({"question": f"What colour is the plumage of the {b['name']}?", "answer": b["colour"]})
        qs.append({"question": f"In which region does the {b['name']} nest?", "answer": b["region"]})
    for m in marks:
        qs.append({"question": f"In which year was the {m['name']} built?", "answer": str(m["built"])})
    names = [r["name"] for r in regions]
    for i, r in enumerate(regions[:6]):
        choices = sorted({r["name"], *[names[(i + k) % len(names)] for k in (1, 3, 5)]})
        qs.append({"question": "Which region's flag is this?", "answer": r["name"], "choices": choices,
                   "image": f"{image_dir}/flag_{r['name'].lower()}.png"})
    return [{"id": f"calder-{i:03d}", **q} for i, q in enumerate(qs)]


def write_zim(root: Path, seed: int = 5, set_name: str = "calder") -> ZimFixture:
    """``calder_encyclopedia.zim`` (articles, images, a main page, redirects, a stylesheet) and
    ``questions/<set_name>.jsonl`` with the flags the picture questions show in ``questions/images/``."""
    from libzim.writer import Creator, Hint, Item, StringProvider  # native libzim, only for this fixture

    class _Item(Item):
        def __init__(self, path: str, title: str, mimetype: str, content: bytes, front: bool):
            super().__init__()
            self._p, self._t, self._m, self._c, self._f = path, title, mimetype, content, front

        def get_path(self) -> str:
            return self._p

        def get_title(self) -> str:
            return self._t

        def get_mimetype(self) -> str:
            return self._m

        def get_contentprovider(self) -> StringProvider:
            return StringProvider(self._c)

        def get_hints(self) -> dict:
            return {Hint.FRONT_ARTICLE: self._f, Hint.COMPRESS: self._m.startswith("text/")}

    rng = random.Random(seed)
    world = _zim_world(seed)
    regions, birds = world["regions"], world["birds"]
    pics: dict[str, bytes] = {}
    for r in regions:
        low = r["name"].lower()
        pics[f"I/flag_{low}.png"] = flag_png(r["field"], r["shape"], r["shape_colour"])
        pics[f"I/map_{low}.png"] = blob_png(rng, r["map_colour"])
        pics[f"I/view_{low}.png"] = blob_png(rng, "green", size=80)
    for b in birds:
        pics[f"I/bird_{b['colour']}.png"] = bird_png(b["colour"])
        pics[f"I/nest_{b['colour']}.png"] = blob_png(rng, "grey", size=48)
    for m in world["landmarks"]:
        pics[f"I/landmark_{m['name'].split()[0].lower()}.png"] = blob_png(rng, m["colour"], size=72)
    pics["I/site_logo.png"] = blob_png(random.Random(0), "blue", size=40)  # on every page: decorative
    pics["I/ext_link.png"] = icon_png(10, "blue")
    pics["I/speaker.png"] = icon_png(12, "black")
    articles = ([_region_article(r, birds) for r in regions] + [_capital_article(r) for r in regions[:4]]
                + [_bird_article(b, with_caption=i % 2 == 0) for i, b in enumerate(birds)]
                + [_landmark_article(m) for m in world["landmarks"]])
    root.mkdir(parents=True)
    with Creator(str(root / "calder_encyclopedia.zim")).config_indexing(False, "eng") as zim:
        zim.set_mainpath("A/Main_Page")
        links = "".join(f'<li><a href="{a.path.removeprefix("A/")}">{a.title}</a></li>' for a in articles)
        zim.add_item(_Item("A/Main_Page", "Main Page", "text/html",
                           _PAGE.format(title="Main Page", body=f"<ul>{links}</ul>").encode(), True))
        zim.add_item(_Item("-/style.css", "", "text/css", b"body{font-family:serif}", False))
        for path, data in pics.items():
            zim.add_item(_Item(path, "", "image/png", data, False))
        for a in articles:
            zim.add_item(_Item(a.path, a.title, "text/html", a.html.encode(), True))
        for r in regions[:3]:  # "Region of X" -> X: a redirect is no article
            zim.add_redirection(f"A/Region_of_{r['name']}", f"Region of {r['name']}", f"A/{r['name']}",
                                {Hint.FRONT_ARTICLE: False})
        for key, value in (("Title", "Calder Encyclopedia"), ("Language", "eng"), ("Creator", "mmrag tests"),
                           ("Publisher", "mmrag tests"), ("Date", "2025-01-01"),
                           ("Description", "Invented regions, birds and landmarks")):
            zim.add_metadata(key, value)
    qdir = root / "questions"
    (qdir / "images").mkdir(parents=True)
    questions = zim_questions(world, "images")
    for q in questions:
        if "image" in q:
            (qdir / q["image"]).write_bytes(pics[f"I/{Path(q['image']).name}"])
    (qdir / f"{set_name}.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    return ZimFixture(root, set_name, articles, questions, tiny_icons=2, logo_pages=len(articles))
