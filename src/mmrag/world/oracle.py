"""The gold-path oracle: follow a question's gold evidence, hop by hop, to its answer.

Every generated question stores ``meta['path']``, a list of hops over corpus items. The oracle
executes them against the corpus files alone (documents, image index, entity names), never
against the generator's memory, so a pass proves the written corpus supports the gold answer:

- ``table``: read the value of a key/value table row; ``table_select``: the rows whose column
  holds a value;
- ``image_attr``: read a gold attribute of an image (checking it depicts the hop's subject);
  ``image_select``: the depicted entities whose images show a value; ``image_entity``: who
  is depicted (the InfoSeek recognition step);
- ``text`` / ``text_list`` / ``caption``: find a sentence of the evidence that mentions the
  subject and the answer (text is free prose, so the oracle verifies rather than extracts);
- ``intersect`` / ``compare``: combine earlier hops.

``$k`` in a hop refers to the result of hop k (1-based). The oracle returns None where a hop
finds nothing, which is how a broken gold path shows up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mmrag.schema import Document, Question, Table

_SENT = re.compile(r"(?<=[.!?])\s+")


@dataclass
class CorpusIndex:
    """What the oracle may read: texts by section id, tables, images (entity, attributes, caption)."""

    sections: dict[str, str]
    tables: dict[str, Table]
    images: dict[str, dict[str, Any]]  # id -> {entity, attributes, caption}

    def has(self, item_id: str) -> bool:
        return item_id in self.sections or item_id in self.tables or item_id in self.images


def index_corpus(documents: Iterable[Document], images: Iterable[Mapping[str, Any]],
                 names: Mapping[str, str]) -> CorpusIndex:
    """Index documents and the image index (rows of images.jsonl); names: entity id -> name."""
    sections, tables = {}, {}
    for d in documents:
        for s in d.sections:
            sections[s.id] = s.text
        for t in d.tables:
            tables[t.id] = t
    imgs = {r["id"]: {"entity": names.get(r["entity_id"], ""), "attributes": r["attributes"],
                      "caption": r.get("caption", "")} for r in images}
    for d in documents:  # captions as written on the pages win
        for im in d.images:
            if im.id in imgs:
                imgs[im.id]["caption"] = im.caption
    return CorpusIndex(sections, tables, imgs)


def _sentences(text: str) -> list[str]:
    return _SENT.split(text)


def _find(texts: list[str], subject: str, answer: str) -> bool:
    return any(subject in s and answer in s for t in texts for s in _sentences(t))


def _one(values: list[str], many: bool) -> Any:
    if many:
        return values
    return values[0] if len(values) == 1 else None


def run_hop(hop: Mapping[str, Any], results: list[Any], C: CorpusIndex) -> Any:
    """Execute one hop; None when the evidence does not support it."""
    def res(v: Any) -> Any:
        if isinstance(v, str) and v.startswith("$"):
            return results[int(v[1:]) - 1]
        return v

    op, ev = hop["op"], hop.get("evidence", [])
    if any(not C.has(i) for i in ev):
        return None
    many = bool(hop.get("many"))
    if op in ("text", "caption"):
        subject = res(hop["subject"])
        if not isinstance(subject, str):
            return None
        texts = [C.sections[i] for i in ev if i in C.sections] if op == "text" else \
            [C.images[i]["caption"] for i in ev if i in C.images]
        return hop["answer"] if _find(texts, subject, hop["answer"]) else None
    if op == "text_list":
        texts = [C.sections[i] for i in ev if i in C.sections]
        subject = res(hop["subject"])
        ok = [a for a in hop["answers"] if _find(texts, subject, a)]
        return ok if len(ok) == len(hop["answers"]) else None
    if op == "table":
        t = C.tables[ev[0]]
        subject = res(hop["subject"])
        if not isinstance(subject, str) or subject not in t.title:
            return None
        vals = [r[1] for r in t.rows if r and r[0] == hop["key"]]
        return vals[0] if len(vals) == 1 else None
    if op == "table_select":
        t = C.tables[ev[0]]
        if hop["column"] not in t.columns or hop["return"] not in t.columns:
            return None
        c, r = t.columns.index(hop["column"]), t.columns.index(hop["return"])
        return _one([row[r] for row in t.rows if row[c] == str(hop["value"])], many)
    if op == "image_attr":
        im = C.images[ev[0]]
        if im["entity"] != res(hop["subject"]):
            return None
        return im["attributes"].get(hop["attribute"])
    if op == "image_select":
        found = [C.images[i]["entity"] for i in ev
                 if C.images[i]["attributes"].get(hop["attribute"]) == hop["value"]]
        return _one(list(dict.fromkeys(found)), many)
    if op == "image_entity":
        return C.images[ev[0]]["entity"] or None
    if op == "intersect":
        sets = [res(f"${k}") for k in hop["args"]]
        if any(not isinstance(s, list) for s in sets):
            return None
        inter = [x for x in sets[0] if all(x in s for s in sets[1:])]
        return inter[0] if len(inter) == 1 else None
    if op == "compare":
        vals = [res(f"${k}") for k in hop["args"]]
        try:
            nums = [float(v) for v in vals]
        except (TypeError, ValueError):
            return None
        if nums[0] == nums[1]:
            return None
        best = max(range(2), key=lambda i: nums[i] * (1 if hop["pick"] == "max" else -1))
        return hop["names"][best]
    raise ValueError(f"oracle: unknown hop op {op!r}")


def follow(question: Question, C: CorpusIndex) -> Any:
    """The answer the gold path reaches (None when a hop fails)."""
    results: list[Any] = []
    for hop in question.meta.get("path", []):
        out = run_hop(hop, results, C)
        if out is None:
            return None
        results.append(out)
    return results[-1] if results else None


def check(questions: Iterable[Question], C: CorpusIndex) -> dict[str, Any]:
    """Oracle accuracy per kind, plus evidence ids that do not exist in the corpus."""
    per: dict[str, list[int]] = {}
    missing: list[str] = []
    failures: list[str] = []
    for q in questions:
        missing += [f"{q.id}:{i}" for i in q.gold_evidence if not C.has(i)]
        ok = follow(q, C) == q.answer
        per.setdefault(q.kind, []).append(int(ok))
        if not ok:
            failures.append(q.id)
    return {"accuracy": {k: sum(v) / len(v) for k, v in sorted(per.items())},
            "n": sum(len(v) for v in per.values()), "missing_evidence": missing,
            "failures": failures}
