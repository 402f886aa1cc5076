"""Scoring BRIT's pieces against the world's gold: triplet precision/recall, retrieval recall,
QA accuracy and free-text answers.

Recall ratio (paper Table 2): a question counts as recalled when one of its gold sections (if
it needs text) and one of its gold images (if it needs an image; the world lists every picture
of the entity as alternatives) are among the retrieved items: images, and the sections the
retrieved triplets or chunks came from (:func:`covers`). QA accuracy (Table 1): the reader's
choice equals the gold answer.

A user's folder corpus has free-text questions with an answer but no choices and no gold
evidence: its questions are scored by exact match, token F1 and whether the gold answer occurs
in the retrieved context (:func:`answer_row`, which also gives the accuracy of multiple-choice
questions of a kind outside Table 1's, such as a folder's photo questions); the figures that
need gold evidence or choices are not applicable there (NaN in the tables, ``None`` in metrics).

Text recall (:func:`text_recall_row`) scores any question with gold sections, cross-modal or not
(HotpotQA's supporting paragraphs, MuSiQue's supporting paragraphs, the world's stated facts), from
a system's traces alone; per-hop recall (:func:`hop_recall_rows`) scores each step of a gold
decomposition that names its own gold sections (MuSiQue's ``paragraph_support_idx``).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from mmrag.brit.triplets import Triplet, normalize
from mmrag.evaluate import metrics, stats
from mmrag.io import read_jsonl
from mmrag.schema import Question, Trace

CROSS_KINDS = ("Text-Image", "Image-Text")  # the complex (cross-modal) kinds: Table 2's "overall"
KINDS = ("Image-Image", "Text-Image", "Image-Text")  # Table 1's columns


def _field(fact: Any, key: str) -> Any:
    """A gold fact's field, whether the fact is a row of facts.jsonl or an object with attributes."""
    return fact[key] if isinstance(fact, Mapping) else getattr(fact, key)


def triplet_scores(triplets: Iterable[Triplet], facts: Iterable[Any], names: dict[str, str]
                   ) -> dict[str, float]:
    """Precision/recall of extracted triplets against gold facts, matched per section.

    A triplet matches a fact stated in the same section when its two arguments are the fact's
    subject and object names (either order; the relation wording is free, as in open IE).
    ``names`` maps entity ids to names; a fact object that is not an id is a literal. Facts are
    rows of ``facts.jsonl`` (or objects with ``section_id``, ``subject`` and ``object``).
    """
    gold: dict[str, set[frozenset[str]]] = {}
    n_gold = 0
    for f in facts:
        subject, obj = _field(f, "subject"), _field(f, "object")
        pair = frozenset({normalize(names.get(subject, subject)), normalize(names.get(obj, str(obj)))})
        gold.setdefault(_field(f, "section_id"), set()).add(pair)
    n_gold = sum(len(v) for v in gold.values())
    found: dict[str, set[frozenset[str]]] = {}
    tp_pred = n_pred = 0
    for t in triplets:
        if t.source != "section":
            continue
        n_pred += 1
        pair = frozenset({normalize(t.subject), normalize(t.object)})
        if pair in gold.get(str(t.section_id), set()):
            tp_pred += 1
            found.setdefault(str(t.section_id), set()).add(pair)
    hit = sum(len(v) for v in found.values())
    p = tp_pred / n_pred if n_pred else 0.0
    r = hit / n_gold if n_gold else 0.0
    p_ci, r_ci = stats.wilson(tp_pred, n_pred), stats.wilson(hit, n_gold)
    return {"precision": round(p, 4), "recall": round(r, 4),
            "f1": round(2 * p * r / (p + r), 4) if p + r else 0.0,
            "extracted": n_pred, "gold_facts": n_gold,
            # 95 % Wilson intervals and their n (triplets for precision, gold facts for recall)
            "precision_ci": [_round(p_ci[0]), _round(p_ci[1]), n_pred],
            "recall_ci": [_round(r_ci[0]), _round(r_ci[1]), n_gold]}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def covers(retrieved: set[str], gold: Iterable[str], sections: set[str] | frozenset[str]) -> bool:
    """Recalled: one gold section (if any is gold) and one gold image (if any) were retrieved.

    The world lists every image of the entity a question needs as alternatives (any one of
    them shows the attribute), and the section that states the fact; a caption counts as
    retrieved with its image.
    """
    gold = set(gold)
    if not gold:
        return False
    g_sec = gold & set(sections)
    g_img = gold - g_sec
    return (not g_sec or bool(g_sec & retrieved)) and (not g_img or bool(g_img & retrieved))


