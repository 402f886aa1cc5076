"""The generated world: determinism, counts, gold that leads to the answer, NEA, validation."""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections import Counter
from pathlib import Path

import pytest
import yaml

from mmrag import config
from mmrag.corpora.passages import Chunking, to_passages
from mmrag.io import read_jsonl
from mmrag.schema import Question, load_documents, load_questions
from mmrag.world import oracle
from mmrag.world import questions as Q
from mmrag.world.files import build, lexical_similarity, write_world

TINY = dataclasses.replace(
    config.load().world, domains=2, products_per_domain=3, people_per_domain=2, places_per_domain=1,
    events_per_domain=1, image_size=32, brit_questions=40, brit_nea_pairs=6, mmqa_questions=60,
    mmcoqa_conversations=6, infoseek_questions=40, validation_threshold=0.9)
CHUNKING = Chunking.of(config.load().knowledge_map)  # what the knowledge map indexes


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("w") / "world"
    write_world(TINY, 7, out, lexical_similarity, chunking=CHUNKING)
    return out


def test_same_seed_gives_byte_identical_files(tiny, tmp_path):
    again = tmp_path / "world"
    write_world(TINY, 7, again, lexical_similarity, chunking=CHUNKING)
    assert _digest(tiny) == _digest(again)
    other = tmp_path / "other"
    write_world(TINY, 8, other, lexical_similarity, chunking=CHUNKING)
    assert _digest(other)["documents.jsonl"] != _digest(tiny)["documents.jsonl"]


def test_counts_per_type_and_split(tiny):
    ents = Counter(e["type"] for e in read_jsonl(tiny / "entities.jsonl"))
    assert ents == {"product": 6, "person": 4, "place": 2, "organisation": 2, "event": 2}
    docs = load_documents(tiny)
    assert len(docs) == 16 and all(d.domain and d.entity_id for d in docs)
    assert all(min(TINY.images_per_page) <= len(d.images) <= max(TINY.images_per_page)
               for d in docs)
    mmqa = load_questions(tiny / "questions" / "mmqa.jsonl")
    assert len(mmqa) == 60
    kinds = Counter(q.kind for q in mmqa)
    for k in ("TextQ", "TableQ", "ImageQ", "ImageListQ", "Compose(TableQ,ImageQ)",
              "Compose(TextQ,TableQ)", "Compose(TextQ,ImageQ)", "Compose(ImageQ,TextQ)",
              "Compare(TableQ,TableQ)"):
        assert kinds[k] >= 3, (k, kinds)
    assert any(k.startswith("Intersect") for k in kinds)
    assert set(q.split for q in mmqa) <= {"train", "dev", "test"}
    info = load_questions(tiny / "questions" / "infoseek.jsonl")
    splits = Counter(q.split for q in info)
    assert len(info) == 40 and splits["test_unseen_entity"] and splits["test_unseen_question"]
    train_ents = {q.gold_entity for q in info if q.split in ("train", "dev")}
    assert not train_ents & {q.gold_entity for q in info if q.split == "test_unseen_entity"}
    train_rel = {q.kind for q in info if q.split in ("train", "dev")}
    assert not train_rel & {q.kind for q in info if q.split == "test_unseen_question"}
    conv = Counter(q.meta["conversation_id"] for q in load_questions(tiny / "questions" / "mmcoqa.jsonl"))
    assert len(conv) == 6 and all(3 <= n <= 6 for n in conv.values())
    brit = load_questions(tiny / "questions" / "brit.jsonl")
    assert {q.kind for q in brit} == {"Text-Image", "Image-Text", "Image-Image"}
    assert {q.meta["source"] for q in brit} == {"caption", "section"}
    # four options wherever the world has four candidates (two organisations here: two)
    assert all(2 <= len(set(q.choices)) == len(q.choices) <= 4 and q.answer in q.choices
               for q in brit)
    assert Counter(len(q.choices) for q in brit).most_common(1)[0][0] == 4


def _index(folder: Path, documents: str = "documents.jsonl") -> oracle.CorpusIndex:
    names = {e["id"]: e["name"] for e in read_jsonl(folder / "entities.jsonl")}
    docs = load_documents(folder) if documents == "documents.jsonl" else \
        [__import__("mmrag.schema", fromlist=["Document"]).Document.from_dict(r)
         for r in read_jsonl(folder / documents)]
    return oracle.index_corpus(docs, read_jsonl(folder / "images.jsonl"), names)


@pytest.mark.parametrize("name", ["mmqa", "infoseek", "mmcoqa", "brit"])
def test_gold_path_oracle_reaches_every_answer(tiny, name):
    qs = load_questions(tiny / "questions" / f"{name}.jsonl")
    report = oracle.check(qs, _index(tiny))
    assert report["missing_evidence"] == []
    assert report["failures"] == [] and report["n"] == len(qs)
    for q in qs:  # the decomposition's evidence is part of the gold too
        for sub in q.decomposition:
            assert all(_index(tiny).has(i) for i in sub.evidence_ids), q.id


def test_oracle_notices_a_broken_path(tiny):
    q = load_questions(tiny / "questions" / "mmqa.jsonl")[0]
    C = _index(tiny)
    assert oracle.follow(q, C) == q.answer
    bad = dataclasses.replace(q, meta={"path": [dict(h, evidence=["nope"]) for h in q.meta["path"]]})
    assert oracle.follow(bad, C) is None


