"""Write and summarise a corpus folder (documents.jsonl, images/, questions/<set>.jsonl).

Every corpus this stage produces (real Wikipedia, your own folder, a paper's dataset) goes
through :func:`write_corpus`, so every downstream stage reads the same layout.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mmrag.io import write_json, write_jsonl
from mmrag.schema import Document, Question


def slug(text: str, max_len: int = 80) -> str:
    """A filesystem- and URL-safe id from a title: ascii, lowercase, underscores."""
    norm = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    s = re.sub(r"[^a-z0-9]+", "_", norm.lower()).strip("_")
    return s[:max_len].rstrip("_") or "untitled"


def unique_ids(names: Iterable[str]) -> list[str]:
    """Slugs made unique in order: a repeat gets `_2`, `_3`, ... (deterministic)."""
    seen: Counter[str] = Counter()
    out = []
    taken: set[str] = set()
    for name in names:
        base = slug(name)
        cand = base
        while cand in taken:
            seen[base] += 1
            cand = f"{base}_{seen[base] + 1}"
        taken.add(cand)
        out.append(cand)
    return out


def write_corpus(out_dir: str | Path, documents: list[Document],
                 question_sets: Mapping[str, list[Question]], meta: Mapping[str, Any] | None = None
                 ) -> Path:
    """documents.jsonl + questions/<set>.jsonl (+ corpus.json) into an existing corpus folder.

    Images are expected under ``out_dir/images`` already (Image.path is relative to out_dir).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl(out_dir / "documents.jsonl", (d.to_dict() for d in documents))
    for name, questions in question_sets.items():
        write_jsonl(out_dir / "questions" / f"{name}.jsonl", (q.to_dict() for q in questions))
    write_json(out_dir / "corpus.json", {"stats": corpus_stats(documents),
                                         "question_sets": {k: len(v) for k, v in
                                                           question_sets.items()},
                                         **dict(meta or {})})
    return out_dir


def corpus_stats(documents: list[Document]) -> dict[str, Any]:
    """Counts a reader checks first: documents, sections, images, tables, domains."""
    domains = Counter(d.domain or "(none)" for d in documents)
    return {
        "documents": len(documents),
        "sections": sum(len(d.sections) for d in documents),
        "images": sum(len(d.images) for d in documents),
        "tables": sum(len(d.tables) for d in documents),
        "domains": dict(sorted(domains.items())),
        "text_chars": sum(len(s.text) for d in documents for s in d.sections),
    }
