"""BRIT's experiment: the paper's question kinds, baselines with the paper's budget, the knob sweep,
the component sizes, the readers (a fake engine with the generation service's interface), the
stages' tables, traces and samples."""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import re
import tempfile
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from test_brit import FakeClip, LineExtractor, build, hash_encode, three_pages

from mmrag import config, io
from mmrag.brit import paper
from mmrag.brit.evaluation import triplet_scores
from mmrag.brit.reader import (
    LLMReader,
    SimilarityReader,
    copied_choice,
    image_descriptions,
    llm_messages,
    read_all,
)
from mmrag.brit.system import BritSystem, Systems, make_reader
from mmrag.brit.triplets import LLMTriplets, Triplet
from mmrag.corpora.passages import Chunking
from mmrag.evaluate import stats
from mmrag.models import generation, registry
from mmrag.schema import Document, Question, Section
from mmrag.stages import brit_graph, brit_linking
from mmrag.world.files import build as build_world
from mmrag.world.files import lexical_similarity


@pytest.fixture()
def corpus(tmp_path):
    """test_brit's three pages."""
    return three_pages(tmp_path)


def systems(root, docs, **kw):
    args = dict(threshold=0.5, top_k=5, edge_cost=0.5, max_linked_triplets=8, baseline_k=3,
                baseline_images=2, baseline_words=None)
    args.update(kw)
    return Systems(build(root, docs), docs, LineExtractor().entities, **args)


class FakeLLM:
    """The generation service's interface: generate(conversations, ...) -> [.text]; copies the
    option whose text appears in the prompt's facts or pictures, else 'no idea' (unparseable)."""

    name = "fake"

    def __init__(self):
        self.calls = []

    def generate(self, conversations, max_new_tokens=128, temperature=0.0, stop=None):
        self.calls.append((len(conversations), max_new_tokens, temperature))
        out = []
        for conv in conversations:
            user = conv[-1]["content"]
            context, _, options = user.partition("Options:")
            reply = "no idea"
            for line in options.strip().splitlines():
                text = line.removeprefix("- ").strip()
                if line.startswith("- ") and text in context.split("Question:")[0]:
                    reply = f"{text}."
                    break
            if not options:
                reply = "Dunvale" if "Dunvale" in context else ""
            out.append(SimpleNamespace(text=reply, tokens_in=len(user.split()), tokens_out=1))
        return out


# ----------------------------------------------------------------------------- the world's kinds
@pytest.fixture(scope="module")
def brit_sets():
    P = config.load()
    tiny = dataclasses.replace(P.world, domains=2, products_per_domain=3, people_per_domain=2,
                               places_per_domain=1, events_per_domain=1, image_size=32,
                               brit_questions=40, brit_nea_pairs=6, mmqa_questions=60,
                               mmcoqa_conversations=6, infoseek_questions=40, validation_threshold=0.9)

    with tempfile.TemporaryDirectory() as d:
        world, sets, _, report = build_world(tiny, 7, lexical_similarity, out_dir=Path(d),
                                             chunking=Chunking.of(P.knowledge_map))
    random.seed(0)
    return world, sets, report


def test_image_image_questions_are_simple_named_single_image_questions(brit_sets):
    world, sets, report = brit_sets
    brit = sets["brit"]
    assert {q.kind for q in brit} == {"Text-Image", "Image-Text", "Image-Image"}
    ii = [q for q in brit if q.kind == "Image-Image"]
    assert ii
    for q in ii:
        x = world.entities[q.gold_entity]
        assert x.name in q.text and q.image_id is None  # the question names the entity, no query image
        assert len(q.decomposition) == 1 and q.decomposition[0].tool == "ImageQA"
        assert q.gold_evidence and all(e.startswith("img-") for e in q.gold_evidence)  # no text needed
        assert all(world.image_rows[e]["entity_id"] == x.id for e in q.gold_evidence)
    # Text-Image never names the pictured entity; the 3-hop chain survives only as a candidate pool
    for q in brit:
        if q.kind == "Text-Image":
            assert world.entities[q.gold_entity].name not in q.text
    assert any(k.startswith("Image-Text-Image/") for k in report["brit_validation"])
    assert Counter(q.meta["source"] for q in brit if q.kind == "Text-Image").keys() == {"caption", "section"}


def test_nea_anonymises_image_image_questions(brit_sets):
    _, sets, _ = brit_sets
    rows = sets["brit_nea"]
    assert rows and {q.kind for q in rows} == {"Image-Image"}
    for q in rows:
        if q.meta["nea"]:
            assert q.meta["original_name"] not in q.text and q.meta["alias"] in q.text
            assert q.meta["bridge_section_id"] in q.gold_evidence  # the alias needs the bridge sentence


