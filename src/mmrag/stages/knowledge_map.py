"""Stage `knowledge_map`: cut each corpus into a few named, indexed knowledge units (MM-R2).

Per corpus: a seeded, domain-stratified page sample becomes passages, embedded with the text
encoder; an HDBSCAN configuration search scores every grid point by coherence, balance,
coverage and routed retrieval utility on the corpus's dev questions; the winner's noise joins
its nearest unit, a quality check merges tiny and splits oversized units, and the
:class:`~mmrag.mmr2.knowledge_map.KnowledgeMap` (units, cards, one FAISS index per unit, a
flat one) is saved under ``data/knowledge_map/<corpus>/``. The metrics compare the units with
the gold topics and routed with flat Hit@k.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mmrag import sampling
from mmrag.baselines import bm25
from mmrag.corpora.passages import kept_share, to_passages
from mmrag.evaluate.metrics import golds
from mmrag.io import DATA, save_figure, stage_dirs, write_json
from mmrag.mmr2 import knowledge_map as kmaps
from mmrag.mmr2.params import KnowledgeMap
from mmrag.models import registry
from mmrag.models.params import Inference, Models
from mmrag.params import Base, Sections
from mmrag.schema import Document, Passage, Question, load_documents, load_questions
from mmrag.stages import StageResult, new_figure

# salted: corpora split questions by the same kind of hash, and an unsalted sample would pick
# exactly their test pages
SALT = "knowledge_map:"
# the paper's own configuration search lands on this many units
PAPER_UNITS = 10
# the criteria the search averages (coherence rescaled over the grid), then the score
CRITERIA = ["coherence_scaled", "balance", "coverage", "utility", "score"]


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    inference: Inference
    models: Models
    knowledge_map: KnowledgeMap


@dataclass
class Corpus:
    """One corpus ready for the search: its page sample, passages, vectors and dev split."""

    name: str
    docs: list[Document]
    passages: list[Passage]
    X: np.ndarray
    dev: kmaps.DevQueries
    dev_texts: list[str]
    embed_s: float
    search_s: float = 0.0
    chars_kept: float = 1.0  # share of the sample's characters within knowledge_map.max_chars per page


@dataclass
class KnowledgeMapResult(StageResult):
    """The maps built (by corpus), their search rows (best first) and quality-check changes."""

    corpora: dict[str, Corpus] = field(default_factory=dict)
    maps: dict[str, kmaps.KnowledgeMap] = field(default_factory=dict)
    searches: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    changes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


# --------------------------------------------------------------------------- corpora
def sample_pages(docs: Sequence[Document], n: int, seed: int) -> list[Document]:
    """A seeded subsample of ``n`` pages spread over gold domains in proportion to their size."""
    return sampling.proportional(docs, n, seed, by=lambda d: d.domain or "", salt=SALT)


def dev_text(q: Question) -> str:
    """The query a dev question stands for: an image question's grounded text sub-question
    (what a perfect Φ would search with), else the question itself."""
    if q.image_path:
        text_steps = [s.text for s in q.decomposition if s.tool == "TextQA"]
        if text_steps:
            return text_steps[-1]
    return q.text


def dev_split(corpus_dir: Path, passages: Sequence[Passage], n: int,
              seed: int) -> tuple[list[str], list[list[int]]]:
    """Dev questions with gold passages in this map: (query texts, gold passage indices)."""
    pid = {p.id: i for i, p in enumerate(passages)}
    qs: list[Question] = []
    for f in sorted((corpus_dir / "questions").glob("*.jsonl")):
        qs += [q for q in load_questions(f) if q.split == "dev"
               and any(g in pid for g in q.gold_passages)]
    qs = sampling.seeded_sample(qs, n, seed, salt=SALT)
    return [dev_text(q) for q in qs], [[pid[g] for g in q.gold_passages if g in pid] for q in qs]


def load_corpus(name: str, cfg: KnowledgeMap, encoder: Any, seed: int) -> Corpus:
    """Sample, chunk and embed one corpus folder under data/, with its embedded dev split."""
    folder = DATA / name
    if not (folder / "documents.jsonl").exists():
        raise FileNotFoundError(f"data/{name}/documents.jsonl is missing: run the stage that "
                                f"builds it (world or corpora) first, or drop '{name}' from "
                                f"knowledge_map.corpora")
    docs = sample_pages(load_documents(folder), cfg.max_docs, seed)
    passages = to_passages(docs, cfg.max_chars, cfg.chunk_chars, cfg.overlap)
    kept = kept_share(docs, cfg.max_chars)
    print(f"{name}: {kept:.1%} of the sampled pages' characters kept (each page cut at "
          f"knowledge_map.max_chars = {cfg.max_chars})")
    t0 = time.time()
    X = kmaps.embed_texts(encoder, [kmaps.passage_text(p) for p in passages])
    texts, gold = dev_split(folder, passages, cfg.dev_queries, seed)
    dev = kmaps.DevQueries(kmaps.embed_texts(encoder, texts) if texts
                           else np.zeros((0, X.shape[1]), np.float32), gold)
    return Corpus(name, docs, passages, X, dev, texts, time.time() - t0, chars_kept=kept)


def corpora_table(corpora: dict[str, Corpus]) -> pd.DataFrame:
    """Pages, share of their characters kept (each page cut at knowledge_map.max_chars), passages,
    gold domains and dev questions per corpus."""
    return pd.DataFrame([{"corpus": n, "pages": len(c.docs), "chars kept": round(c.chars_kept, 3),
                          "passages": len(c.passages),
                          "gold domains": len({d.domain for d in c.docs}),
                          "dev questions": len(c.dev.gold), "embed seconds": round(c.embed_s, 1)}
                         for n, c in corpora.items()])


# --------------------------------------------------------------------------- the search
def search(corpus: Corpus, cfg: KnowledgeMap, seed: int) -> list[dict[str, Any]]:
    """Every HDBSCAN configuration of the grid scored on this corpus, best first."""
    n = len(corpus.passages)
    sizes = sorted({max(5, round(f * n)) for f in cfg.min_cluster_frac})
    t0 = time.time()
    rows = kmaps.search_configs(
        corpus.X, corpus.dev, dims=cfg.dims, min_cluster_sizes=sizes, min_samples=cfg.min_samples,
        selections=cfg.selection, weights=kmaps.SearchWeights(cfg.w_coherence, cfg.w_balance,
                                                              cfg.w_coverage, cfg.w_utility),
        min_units=cfg.min_units, max_units=cfg.max_units, k=cfg.k, seed=seed)
    corpus.search_s = time.time() - t0
    return rows


def public(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Search rows without their private fields (the labels), as search.json stores them."""
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]


