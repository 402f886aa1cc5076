"""The world on disk: generate everything from one seed and write ``data/world/`` atomically.

Files (besides those listed in :mod:`mmrag.world.generator`): ``questions/{brit, brit_nea,
mmqa, mmcoqa, infoseek}.jsonl``, ``documents_nea.jsonl`` (the corpus with the NEA bridging
sentences added; same image paths), and ``stats.json`` (counts, per-page figures, validation).
"""

from __future__ import annotations

import random
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from mmrag.corpora.passages import Chunking
from mmrag.io import atomic_dir, read_jsonl, write_json, write_jsonl
from mmrag.schema import Document, Question, load_documents, load_questions
from mmrag.world import questions as Q
from mmrag.world import render
from mmrag.world.generator import World, generate

SETS = ("brit", "brit_nea", "mmqa", "mmcoqa", "infoseek")


def _sub_rng(seed: int, name: str) -> random.Random:
    """An independent stream per question set, so resizing one set never changes another."""
    return random.Random(f"{seed}:{name}")


def build(cfg: Any, seed: int, similarity: Q.Similarity, renderer: ModuleType | None = None,
          out_dir: Path | None = None, *, chunking: Chunking
          ) -> tuple[World, dict[str, list[Question]], list[Any], dict[str, Any]]:
    """(world, question sets, NEA documents, generation report) from one seed; ``chunking`` (params
    ``knowledge_map``) names the InfoSeek gold passages."""
    if renderer is None:
        renderer = render
    world = generate(cfg, seed, renderer, out_dir)
    sets: dict[str, list[Question]] = {}
    sets["mmqa"] = Q.mmqa(world, cfg.mmqa_questions, _sub_rng(seed, "mmqa"), cfg.dev_share,
                          cfg.test_share)
    sets["infoseek"], info = Q.infoseek(world, cfg.infoseek_questions, _sub_rng(seed, "infoseek"),
                                        cfg.infoseek_unseen_entity_share, cfg.dev_share, chunking)
    sets["mmcoqa"] = Q.mmcoqa(world, cfg.mmcoqa_conversations, _sub_rng(seed, "mmcoqa"),
                              cfg.dev_share, cfg.test_share)
    sets["brit"], sets["brit_nea"], nea_docs, validation = Q.brit(
        world, cfg.brit_questions, cfg.brit_nea_pairs, _sub_rng(seed, "brit"), similarity,
        cfg.validation_threshold, renderer.ATTRIBUTES, world.book.alias)  # type: ignore[attr-defined]
    return world, sets, nea_docs, {"infoseek": info, "brit_validation": validation}


def stats(world: World, sets: dict[str, list[Question]], report: dict[str, Any]) -> dict[str, Any]:
    """Counts per type and split, per-page figures, validation rejection rates."""
    docs = world.documents
    mean = lambda xs: round(statistics.mean(xs), 4) if xs else 0.0  # noqa: E731
    pages = [max((s.page or 0) for s in d.sections) + 1 for d in docs]
    val = report["brit_validation"]
    cand = sum(v["candidates"] for v in val.values())
    rej = sum(v["rejected"] for v in val.values())
    out: dict[str, Any] = {
        "entities": dict(sorted(Counter(e.type for e in world.entities.values()).items())),
        "domains": len(world.domains),
        "documents": len(docs),
        "images_per_page": mean([len(d.images) for d in docs]),
        "sections_per_page": mean([len(d.sections) for d in docs]),
        "tables_per_page": mean([len(d.tables) for d in docs]),
        "layout_pages_per_document": mean(pages),
        "facts": len(world.facts),
        "images": dict(sorted(Counter(r["split"] for r in world.images).items())),
        "captions": dict(sorted(Counter(r["caption_kind"] for r in world.images
                                        if r["split"] == "train").items())),
        "brit_validation": val,
        "brit_rejection_rate": round(rej / cand, 4) if cand else 0.0,
        "infoseek_unseen_relations": report["infoseek"]["unseen_relations"],
        "infoseek_skipped": report["infoseek"]["skipped"],
        "questions": {},
    }
    for name, qs in sets.items():
        out["questions"][name] = {
            "n": len(qs),
            "kind": dict(sorted(Counter(q.kind for q in qs).items())),
            "split": dict(sorted(Counter(q.split for q in qs).items())),
        }
    conv = Counter(q.meta["conversation_id"] for q in sets["mmcoqa"])
    out["questions"]["mmcoqa"]["conversations"] = len(conv)
    out["questions"]["mmcoqa"]["turns_per_conversation"] = mean(list(conv.values()))
    out["questions"]["brit"]["by_source"] = dict(sorted(Counter(
        f"{q.kind}/{q.meta['source']}" for q in sets["brit"]).items()))
    return out