def test_brit_questions_are_deterministic():
    P = config.load()
    tiny = dataclasses.replace(P.world, domains=2, products_per_domain=2, people_per_domain=2,
                               places_per_domain=1, events_per_domain=1, image_size=32,
                               brit_questions=20, brit_nea_pairs=3, mmqa_questions=20,
                               mmcoqa_conversations=3, infoseek_questions=20)
    texts = []
    for _ in range(2):
        with tempfile.TemporaryDirectory() as d:
            _, sets, _, _ = build_world(tiny, 3, lexical_similarity, out_dir=Path(d),
                                        chunking=Chunking.of(P.knowledge_map))
        texts.append([(q.id, q.kind, q.text, q.answer, tuple(q.gold_evidence))
                      for q in sets["brit"] + sets["brit_nea"]])
    assert texts[0] == texts[1]


# ----------------------------------------------------------------------------- baselines' budget
def test_text_baselines_keep_the_word_budget(corpus):
    root, docs = corpus
    S = systems(root, docs, baseline_k=5, baseline_words=4)
    flat = brit_linking.text_baselines(S)
    for r in flat.values():
        got = r.retrieve("Korro located where?")
        assert len(got.texts) >= 1 and sum(len(t.split()) for t in got.texts[1:]) <= 4 and not got.images
    S2 = systems(root, docs, baseline_k=5, baseline_words=None, baseline_images=2)
    clip = S2.baseline("clip").retrieve("blue")
    assert len(clip.images) == 2 and len(clip.texts) == 5  # every chunk of this 5-chunk corpus


# ----------------------------------------------------------------------------- knobs and components
def test_knob_sweep_and_inert_knobs(corpus):
    root, docs = corpus
    S = systems(root, docs)
    dev = [Question(id="a", text="What colour is the product designed by [Ada Quill]?", answer="red",
                    dataset="t", kind="Text-Image", gold_evidence=["d0s0", "d0i0"]),
           Question(id="b", text="Where is [Korro] located?", answer="Dunvale", dataset="t",
                    kind="Image-Text", gold_evidence=["d2s0", "d2i0"], image_path="images/p2.png")]
    rows = brit_linking.knob_sweep_rows(S, ("CA", "LS", "SI"), dev, {"threshold": [0.0, 1.01], "top_k": [1, 5],
                                                                      "edge_cost": [0.1, 5.0]})
    assert [(r["knob"], r["value"]) for r in rows] == [("threshold", 0.0), ("threshold", 1.01), ("top_k", 1),
                                                      ("top_k", 5), ("edge_cost", 0.1), ("edge_cost", 5.0)]
    th = {r["value"]: r for r in rows if r["knob"] == "threshold"}
    assert th[1.01]["kept_graphs"] == 0 and th[0.0]["kept_graphs"] > 0 and th[1.01]["words"] < th[0.0]["words"]
    sweep = pd.DataFrame(rows)
    assert "threshold" not in brit_linking.inert_knobs(sweep)
    flat = pd.DataFrame([{"knob": "top_k", "value": v, "recall": 0.5, "words": 10.0} for v in (1, 2)])
    assert brit_linking.inert_knobs(flat) == ["top_k"]
    with pytest.raises(ValueError, match="knob"):
        brit_linking.knob_sweep_rows(S, ("CA",), dev, {"alpha": [1]})


def test_component_sizes(corpus):
    root, docs = corpus
    sizes = brit_graph.component_sizes(build(root, docs))
    # pages 0 and 1 share Ada Quill (one component); page 2 is its own
    summary = brit_graph.component_summary(sizes)
    assert summary["components"] == 2 and summary["largest"] == sizes["size"].max()
    assert abs(sizes["node_share"].sum() - 1.0) < 1e-3
    assert summary["nodes"] == int((sizes["size"] * sizes["components"]).sum())
    assert brit_graph.component_summary(sizes.iloc[0:0])["components"] == 0


# ----------------------------------------------------------------------------- the LLM reader
def test_llm_reader_batches_every_question_in_one_call(corpus):
    root, docs = corpus
    S = systems(root, docs)
    llm = FakeLLM()
    rd = LLMReader(llm, image_descriptions(S.captions, {"d1i0": {"colour": "blue", "logo_position": "top left"}}))
    assert "It shows colour: blue; logo position: top left." in rd.image_text["d1i0"]
    msgs = llm_messages("What colour?", ["red", "blue"], ["Zeph made in Brennmoor"], ["d1i0"], rd.image_text)
    assert msgs[0]["role"] == "system" and "- red\n- blue" in msgs[1]["content"]
    assert "Zeph made in Brennmoor" in msgs[1]["content"] and "Picture 1: A [Zeph] on a desk" in msgs[1]["content"]
    qs = [Question(id="q1", text="What colour is the [Zeph]?", answer="blue", dataset="t", kind="Image-Image",
                   choices=["red", "blue", "green", "yellow"], gold_evidence=["d1i0"]),
          Question(id="q2", text="Where is [Korro] located?", answer="Dunvale", dataset="t", kind="Image-Text",
                   choices=["Oslo", "Dunvale", "Brennmoor", "Helix"], gold_evidence=["d2s0"]),
          Question(id="q3", text="Where is [Korro] located?", answer="Dunvale", dataset="t")]
    rows, traces = BritSystem.graph(S, ("CA", "LS", "SI"), "brit", rd).run(qs)
    # one call per item type (multiple choice, open), each with every question of that type
    assert [c[0] for c in llm.calls] == [2, 1] and all(c[2] == 0.0 for c in llm.calls)
    assert rd.prompts == 3 and len(rows) == 3 and traces[2].answer == "Dunvale"
    assert rows[1]["correct"]  # the retrieved triplet names the answer
    # an unparseable reply is no answer (wrong), and is counted
    assert rd.answer("Q?", ["x", "y"], [], []) == "" and rd.unparsed >= 1


