"""BRIT: triplets, the unified graph (incl. incremental updates), PCST, retrieval, baselines, reader.

Graph tests use a line-format extractor and hashing encoders (deterministic test doubles with the
real interfaces); the spaCy extractor is tested on real parses.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage

from mmrag.brit import linking
from mmrag.brit.baselines import FlatRetriever, chunk_sections
from mmrag.brit.evaluation import (
    CROSS_KINDS,
    accuracy_row,
    answer_row,
    extraction_scores,
    has_gold_evidence,
    read_gold,
    recall_row,
)
from mmrag.brit.graph import Encoders, UnifiedGraph, graphs_equal
from mmrag.brit.reader import LMMReader, SimilarityReader, parse_choice, prompt_messages
from mmrag.brit.retrieval import BritRetriever, pcst_tree, to_trace
from mmrag.brit.system import BritSystem, Systems
from mmrag.brit.triplets import SpacyTriplets, Triplet, parse_triplet_lines
from mmrag.io import save_figure, trace_name, trace_path, write_jsonl
from mmrag.models import registry
from mmrag.schema import Document, Image, Question, Section
from mmrag.stages.brit_linking import ceiling, nan_to_none, note_figure, split_questions, trace_system
from mmrag.systems import System, system_class

COLOURS = {"red": (220, 30, 30), "green": (30, 200, 40), "blue": (30, 40, 220), "yellow": (230, 220, 20)}
DIM = 1024


def hash_encode(texts: list[str]) -> np.ndarray:
    """Bag of hashed lower-case words, L2-normalised (a deterministic stand-in encoder)."""
    out = np.zeros((len(texts), DIM), np.float32)
    for i, t in enumerate(texts):
        for w in re.findall(r"\w+", t.lower()):
            out[i, int(hashlib.sha1(w.encode()).hexdigest(), 16) % DIM] += 1.0
    n = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(n, 1e-9)


class FakeClip:
    """Images embed as the word of their nearest colour; texts as hashed words."""

    def encode_texts(self, texts):
        return hash_encode(texts)

    def encode_images(self, images):
        names = []
        for im in images:
            rgb = np.asarray(PILImage.open(im).convert("RGB"), np.float32).reshape(-1, 3).mean(0)
            names.append(min(COLOURS, key=lambda c: np.sum((np.array(COLOURS[c]) - rgb) ** 2)))
        return hash_encode(names)


class LineExtractor:
    """'subject | relation | object' lines -> triplets; caption entities in [brackets]."""

    name = "lines"

    def extract(self, text, pronoun_entity=None):
        return parse_triplet_lines(text, pronoun_entity)

    def entities(self, text):
        return re.findall(r"\[([^\]]+)\]", text)


def make_doc(root: Path, i: int, facts: list[str], colour: str, caption: str) -> Document:
    path = root / "images" / f"p{i}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    PILImage.new("RGB", (8, 8), COLOURS[colour]).save(path)
    secs = [Section(id=f"d{i}s{j}", doc_id=f"d{i}", title=f"s{j}", text=f, page=j // 2)
            for j, f in enumerate(facts)]
    img = Image(id=f"d{i}i0", doc_id=f"d{i}", path=f"images/p{i}.png", caption=caption,
                section_id=f"d{i}s0", page=0)
    return Document(id=f"d{i}", title=f"Page {i}", sections=secs, images=[img])


def three_pages(tmp_path: Path) -> tuple[Path, list[Document]]:
    """Three pages: Ada Quill joins pages 0 and 1; page 2 is its own graph."""
    docs = [
        make_doc(tmp_path, 0, ["Vantor | designed by | Ada Quill\nAda Quill | works for | Helix Labs",
                               "Vantor | shown at | Orlith Expo"], "red", "The [Vantor] at the expo"),
        make_doc(tmp_path, 1, ["Zeph | designed by | Ada Quill", "Zeph | made in | Brennmoor"],
                 "blue", "A [Zeph] on a desk"),
        make_doc(tmp_path, 2, ["Korro | located in | Dunvale"], "green", "[Korro] tower at night"),
    ]
    return tmp_path, docs


@pytest.fixture()
def corpus(tmp_path):
    return three_pages(tmp_path)


def build(root, docs, order=None):
    g = UnifiedGraph(Encoders(hash_encode, FakeClip(), root), LineExtractor(), si_top=2)
    g.add_documents(docs if order is None else [docs[i] for i in order])
    return g


def test_graph_merges_shared_entities_and_splits_components(corpus):
    root, docs = corpus
    g = build(root, docs)
    v = g.view(linking.LINKERS)
    # Ada Quill joins pages 0 and 1 into one component; page 2 stays its own graph
    comp = dict(zip(v.nodes, v.component))
    assert comp["vantor"] == comp["zeph"] == comp["ada quill"]
    assert comp["korro"] != comp["vantor"]
    assert g.stats()["components"] == 2
    # a relation's triplet keeps its provenance
    e = v.edges.index((v.nodes.index("ada quill"), v.nodes.index("vantor")))
    assert {t.section_id for t in v.edge_triplets[e]} == {"d0s0"}


def test_each_linker_links_what_it_should(corpus):
    root, docs = corpus
    g = build(root, docs)
    links = {(img, node, lk) for img, node, lk in g.docs["d0"].links}
    assert ("d0i0", "vantor", "CA") in links
    # LS: the image sits in section d0s0 -> its nodes; LP: page 0 covers sections 0 and 1
    assert {n for i, n, lk in links if lk == "LS"} == {"vantor", "ada quill", "helix labs"}
    assert {n for i, n, lk in links if lk == "LP"} == {"vantor", "ada quill", "helix labs", "orlith expo"}
    assert len([1 for *_, lk in links if lk == "SI"]) == 2  # top-2 in this test
    none = g.view([])
    assert all(not x for x in none.image_nodes.values())
    ca = g.view(["CA"])
    assert [ca.nodes[n] for n in ca.image_nodes["d0i0"]] == ["vantor"]
    with pytest.raises(ValueError, match="reserved"):
        g.view(["PI"])


def test_caption_only_entities_exist_only_with_caption_linking(tmp_path):
    doc = make_doc(tmp_path, 5, ["Vantor | designed by | Ada Quill"], "red", "[Qel Nara] holding it")
    g = build(tmp_path, [doc])
    assert "qel nara" in g.view(["CA"]).nodes
    assert "qel nara" not in g.view(["LS", "SI"]).nodes


@pytest.mark.parametrize("victim", [0, 1, 2])
def test_incremental_delete_equals_full_rebuild(corpus, victim):
    root, docs = corpus
    g = build(root, docs)
    g.delete_document(f"d{victim}")
    rest = [d for k, d in enumerate(docs) if k != victim]
    assert graphs_equal(g, build(root, rest)) == []


def test_add_then_delete_a_page_restores_the_graph_and_order_does_not_matter(corpus):
    root, docs = corpus
    base = build(root, docs[:2])
    before = base.snapshot()
    base.add_documents([docs[2]])
    assert graphs_equal(base, build(root, docs, order=[2, 1, 0])) == []
    base.delete_document("d2")
    assert base.snapshot() == before
    assert graphs_equal(base, build(root, docs[:2])) == []
    with pytest.raises(KeyError):
        base.delete_document("d2")


def test_save_and_load_replays_the_same_graph(corpus, tmp_path):
    root, docs = corpus
    g = build(root, docs)
    g.save(tmp_path / "graph")
    h = UnifiedGraph.load(tmp_path / "graph", Encoders(hash_encode, FakeClip(), root), LineExtractor(), si_top=2)
    assert graphs_equal(g, h) == []


def test_pcst_virtual_node_takes_a_valuable_edge():
    # path 0-1-2; edge (1,2) carries prize 3 > cost 0.5 -> becomes a virtual node
    nodes, edges = pcst_tree(3, [(0, 1), (1, 2)], np.array([0.0, 1.0, 0.0]), np.array([0.0, 3.0]), 0.5)
    assert edges == [1] and nodes == [1, 2]
    # no edge prizes and cheap edges: the single prized node alone
    nodes, edges = pcst_tree(3, [(0, 1), (1, 2)], np.array([0.0, 1.0, 0.0]), np.zeros(2), 0.5)
    assert nodes == [1] and edges == []
    # two prized nodes joined through an unprized one when the path costs less than they pay
    nodes, edges = pcst_tree(3, [(0, 1), (1, 2)], np.array([2.0, 0.0, 2.0]), np.zeros(2), 0.5)
    assert nodes == [0, 1, 2] and edges == [0, 1]


def retriever(g, root, linkers=linking.LINKERS, threshold=0.5):
    ents = LineExtractor().entities
    return BritRetriever(g.view(linkers), hash_encode, FakeClip(), root, ents, threshold=threshold, top_k=5,
                         edge_cost=0.5, max_linked_triplets=8)


def test_threshold_keeps_only_matching_graphs_and_text_to_image_follows_links(corpus):
    root, docs = corpus
    g = build(root, docs)
    r = retriever(g, root).retrieve("Who designed [Vantor]?")
    v = g.view(linking.LINKERS)
    assert r.kept_components == 1
    assert all(v.component[n] == v.component[v.nodes.index("vantor")] for n in r.nodes)
    assert "Vantor designed by Ada Quill" in r.texts
    assert r.images[0] == "d0i0"  # text->image: the image linked to the best node
    assert "d0s0" in r.evidence_ids()
    # nothing reaches a threshold above 1: no graph survives, only the image->text direction
    r2 = retriever(g, root, threshold=1.01).retrieve("Who designed [Vantor]?")
    assert r2.kept_components == 0 and not r2.nodes


def test_image_to_text_uses_the_query_image_and_its_links(corpus):
    root, docs = corpus
    g = build(root, docs)
    r = retriever(g, root, linkers=["LS"], threshold=1.01).retrieve("What is this?", "images/p2.png")
    assert r.images == ["d2i0"]
    assert any("Korro located in Dunvale" == t for t in r.texts)
    r0 = retriever(g, root, linkers=[], threshold=1.01).retrieve("What is this?", "images/p2.png")
    assert r0.images == ["d2i0"] and r0.texts == []  # no linking: the image comes alone
    tr = to_trace("q1", "brit", "What is this?", r, {"d2i0": "cap"}, answer="Dunvale")
    assert tr.answer == "Dunvale" and {e.id for e in tr.evidence()} >= {"d2i0", "d2s0"}


def test_flat_baselines_rank_by_similarity(corpus):
    root, docs = corpus
    chunks = chunk_sections(docs, max_words=5)
    # d0s0 holds two 5-word facts: cut into two chunks at the sentence-free line budget
    assert [c.section_id for c in chunks].count("d0s0") == 1 and len(chunks) == 5
    assert len(chunk_sections([make_doc(root, 9, ["One two three. Four five six. Seven."], "red", "")],
                              max_words=4)) == 2  # 3 words, then 3 + 1
    ids = [im.id for d in docs for im in d.images]
    emb = FakeClip().encode_images([root / im.path for d in docs for im in d.images])
    clip = FlatRetriever(chunks, ids, emb, FakeClip(), root, mode="clip", k=2, n_images=1, words=None)
    r = clip.retrieve("blue")  # ("the" hashes onto "red" in this 1024-bucket stand-in)
    # top-k text chunks and top images, not k items of one mixed pool
    assert r.images == ["d1i0"] and len(r.texts) == 2
    dual = FlatRetriever(chunks, ids, emb, FakeClip(), root, mode="dual", k=3, n_images=2, words=None,
                         text_encode=hash_encode)
    r = dual.retrieve("Korro located where?")
    assert r.text_sources[0] == "d2s0" and len(r.texts) == 3 and len(r.images) == 2
    # the word budget stops before the chunk that would pass it (the best chunk always comes)
    tight = FlatRetriever(chunks, ids, emb, FakeClip(), root, mode="dual", k=5, n_images=0, words=7,
                          text_encode=hash_encode)
    r = tight.retrieve("Korro located where?")
    assert r.text_sources[0] == "d2s0" and sum(len(t.split()) for t in r.texts) <= 7 and r.images == []
    one = FlatRetriever(chunks, ids, emb, FakeClip(), root, mode="dual", k=5, n_images=0, words=1,
                        text_encode=hash_encode)
    assert len(one.retrieve("Korro located where?").texts) == 1
    with pytest.raises(ValueError, match="dual"):
        FlatRetriever(chunks, ids, emb, FakeClip(), root, mode="dual", k=2, n_images=1, words=None)


def test_similarity_reader_reads_images_and_text(corpus):
    root, docs = corpus
    paths = {im.id: im.path for d in docs for im in d.images}
    rd = SimilarityReader(hash_encode, FakeClip(), root, w_text=1.0, w_image=1.0, image_paths=paths)
    choices = ["red", "green", "blue", "yellow"]
    assert rd.answer("What colour is it?", choices, [], ["d1i0"]) == "blue"
    assert rd.answer("Where is Korro located?", ["Oslo", "Dunvale", "Brennmoor", "Helix"],
                     ["Korro located in Dunvale"], []) == "Dunvale"
    assert parse_choice("B. Dunvale", ["x", "Dunvale"]) == "Dunvale"
    assert parse_choice("no idea", ["x", "y"]) is None


def test_open_questions_without_gold_are_answered_and_gold_figures_are_not_applicable(corpus):
    """A folder corpus: free-text questions, no choices, no gold evidence."""
    root, docs = corpus
    g = build(root, docs)
    S = Systems(g, docs, LineExtractor().entities, threshold=0.5, top_k=5, edge_cost=0.5,
                max_linked_triplets=8, baseline_k=2, baseline_images=2,
                baseline_words=None)
    qs = [Question(id=f"q{i}", text=t, answer=a, dataset="folder")
          for i, (t, a) in enumerate([("Who designed [Vantor]?", "Ada Quill"),
                                      ("Where is [Korro] located?", "Dunvale"),
                                      ("Where was the [Zeph] made?", "Brennmoor")])]
    dev, test = split_questions(qs, dev_share=0.5, seed=0, max_questions=None)
    assert dev == [] and [q.id for q in test] == ["q0", "q1", "q2"]  # no gold: nothing to calibrate
    assert not has_gold_evidence(test, CROSS_KINDS)
    reader = SimilarityReader(hash_encode, FakeClip(), root, w_text=1.0, w_image=1.0,
                              image_paths=S.image_paths, captions=S.captions)
    rows, traces = BritSystem.graph(S, ("CA", "LS", "SI"), "brit", reader).run(test)
    assert all(t.answer for t in traces) and all(r["open"] and r["answered"] for r in rows)
    assert rows[0]["answer_in_context"] and "Ada Quill" in traces[0].answer
    assert rows[0]["em"] == 1.0 and traces[0].answer == "Ada Quill"  # a short span, not the triplet
    opened = answer_row(rows)
    assert opened["questions"] == opened["answered"] == opened["open_questions"] == 3
    assert opened["answer_in_context"] == 1.0 and opened["choice_accuracy"] is None
    # recall and multiple-choice accuracy need gold / choices: NaN in tables, None in metrics
    main = nan_to_none({**recall_row(rows), **accuracy_row(rows)})
    assert main["overall"] is None and main["avg"] is None and main["words"] is None
    assert np.isnan(accuracy_row(ceiling(reader, test, S.sections))["avg"])  # no choices
    # a question without a gold answer is answered but not scored
    rows2, _ = BritSystem(S.brit(("CA",)), reader, S.captions, set(), "b").run(
        [Question(id="x", text="Who designed the [Zeph]?", answer="", dataset="folder")])
    assert rows2[0]["answered"] and rows2[0]["em"] is None
    assert answer_row(rows2) == {"questions": 1, "answered": 1, "choice_questions": 0,
                                   "choice_accuracy": None, "open_questions": 1, "em": None,
                                   "f1": None, "answer_in_context": None}
    # a multiple-choice question of no Table 1 kind (a folder's photo question) is still scored
    photo = Question(id="p", text="What does this photo show?", answer="blue", dataset="folder",
                     choices=["red", "green", "blue", "yellow"], image_path="images/p1.png")
    rows3, traces3 = BritSystem(S.brit(("CA",)), reader, S.captions, set(), "b").run([photo])
    assert traces3[0].answer in photo.choices and np.isnan(accuracy_row(rows3)["avg"])
    assert answer_row(rows3)["choice_questions"] == 1 and answer_row(rows3)["open_questions"] == 0
    assert answer_row(rows3)["choice_accuracy"] == float(traces3[0].answer == "blue")
    # with gold evidence, dev_share of the questions go to dev
    gq = [Question(id=f"g{i}", text="t", answer="a", dataset="w", kind="Text-Image",
                   gold_evidence=["d0s0"]) for i in range(10)]
    dev, test = split_questions(gq, dev_share=0.2, seed=0, max_questions=None)
    assert len(dev) == 2 and len(test) == 8 and has_gold_evidence(dev, CROSS_KINDS)


def test_open_readers_answer_free_text(corpus):
    root, docs = corpus
    rd = SimilarityReader(hash_encode, FakeClip(), root, w_text=1.0, w_image=1.0,
                          captions={"d2i0": "Korro tower at night"})
    # the question's own entity is not an answer; a short span of the matching fact is
    assert rd.answer_open("Where is Korro located?", ["Korro", "Korro located in Dunvale",
                                                      "Zeph made in Brennmoor"], []) == "Dunvale"
    assert rd.answer_open("Which tower is lit at night?", [], ["d2i0"]) == "Korro"
    assert rd.answer_open("Anything?", [], []) == ""

    class FakeLLM:
        def generate(self, batch, max_new_tokens=8):
            self.prompt = batch[0][0]["content"]
            return [type("Out", (), {"text": "\n Dunvale\nbecause the facts say so"})()]

    lmm = LMMReader(FakeLLM(), {}, {}, root)
    assert lmm.answer_open("Where is Korro located?", ["Korro located in Dunvale"], []) == "Dunvale"
    text = " ".join(p["text"] for p in lmm.llm.prompt if p["type"] == "text")
    assert "letter" not in text and "few words" in text
    mc = prompt_messages("q", ["a", "b"], [], [], {}, {}, root)
    assert "letter of the correct option" in mc[0]["content"][-1]["text"]


def test_extraction_scores_and_note_figures_without_gold(tmp_path):
    def scores():
        return extraction_scores(t, *read_gold(tmp_path), tmp_path.name)

    t = [Triplet("Vantor", "designed by", "Ada Quill", doc_id="d0", section_id="d0s0")]
    ie, ie_section, why = scores()
    assert ie is None and ie_section is None and "not applicable" in why
    write_jsonl(tmp_path / "entities.jsonl", [
        {"id": "e1", "name": "Vantor", "relations": [{"object_id": "e2"}]},
        {"id": "e2", "name": "Ada Quill", "relations": []}])
    ie, ie_section, why = scores()
    assert ie["recall"] == 1.0 and ie_section is None and "facts.jsonl" in why
    write_jsonl(tmp_path / "facts.jsonl", [
        {"id": "f0", "doc_id": "d0", "section_id": "d0s0", "subject": "e1", "relation": "designed_by",
         "object": "e2", "sentence": "Ada Quill designed the Vantor."},
        {"id": "f1", "doc_id": "d0", "section_id": "d0s1", "subject": "e1", "relation": "released",
         "object": "2031", "sentence": "The Vantor came out in 2031."}])
    ie, ie_section, why = scores()
    assert why is None and ie_section["gold_facts"] == 2
    assert ie_section["precision"] == 1.0 and ie_section["recall"] == 0.5
    out = save_figure(note_figure("Table 3", "no NEA questions"), tmp_path / "t.png")
    assert out.exists() and out.stat().st_size > 0


def test_brit_system_is_a_system_and_its_traces_are_the_stages(corpus):
    """BritSystem satisfies the System protocol; its traces are the ones the stage tabulates, in order."""
    root, docs = corpus
    S = Systems(build(root, docs), docs, LineExtractor().entities, threshold=0.5, top_k=5,
                edge_cost=0.5, max_linked_triplets=8, baseline_k=2, baseline_images=2,
                baseline_words=None)
    reader = SimilarityReader(hash_encode, FakeClip(), root, w_text=1.0, w_image=1.0, image_paths=S.image_paths,
                              captions=S.captions)
    qs = [Question(id="q1", text="Where is [Korro] located?", answer="Dunvale", dataset="w",
                   kind="Text-Image", gold_evidence=["d2s0", "d2i0"]),
          Question(id="q0", text="Who designed [Vantor]?", answer="Ada Quill", dataset="w")]
    name = "BRIT (CA+LS+SI)"
    system = BritSystem.graph(S, ("CA", "LS", "SI"), name, reader)
    assert isinstance(system, System) and system_class("brit") is BritSystem
    traces = system.answer(qs)
    assert [t.question_id for t in traces] == ["q1", "q0"] and all(t.system == name for t in traces)
    assert traces[0].answer == "Dunvale" and traces[1].answer == "Ada Quill"
    rows, again = system.run(qs)
    assert rows[0]["recalled"] and [t.answer for t in again] == [t.answer for t in traces]
    direct = BritSystem(S.brit(("CA", "LS", "SI")), reader, S.captions, set(S.sections), name).run(qs)
    untimed = [[{k: v for k, v in r.items() if not k.endswith("seconds")} for r in rs] for rs in (rows, direct[0])]
    assert untimed[0] == untimed[1]
    assert [t.answer for t in direct[1]] == [t.answer for t in traces]
    flat = BritSystem.flat(S, "clip", "clip_topk").answer(qs)  # retrieval only: no reader, no answer
    assert [t.answer for t in flat] == ["", ""] and flat[0].steps[0].evidence
    # a trace file's system part is the display name made file-safe
    assert trace_system(name) == "brit__ca_ls_si" and trace_system("text enc.+CLIP top-k") == "text_enc__clip_top_k"
    assert trace_name(trace_path("brit_linking", trace_system(name), "brit")) == ("brit__ca_ls_si", "brit")


@pytest.fixture(scope="module")
def spacy_extractor():
    try:
        return SpacyTriplets(registry.load_spacy("en_core_web_sm"), arguments="entities")
    except registry.ModelError as e:
        pytest.skip(str(e))


@pytest.mark.slow
def test_spacy_extractor_finds_entity_triplets(spacy_extractor):
    x = spacy_extractor
    got = x.extract("The Vantor X2 was designed by Ada Quill, who works for Helix Labs.")
    assert ("Vantor X2", "was designed by", "Ada Quill") in got
    assert ("Ada Quill", "work for", "Helix Labs") in got
    # a pronoun subject resolves to the page's entity; a negated fact is no edge
    assert x.extract("It was shown at the Orlith Expo.", "Vantor X2") == [
        ("Vantor X2", "was shown at", "Orlith Expo")]
    assert x.extract("Ada Quill did not design the Zeph Q4.") == []
    assert "Ada Quill" in x.entities("A photo of Ada Quill in Brennmoor.")


# ------------------------------------------------------------------ the paper's settings, surface text
PAPER = {"threshold": 0.75, "top_k": 5, "edge_cost": 0.5}  # §5.3 (params brit_linking)


class SurfaceLineExtractor(LineExtractor):
    """'subject | lemma relation | object | the fact as written' lines -> triplets with surface forms."""

    def extract_surface(self, text, pronoun_entity=None):
        out = []
        for line in text.splitlines():
            s, r, o, w = [p.strip() for p in line.split("|")]
            out.append((s, r, o, w))
        return out

    def extract(self, text, pronoun_entity=None):
        return [t[:3] for t in self.extract_surface(text, pronoun_entity)]


@pytest.fixture()
def surface_systems(tmp_path):
    docs = [
        make_doc(tmp_path, 0, ["Vantor | be design by | Ada Quill | The Vantor was designed by Ada Quill",
                               "Vantor | show at | Orlith Expo | The Vantor was shown at the Orlith Expo"],
                 "red", "The [Vantor] at the expo"),
        make_doc(tmp_path, 2, ["Korro | be locate in | Dunvale | Korro is located in Dunvale"], "green",
                 "[Korro] tower at night"),
    ]
    g = UnifiedGraph(Encoders(hash_encode, FakeClip(), tmp_path), SurfaceLineExtractor(), si_top=2)
    g.add_documents(docs)
    S = Systems(g, docs, SurfaceLineExtractor().entities, max_linked_triplets=8, baseline_k=2,
                baseline_images=2, baseline_words=None, **PAPER)
    return tmp_path, S


def test_retrieval_at_the_paper_settings_finds_the_known_answers(surface_systems):
    """Threshold 0.75, k 5, Ce 0.5: the asked entity's graph survives, its facts (with the answer
    string) and its linked picture come back; an entity in no graph keeps none."""
    _, S = surface_systems
    r = S.brit(linking.LINKERS).retrieve("Who designed [Vantor]?")
    assert r.kept_components == 1 and "The Vantor was designed by Ada Quill" in r.texts
    assert "d0i0" in r.images and "d0s0" in r.evidence_ids()
    r2 = S.brit(linking.LINKERS).retrieve("Where is [Korro]?")
    assert "Korro is located in Dunvale" in r2.texts and r2.images[0] == "d2i0"
    r3 = S.brit(linking.LINKERS).retrieve("Who made [Plimsoll Nine]?")
    assert r3.kept_components == 0 and not r3.nodes
    qs = [Question(id="q0", text="Who designed [Vantor]?", answer="Ada Quill", dataset="w", kind="Text-Image",
                   gold_evidence=["d0s0", "d0i0"]),
          Question(id="q1", text="Where is [Korro]?", answer="Dunvale", dataset="w", kind="Text-Image",
                   gold_evidence=["d2s0", "d2i0"])]
    rows, traces = BritSystem.graph(S, ("CA", "LS", "SI"), "BRIT (CA+LS+SI)").run(qs)
    assert all(r["recalled"] for r in rows)
    assert all(q.answer in " ".join(e.content for e in t.evidence()) for q, t in zip(qs, traces))


def test_the_reader_sees_surface_triplets_lemmas_and_sentences_are_variants(surface_systems):
    """The reader's text is the fact as extracted (inflected verb, names as written); the lemma form
    (what the graph matches on) and the source sentence are the diagnostic variants."""
    _, S = surface_systems
    q = "Who designed [Vantor]?"
    surface = S.brit(linking.LINKERS).retrieve(q).texts
    lemma = S.brit(linking.LINKERS, text_form="lemma").retrieve(q).texts
    assert "The Vantor was designed by Ada Quill" in surface
    assert "Vantor be design by Ada Quill" in lemma and "The Vantor was designed by Ada Quill" not in lemma
    sents = S.brit(linking.LINKERS, text_form="sentences").retrieve(q).texts
    assert any("Ada Quill" in s for s in sents) and len(sents) == len(set(sents))
    # the graph matches on the lemma form: the same nodes and edges either way
    a, b = S.brit(linking.LINKERS).retrieve(q), S.brit(linking.LINKERS, text_form="lemma").retrieve(q)
    assert (a.nodes, a.edges, a.images) == (b.nodes, b.edges, b.images)
    t = Triplet("Dear Brother", "be duet by", "Audrey Williams", surface="Dear Brother is a duet by Audrey Williams")
    assert t.sentence() == "Dear Brother is a duet by Audrey Williams"
    assert Triplet("A", "be in", "B").sentence() == "A be in B"  # a graph saved without surface forms


def test_source_sentence_picks_the_sentence_stating_the_triplet():
    from mmrag.brit.retrieval import source_sentence

    t = Triplet("Dear Brother", "be duet by", "Audrey Williams", surface="Dear Brother is a duet by Audrey Williams")
    text = "Hank Williams recorded many songs. Dear Brother is a duet by Hank and Audrey Williams. It sold well."
    assert source_sentence(t, text) == "Dear Brother is a duet by Hank and Audrey Williams."
    assert source_sentence(t, "") == t.sentence()


@pytest.mark.slow
def test_spacy_triplets_keep_the_inflected_verb_and_the_proper_name(spacy_extractor):
    """A known sentence: the reader's triplet keeps "is" and "Audrey Williams"; the lemma stays for matching."""
    from mmrag.brit.triplets import extract_document

    doc = Document(id="d", title="Dear Brother", sections=[
        Section(id="s", doc_id="d", title="s", text="Dear Brother is a duet by Audrey Williams.")])
    (t,) = extract_document(spacy_extractor, doc)
    assert t.sentence() == "Dear Brother is a duet by Audrey Williams"
    assert (t.subject, t.relation, t.object) == ("Dear Brother", "be duet by", "Audrey Williams")
    doc2 = Document(id="e", title="Hank Williams", sections=[
        Section(id="s", doc_id="e", title="s", text="He has released three albums with Columbia Records.")])
    assert [x.sentence() for x in extract_document(spacy_extractor, doc2)] == [
        "Hank Williams has released three albums with Columbia Records"]


def test_the_fidelity_table_loads_and_names_existing_code():
    from mmrag.evaluate import fidelity_table

    df = fidelity_table.load(Path(__file__).resolve().parents[1] / "src" / "mmrag" / "brit" / "fidelity.yaml")
    assert len(df) >= 20 and set(df["status"]) == {"same", "deviation"}
    assert fidelity_table.check_implementations(df) == []
    settings = df.set_index("component")
    for comp, key in [("graph filter (threshold)", "threshold"), ("PCST top-k", "top_k"),
                      ("PCST edge cost", "edge_cost")]:
        assert settings.loc[comp, "status"] == "same" and float(settings.loc[comp, "paper_value"]) == PAPER[key]
    # and the params the claim runs read hold the paper's settings, in every profile that sets them
    import yaml

    root = Path(__file__).resolve().parents[1]
    for f in [root / "params.yaml", *sorted((root / "profiles").glob("*.yaml"))]:
        section = (yaml.safe_load(f.read_text()) or {}).get("brit_linking") or {}
        for key, value in PAPER.items():
            assert section.get(key, value) == value, (f.name, key)
    dev = df[df["status"] == "deviation"]
    assert (dev["why"].str.len() > 0).all() and (dev["effect"].str.len() > 0).all()
