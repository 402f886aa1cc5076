"""BRIT's text recall: recall over gold sections on any question set (HotpotQA, MuSiQue, the world),
per-hop recall over a gold decomposition, and "what we see" on a run whose Table 2 is null."""

from __future__ import annotations

import json

import pytest
from test_brit import three_pages
from test_brit_experiment import systems

from mmrag.brit.evaluation import hop_recall_rows, text_recall_row
from mmrag.corpora.multihop import DocumentPool, musique_question
from mmrag.corpora.report import IngestReport
from mmrag.evaluate import stats
from mmrag.schema import Evidence, Question, Step, SubQuestion, Trace
from mmrag.stages import brit_linking

SECTIONS = {"s1", "s2", "s3", "s4", "s5", "s9"}


def trace(qid: str, retrieved: dict[str, str]) -> Trace:
    """A retrieval trace handing over ``retrieved`` ({evidence id: content})."""
    return Trace(question_id=qid, system="t", answer="", steps=[Step(action="retrieve", evidence=[
        Evidence(id=i, kind="triplet", content=c) for i, c in retrieved.items()])])


def ci(k: int, n: int) -> str:
    lo, hi = stats.wilson(k, n)
    return f"[{lo:.3f}, {hi:.3f}]"


@pytest.fixture()
def known():
    """Four questions (one without text gold) and one system's traces, whose recall is known:
    q1 finds one of its two gold sections, q2 its only one, q3 none; q4's gold is an image."""
    qs = [Question(id="q1", text="?", answer="Helix", dataset="t", gold_evidence=["s1", "s2"]),
          Question(id="q2", text="?", answer="Osmera", dataset="t", gold_evidence=["s3"]),
          Question(id="q3", text="?", answer="Tarsine", dataset="t", gold_evidence=["s4", "s5", "img"]),
          Question(id="q4", text="?", answer="red", dataset="t", gold_evidence=["img"])]
    traces = [trace("q1", {"s1": "made by Helix", "s9": "a drone"}),
              trace("q2", {"s3": "the port of Osmera"}),
              trace("q3", {"s9": "nothing here", "img": "a picture"}),
              trace("q4", {"img": "a red drone"})]
    return {q.id: q for q in qs}, traces


def test_text_recall_scores_every_question_with_gold_sections(known):
    qmap, traces = known
    row = text_recall_row(traces, qmap, SECTIONS)
    assert row["questions"] == 3  # q4's gold is no section
    assert row["recall"] == round(2 / 3, 4) and row["recall 95% CI"] == ci(2, 3)
    assert row["all gold"] == round(1 / 3, 4) and row["all gold 95% CI"] == ci(1, 3)
    assert row["gold found"] == 0.5  # (1/2 + 1 + 0) / 3
    assert row["answer in context"] == round(2 / 3, 4) and row["answer in context 95% CI"] == f"{ci(2, 3)} n=3"
    assert row["words"] == round((5 + 4 + 4) / 3, 1)


def test_text_recall_is_not_applicable_without_gold_sections(known):
    qmap, traces = known
    assert text_recall_row(traces, {"q4": qmap["q4"]}, SECTIONS) is None
    assert text_recall_row([], qmap, SECTIONS) is None


def test_per_hop_recall_of_a_two_hop_question_that_finds_only_its_first_paragraph():
    q = Question(id="2hop__1_2", text="?", answer="x", dataset="musique", gold_evidence=["p1", "p2"],
                 decomposition=[SubQuestion(text="a?", tool="TextQA", answer="y", evidence_ids=["p1"]),
                                SubQuestion(text="b?", tool="TextQA", answer="x", evidence_ids=["p2"]),
                                SubQuestion(text="c?", tool="ImageQA", answer="x", evidence_ids=["img"])])
    rows = hop_recall_rows([trace(q.id, {"p1": "a", "p9": "b"})], {q.id: q}, {"p1", "p2", "p9"})
    assert rows == [{"hop": 1, "questions": 1, "recall": 1.0, "95% CI": ci(1, 1)},
                    {"hop": 2, "questions": 1, "recall": 0.0, "95% CI": ci(0, 1)}]  # the image step: no hop