def test_ceiling_is_read_in_one_batch_and_the_check_flags_only_clear_excess(corpus):
    root, docs = corpus
    S = systems(root, docs)
    llm = FakeLLM()
    rd = LLMReader(llm, image_descriptions(S.captions, None))
    qs = [Question(id=f"q{i}", text="Where is [Korro] located?", answer="Dunvale", dataset="t", kind="Image-Text",
                   choices=["Oslo", "Dunvale"], gold_evidence=["d2s0", "d2i0"]) for i in range(3)]
    rows = brit_linking.ceiling(rd, qs, S.sections, max_images=1)
    assert len(llm.calls) == 1 and llm.calls[0][0] == 3 and all(r["correct"] for r in rows)
    # read_all falls back to one-by-one readers
    sim = SimilarityReader(hash_encode, FakeClip(), root, 1.0, 1.0, image_paths=S.image_paths)
    item = ("Where is Korro located?", ["Oslo", "Dunvale"], ["Korro located in Dunvale"], [])
    assert read_all(sim, [item]) == ["Dunvale"]
    assert read_all(None, [("q", [], [], [])]) == [""]
    t1 = pd.DataFrame({"Image-Image": [0.9, 0.3, 0.5, 100], "Text-Image": [0.55, 0.5, 0.5, 100],
                       "Image-Text": [float("nan"), 0.1, 0.2, 0], "avg": [0.5, 0.3, 0.35, 100]},
                      index=["sys A", "sys B", brit_linking.CEILING, "questions"])
    check = brit_linking.ceiling_check(t1)
    flagged = check[check["above ceiling"]]
    assert list(zip(flagged.system, flagged.kind)) == [("sys A", "Image-Image")]  # 0.55 vs 0.5 is noise at n=100
    assert set(check.kind) == {"Image-Image", "Text-Image"}  # no questions: not compared


# ----------------------------------------------------------------------------- the LLM extractor
class TripletLLM:
    """Writes 'subject | relation | object' for every 'X designed Y.' sentence of the prompt."""

    name = "fake-extractor"

    def __init__(self):
        self.calls = []
        self.usage = SimpleNamespace(prompt_tokens=0, completion_tokens=0)

    def generate(self, conversations, max_new_tokens=128, temperature=0.0, stop=None):
        self.calls.append(len(conversations))
        out = []
        for conv in conversations:
            text = conv[-1]["content"].split("Text:")[1]
            pairs = re.findall(r"([A-Z]\w+ \w+) designed (?:the )?([A-Z]\w+)", text)
            lines = [f"{a} | designed | {b}" for a, b in pairs]
            self.usage.prompt_tokens += len(text.split())
            self.usage.completion_tokens += 3 * len(lines)
            out.append(SimpleNamespace(text="\n".join(lines), tokens_in=0, tokens_out=0))
        return out

    def close(self):
        pass


def test_llm_extractor_asks_for_every_section_in_one_call():
    llm = TripletLLM()
    ex = LLMTriplets(llm)
    ex.prefetch(["Ada Quill designed the Vantor.", "Bo Lind designed Zeph.", "Ada Quill designed the Vantor."])
    assert llm.calls == [2]
    assert ex.extract("Ada Quill designed the Vantor.") == [("Ada Quill", "designed", "Vantor")]
    assert llm.calls == [2]  # answered from the prefetched replies


