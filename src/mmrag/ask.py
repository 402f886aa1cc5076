"""Ask the systems one question: BRIT, DnC, MM-R2 and BM25 over the last run's artifacts.

``bin/ask "question" [--image PATH] [--systems brit,dnc,mmr2,bm25] [--corpus world|wiki|folder]
[--json] [--repl] [--data DIR] [--params FILE] [--pick SET[:N]] [-S KEY=VALUE]`` loads what the pipeline built
under ``data/`` (or ``--data``) with the settings of ``params.yaml`` (or ``--params``; by default
the params file beside the data folder), the same objects and generation service the stages use:

- **brit**: the graph ``brit_graph`` saved, CLIP and the text encoder, BRIT under
  ``brit_linking.linking`` with its retrieval knobs and reader;
- **dnc**: the four tools over the corpus and the first of ``toolagent_eval.llms`` that has a DnC
  adapter (``toolagent_finetune``), on ``toolagent_eval.engine``;
- **mmr2**: the SFT+GRPO policy of ``mmr2_train``, the KnowledgeMap of the corpus and Φ (intent
  binding), with ``two_axis_eval``'s k, turns and engine and ``mmr2_train.budget``;
- **bm25**: BM25 top-k (``two_axis_eval.k``) over the corpus's passages (``knowledge_map``'s
  chunking), read by BRIT's reader LLM.

Each answers with a :class:`~mmrag.schema.Trace`; a system whose artifacts are absent is named with
the stage to run and the others answer. Documents added with ``bin/py -m mmrag add`` (a live overlay in
``data/live/<corpus>``, :mod:`mmrag.live`) are laid over BRIT's graph, the KnowledgeMap and BM25's
passages, and each answer's header says "+N documents added live"; DnC's tools read the corpus only.
Models load once per process (:func:`load_systems` keeps them), so ``--repl`` and a notebook
(notebooks/explore.ipynb, through :func:`show`) ask again without reloading. Bad input is one line
and exit code 2; exit code 1 when no system could answer.

    systems = load_systems(["brit", "mmr2"], corpus="world")
    traces = ask("Who employs Reitei Rilytus?", systems=systems)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import html
import itertools
import json
import logging
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmrag import io
from mmrag.evaluate.metrics import exact_match, golds
from mmrag.params import ROOT, ConfigError
from mmrag.schema import Document, Evidence, Question, Step, Trace, load_documents, load_questions, question_path

SYSTEM_NAMES = ("brit", "dnc", "mmr2", "bm25")
CORPORA = ("world", "wiki", "folder")
CORPUS_STAGE = {"world": "world", "wiki": "wiki", "folder": "corpora"}  # the stage that builds data/<corpus>
IMAGE_BLIND = {"dnc": "DnC's tools answer about named entities; the query image is not used",
               "bm25": "BM25 ranks text; the query image is not used"}


class AskError(ValueError):
    """Bad input (empty question, unreadable image, unknown system or corpus, too long): one line, exit 2."""


class MissingArtifact(RuntimeError):
    """A system's artifacts are absent; the message names the stage that builds them."""


# --------------------------------------------------------------------------- settings and data
def repro(stage: str) -> str:
    return f"`bin/py -m dvc repro {stage}`"


@dataclass
class Context:
    """What the systems over one data folder share: the validated params (paths resolved against
    the data folder), the corpora's pages, and the chat models already loaded."""

    params: Any  # mmrag.config.Params
    data: Path
    params_path: Path
    overrides: tuple[str, ...] = ()  # -S key=value, as bin/exp takes them
    chats: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    _docs: dict[str, list[Document]] = field(default_factory=dict)
    _live: dict[str, Any] = field(default_factory=dict)

    def ready(self) -> None:
        """Before a model loads: models resolve under this data folder (:func:`use_data`)."""
        if Path(io.DATA).resolve() != self.data:
            use_data(self.data)

    def rel(self, *parts: str) -> str:
        """A data path as a message shows it (data/... for the repository's own data folder)."""
        path = self.data.joinpath(*parts)
        try:
            return str(path.relative_to(ROOT))
        except ValueError:
            return str(path)

    def corpus_dir(self, corpus: str) -> Path:
        if not (self.data / corpus / "documents.jsonl").exists():
            hint = (repro(CORPUS_STAGE[corpus]) if corpus != "folder"
                    else "`bin/exp -S corpora.folder.path=/your/folder corpora`")
            raise MissingArtifact(f"no corpus in {self.rel(corpus)} — run {hint}")
        return self.data / corpus

    def documents(self, corpus: str) -> list[Document]:
        """The corpus's pages, and the ones added live (a live page replaces a corpus page of its id)."""
        if corpus not in self._docs:
            from mmrag.live import merged_documents

            self._docs[corpus] = merged_documents(load_documents(self.corpus_dir(corpus)), self.live(corpus))
        return self._docs[corpus]

    def live(self, corpus: str) -> Any:
        """The corpus's live overlay (``bin/py -m mmrag add``; :class:`mmrag.live.Overlay`), or None."""
        if corpus not in self._live:
            from mmrag.live import live_dir, read_overlay

            self._live[corpus] = read_overlay(live_dir(self.data, corpus))
        return self._live[corpus]

    def need_clip(self) -> None:
        clip = Path(self.params.models.clip)
        if self.data in clip.parents and not clip.exists():
            raise MissingArtifact(f"no CLIP in {self.rel(clip.name)} — run {repro('clip')}")

    def chat(self, name: str, engine: str, adapter: Path | None = None, base_url: str | None = None) -> Any:
        """A chat model through the generation service, loaded once per process."""
        from mmrag.models import generation  # loads gguf and transformers: only when a system needs an LLM

        key = (name, engine, str(adapter or ""))
        if key not in self.chats:
            self.ready()
            p = self.params
            self.chats[key] = generation.load_chat(
                name, engine=engine, settings=generation.engine_settings(p.inference),
                allow_network=p.base.allow_network, device=p.base.device, adapter=adapter, base_url=base_url)
        return self.chats[key]

    def close(self) -> None:
        for llm in self.chats.values():
            if hasattr(llm, "close"):
                llm.close()
        self.chats.clear()


