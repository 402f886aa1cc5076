"""Encyclopedic-VQA (Mensink et al. 2023): {train,val,test}.csv + encyclopedic_kb_wiki.json.

CSV columns: ``question``, ``answer`` ('|' between annotators, '&&' between parts of a
multi-answer), ``dataset_image_ids``, ``dataset_name``, ``dataset_category_id``,
``question_type`` (templated | automatic | multi_answer | 2_hop), ``wikipedia_url`` ('|' for
2-hop), ``wikipedia_title``, ``evidence``, ``evidence_section_id``, ``evidence_section_title``,
``encyclopedic_vqa_split``, ``question_original``, ``wikipedia_url_used_in_train``.
KB: ``{wikipedia_url: {title, section_titles, section_texts, image_urls,
image_reference_descriptions, image_section_indices, url}}``. One Question per CSV row, its
first image as the query image (all ids in meta).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from mmrag.corpora.datasets.common import find, open_text, short_hash
from mmrag.corpora.layout import slug
from mmrag.schema import Document, Image, Question, Section


def doc_id_for(url: str, title: str = "") -> str:
    """Stable id for a Wikipedia URL (the KB's key)."""
    name = title or url.rstrip("/").rsplit("/", 1)[-1]
    return f"{slug(name, 60)}_{short_hash(url)[:6]}"


def load_kb(path: Path, limit: int = 0) -> list[Document]:
    """KB entries -> Documents with sections and captioned images (URLs in meta)."""
    with open_text(path) as fh:
        kb = json.load(fh)
    docs = []
    for url, entry in kb.items():
        did = doc_id_for(url, entry.get("title", ""))
        doc = Document(id=did, title=entry.get("title", ""), entity_id=did, source="evqa",
                       meta={"url": url, "image_urls": {}})
        for i, (t, x) in enumerate(zip(entry.get("section_titles", []),
                                       entry.get("section_texts", []))):
            doc.sections.append(Section(id=f"{did}#s{i}", doc_id=did, title=t, text=x))
        caps = entry.get("image_reference_descriptions", [])
        where = entry.get("image_section_indices", [])
        for j, u in enumerate(entry.get("image_urls", [])):
            sec = where[j] if j < len(where) else None
            img = Image(id=f"{did}#img{j}", doc_id=did,
                        path=f"images/{short_hash(u)}{Path(u.split('?')[0]).suffix.lower() or '.jpg'}",
                        caption=caps[j] if j < len(caps) else "",
                        section_id=f"{did}#s{sec}" if sec is not None else None, entity_id=did)
            doc.images.append(img)
            doc.meta["image_urls"][img.id] = u
        docs.append(doc)
        if limit and len(docs) >= limit:
            break
    return docs


def to_question(row: dict, n: int) -> Question:
    """One CSV row -> one Question (answers split on '|', first image as the query)."""
    answers = [a.strip() for a in row.get("answer", "").split("|") if a.strip()]
    ids = [i.strip() for i in row.get("dataset_image_ids", "").split("|") if i.strip()]
    urls = [u for u in row.get("wikipedia_url", "").split("|") if u]
    titles = row.get("wikipedia_title", "").split("|")
    gold = [doc_id_for(u, titles[k] if k < len(titles) else "") for k, u in enumerate(urls)]
    secs = [s for s in row.get("evidence_section_id", "").split("|") if s.strip()]
    dataset = row.get("dataset_name", "")
    return Question(
        id=f"evqa-{row.get('encyclopedic_vqa_split', '')}-{n}", text=row["question"],
        answer=answers[0] if answers else "", answer_aliases=answers[1:], dataset="evqa",
        kind=row.get("question_type", ""), split=row.get("encyclopedic_vqa_split", "test"),
        image_id=ids[0] if ids else None,
        image_path=f"images/{dataset}/{ids[0]}.jpg" if ids else None,
        gold_entity=gold[-1] if gold else None,
        gold_evidence=[f"{g}#s{s.strip()}" for g, s in zip(gold, secs)],
        meta={"dataset_image_ids": ids, "dataset_name": dataset, "evidence": row.get("evidence", ""),
              "wikipedia_url": row.get("wikipedia_url", "")})


def load(root: str | Path, *, limit: int) -> tuple[list[Document], dict[str, list[Question]]]:
    """Questions of every split CSV, and the KB when it is there."""
    root = Path(root)
    qs: list[Question] = []
    for path in find(root, "train.csv", "val.csv", "test.csv"):
        with path.open(encoding="utf-8", newline="") as fh:
            for n, row in enumerate(csv.DictReader(fh)):
                if limit and n >= limit:
                    break
                qs.append(to_question(row, n))
    kb = find(root, "encyclopedic_kb_wiki.json", "encyclopedic_kb_wiki.json.gz", required=False)
    return (load_kb(kb[0]) if kb else []), {"evqa": qs}