@pytest.mark.slow
def test_extractor_comparison_scores_both_on_the_same_pages(tmp_path, monkeypatch):
    try:
        nlp = registry.load_spacy("en_core_web_sm")
    except registry.ModelError as e:
        pytest.skip(str(e))
    docs = [Document(id=f"d{i}", title=t, sections=[Section(id=f"d{i}s0", doc_id=f"d{i}", title="s", text=x)])
            for i, (t, x) in enumerate([("Vantor", "Ada Quill designed the Vantor."),
                                         ("Zeph", "Bo Lind designed Zeph in Oslo.")])]
    (tmp_path / "entities.jsonl").write_text("\n".join(json.dumps(e) for e in [
        {"id": "p1", "name": "Ada Quill", "relations": []}, {"id": "x1", "name": "Vantor", "relations": []},
        {"id": "p2", "name": "Bo Lind", "relations": []}, {"id": "x2", "name": "Zeph", "relations": []}]) + "\n")
    (tmp_path / "facts.jsonl").write_text("\n".join(json.dumps(f) for f in [
        {"section_id": "d0s0", "subject": "x1", "relation": "designed_by", "object": "p1"},
        {"section_id": "d1s0", "subject": "x2", "relation": "designed_by", "object": "p2"}]) + "\n")
    P = config.load()
    cfg = dataclasses.replace(P.brit_graph, llm_sample_pages=2, extractor_llm="fake-extractor")
    llm = TripletLLM()
    table = brit_graph.extractor_comparison(docs, nlp, LLMTriplets(llm, nlp=nlp), cfg, P.inference, P.base, tmp_path)
    assert list(table.index) == ["spacy", "llm (fake-extractor)"] and llm.calls == [2]
    assert table.loc["llm (fake-extractor)", "recall"] == 1.0 and table.loc["llm (fake-extractor)", "precision"] == 1.0
    assert table.loc["llm (fake-extractor)", "prompt_tokens_per_page"] > 0 and (table["pages"] == 2).all()
    off = dataclasses.replace(cfg, llm_sample_pages=0)
    assert brit_graph.extractor_comparison(docs, nlp, None, off, P.inference, P.base, tmp_path) is None


def test_stage_tables_report_words_images_and_the_ceiling_per_system(corpus):
    root, docs = corpus
    S = systems(root, docs, baseline_k=4, baseline_words=8, baseline_images=2)
    qs = [Question(id="q1", text="What colour is the [Zeph]?", answer="blue", dataset="t", kind="Image-Image",
                   choices=["red", "blue", "green", "yellow"], gold_evidence=["d1i0"]),
          Question(id="q2", text="Where is [Korro] located?", answer="Dunvale", dataset="t", kind="Image-Text",
                   choices=["Oslo", "Dunvale", "Brennmoor", "Helix"], gold_evidence=["d2s0", "d2i0"],
                   image_path="images/p2.png"),
          Question(id="q3", text="What colour is the product designed by [Ada Quill]?", answer="red", dataset="t",
                   kind="Text-Image", choices=["red", "blue", "green", "yellow"], gold_evidence=["d0s0", "d0i0"])]
    flat = brit_linking.text_baselines(S)
    runs = brit_linking.recall_runs(S, ("CA", "LS", "SI"), qs, flat)
    t2 = brit_linking.recall_table(runs)
    assert {"CLIP top-k", "text enc.+CLIP top-k", "BM25 top-k", "dense top-k", "CA+LS+SI"} <= set(t2.index)
    assert t2.loc["CLIP top-k", "images"] == 2.0 and t2.loc["BM25 top-k", "images"] == 0.0
    assert {"words", "images", "Image-Image", "overall"} <= set(t2.columns)
    llm = FakeLLM()
    reader = LLMReader(llm, image_descriptions(S.captions, None))
    qa = {name: system.run(qs) for name, system in brit_linking.qa_systems(S, ("CA", "LS", "SI"), reader, flat).items()}
    assert all(c[0] == len(qs) for c in llm.calls)  # every system: one batched call for its questions
    t1 = brit_linking.accuracy_table(qa, reader, qs, S.sections, max_images=2)
    assert brit_linking.CEILING in t1.index and t1.loc["questions", "Image-Image"] == 1
    assert t1.loc["CLIP top-k", "images"] == 2.0 and t1.loc["BM25 top-k", "words"] <= 8 + 8
    check = brit_linking.ceiling_check(t1)
    assert set(check.system) == set(qa) and check["above ceiling"].dtype == bool
    subset = brit_linking.balanced_subset
    assert subset(qs, 2, 0) == subset(qs, 2, 0) and len(subset(qs, 2, 0)) == 2
    assert {q.kind for q in subset(qs * 1, 3, 0)} == {"Image-Image", "Image-Text", "Text-Image"}


def korro_run(corpus, tmp_path, monkeypatch) -> tuple[Path, list[Document], Any, list[Question]]:
    """Traces redirected into tmp_path, the systems over the three pages, and three Image-Text
    questions about Korro."""
    monkeypatch.setattr(io, "DATA", tmp_path / "data")
    # write_traces binds data/ as a default argument: without this the test wrote into the workspace
    monkeypatch.setattr(io, "write_traces", functools.partial(io.write_traces, data=tmp_path / "data"))
    root, docs = corpus
    qs = [Question(id=f"q{i}", text="Where is [Korro] located?", answer="Dunvale", dataset="t", kind="Image-Text",
                   choices=["Oslo", "Dunvale"], gold_evidence=["d2s0", "d2i0"]) for i in range(3)]
    return root, docs, systems(root, docs), qs


