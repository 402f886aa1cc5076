"""BRIT's MM-RAG test set (Fujitsu/MM-RAG on the Hugging Face hub): ``mm_rag_test.json``.

Top-level keys ``text-image``, ``image-text``, ``image-image``, each a list of entries with
``question``, ``options`` (the multiple-choice options as one string), ``relevant_image``
(paths), ``relevant_text`` (captions or text) and ``ground_truth``. The corpus is the 100
WikiWeb2M pages the questions were written on (load them with the WikiWeb2M loader).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from mmrag.corpora.datasets.common import find, open_text
from mmrag.schema import Document, Question

KINDS = {"text-image": "Text-Image", "image-text": "Image-Text", "image-image": "Image-Image"}
_OPTION = re.compile(r"(?:^|\s|\n)\(?([A-Ha-h])[\).:]\s+")


def parse_options(options) -> list[str]:
    """'A. x B. y' / '(A) x (B) y' / a list -> ['x', 'y'] (raw string kept if unparseable)."""
    if isinstance(options, list):
        return [str(o).strip() for o in options]
    text = str(options or "").strip()
    marks = list(_OPTION.finditer(text))
    if len(marks) < 2:
        return [text] if text else []
    return [text[m.end(): marks[k + 1].start() if k + 1 < len(marks) else len(text)].strip()
            for k, m in enumerate(marks)]


def load(root: str | Path, *, limit: int) -> tuple[list[Document], dict[str, list[Question]]]:
    """The 500 multiple-choice questions, typed Text-Image | Image-Text | Image-Image."""
    path = find(Path(root), "mm_rag_test.json", "mm_rag_test.json.gz")[0]
    with open_text(path) as fh:
        data = json.load(fh)
    qs: list[Question] = []
    for key, kind in KINDS.items():
        for n, row in enumerate(data.get(key, [])):
            if limit and n >= limit:
                break
            images = row.get("relevant_image") or []
            texts = row.get("relevant_text") or []
            images = images if isinstance(images, list) else [images]
            texts = texts if isinstance(texts, list) else [texts]
            qs.append(Question(
                id=f"brit-{key}-{n}", text=row["question"], answer=str(row.get("ground_truth", "")),
                dataset="brit", kind=kind, split="test", choices=parse_options(row.get("options")),
                gold_evidence=[str(i) for i in images],
                meta={"relevant_text": texts, "options_raw": row.get("options")}))
    return [], {"brit": qs}
