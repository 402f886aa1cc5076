"""Intent-referent binding Φ: (image, question) -> (information need, grounded referent, constraints).

The paper prompts a multimodal LLM. Offline, two real components do the two halves:

- **the image** enters through the trained CLIP: it is compared with one attribute description
  per known entity (``render.describe`` of the entity's visual attributes, never its name); the
  best-scoring description is what the agent is shown as the image, and its entity is the
  grounded referent;
- **the question** goes through spaCy: the deictic phrase ("this product", "the person in the
  image", "it") is found by its determiner and replaced by the referent to state the need;
  named entities, dates, numbers and prepositional modifiers that do not mention the referent
  become the constraints.

Its ceiling is measurable: the referent match rate against the gold entity.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mmrag.io import read_jsonl
from mmrag.models import registry
from mmrag.world import render

DEICTIC_DETS = {"this", "that", "these", "those"}
IMAGE_NOUNS = ("image", "picture", "photo", "photograph")
IMAGE_WORDS = tuple(f"in {d} {n}" for d in ("the", "this") for n in IMAGE_NOUNS) + (
    "shown", "pictured", "depicted")


@dataclass
class Intent:
    need: str
    referent: str
    constraints: str
    referent_id: str | None = None
    referent_score: float | None = None
    image_text: str | None = None  # the image as the agent sees it

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Candidate:
    """A known entity the image may show: its name and its generic attribute description."""

    id: str
    name: str
    description: str


def candidates_from_entities(entities: Sequence[dict[str, Any]],
                             describe: Callable[[str, dict[str, str], random.Random], str],
                             kinds: Sequence[str]) -> list[Candidate]:
    """One candidate per entity with visual attributes (world entities.jsonl rows)."""
    out = []
    for e in entities:
        if e.get("type") in kinds and e.get("attributes"):
            desc = describe(e["type"], dict(e["attributes"]), random.Random(0))
            out.append(Candidate(e["id"], e["name"], desc))
    return out


def deictic_span(doc: Any) -> tuple[int, int] | None:
    """Token span (start, end) of the phrase pointing at the image, or None."""
    for chunk in doc.noun_chunks:
        if chunk.root.lower_ in IMAGE_NOUNS:  # "this photo" is where, not what
            continue
        first = chunk[0].lower_
        tail = doc[chunk.end: chunk.end + 4].text.lower()
        if first in DEICTIC_DETS or (first == "the" and any(w in tail for w in IMAGE_WORDS)):
            end = chunk.end
            for w in IMAGE_WORDS:  # swallow "in the image" / "shown"
                if doc[end:].text.lower().startswith(w):
                    end += len(w.split())
                    break
            return chunk.start, end
    for tok in doc:
        if tok.lower_ in ("it", "its") and tok.pos_ == "PRON":
            return tok.i, tok.i + 1
    return None


def parse_question(nlp: Any, text: str, referent: str) -> tuple[str, str, str | None]:
    """(need, constraints, mentioned referent phrase) from the question's parse."""
    doc = nlp(text)
    span = deictic_span(doc)
    if span:
        a, b = span
        possessive = doc[b - 1].lower_ == "its"
        ref = referent + ("'s" if possessive else "")
        need = " ".join(x for x in (doc[:a].text, ref, doc[b:].text) if x).replace(" ?", "?")
        mentioned = doc[a:b].text
    else:
        need, mentioned = text, None
    cons = []
    for ent in doc.ents:
        if span and span[0] <= ent.start < span[1]:
            continue
        cons.append(f"{ent.label_.lower()}: {ent.text}")
    for tok in doc:
        if tok.dep_ == "prep" and (not span or not span[0] <= tok.i < span[1]):
            if tok.right_edge.i == tok.i:  # a bare preposition ("At which ...") states nothing
                continue
            phrase = doc[tok.i: tok.right_edge.i + 1].text
            if any(t.tag_ in ("WDT", "WP", "WRB") for t in doc[tok.i: tok.right_edge.i + 1]):
                continue
            if referent.lower() not in phrase.lower() and not any(
                    w in phrase.lower() for w in IMAGE_WORDS):
                cons.append(phrase)
    return need, "; ".join(dict.fromkeys(cons)) or "none", mentioned