def test_table2_runs_are_traced_for_every_test_question(corpus, tmp_path, monkeypatch):
    root, docs, S, qs = korro_run(corpus, tmp_path, monkeypatch)
    runs = brit_linking.recall_runs(S, ("CA", "LS", "SI"), qs, brit_linking.text_baselines(S))
    qa = {"BRIT (CA+LS+SI)": BritSystem.graph(S, ("CA", "LS", "SI"), "x").run(qs[:1])}
    written = brit_linking.write_all_traces(qa, runs, "brit", "brit_nea")
    names = {p.name for p in written.values()}
    assert "brit__ca_ls_si__brit.jsonl" in names and "brit__ca_ls_si__brit_retrieval.jsonl" in names
    assert {"clip_top_k__brit_retrieval.jsonl", "brit__ca_lp__brit_retrieval.jsonl",
            "brit__no_linking__brit_retrieval.jsonl"} <= names
    assert len(io.read_jsonl(written["retrieval CA+LS+SI"])) == 3
    assert len(io.read_jsonl(written["BRIT (CA+LS+SI)"])) == 1
    # Table 3's two halves go to their own sets, so the NEA claim can pair them
    nea = {"NEA CLIP top-k": runs["CLIP top-k"], "NEA-orig CLIP top-k": runs["CLIP top-k"]}
    written = brit_linking.write_all_traces({}, nea, "brit", "brit_nea").values()
    assert {p.name for p in written} == {"clip_top_k__brit_nea.jsonl", "clip_top_k__brit_nea_orig.jsonl"}
    assert all(p.is_relative_to(tmp_path) for p in written)


def test_llm_reader_describes_the_question_picture():
    desc = image_descriptions({"q0": "a photo of one round red device"}, {"q0": {"colour": "red"}})
    msgs = llm_messages("Who made the product in this picture?", ["A Co", "B Co"], [], [], desc, "q0")
    assert "The picture the question shows: a photo of one round red device It shows colour: red." in msgs[1]["content"]
    llm = FakeLLM()
    LLMReader(llm, desc).answer_many([("Q?", ["x", "y"], ["x is it"], [], "q0")])
    assert llm.calls == [(1, 12, 0.0)]


def test_copied_choice_reads_copied_options_then_letters():
    opts = ["top left", "top right", "left", "center"]
    assert copied_choice("Top right.", opts) == "top right"
    assert copied_choice("The answer is top left", opts) == "top left"  # 'left' is inside 'top left'
    assert copied_choice("B", opts) == "top right" and copied_choice("maybe", opts) is None


def test_knob_sweep_runs_on_a_text_corpus(corpus):
    root, docs = corpus
    S = systems(root, docs)
    dev = [Question(id="w", text="Where is [Korro] located?", answer="Dunvale", dataset="wiki", kind="description",
                    gold_evidence=["d2s0"])]
    rows = brit_linking.knob_sweep_rows(S, ("CA", "LS", "SI"), dev, {"threshold": [0.0, 1.01]})
    assert rows[0]["recall"] == 1.0 and rows[1]["recall"] == 0.0  # the threshold drops Korro's graph


def test_make_reader_loads_the_llm_through_the_generation_service(corpus, monkeypatch):
    root, docs = corpus
    S = systems(root, docs)
    row = {"id": "h0", "caption": "a red thing", "attributes": {"colour": "red"}}
    (root / "images.jsonl").write_text(json.dumps(row) + "\n")
    seen = {}

    def fake_load_chat(name, **kw):
        seen.update(name=name, **kw)
        return FakeLLM()

    monkeypatch.setattr(generation, "load_chat", fake_load_chat)
    P = config.load()
    cfg = dataclasses.replace(P.brit_linking, reader="llm", reader_llm="some-ladder-model", engine="llamacpp")
    rd = make_reader(cfg, S, root, False, P.inference, "cpu")
    assert isinstance(rd, LLMReader) and seen["name"] == "some-ladder-model" and seen["engine"] == "llamacpp"
    assert "It shows colour: red." in rd.image_text["h0"] and rd.image_text["d0i0"].startswith("The [Vantor]")
    with pytest.raises(ValueError, match="inference"):
        make_reader(cfg, S, root, False, None)
    sim = make_reader(dataclasses.replace(cfg, reader="similarity"), S, root, False)
    assert isinstance(sim, SimilarityReader)


