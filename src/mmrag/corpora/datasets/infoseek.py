"""InfoSeek (Chen et al. 2023): visual info-seeking questions + the Wiki6M knowledge base.

``infoseek_{train,val,test}.jsonl``: ``data_id``, ``image_id``, ``question``, ``answer`` (list),
``answer_eval``, ``data_split`` (e.g. ``val_unseen_entity``); ``*_withkb.jsonl`` adds
``entity_id`` (a Wikidata id). KB ``Wiki6M_ver_1_0.jsonl(.gz)``: ``wikidata_id``,
``wikipedia_title``, ``wikipedia_content``. Images are OVEN snapshots, expected as
``images/<image_id>.jpg`` in the corpus folder. Validation becomes the two held-out test splits
(the official test answers are hidden): ``test_unseen_entity`` and ``test_unseen_question``.
"""

from __future__ import annotations

from pathlib import Path

from mmrag.corpora.datasets.common import find, jsonl
from mmrag.schema import Document, Question, Section

SPLITS = {"val_unseen_entity": "test_unseen_entity", "val_unseen_question": "test_unseen_question",
          "train": "train", "test_unseen_entity": "test_unseen_entity",
          "test_unseen_question": "test_unseen_question"}


def load_kb(root: Path, limit: int = 0) -> list[Document]:
    """Wiki6M entries -> one Document per Wikidata entity (id = the Wikidata id)."""
    docs = []
    for path in find(root, "Wiki6M*.jsonl", "Wiki6M*.jsonl.gz", required=False):
        for row in jsonl(path):
            qid = row["wikidata_id"]
            text = row.get("wikipedia_content") or row.get("wikipedia_summary") or ""
            docs.append(Document(id=qid, title=row.get("wikipedia_title", ""), entity_id=qid,
                                 summary=row.get("wikipedia_summary", "") or "",
                                 sections=[Section(id=f"{qid}#s0", doc_id=qid, title="",
                                                   text=text)] if text else [],
                                 source="infoseek"))
            if limit and len(docs) >= limit:
                return docs
    return docs


def load(root: str | Path, *, limit: int) -> tuple[list[Document], dict[str, list[Question]]]:
    """Questions (with gold entities where a *_withkb file gives them) and the KB."""
    root = Path(root)
    entity: dict[str, str] = {}
    for path in find(root, "infoseek_*_withkb.jsonl", required=False):
        for row in jsonl(path):
            if row.get("entity_id"):
                entity[row["data_id"]] = row["entity_id"]
    qs: list[Question] = []
    for path in find(root, "infoseek_train.jsonl", "infoseek_val.jsonl", "infoseek_test.jsonl"):
        for n, row in enumerate(jsonl(path)):
            if limit and n >= limit:
                break
            answers = row.get("answer") or []
            answers = [str(a) for a in (answers if isinstance(answers, list) else [answers])]
            raw_split = row.get("data_split", path.stem.split("_")[1])
            qs.append(Question(
                id=row["data_id"], text=row["question"], answer=answers[0] if answers else "",
                answer_aliases=answers[1:], dataset="infoseek", split=SPLITS.get(raw_split, raw_split),
                image_id=row.get("image_id"), image_path=f"images/{row.get('image_id')}.jpg",
                gold_entity=row.get("entity_id") or entity.get(row["data_id"]),
                meta={"data_split": raw_split, "answer_eval": row.get("answer_eval")}))
    return load_kb(root), {"infoseek": qs}
