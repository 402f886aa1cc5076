"""Stage ``brit_graph``: BRIT's unified image-text graph of a corpus, its triplet extractor scored
against the world's gold, the graph under each linking, incremental updates checked against full
rebuilds, and the graph of the NEA variant of the corpus (for ``brit_linking``'s Table 3).

Writes ``data/brit_graph/<corpus>`` (and ``<corpus>_nea``), ``results/brit_graph/metrics.json``,
``timings.json`` (wall time and memory, kept out of the metrics), ``linking_stats.png`` and
``page_graph.png``.
"""

from __future__ import annotations

import json
import random
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import pandas as pd
from PIL import Image as PILImage

from mmrag.brit.encoders import load_models
from mmrag.brit.evaluation import extraction_scores, read_gold, triplet_scores
from mmrag.brit.graph import Encoders, UnifiedGraph, build_graph, graphs_equal
from mmrag.brit.linking import COMBINATIONS, label
from mmrag.brit.params import BritGraph
from mmrag.brit.triplets import LLMTriplets, SpacyTriplets, Triplet, make_extractor
from mmrag.io import DATA, read_jsonl, save_figure, stage_dirs, write_json
from mmrag.models import generation
from mmrag.models.params import Inference, Models
from mmrag.params import Base, Sections
from mmrag.schema import Document, load_documents
from mmrag.stages import StageResult, new_figure

STAGE = "brit_graph"
LINK_COLOURS = {"CA": "#dd8452", "SI": "#8172b3", "LP": "#937860", "LS": "#55a868"}
INCREMENTAL_PAGES = 12  # the sub-corpus the incremental checks rebuild


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    inference: Inference
    models: Models
    brit_graph: BritGraph


@dataclass
class BritGraphResult(StageResult):
    """The stage's result, plus the built graph and the pages it was built from."""

    graph: UnifiedGraph | None = None
    documents: list[Document] = field(default_factory=list)
    triplets: list[Triplet] = field(default_factory=list)


def load_corpus(corpus_dir: Path, max_docs: int | None) -> list[Document]:
    """The corpus's pages (the first ``max_docs``; None: all), failing with the stage to run."""
    if not (corpus_dir / "documents.jsonl").exists():
        raise FileNotFoundError(f"{corpus_dir}/documents.jsonl is missing: run `dvc repro world` "
                                f"(or set brit_graph.corpus to a corpus folder under data/)")
    docs = load_documents(corpus_dir)
    if max_docs:
        docs = docs[:max_docs]
    print(f"{len(docs)} pages, {sum(len(d.images) for d in docs)} images, "
          f"{sum(len(d.sections) for d in docs)} sections from data/{corpus_dir.name}")
    return docs


def load_llm(cfg: BritGraph, inference: Inference, base: Base) -> Any:
    """The triplet-extraction LLM (``extractor_llm`` on ``engine``) through the generation service."""
    return generation.load_chat(cfg.extractor_llm, engine=cfg.engine, settings=generation.engine_settings(inference),
                                allow_network=base.allow_network, device=base.device)


def load_builders(cfg: BritGraph, models: Models, base: Base, corpus_dir: Path,
                  inference: Inference) -> tuple[Any, Encoders, Any]:
    """(triplet extractor, memoised encoders, spaCy pipeline) the graph is built with, as params ask."""
    nlp, enc = load_models(models.spacy, models.text_encoder, models.clip, corpus_dir, base.allow_network)
    llm = load_llm(cfg, inference, base) if cfg.extractor == "llm" else None
    return make_extractor(cfg.extractor, nlp, cfg.arguments, llm), enc, nlp


