"""Φ: the deictic phrase becomes the grounded referent; the image picks its entity through CLIP."""

from __future__ import annotations

import numpy as np
import pytest

from mmrag.mmr2 import intent as it


@pytest.fixture(scope="module")
def nlp():
    from mmrag.models import registry

    try:
        return registry.load_spacy("en_core_web_sm")
    except registry.ModelError as e:
        pytest.skip(str(e))


class ColourClip:
    """Test double for ClipEncoder: one dimension per colour word; images are colour names."""

    colours = ["red", "green", "blue"]

    def _vec(self, s):
        v = np.asarray([s.count(c) for c in self.colours], dtype=np.float32) + 1e-3
        return v / np.linalg.norm(v)

    def encode_texts(self, texts):
        return np.stack([self._vec(t) for t in texts])

    def encode_images(self, images):
        return np.stack([self._vec(str(i)) for i in images])


def test_question_parse(nlp):
    need, cons, mentioned = it.parse_question(nlp, "In which city was the person in the image "
                                                   "born in 2031?", "Ada Quill")
    assert need == "In which city was Ada Quill born in 2031?"
    assert mentioned == "the person in the image" and "2031" in cons and "which" not in cons.lower()
    need, _, _ = it.parse_question(nlp, "What is its launch year?", "Vantor X2")
    assert need == "What is Vantor X2's launch year?"


def test_binding_grounds_image_to_entity(nlp):
    ents = [{"id": f"e{i}", "name": n, "type": "product", "attributes": {"colour": c}}
            for i, (n, c) in enumerate([("Vantor", "red"), ("Quill", "green"), ("Oslo", "blue")])]
    cands = it.candidates_from_entities(ents, lambda k, a, r: f"a {a['colour']} {k}", ["product"])
    binder = it.IntentBinder(nlp, ColourClip(), cands)
    out = [binder.bind("Who designed this product?", image=img) for img in ("green", "blue")]
    assert [o.referent_id for o in out] == ["e1", "e2"]
    assert out[0].need == "Who designed Quill?" and out[0].image_text == "a green product"
    assert it.referent_match_rate(out, ["e1", "e0"]) == 0.5