def test_descriptive_captions_never_name_an_entity(tiny):
    names = [e["name"] for e in read_jsonl(tiny / "entities.jsonl")]
    rows = read_jsonl(tiny / "images.jsonl")
    descriptive = [r for r in rows if r["caption_kind"] == "descriptive"]
    assert descriptive and any(r["caption_kind"] == "naming" for r in rows)
    for r in descriptive:
        assert not any(n.lower() in r["caption"].lower() for n in names), r["caption"]
        assert not any(w.lower() in r["caption"].lower().split() for n in names
                       for w in n.split() if len(w) > 3 and not w[0].isdigit()), r["caption"]


def test_image_index_covers_pages_and_heldout(tiny):
    rows = read_jsonl(tiny / "images.jsonl")
    docs = load_documents(tiny)
    on_pages = {i.id for d in docs for i in d.images}
    assert on_pages == {r["id"] for r in rows if r["split"] == "train"}
    held = [r for r in rows if r["split"] == "heldout"]
    assert len(held) == TINY.heldout_images * 12 and all(r["doc_id"] is None for r in held)
    assert all((tiny / r["path"]).exists() for r in rows)


def test_nea_pairs_replace_the_name_and_add_the_bridge(tiny):
    rows = load_questions(tiny / "questions" / "brit_nea.jsonl")
    assert len(rows) == 2 * TINY.brit_nea_pairs
    nea_docs = {s.id: s.text for r in read_jsonl(tiny / "documents_nea.jsonl")
                for s in __import__("mmrag.schema", fromlist=["Document"]).Document.from_dict(r).sections}
    docs = {s.id: s.text for d in load_documents(tiny) for s in d.sections}
    pairs: dict[int, dict[bool, Question]] = {}
    for q in rows:
        pairs.setdefault(q.meta["pair_id"], {})[q.meta["nea"]] = q
    C = _index(tiny, "documents_nea.jsonl")
    for pair in pairs.values():
        orig, anon = pair[False], pair[True]
        name, alias = anon.meta["original_name"], anon.meta["alias"]
        assert name in orig.text and name not in anon.text and alias in anon.text
        sid = anon.meta["bridge_section_id"]
        assert anon.meta["bridge_sentence"] in nea_docs[sid]
        assert anon.meta["bridge_sentence"] not in docs[sid]
        assert alias in anon.meta["bridge_sentence"] and name in anon.meta["bridge_sentence"]
        assert sid in anon.gold_evidence and anon.answer == orig.answer
        assert oracle.follow(anon, C) == anon.answer
    assert oracle.follow(pairs[0][True], _index(tiny)) is None  # no bridge, no path


def test_validation_rejects_questions_too_similar_to_their_source():
    def q(text, src):
        return Question(id="", text=text, answer="x", dataset="brit", meta={"source_text": src})
    pools = {"a": [q("What colour is the Vorkel X2?", "What colour is the Vorkel X2?"),
                   q("Which shade does the device have?", "The Vorkel X2 was designed by Ada.")]}
    kept, report = Q.validate(pools, lexical_similarity, threshold=0.5)
    assert [x.text for x in kept["a"]] == ["Which shade does the device have?"]
    assert report["a"] == {"candidates": 2, "rejected": 1, "rejection_rate": 0.5}
    kept, _ = Q.validate(pools, lambda a, b: [0.0] * len(a), threshold=0.5)
    assert len(kept["a"]) == 2


def test_brit_sources_respect_the_threshold(tiny):
    brit = load_questions(tiny / "questions" / "brit.jsonl")
    assert all(q.meta["source_similarity"] <= TINY.validation_threshold for q in brit)
    assert all(q.meta["source_similarity"] == round(lexical_similarity(
        [q.text], [q.meta["source_text"]])[0], 2) for q in brit)


def test_infoseek_gold_passages_hold_the_answer(tiny):
    passages = {p.id: p for p in to_passages(load_documents(tiny), *CHUNKING)}
    for q in load_questions(tiny / "questions" / "infoseek.jsonl"):
        assert q.gold_passages and all(q.answer in passages[p].text for p in q.gold_passages)
        assert all(passages[p].entity_id == q.gold_entity for p in q.gold_passages)
        assert q.image_path and q.gold_domain


def test_domains_and_config_errors():
    with pytest.raises(ValueError, match="domains"):
        build(dataclasses.replace(TINY, domains=13), 0, lexical_similarity, chunking=CHUNKING)
    with pytest.raises(config.ConfigError, match="world.domains"):
        raw = yaml.safe_load((config.PARAMS_FILE).read_text())
        raw["world"]["domains"] = 1
        config.from_dict(raw)


@pytest.mark.slow
def test_text_encoder_validation_on_real_model():
    from mmrag.models import registry
    from mmrag.world.files import encoder_similarity

    sim = encoder_similarity(registry.load_text_encoder("all-minilm-l6-v2", allow_network=False, device="cpu"))
    s = sim(["Who designed the Vorkel X2?", "Who designed the Vorkel X2?"],
            ["The Vorkel X2 was designed by Ada Quill.", "Photosynthesis needs light."])
    assert s[0] > s[1] and 0.99 > s[0] > 0.3
    _ = random.Random(0)