def data_path(data: Path, path: str) -> Path:
    """A path from params or policies.json, which name the data folder ``data/...`` relative to the
    repository: ``data/x`` is ``<data>/x``, another relative path is relative to the repository."""
    p = Path(path)
    if p.is_absolute():
        return p
    if p.parts and p.parts[0] == "data":
        return data.joinpath(*p.parts[1:])
    return ROOT / p


def use_data(data: Path) -> None:
    """Point the module-level data folder (``io.DATA``) and the provisioned models' folder at
    ``data``: the registry resolves model names under ``<data>/models``, as the stages that built
    the artifacts did. Process-wide: the last data folder a system was loaded from wins."""
    from mmrag.models import generation, registry  # loads gguf and transformers: only when loading systems

    io.DATA = data
    models = data / "models"
    registry.MODELS_DIR = generation.MODELS_DIR = models
    registry.resolve.__defaults__ = (models,)


def default_params(data: Path) -> Path:
    """The params file the artifacts were built with: the one beside the data folder, else params.yaml."""
    beside = data.resolve().parent / "params.yaml"
    return beside if beside.exists() else ROOT / "params.yaml"


_CONTEXTS: dict[tuple[str, str, tuple[str, ...]], Context] = {}
_LOADED: dict[tuple[str, str, tuple[str, str, tuple[str, ...]]], Answerer] = {}


def context(data: str | Path | None = None, params: str | Path | None = None,
            overrides: Sequence[str] = ()) -> Context:
    """The shared context of a data folder, params file and overrides (``key=value``, validated
    as ``bin/exp -S`` validates them): one per process and combination."""
    from mmrag import config  # every section's dataclass: imported when a system is loaded

    data = Path(data).resolve() if data else io.ROOT / "data"
    params_path = Path(params).resolve() if params else default_params(data)
    key = (str(data), str(params_path), tuple(overrides))
    if key not in _CONTEXTS:
        if not data.is_dir():
            raise AskError(f"--data {data}: not a folder")
        try:
            p = config.from_dict(config.apply_overrides(config.read_raw(params_path), overrides))
        except ConfigError as e:
            raise AskError(f"{params_path}: {e}") from e
        p = dataclasses.replace(
            p, models=dataclasses.replace(p.models, clip=str(data_path(data, p.models.clip))),
            inference=dataclasses.replace(p.inference, cache_dir=str(data_path(data, p.inference.cache_dir))))
        _CONTEXTS[key] = Context(p, data, params_path, tuple(overrides))
    return _CONTEXTS[key]


# --------------------------------------------------------------------------- answerers
@dataclass
class Answerer:
    """One system over one corpus, loaded: ``answer(question) -> Trace`` (with evidence, time and
    tokens filled in), and what it took to load."""

    name: str
    corpus: str
    ctx: Context
    run: Callable[[Question], Trace]
    llms: list[Any] = field(default_factory=list)  # chat models it calls: their usage gives tokens
    load_seconds: float = 0.0
    extras: dict[str, Any] = field(default_factory=dict)  # brit: systems, linkers, last retrieval
    answered: int = 0
    live: int = 0  # documents added live that this system answers over
    notes: list[str] = field(default_factory=list)  # what load_systems logs once (a live part left out)

    def answer(self, question: Question) -> Trace:
        before = [_usage(llm) for llm in self.llms]
        t0 = time.perf_counter()
        trace = self.run(question)
        wall = time.perf_counter() - t0
        if not trace.tokens_in and not trace.tokens_out:  # BRIT and BM25 read through a reader: its usage
            spent = [(a[0] - b[0], a[1] - b[1]) for a, b in zip((_usage(llm) for llm in self.llms), before)]
            trace.tokens_in, trace.tokens_out = sum(s[0] for s in spent), sum(s[1] for s in spent)
        self.answered += 1
        trace.meta.update({"wall_seconds": round(wall, 3), "load_seconds": round(self.load_seconds, 2),
                           "first_answer": self.answered == 1, "corpus": self.corpus,
                           "evidence": evidence_of(trace, self.ctx.documents(self.corpus))})
        if self.live:
            trace.meta["live_documents"] = self.live
        if question.image_path and self.name in IMAGE_BLIND:
            trace.meta["note"] = IMAGE_BLIND[self.name]
        return trace


def _usage(llm: Any) -> tuple[int, int]:
    u = getattr(llm, "usage", None)
    return (u.prompt_tokens + u.cached_tokens, u.completion_tokens) if u is not None else (0, 0)


class _Recording:
    """A retriever that keeps its last retrieval (BRIT's sub-graph for the trace and the figure)."""

    def __init__(self, retriever: Any):
        self.retriever, self.last = retriever, None

    def retrieve(self, question: str, image_path: str | None = None) -> Any:
        self.last = self.retriever.retrieve(question, image_path)
        return self.last


def llm_reader(ctx: Context, captions: Mapping[str, str], corpus_dir: Path) -> Any:
    """BRIT's LLM reader (``brit_linking.reader_llm`` on its engine), its chat model shared; the
    ladder's ``models.llm`` when BRIT's reader is not an LLM (BM25 needs one)."""
    from mmrag.brit.reader import LLMReader, image_descriptions  # imports torch via the encoders
    from mmrag.brit.system import image_records

    cfg, models = ctx.params.brit_linking, ctx.params.models
    llm = (ctx.chat(cfg.reader_llm, cfg.engine, base_url=cfg.lmm_base_url or None) if cfg.reader == "llm"
           else ctx.chat(models.llm, models.engine))
    captions_all, attributes = image_records(corpus_dir)
    return LLMReader(llm, image_descriptions({**captions_all, **captions}, attributes))


def brit_graph_dir(ctx: Context, corpus: str) -> Path:
    """The graph ``brit_graph`` saved for a corpus (MissingArtifact names the run that builds it)."""
    folder = ctx.data / "brit_graph" / corpus
    if not (folder / "entries.jsonl").exists():
        hint = (repro("brit_graph") if corpus == ctx.params.brit_graph.corpus
                else f"`bin/exp -S brit_graph.corpus={corpus} brit_graph`")
        raise MissingArtifact(f"no graph in {ctx.rel('brit_graph', corpus)} — run {hint}")
    return folder


