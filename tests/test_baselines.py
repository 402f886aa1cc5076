"""Single-shot baselines on a stub map, encoder and reader: routed and flat traces, card routing,
and the System classes that wrap them (what the two-axis evaluation runs)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmrag.baselines import single_shot
from mmrag.evaluate import metrics
from mmrag.models.llm import Generation
from mmrag.schema import Passage, Question
from mmrag.systems import SYSTEMS, System, system_class

P1 = Passage(id="d1#s0#c0", doc_id="d1", title="Vantor X2", text="Made by Helix Corp.")


@dataclass
class Hit:
    passage: Passage
    score: float
    unit: str


class Map:
    def route(self, v, k):
        return ["u3"]

    def card_unit(self, name):
        return {"Vantor X2": "u7"}.get(name)

    def search(self, unit, v, k):
        return [Hit(P1, 0.9, unit)]

    def search_flat(self, v, k):
        return [Hit(P1, 0.8, "u3")]


class Enc:
    def __init__(self):
        self.seen: list[str] = []

    def encode(self, texts, **kw):
        self.seen += list(texts)
        return np.ones((len(texts), 4), dtype=np.float32)


class Reader:
    name = "r"

    def __init__(self):
        self.convs: list = []

    def generate(self, convs, **kw):
        self.convs += convs
        assert "Made by Helix Corp." in convs[0][1]["content"]
        return [Generation("<answer>Helix Corp</answer>", 50, 6) for _ in convs]


def q_open(qid: str = "q1") -> Question:
    return Question(id=qid, text="Which company makes the Vantor X2?", answer="Helix Corp",
                    dataset="infoseek", split="test_unseen_entity", answer_aliases=["Helix"],
                    gold_passages=["d1#s0"], meta={"gold_unit": "u3"})


def test_single_shot_routed_and_flat_traces():
    q = q_open()
    [routed] = single_shot.single_shot(Reader(), Map(), Enc(), [q], ["maker"], "km", k=3, routed=True)
    [flat] = single_shot.single_shot(Reader(), Map(), Enc(), [q], ["maker"], "flat", k=3)
    assert routed.answer == flat.answer == "Helix Corp"
    s = metrics.score_trace(routed, q, ks=(1, 5))
    assert s.route_recall_at_1 == 1.0 and s.recall["1"] == 1.0 and s.accuracy == 1.0
    assert metrics.score_trace(flat, q, ks=(1, 5)).routed is False
    # KM routing follows the unit card that lists the intent's referent; else the centroid
    [carded, uncarded] = single_shot.single_shot(Reader(), Map(), Enc(), [q, q], ["maker", "maker"],
                                                 "km", k=3, routed=True, referents=["Vantor X2", "Zed"])
    assert carded.steps[0].target == "u7" and uncarded.steps[0].target == "u3"


def test_system_classes_feed_per_question_inputs_by_id():
    q1, q2 = q_open("q1"), q_open("q2")
    enc, reader = Enc(), Reader()
    ablation = single_shot.SingleShot("ablation_intent_km", reader, Map(), enc, k=3, routed=True,
                                      queries={"q1": "Vantor X2 maker"}, image_texts={"q2": "a logo"},
                                      referents={"q1": "Vantor X2"})
    assert isinstance(ablation, System)
    t1, t2 = ablation.answer([q1, q2])
    assert (t1.system, t2.system) == ("ablation_intent_km", "ablation_intent_km")
    assert enc.seen == ["Vantor X2 maker", q2.text]  # no query given: the question's own text
    assert t1.steps[0].target == "u7" and t2.steps[0].target == "u3"  # card, else centroid
    assert "Image: a logo" in reader.convs[1][1]["content"]
    assert "Image:" not in reader.convs[0][1]["content"]
    enc = Enc()
    [flat] = single_shot.FlatDense(Reader(), Map(), enc, k=3).answer([q1])
    assert flat.system == "flat_dense" and flat.steps[0].target == "flat" and enc.seen == [q1.text]


def test_baselines_are_registered_systems():
    assert system_class("flat_dense") is single_shot.FlatDense
    assert system_class("single_shot") is single_shot.SingleShot
    assert SYSTEMS["mmr2"] == "mmrag.mmr2.system:MMR2Agent"


# --------------------------------------------------------------------------- BM25 and dense flat top-k
PAGES = ["The Vantor X2 is a drone made by Helix Corp.", "Mara Quell founded Helix Corp in 1998.",
         "Osmera is a port city on the Calder coast.", "The of and."]


def test_bm25_ranks_the_page_with_the_questions_rare_words_first():
    from mmrag.baselines.bm25 import BM25

    idx = BM25(PAGES)
    assert idx.top("Who founded Helix Corp?", 2) == [1, 0]  # 'founded' is only on page 1
    assert idx.top("Which port city is on the Calder coast?", 1) == [2]
    assert not idx.scores("zzz unknown").any() and idx.top("zzz", 3) == [0, 1, 2]  # ties: corpus order
    assert len(BM25([]).scores("x")) == 0 and BM25(["the"]).top("the", 2) == [0]  # nothing to index


def test_dense_top_k_is_cosine_over_the_encoder():
    from mmrag.baselines.bm25 import Dense

    vec = {"a": [1.0, 0.0], "b": [0.0, 1.0], "q": [0.6, 0.8]}
    d = Dense(["a", "b"], lambda texts: np.array([vec[t] for t in texts], np.float32))
    assert d.top("q", 2) == [1, 0]


def test_answer_in_context_matches_whole_normalised_words():
    from mmrag.baselines.bm25 import answer_in_context

    assert answer_in_context(["Helix Corp."], ["made by helix corp in Osmera"])
    assert not answer_in_context(["Helix"], ["Helixes abound"])  # whole words only
    assert not answer_in_context([""], ["anything"])


def test_context_rows_count_questions_with_a_gold_answer_per_k():
    from mmrag.baselines.bm25 import BM25, context_rows

    qs = [Question(id="a", text="Who founded Helix Corp?", answer="Mara Quell", dataset="folder"),
          Question(id="b", text="Which port city is on the Calder coast?", answer="Osmera", dataset="folder"),
          Question(id="c", text="Who makes the Vantor X2 drone?", answer="Nobody Known", dataset="folder")]
    rows = context_rows({"BM25": BM25(PAGES)}, PAGES, qs, (1, 3))
    assert rows == [{"system": "BM25", "k": 1, "n": 3, "answer_in_context": round(2 / 3, 4)},
                    {"system": "BM25", "k": 3, "n": 3, "answer_in_context": round(2 / 3, 4)}]


def test_flat_text_retriever_returns_brits_retrieved_with_section_ids_and_traces_score_it():
    from mmrag.baselines.bm25 import BM25, trace_context
    from mmrag.brit.baselines import Chunk
    from mmrag.brit.retrieval import to_trace
    from mmrag.stages.brit_linking import TextTopK

    chunks = [Chunk(f"s{i}#0", "d", f"s{i}", t) for i, t in enumerate(PAGES)]
    r = TextTopK(chunks, BM25(PAGES), k=1).retrieve("Who founded Helix Corp?", image_path="ignored.png")
    assert r.texts == [PAGES[1]] and r.text_sources == ["s1"] and r.images == []
    q = Question(id="q", text="Who founded Helix Corp?", answer="Mara Quell", dataset="folder")
    assert trace_context([to_trace("q", "bm25", q.text, r, {})], {"q": q}) == {"n": 1, "answer_in_context": 1.0}


def test_majority_answer_is_taken_outside_the_evaluated_split():
    from mmrag.stages.toolagent_eval import majority_answer

    qs = [Question(id=str(i), text="?", answer=a, split=s, dataset="folder") for i, (a, s) in
          enumerate([("yes", "train"), ("no", "train"), ("yes", "dev"), ("no", "test"), ("no", "test")])]
    assert majority_answer(qs, "test") == "yes" and majority_answer(qs[3:], "test") == ""
