"""Stage `world`: generate the multimodal enterprise wiki with complete gold, and check it.

The seeded generator (:mod:`mmrag.world.files`) writes ``data/world/``; this stage then reads
the files back (as every later stage will), compares their shape with the BRIT test set,
shows sample pages and one question per type, and runs the gold-path oracle
(:mod:`mmrag.world.oracle`) on every question set.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from mmrag.corpora.passages import Chunking
from mmrag.io import DATA, RESULTS, save_figure, write_json
from mmrag.mmr2.params import KnowledgeMap
from mmrag.models import registry
from mmrag.models.params import Models
from mmrag.params import Base, Sections
from mmrag.schema import Document, Question
from mmrag.stages import StageResult, new_figure
from mmrag.world import oracle
from mmrag.world.files import WorldFiles, encoder_similarity, read_world, write_world
from mmrag.world.params import World

# The BRIT paper's test set (quoted from the paper; it does not say how many pages).
BRIT_PAPER = {"pages": None, "images per page": 5.61, "sections per page": 8.83, "questions": 500}


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    knowledge_map: KnowledgeMap
    models: Models
    world: World


@dataclass
class OracleReport:
    """The gold-path oracle on every set: accuracy per kind, and the NEA control."""

    table: pd.DataFrame  # set, kind, oracle accuracy
    missing: int  # gold evidence ids that name nothing in the corpus
    nea_without_bridge: dict[str, float]  # NEA questions followed on the corpus without bridges
    n_anonymised: int  # NEA questions (the anonymised half of the pairs)


@dataclass
class WorldResult(StageResult):
    """The world's statistics (stats.json), the sampled pages and the texts the notebook prints."""

    stats: dict[str, Any] = field(default_factory=dict)
    sample: list[Document] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)


def generate_world(world: World, text_encoder: str, base: Base, chunking: Chunking,
                   data_dir: Path) -> tuple[dict[str, Any], float]:
    """Write ``data_dir`` from ``base.seed`` (BRIT validation uses the text encoder; InfoSeek's gold
    passage ids follow ``chunking``, the knowledge map's); (stats, seconds)."""
    t0 = time.time()
    encoder = registry.load_text_encoder(text_encoder, allow_network=base.allow_network, device="cpu")
    stats = write_world(world, base.seed, data_dir, encoder_similarity(encoder), chunking=chunking)
    return stats, time.time() - t0


def brit_comparison(stats: dict[str, Any]) -> pd.DataFrame:
    """The world's page shape beside the BRIT test set's."""
    ours = {"pages": stats["documents"], "images per page": stats["images_per_page"],
            "sections per page": stats["sections_per_page"], "questions": stats["questions"]["brit"]["n"]}
    return pd.DataFrame({"BRIT paper": BRIT_PAPER, "this world": ours})


def entity_counts(stats: dict[str, Any]) -> pd.DataFrame:
    """Entities per type, then domains, stated facts and images (on pages and held out)."""
    return pd.DataFrame([{"entity type": k, "count": v} for k, v in stats["entities"].items()]
                        + [{"entity type": "domains", "count": stats["domains"]},
                           {"entity type": "stated facts (triplets)", "count": stats["facts"]},
                           {"entity type": "images on pages", "count": stats["images"].get("train", 0)},
                           {"entity type": "held-out images", "count": stats["images"].get("heldout", 0)}])


def sample_pages(documents: list[Document], seed: int, n: int) -> list[Document]:
    """``n`` pages with images drawn with ``random.Random(seed)``, in id order."""
    rng = random.Random(seed)
    with_images = [d for d in documents if d.images]
    return sorted(rng.sample(with_images, min(n, len(with_images))), key=lambda d: d.id)


def pages_figure(sample: list[Document], images: list[dict[str, Any]], data_dir: Path) -> Any:
    """One row per sampled page: its pictures, captions marked [N] naming or [D] descriptive."""
    from PIL import Image as PILImage

    cols = max(len(d.images) for d in sample)
    fig, axes = new_figure(len(sample), cols, figsize=(2.1 * cols, 2.5 * len(sample)), squeeze=False)
    kind_of = {r["id"]: r["caption_kind"] for r in images}
    for r, d in enumerate(sample):
        for c in range(cols):
            ax = axes[r][c]
            ax.axis("off")
            if c < len(d.images):
                im = d.images[c]
                ax.imshow(PILImage.open(data_dir / im.path))
                txt = im.caption if len(im.caption) < 60 else im.caption[:57] + "…"
                ax.set_title(f"{'[N] ' if kind_of[im.id] == 'naming' else '[D] '}{txt}", fontsize=6,
                             wrap=True)
        axes[r][0].text(-0.1, 0.5, d.title, transform=axes[r][0].transAxes, ha="right",
                        va="center", fontsize=9, weight="bold")
    fig.suptitle("Sample pages: [N] naming caption, [D] descriptive-only caption")
    fig.tight_layout()
    return fig


