"""ImageQA: the trained CLIP scores candidate values (or candidate entities) against images."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mmrag.schema import Document, Evidence
from mmrag.toolagent.tools.common import NO_ANSWER, ImageEncoder, ToolAnswer, mentions, question_type

_ATTR_CUES: dict[str, list[tuple[str, str]]] = {
    "product": [(r"\blogo\b.*\b(colou?r)\b|\b(colou?r)\b.*\blogo\b", "logo_colour"),
                (r"\blogo\b", "logo_position"), (r"\b(shape|shaped)\b", "shape"),
                (r"\b(pattern|striped|dotted|checked|plain)\b", "pattern"),
                (r"\b(how many|units|copies|count)\b", "count"), (r"\b(colou?r|body|painted)\b", "colour")],
    "person": [(r"\b(hat|cap|headwear)\b", "hat"),
               (r"\b(glasses|eyewear|sunglasses|eyes)\b", "glasses"),
               (r"\bhair\b", "hair_colour"),
               (r"\b(clothes|clothing|shirt|wear|wearing|dress|outfit|jacket|colou?r)\b", "clothing_colour")],
    "place": [(r"\broof\b", "roof_colour"), (r"\bwindow", "windows"), (r"\btree", "trees"),
              (r"\b(day|night|time)\b", "time"), (r"\b(building|kind|type|structure)\b", "building")],
}


# Why ImageQA abstained when it had nothing to look at. The answer itself stays NO_ANSWER, the
# abstention every tool gives, so the handler's WebSearch fallback and the dialogue format the
# adapters were trained on hold on text-only corpora too.
NO_IMAGE = "no image is available for this question"


class ImageQA:
    """CLIP scores each candidate answer (attribute value, or candidate entity) against images.

    On a corpus without images (a user's text-only set) or for a question whose entities have
    none, it abstains (NO_ANSWER, note :data:`NO_IMAGE`) instead of scoring an empty pool.
    """

    name = "ImageQA"

    def __init__(self, documents: Sequence[Document], clip: ImageEncoder,
                 entity_kinds: dict[str, str], attributes: dict[str, dict[str, tuple[str, ...]]],
                 prompts: Callable[[str, str, str], list[str]],
                 load_image: Callable[[str], Any], entity_names: dict[str, str] | None = None,
                 groups: dict[str, list[str]] | None = None):
        """entity_kinds: name -> render kind; entity_names: id -> name; groups: owner -> members."""
        self._id_names = dict(entity_names or {})
        self.groups = {k: list(v) for k, v in (groups or {}).items()}
        self.kinds = {n: k for n, k in entity_kinds.items() if k in attributes}
        self.attributes, self.prompts, self.clip = attributes, prompts, clip
        self.images: dict[str, list[str]] = {}  # entity name (lower) -> image ids
        paths, ids, name_of_id = [], [], {}
        for d in documents:
            for im in d.images:
                name = self._name_of(im.entity_id, d)
                if name is None:
                    continue
                self.images.setdefault(name.lower(), []).append(im.id)
                paths.append(im.path)
                ids.append(im.id)
                name_of_id[im.id] = name
        self._row = {i: n for n, i in enumerate(ids)}
        self.emb = (np.asarray(clip.encode_images([load_image(p) for p in paths]), np.float32)
                    if paths else np.zeros((0, 1), np.float32))
        self._text_cache: dict[tuple[str, str, str], np.ndarray] = {}
        self._doc_entity = {d.entity_id: d.title for d in documents if d.entity_id}

    def _name_of(self, entity_id: str | None, doc: Document) -> str | None:
        """The name of the entity an image depicts (the page title when it is the page's entity)."""
        if entity_id is None:
            return None
        if entity_id == doc.entity_id:
            return doc.title
        return self._id_names.get(entity_id)

    def _text(self, kind: str, attr: str, value: str) -> np.ndarray:
        key = (kind, attr, value)
        if key not in self._text_cache:
            self._text_cache[key] = np.asarray(
                self.clip.encode_texts(self.prompts(kind, attr, value)), np.float32)
        return self._text_cache[key]

    def attribute(self, question: str, kind: str) -> str | None:
        """The visual attribute a question asks about, from its cue words."""
        q = question.lower()
        for pattern, attr in _ATTR_CUES.get(kind, []):
            if attr in self.attributes[kind] and re.search(pattern, q):
                return attr
        return None

    def value_scores(self, entity: str, kind: str, attr: str) -> dict[str, float]:
        """Mean over the entity's images of the best prompt similarity, per candidate value."""
        rows = [self._row[i] for i in self.images.get(entity.lower(), [])]
        if not rows:
            return {}
        img = self.emb[rows]
        return {v: float((img @ self._text(kind, attr, v).T).max(axis=1).mean())
                for v in self.attributes[kind][attr]}

    def _mentioned_values(self, question: str, kind: str) -> list[tuple[str, str]]:
        q = question.lower()
        out = []
        for attr, values in self.attributes[kind].items():
            for v in values:
                if v != "none" and re.search(r"(?<![\w])" + re.escape(v) + r"(?![\w])", q):
                    out.append((attr, v))
        return out

    def __call__(self, question: str) -> ToolAnswer:
        if not self._row:  # a text-only corpus: nothing to look at, so abstain (the handler falls back)
            return ToolAnswer(self.name, NO_ANSWER, note=NO_IMAGE)
        named = [n for n in mentions(question, self.kinds) if self.images.get(n.lower())]
        kinds = [self.kinds[n] for n in named]
        if len(named) == 1:
            ent, kind = named[0], kinds[0]
            attr = self.attribute(question, kind)
            mentioned = self._mentioned_values(question, kind)
            if question_type(question) == "yesno" and mentioned and " or " not in question.lower():
                attr, value = mentioned[-1]
                scores = self.value_scores(ent, kind, attr)
                if not scores:
                    return ToolAnswer(self.name, NO_ANSWER, note=NO_IMAGE)
                ans = "yes" if max(scores, key=scores.get) == value else "no"
                return ToolAnswer(self.name, ans, self._ev(ent), note=f"{attr}: {scores}")
            if attr is None:
                return ToolAnswer(self.name, NO_ANSWER, self._ev(ent), note="no visual attribute asked")
            scores = self.value_scores(ent, kind, attr)
            if not scores:
                return ToolAnswer(self.name, NO_ANSWER, note=NO_IMAGE)
            return ToolAnswer(self.name, max(scores, key=scores.get), self._ev(ent),
                              note=f"{ent}.{attr}")
        # Which of these (or: which <kind>) has <value>?  Score candidate entities.
        kind = kinds[0] if kinds else self._kind_in(question)
        if kind is None:
            return ToolAnswer(self.name, NO_ANSWER, note="no pictured entity in the question")
        mentioned = self._mentioned_values(question, kind)
        if not mentioned and re.search(r"\b(without|no)\b", question.lower()):
            cue = self.attribute(question, kind)
            mentioned = [(cue, "none")] if cue and "none" in self.attributes[kind][cue] else []
        if not mentioned:
            return ToolAnswer(self.name, NO_ANSWER, note="no visual value to look for")
        cue = self.attribute(question, kind)
        ql = question.lower()
        attr, value = max(mentioned, key=lambda av: (av[0] == cue, sum(
            part in ql for part in av[0].split("_") if part != "colour")))
        if re.search(r"\b(without|no)\b", ql) and "none" in self.attributes[kind][attr]:
            value = "none"
        owners = mentions(question, self.groups)
        pool = named or [n for n, k in self.kinds.items() if k == kind and self.images.get(n.lower())
                         and (not owners or n in self.groups[owners[0]])]
        probs = {}
        for ent in pool:
            s = self.value_scores(ent, kind, attr)
            if value not in s:
                continue
            z = np.exp((np.array(list(s.values())) - max(s.values())) * 100.0)
            probs[ent] = float(z[list(s).index(value)] / z.sum())
        if not probs:  # no pictured entity of this kind (among the named group's members)
            return ToolAnswer(self.name, NO_ANSWER, note=f"{NO_IMAGE} (no pictured {kind})")
        best = max(sorted(probs), key=lambda e: probs[e])
        if re.search(r"\b(are|were) the ones\b|\bwhich \w+ \w*s are\b", question.lower()):
            many = [e for e in sorted(probs, key=lambda e: -probs[e]) if probs[e] >= 0.5]
            return ToolAnswer(self.name, ", ".join(many or [best]), self._ev(best),
                              note=f"{attr}={value}, several")
        return ToolAnswer(self.name, best, self._ev(best), note=f"{attr}={value}")

    def _kind_in(self, question: str) -> str | None:
        q = question.lower()
        for kind, cue in (("product", r"\b(products?|device|model)\b"),
                          ("person", r"\b(person|people|employees?|staff|who)\b"),
                          ("place", r"\bplace|building|site|location|where\b")):
            if kind in self.attributes and re.search(cue, q):
                return kind
        return None

    def _ev(self, entity: str) -> list[Evidence]:
        return [Evidence(id=i, kind="image") for i in self.images.get(entity.lower(), [])[:3]]
