"""MultiModalQA (Talmor et al. 2021): MMQA_{train,dev,test}.jsonl(.gz) + texts, tables, images.

Questions: ``qid``, ``question``, ``answers`` [{answer, type, modality, text_instances,
table_indices, image_instances}], ``metadata`` {type, modalities, image_doc_ids, text_doc_ids,
table_id, intermediate_answers, ...}, ``supporting_context`` [{doc_id, doc_part}]. Contexts:
texts {title, url, id, text}; tables {title, url, id, table {table_rows [[{text, links}]],
table_name, header [{column_name, metadata}]}}; images {title, url, id, path}.
Documents are the Wikipedia pages (grouped by url); MMQA ids are kept as Section, Table and
Image ids, so ``supporting_context`` becomes ``gold_evidence`` unchanged. MMCoQA reuses them.
A question with several gold answers (a list answer) keeps them as ONE answer "a, b, c" (the
list rule of :func:`mmrag.evaluate.metrics.same_list`), never as an answer plus aliases. A
missing context file refuses nothing: the questions keep the evidence that exists, and the
ids it lacks are counted (``meta["missing_evidence"]``).
"""

from __future__ import annotations

from pathlib import Path

from mmrag.corpora.datasets.common import find, jsonl, short_hash
from mmrag.corpora.layout import slug
from mmrag.schema import Document, Image, Question, Section, Table


def load_contexts(root: Path) -> list[Document]:
    """texts/tables/images jsonl -> one Document per Wikipedia page (a missing file adds nothing)."""
    pages: dict[str, Document] = {}

    def page(row: dict) -> Document:
        key = row.get("url") or row.get("title", "")
        if key not in pages:
            title = row.get("title", "")
            doc_id = f"{slug(title, 60)}_{short_hash(key)[:6]}"
            pages[key] = Document(id=doc_id, title=title, source="mmqa", meta={"url": key})
        return pages[key]

    for path in find(root, "*texts.jsonl", "*texts.jsonl.gz", required=False):
        for row in jsonl(path):
            doc = page(row)
            doc.sections.append(Section(id=row["id"], doc_id=doc.id, title="", text=row["text"]))
    for path in find(root, "*tables.jsonl", "*tables.jsonl.gz", required=False):
        for row in jsonl(path):
            doc = page(row)
            tab = row.get("table", {})
            cols = [h.get("column_name", "") for h in tab.get("header", [])]
            rows = [[c.get("text", "") for c in r] for r in tab.get("table_rows", [])]
            doc.tables.append(Table(id=row["id"], doc_id=doc.id, columns=cols, rows=rows,
                                    title=tab.get("table_name", "")))
    for path in find(root, "*images.jsonl", "*images.jsonl.gz", required=False):
        for row in jsonl(path):
            doc = page(row)
            doc.images.append(Image(id=row["id"], doc_id=doc.id, path=f"images/{row['path']}",
                                    caption=row.get("title", "")))
    return sorted(pages.values(), key=lambda d: d.id)


def to_question(row: dict, split: str) -> Question:
    """One MMQA question; test questions have no answers (answer ''). Several gold answers are a
    list answer, kept as one answer "a, b, c" (naming a single item is not the answer)."""
    answers = [str(a.get("answer", "")) for a in row.get("answers", [])]
    meta = dict(row.get("metadata", {}))
    return Question(
        id=row["qid"], text=row["question"], answer=", ".join(answers), dataset="mmqa",
        kind=meta.get("type", ""), split=split,
        gold_evidence=[c["doc_id"] for c in row.get("supporting_context", [])],
        meta={k: meta[k] for k in ("modalities", "image_doc_ids", "text_doc_ids", "table_id",
                                   "intermediate_answers", "wiki_entities_in_question")
              if k in meta})


def load(root: str | Path, *, limit: int) -> tuple[list[Document], dict[str, list[Question]]]:
    """Pages and the train/dev/test questions of MultiModalQA."""
    root = Path(root)
    qs: list[Question] = []
    for split in ("train", "dev", "test"):
        for path in find(root, f"*MMQA_{split}.jsonl", f"*MMQA_{split}.jsonl.gz",
                         f"MultiModalQA_{split}.jsonl.gz", required=False):
            rows = jsonl(path)
            for n, row in enumerate(rows):
                if limit and n >= limit:
                    break
                qs.append(to_question(row, split))
    if not qs:
        find(root, "*MMQA_dev.jsonl*")  # raises with the fix
    docs = load_contexts(root)
    drop_missing_evidence(docs, qs, root)
    return docs, {"mmqa": qs}


def drop_missing_evidence(docs: list[Document], qs: list[Question], root: Path) -> int:
    """Keep each question, without the gold evidence ids no context file holds (a missing
    texts/tables/images file); they go to ``meta["missing_evidence"]``. Returns how many
    questions lost evidence, and says so."""
    have = {x.id for d in docs for x in (*d.sections, *d.tables, *d.images)}
    hit = 0
    for q in qs:
        gone = [e for e in q.gold_evidence if e not in have]
        if gone:
            hit += 1
            q.gold_evidence = [e for e in q.gold_evidence if e in have]
            q.meta["missing_evidence"] = gone
    if hit:
        print(f"{root}: {hit} of {len(qs)} questions keep only part of their gold evidence "
              f"(the rest is in no texts/tables/images file there)")
    return hit
