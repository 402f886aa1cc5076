"""Stage module `world`: the generated files read back, the gold-path oracle, sample pages and
example questions, on a tiny seeded world."""

from __future__ import annotations

import dataclasses

import pytest

from mmrag import config
from mmrag.corpora.passages import Chunking
from mmrag.schema import Question, SubQuestion
from mmrag.stages import world as world_stage
from mmrag.world.files import lexical_similarity, read_world, write_world

TINY = dataclasses.replace(
    config.load().world, domains=2, products_per_domain=3, people_per_domain=2, places_per_domain=1,
    events_per_domain=1, image_size=32, brit_questions=40, brit_nea_pairs=6, mmqa_questions=60,
    mmcoqa_conversations=6, infoseek_questions=40, validation_threshold=0.9, samples=3)


@pytest.fixture(scope="module")
def tiny_world(tmp_path_factory):
    out = tmp_path_factory.mktemp("w") / "world"
    stats = write_world(TINY, 7, out, lexical_similarity, chunking=Chunking.of(config.load().knowledge_map))
    return out, stats, read_world(out)


def test_read_world_reads_back_every_file(tiny_world):
    _, stats, files = tiny_world
    assert len(files.documents) == len(files.nea_documents) == stats["documents"]
    assert list(files.sets) == ["brit", "brit_nea", "mmqa", "mmcoqa", "infoseek"]
    assert {k: len(v) for k, v in files.sets.items()} == {k: v["n"] for k, v in stats["questions"].items()}
    assert len(files.entities) == sum(stats["entities"].values())


def test_oracle_reaches_every_gold_answer_and_nea_needs_its_bridge(tiny_world):
    _, stats, files = tiny_world
    report = world_stage.run_oracle(files)
    assert report.missing == 0 and report.n_anonymised > 0
    assert set(report.table["oracle accuracy"]) == {1.0}
    assert all(acc < 1.0 for acc in report.nea_without_bridge.values())
    metrics = world_stage.world_metrics(stats, len(files.entities), report)
    assert metrics["oracle_min_accuracy"] == metrics["oracle_nea_accuracy"] == 1.0
    assert metrics["questions"]["mmqa"] == 60


def test_sample_pages_are_seeded_and_sorted(tiny_world):
    _, _, files = tiny_world
    a = world_stage.sample_pages(files.documents, 0, 3)
    assert [d.id for d in a] == sorted(d.id for d in a) and all(d.images for d in a)
    assert [d.id for d in a] == [d.id for d in world_stage.sample_pages(files.documents, 0, 3)]
    assert len(world_stage.sample_pages(files.documents, 0, 10_000)) == len(files.documents)


def test_question_counts_and_examples(tiny_world):
    _, _, files = tiny_world
    counts = world_stage.question_counts(files.sets)
    assert int(counts.loc["mmqa"]["total"].sum()) == 60
    examples = world_stage.example_questions(files.sets)
    assert {q.dataset for q in examples} >= {"mmqa", "brit", "infoseek", "mmcoqa"}
    text = world_stage.examples_text(files.sets, files.entities)
    assert "bridge sentence added to the NEA corpus:" in text


def test_describe_question_lists_the_decomposition():
    q = Question(id="q", text="Who designed it?", answer="Ada", dataset="mmqa", kind="TextQ", split="dev",
                 decomposition=[SubQuestion(text="designer?", tool="TextQA", answer="Ada",
                                            evidence_ids=["a", "b", "c", "d", "e"])])
    assert world_stage.describe_question(q, {}) == (
        "[mmqa · TextQ · dev] Who designed it?\n"
        "   1. TextQA   designer? -> Ada   evidence ['a', 'b', 'c', 'd']…\n"
        "   answer: Ada\n")