def test_musique_ingestion_gives_per_hop_gold_that_the_hop_recall_reads():
    row = {"id": "2hop__11_22", "question": "Where was the maker of Vantor founded?", "answer": "Osmera",
           "answerable": True,
           "paragraphs": [{"idx": 0, "title": "Vantor", "paragraph_text": "Vantor is made by Helix.",
                           "is_supporting": True},
                          {"idx": 1, "title": "Helix", "paragraph_text": "Helix was founded in Osmera.",
                           "is_supporting": True},
                          {"idx": 2, "title": "Lorwick", "paragraph_text": "Lorwick is a town.",
                           "is_supporting": False}],
           "question_decomposition": [{"id": 11, "question": "Who makes Vantor?", "answer": "Helix",
                                       "paragraph_support_idx": 0},
                                      {"id": 22, "question": "Where was #1 founded?", "answer": "Osmera",
                                       "paragraph_support_idx": 1}]}
    pool = DocumentPool(report=IngestReport())
    q = musique_question(row, pool, "questions/musique.jsonl")
    sections = {s.id for d in pool.docs.values() for s in d.sections}
    hop1, hop2 = (sub.evidence_ids[0] for sub in q.decomposition)
    rows = hop_recall_rows([trace(q.id, {hop1: "Vantor is made by Helix."})], {q.id: q}, sections)
    assert [(r["hop"], r["recall"]) for r in rows] == [(1, 1.0), (2, 0.0)]
    assert text_recall_row([trace(q.id, {hop1: "x"})], {q.id: q}, sections)["gold found"] == 0.5


def test_the_stage_tables_name_brit_and_the_text_baselines_from_table2s_runs(known):
    qmap, traces = known
    rows = [{"question_id": t.question_id} for t in traces]
    none = [trace(t.question_id, {}) for t in traces]
    runs = {"CA+LS+SI": (rows, traces), "BM25 top-k": (rows, none), "dense top-k": (rows, traces),
            "CLIP top-k": (rows, traces)}
    table = brit_linking.text_recall_table(runs, ("CA", "LS", "SI"), list(qmap.values()), SECTIONS)
    assert list(table.index) == ["BRIT (CA+LS+SI)", "BM25 top-k", "dense top-k"]
    assert table.loc["BRIT (CA+LS+SI)", "recall"] == round(2 / 3, 4) and table.loc["BM25 top-k", "recall"] == 0.0
    assert (table["questions"] == 3).all()
    hops = brit_linking.hop_recall_table(runs, ("CA", "LS", "SI"), list(qmap.values()), SECTIONS)
    assert hops.empty and list(hops.columns) == brit_linking.HOP_COLUMNS  # no decomposition: no hop
    assert brit_linking.text_recall_table(runs, ("CA", "LS", "SI"), [qmap["q4"]], SECTIONS).empty


def null_recall_metrics() -> dict:
    """A text corpus's metrics: Table 2's cross-modal figures null, the text recall measured."""
    null = {"Text-Image": None, "Image-Text": None, "overall": None, "Image-Image": None, "words": None,
            "images": None}
    return {"table2_recall": {"CLIP top-k": null, "BM25 top-k": null, "dense top-k": null, "CA+LS+SI": null},
            "table1_accuracy": {"reader ceiling (gold evidence)": {"avg": None}, "questions": {"avg": 0}},
            "table3_nea": None, "paper": brit_linking.PAPER, "test_questions": 100, "qa_questions": 96,
            "calibration": {"best_threshold": None}, "before_after": [],
            "text_recall": {"BRIT (CA+LS+SI)": {"questions": 100, "recall": 0.61, "recall 95% CI": "[0.512, 0.700]",
                                                "all gold": 0.2, "answer in context": None, "words": 150.0},
                            "BM25 top-k": {"questions": 100, "recall": 0.9, "recall 95% CI": "[0.826, 0.945]",
                                           "all gold": 0.55, "answer in context": 0.7, "words": 170.0}},
            "per_hop_recall": [{"system": "BM25 top-k", "hop": 1, "questions": 100, "recall": 0.8},
                               {"system": "BM25 top-k", "hop": 2, "questions": 100, "recall": 0.5}]}