def knowledge_map_dir(ctx: Context, corpus: str) -> Path:
    """The KnowledgeMap ``knowledge_map`` saved for a corpus (MissingArtifact names the run)."""
    folder = ctx.data / "knowledge_map" / corpus
    if not (folder / "units.json").exists():
        corpora = ctx.params.knowledge_map.corpora
        hint = (repro("knowledge_map") if corpus in corpora else
                f"`bin/exp -S 'knowledge_map.corpora=[{','.join([*corpora, corpus])}]' knowledge_map`")
        raise MissingArtifact(f"no KnowledgeMap in {ctx.rel('knowledge_map', corpus)} — run {hint}")
    return folder


def live_part(ctx: Context, corpus: str, part: str, recipe: dict[str, Any], what: str
              ) -> tuple[Any, list[str]]:
    """(the live overlay's ``part`` — ``graph`` or ``map`` — when it was computed as ``recipe`` says
    params compute it now, else None; the note that says why a part is left out)."""
    overlay = ctx.live(corpus)
    if overlay is None or not overlay.documents:
        return None, []
    got = getattr(overlay, part)
    redo = f"run `bin/py -m mmrag add --corpus {corpus}` with any of the files again to update it"
    if got is None:
        return None, [f"the {len(overlay.documents)} documents added live are not in {what} (built after them): {redo}"]
    if got.recipe != recipe:
        changed = sorted(k for k in recipe if got.recipe.get(k) != recipe[k])
        return None, [f"the documents added live are left out: {what} was computed with other {', '.join(changed)} "
                      f"than params name now; {redo}"]
    return got, []


def load_brit(ctx: Context, corpus: str) -> Answerer:
    p = ctx.params
    graph_dir = brit_graph_dir(ctx, corpus)
    ctx.need_clip()
    corpus_dir = ctx.corpus_dir(corpus)
    ctx.ready()
    from mmrag.brit.system import BritSystem, make_reader, open_systems, systems_for  # torch, spaCy, CLIP
    from mmrag.live import apply_graph, graph_recipe, merged_documents

    graph_cfg = dataclasses.replace(p.brit_graph, corpus=corpus)
    live, notes = live_part(ctx, corpus, "graph", graph_recipe(graph_cfg, p.models), f"BRIT's graph {graph_dir.name}")
    systems, extractor = open_systems(graph_cfg, p.models, p.brit_linking, p.base.allow_network, ctx.data)
    if live is not None:
        apply_graph(systems.graph, live)
        docs = merged_documents(systems.documents, ctx.live(corpus))
        systems = systems_for(systems.graph, docs, extractor, p.brit_linking)
    cfg = p.brit_linking
    reader = (llm_reader(ctx, systems.captions, corpus_dir) if cfg.reader == "llm"
              else make_reader(cfg, systems, corpus_dir, p.base.allow_network, p.inference, p.base.device))
    linkers = tuple(cfg.linking)
    retriever = _Recording(systems.brit(linkers))
    system = BritSystem(retriever, reader, systems.captions, set(systems.sections), name="brit")
    extras = {"systems": systems, "linkers": linkers, "retriever": retriever, "corpus_dir": corpus_dir}

    def run(q: Question) -> Trace:
        trace = system.run([q])[1][0]
        trace.meta["subgraph"] = subgraph(retriever.retriever.view, retriever.last, systems.captions)
        return trace
    return Answerer("brit", corpus, ctx, run, [getattr(reader, "llm", None)] if hasattr(reader, "llm") else [],
                    extras=extras, live=len(ctx.live(corpus).documents) if live is not None else 0, notes=notes)


def subgraph(view: Any, r: Any, captions: Mapping[str, str]) -> dict[str, Any]:
    """BRIT's retrieval as data: triplets (subject, relation, object, section) of the retrieved
    edges, the images with their captions, the query entities and the graphs the filter kept."""
    triplets = [[t.subject, t.relation, t.object, str(t.section_id or "")]
                for e in r.edges for t in view.edge_triplets[e]]
    return {"triplets": triplets, "images": [[i, captions.get(i, "")] for i in r.images],
            "entities": list(r.query_entities), "kept_graphs": r.kept_components,
            "nodes": [view.names[n] for n in dict.fromkeys(r.nodes + r.linked_nodes)]}


def dnc_adapter(data: Path, llm: str) -> Path:
    """toolagent_finetune's DnC adapter of an LLM (as toolagent_eval's ``strategy_adapter``)."""
    return data / "toolagent_finetune" / llm / "dnc" / "adapter"


def load_dnc(ctx: Context, corpus: str) -> Answerer:
    p = ctx.params
    cfg = p.toolagent_eval
    llm_name = next((n for n in cfg.llms if dnc_adapter(ctx.data, n).exists()), None)
    if llm_name is None:
        raise MissingArtifact(f"no adapter in {ctx.rel('toolagent_finetune')} for any of toolagent_eval.llms "
                              f"{list(cfg.llms)} — run {repro('toolagent_finetune')}")
    ctx.need_clip()
    corpus_dir = ctx.corpus_dir(corpus)
    ctx.ready()
    from mmrag.stages.toolagent_eval import load_tools, make_system  # torch, CLIP: after the checks

    tools, _ = load_tools(cfg, p.models.clip, p.base, corpus_dir)
    llm = ctx.chat(llm_name, cfg.engine, dnc_adapter(ctx.data, llm_name))
    system = make_system("dnc", llm, tools, f"dnc__{llm_name}__ft", cfg)
    overlay = ctx.live(corpus)
    notes = ([f"its tools read {ctx.rel(corpus)} only: the {len(overlay.documents)} documents added live are not "
              "among them"] if overlay is not None and overlay.documents else [])
    return Answerer("dnc", corpus, ctx, lambda q: system.answer([q])[0], [llm], extras={"llm": llm_name},
                    notes=notes)