def test_sensitivity_moves_one_knob_to_each_end_of_its_grid_on_every_test_question(corpus):
    root, docs = corpus
    S = systems(root, docs)
    qs = [Question(id=f"q{i}", text="Where is [Korro] located?", answer="Dunvale", dataset="t", kind="Image-Text",
                   gold_evidence=["d2s0", "d2i0"]) for i in range(3)]
    cfg = SimpleNamespace(threshold=0.5, top_k=5, edge_cost=0.5, calibration_grid=[0.0, 0.5, 1.01],
                          sweep_top_k=[1, 5], sweep_edge_cost=[0.5])
    runs, settings = brit_linking.sensitivity_runs(S, ("CA", "LS", "SI"), qs, cfg)
    assert [(s["knob"], s["value"], s["params_value"]) for s in settings] == [
        ("threshold", 0.0, 0.5), ("threshold", 1.01, 0.5), ("top_k", 1, 5)]  # Ce's grid is its params value
    assert {s["params_system"] for s in settings} == {"brit__ca_ls_si"}  # Table 2's trace of the main linkers
    assert [s["system"] for s in settings] == ["brit__ca_ls_si_threshold_0",
                                               "brit__ca_ls_si_threshold_1_01", "brit__ca_ls_si_top_k_1"]
    assert all(len(traces) == 3 for _, traces in runs.values())
    rows = {s["value"]: r for s, (r, _) in zip(settings, runs.values()) if s["knob"] == "threshold"}
    assert rows[1.01][0]["words"] < rows[0.0][0]["words"]  # nothing passes a threshold above 1


def test_the_papers_table1_sits_beside_ours_with_the_complex_average():
    t = brit_linking.paper_table1()
    assert list(t.index) == ["CLIP (paper)", "BLIP (paper)", "BRIT (paper)"]
    # the paper's printed cells (paper_tables.yaml): BRIT Full 0.78 / 0.72 / 0.89, Average 0.80
    assert t.loc["BRIT (paper)", "avg"] == 0.80 and t.loc["CLIP (paper)", "avg"] == 0.73  # (0.70 + 0.76) / 2
    assert paper.brit_vs_best_baseline("Image-Image") == (0.78, 0.82)  # BLIP, the best flat one there
    assert paper.brit_vs_best_baseline("complex") == (0.80, 0.73)


def test_the_claim_pair_reads_table1s_complex_questions_then_seeded_others():
    def q(i, kind):
        return Question(id=f"q{i:03d}", text="?", answer="a", dataset="brit", kind=kind, choices=["a", "b"])

    test = [q(i, ("Image-Image", "Text-Image", "Image-Text")[i % 3]) for i in range(60)]
    qa_test = brit_linking.balanced_subset(test, 12, seed=1)
    own = [x for x in qa_test if x.kind != "Image-Image"]
    sample = brit_linking.claim_sample(test, qa_test, 30, seed=1)
    assert len(sample) == 30 and {x.kind for x in sample} == {"Text-Image", "Image-Text"}
    assert {x.id for x in own} <= {x.id for x in sample}  # Table 1's complex questions are in it
    assert brit_linking.claim_sample(test, qa_test, None, seed=1) == own
    assert [x.id for x in brit_linking.claim_sample(test, qa_test, 30, seed=1)] == [x.id for x in sample]  # seeded

    class Fake:  # answers every question right, and counts what it was asked to read
        def __init__(self):
            self.read = []

        def run(self, qs):
            self.read += [x.id for x in qs]
            return ([{"question_id": x.id, "kind": x.kind, "correct": 1.0} for x in qs],
                    [SimpleNamespace(question_id=x.id) for x in qs])

    brit, flat = brit_linking.claim_pair()
    systems = {brit: Fake(), flat: Fake(), "CLIP top-k": Fake()}
    qa = {name: s.run(qa_test) for name, s in systems.items()}
    runs = brit_linking.claim_runs(qa, systems, sample)
    assert set(runs) == {brit, flat}  # only the pair reads more
    assert len(systems[brit].read) == len(qa_test) + 30 - len(own) and len(systems["CLIP top-k"].read) == 12
    assert sorted(t.question_id for t in runs[brit][1]) == sorted(x.id for x in sample)
    table = brit_linking.claim_table(runs)
    assert table.loc[brit, "complex"] == 1.0 and table.loc[brit, "complex 95% CI"].endswith("n=30")


def draw_in_turn_by_kind(questions, n, seed):
    """The reference draw balanced_subset must make: questions in id order grouped by kind, each
    kind shuffled (in order of first appearance) by ``random.Random(f"{seed}:qa")``, one question
    popped from each kind in turn (kinds sorted) until ``n``, returned by id."""
    if not n or n >= len(questions):
        return list(questions)
    rng = random.Random(f"{seed}:qa")
    by_kind = {}
    for q in sorted(questions, key=lambda q: q.id):
        by_kind.setdefault(q.kind, []).append(q)
    for qs in by_kind.values():
        rng.shuffle(qs)
    out = []
    while len(out) < n:
        for kind in sorted(by_kind):
            if by_kind[kind] and len(out) < n:
                out.append(by_kind[kind].pop())
    return sorted(out, key=lambda q: q.id)


