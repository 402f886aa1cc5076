"""Glue the BRIT stages (``mmrag.stages.brit_graph``, ``mmrag.stages.brit_linking``), the BRIT
System and the benchmark share: load encoders and graphs, run systems over a question set, score.

Recall ratio (paper Table 2): a question counts as recalled when one of its gold sections (if
it needs text) and one of its gold images (if it needs an image; the world lists every picture
of the entity as alternatives) are among the retrieved items: images, and the sections the
retrieved triplets or chunks came from (:func:`mmrag.brit.evaluation.covers`). QA accuracy
(Table 1): the reader's choice equals the gold answer.

A user's folder corpus has free-text questions with an answer but no choices and no gold
evidence: its questions are still retrieved and answered (``reader.answer_open``) and scored by
exact match, token F1 and whether the gold answer occurs in the retrieved context
(:func:`answer_row`, which also gives the accuracy of multiple-choice questions of a kind
outside Table 1's, such as a folder's photo questions); the figures that need gold evidence or
choices are not applicable there (NaN in the tables, ``None`` in metrics, with the reason
printed by the stage).
"""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from mmrag.brit import linking
from mmrag.brit.baselines import FlatRetriever, chunk_sections
from mmrag.brit.evaluation import covers  # noqa: F401  (re-exported for notebooks)
from mmrag.brit.graph import Encoders, UnifiedGraph, sentence_transformer_fn
from mmrag.brit.retrieval import BritRetriever, to_trace
from mmrag.evaluate.metrics import exact_match, golds, normalize, token_f1
from mmrag.io import read_jsonl
from mmrag.schema import Document, Question, Trace, load_documents

# Table 2's rows, in the paper's order
COMBINATIONS: list[tuple[str, ...]] = [(), ("CA",), ("LP",), ("LS",), ("SI",), ("CA", "LP"),
                                       ("CA", "LS"), ("CA", "SI"), ("LP", "SI"), ("LS", "SI"),
                                       ("CA", "LP", "SI"), ("CA", "LS", "SI")]
CROSS_KINDS = ("Text-Image", "Image-Text")
KINDS = ("Image-Image", "Text-Image", "Image-Text")


def label(linkers: Iterable[str]) -> str:
    """'CA+LS+SI' (or 'no linking')."""
    linkers = tuple(linkers)
    return "+".join(linkers) if linkers else "no linking"


def make_extractor(kind: str, nlp: Any, arguments: str, llm: Any = None) -> Any:
    """The triplet extractor params ask for."""
    from mmrag.brit.triplets import LLMTriplets, SpacyTriplets

    if kind == "spacy":
        return SpacyTriplets(nlp, arguments=arguments)
    if llm is None:
        raise ValueError("extractor 'llm' needs an LLM (models/llm.py); none was given")
    return LLMTriplets(llm, nlp=nlp)


