"""The trace explorer's data: for each question set, a few questions and how every system that
answered them did it, step by step, with gold evidence marked.

Read from the files the evaluator reads (``data/<stage>/traces/<system>__<set>.jsonl`` and the
question sets ``data/<corpus>/questions/<set>.jsonl``); correctness and recall are the
evaluator's own functions, so a cell of the explorer agrees with the tables.
"""

from __future__ import annotations

import io as _io
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mmrag.evaluate import metrics
from mmrag.io import read_jsonl, trace_name
from mmrag.schema import Evidence, Question, Trace, load_questions, load_traces

MAX_QUESTIONS = 12  # per question set: the explorer is for reading, the tables count
MAX_EVIDENCE = 12  # per step, gold items always kept
MAX_CONTENT = 400  # characters of an evidence item
MAX_TEXT = 2500  # characters of a model turn
THUMB_PX = 96

Store = Callable[[bytes, str], str]  # (bytes, extension) -> site-relative name


def trace_files(data: Path) -> dict[str, list[tuple[str, Path]]]:
    """question set -> [("<stage>:<system>", trace file)], sorted."""
    out: dict[str, list[tuple[str, Path]]] = {}
    for f in sorted(data.glob("*/traces/*.jsonl")):
        system, qset = trace_name(f)
        out.setdefault(qset, []).append((f"{f.parent.parent.name}:{system}", f))
    return out


def question_file(data: Path, qset: str, traced: set[str]) -> Path | None:
    """The question file of a set whose ids the traces answer (a set name can exist in several corpora)."""
    best, overlap = None, 0
    for f in sorted(data.glob(f"*/questions/{qset}.jsonl")):
        ids = {r.get("id") for r in read_jsonl(f)}
        if len(ids & traced) > overlap:
            best, overlap = f, len(ids & traced)
    return best


def pick_questions(questions: Sequence[Question], runs: dict[str, dict[str, Trace]], n: int) -> list[Question]:
    """The ``n`` questions traced by the most systems (ties: the question file's order)."""
    count = Counter(qid for traces in runs.values() for qid in traces)
    ranked = sorted((q for q in questions if count[q.id]), key=lambda q: -count[q.id])
    return ranked[:n]


def _clip(text: str | None, n: int) -> str | None:
    if text is None or len(text) <= n:
        return text
    return text[:n] + f" … [{len(text) - n} more characters]"


def is_gold(e: Evidence, gold: Sequence[str]) -> bool:
    """The evaluator's matching: the same id, a part of a gold id, or a gold document."""
    return any(metrics.id_matches(e.id, g) or (e.doc_id is not None and e.doc_id == g) for g in gold)


def thumbnail(path: Path, store: Store) -> str | None:
    """A small PNG of an image file, stored by content; None if it cannot be read."""
    from PIL import Image as PILImage

    try:
        with PILImage.open(path) as im:
            im = im.convert("RGB")
            im.thumbnail((THUMB_PX, THUMB_PX))
            buf = _io.BytesIO()
            im.save(buf, format="PNG", optimize=True)
    except (OSError, ValueError):
        return None
    return store(buf.getvalue(), "png")


def image_paths(corpus: Path) -> dict[str, Path]:
    """image id -> file, from a corpus's documents.jsonl (empty without one)."""
    docs = corpus / "documents.jsonl"
    if not docs.exists():
        return {}
    return {im["id"]: corpus / im["path"] for d in read_jsonl(docs) for im in d.get("images", [])}


def step_view(step: Any, gold: Sequence[str], thumb: Callable[[str], str | None]) -> dict[str, Any]:
    ev = list(step.evidence)
    keep = [e for i, e in enumerate(ev) if i < MAX_EVIDENCE or is_gold(e, gold)]
    return {
        "action": step.action, "target": step.target, "query": step.query,
        "text": _clip(step.text, MAX_TEXT), "summary": _clip(step.summary, MAX_TEXT),
        "format_error": step.format_error, "more_evidence": len(ev) - len(keep),
        "evidence": [{"id": e.id, "kind": e.kind, "content": _clip(e.content, MAX_CONTENT), "score": e.score,
                      "unit": e.unit, "doc_id": e.doc_id, "gold": is_gold(e, gold),
                      "thumb": thumb(e.id) if e.kind == "image" else None} for e in keep],
    }


def trace_view(t: Trace, q: Question, thumb: Callable[[str], str | None]) -> dict[str, Any]:
    gold = metrics.gold_ids(q)
    recall = metrics.recall_at_k(metrics.ranked_evidence(t), metrics.gold_groups(q), None)
    return {"answer": t.answer, "accuracy": metrics.accuracy(t.answer, q), "recall": recall,
            "tokens": t.tokens_in + t.tokens_out, "tool_calls": t.tool_calls, "format_errors": t.format_errors,
            "steps": [step_view(s, gold, thumb) for s in t.steps]}


def question_view(q: Question, image: str | None) -> dict[str, Any]:
    return {"id": q.id, "text": q.text, "answer": q.answer, "aliases": q.answer_aliases, "kind": q.kind,
            "split": q.split, "choices": q.choices, "image": image, "gold": metrics.gold_ids(q),
            "decomposition": [{"text": s.text, "tool": s.tool, "answer": s.answer} for s in q.decomposition],
            "history": [{"question": h.question, "answer": h.answer} for h in q.history]}


def explorer_sets(data: Path, store: Store, max_questions: int = MAX_QUESTIONS) -> dict[str, dict[str, Any]]:
    """question set -> {"questions": [...], "systems": [...], "answers": {qid: {system: trace view}}}."""
    out: dict[str, dict[str, Any]] = {}
    for qset, files in sorted(trace_files(data).items()):
        runs = {name: {t.question_id: t for t in load_traces(f)} for name, f in files}
        qfile = question_file(data, qset, {i for r in runs.values() for i in r})
        if qfile is None:
            continue
        corpus = qfile.parent.parent
        chosen = pick_questions(load_questions(qfile), runs, max_questions)
        images = image_paths(corpus) if any(e.kind == "image" for r in runs.values() for q in chosen
                                            if q.id in r for e in r[q.id].evidence()) else {}
        cache: dict[str, str | None] = {}

        def thumb(image_id: str, images: dict[str, Path] = images, cache: dict = cache) -> str | None:
            if image_id not in cache:
                cache[image_id] = thumbnail(images[image_id], store) if image_id in images else None
            return cache[image_id]

        answers = {q.id: {name: trace_view(r[q.id], q, thumb) for name, r in runs.items() if q.id in r}
                   for q in chosen}
        qviews = [question_view(q, thumbnail(corpus / q.image_path, store) if q.image_path else None)
                  for q in chosen]
        systems = [name for name, r in runs.items() if any(q.id in r for q in chosen)]
        out[qset] = {"questions": qviews, "systems": systems, "answers": answers,
                     "source": f"data/{corpus.name}/questions/{qset}.jsonl"}
    return out