def extractor_comparison(docs: list[Document], nlp: Any, extractor: Any, cfg: BritGraph,
                         inference: Inference, base: Base, corpus_dir: Path
                         ) -> pd.DataFrame | None:
    """spaCy's and the LLM's triplets on the same ``llm_sample_pages`` pages (seeded sample), each
    scored against the facts the world states in those sections (precision, recall, F1) with its
    cost per page (seconds; the LLM's prompt and completion tokens). None when off (0 pages) or
    when the corpus has no gold facts."""
    if not cfg.llm_sample_pages:
        return None
    entities, facts = read_gold(corpus_dir)
    if entities is None or facts is None:
        print(f"{corpus_dir.name} has no gold facts: the extractor comparison is not applicable")
        return None
    pages = sorted(random.Random(f"{base.seed}:extractors").sample(docs, min(cfg.llm_sample_pages, len(docs))),
                   key=lambda d: d.id)
    sections = [(d, sec) for d in pages for sec in d.sections]
    gold = [f for f in facts if f["section_id"] in {sec.id for _, sec in sections}]
    names = {e["id"]: e["name"] for e in entities}
    llm_ex = extractor if isinstance(extractor, LLMTriplets) else LLMTriplets(load_llm(cfg, inference, base), nlp=nlp)
    rows = []
    for name, ex in (("spacy", SpacyTriplets(nlp, arguments=cfg.arguments)), (f"llm ({cfg.extractor_llm})", llm_ex)):
        usage = getattr(getattr(ex, "llm", None), "usage", None)
        before = (usage.prompt_tokens, usage.completion_tokens) if usage is not None else (0, 0)
        t0 = time.perf_counter()
        if hasattr(ex, "prefetch"):
            ex.prefetch([sec.text for _, sec in sections])
        triplets = [Triplet(s, r, o, d.id, sec.id, sec.page, "section") for d, sec in sections
                    for s, r, o in ex.extract(sec.text, pronoun_entity=d.title)]
        secs = time.perf_counter() - t0
        row = {"extractor": name, **triplet_scores(triplets, gold, names), "pages": len(pages),
               "seconds_per_page": round(secs / max(len(pages), 1), 2)}
        if usage is not None:
            row["prompt_tokens_per_page"] = round((usage.prompt_tokens - before[0]) / max(len(pages), 1), 1)
            row["completion_tokens_per_page"] = round((usage.completion_tokens - before[1]) / max(len(pages), 1), 1)
        rows.append(row)
    if llm_ex is not extractor and hasattr(llm_ex.llm, "close"):
        llm_ex.llm.close()
    return pd.DataFrame(rows).set_index("extractor")


def timed_build(docs: list[Document], enc: Encoders, extractor: Any, si_top: int
                ) -> tuple[UnifiedGraph, float, float]:
    """(graph, build seconds, peak traced Python memory in MiB) of one full build."""
    tracemalloc.start()
    t0 = time.perf_counter()
    graph = build_graph(docs, enc, extractor, si_top=si_top)
    build_s = time.perf_counter() - t0
    peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return graph, build_s, peak_mb


def graph_triplets(graph: UnifiedGraph) -> list[Triplet]:
    """Every page's triplets, in entry order."""
    return [t for e in graph.docs.values() for t in e.triplets]


def reader_text_table(triplets: list[Triplet], n: int = 12) -> pd.DataFrame:
    """The first ``n`` triplets whose surface form differs from their lemma form: what the graph
    matches on (lemmatised relation) beside what the reader is handed (the fact as extracted)."""
    rows = [{"matching form (graph)": t.lemma_sentence(), "reader's text (surface)": t.sentence(),
             "section": t.section_id} for t in triplets if t.surface and t.surface != t.lemma_sentence()]
    return pd.DataFrame(rows[:n], columns=["matching form (graph)", "reader's text (surface)", "section"])


def reader_text_summary(triplets: list[Triplet]) -> dict[str, int]:
    """How many triplets carry a surface form, and how many of those differ from the lemma form."""
    return {"with_surface": sum(bool(t.surface) for t in triplets),
            "differs": sum(bool(t.surface) and t.surface != t.lemma_sentence() for t in triplets)}