def page_text(doc: Document) -> str:
    """A page as plain text: title, summary, then each section with its layout page and media."""
    lines = [f"# {doc.title}   (domain {doc.domain})\n{doc.summary}\n"]
    for s in doc.sections:
        lines.append(f"## {s.title}  [layout page {s.page}; images {len(s.image_ids)}; "
                     f"tables {len(s.table_ids)}]")
        lines.append(f"{s.text} \n")
    return "\n".join(lines)


def page_table(doc: Document) -> pd.DataFrame:
    """The first table of a page."""
    return pd.DataFrame(doc.tables[0].rows, columns=doc.tables[0].columns)


def describe_question(q: Question, entities: dict[str, dict[str, Any]]) -> str:
    """A question with its history, choices, gold decomposition (tool, answer, evidence) and answer."""
    lines = [f"[{q.dataset} · {q.kind} · {q.split}] {q.text}"]
    if q.image_id:
        lines.append(f"   query image: {q.image_id} "
                     f"({entities[q.gold_entity]['name'] if q.gold_entity else ''})")
    for t in q.history:
        lines.append(f"   history: {t.question} -> {t.answer}")
    if q.choices:
        lines.append(f"   choices: {q.choices}")
    for i, s in enumerate(q.decomposition, 1):
        lines.append(f"   {i}. {s.tool:8s} {s.text} -> {s.answer}   evidence {s.evidence_ids[:4]}"
                     f"{'…' if len(s.evidence_ids) > 4 else ''}")
    lines.append(f"   answer: {q.answer}\n")
    return "\n".join(lines)


def example_questions(sets: dict[str, list[Question]]) -> list[Question]:
    """One question per (kind, source) of mmqa and brit, four of infoseek, the last turn of the
    first conversation, and the first NEA pair (original, anonymised)."""
    out: list[Question] = []
    for name in ("mmqa", "brit", "infoseek"):
        seen: dict[tuple[str, Any], Question] = {}
        for q in sets[name]:
            seen.setdefault((q.kind, q.meta.get("source")), q)
        ordered = [seen[k] for k in sorted(seen, key=str)]
        out += ordered if name != "infoseek" else ordered[:4]
    first = sets["mmcoqa"][0].meta["conversation_id"]
    out.append([q for q in sets["mmcoqa"] if q.meta["conversation_id"] == first][-1])
    out += nea_pair(sets)
    return out


def nea_pair(sets: dict[str, list[Question]]) -> list[Question]:
    """The first BRIT NEA pair: the original question, then its anonymised twin."""
    return [q for q in sets["brit_nea"] if q.meta["pair_id"] == 0]


def examples_text(sets: dict[str, list[Question]], entities: dict[str, dict[str, Any]]) -> str:
    """The example questions described one after another, then the NEA pair's bridge sentence."""
    blocks = [describe_question(q, entities) for q in example_questions(sets)]
    pair = nea_pair(sets)
    if pair:
        blocks.append(f"bridge sentence added to the NEA corpus: {pair[1].meta['bridge_sentence']}")
    return "\n".join(blocks)


def question_counts(sets: dict[str, list[Question]]) -> pd.DataFrame:
    """Questions per (set, kind) and split, with a total column."""
    rows = []
    for name, qs in sets.items():
        for (kind, split), n in sorted(Counter((q.kind, q.split) for q in qs).items()):
            rows.append({"set": name, "kind": kind, "split": split, "n": n})
    counts = pd.DataFrame(rows).pivot_table(index=["set", "kind"], columns="split", values="n",
                                            fill_value=0, aggfunc="sum")
    counts["total"] = counts.sum(axis=1)
    return counts


def question_counts_figure(sets: dict[str, list[Question]]) -> Any:
    """MultiModalQA questions per kind; BRIT questions per kind and source."""
    fig, ax = new_figure(1, 2, figsize=(12, 4))
    mm = Counter(q.kind for q in sets["mmqa"])
    ax[0].barh(list(mm), list(mm.values()), color="tab:blue")
    ax[0].set_title("MultiModalQA-style questions per kind")
    br = Counter(f"{q.kind} / {q.meta['source']}" for q in sets["brit"])
    ax[1].barh(list(br), list(br.values()), color="tab:orange")
    ax[1].set_title("BRIT questions per kind and source")
    fig.tight_layout()
    return fig


def validation_figure(brit: list[Question], threshold: float) -> Any:
    """The similarity of each accepted BRIT question to its source text, against the threshold."""
    import seaborn as sns

    sims = pd.DataFrame([{"kind": f"{q.kind}/{q.meta['source']}", "similarity": q.meta["source_similarity"]}
                         for q in brit])
    fig, ax = new_figure(figsize=(8, 3.5))
    sns.histplot(sims, x="similarity", hue="kind", bins=30, multiple="stack", ax=ax)
    ax.axvline(threshold, color="k", ls="--", label="threshold")
    ax.set_title("Accepted BRIT questions: cosine similarity to their source text")
    fig.tight_layout()
    return fig