def why_tables(name: str, rows: Sequence[dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the winner's margin over the runner-up on each criterion, the configuration each single
    criterion alone would have picked): why the weighted score, not one criterion, decides."""
    valid = [r for r in rows if r["valid"]] or list(rows)
    win, second = valid[0], (valid[1] if len(valid) > 1 else valid[0])
    why = pd.DataFrame({"winner": [win[k] for k in CRITERIA],
                        "runner-up": [second[k] for k in CRITERIA]}, index=CRITERIA)
    why["margin"] = why["winner"] - why["runner-up"]
    alone = pd.DataFrame([{"criterion": k, "best config": max(rows, key=lambda r: (r[k], r["config"]))["config"],
                           "its units": max(rows, key=lambda r: (r[k], r["config"]))["units"]}
                          for k in CRITERIA[:-1] if win[k] is not None])  # utility: None without dev
    if win["utility"] is None:
        print(f"{name}: no dev questions with gold passages: retrieval utility not applicable "
              "(the score averages coherence, balance and coverage)")
    print(f"{name}: winner {win['config']} ({win['units']} units), runner-up {second['config']}")
    return why, alone


# --------------------------------------------------------------------------- the map
def metadata_writer(cfg: KnowledgeMap, base: Base,
                    inference: Inference) -> Callable[[list[str], list[str]], Any] | None:
    """Unit titles and descriptions by an LLM (the generation service), or None for the c-TF-IDF
    keyword writer."""
    if cfg.writer == "keywords":
        return None
    from mmrag.models.generation import engine_settings, load_chat

    llm = load_chat(cfg.writer, engine=cfg.engine, settings=engine_settings(inference),
                    allow_network=base.allow_network, device=base.device)
    return lambda keywords, reps: kmaps.llm_metadata(llm, keywords, reps)


def build_map(corpus: Corpus, winner: dict[str, Any], cfg: KnowledgeMap, seed: int,
              writer: Callable[[list[str], list[str]], Any] | None,
              ) -> tuple[kmaps.KnowledgeMap, list[dict[str, Any]]]:
    """The winner's clustering, noise joined to its nearest unit, after the quality check."""
    labels = kmaps.fill_noise(corpus.X, winner["_labels"])
    n = len(labels)
    labels, changes = kmaps.quality_check(corpus.X, labels,
                                          min_size=max(2, round(cfg.qc_min_size_frac * n)),
                                          max_share=cfg.qc_max_share,
                                          min_coherence=cfg.qc_min_coherence, seed=seed)
    kmap = kmaps.KnowledgeMap.build(corpus.passages, corpus.X, labels, top_keywords=cfg.top_keywords,
                                    n_representatives=cfg.representatives,
                                    n_card_titles=cfg.card_titles, writer=writer)
    return kmap, changes


def units_table(kmap: kmaps.KnowledgeMap) -> pd.DataFrame:
    """Each unit's size, title, keywords and description."""
    return pd.DataFrame([{"unit": u.id, "size": u.size, "title": u.title,
                          "keywords": ", ".join(u.keywords), "description": u.description}
                         for u in kmap.units])


def map_figure(maps: dict[str, kmaps.KnowledgeMap], seed: int) -> Any:
    """Per corpus: the passages in 2-D PCA coloured by primary unit, and the unit sizes."""
    import seaborn as sns
    from sklearn.decomposition import PCA

    fig, axes = new_figure(2, len(maps), figsize=(6.5 * len(maps), 10), squeeze=False)
    for j, (name, kmap) in enumerate(maps.items()):
        Z = PCA(2, random_state=seed).fit_transform(kmap.X)
        lab = np.asarray([kmap.unit_ids[i] for i in kmap.primary])
        palette = sns.color_palette("tab20", len(kmap.units))
        ax = axes[0, j]
        for u, col in zip(kmap.unit_ids, palette):
            m = lab == u
            ax.scatter(Z[m, 0], Z[m, 1], s=4, color=col, label=u, alpha=0.6)
        ax.set_title(f"{name}: {len(kmap.units)} units")
        ax.legend(markerscale=3, fontsize=7, ncol=2, loc="best")
        ax = axes[1, j]
        ax.bar([u.id for u in kmap.units], [u.size for u in kmap.units], color=palette)
        ax.set_ylabel("passages")
        ax.set_title(f"{name}: unit sizes")
        ax.tick_params(axis="x", rotation=90)
    fig.tight_layout()
    return fig


def confusion_figure(maps: dict[str, kmaps.KnowledgeMap]) -> Any:
    """Per corpus: passages by gold domain x unit (a page without a domain is its own row)."""
    import seaborn as sns

    fig, axes = new_figure(len(maps), 1, figsize=(13, 5.5 * len(maps)), squeeze=False)
    for ax, (name, kmap) in zip(axes[:, 0], maps.items()):
        ct = pd.crosstab(pd.Series([p.domain or "(no domain)" for p in kmap.passages], name="gold"),
                         pd.Series([kmap.unit_ids[i] for i in kmap.primary], name="unit"))
        sns.heatmap(ct, annot=ct.shape[1] <= 16, fmt="d", cmap="mako", cbar=False, ax=ax)
        ax.set_title(f"{name}: gold domain x unit (passages)")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- evaluation
def rnd(v: float | None, n: int = 4) -> float | None:
    """Rounded, or None where the figure is not applicable."""
    return None if v is None else round(v, n)


def evaluate_map(name: str, kmap: kmaps.KnowledgeMap, corpus: Corpus, rows: Sequence[dict[str, Any]],
                 changes: Sequence[dict[str, Any]], k: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the agreement table row, the metrics) of one map: units against gold topics, routed
    against flat Hit@k, the winner's criteria."""
    gold = [p.domain or "" for p in kmap.passages]
    a = kmaps.agreement(kmap.primary, gold)
    if a["nmi"] is None:
        print(f"{name}: fewer than two gold domains: agreement (NMI/ARI/purity) not applicable")
    flat = kmaps.flat_recall(kmap.X, corpus.dev, k)
    r1 = kmaps.routed_recall(kmap.X, kmap.primary, corpus.dev, k, 1)
    r2 = kmaps.routed_recall(kmap.X, kmap.primary, corpus.dev, k, 2)
    if flat is None:
        print(f"{name}: no dev questions with gold passages: flat/routed Hit@{k} not applicable")
    win = rows[0]
    row = {"corpus": name, "units": len(kmap.units), "gold topics": len(set(gold)),
           **{key: rnd(v, 3) for key, v in a.items()},
           f"flat Hit@{k}": rnd(flat, 3), f"routed@1 Hit@{k}": rnd(r1, 3),
           f"routed@2 Hit@{k}": rnd(r2, 3)}
    metrics = {
        "pages": len(corpus.docs), "passages": len(kmap.passages), "configs_searched": len(rows),
        "winner": win["config"], "winner_units": win["units"], "units": len(kmap.units),
        "winner_score": round(win["score"], 4), "coherence": round(win["coherence"], 4),
        "balance": round(win["balance"], 4), "coverage": round(win["coverage"], 4),
        "utility": rnd(win["utility"]), "qc_changes": len(changes),
        "nmi": rnd(a["nmi"]), "ari": rnd(a["ari"]), "purity": rnd(a["purity"]),
        "dev_questions": len(corpus.dev.gold), "flat_hit": rnd(flat),
        "routed1_hit": rnd(r1), "routed2_hit": rnd(r2)}
    return row, metrics


def context_questions(name: str, n: int, seed: int) -> list[Question]:
    """Up to ``n`` seeded questions of the corpus (every set, any split) that have a gold answer:
    what the answer-in-context comparison asks, gold passages or not (a user's folder has none)."""
    qs = [q for f in sorted((DATA / name / "questions").glob("*.jsonl")) for q in load_questions(f) if golds(q)]
    return sampling.seeded_sample(qs, n, seed, salt=SALT)


def baseline_context(kmap: kmaps.KnowledgeMap, questions: Sequence[Question], encoder: Any,
                     k: int) -> dict[str, Any]:
    """{n, flat dense, routed@1, BM25}: the share of questions whose gold answer is in the top-k
    passages each retrieves (routing against both flat baselines)."""
    texts = [kmaps.passage_text(p) for p in kmap.passages]
    ranker = bm25.BM25(texts)
    queries = [dev_text(q) for q in questions]
    vecs = kmaps.embed_texts(encoder, queries) if queries else np.zeros((0, kmap.X.shape[1]), np.float32)
    found: dict[str, list[bool]] = {"flat dense": [], "routed@1": [], "BM25": []}
    for q, query, v in zip(questions, queries, vecs):
        answers = golds(q)
        found["flat dense"].append(bm25.answer_in_context(answers, [h.passage.text for h in kmap.search_flat(v, k)]))
        unit = kmap.route(v, 1)[0]
        found["routed@1"].append(bm25.answer_in_context(answers, [h.passage.text for h in kmap.search(unit, v, k)]))
        found["BM25"].append(bm25.answer_in_context(answers, [texts[i] for i in ranker.top(query, k)]))
    shares = {name: rnd(float(np.mean(v))) if v else None for name, v in found.items()}
    return {"n": len(questions), **shares}


def bm25_hit(kmap: kmaps.KnowledgeMap, corpus: Corpus, k: int) -> float | None:
    """BM25 Hit@k of the dev questions' gold passages (None without dev questions)."""
    if not corpus.dev.gold:
        return None
    ranker = bm25.BM25([kmaps.passage_text(p) for p in kmap.passages])
    return float(np.mean([bool(set(ranker.top(t, k)) & set(g)) for t, g in zip(corpus.dev_texts, corpus.dev.gold)]))


def reassign_agreement(kmap: kmaps.KnowledgeMap) -> float:
    """Share of the map's own passages that nearest-centroid assignment puts back in their
    primary unit (how a passage arriving later would be placed)."""
    return float(np.mean([u == kmap.unit_ids[i] for u, i in zip(kmap.assign(kmap.X), kmap.primary)]))


# --------------------------------------------------------------------------- the stage
def run(params: Params) -> KnowledgeMapResult:
    """Build, save and evaluate one KnowledgeMap per corpus of params.knowledge_map.corpora."""
    import seaborn as sns

    cfg, base = params.knowledge_map, params.base
    data_dir, out_dir = stage_dirs("knowledge_map")
    sns.set_theme(style="whitegrid")
    encoder = registry.load_text_encoder(params.models.text_encoder, allow_network=base.allow_network,
                                         device=base.device)
    result = KnowledgeMapResult()
    tables = result.tables

    corpora = {name: load_corpus(name, cfg, encoder, base.seed) for name in cfg.corpora}
    tables["corpora"] = corpora_table(corpora)

    searches = {}
    for name, corpus in corpora.items():
        rows = search(corpus, cfg, base.seed)
        searches[name] = rows
        print(f"{name}: {len(rows)} configurations in {corpus.search_s:.0f}s")
        tables[f"search/{name}"] = pd.DataFrame(public(rows)).round(3)
    for name, rows in searches.items():
        why, alone = why_tables(name, rows)
        tables[f"why/{name}"], tables[f"alone/{name}"] = why.round(3), alone

    writer = metadata_writer(cfg, base, params.inference)
    maps, changes_all = {}, {}
    for name, corpus in corpora.items():
        kmap, changes = build_map(corpus, searches[name][0], cfg, base.seed, writer)
        kmap.save(data_dir / name)
        write_json(data_dir / name / "meta.json", {"text_encoder": params.models.text_encoder, "corpus": name,
                                                  "config": searches[name][0]["config"]})
        maps[name], changes_all[name] = kmap, changes
        print(f"{name}: {len(kmap.units)} units after the quality check; {len(changes)} changes")
        tables[f"changes/{name}"] = pd.DataFrame(changes)
        tables[f"units/{name}"] = units_table(kmap)

    figures = {"map": map_figure(maps, base.seed), "confusion": confusion_figure(maps)}
    save_figure(figures["map"], out_dir / "map.png", dpi=100)

    agree_rows, metrics = [], {}
    for name, kmap in maps.items():
        row, metrics[name] = evaluate_map(name, kmap, corpora[name], searches[name],
                                          changes_all[name], cfg.k)
        hit = bm25_hit(kmap, corpora[name], cfg.k)
        context = baseline_context(kmap, context_questions(name, cfg.dev_queries, base.seed), encoder, cfg.k)
        row = {**row, f"BM25 Hit@{cfg.k}": rnd(hit, 3),
               **{f"answer in top-{cfg.k}: {s}": v for s, v in context.items() if s != "n"},
               "answer questions": context["n"]}
        metrics[name].update({"bm25_hit": rnd(hit), "answer_in_context": context})
        print(f"{name}: answer in the top-{cfg.k} passages of {context}")
        agree_rows.append(row)
    agree = pd.DataFrame(agree_rows)
    agree["paper units"] = PAPER_UNITS
    tables["agreement"] = agree
    save_figure(figures["confusion"], out_dir / "confusion.png", dpi=90)

    for name, kmap in maps.items():
        same = reassign_agreement(kmap)
        metrics[name]["reassign_agreement"] = round(same, 4)
        print(f"{name}: {same:.3f} of passages land back in their primary unit")

    write_json(out_dir / "metrics.json", metrics)
    write_json(out_dir / "search.json", {n: public(rows) for n, rows in searches.items()})
    result.metrics, result.figures = metrics, figures
    result.corpora, result.maps, result.searches, result.changes = corpora, maps, searches, changes_all
    result.artifacts = {**{f"map/{n}": data_dir / n for n in maps}, "metrics": out_dir / "metrics.json",
                        "search": out_dir / "search.json", "map.png": out_dir / "map.png",
                        "confusion.png": out_dir / "confusion.png"}
    return result