def extraction_table(ie: dict[str, Any], ie_section: dict[str, Any] | None) -> pd.DataFrame:
    """The extractor's scores, corpus level and (where the corpus has facts) per section."""
    return pd.DataFrame([{"level": "entity pairs (corpus)", **ie}] +
                        ([{"level": "facts (per section)", **ie_section}] if ie_section else []))


def linking_stats(graph: UnifiedGraph) -> pd.DataFrame:
    """Graph statistics under every linker combination of the paper's Table 2."""
    return pd.DataFrame([{"linking": label(c), **graph.stats(c)} for c in COMBINATIONS])


def component_sizes(graph: UnifiedGraph, linkers: tuple[str, ...] = ("CA", "LS", "SI")) -> pd.DataFrame:
    """The disjoint graphs retrieval's threshold chooses between: how many components of each size
    (text nodes) the view of ``linkers`` has, largest first, with their share of the nodes. One
    giant component leaves the threshold nothing to filter (every query keeps it)."""
    v = graph.view(linkers)
    per = Counter(Counter(v.component.tolist()).values())
    total = max(len(v.nodes), 1)
    return pd.DataFrame([{"size": size, "components": n, "node_share": round(size * n / total, 4)}
                         for size, n in sorted(per.items(), reverse=True)],
                        columns=["size", "components", "node_share"])


def component_summary(sizes: pd.DataFrame) -> dict[str, Any]:
    """Components, nodes, the largest component's size and share of the nodes (metrics)."""
    if sizes.empty:
        return {"components": 0, "nodes": 0, "largest": 0, "largest_share": None, "singletons": 0}
    nodes = int((sizes["size"] * sizes["components"]).sum())
    largest = int(sizes["size"].max())
    return {"components": int(sizes["components"].sum()), "nodes": nodes, "largest": largest,
            "largest_share": round(largest / nodes, 4),
            "singletons": int(sizes.loc[sizes["size"] == 1, "components"].sum())}


def linking_stats_figure(stats: pd.DataFrame) -> Any:
    """Links per image and images reached, per linking."""
    import seaborn as sns  # seaborn loads matplotlib: only when a figure is drawn

    fig, axes = new_figure(1, 2, figsize=(12, 4))
    sns.barplot(data=stats, x="linking", y="mean_links_per_image", ax=axes[0], color="#4c72b0")
    sns.barplot(data=stats, x="linking", y="images_linked", ax=axes[1], color="#55a868")
    for ax in axes:
        ax.tick_params(axis="x", rotation=60)
    axes[0].set_title("links per image")
    axes[1].set_title("images linked to the text graph")
    fig.tight_layout()
    return fig


def page_graph_figure(graph: UnifiedGraph, page: Document, corpus_dir: Path, seed: int) -> Any:
    """One page's text nodes and triplets with its images as thumbnails; link colour = linker."""
    from matplotlib.offsetbox import AnnotationBbox, OffsetImage  # matplotlib: only when a figure is drawn

    entry = graph.docs[page.id]
    drawn = nx.Graph()
    for t in entry.triplets:
        drawn.add_edge(t.subject, t.object, kind="rel", label=t.relation)
    link_of: dict[tuple[str, str], list[str]] = {}
    names = {}
    for img, node, lk in entry.links:
        if node in graph.g:
            names[node] = graph.name(node)
            link_of.setdefault((img, names[node]), []).append(lk)
    for (img, name), lks in link_of.items():
        drawn.add_edge(f"img:{img}", name, kind="link", linkers=lks)
    pos = nx.spring_layout(drawn, seed=seed, k=0.9)
    fig, ax = new_figure(figsize=(12, 9))
    rel = [(u, v) for u, v, d in drawn.edges(data=True) if d["kind"] == "rel"]
    nx.draw_networkx_edges(drawn, pos, edgelist=rel, ax=ax, width=1.6, edge_color="#4c72b0")
    nx.draw_networkx_edge_labels(drawn, pos, {(u, v): drawn.edges[u, v]["label"] for u, v in rel},
                                 font_size=7, ax=ax)
    for (u, v, d) in drawn.edges(data=True):
        if d["kind"] == "link":
            ax.plot(*zip(pos[u], pos[v]), color=LINK_COLOURS[sorted(d["linkers"])[0]], lw=1, ls="--", alpha=0.7)
    text_nodes = [n for n in drawn if not str(n).startswith("img:")]
    nx.draw_networkx_labels(drawn, pos, {n: n for n in text_nodes}, font_size=8, ax=ax,
                            bbox=dict(fc="white", ec="#4c72b0", boxstyle="round,pad=0.2"))
    paths = {im.id: corpus_dir / im.path for im in page.images}
    for n in drawn:
        if str(n).startswith("img:"):
            thumb = PILImage.open(paths[n[4:]]).convert("RGB").resize((48, 48))
            ax.add_artist(AnnotationBbox(OffsetImage(thumb), pos[n], frameon=True, pad=0.1))
    for lk, c in LINK_COLOURS.items():
        ax.plot([], [], color=c, ls="--", label=lk)
    ax.legend(title="link made by (first linker)")
    ax.set_title(f"page '{page.title}': {len(entry.triplets)} triplets, {len(page.images)} images")
    ax.axis("off")
    fig.tight_layout()
    return fig