def load_mmr2(ctx: Context, corpus: str) -> Answerer:
    p = ctx.params
    policies_file = ctx.data / "mmr2_train" / "policies.json"
    if not policies_file.exists():
        raise MissingArtifact(f"no trained policy in {ctx.rel('mmr2_train')} — run {repro('mmr2_train')}")
    policies = io.read_json(policies_file)
    adapter = data_path(ctx.data, policies["grpo"])
    if not adapter.exists():
        raise MissingArtifact(f"the SFT+GRPO adapter {adapter} is missing — run {repro('mmr2_train')}")
    map_dir = knowledge_map_dir(ctx, corpus)
    ctx.need_clip()
    corpus_dir = ctx.corpus_dir(corpus)
    ctx.ready()
    from mmrag.corpora.passages import Chunking
    from mmrag.live import extend_map, map_recipe
    from mmrag.mmr2.agent import PAPER_VIEW, View  # faiss, torch: after the checks
    from mmrag.mmr2.intent import load_binder
    from mmrag.mmr2.knowledge_map import KnowledgeMap
    from mmrag.mmr2.system import MMR2Agent

    view = View(**policies["view"]) if "view" in policies else PAPER_VIEW
    live, notes = live_part(ctx, corpus, "map", map_recipe(map_dir, Chunking.of(p.knowledge_map)),
                            f"the KnowledgeMap {map_dir.name}")
    kmap, encoder = KnowledgeMap.open(map_dir, allow_network=p.base.allow_network, device=p.base.device)
    if live is not None:
        kmap = extend_map(kmap, live, p.knowledge_map.card_titles)
    binder = load_binder(corpus_dir, spacy=p.models.spacy, clip_path=p.models.clip,
                         allow_network=p.base.allow_network, images=True, log=lambda m: print(m, file=sys.stderr))
    cfg = p.two_axis_eval
    llm = ctx.chat(policies["base"], cfg.engine, adapter)

    def run(q: Question) -> Trace:
        intent = binder.bind([q])[0]
        agent = MMR2Agent("mmr2", llm, kmap, encoder, k=cfg.k, budget=p.mmr2_train.budget,
                          max_turns=cfg.max_turns, max_new_tokens=cfg.max_new_tokens, intents={q.id: intent},
                          image_texts={q.id: intent.image_text}, view=view)
        trace = agent.answer([q])[0]
        trace.meta["intent"] = intent.to_dict()
        return trace
    return Answerer("mmr2", corpus, ctx, run, [llm], extras={"kmap": kmap, "policy": policies["base"]},
                    live=len(ctx.live(corpus).documents) if live is not None else 0, notes=notes)


def bm25_index(ctx: Context, corpus: str) -> tuple[list[Any], Any]:
    """(passages, BM25 over them) of the corpus's pages and the ones added live (``knowledge_map``'s chunking)."""
    from mmrag.baselines import bm25  # bm25s: only when BM25 is asked
    from mmrag.corpora.passages import Chunking, to_passages

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # its index-building DEBUG lines are not the answer
    passages = to_passages(ctx.documents(corpus), *Chunking.of(ctx.params.knowledge_map))
    return passages, bm25.BM25([f"{x.title}: {x.text}" for x in passages])


def load_bm25(ctx: Context, corpus: str) -> Answerer:
    p = ctx.params
    corpus_dir = ctx.corpus_dir(corpus)
    ctx.ready()
    from mmrag.baselines import bm25  # bm25s: after the checks

    passages, ranker = bm25_index(ctx, corpus)
    captions = {im.id: im.caption for d in ctx.documents(corpus) for im in d.images}
    reader = llm_reader(ctx, captions, corpus_dir)
    k = p.two_axis_eval.k

    def run(q: Question) -> Trace:
        t0 = time.perf_counter()
        scores = ranker.scores(q.text)
        top = [i for i in bm25.top_k(scores, k) if scores[i] > 0]
        hits = [passages[i] for i in top]
        answer = reader.answer_many([(q.text, list(q.choices), [f"{h.title}: {h.text}" for h in hits], [])])[0]
        ev = [Evidence(id=h.id, kind="passage", content=h.text, score=round(float(scores[i]), 4), doc_id=h.doc_id)
              for i, h in zip(top, hits)]
        steps = [Step(action="retrieve", target="bm25", query=q.text, evidence=ev)]
        if answer:
            steps.append(Step(action="answer", text=answer))
        return Trace(question_id=q.id, system="bm25", answer=answer, steps=steps,
                     seconds=round(time.perf_counter() - t0, 4))
    overlay = ctx.live(corpus)
    return Answerer("bm25", corpus, ctx, run, [reader.llm], extras={"passages": len(passages)},
                    live=len(overlay.documents) if overlay is not None else 0)


LOADERS: dict[str, Callable[[Context, str], Answerer]] = {
    "brit": load_brit, "dnc": load_dnc, "mmr2": load_mmr2, "bm25": load_bm25}


def check_names(names: Iterable[str] | str, corpus: str) -> list[str]:
    """The system names asked for (a comma-separated string or a list), checked with the corpus."""
    if isinstance(names, str):
        names = [n for n in names.split(",")]
    names = [n.strip().lower() for n in names if n.strip()]
    unknown = [n for n in names if n not in SYSTEM_NAMES]
    if unknown or not names:
        raise AskError(f"unknown system {', '.join(map(repr, unknown)) or '(none given)'}: "
                       f"choose from {', '.join(SYSTEM_NAMES)}")
    if corpus not in CORPORA:
        raise AskError(f"unknown corpus {corpus!r}: choose from {', '.join(CORPORA)}")
    return list(dict.fromkeys(names))


def load_systems(names: Iterable[str] | str = SYSTEM_NAMES, corpus: str = "world",
                 data: str | Path | None = None, params: str | Path | None = None,
                 log: Callable[[str], None] = print, overrides: Sequence[str] = ()) -> dict[str, Answerer]:
    """The systems asked for, loaded over ``data/<corpus>`` (each once per process: a second call
    returns the loaded ones). A system whose artifacts are absent, or that fails to load, is left
    out with one ``log`` line naming it and the stage to run. ``overrides``: params ``key=value``
    (``brit_linking.engine=llamacpp``)."""
    names = check_names(names, corpus)
    ctx = context(data, params, overrides)
    out: dict[str, Answerer] = {}
    for name in names:
        key = (name, corpus, (str(ctx.data), str(ctx.params_path), ctx.overrides))
        if key not in _LOADED:
            t0 = time.perf_counter()
            try:
                with contextlib.redirect_stdout(sys.stderr):  # the stages' progress lines: not the answer
                    answerer = LOADERS[name](ctx, corpus)
            except MissingArtifact as e:
                log(f"{name}: {e}")
                continue
            except Exception as e:  # noqa: BLE001 - a model that cannot load leaves out its system only
                log(f"{name}: could not load: {one_line(e)}")
                continue
            answerer.load_seconds = time.perf_counter() - t0
            for note in answerer.notes:
                log(f"{name}: {note}")
            _LOADED[key] = answerer
        out[name] = _LOADED[key]
    return out