def test_balanced_subset_draws_kinds_in_turn_as_the_reference_on_a_world_shaped_question_set():
    # the world's brit.jsonl: ids in order, kinds in contiguous blocks (100 / 200 / 200)
    sizes = {"Image-Image": 100, "Image-Text": 200, "Text-Image": 200}
    kinds = [k for k, m in sizes.items() for _ in range(m)]
    qs = [Question(id=f"brit-{i:05d}", text="?", answer="a", dataset="brit", kind=k, choices=["a", "b"],
                   gold_evidence=[f"s{i}"]) for i, k in enumerate(kinds)]
    _, test = brit_linking.split_questions(qs, 0.2, 0, None)
    assert [q.id for q in brit_linking.balanced_subset(test, 6, 0)] == [
        "brit-00032", "brit-00066", "brit-00234", "brit-00298", "brit-00396", "brit-00489"]
    shuffled = list(test)
    random.Random(5).shuffle(shuffled)
    for seed in (0, 1, 7, 1234):
        for n in (None, 1, 5, 12, 48, 96, 192, 399, 400, 401):
            for questions in (test, shuffled, test[60:140]):  # id order, any order, uneven kinds
                got = brit_linking.balanced_subset(questions, n, seed)
                assert [q.id for q in got] == [q.id for q in draw_in_turn_by_kind(questions, n, seed)]
        qa_test = brit_linking.balanced_subset(test, 96, seed)
        assert Counter(q.kind for q in qa_test) == {"Image-Image": 32, "Image-Text": 32, "Text-Image": 32}
        taken = {q.id for q in qa_test}  # claim_sample's draw: the rest of the complex questions
        rest = [q for q in test if q.kind != "Image-Image" and q.id not in taken]
        assert brit_linking.balanced_subset(rest, 128, seed) == draw_in_turn_by_kind(rest, 128, seed)


def test_triplet_scores_carry_wilson_intervals_with_their_n():
    facts = [{"section_id": "s0", "subject": "p1", "object": "x1"},
             {"section_id": "s0", "subject": "p2", "object": "x1"},
             {"section_id": "s1", "subject": "p1", "object": "1999"}]
    names = {"p1": "Ada Quill", "p2": "Bo Lind", "x1": "Vantor"}
    found = [Triplet("Ada Quill", "designed", "Vantor", "d", "s0"),
             Triplet("Vantor", "was shown at", "Oslo", "d", "s0"),  # not a stated fact
             Triplet("Ada Quill", "was born in", "1999", "d", "s1"),
             Triplet("Bo Lind", "designed", "Vantor", "d", "s1")]  # a fact, but of another section
    got = triplet_scores(found, facts, names)
    assert (got["precision"], got["recall"], got["extracted"], got["gold_facts"]) == (0.5, 0.6667, 4, 3)
    lo, hi = stats.wilson(2, 4)
    assert got["precision_ci"] == [round(lo, 4), round(hi, 4), 4] and got["recall_ci"][2] == 3
    assert got["recall_ci"][0] < 0.6667 < got["recall_ci"][1]
    line = brit_graph.what_we_see({"pages": 2, "triplets": 4, "extractor": {"name": "spacy"},
                              "extractors": {"spacy": {**got, "pages": 2}},
                              "components": {"components": 1, "nodes": 3, "largest": 3, "largest_share": 1.0,
                                             "singletons": 0},
                              "graph": {}, "incremental": True})
    assert f"P 0.500 [{lo:.2f}, {hi:.2f}] of 4 triplets" in line and "of 3 facts" in line


# ------------------------------------------------------------------ bounds, diagnostics, before/after
def _q(i, kind, n_choices=4):
    return Question(id=f"q{i}", text="?", answer="Dunvale", dataset="w", kind=kind,
                    choices=["Dunvale", "b", "c", "d", "e"][:n_choices])


def test_table1_carries_chance_and_the_ceiling_beside_every_cell():
    qs = [_q(0, "Text-Image"), _q(1, "Text-Image"), _q(2, "Image-Text", 2), _q(3, "Image-Image")]
    chance = brit_linking.chance_row(qs)
    assert chance["Text-Image"] == 0.25 and chance["Image-Text"] == 0.5 and chance["avg"] == 0.375
    rows = [{"question_id": q.id, "kind": q.kind, "correct": i % 2 == 0, "choices": True} for i, q in enumerate(qs)]
    table1 = pd.DataFrame({k: [0.5, chance[k]] for k in [*brit_linking.KINDS, "avg"]},
                          index=[brit_linking.CEILING, brit_linking.CHANCE])
    bounds = brit_linking.bounds_table({"BRIT (CA+LS+SI)": (rows, [])}, table1)
    ti = bounds.set_index("kind").loc["Text-Image"]
    assert (ti["accuracy"], ti["n"], ti["chance"], ti["ceiling"], ti["room"]) == (0.5, 2, 0.25, 0.5, 0.25)
    assert ti["share of room"] == 1.0 and ti["95% CI"].startswith("[")
    beside = brit_linking.beside_table(bounds)
    assert beside.loc["BRIT (CA+LS+SI)", "Text-Image"] == "0.50 (0.25 / 0.50, n=2)"
    assert set(beside.columns) == {*brit_linking.KINDS, "avg"}