def test_what_we_see_reads_null_recall_as_not_applicable_and_shows_the_text_recall():
    text = brit_linking.what_we_see(json.loads(json.dumps(null_recall_metrics())), 0.75)
    assert "cross-modal recall is not applicable" in text
    assert "BRIT (CA+LS+SI) 0.610 [0.512, 0.700]" in text and "BM25 top-k 0.900" in text
    assert "BRIT (CA+LS+SI) n/a" in text  # its null answer-in-context rate
    assert "hop 1: BM25 top-k 0.800 (n=100); hop 2: BM25 top-k 0.500 (n=100)" in text
    assert "Reading" not in text  # no ceiling measured


def test_what_we_see_formats_a_partly_null_table2_row():
    metrics = null_recall_metrics()
    metrics["table2_recall"]["CA+LS+SI"] = {**metrics["table2_recall"]["CA+LS+SI"], "overall": 0.5, "words": 90.0}
    text = brit_linking.what_we_see(metrics, 0.75)
    assert "recalls 0.500" in text and "best flat baseline" not in text  # no baseline has a recall to rank
    assert "BRIT 90 words / n/a images" in text


def test_what_we_see_names_a_system_above_the_readers_ceiling():
    metrics = null_recall_metrics()
    metrics["table1_accuracy"] = {"reader ceiling (gold evidence)": {"avg": 0.5}, "questions": {"avg": 4}}
    metrics["above_ceiling"] = [{"system": "BRIT lemmas (CA+LS+SI)", "kind": "Image-Text", "accuracy": 1.0,
                                 "ceiling": 0.0, "excess": 1.0, "above ceiling": True}]
    text = brit_linking.what_we_see(metrics, 0.75)
    assert "above it: BRIT lemmas (CA+LS+SI) on Image-Text (1.00 against 0.00)." in text


def test_text_recall_on_real_retrieval_agrees_with_table2s_rule(tmp_path):
    """Two text questions (no cross-modal kind) on test_brit's three pages: Table 2's overall is null, the
    text recall of each system is the share of its Table 2 rows recalled."""
    root, docs = three_pages(tmp_path)
    S = systems(root, docs)
    qs = [Question(id="k", text="Where is Korro located?", answer="Dunvale", dataset="t", kind="bridge",
                   gold_evidence=["d2s0"]),
          Question(id="z", text="Who designed Zeph?", answer="Ada Quill", dataset="t", kind="bridge",
                   gold_evidence=["d1s0"])]
    runs = brit_linking.recall_runs(S, ("CA", "LS", "SI"), qs, brit_linking.text_baselines(S))
    assert brit_linking.recall_table(runs).loc["CA+LS+SI", "overall"] != brit_linking.recall_table(runs).loc[
        "CA+LS+SI", "overall"]  # NaN: no cross-modal question
    table = brit_linking.text_recall_table(runs, ("CA", "LS", "SI"), qs, set(S.sections))
    for name, key in brit_linking.text_recall_systems(runs, ("CA", "LS", "SI")).items():
        rows = runs[key][0]
        assert table.loc[name, "recall"] == round(sum(r["recalled"] for r in rows) / len(rows), 4)
        assert table.loc[name, "words"] == round(sum(r["words"] for r in rows) / len(rows), 1)


# ----------------------------------------------------------------------------- a MuSiQue file, end to end
def musique_row(i: int, first: tuple[str, str], second: tuple[str, str], ask: str, answer: str) -> dict:
    """A 2-hop MuSiQue item over two (title, paragraph) pairs and a distractor."""
    return {"id": f"2hop__{i}1_{i}2", "question": ask, "answer": answer, "answer_aliases": [], "answerable": True,
            "paragraphs": [{"idx": 0, "title": first[0], "paragraph_text": first[1], "is_supporting": True},
                           {"idx": 1, "title": "Calder coast", "paragraph_text": "The Calder coast has cliffs.",
                            "is_supporting": False},
                           {"idx": 2, "title": second[0], "paragraph_text": second[1], "is_supporting": True}],
            "question_decomposition": [{"id": i * 10 + 1, "question": f"hop one of {i}", "answer": "x",
                                        "paragraph_support_idx": 0},
                                       {"id": i * 10 + 2, "question": f"hop two of {i}", "answer": answer,
                                        "paragraph_support_idx": 2}]}


