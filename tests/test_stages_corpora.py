"""Stage modules `corpora` and `wiki`: ingestion options from params, file counts, topic sizes and
the TF-IDF recall that measures how hard each kind of question is."""

from __future__ import annotations

import dataclasses

from mmrag import config
from mmrag.corpora.report import IngestReport
from mmrag.schema import Document, Question, Section
from mmrag.stages import corpora as corpora_stage
from mmrag.stages import wiki as wiki_stage


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


def test_file_counts_list_the_files_found_then_what_was_ingested():
    report = IngestReport()
    report.files["html"] += 2
    report.ingested["documents"] += 1
    assert corpora_stage.file_counts(report).to_dict(orient="records") == [
        {"files": "html", "count": 2}, {"files": "ingested documents", "count": 1}]


def test_topic_sizes_count_documents_per_topic_largest_first():
    topics = wiki_stage.topic_sizes([_doc(0, "A", "x"), _doc(1, "B", "y"), _doc(2, "B", "z")])
    assert list(topics.index) == ["B", "A"]
    assert topics.to_dict() == {"B": 2, "A": 1}
