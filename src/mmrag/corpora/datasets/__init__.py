"""Loaders for the papers' datasets, each mapping the authors' documented format to the schema.

``load(name, path, limit)`` returns ``(documents, {question_set: questions})``; the stage
writes them as ``data/datasets/<name>/`` in the corpus layout.
"""

from __future__ import annotations

from pathlib import Path

from mmrag.corpora.datasets import brit, evqa, infoseek, mmcoqa, mmqa, wikiweb2m
from mmrag.corpora.datasets.common import DatasetError
from mmrag.io import ROOT

LOADERS = {"wikiweb2m": wikiweb2m.load, "brit": brit.load, "mmqa": mmqa.load,
           "mmcoqa": mmcoqa.load, "infoseek": infoseek.load, "evqa": evqa.load}

# what each loader reads, and the published size (the authors' numbers, for scale)
CATALOGUE = [
    {"loader": "wikiweb2m", "paper": "BRIT (corpus)", "files": "*.tfrecord(.gz) SequenceExample",
     "published size": "1,803,225 / 100,475 / 100,833 pages (train/val/test)"},
    {"loader": "brit", "paper": "BRIT", "files": "mm_rag_test.json",
     "published size": "500 questions on 100 WikiWeb2M pages"},
    {"loader": "mmqa", "paper": "DnC", "files": "MMQA_{train,dev,test}.jsonl + texts/tables/images",
     "published size": "29,918 questions"},
    {"loader": "mmcoqa", "paper": "DnC", "files": "MMCoQA_{train,dev,test}.txt + MMQA contexts",
     "published size": "see the MMCoQA paper"},
    {"loader": "infoseek", "paper": "MM-R2", "files": "infoseek_*.jsonl (+_withkb) + Wiki6M_ver_1_0.jsonl",
     "published size": "see the InfoSeek paper"},
    {"loader": "evqa", "paper": "MM-R2", "files": "{train,val,test}.csv + encyclopedic_kb_wiki.json",
     "published size": "221k questions, ~1M VQA triplets"},
]


def catalogue() -> list[dict[str, str]]:
    """The loaders, the files each reads, and the published dataset sizes."""
    return [dict(row) for row in CATALOGUE]


def load(name: str, path: str | Path, *, limit: int):
    """Run one loader on a downloaded dataset folder (relative paths: from the repo root)."""
    if name not in LOADERS:
        raise DatasetError(f"corpora.datasets: unknown dataset '{name}'; "
                           f"known: {', '.join(sorted(LOADERS))}")
    root = Path(path)
    root = root if root.is_absolute() else ROOT / root
    if not root.exists():
        raise DatasetError(f"corpora.datasets.{name} = '{path}' does not exist: download "
                           f"{name} there (see notebooks/05_corpora) or remove the entry")
    return LOADERS[name](root, limit=limit)