def test_diagnostic_rows_get_their_own_trace_names_and_the_paper_words():
    assert brit_linking.trace_system(brit_linking.DIAGNOSTICS["calibrated"][0]) == "brit_calibrated__ca_ls_si"
    assert brit_linking.retrieval_system(brit_linking.DIAGNOSTICS["sentences"][0]) == "brit_sentences__ca_ls_si"
    assert brit_linking.retrieval_system("CA+LS+SI") == "brit__ca_ls_si"  # the claim runs' name is unchanged
    from mmrag.evaluate import papers

    assert brit_linking.paper_table2("CA+LS+SI", "Words") == papers.value("BRIT", "Table 2", "BRIT [CA+LS+SI]", "Words")
    assert brit_linking.paper_table2("CLIP top-k", "Words") == papers.value("BRIT", "Table 2", "CLIP (k=2)", "Words")
    assert brit_linking.paper_table2("BRIT lemmas (CA+LS+SI)", "Words") != brit_linking.paper_table2(
        "BRIT lemmas (CA+LS+SI)", "Words")  # NaN: no paper row


def test_before_after_pairs_the_same_questions_with_cis():
    from mmrag.schema import Evidence, Step, Trace

    qs = [_q(i, "Text-Image" if i % 2 else "Image-Text") for i in range(6)]

    def run(correct, ctx):
        rows = [{"question_id": q.id, "kind": q.kind, "correct": c, "choices": True, "words": 10, "images": 1,
                 "recalled": c} for q, c in zip(qs, correct)]
        traces = [Trace(question_id=q.id, system="s", answer="", steps=[Step(action="retrieve", evidence=[
            Evidence(id="x", kind="triplet", content=c)])]) for q, c in zip(qs, ctx)]
        return rows, traces

    before = run([0, 0, 1, 0, 0, 1], ["Korro is in Dunvale"] * 2 + ["nothing"] * 4)
    after = run([1, 1, 1, 0, 1, 1], ["Korro is located in Dunvale"] * 6)
    qa = {brit_linking.BEFORE: before, brit_linking.FULL_NAME: after}
    runs = {brit_linking.BEFORE: before, "CA+LS+SI": after}
    ba = brit_linking.before_after(qa, runs, qs).set_index("measure")
    acc = ba.loc["accuracy, complex kinds (Table 1)"]
    assert acc["n"] == 6 and acc["before"] == round(2 / 6, 4) and acc["after"] == round(5 / 6, 4)
    assert acc["after - before"] == round(3 / 6, 4) and acc["diff 95% CI"].startswith("[")
    assert ba.loc["gold answer in the reader's context (Table 1)", "after"] == 1.0
    assert "recall, cross-modal (Table 2)" in ba.index and "words per question (Table 2)" in ba.index


def test_diagnostic_rows_run_beside_the_paper_settings_and_trace_under_new_names(corpus, tmp_path, monkeypatch):
    root, docs, S, qs = korro_run(corpus, tmp_path, monkeypatch)
    diag = brit_linking.diagnostic_systems(S, ["calibrated", "sentences", "lemmas", "before"], 0.6)
    assert diag[brit_linking.DIAGNOSTICS["calibrated"][0]].retriever.threshold == 0.6
    assert diag[brit_linking.DIAGNOSTICS["sentences"][0]].retriever.text_form == "sentences"
    assert diag[brit_linking.DIAGNOSTICS["lemmas"][0]].retriever.threshold == S.threshold
    assert set(brit_linking.diagnostic_systems(S, ["calibrated", "lemmas"], None)) == {
        brit_linking.DIAGNOSTICS["lemmas"][0]}  # no calibrated threshold: its rows are skipped
    runs = brit_linking.recall_runs(S, ("CA", "LS", "SI"), qs, None, diag)
    written = brit_linking.write_all_traces({}, runs, "brit", "brit_nea")
    names = {p.name for p in written.values()}
    assert {"brit__ca_ls_si__brit_retrieval.jsonl", "brit_calibrated__ca_ls_si__brit_retrieval.jsonl",
            "brit_sentences__ca_ls_si__brit_retrieval.jsonl", "brit_before__ca_ls_si__brit_retrieval.jsonl"} <= names
    t2 = brit_linking.recall_table(runs)
    assert t2.loc["CA+LS+SI", "paper words"] > 0 and t2.loc["CA+LS+SI", "words"] > 0
    ba = brit_linking.before_after({}, runs, qs)
    assert set(ba.measure) == {"recall, cross-modal (Table 2)", "words per question (Table 2)",
                               "images per question (Table 2)"}
    text = brit_linking.what_we_see({"table2_recall": {}, "table1_accuracy": {}, "paper": brit_linking.PAPER,
                                     "before_after": [{"measure": "accuracy, complex kinds (Table 1)", "n": 6,
                                                       "before": 0.3, "after": 0.5, "after - before": 0.2,
                                                       "diff 95% CI": "[-0.1, 0.5]"}]}, 0.75)
    assert "Before / after" in text and "0.300 -> 0.500" in text