def one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return f"{type(e).__name__}: {text}" if not isinstance(e, (AskError, MissingArtifact)) else text


# --------------------------------------------------------------------------- asking
_ASKED = itertools.count(1)


def make_question(question: str | Question, image: str | Path | None = None) -> Question:
    """A Question from text (and an image file), or a test question as it is (gold kept); checks
    that the text is not empty and the image can be read."""
    if isinstance(question, Question):
        if image is None:
            return question
        question = question.text
    text = " ".join(str(question or "").split())
    if not text:
        raise AskError("empty question: ask something")
    path = None
    if image is not None and str(image).strip():
        path = Path(image).expanduser().resolve()
        check_image(path)
    return Question(id=f"ask-{next(_ASKED):04d}", text=text, answer="", dataset="ask",
                    image_path=str(path) if path else None)


def check_image(path: Path) -> None:
    from PIL import Image, UnidentifiedImageError  # Pillow: only when an image is given

    try:
        with Image.open(path) as im:
            im.verify()
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as e:
        raise AskError(f"cannot read image {path}: {' '.join(str(e).split()) or type(e).__name__}") from e


def context_window(systems: Mapping[str, Answerer]) -> int | None:
    """The generation service's context (``inference.ctx_per_slot``) of the loaded systems."""
    ctxs = {id(a.ctx): a.ctx for a in systems.values()}
    return min((c.params.inference.ctx_per_slot for c in ctxs.values()), default=None)


def question_tokens(text: str, systems: Mapping[str, Answerer]) -> int:
    """Tokens of the question under the first loaded LLM's tokenizer (else its words)."""
    tok = next((llm.tok for a in systems.values() for llm in a.llms if getattr(llm, "tok", None) is not None), None)
    if tok is None:
        return len(text.split())
    return len(tok(text, add_special_tokens=False)["input_ids"])


def check_length(q: Question, systems: Mapping[str, Answerer]) -> None:
    window = context_window(systems)
    if window is None:
        return
    n = question_tokens(q.text, systems)
    if n > window:
        raise AskError(f"question of {n} tokens is longer than the context window "
                       f"(inference.ctx_per_slot = {window})")


def ask(question: str | Question, image: str | Path | None = None,
        systems: Mapping[str, Answerer] | Iterable[str] | str = SYSTEM_NAMES, *, corpus: str = "world",
        data: str | Path | None = None, params: str | Path | None = None,
        log: Callable[[str], None] = print) -> dict[str, Trace]:
    """Every system's trace for one question (a system that fails is logged and left out).
    ``systems``: loaded answerers (:func:`load_systems`), or names to load (once per process)."""
    q = make_question(question, image)
    if not isinstance(systems, Mapping):
        systems = load_systems(systems, corpus, data, params, log=log)
    check_length(q, systems)
    traces = {}
    for name, answerer in systems.items():
        try:
            with contextlib.redirect_stdout(sys.stderr):
                traces[name] = answerer.answer(q)
        except Exception as e:  # noqa: BLE001 - one system's failure (a prompt over the window) spares the others
            log(f"{name}: could not answer: {one_line(e)}")
    return traces


# --------------------------------------------------------------------------- test questions
DEFAULT_SETS = {"world": "mmqa", "wiki": "wiki", "folder": None}


def test_questions(question_set: str | None = None, corpus: str = "world", data: str | Path | None = None,
                   split: str = "test") -> list[Question]:
    """A corpus's questions of one split (every split when it has none of that name): what the
    "pick a test question" mode chooses from; ``question_set`` defaults to mmqa on the world
    (gold decompositions and evidence), the first set otherwise."""
    data = Path(data).resolve() if data else io.ROOT / "data"
    folder = data / corpus / "questions"
    sets = sorted(p.stem for p in folder.glob("*.jsonl"))
    name = question_set or DEFAULT_SETS.get(corpus)
    name = name if name in sets else (sets[0] if sets and not question_set else name)
    path = question_path(data / corpus, name or "")
    if not name or not path.exists():
        raise AskError(f"no question set {name!r} in {folder} (it has {sets or 'none'})")
    qs = load_questions(path)
    in_split = [q for q in qs if q.split == split]
    return in_split or qs


def pick(spec: str, corpus: str = "world", data: str | Path | None = None) -> Question:
    """``SET[:N]``: the N-th (default 0) test question of a question set; its image path made absolute."""
    name, _, index = spec.partition(":")
    qs = test_questions(name or None, corpus, data)
    try:
        q = qs[int(index or 0) % len(qs)]
    except ValueError as e:
        raise AskError(f"--pick {spec}: N must be a number") from e
    data = Path(data).resolve() if data else io.ROOT / "data"
    if q.image_path and not Path(q.image_path).is_absolute():
        q = dataclasses.replace(q, image_path=str(data / corpus / q.image_path))
    return q


# --------------------------------------------------------------------------- evidence and traces as text
def evidence_of(trace: Trace, documents: Sequence[Document]) -> dict[str, list[str]]:
    """The pages, sections, tables, images and passages a trace's evidence points at (ids)."""
    index = _index(documents)
    out: dict[str, list[str]] = {k: [] for k in ("pages", "sections", "tables", "images", "passages")}
    for e in trace.evidence():
        base = e.id.split("#")[0]
        kind, page = index.get(base, (None, e.doc_id))
        if kind in ("sections", "tables", "images"):
            out[kind].append(base)
        if e.kind == "passage":
            out["passages"].append(e.id)
        if page:
            out["pages"].append(page)
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}


_INDEXES: dict[int, dict[str, tuple[str | None, str]]] = {}


