"""MMCoQA (Li et al. 2022): conversations over MMQA's texts, tables and images.

``MMCoQA_{train,dev,test}.txt``: one JSON object per line with ``qid``, ``question`` (as asked in
the conversation), ``gold_question`` (self-contained rewrite), ``history`` [{question,
answer [{answer}]}], ``answer`` [{answer, text_instances, image_instances, ...}],
``question_type`` (text | table | image) and ``table_id``. The evidence collection is MMQA's
(``*_MMQA_texts.jsonl`` etc.).
"""

from __future__ import annotations

from pathlib import Path

from mmrag.corpora.datasets.common import find, jsonl
from mmrag.corpora.datasets.mmqa import load_contexts
from mmrag.schema import Document, Question, Turn


def _first_answer(answers) -> str:
    if isinstance(answers, list) and answers:
        a = answers[0]
        return str(a.get("answer", "")) if isinstance(a, dict) else str(a)
    return str(answers or "")


def to_question(row: dict, split: str) -> Question:
    """One turn: `history` carries the earlier turns, meta the conversation id and turn."""
    history = [Turn(question=h.get("question", ""), answer=_first_answer(h.get("answer")))
               for h in row.get("history", [])]
    answers = row.get("answer", [])
    evidence = [inst["doc_id"] for a in answers if isinstance(a, dict)
                for key in ("text_instances", "image_instances") for inst in a.get(key, [])]
    if row.get("question_type") == "table" and row.get("table_id"):
        evidence.append(row["table_id"])
    qid = str(row["qid"])
    return Question(
        id=qid, text=row["question"], answer=_first_answer(answers), dataset="mmcoqa",
        kind=row.get("question_type", ""), split=split, history=history,
        gold_evidence=list(dict.fromkeys(evidence)),
        meta={"conversation_id": qid.rsplit("_", 1)[0] if "_" in qid else qid,
              "turn": len(history) + 1, "gold_question": row.get("gold_question", "")})


def load(root: str | Path, *, limit: int) -> tuple[list[Document], dict[str, list[Question]]]:
    """Evidence pages and every conversation turn of MMCoQA."""
    root = Path(root)
    qs: list[Question] = []
    for split in ("train", "dev", "test"):
        for path in find(root, f"MMCoQA_{split}.txt", f"MMCoQA_{split}.text",
                         f"MMCoQA_{split}.jsonl", required=False):
            for n, row in enumerate(jsonl(path)):
                if limit and n >= limit:
                    break
                qs.append(to_question(row, split))
    if not qs:
        find(root, "MMCoQA_dev.txt")  # raises with the fix
    return load_contexts(root), {"mmcoqa": qs}