class IntentBinder:
    """Φ with a CLIP encoder (ClipEncoder contract) and a spaCy pipeline."""

    def __init__(self, nlp: Any, clip: Any | None = None, candidates: Sequence[Candidate] = ()):
        self.nlp, self.clip, self.candidates = nlp, clip, list(candidates)
        self._T: np.ndarray | None = None
        if clip is not None and self.candidates:
            self._T = clip.encode_texts([c.description for c in self.candidates])

    def ground(self, images: Sequence[Any]) -> list[tuple[Candidate, float]]:
        """Best-scoring candidate description for each image (batched)."""
        if self.clip is None or self._T is None:
            raise ValueError("IntentBinder.ground needs a CLIP encoder and candidates; "
                             "build it with candidates_from_entities(...)")
        V = self.clip.encode_images(list(images))
        S = V @ self._T.T
        best = np.argmax(S, axis=1)
        return [(self.candidates[int(j)], float(S[i, j])) for i, j in enumerate(best)]

    def bind(self, question: str, image: Any | None = None,
             grounded: tuple[Candidate, float] | None = None) -> Intent:
        """Φ(image, question); ``grounded`` reuses a batched :meth:`ground` result."""
        if grounded is None and image is not None and self._T is not None:
            grounded = self.ground([image])[0]
        if grounded is not None:
            cand, score = grounded
            need, cons, _ = parse_question(self.nlp, question, cand.name)
            return Intent(need, cand.name, cons, cand.id, round(score, 4), cand.description)
        # no image: the referent is the question's own named entity or proper-noun chunk
        doc = self.nlp(question)
        names = {c.name.lower(): c for c in self.candidates}
        ref = next((e.text for e in doc.ents if e.text.lower() in names), None) or next(
            (e.text for e in doc.ents), None) or next(
            (c.text for c in doc.noun_chunks if c.root.pos_ == "PROPN"), "")
        need, cons, _ = parse_question(self.nlp, question, ref or "the subject")
        cand = names.get(ref.lower()) if ref else None
        return Intent(need, ref or "the subject", cons, cand.id if cand else None)


def referent_match_rate(intents: Sequence[Intent], gold: Sequence[str | None]) -> float:
    """Share of questions whose grounded referent is the gold entity."""
    pairs = [(i.referent_id, g) for i, g in zip(intents, gold) if g]
    return sum(a == b for a, b in pairs) / len(pairs) if pairs else 0.0


def resolve_image(corpus_dir: Path, image_path: str | None) -> Path | None:
    return (corpus_dir / image_path) if image_path else None


# --------------------------------------------------------------------------- binding a question set
class QuestionBinder:
    """Φ for questions of one corpus: images (paths relative to ``corpus_dir``) grounded in one
    CLIP batch, or, with ``oracle``, to their gold entity (the teacher's privileged view)."""

    def __init__(self, binder: IntentBinder, corpus_dir: str | Path):
        self.binder, self.corpus_dir = binder, Path(corpus_dir)
        self.by_id = {c.id: c for c in binder.candidates}

    @property
    def clip_on(self) -> bool:
        """Whether images are grounded through CLIP (else Φ binds from the question text only)."""
        return self.binder.clip is not None

    @property
    def candidates(self) -> list[Candidate]:
        return self.binder.candidates

    def bind(self, questions: Sequence[Any], oracle: bool = False) -> list[Intent]:
        """One Intent per question (``schema.Question``: text, image_path, gold_entity)."""
        grounded: list[tuple[Candidate, float] | None] = [None] * len(questions)
        with_img = [i for i, q in enumerate(questions) if q.image_path]
        if oracle:
            for i in with_img:
                if questions[i].gold_entity in self.by_id:
                    grounded[i] = (self.by_id[questions[i].gold_entity], 1.0)
        elif self.binder.clip is not None and with_img:
            images = [self.corpus_dir / questions[i].image_path for i in with_img]
            for i, g in zip(with_img, self.binder.ground(images)):
                grounded[i] = g
        return [self.binder.bind(q.text, grounded=g) for q, g in zip(questions, grounded)]


def world_candidates(entities: Sequence[dict[str, Any]]) -> list[Candidate]:
    """Candidates of world entities, described by the world renderer (no dropped attributes)."""
    return candidates_from_entities(list(entities), lambda k, a, r: render.describe(k, a, r, drop=0.0),
                                    kinds=list(render.ATTRIBUTES))


def load_binder(corpus_dir: str | Path, *, spacy: str, clip_path: str, allow_network: bool,
                images: bool, log: Callable[[str], None] = print) -> QuestionBinder:
    """Φ for a corpus: spaCy always; CLIP and the entity candidates only when ``images`` (some
    question has an image) and the corpus has entities.jsonl. A CLIP that cannot be loaded
    (ModelError) is noted and Φ binds from the question text only (the candidates still name
    referents)."""
    corpus_dir = Path(corpus_dir)
    nlp = registry.load_spacy(spacy)
    clip, candidates = None, []
    ents_file = corpus_dir / "entities.jsonl"
    entities = {e["id"]: e for e in read_jsonl(ents_file)} if ents_file.exists() else {}
    if images and entities:
        from mmrag.models.clip import load_clip  # heavy: mmrag.models.clip imports torch at its top

        candidates = world_candidates(list(entities.values()))
        try:
            clip = load_clip(clip_path, allow_network=allow_network)
        except registry.ModelError as e:
            log(f"note: no usable CLIP ({e}); Φ binds from the question text only")
    return QuestionBinder(IntentBinder(nlp, clip, candidates), corpus_dir)


def bind_questions(questions: Sequence[Any], corpus_dir: str | Path, *, spacy: str, clip_path: str,
                   allow_network: bool, oracle: bool = False) -> list[Intent]:
    """Φ for a batch of questions of one corpus (see :func:`load_binder`, :class:`QuestionBinder`)."""
    binder = load_binder(corpus_dir, spacy=spacy, clip_path=clip_path, allow_network=allow_network,
                         images=any(q.image_path for q in questions))
    return binder.bind(questions, oracle=oracle)