MUSIQUE = [
    musique_row(1, ("Vantor X2", "The Vantor X2 is made by Helix Corp."),
                ("Helix Corp", "Helix Corp was founded by Mara Quell."), "Who founded the maker of the Vantor X2?",
                "Mara Quell"),
    musique_row(2, ("Mara Quell", "Mara Quell was born in Tarsine."),
                ("Tarsine", "Tarsine is known for its glass."), "What is the birthplace of Mara Quell known for?",
                "glass"),
    musique_row(3, ("Brennock University", "Brennock University is in Lorwick."),
                ("Lorwick", "Lorwick bridges span the Fennel river."),
                "Which river runs through the town of Brennock University?", "Fennel"),
    musique_row(4, ("Osmera", "Osmera has a lighthouse from 1821."),
                ("Osmera lighthouse", "The Osmera lighthouse is painted red."),
                "What colour is the lighthouse of Osmera?", "red"),
    musique_row(5, ("Helix Corp", "Helix Corp employs 420 people."),
                ("Vantor X2", "The Vantor X2 weighs 840 grams."), "How much does the drone of Helix Corp weigh?",
                "840 grams"),
]


@pytest.mark.slow
def test_a_musique_folder_gets_text_and_per_hop_recall_from_brit_linking(tmp_path, monkeypatch):
    """The user's path: an official MuSiQue file in a text-only folder, through corpora, brit_graph and
    brit_linking. Table 2 is null (no cross-modal question), the text recall and per-hop recall are not."""
    import yaml
    from test_text_only import ROOT, tiny_clip, write_folder

    from mmrag import config, io
    from mmrag.stages import brit_graph, corpora

    data, results = tmp_path / "data", tmp_path / "results"
    monkeypatch.setattr(io, "DATA", data)
    monkeypatch.setattr(io, "RESULTS", results)
    for mod in (corpora, brit_graph):
        monkeypatch.setattr(mod, "DATA", data)
    folder = write_folder(tmp_path / "my_documents")
    (folder / "questions" / "musique_dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in MUSIQUE))
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw = config.apply_overrides(raw, [
        "corpora.wiki_max_docs=30", f"corpora.folder.path={folder}", f"models.clip={tiny_clip(tmp_path / 'clip')}",
        "brit_graph.corpus=folder", "brit_graph.nea_documents=''", "brit_graph.example_page=0",
        "brit_linking.question_set=musique_dev", "brit_linking.calibration_grid=[0.5]",
        "brit_linking.reader_llm=smollm2-135m-instruct"])
    params = config.from_dict(raw)
    corpora.run(params)
    brit_graph.run(params)
    res = brit_linking.run(params)
    metrics = json.loads((results / "brit_linking" / "metrics.json").read_text())
    n_test = metrics["test_questions"]
    assert metrics["table2_recall"]["CA+LS+SI"]["overall"] is None
    assert set(metrics["text_recall"]) == {"BRIT (CA+LS+SI)", "BM25 top-k", "dense top-k"}
    assert all(row["questions"] == n_test and 0 <= row["recall"] <= 1 for row in metrics["text_recall"].values())
    assert {(r["system"], r["hop"]) for r in metrics["per_hop_recall"]} == {
        (s, h) for s in metrics["text_recall"] for h in (1, 2)}
    text = brit_linking.what_we_see(metrics, params.brit_linking.threshold)
    assert "Text recall" in text and "hop 2:" in text
    assert res.tables["text_recall"].loc["BM25 top-k", "recall"] == metrics["text_recall"]["BM25 top-k"]["recall"]
