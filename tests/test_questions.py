"""The question-set package: the MultiModalQA builders, their first hops, and the re-exports."""

from __future__ import annotations

import dataclasses
import random

import pytest

from mmrag import config
from mmrag.corpora.passages import Chunking
from mmrag.world import questions as Q
from mmrag.world.files import build, lexical_similarity
from mmrag.world.questions import mmqa_set
from mmrag.world.questions.common import Gold

TINY = dataclasses.replace(
    config.load().world, domains=2, products_per_domain=3, people_per_domain=2, places_per_domain=1,
    events_per_domain=1, image_size=32, brit_questions=40, brit_nea_pairs=6, mmqa_questions=60,
    mmcoqa_conversations=6, infoseek_questions=40, validation_threshold=0.9)

KINDS = ["TextQ", "TableQ", "ImageQ", "ImageListQ", "Compose(TextQ,ImageQ)", "Compose(TableQ,ImageQ)",
         "Compose(TextQ,TableQ)", "Compose(ImageQ,TableQ)", "Compose(ImageQ,TextQ)",
         "Compose(TableQ,TextQ)", "Compose(TextQ,TextQ)", "Intersect(TextQ,ImageQ)",
         "Intersect(TableQ,TextQ)", "Compare(TableQ,TableQ)"]


@pytest.fixture(scope="module")
def world():
    return build(TINY, 7, lexical_similarity, chunking=Chunking.of(config.load().knowledge_map))[0]


def test_package_reexports_what_callers_use():
    for name in ("mmqa", "infoseek", "mmcoqa", "brit", "brit_candidates", "validate", "Gold",
                 "Similarity"):
        assert hasattr(Q, name)
    assert Q.mmqa is mmqa_set.mmqa and callable(Q.mmqa)


def test_candidates_hold_every_kind_with_consistent_gold(world):
    pools = mmqa_set.candidates(world, random.Random(1), 60)
    assert sorted(pools) == sorted(KINDS)
    for kind, qs in pools.items():
        for q in qs:
            assert q.kind == kind and q.dataset == "mmqa" and q.id == ""
            ev = list(dict.fromkeys(i for s in q.decomposition for i in s.evidence_ids))
            assert q.gold_evidence == ev
            steps = [h for h in q.meta["path"] if h["op"] not in ("intersect", "compare")]
            assert len(steps) == len(q.decomposition)


def test_mmqa_is_deterministic_and_draws_only_from_its_rng(world):
    a = Q.mmqa(world, 60, random.Random(3), dev=0.1, test=0.2)
    random.seed(12345)  # the global stream must not matter
    b = Q.mmqa(world, 60, random.Random(3), dev=0.1, test=0.2)
    assert [(q.id, q.kind, q.text, q.answer, q.split) for q in a] == \
        [(q.id, q.kind, q.text, q.answer, q.split) for q in b]
    c = Q.mmqa(world, 60, random.Random(4), dev=0.1, test=0.2)
    assert [q.text for q in a] != [q.text for q in c]


def test_image_selections_single_out_their_target(world):
    sels = list(mmqa_set.image_selections(world, Gold(world), random.Random(0)))
    assert sels
    for sel in sels:
        attr, value = sel.hop["attribute"], sel.hop["value"]
        pictured = [world.entities[world.image_rows[i]["entity_id"]] for i in sel.hop["evidence"]]
        assert sel.target in pictured
        assert [e for e in pictured if e.attributes.get(attr) == value] == [sel.target]
        assert sel.sub.answer == sel.target.name and sel.phrase.startswith("the ")


def test_table_selections_single_out_their_target(world):
    sels = list(mmqa_set.table_selections(world, Gold(world)))
    assert sels
    for sel in sels:
        prop = {"Release year": "release_year", "Price (USD)": "price_usd"}[sel.hop["column"]]
        org = [o for o in world.by_type("organisation") if sel.target.one("developed_by") == o.id][0]
        line_up = [p for p in world.by_type("product") if org.id in p.objects("developed_by")]
        assert [p for p in line_up if str(p.properties[prop]) == sel.hop["value"]] == [sel.target]


def test_compose_questions_chain_on_the_first_hop(world):
    pools = mmqa_set.candidates(world, random.Random(2), 60)
    for kind in KINDS:
        if not kind.startswith("Compose"):
            continue
        for q in pools[kind]:
            first, second = q.meta["path"]
            assert second["subject"] == "$1"
            assert q.decomposition[0].answer == first.get("answer", q.decomposition[0].answer)
            assert q.decomposition[1].answer == q.answer
