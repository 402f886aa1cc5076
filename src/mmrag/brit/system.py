"""BRIT as a :class:`mmrag.systems.System`: retrieve over the unified graph, read, trace.

A :class:`BritSystem` is a retriever (BRIT's :class:`~mmrag.brit.retrieval.BritRetriever` under
one linker set, or one of the flat baselines it is compared with, which return the same
``Retrieved``), an optional reader and the corpus's captions and section ids. ``answer`` gives the
shared traces; ``run`` also gives the per-question score rows the ``brit_linking`` stage tabulates
(the stage runs every system through ``run``, so its traces are this System's).

:class:`Systems` holds what every variant and baseline over one corpus shares (the graph, its
pages, the query-entity extractor, the retrieval knobs of params); :func:`open_systems` opens it
over the graph ``brit_graph`` saved, :func:`make_reader` builds the reader params ask for.

    system = BritSystem.load(params)            # the saved graph, params' linkers and reader
    traces = system.answer(questions)
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mmrag import io
from mmrag.brit import linking
from mmrag.brit.baselines import FlatRetriever, chunk_sections
from mmrag.brit.encoders import load_models
from mmrag.brit.evaluation import answer_in_context, covers
from mmrag.brit.graph import UnifiedGraph, load_graph
from mmrag.brit.reader import LLMReader, LMMReader, SimilarityReader, image_descriptions, read_all
from mmrag.brit.retrieval import BritRetriever, to_trace
from mmrag.brit.triplets import make_extractor
from mmrag.evaluate.metrics import exact_match, golds, token_f1
from mmrag.models import generation
from mmrag.schema import Document, Question, Trace, load_documents


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
             edge_cost: float | None = None, text_form: str = "surface") -> BritRetriever:
        """BRIT under a linker set; a knob given here overrides the systems' (sweeps); ``text_form``:
        what the reader gets of a retrieved triplet (:data:`mmrag.brit.retrieval.TEXT_FORMS`)."""
        key = linking.check_linkers(linkers)
        if key not in self._views:
            self._views[key] = self.graph.view(key)
        enc = self.graph.enc
        return BritRetriever(self._views[key], enc.text, enc.clip, enc.root, self.entities,
                             threshold=self.threshold if threshold is None else threshold,
                             top_k=self.top_k if top_k is None else top_k,
                             edge_cost=self.edge_cost if edge_cost is None else edge_cost,
                             max_linked_triplets=self.max_linked_triplets, text_form=text_form,
                             section_texts=self.sections)

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


def _memo_entities(fn: Callable[[str], list[str]], known: dict[str, list[str]]
                   ) -> Callable[[str], list[str]]:
    """Query-entity extraction that remembers (spaCy is the slowest step of a query)."""
    def entities(text: str) -> list[str]:
        if text not in known:
            known[text] = fn(text)
        return list(known[text])
    return entities


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
    rows = io.read_jsonl(path)
    return ({r["id"]: r.get("caption") or "" for r in rows},
            {r["id"]: dict(r.get("attributes") or {}) for r in rows})


def similarity_reader(cfg: Any, systems: Systems, corpus_dir: Path) -> SimilarityReader:
    """The cheap offline reader (text-encoder and CLIP similarity of each option to the context)."""
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
        if inference is None:
            raise ValueError(f"reader: {cfg.reader} needs the params inference section (engine settings)")
        settings = generation.engine_settings(inference)
    if cfg.reader == "llm":
        llm = generation.load_chat(cfg.reader_llm, engine=cfg.engine, settings=settings,
                                   allow_network=allow_network, device=device, base_url=cfg.lmm_base_url or None)
        captions, attributes = image_records(corpus_dir)
        return LLMReader(llm, image_descriptions({**captions, **systems.captions}, attributes))
    if cfg.reader == "lmm":  # an OpenAI-compatible LMM server that sees the pictures (paper profile)
        lmm = generation.load_chat(cfg.lmm_model, engine="openai", settings=settings, allow_network=allow_network,
                                   device=device, base_url=cfg.lmm_base_url)
        return LMMReader(lmm, systems.captions, systems.image_paths, corpus_dir)
    return similarity_reader(cfg, systems, corpus_dir)


@dataclass
class BritSystem:
    """One retriever (and reader) over one corpus's graph, answering questions with traces."""

    retriever: Any  # anything with retrieve(text, image_path) -> Retrieved
    reader: Any | None  # None: retrieve only (traces without answers)
    captions: dict[str, str]  # image id -> caption (images travel with their captions)
    sections: set[str]  # section ids: what recall counts as text evidence
    name: str = "brit"

    @classmethod
    def graph(cls, systems: Systems, linkers: Iterable[str], name: str,
              reader: Any | None = None, threshold: float | None = None,
              text_form: str = "surface") -> BritSystem:
        """BRIT under a linker set (``threshold``: the graph filter's, default the systems';
        ``text_form``: what the reader gets of a triplet, default its surface form)."""
        return cls(systems.brit(linkers, threshold=threshold, text_form=text_form), reader, systems.captions,
                   set(systems.sections), name)

    @classmethod
    def flat(cls, systems: Systems, mode: str, name: str, reader: Any | None = None) -> BritSystem:
        """A flat top-k baseline over the same corpus (``mode``: clip | dual)."""
        return cls(systems.baseline(mode), reader, systems.captions, set(systems.sections), name)

    @classmethod
    def load(cls, params: Any, linkers: Iterable[str] | None = None, name: str = "brit") -> BritSystem:
        """BRIT over the graph ``brit_graph`` saved, with the linkers (default: params'
        ``brit_linking.linking``) and reader params ask for; loads the encoders."""
        systems, _ = open_systems(params.brit_graph, params.models, params.brit_linking,
                                  params.base.allow_network, io.DATA)
        reader = make_reader(params.brit_linking, systems, io.DATA / params.brit_graph.corpus,
                             params.base.allow_network, params.inference, params.base.device)
        return cls.graph(systems, params.brit_linking.linking if linkers is None else linkers, name, reader)

    def run(self, questions: Sequence[Question]) -> tuple[list[dict[str, Any]], list[Trace]]:
        """(score row, trace) per question: recall, words, correctness, latency; the shared Trace.

        Every question is retrieved first, then all are read at once (:func:`mmrag.brit.reader.read_all`:
        an LLM reader gets one batched call); multiple-choice questions are read with the reader's
        ``answer``, open ones (no choices) with ``answer_open`` and scored by exact match, token F1 and
        answer-in-context. A question's ``seconds`` is its retrieval plus an equal share of the reading.
        """
        questions = list(questions)
        got, secs = [], []
        for q in questions:
            t0 = time.perf_counter()
            got.append(self.retriever.retrieve(q.text, q.image_path))
            secs.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        answers = read_all(self.reader, [(q.text, list(q.choices), list(r.texts), list(r.images), q.image_id)
                                         for q, r in zip(questions, got)])
        read_share = (time.perf_counter() - t0) / max(len(questions), 1)
        rows, traces = [], []
        for q, r, answer, sec in zip(questions, got, answers, secs):
            sec += read_share
            row = {"question_id": q.id, "kind": q.kind, "source": q.meta.get("source", ""),
                   "split": q.split, "recalled": covers(r.evidence_ids(), q.gold_evidence, self.sections),
                   "words": r.words(self.captions), "images": len(r.images),
                   "correct": bool(answer) and answer == q.answer,
                   "pcst_seconds": r.pcst_seconds, "seconds": sec, "choices": bool(q.choices),
                   "answered": bool(answer)}
            if not q.choices:
                gold = golds(q)
                context = list(r.texts) + [self.captions.get(i, "") for i in r.images]
                row.update({"open": True,
                            "em": exact_match(answer, gold) if gold else None,
                            "f1": token_f1(answer, gold) if gold else None,
                            "answer_in_context": answer_in_context(gold, context) if gold else None})
            rows.append(row)
            traces.append(to_trace(q.id, self.name, q.text, r, self.captions, answer=answer, seconds=sec,
                                   meta={"kind": q.kind}))
        return rows, traces

    def answer(self, questions: Sequence[Question]) -> list[Trace]:
        """One trace per question, in order (empty answer without a reader)."""
        return self.run(questions)[1]
