"""BRIT's offline reader answers free-text questions with a short span, not a whole triplet."""

from __future__ import annotations

import pytest

from mmrag.brit.reader import remainder, short_span
from mmrag.evaluate.metrics import exact_match


@pytest.mark.parametrize("question, text, gold", [
    ("At what age did Ray Charles start playing?", "Ray Charles be since age of 16", "16"),
    ("Who founded Helix Corp?", "Mara Quell found Helix Corp", "Mara Quell"),
    ("How long does the battery of the Vantor X2 last?", "The Vantor X2 battery last 31 minutes", "31 minutes"),
    ("When was Brennock University founded?", "Brennock University was founded in 1702.", "1702"),
    ("How many people does Helix Corp employ?", "Helix Corp employ 420 people", "420"),
    ("Where is Korro located?", "Korro located in Dunvale", "Dunvale"),
])
def test_short_span_is_the_answer_not_the_triplet(question, text, gold):
    assert exact_match(short_span(question, text), [gold]) == 1.0


def test_no_span_falls_back_to_the_words_the_question_lacks():
    assert short_span("what is the capital of france", "paris be capital of france") is None
    assert remainder("what is the capital of france", "paris be capital of france") == "paris"
    assert short_span("Who founded Helix Corp?", "Helix Corp") is None  # the question says it all


def test_similarity_reader_answers_open_questions_with_a_span():
    import numpy as np

    from mmrag.brit.reader import SimilarityReader

    def encode(texts):  # bag of letters: deterministic, no model
        out = np.array([[t.lower().count(c) for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts], float)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)

    rd = SimilarityReader(encode, None, None, w_text=1.0, w_image=0.0)
    assert rd.answer_open("Who founded Helix Corp?", ["Mara Quell found Helix Corp"], []) == "Mara Quell"