def run_oracle(files: WorldFiles) -> OracleReport:
    """Follow every gold path on the written files (NEA pairs on the NEA corpus), and the NEA
    questions once more on the corpus without the bridging sentences."""
    names = {k: v["name"] for k, v in files.entities.items()}
    corpus = oracle.index_corpus(files.documents, files.images, names)
    corpus_nea = oracle.index_corpus(files.nea_documents, files.images, names)
    rows, missing = [], 0
    for name, qs in files.sets.items():
        rep = oracle.check(qs, corpus_nea if name == "brit_nea" else corpus)
        missing += len(rep["missing_evidence"])
        for kind, acc in rep["accuracy"].items():
            rows.append({"set": name, "kind": kind, "oracle accuracy": acc})
    anon = [q for q in files.sets["brit_nea"] if q.meta["nea"]]
    nea_without_bridge = oracle.check(anon, corpus)["accuracy"]
    return OracleReport(pd.DataFrame(rows), missing, nea_without_bridge, len(anon))


def world_metrics(stats: dict[str, Any], n_entities: int, report: OracleReport) -> dict[str, Any]:
    """The world's size and shape, its question sets, and the oracle's worst accuracy."""
    table = report.table
    return {
        "documents": stats["documents"], "entities": n_entities, "domains": stats["domains"],
        "images_per_page": stats["images_per_page"], "sections_per_page": stats["sections_per_page"],
        "layout_pages_per_document": stats["layout_pages_per_document"],
        "images_train": stats["images"].get("train", 0), "images_heldout": stats["images"].get("heldout", 0),
        "facts": stats["facts"],
        "questions": {n: v["n"] for n, v in stats["questions"].items()},
        "mmqa_kinds": stats["questions"]["mmqa"]["kind"],
        "mmqa_splits": stats["questions"]["mmqa"]["split"],
        "infoseek_splits": stats["questions"]["infoseek"]["split"],
        "mmcoqa_conversations": stats["questions"]["mmcoqa"]["conversations"],
        "mmcoqa_turns_per_conversation": stats["questions"]["mmcoqa"]["turns_per_conversation"],
        "brit_by_source": stats["questions"]["brit"]["by_source"],
        "brit_rejection_rate": stats["brit_rejection_rate"],
        "oracle_min_accuracy": round(float(table[table.set != "brit_nea"]["oracle accuracy"].min()), 4),
        "oracle_nea_accuracy": round(float(table[table.set == "brit_nea"]["oracle accuracy"].min()), 4)
        if report.n_anonymised else None,
        "missing_evidence": report.missing,
    }


def run(params: Params) -> WorldResult:
    """Generate data/world from params.world, base.seed and the knowledge_map chunking, then describe
    and check it."""
    import seaborn as sns

    world, base = params.world, params.base
    data_dir, out_dir = DATA / "world", RESULTS / "world"
    out_dir.mkdir(parents=True, exist_ok=True)
    sns.set_theme(style="whitegrid")

    chunking = Chunking.of(params.knowledge_map)
    stats, seconds = generate_world(world, params.models.text_encoder, base, chunking, data_dir)
    files = read_world(data_dir)
    texts = {"generation": f"{len(files.documents)} pages, {len(files.entities)} entities, "
                           f"{len(files.images)} images in {seconds:.0f} s"}

    sample = sample_pages(files.documents, base.seed, world.samples)
    figures = {"pages": pages_figure(sample, files.images, data_dir),
               "question_counts": question_counts_figure(files.sets),
               "validation": validation_figure(files.sets["brit"], world.validation_threshold)}
    for name, fig in figures.items():
        save_figure(fig, out_dir / f"{name}.png", dpi=100)
    texts["sample_page"] = page_text(sample[0])
    texts["examples"] = examples_text(files.sets, files.entities)

    report = run_oracle(files)
    texts["oracle"] = (f"missing gold evidence ids: {report.missing}\n"
                       f"NEA questions followed on the corpus WITHOUT bridging sentences: "
                       f"{report.nea_without_bridge}")
    metrics = world_metrics(stats, len(files.entities), report)
    write_json(out_dir / "metrics.json", metrics)
    texts["timing"] = f"generation took {seconds:.1f} s (timings stay out of metrics.json)"

    tables = {"brit_comparison": brit_comparison(stats), "entity_counts": entity_counts(stats),
              "sample_page_table": page_table(sample[0]), "question_counts": question_counts(files.sets),
              "validation": pd.DataFrame(stats["brit_validation"]).T, "oracle": report.table}
    artifacts = {"world": data_dir, **{name: out_dir / f"{name}.png" for name in figures}}
    return WorldResult(metrics=metrics, tables=tables, figures=figures, artifacts=artifacts,
                       stats=stats, sample=sample, texts=texts)
