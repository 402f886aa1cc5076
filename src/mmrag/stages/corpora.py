"""Stage `corpora`: real documents through the same door as the generated world.

Two roads into the corpus layout (:mod:`mmrag.corpora.layout`): a folder of your own documents,
or the demo folder built from the Wikipedia corpus of stage ``wiki`` (``data/folder``, with an
ingestion report), and the papers' dataset formats (``data/datasets``, when ``corpora.datasets``
names downloaded files). The Wikipedia corpus itself (``data/wiki``) is stage ``wiki``'s: a
folder edit reruns ``folder_manifest`` -> ``corpora``, never ``wiki``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mmrag.corpora import datasets, demo, ingest
from mmrag.corpora.layout import corpus_stats, write_corpus
from mmrag.corpora.params import Corpora, Folder
from mmrag.corpora.report import IngestReport
from mmrag.io import DATA, ROOT, atomic_dir, save_figure, stage_dirs, write_json
from mmrag.params import Base, Sections
from mmrag.schema import Document, Question, load_documents
from mmrag.stages import StageResult, new_figure


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    corpora: Corpora


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
    """The folder and the datasets, and the texts the notebook prints."""

    folder: FolderIngest | None = None
    texts: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- 1 · your folder
def ingest_options(folder: Folder) -> ingest.IngestOptions:
    """The ingestion knobs of params `corpora.folder`, every one passed explicitly."""
    return ingest.IngestOptions(page_chars=folder.page_chars, min_image_side=folder.min_image_side,
                                max_image_side=folder.max_image_side,
                                max_image_pixels=folder.max_image_pixels,
                                max_zim_articles=folder.max_zim_articles,
                                max_image_repeats=folder.max_image_repeats)


def wiki_documents(wiki_dir: Path) -> list[Document]:
    """The documents of stage ``wiki``'s corpus (the demo folder is built from them)."""
    if not (wiki_dir / "documents.jsonl").exists():
        raise FileNotFoundError(f"{wiki_dir}/documents.jsonl is missing: the demo folder "
                                f"(corpora.folder.path: null) is built from the wiki corpus; run "
                                f"`bin/py -m dvc repro wiki`, or set corpora.folder.path to your folder")
    return load_documents(wiki_dir)


def ingest_documents(folder: Folder, wiki_dir: Path, out_dir: Path) -> FolderIngest:
    """Ingest ``corpora.folder.path`` into out_dir, or, when it is null, a demo folder built
    from the wiki corpus in ``wiki_dir`` (with deliberately broken inputs) in a scratch directory."""
    options = ingest_options(folder)
    with tempfile.TemporaryDirectory() as scratch:
        if folder.path:
            src = Path(folder.path)
            src = src if src.is_absolute() else ROOT / src
            origin, demo_groups = "your folder", {}
        else:
            src = Path(scratch) / "my_documents"
            demo_groups = demo.build_demo_folder(wiki_documents(wiki_dir), wiki_dir, src)
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


# --------------------------------------------------------------------------- 2 · datasets
def convert_datasets(corpora: Corpora, out_dir: Path) -> list[dict[str, Any]]:
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
def corpora_metrics(folder: FolderIngest, converted: list[dict[str, Any]]) -> dict[str, Any]:
    """Sizes of the folder and its ingestion problems; datasets converted. (The wiki corpus's
    numbers are stage ``wiki``'s: results/wiki/metrics.json.)"""
    f_docs = folder.documents
    return {
        "folder_documents": len(f_docs),
        "folder_images": sum(len(d.images) for d in f_docs),
        "folder_questions": sum(len(v) for v in folder.questions.values()),
        "folder_problems": dict(sorted(folder.report.problems.items())),
        "datasets_converted": len(converted),
    }


def run(params: Params) -> CorporaResult:
    """Write data/folder and data/datasets from params.corpora (the demo folder, when
    ``corpora.folder.path`` is null, from stage ``wiki``'s data/wiki), and measure them."""
    import seaborn as sns

    corpora = params.corpora
    _, out_dir = stage_dirs("corpora")
    sns.set_theme(style="whitegrid")
    tables: dict[str, Any] = {}
    figures: dict[str, Any] = {}
    texts: dict[str, str] = {}

    # 1 · your own documents (or the demo folder)
    folder = ingest_documents(corpora.folder, DATA / "wiki", DATA / "folder")
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

    # 2 · the papers' datasets
    tables["catalogue"] = pd.DataFrame(datasets.catalogue())
    converted = convert_datasets(corpora, DATA / "datasets")
    if converted:
        tables["converted"] = pd.DataFrame(converted)
    else:
        texts["datasets"] = "no paper datasets configured (corpora.datasets is empty)"

    metrics = corpora_metrics(folder, converted)
    write_json(out_dir / "metrics.json", metrics)
    for name, fig in figures.items():
        save_figure(fig, out_dir / f"{name}.png", dpi=90)
    artifacts = {"folder": DATA / "folder", "datasets": DATA / "datasets",
                 "ingest_report": out_dir / "ingest_report.json",
                 **{name: out_dir / f"{name}.png" for name in figures}}
    return CorporaResult(metrics=metrics, tables=tables, figures=figures, artifacts=artifacts,
                         folder=folder, texts=texts)