def memo_texts(fn: Callable[[list[str]], np.ndarray]) -> Callable[[list[str]], np.ndarray]:
    """An encode function that never encodes the same string twice (queries repeat per system)."""
    cache: dict[str, np.ndarray] = {}

    def encode(texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if missing:
            for t, v in zip(missing, fn(missing)):
                cache[t] = v
        if not texts:
            return fn([])
        return np.stack([cache[t] for t in texts])
    return encode


class MemoClip:
    """A ClipEncoder whose text and image-path embeddings are computed once."""

    def __init__(self, clip: Any):
        self.clip = clip
        self.encode_texts = memo_texts(clip.encode_texts)
        self._paths = memo_texts(lambda paths: clip.encode_images(list(paths)))

    @property
    def dim(self) -> int:
        """Embedding width (a text-only corpus sizes its empty image matrix with it)."""
        return int(self.clip.dim)

    def encode_images(self, images: list[Any]) -> np.ndarray:
        if all(isinstance(i, (str, Path)) for i in images):
            return self._paths([str(i) for i in images])
        return self.clip.encode_images(images)


def encoders_for(text_model: Any, clip: Any, root: Path) -> Encoders:
    """Memoised encoders from a sentence-transformers model and a ClipEncoder."""
    return Encoders(memo_texts(sentence_transformer_fn(text_model)), MemoClip(clip), Path(root))


def load_model_parts(spacy: str, text_encoder: str, clip: str, allow_network: bool) -> tuple[Any, Any, Any]:
    """(spaCy pipeline, sentence-transformers text model, CLIP encoder), loaded in this order."""
    from mmrag.models import registry
    from mmrag.models.clip import load_clip

    nlp = registry.load_spacy(spacy)
    text_model = registry.load_text_encoder(text_encoder, allow_network=allow_network, device="cpu")
    return nlp, text_model, load_clip(clip, allow_network=allow_network)


def load_models(spacy: str, text_encoder: str, clip: str, corpus_dir: Path, allow_network: bool
                ) -> tuple[Any, Encoders]:
    """(spaCy pipeline, memoised text and CLIP encoders rooted at the corpus): what a graph is
    built with and what its queries are encoded with."""
    nlp, text_model, clip_model = load_model_parts(spacy, text_encoder, clip, allow_network)
    return nlp, encoders_for(text_model, clip_model, corpus_dir)


def load_graph(folder: Path, enc: Encoders, extractor: Any, si_top: int) -> UnifiedGraph:
    """A graph ``brit_graph`` saved (its entries replayed over its embedding caches)."""
    folder = Path(folder)
    if not (folder / "entries.jsonl").exists():
        raise FileNotFoundError(f"{folder} has no saved graph: run `dvc repro brit_graph`")
    return UnifiedGraph.load(folder, enc, extractor, si_top)


def build(documents: list[Document], enc: Encoders, extractor: Any, si_top: int) -> UnifiedGraph:
    """A full build (every page added in order)."""
    g = UnifiedGraph(enc, extractor, si_top=si_top)
    if hasattr(extractor, "prefetch"):
        extractor.prefetch([s.text for d in documents for s in d.sections])
    g.add_documents(documents)
    return g


@dataclass
class Systems:
    """Everything needed to run BRIT variants and baselines on one corpus."""

    graph: UnifiedGraph
    documents: list[Document]
    entities: Callable[[str], list[str]]
    threshold: float
    top_k: int
    edge_cost: float
    max_linked_triplets: int
    baseline_k: int  # flat baselines: at most this many text chunks ...
    baseline_images: int  # ... plus this many images ...
    baseline_words: int | None  # ... within this many text words (None: no budget)

    def __post_init__(self) -> None:
        self.captions = {im.id: im.caption for d in self.documents for im in d.images}
        self.image_paths = {im.id: im.path for d in self.documents for im in d.images}
        self.sections = {s.id: s.text for d in self.documents for s in d.sections}
        self._views: dict[tuple[str, ...], Any] = {}
        self._flat: dict[str, FlatRetriever] = {}

    def prime(self, questions: list[Question]) -> None:
        """Batch-encode everything retrieval and reading will ask for (the encoders memoise).

        One batched call per encoder instead of thousands of small ones: the same strings
        (questions, their entities, triplet sentences, options) recur across every system.
        """
        enc = self.graph.enc
        ents = {q.text: self.entities(q.text) for q in questions}
        self.entities = _memo_entities(self.entities, ents)
        texts = [q.text for q in questions] + [e for v in ents.values() for e in v]
        texts += [f"{q.text} {c}" for q in questions for c in q.choices]
        v = self.graph.view(linking.LINKERS)
        texts += [t.sentence() for ts in v.edge_triplets for t in ts] + list(v.names)
        texts += [c.text for c in chunk_sections(self.documents)] + list(self.sections.values())
        enc.text(list(dict.fromkeys(texts)))
        enc.clip.encode_texts(list(dict.fromkeys([q.text for q in questions] +
                                                 [c for q in questions for c in q.choices])))
        paths = sorted({q.image_path for q in questions if q.image_path})
        if paths:
            enc.clip.encode_images([enc.root / p for p in paths])

    def brit(self, linkers: Iterable[str], threshold: float | None = None, top_k: int | None = None,
             edge_cost: float | None = None) -> BritRetriever:
        """BRIT under a linker set; a knob given here overrides the systems' (sweeps)."""
        key = linking.check_linkers(linkers)
        if key not in self._views:
            self._views[key] = self.graph.view(key)
        enc = self.graph.enc
        return BritRetriever(self._views[key], enc.text, enc.clip, enc.root, self.entities,
                             threshold=self.threshold if threshold is None else threshold,
                             top_k=self.top_k if top_k is None else top_k,
                             edge_cost=self.edge_cost if edge_cost is None else edge_cost,
                             max_linked_triplets=self.max_linked_triplets)

    def baseline(self, mode: str) -> FlatRetriever:
        if mode not in self._flat:
            enc = self.graph.enc
            ids = sorted(self.graph.image_emb)
            # a text-only corpus has no image vectors: an empty (0, d) matrix, not a crash
            images = (np.stack([self.graph.image_emb[i] for i in ids]) if ids
                      else np.zeros((0, enc.clip.dim), np.float32))
            self._flat[mode] = FlatRetriever(
                chunk_sections(self.documents), ids, images,
                enc.clip, enc.root, mode=mode, k=self.baseline_k, n_images=self.baseline_images,
                words=self.baseline_words, text_encode=enc.text)
        return self._flat[mode]


def systems_for(graph: UnifiedGraph, documents: list[Document], extractor: Any, cfg: Any) -> Systems:
    """Systems over a graph with the retrieval knobs of a ``brit_linking`` params section."""
    return Systems(graph, documents, extractor.entities, cfg.threshold, cfg.top_k, cfg.edge_cost,
                   cfg.max_linked_triplets, cfg.baseline_k, cfg.baseline_images, cfg.baseline_words)


def open_systems(graph_cfg: Any, models: Any, cfg: Any, allow_network: bool, data: Path) -> tuple[Systems, Any]:
    """(Systems over the graph ``brit_graph`` saved for its corpus, query-entity extractor), from
    the ``brit_graph`` and ``brit_linking`` params sections; only the graph's pages are kept."""
    corpus_dir = Path(data) / graph_cfg.corpus
    nlp, enc = load_models(models.spacy, models.text_encoder, models.clip, corpus_dir, allow_network)
    extractor = make_extractor("spacy", nlp, graph_cfg.arguments)  # query entities (paper: 1-shot LLM)
    graph = load_graph(Path(data) / "brit_graph" / graph_cfg.corpus, enc, extractor, graph_cfg.si_top)
    docs = [d for d in load_documents(corpus_dir) if d.id in graph.docs]
    return systems_for(graph, docs, extractor, cfg), extractor


def image_records(corpus_dir: Path) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """(captions, attributes) by image id of a corpus's ``images.jsonl``, held-out query pictures
    included (({}, {}) without one)."""
    path = Path(corpus_dir) / "images.jsonl"
    if not path.exists():
        return {}, {}
    rows = read_jsonl(path)
    return ({r["id"]: r.get("caption") or "" for r in rows},
            {r["id"]: dict(r.get("attributes") or {}) for r in rows})


def similarity_reader(cfg: Any, systems: Systems, corpus_dir: Path) -> Any:
    """The cheap offline reader (text-encoder and CLIP similarity of each option to the context)."""
    from mmrag.brit.reader import SimilarityReader

    enc = systems.graph.enc
    return SimilarityReader(enc.text, enc.clip, corpus_dir, cfg.reader_w_text, cfg.reader_w_image,
                            image_emb=systems.graph.image_emb, image_paths=systems.image_paths,
                            captions=systems.captions)


def make_reader(cfg: Any, systems: Systems, corpus_dir: Path, allow_network: bool,
                inference: Any = None, device: str = "cpu") -> Any:
    """The reader a ``brit_linking`` params section asks for: a ladder LLM through the generation
    service (``llm``; needs the params ``inference`` section), the offline similarity reader, or an
    OpenAI-compatible LMM (paper profile)."""
    if cfg.reader in ("llm", "lmm"):
        from mmrag.models.generation import engine_settings, load_chat

        if inference is None:
            raise ValueError(f"reader: {cfg.reader} needs the params inference section (engine settings)")
        settings = engine_settings(inference)
    if cfg.reader == "llm":
        from mmrag.brit.reader import LLMReader, image_descriptions

        llm = load_chat(cfg.reader_llm, engine=cfg.engine, settings=settings, allow_network=allow_network,
                        device=device, base_url=cfg.lmm_base_url or None)
        captions, attributes = image_records(corpus_dir)
        return LLMReader(llm, image_descriptions({**captions, **systems.captions}, attributes))
    if cfg.reader == "lmm":  # an OpenAI-compatible LMM server that sees the pictures (paper profile)
        from mmrag.brit.reader import LMMReader

        lmm = load_chat(cfg.lmm_model, engine="openai", settings=settings, allow_network=allow_network,
                        device=device, base_url=cfg.lmm_base_url)
        return LMMReader(lmm, systems.captions, systems.image_paths, corpus_dir)
    return similarity_reader(cfg, systems, corpus_dir)


def _memo_entities(fn: Callable[[str], list[str]], known: dict[str, list[str]]
                   ) -> Callable[[str], list[str]]:
    """Query-entity extraction that remembers (spaCy is the slowest step of a query)."""
    def entities(text: str) -> list[str]:
        if text not in known:
            known[text] = fn(text)
        return list(known[text])
    return entities


def answer_in_context(answer_golds: Iterable[str], texts: Iterable[str]) -> bool:
    """Whether a gold answer (normalised, as whole words) occurs in the retrieved context."""
    ctx = f" {normalize(' '.join(texts))} "
    return any(g and f" {g} " in ctx for g in (normalize(a) for a in answer_golds))


def run(retriever: Any, questions: list[Question], captions: dict[str, str], system: str,
        reader: Any = None, sections: set[str] | frozenset[str] = frozenset()
        ) -> tuple[list[dict[str, Any]], list[Trace]]:
    """Retrieve (and answer) every question; one row of scores and one Trace each.

    Every question is retrieved first, then all are read at once (:func:`mmrag.brit.reader.read_all`:
    an LLM reader gets one batched call); multiple-choice questions are read with the reader's
    ``answer``, open ones (no choices) with ``answer_open`` and scored by exact match, token F1 and
    answer-in-context. A question's ``seconds`` is its retrieval plus an equal share of the reading.
    """
    from mmrag.brit.reader import read_all

    got, secs = [], []
    for q in questions:
        t0 = time.perf_counter()
        got.append(retriever.retrieve(q.text, q.image_path))
        secs.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    answers = read_all(reader, [(q.text, list(q.choices), list(r.texts), list(r.images), q.image_id)
                                for q, r in zip(questions, got)])
    read_share = (time.perf_counter() - t0) / max(len(questions), 1)
    rows, traces = [], []
    for q, r, answer, sec in zip(questions, got, answers, secs):
        sec += read_share
        row = {"question_id": q.id, "kind": q.kind, "source": q.meta.get("source", ""),
               "split": q.split, "recalled": covers(r.evidence_ids(), q.gold_evidence, sections),
               "words": r.words(captions), "images": len(r.images),
               "correct": bool(answer) and answer == q.answer,
               "pcst_seconds": r.pcst_seconds, "seconds": sec, "choices": bool(q.choices),
               "answered": bool(answer)}
        if not q.choices:
            gold = golds(q)
            context = list(r.texts) + [captions.get(i, "") for i in r.images]
            row.update({"open": True,
                        "em": exact_match(answer, gold) if gold else None,
                        "f1": token_f1(answer, gold) if gold else None,
                        "answer_in_context": answer_in_context(gold, context) if gold else None})
        rows.append(row)
        traces.append(to_trace(q.id, system, q.text, r, captions, answer=answer, seconds=sec,
                               meta={"kind": q.kind}))
    return rows, traces


def recall_row(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Table 2 figures of one system: recall per cross-modal kind and overall, words, images
    (over the cross-modal questions, as the paper's), and recall on the simple Image-Image
    questions beside them (not in "overall")."""
    def mean(xs: list[float]) -> float:
        return round(float(np.mean(xs)), 4) if xs else float("nan")

    cross = [r for r in rows if r["kind"] in CROSS_KINDS]
    out = {k: mean([r["recalled"] for r in cross if r["kind"] == k]) for k in CROSS_KINDS}
    out["overall"] = mean([r["recalled"] for r in cross])
    out["Image-Image"] = mean([r["recalled"] for r in rows if r["kind"] == "Image-Image"])
    for src in ("caption", "section"):
        out[f"overall_{src}"] = mean([r["recalled"] for r in cross if r["source"] == src])
    out["words"] = round(float(np.mean([r["words"] for r in cross])), 1) if cross else float("nan")
    out["images"] = round(float(np.mean([r["images"] for r in cross])), 2) if cross else float("nan")
    return out


def answer_row(rows: list[dict[str, Any]]) -> dict[str, float | int | None]:
    """Answers of one system over every question, whatever its kind: how many were answered;
    accuracy over the multiple-choice ones; mean exact match, token F1 and answer-in-context
    over the open ones with a gold answer (None where no question qualifies)."""
    choice = [r for r in rows if r.get("choices")]
    opened = [r for r in rows if r.get("open")]
    scored = [r for r in opened if r.get("em") is not None]

    def mean(xs: list[Any], key: str) -> float | None:
        return round(float(np.mean([float(r[key]) for r in xs])), 4) if xs else None

    return {"questions": len(rows), "answered": sum(bool(r.get("answered")) for r in rows),
            "choice_questions": len(choice), "choice_accuracy": mean(choice, "correct"),
            "open_questions": len(opened), "em": mean(scored, "em"), "f1": mean(scored, "f1"),
            "answer_in_context": mean(scored, "answer_in_context")}


def has_gold_evidence(questions: Iterable[Question], kinds: Iterable[str] | None = None) -> bool:
    """Whether some question (of ``kinds``, if given) has gold evidence to score recall against."""
    kinds = set(kinds) if kinds is not None else None
    return any(q.gold_evidence and (kinds is None or q.kind in kinds) for q in questions)


def split_questions(questions: list[Question], dev_share: float, seed: int,
                    max_questions: int | None) -> tuple[list[Question], list[Question]]:
    """Seeded (dev, test) split; dev is only for threshold calibration, which needs gold
    evidence, so a question set without any gold evidence is all test (dev empty)."""
    rng = random.Random(seed)
    order = sorted(questions, key=lambda q: q.id)
    rng.shuffle(order)
    n_dev = int(round(dev_share * len(order))) if has_gold_evidence(order) else 0
    dev, test = order[:n_dev], order[n_dev:]
    if max_questions:  # a random (seeded) subset keeps every question type
        test = test[:max_questions]
        dev = dev[: max(max_questions // 4, 8)]
    return dev, sorted(test, key=lambda q: q.id)


def balanced_subset(questions: list[Question], n: int | None, seed: int) -> list[Question]:
    """Up to ``n`` questions, as even across kinds as they allow (seeded; None: all), by id."""
    if not n or n >= len(questions):
        return list(questions)
    rng = random.Random(f"{seed}:qa")
    by_kind: dict[str, list[Question]] = {}
    for q in sorted(questions, key=lambda q: q.id):
        by_kind.setdefault(q.kind, []).append(q)
    for qs in by_kind.values():
        rng.shuffle(qs)
    out: list[Question] = []
    while len(out) < n:
        for kind in sorted(by_kind):
            if by_kind[kind] and len(out) < n:
                out.append(by_kind[kind].pop())
    return sorted(out, key=lambda q: q.id)


def nan_to_none(obj: Any) -> Any:
    """NaN floats (not applicable figures) as None, so metrics.json stays valid JSON."""
    if isinstance(obj, dict):
        return {k: nan_to_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [nan_to_none(v) for v in obj]
    if isinstance(obj, float) and obj != obj:
        return None
    return obj


def read_gold(corpus_dir: Path) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]] | None]:
    """(entities, facts) rows of a corpus's gold files (``entities.jsonl``, ``facts.jsonl``);
    None for a file the corpus lacks (a user's folder has neither, the generated world both)."""
    corpus_dir = Path(corpus_dir)
    if not (corpus_dir / "entities.jsonl").exists():
        return None, None
    entities = read_jsonl(corpus_dir / "entities.jsonl")
    facts = read_jsonl(corpus_dir / "facts.jsonl") if (corpus_dir / "facts.jsonl").exists() else None
    return entities, facts


def extraction_scores(triplets: list[Any], entities: list[dict[str, Any]] | None,
                      facts: list[dict[str, Any]] | None, corpus_name: str
                      ) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str | None]:
    """(entity-pair scores, per-section fact scores, why not) of extracted triplets against a
    corpus's gold (:func:`read_gold`): entity rows (and fact rows) where the corpus has them;
    without gold entities both scores are None, with the reason."""
    from mmrag.brit.evaluation import relation_scores, triplet_scores

    if entities is None:
        return None, None, (f"{corpus_name} has no gold entities (entities.jsonl): the "
                            "extractor's precision/recall is not applicable")
    ie = relation_scores(triplets, entities)
    if facts is None:
        return ie, None, f"{corpus_name} has no facts.jsonl: per-section scores not applicable"
    names = {e["id"]: e["name"] for e in entities}
    return ie, triplet_scores(triplets, facts, names), None


def accuracy_row(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Table 1 figures of one system: accuracy per kind and their average."""
    out = {}
    for k in KINDS:
        xs = [r["correct"] for r in rows if r["kind"] == k]
        out[k] = round(float(np.mean(xs)), 4) if xs else float("nan")
    vals = [v for v in out.values() if v == v]
    out["avg"] = round(float(np.mean(vals)), 4) if vals else float("nan")
    return out


def ceiling(reader: Any, questions: list[Question], sections: dict[str, str],
            max_images: int | None = None) -> list[dict[str, Any]]:
    """The reader handed the gold evidence (gold sections' text, gold images, at most
    ``max_images`` of them: the world lists every picture of an entity as alternatives): its
    ceiling. One batched read (:func:`mmrag.brit.reader.read_all`)."""
    from mmrag.brit.reader import read_all

    items, kinds = [], []
    for q in questions:
        if not q.choices:
            continue
        texts = [sections[e] for e in q.gold_evidence if e in sections]
        images = [e for e in q.gold_evidence if e not in sections][:max_images]
        items.append((q.text, list(q.choices), texts, images, q.image_id))
        kinds.append((q.kind, q.answer))
    try:
        answers = read_all(reader, items)
    except KeyError:  # a gold image the reader cannot see (no embedding, no path)
        answers = []
        for it in items:
            try:
                answers.append(read_all(reader, [it])[0])
            except KeyError:
                answers.append(None)
    return [{"kind": k, "correct": a == ans} for (k, ans), a in zip(kinds, answers) if a is not None]


def calibrate(systems: Systems, linkers: Iterable[str], dev: list[Question], grid: Iterable[float]
              ) -> list[dict[str, float]]:
    """Dev recall and retrieved words per threshold (pick: best recall, then fewest words)."""
    out = []
    for th in grid:
        rows, _ = run(systems.brit(linkers, threshold=th), dev, systems.captions, "calib",
                      sections=set(systems.sections))
        rr = recall_row(rows)
        out.append({"threshold": th, "recall": rr["overall"], "words": rr["words"]})
    return out


def knob_sweep(systems: Systems, linkers: Iterable[str], dev: list[Question],
               knobs: dict[str, Iterable[float]]) -> list[dict[str, Any]]:
    """One-at-a-time sweep of the paper's retrieval knobs (``threshold``, PCST ``top_k``,
    ``edge_cost`` Ce) around the systems' values: dev recall (cross-modal; every question with
    gold evidence where none is cross-modal, as on a text corpus), retrieved words and images,
    and how many disjoint graphs the threshold kept, per value."""
    linkers = tuple(linkers)
    dev = [q for q in dev if q.gold_evidence]
    out = []
    for knob, values in knobs.items():
        if knob not in ("threshold", "top_k", "edge_cost"):
            raise ValueError(f"knob {knob!r}: choose threshold, top_k or edge_cost")
        for value in values:
            retriever = systems.brit(linkers, **{knob: value})
            kept = []
            rows = []
            for q in dev:
                r = retriever.retrieve(q.text, q.image_path)
                kept.append(r.kept_components)
                rows.append({"kind": q.kind, "source": q.meta.get("source", ""),
                             "recalled": covers(r.evidence_ids(), q.gold_evidence, set(systems.sections)),
                             "words": r.words(systems.captions), "images": len(r.images)})
            rr = recall_row(rows)
            if rr["overall"] != rr["overall"]:  # no cross-modal question (a text corpus): every one
                rr = {"overall": round(float(np.mean([r["recalled"] for r in rows])), 4) if rows else float("nan"),
                      "words": round(float(np.mean([r["words"] for r in rows])), 1) if rows else float("nan"),
                      "images": round(float(np.mean([r["images"] for r in rows])), 2) if rows else float("nan")}
            out.append({"knob": knob, "value": value, "recall": rr["overall"], "words": rr["words"],
                        "images": rr["images"],
                        "kept_graphs": round(float(np.mean(kept)), 2) if kept else float("nan")})
    return out


def best_threshold(sweep: list[dict[str, float]]) -> float:
    """Highest recall; ties go to fewer words, then the higher threshold."""
    ok = [s for s in sweep if s["recall"] == s["recall"]]
    if not ok:
        raise ValueError("calibration: no dev question with cross-modal gold evidence")
    return max(ok, key=lambda s: (s["recall"], -s["words"], s["threshold"]))["threshold"]


def all_combinations() -> list[tuple[str, ...]]:
    """Every subset of the four linkers (for exploration beyond the paper's rows)."""
    return [c for n in range(5) for c in itertools.combinations(linking.LINKERS, n)]