def relation_scores(triplets: Iterable[Triplet], entities: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Corpus-level precision/recall of entity pairs against the world's gold relations.

    Gold: every (entity, related entity) pair of ``entities.jsonl``; predicted: every distinct
    (subject, object) pair of the extracted section triplets whose two names are both world
    entities (pairs with a non-entity argument, such as a year, are counted apart). Either order
    matches: open IE relation wording and direction are free ("designed by" vs "designed").
    """
    entities = list(entities)
    name = {e["id"]: normalize(e["name"]) for e in entities}
    known = set(name.values())
    gold = {frozenset({name[e["id"]], name[r["object_id"]]}) for e in entities
            for r in e.get("relations", []) if r.get("object_id") in name}
    pred_all = {frozenset({normalize(t.subject), normalize(t.object)}) for t in triplets
                if t.source == "section"}
    pred = {p for p in pred_all if p <= known and len(p) == 2}
    tp = len(pred & gold)
    p = tp / len(pred) if pred else 0.0
    r = tp / len(gold) if gold else 0.0
    return {"precision": round(p, 4), "recall": round(r, 4),
            "f1": round(2 * p * r / (p + r), 4) if p + r else 0.0,
            "entity_pairs": len(pred), "gold_pairs": len(gold),
            "non_entity_pairs": len(pred_all) - len(pred)}


def answer_in_context(answer_golds: Iterable[str], texts: Iterable[str]) -> bool:
    """Whether a gold answer (normalised, as whole words) occurs in the retrieved context."""
    ctx = f" {metrics.normalize(' '.join(texts))} "
    return any(g and f" {g} " in ctx for g in (metrics.normalize(a) for a in answer_golds))


def has_gold_evidence(questions: Iterable[Question], kinds: Iterable[str] | None = None) -> bool:
    """Whether some question (of ``kinds``, if given) has gold evidence to score recall against."""
    kinds = set(kinds) if kinds is not None else None
    return any(q.gold_evidence and (kinds is None or q.kind in kinds) for q in questions)


def recall_row(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Table 2 figures of one system: recall per cross-modal kind and overall, words, images
    (over the cross-modal questions, as the paper's), and recall on the simple Image-Image
    questions beside them (not in "overall")."""
    def mean(xs: list[float]) -> float:
        return round(float(np.mean(xs)), 4) if xs else float("nan")

    cross = [r for r in rows if r["kind"] in CROSS_KINDS]
    out = {k: mean([r["recalled"] for r in cross if r["kind"] == k]) for k in CROSS_KINDS}
    out["overall"] = mean([r["recalled"] for r in cross])
    out["Image-Image"] = mean([r["recalled"] for r in rows if r["kind"] == "Image-Image"])
    for src in ("caption", "section"):
        out[f"overall_{src}"] = mean([r["recalled"] for r in cross if r["source"] == src])
    out["words"] = round(float(np.mean([r["words"] for r in cross])), 1) if cross else float("nan")
    out["images"] = round(float(np.mean([r["images"] for r in cross])), 2) if cross else float("nan")
    return out


def rate_ci(hits: list[bool]) -> tuple[float, str]:
    """(share, "[low, high]"): a rate over questions and its Wilson 95 % interval, as the tables print it."""
    lo, hi = stats.wilson(sum(hits), len(hits))
    return round(sum(hits) / len(hits), 4), f"[{lo:.3f}, {hi:.3f}]"


def text_recall_row(traces: Iterable[Trace], questions: Mapping[str, Question],
                    sections: Set[str]) -> dict[str, Any] | None:
    """One system's recall over text gold, on every traced question with a gold section (of any kind:
    a text corpus has no cross-modal question, so Table 2's "overall" is null there); None if none has one.

    recall: one gold section retrieved (Table 2's rule for text); all gold: every gold section retrieved
    (what a multi-hop question needs); gold found: the mean share of its gold sections retrieved (IR's
    Recall@k), with a seeded bootstrap CI; answer in context: the gold answer occurs in the retrieved
    text (over the questions with a gold answer, n beside the CI); words handed over per question.
    """
    any_hit, all_hit, found, in_ctx, words = [], [], [], [], []
    for t in traces:
        q = questions.get(t.question_id)
        gold = list(dict.fromkeys(e for e in q.gold_evidence if e in sections)) if q else []
        if not gold:
            continue
        evidence = t.evidence()
        got = {e.id for e in evidence}
        hits = sum(g in got for g in gold)
        any_hit.append(hits > 0)
        all_hit.append(hits == len(gold))
        found.append(hits / len(gold))
        words.append(sum(len(e.content.split()) for e in evidence))
        answers = metrics.golds(q)
        if answers:
            in_ctx.append(answer_in_context(answers, [e.content for e in evidence]))
    if not any_hit:
        return None
    recall, recall_ci = rate_ci(any_hit)
    complete, complete_ci = rate_ci(all_hit)
    lo, hi = stats.mean_ci(found)
    ctx, ctx_ci = rate_ci(in_ctx) if in_ctx else (None, "")
    return {"questions": len(any_hit), "recall": recall, "recall 95% CI": recall_ci,
            "all gold": complete, "all gold 95% CI": complete_ci,
            "gold found": round(float(np.mean(found)), 4), "gold found 95% CI": f"[{lo:.3f}, {hi:.3f}]",
            "answer in context": ctx, "answer in context 95% CI": f"{ctx_ci} n={len(in_ctx)}" if in_ctx else "",
            "words": round(float(np.mean(words)), 1)}


def hop_recall_rows(traces: Iterable[Trace], questions: Mapping[str, Question],
                    sections: Set[str]) -> list[dict[str, Any]]:
    """One system's recall per hop of the gold decompositions: hop i (1-based, the step's position)
    counts the questions whose i-th sub-question names gold sections, recalled when one of those
    sections was retrieved; steps whose evidence is no section (an image, none) are skipped."""
    hits: dict[int, list[bool]] = {}
    for t in traces:
        q = questions.get(t.question_id)
        if q is None:
            continue
        got = {e.id for e in t.evidence()}
        for hop, sub in enumerate(q.decomposition, 1):
            gold = {e for e in sub.evidence_ids if e in sections}
            if gold:
                hits.setdefault(hop, []).append(bool(gold & got))
    out = []
    for hop, xs in sorted(hits.items()):
        recall, ci = rate_ci(xs)
        out.append({"hop": hop, "questions": len(xs), "recall": recall, "95% CI": ci})
    return out


def answer_row(rows: list[dict[str, Any]]) -> dict[str, float | int | None]:
    """Answers of one system over every question, whatever its kind: how many were answered;
    accuracy over the multiple-choice ones; mean exact match, token F1 and answer-in-context
    over the open ones with a gold answer (None where no question qualifies)."""
    choice = [r for r in rows if r.get("choices")]
    opened = [r for r in rows if r.get("open")]
    scored = [r for r in opened if r.get("em") is not None]

    def mean(xs: list[Any], key: str) -> float | None:
        return round(float(np.mean([float(r[key]) for r in xs])), 4) if xs else None

    return {"questions": len(rows), "answered": sum(bool(r.get("answered")) for r in rows),
            "choice_questions": len(choice), "choice_accuracy": mean(choice, "correct"),
            "open_questions": len(opened), "em": mean(scored, "em"), "f1": mean(scored, "f1"),
            "answer_in_context": mean(scored, "answer_in_context")}


def accuracy_row(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Table 1 figures of one system: accuracy per kind and their average."""
    out = {}
    for k in KINDS:
        xs = [r["correct"] for r in rows if r["kind"] == k]
        out[k] = round(float(np.mean(xs)), 4) if xs else float("nan")
    vals = [v for v in out.values() if v == v]
    out["avg"] = round(float(np.mean(vals)), 4) if vals else float("nan")
    return out


def read_gold(corpus_dir: Path) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]] | None]:
    """(entities, facts) rows of a corpus's gold files (``entities.jsonl``, ``facts.jsonl``);
    None for a file the corpus lacks (a user's folder has neither, the generated world both)."""
    corpus_dir = Path(corpus_dir)
    if not (corpus_dir / "entities.jsonl").exists():
        return None, None
    entities = read_jsonl(corpus_dir / "entities.jsonl")
    facts = read_jsonl(corpus_dir / "facts.jsonl") if (corpus_dir / "facts.jsonl").exists() else None
    return entities, facts


def extraction_scores(triplets: list[Any], entities: list[dict[str, Any]] | None,
                      facts: list[dict[str, Any]] | None, corpus_name: str
                      ) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str | None]:
    """(entity-pair scores, per-section fact scores, why not) of extracted triplets against a
    corpus's gold (:func:`read_gold`): entity rows (and fact rows) where the corpus has them;
    without gold entities both scores are None, with the reason."""
    if entities is None:
        return None, None, (f"{corpus_name} has no gold entities (entities.jsonl): the "
                            "extractor's precision/recall is not applicable")
    ie = relation_scores(triplets, entities)
    if facts is None:
        return ie, None, f"{corpus_name} has no facts.jsonl: per-section scores not applicable"
    names = {e["id"]: e["name"] for e in entities}
    return ie, triplet_scores(triplets, facts, names), None