def write_world(cfg: Any, seed: int, out_dir: Path, similarity: Q.Similarity,
                renderer: ModuleType | None = None, *, chunking: Chunking) -> dict[str, Any]:
    """Generate and write the whole ``data/world`` folder (replaced only if all succeeds)."""
    with atomic_dir(out_dir) as tmp:
        world, sets, nea_docs, report = build(cfg, seed, similarity, renderer, tmp, chunking=chunking)
        write_jsonl(tmp / "documents.jsonl", (d.to_dict() for d in world.documents))
        write_jsonl(tmp / "documents_nea.jsonl", (d.to_dict() for d in nea_docs))
        write_jsonl(tmp / "entities.jsonl", (e.to_dict() for e in world.entities.values()))
        write_jsonl(tmp / "facts.jsonl", (f.to_dict() for f in world.facts))
        write_jsonl(tmp / "images.jsonl", world.images)
        for name in SETS:
            write_jsonl(tmp / "questions" / f"{name}.jsonl", (q.to_dict() for q in sets[name]))
        st = stats(world, sets, report)
        write_json(tmp / "stats.json", st)
    return st


@dataclass
class WorldFiles:
    """The world as later stages see it: read back from the written files only."""

    documents: list[Document]
    nea_documents: list[Document]  # the same corpus with the NEA bridging sentences added
    entities: dict[str, dict[str, Any]]  # id -> entities.jsonl row
    images: list[dict[str, Any]]  # images.jsonl rows (train and heldout)
    sets: dict[str, list[Question]]  # question set name (SETS order) -> questions


def read_world(data_dir: Path) -> WorldFiles:
    """Read a ``data/world`` folder written by :func:`write_world`."""
    return WorldFiles(
        documents=load_documents(data_dir),
        nea_documents=[Document.from_dict(r) for r in read_jsonl(data_dir / "documents_nea.jsonl")],
        entities={e["id"]: e for e in read_jsonl(data_dir / "entities.jsonl")},
        images=read_jsonl(data_dir / "images.jsonl"),
        sets={name: load_questions(data_dir / "questions" / f"{name}.jsonl") for name in SETS},
    )


def encoder_similarity(encoder: Any, batch_size: int = 64) -> Q.Similarity:
    """Pairwise cosine similarity with a sentence-transformers model (normalised, float32)."""
    def sim(a: list[str], b: list[str]) -> list[float]:
        texts = sorted(set(a) | set(b))
        emb = encoder.encode(texts, normalize_embeddings=True, convert_to_numpy=True,
                             batch_size=batch_size).astype("float32")
        row = {t: i for i, t in enumerate(texts)}
        return [float(emb[row[x]] @ emb[row[y]]) for x, y in zip(a, b)]
    return sim


def lexical_similarity(a: list[str], b: list[str]) -> list[float]:
    """Word-set overlap (Jaccard): a cheap, model-free similarity for tests and dry runs."""
    def words(t: str) -> set[str]:
        return {w.strip(".,?!").lower() for w in t.split()}
    return [len(words(x) & words(y)) / max(1, len(words(x) | words(y))) for x, y in zip(a, b)]


Similarity = Callable[[list[str], list[str]], list[float]]