def example_page(docs: list[Document], graph: UnifiedGraph, start: int) -> Document:
    """The page to draw: the first from ``start`` on (then from the top) that has triplets."""
    start = min(start, len(docs) - 1)
    order = docs[start:] + docs[:start]
    return next((d for d in order if graph.docs[d.id].triplets), order[0])


def incremental_checks(docs: list[Document], enc: Encoders, extractor: Any, si_top: int
                       ) -> tuple[dict[str, bool], float, float]:
    """({check: passed}, add seconds, delete seconds): on a small sub-corpus, adding a page,
    deleting it again and deleting an original page must each equal a full rebuild."""
    sub = docs[: min(INCREMENTAL_PAGES, len(docs) - 1)]
    extra = docs[len(sub)]
    g_inc = build_graph(sub, enc, extractor, si_top)
    before = g_inc.snapshot()
    t0 = time.perf_counter()
    g_inc.add_documents([extra])
    add_s = time.perf_counter() - t0
    check_add = graphs_equal(g_inc, build_graph(sub + [extra], enc, extractor, si_top))
    t0 = time.perf_counter()
    g_inc.delete_document(extra.id)
    del_s = time.perf_counter() - t0
    check_restore = g_inc.snapshot() == before
    victim = sub[len(sub) // 2]
    g_inc.delete_document(victim.id)
    check_delete = graphs_equal(g_inc, build_graph([d for d in sub if d.id != victim.id], enc, extractor, si_top))
    incremental = {"add_equals_rebuild": not check_add, "add_then_delete_restores": check_restore,
                   "delete_equals_rebuild": not check_delete}
    print(incremental, f"(add {add_s * 1000:.0f} ms, delete {del_s * 1000:.0f} ms)")
    assert all(incremental.values()), (check_add, check_delete)
    return incremental, add_s, del_s


def nea_graph(docs: list[Document], cfg: BritGraph, corpus_dir: Path, graph_dir: Path,
              enc: Encoders, extractor: Any) -> dict[str, Any]:
    """Stats of the NEA corpus's graph (CA+LS+SI), saved beside the original's; {} without NEA
    pages. The NEA corpus differs only in the pages that gained a bridge sentence: it starts
    from the saved graph and replaces those pages incrementally (no full rebuild)."""
    nea_file = corpus_dir / cfg.nea_documents if cfg.nea_documents else None
    if nea_file is None or not nea_file.exists():
        print(f"no NEA pages at {nea_file}: Table 3 will be skipped downstream")
        return {}
    nea_docs = [Document.from_dict(r) for r in read_jsonl(nea_file)]
    if cfg.max_docs:
        nea_docs = nea_docs[: cfg.max_docs]
    graph = UnifiedGraph.load(graph_dir / cfg.corpus, enc, extractor, cfg.si_top)
    original = {d.id: d.to_dict() for d in docs}
    changed = [d for d in nea_docs if original.get(d.id) != d.to_dict()]
    gone = [i for i in original if i not in {d.id for d in nea_docs}]
    for i in gone:
        graph.delete_document(i)
    graph.add_documents(changed)
    print(f"NEA graph: {len(changed)} pages replaced, {len(gone)} removed")
    graph.save(graph_dir / f"{cfg.corpus}_nea")
    stats = graph.stats(("CA", "LS", "SI"))
    print("NEA graph:", stats)
    return stats


def run(params: Params) -> BritGraphResult:
    """Build BRIT's graph of the corpus, score its extractor, check incremental updates, build NEA's."""
    import seaborn as sns  # seaborn loads matplotlib: only when the stage draws its figures

    cfg = params.brit_graph
    data_dir, out_dir = stage_dirs(STAGE)
    sns.set_theme(style="whitegrid")
    corpus_dir = DATA / cfg.corpus
    docs = load_corpus(corpus_dir, cfg.max_docs)
    extractor, enc, nlp = load_builders(cfg, params.models, params.base, corpus_dir, params.inference)
    if not any(d.images for d in docs):
        print(f"data/{cfg.corpus} is text only: no image to link, so the image linkers (CA, LP, LS, SI) "
              "add nothing and every linking's graph is the text graph")

    graph, build_s, peak_mb = timed_build(docs, enc, extractor, cfg.si_top)
    graph.save(data_dir / cfg.corpus)
    triplets = graph_triplets(graph)
    print(f"built in {build_s:.1f}s (peak traced memory {peak_mb:.0f} MiB): {len(triplets)} triplets")
    tables: dict[str, Any] = {
        "triplets": pd.DataFrame([t.to_dict() for t in triplets[:12]])[["subject", "relation", "object",
                                                                       "section_id"]]}

    ie, ie_section, why_not = extraction_scores(triplets, *read_gold(corpus_dir), corpus_dir.name)
    if why_not:
        print(why_not)
    if ie:
        tables["extraction"] = extraction_table(ie, ie_section)
    compared = extractor_comparison(docs, nlp, extractor, cfg, params.inference, params.base, corpus_dir)
    if compared is not None:
        tables["extractors"] = compared
    relations = Counter(t.relation for t in triplets).most_common(12)
    print("most frequent relations:", relations)
    tables["reader_text"] = reader_text_table(triplets)
    surface = reader_text_summary(triplets)
    print(f"the reader sees {surface['with_surface']} of {len(triplets)} triplets in their surface form "
          f"({surface['differs']} differ from the lemma form the graph matches on)")

    tables["linking_stats"] = stats = linking_stats(graph)
    tables["component_sizes"] = sizes = component_sizes(graph)
    components = component_summary(sizes)
    print(f"disjoint graphs (CA+LS+SI): {components['components']} over {components['nodes']} text nodes; "
          f"the largest holds {components['largest']} ({components['largest_share']} of the nodes)")
    page = example_page(docs, graph, cfg.example_page)
    if page.id != docs[min(cfg.example_page, len(docs) - 1)].id:
        print(f"example page {cfg.example_page} has no triplets: drawing '{page.title}' instead")
    figures = {"linking_stats": linking_stats_figure(stats),
               "page_graph": page_graph_figure(graph, page, corpus_dir, params.base.seed)}
    for name, fig in figures.items():
        save_figure(fig, out_dir / f"{name}.png", dpi=110)

    incremental, add_s, del_s = incremental_checks(docs, enc, extractor, cfg.si_top)
    nea = nea_graph(docs, cfg, corpus_dir, data_dir, enc, extractor)

    metrics = {
        "pages": len(docs),
        "triplets": len(triplets),
        "extractor": {"name": extractor.name, "entity_pairs": ie, "section_facts": ie_section},
        # spaCy vs the LLM on the same sample pages (timings vary with the machine: seconds_per_page
        # is also in timings.json's sense, kept here beside the scores it explains)
        "extractors": (json.loads(compared.drop(columns=["seconds_per_page"]).to_json(orient="index"))
                       if compared is not None else None),
        "graph": {label(c): graph.stats(c) for c in COMBINATIONS},
        "components": {**components, "sizes": sizes.to_dict("records")},
        "incremental": incremental,
        "nea_graph": nea,
        "reader_text": surface,
    }
    write_json(out_dir / "metrics.json", metrics)
    if hasattr(getattr(extractor, "llm", None), "close"):
        extractor.llm.close()
    write_json(out_dir / "timings.json", {"build_seconds": round(build_s, 2), "peak_traced_mib": round(peak_mb, 1),
                                          "extractor_seconds_per_page": (compared["seconds_per_page"].to_dict()
                                                                         if compared is not None else None),
                                          "add_page_ms": round(add_s * 1000, 1),
                                          "delete_page_ms": round(del_s * 1000, 1)})
    artifacts = {"graph": data_dir / cfg.corpus, "metrics": out_dir / "metrics.json",
                 "timings": out_dir / "timings.json"}
    if nea:
        artifacts["nea_graph"] = data_dir / f"{cfg.corpus}_nea"
    return BritGraphResult(metrics=metrics, tables=tables, figures=figures, artifacts=artifacts,
                           graph=graph, documents=docs, triplets=triplets)


# --------------------------------------------------------------------------- what we see
def ci(interval: list | None) -> str:
    """" [lo, hi]" of a 95 % interval (empty when there is none)."""
    return "" if not interval or interval[0] is None else f" [{interval[0]:.2f}, {interval[1]:.2f}]"


def what_we_see(metrics: dict[str, Any]) -> str:
    """The figures "what we see" rests on (Markdown), written from this run's metrics."""
    lines = [f"- **Corpus:** {metrics['pages']} pages, {metrics['triplets']} triplets "
             f"({metrics['extractor']['name']})."]
    pairs, facts = metrics["extractor"].get("entity_pairs"), metrics["extractor"].get("section_facts")
    if pairs:
        lines.append(f"- **Extractor, entity pairs:** recall {pairs['recall']:.3f}, precision {pairs['precision']:.3f} "
                     f"({pairs['gold_pairs']} related pairs in the world).")
    if facts:
        lines.append(f"- **Extractor, facts per section (stricter):** recall {facts['recall']:.3f}, precision "
                     f"{facts['precision']:.3f} ({facts['gold_facts']} stated facts).")
    for name, row in (metrics.get("extractors") or {}).items():
        lines.append(f"- **{name} on the {row['pages']} sample pages:** P {row['precision']:.3f}"
                     f"{ci(row.get('precision_ci'))} of {row['extracted']} triplets, R {row['recall']:.3f}"
                     f"{ci(row.get('recall_ci'))} of {row['gold_facts']} facts"
                     + (f", {row['prompt_tokens_per_page']:.0f} prompt + {row['completion_tokens_per_page']:.0f} "
                        f"completion tokens per page" if row.get("prompt_tokens_per_page") else "") + ".")
    comp = metrics["components"]
    lines.append(f"- **Disjoint graphs (CA+LS+SI):** {comp['components']} components over {comp['nodes']} text nodes; "
                 f"the largest holds {comp['largest']} ({comp['largest_share']:.0%}); {comp['singletons']} singletons.")
    graph = metrics["graph"]
    lines.append("- **Images reached per linking** (images linked / all, links per image): " + "; ".join(
        f"{k} {v['images_linked']}/{v['images']}, {v['mean_links_per_image']:.2f}" for k, v in graph.items()) + ".")
    lines.append(f"- **Incremental updates equal full rebuilds:** {metrics['incremental']}.")
    return "\n".join(lines)
