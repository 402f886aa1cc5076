"""Stage modules `models`, `world` and `corpora`: the helpers their notebooks used to hold."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from mmrag import config
from mmrag.corpora.passages import Chunking
from mmrag.corpora.report import IngestReport
from mmrag.schema import Document, Question, Section, SubQuestion
from mmrag.stages import corpora as corpora_stage
from mmrag.stages import models as models_stage
from mmrag.stages import wiki as wiki_stage
from mmrag.stages import world as world_stage
from mmrag.world.files import lexical_similarity, read_world, write_world


# --------------------------------------------------------------------------- models
def test_provision_zoo_lists_external_names_once(tmp_path):
    models = dataclasses.replace(config.load().models, llm="some/local-llm", extra_llms=("some/local-llm",),
                                 ladder=("some/local-llm",), text_encoder="enc/path", spacy="nlp/path")
    zoo, skipped = models_stage.provision_zoo(models, tmp_path)
    assert list(zoo["name"]) == ["some/local-llm", "enc/path", "nlp/path"]
    assert set(zoo["kind"]) == {"external"} and skipped == []
    assert not any(tmp_path.iterdir())


def test_models_metrics_rounds_and_counts():
    gen = models_stage.SampleGeneration("llm", 134_515_008, "p", "reply", 8, 0.5)
    sim = np.array([[1.0, 0.81234, 0.0567], [0.8, 1.0, 0.1], [0.05, 0.1, 1.0]], dtype=np.float32).round(4)
    zoo = pd.DataFrame([{"name": "a"}, {"name": "b"}])
    ladder = pd.DataFrame([{"model": "llm", "reading_correct": 7, "tool_call_correct": 5}])
    m = models_stage.models_metrics(gen, 384, sim, 3, zoo, [{"name": "c", "reason": "absent"}], ladder)
    assert m == {"probe_llm": {"reading": 7, "tool_call": 5, "n_reading": 10, "n_tool_call": 6},
                 "llm_params_m": 134.52, "llm_sample_tokens_out": 8, "text_encoder_dim": 384,
                 "similarity_paraphrase": 0.8123, "similarity_unrelated": 0.0567, "spacy_entities": 3,
                 "models_provisioned": 2, "models_skipped": 1}
    assert gen.describe().startswith("llm: 134.5M parameters\nprompt: p\nreply:  reply")


def test_similarity_figure_is_outside_pyplot():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    fig = models_stage.similarity_figure(np.eye(2), ["one sentence", "another"], "t")
    assert plt.get_fignums() == before and fig._repr_png_().startswith(b"\x89PNG")


# --------------------------------------------------------------------------- world
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


# --------------------------------------------------------------------------- corpora
def _doc(i: int, topic: str, text: str) -> Document:
    return Document(id=f"d{i}", title=f"Title {i}", domain=topic, summary=f"summary {i}", entity_id=f"d{i}",
                    sections=[Section(id=f"d{i}-s0", doc_id=f"d{i}", title="", text=text)])


def test_tfidf_recall_finds_the_quoted_article():
    docs = [_doc(0, "A", "red apples grow in cold orchards"), _doc(1, "B", "steam engines pull long trains"),
            _doc(2, "B", "sailing boats cross the windy bay")]
    qs = [Question(id=f"q{i}", text=t, answer="", dataset="wiki", kind=k, split=s, gold_entity=f"d{i}",
                   gold_domain=docs[i].domain)
          for i, (t, k, s) in enumerate([("apples orchards", "fact", "test"), ("steam trains", "fact", "test"),
                                         ("windy bay boats", "description", "train")])]
    recall = wiki_stage.tfidf_recall(docs, qs)
    assert list(recall.index) == ["fact", "all"]
    assert recall.loc["all", "R@1"] == 1.0 and recall.loc["all", "Route@1"] == 1.0
    assert list(recall["questions"]) == [2, 2]


def test_ingest_options_take_every_knob_from_params():
    folder = config.load().corpora.folder
    opts = corpora_stage.ingest_options(folder)
    assert {f.name: getattr(opts, f.name) for f in dataclasses.fields(opts)} == {
        f.name: getattr(folder, f.name) for f in dataclasses.fields(opts)}


def test_file_counts_and_topics():
    report = IngestReport()
    report.files["html"] += 2
    report.ingested["documents"] += 1
    assert corpora_stage.file_counts(report).to_dict(orient="records") == [
        {"files": "html", "count": 2}, {"files": "ingested documents", "count": 1}]
    topics = wiki_stage.topic_sizes([_doc(0, "A", "x"), _doc(1, "B", "y"), _doc(2, "B", "z")])
    assert topics.to_dict() == {"B": 2, "A": 1}