def _index(documents: Sequence[Document]) -> dict[str, tuple[str | None, str]]:
    """id -> (kind, page id) of every page, section, table and image."""
    if id(documents) not in _INDEXES:
        index: dict[str, tuple[str | None, str]] = {}
        for d in documents:
            index[d.id] = ("pages", d.id)
            index.update({s.id: ("sections", d.id) for s in d.sections})
            index.update({t.id: ("tables", d.id) for t in d.tables})
            index.update({im.id: ("images", d.id) for im in d.images})
        _INDEXES[id(documents)] = index
    return _INDEXES[id(documents)]


def gold_ids(q: Question | None) -> set[str]:
    if q is None:
        return set()
    return set(q.gold_evidence) | set(q.gold_passages) | {e for s in q.decomposition for e in s.evidence_ids}


def _mark(ident: str, gold: set[str]) -> str:
    return f"{ident}*" if gold and (ident in gold or ident.split("#")[0] in gold) else ident


def _clip(text: str | None, n: int = 110) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def trace_lines(trace: Trace, gold: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """A compact trace: BRIT's sub-graph (triplets and images), DnC's sub-questions and tool
    calls, MM-R2's turns, BM25's passages; gold evidence ids marked with *."""
    system = trace.system.split("__")[0]
    if system == "brit":
        return brit_lines(trace, gold)
    if system == "dnc":
        rows = dnc_rows(trace)
        plan = next((s.text for s in trace.steps if s.text and "Sub-questions" in s.text), "")
        lines = [f"plan: {_clip(plan.split(chr(10))[0], 160)}"] if plan else []
        for r in rows:
            ev = ", ".join(_mark(i, gold) for i in r["evidence"][:3])
            lines.append(f"{r['#']}. {_clip(r['sub-question'], 80)} → {r['tool']} → {_clip(r['answer'], 40)}"
                         + (f"   [{ev}]" if ev else ""))
        lines += [f"format error: {_clip(s.format_error, 60)} — wrote: {_clip(s.text, 70)}"
                  for s in trace.steps if s.format_error]
        return lines
    if system == "mmr2":
        intent = trace.meta.get("intent") or {}
        lines = [f"Φ: need = {_clip(intent.get('need'), 70)}; referent = {intent.get('referent')}"
                 + (f" (image read as: {_clip(intent['image_text'], 60)})" if intent.get("image_text") else "")
                 ] if intent else []
        return lines + [line for card in mmr2_cards(trace) for line in _card_lines(card, gold)]
    return [f"[{k}] {_mark(e.id, gold)} ({e.score}) {_clip(e.content, 90)}"
            for k, e in enumerate(trace.evidence(), 1)]


def brit_lines(trace: Trace, gold: set[str]) -> list[str]:
    sg = trace.meta.get("subgraph") or {}
    entities = ", ".join(sg.get("entities", [])) or "(none)"
    lines = [f"query entities: {entities}; graphs kept: {sg.get('kept_graphs', 0)}"]
    seen = set()
    for s, r, o, sec in sg.get("triplets", []):
        if (s, r, o) in seen:
            continue
        seen.add((s, r, o))
        lines.append(f"({s}) —[{r}]→ ({o})" + (f"   [{_mark(sec, gold)}]" if sec else ""))
    lines += [f"image {_mark(i, gold)}: {_clip(c, 90)}" for i, c in sg.get("images", [])]
    return lines


def dnc_rows(trace: Trace) -> list[dict[str, Any]]:
    """DnC's dialogue as rows: sub-question → tool → answer (and the evidence ids the tool used)."""
    rows = []
    for s in trace.steps:
        if s.action == "tool":
            rows.append({"#": len(rows) + 1, "sub-question": s.query or "", "tool": s.target or "",
                         "answer": s.summary or "", "evidence": [e.id for e in s.evidence]})
    return rows


def mmr2_cards(trace: Trace) -> list[dict[str, Any]]:
    """MM-R2's turns: think, summary of what it read, the search (units, query, passages) or the answer."""
    from mmrag.mmr2.agent import parse_turn  # faiss: the agent module imports the KnowledgeMap

    cards = []
    for k, s in enumerate(trace.steps, 1):
        p = parse_turn(s.text or "")
        cards.append({"turn": k, "action": s.action, "think": p.think or "", "summary": s.summary or "",
                      "units": s.target or "", "query": s.query or "", "answer": p.answer or "",
                      "passages": [(e.id, e.unit, e.score, e.content) for e in s.evidence],
                      "format_error": s.format_error or "",
                      # what the policy wrote, when none of it parsed (an untrained policy's free text)
                      "wrote": "" if (p.think or p.summary or p.answer or s.action == "search") else s.text or ""})
    return cards


def _card_lines(card: dict[str, Any], gold: set[str]) -> list[str]:
    lines = [f"turn {card['turn']} ({card['action']})"]
    if card["summary"]:
        lines.append(f"  summary: {_clip(card['summary'])}")
    if card["think"]:
        lines.append(f"  think: {_clip(card['think'])}")
    if card["action"] == "search":
        lines.append(f"  search {card['units']}: {_clip(card['query'], 80)} → "
                     + (", ".join(_mark(p[0], gold) for p in card["passages"]) or "nothing"))
    if card["answer"]:
        lines.append(f"  answer: {_clip(card['answer'])}")
    if card["wrote"]:
        lines.append(f"  wrote: {_clip(card['wrote'])}")
    if card["format_error"]:
        lines.append(f"  format error: {_clip(card['format_error'])}")
    return lines


def header(name: str, trace: Trace, q: Question | None = None) -> str:
    m = trace.meta
    extra = f" · {trace.tool_calls} {'searches' if name == 'mmr2' else 'tool calls'}" if name in ("dnc", "mmr2") else ""
    load = f" (+{m['load_seconds']:.1f} s loading)" if m.get("first_answer") else ""
    verdict = ""
    if q is not None and golds(q):
        verdict = " · " + ("correct" if exact_match(trace.answer, golds(q)) else "wrong")
    n = m.get("live_documents")
    live = f" · +{n} document{'' if n == 1 else 's'} added live" if n else ""
    return (f"── {name} · {m.get('wall_seconds', trace.seconds):.2f} s{load} · "
            f"{trace.tokens_in} tokens in / {trace.tokens_out} out{extra}{verdict}{live}")


def render(q: Question, traces: Mapping[str, Trace], documents: Sequence[Document] | None = None) -> str:
    """Every system's answer, evidence and compact trace as text (what ``bin/ask`` prints)."""
    gold = gold_ids(q)
    titles = {d.id: d.title for d in documents or []}
    out = [f"Q: {q.text}" + (f"   [image: {q.image_path}]" if q.image_path else "")]
    if golds(q):
        out.append(f"gold: {q.answer}" + (f" · evidence {', '.join(sorted(gold))}" if gold else ""))
        out += [f"  gold step {k}. {s.text} → {s.tool} → {s.answer}" for k, s in enumerate(q.decomposition, 1)]
    for name, t in traces.items():
        ev = t.meta.get("evidence") or {}
        out += ["", header(name, t, q if golds(q) else None), f"answer: {t.answer or '(none)'}"]
        pages = ", ".join(f"{_mark(p, gold)} ({titles[p]})" if p in titles else _mark(p, gold)
                          for p in ev.get("pages", [])[:6])
        out.append(f"pages: {pages or '(none)'}" + (" …" if len(ev.get("pages", [])) > 6 else ""))
        for kind in ("sections", "tables", "images"):
            if ev.get(kind):
                out.append(f"{kind}: {', '.join(_mark(i, gold) for i in ev[kind][:8])}"
                           + (" …" if len(ev[kind]) > 8 else ""))
        if t.meta.get("note"):
            out.append(f"note: {t.meta['note']}")
        out += ["  " + line for line in trace_lines(t, gold)]
    return "\n".join(out)


# --------------------------------------------------------------------------- the notebook's view
class Html(str):
    """HTML a notebook renders as such (``display(Html(...))``)."""

    def _repr_html_(self) -> str:
        return str(self)


@dataclass
class Shown:
    """What :func:`show` gives a notebook: tables (DataFrames), figures and HTML, in display order."""

    question: Question
    traces: dict[str, Trace]
    summary: Any  # DataFrame: one row per system
    side_by_side: Html
    brit_figure: Any = None  # BRIT's sub-graph with the pictures it reached
    dnc_table: Any = None  # DnC: sub-question -> tool -> answer
    mmr2_cards: Html | None = None
    gold: Any = None  # a test question: its gold decomposition
    gold_evidence: Any = None  # a test question: which system retrieved which gold item

    def parts(self) -> list[Any]:
        return [x for x in (self.summary, self.side_by_side, self.gold, self.gold_evidence, self.brit_figure,
                            self.dnc_table, self.mmr2_cards) if x is not None]


def show(question: str | Question, image: str | Path | None = None,
         systems: Mapping[str, Answerer] | Iterable[str] | str = SYSTEM_NAMES, **kwargs: Any) -> Shown:
    """Ask, then lay out the answers for a notebook: a summary table, the traces side by side,
    BRIT's sub-graph as a figure, DnC's dialogue as a table, MM-R2's turns as cards; for a test
    question (``pick``) also its gold decomposition and which system reached which gold item."""
    import pandas as pd  # pandas: the notebook's tables

    q = make_question(question, image)
    if not isinstance(systems, Mapping):
        systems = load_systems(systems, kwargs.pop("corpus", "world"), kwargs.pop("data", None),
                               kwargs.pop("params", None))
    traces = ask(q, systems=systems, **kwargs)
    has_gold = bool(golds(q))
    gold = gold_ids(q)
    rows = []
    for name, t in traces.items():
        ev = t.meta.get("evidence", {})
        row = {"system": name, "answer": t.answer, "seconds": t.meta.get("wall_seconds"),
               "load seconds": t.meta.get("load_seconds") if t.meta.get("first_answer") else 0.0,
               "tokens in": t.tokens_in, "tokens out": t.tokens_out, "tool calls / searches": t.tool_calls,
               "pages": len(ev.get("pages", [])), "images": len(ev.get("images", []))}
        if has_gold:
            row["correct"] = bool(exact_match(t.answer, golds(q)))
            reached = {i for v in ev.values() for i in v} | {i.split("#")[0] for i in ev.get("passages", [])}
            row["gold items reached"] = f"{len(gold & reached)}/{len(gold)}"
        rows.append(row)
    shown = Shown(q, traces, pd.DataFrame(rows).set_index("system") if rows else pd.DataFrame(),
                  side_by_side(q, traces))
    if "brit" in traces and "brit" in systems:
        shown.brit_figure = brit_figure(systems["brit"], q)
    if "dnc" in traces:
        shown.dnc_table = pd.DataFrame([{**r, "evidence": ", ".join(_mark(i, gold) for i in r["evidence"][:3])}
                                        for r in dnc_rows(traces["dnc"])],
                                       columns=["#", "sub-question", "tool", "answer", "evidence"]).set_index("#")
    if "mmr2" in traces:
        shown.mmr2_cards = cards_html(traces["mmr2"], gold)
    if has_gold:
        shown.gold = pd.DataFrame([{"step": k, "sub-question": s.text, "tool": s.tool, "answer": s.answer,
                                    "evidence": ", ".join(s.evidence_ids)} for k, s in enumerate(q.decomposition, 1)]
                                  or [{"step": 0, "sub-question": q.text, "tool": "", "answer": q.answer,
                                       "evidence": ", ".join(sorted(gold))}]).set_index("step")
        if gold:
            reached = {n: {i for v in t.meta.get("evidence", {}).values() for i in v}
                       | {i.split("#")[0] for i in t.meta.get("evidence", {}).get("passages", [])}
                       for n, t in traces.items()}
            shown.gold_evidence = pd.DataFrame({n: ["✓" if i in r or i.split("#")[0] in r else "" for i in sorted(gold)]
                                                for n, r in reached.items()}, index=sorted(gold))
    return shown


def side_by_side(q: Question, traces: Mapping[str, Trace]) -> Html:
    """One column per system: answer, cost, evidence and the compact trace."""
    gold = gold_ids(q)
    cells = []
    for name, t in traces.items():
        ev = t.meta.get("evidence", {})
        body = "\n".join([f"answer: {t.answer or '(none)'}",
                          f"pages: {', '.join(_mark(p, gold) for p in ev.get('pages', [])[:6])}", "",
                          *trace_lines(t, gold)])
        head = html.escape(header(name, t, q if golds(q) else None).strip("─ "))
        cells.append(f"<td style='vertical-align:top;min-width:18em'><b>{head}</b>"
                     f"<pre style='white-space:pre-wrap;font-size:11px'>{html.escape(body)}</pre></td>")
    title = html.escape(q.text) + (f" <i>(gold: {html.escape(q.answer)})</i>" if golds(q) else "")
    return Html(f"<p><b>Q:</b> {title}</p><table><tr>{''.join(cells)}</tr></table>")


def cards_html(trace: Trace, gold: set[str] = frozenset()) -> Html:  # type: ignore[assignment]
    """MM-R2's turns as cards."""
    out = []
    for c in mmr2_cards(trace):
        rows = [(k, c[k] if k != "wrote" else _clip(c[k], 300)) for k in ("think", "summary", "answer", "wrote",
                                                                           "format_error") if c[k]]
        if c["action"] == "search":
            rows.insert(1, ("search", f"{c['units']}: {c['query']}"))
            rows += [(f"passage {_mark(pid, gold)}", f"({unit}, {score}) {_clip(text, 200)}")
                     for pid, unit, score, text in c["passages"]]
        body = "".join(f"<div><b>{html.escape(k)}</b>: {html.escape(str(v))}</div>" for k, v in rows)
        out.append(f"<div style='border:1px solid #bbb;border-radius:6px;padding:6px;margin:4px;"
                   f"display:inline-block;vertical-align:top;width:30em;font-size:12px'>"
                   f"<div><b>turn {c['turn']}</b> · {c['action']}</div>{body}</div>")
    return Html(f"<div><b>MM-R2 · answer: {html.escape(trace.answer or '(none)')}</b></div>" + "".join(out))


def brit_figure(answerer: Answerer, q: Question) -> Any:
    """BRIT's retrieved sub-graph for the last question it answered: PCST's nodes, the nodes
    reached through image links, the pictures as thumbnails (brit_linking's example figure)."""
    from mmrag.stages.brit_linking import example_figure  # matplotlib, networkx

    ex = answerer.extras
    r = ex["retriever"].last
    if r is None:
        return None
    fig = example_figure(ex["systems"], ex["linkers"], q, r, ex["corpus_dir"], 0)
    fig.axes[0].set_title(f"BRIT: {_clip(q.text, 100)}" + (f"\ngold answer: {q.answer}" if golds(q) else ""),
                          fontsize=9)
    return fig


# --------------------------------------------------------------------------- the command line
class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line and exit 2, not argparse's usage block
        raise AskError(message)


def parser() -> argparse.ArgumentParser:
    ap = OneLineParser(prog="bin/ask", description="Ask BRIT, DnC, MM-R2 and BM25 one question over the last run's "
                 "artifacts.")
    ap.add_argument("question", nargs="?", default=None, help="the question (omit with --pick or --repl)")
    ap.add_argument("--image", help="a picture the question is about")
    ap.add_argument("--systems", default=",".join(SYSTEM_NAMES), help="comma-separated: brit,dnc,mmr2,bm25")
    ap.add_argument("--corpus", default="world", help="world | wiki | folder")
    ap.add_argument("--json", action="store_true", help="print the traces (Trace.to_dict()) as JSON")
    ap.add_argument("--repl", action="store_true",
                    help="keep the models loaded and read more questions from stdin ('@image.png question' "
                         "for a picture); an empty line or EOF ends")
    ap.add_argument("--data", help="the data folder (default: data/)")
    ap.add_argument("--params", help="params file (default: the one beside the data folder, else params.yaml)")
    ap.add_argument("--pick", metavar="SET[:N]", help="ask the N-th test question of a question set, gold shown")
    ap.add_argument("-S", "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a params key, as bin/exp -S (e.g. brit_linking.engine=llamacpp); repeatable")
    return ap


def _emit(q: Question, traces: Mapping[str, Trace], as_json: bool, repl: bool,
          systems: Mapping[str, Answerer]) -> None:
    if as_json:
        print(json.dumps({n: t.to_dict() for n, t in traces.items()}, ensure_ascii=False,
                         indent=None if repl else 2, default=str), flush=True)
        return
    docs = next((a.ctx.documents(a.corpus) for a in systems.values()), None)
    print(render(q, traces, docs), flush=True)


def err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _read_line(prompt: str) -> str | None:
    if sys.stdin.isatty():
        print(prompt, end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    return None if not line else line.strip()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        names = check_names(args.systems, args.corpus)
        window = context(args.data, args.params, args.overrides).params.inference.ctx_per_slot
        if args.pick:
            first: Question | None = pick(args.pick, args.corpus, args.data)
            if args.image:
                first = make_question(first.text, args.image)
        elif args.question is not None or not args.repl:
            first = make_question(args.question or "", args.image)
        else:
            first = None
        if first is not None and len(first.text.split()) > window:  # at least a token a word: no need to load
            raise AskError(f"question of {len(first.text.split())} words is longer than the context window "
                           f"(inference.ctx_per_slot = {window} tokens)")
        systems = load_systems(names, args.corpus, args.data, args.params, log=err, overrides=args.overrides)
        if not systems:
            err(f"no system could load ({', '.join(names)}): run the stages named above")
            return 1
        answered = False
        if first is not None:
            check_length(first, systems)
            traces = ask(first, systems=systems, log=err)
            if traces:
                _emit(first, traces, args.json, args.repl, systems)
            answered = bool(traces)
    except AskError as e:
        err(f"error: {e}")
        return 2
    if args.repl:
        while (line := _read_line("? ")):
            image, text = None, line
            if line.startswith("@"):
                image, _, text = line[1:].partition(" ")
            try:
                q = make_question(text, image)
                check_length(q, systems)
            except AskError as e:
                err(f"error: {e}")
                continue
            traces = ask(q, systems=systems, log=err)
            if traces:
                _emit(q, traces, args.json, True, systems)
            answered = answered or bool(traces)
    for c in list(_CONTEXTS.values()):
        c.close()
    return 0 if answered or (args.repl and first is None) else 1


if __name__ == "__main__":
    sys.exit(main())
