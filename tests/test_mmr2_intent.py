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


def _question(qid, text, image_path=None, gold_entity=None):
    from types import SimpleNamespace

    return SimpleNamespace(id=qid, text=text, image_path=image_path, gold_entity=gold_entity)


def test_question_binder_grounds_images_in_one_batch_or_to_gold(nlp, tmp_path):
    ents = [{"id": f"e{i}", "name": n, "type": "product", "attributes": {"colour": c}}
            for i, (n, c) in enumerate([("Vantor", "red"), ("Quill", "green"), ("Oslo", "blue")])]
    cands = it.candidates_from_entities(ents, lambda k, a, r: f"a {a['colour']} {k}", ["product"])
    binder = it.QuestionBinder(it.IntentBinder(nlp, ColourClip(), cands), "corpus")
    qs = [_question("q1", "Who designed this product?", "images/green.png", "e1"),
          _question("q2", "Who designed this product?", "images/blue.png", "e0"),
          _question("q3", "Who founded Helix Corp?")]
    phi = binder.bind(qs)
    assert binder.clip_on and [x.referent_id for x in phi[:2]] == ["e1", "e2"]
    assert phi[2].image_text is None
    oracle = binder.bind(qs, oracle=True)
    assert [x.referent_id for x in oracle[:2]] == ["e1", "e0"] and oracle[1].referent_score == 1.0


def test_load_binder_without_entities_or_clip_binds_from_text(nlp, tmp_path):
    import json

    qs = [_question("q1", "Who designed this product?", "images/a.png", "w-1")]
    plain = it.load_binder(tmp_path, spacy="en_core_web_sm", clip_path=str(tmp_path / "clip"),
                           allow_network=False, images=True)
    assert not plain.clip_on and plain.candidates == []  # no entities.jsonl: CLIP never loaded
    import random

    from mmrag.world import render

    attributes = render.sample_attributes("product", random.Random(0))
    (tmp_path / "entities.jsonl").write_text(json.dumps(
        {"id": "w-1", "name": "Vantor X2", "type": "product", "attributes": attributes}) + "\n")
    notes = []
    binder = it.load_binder(tmp_path, spacy="en_core_web_sm", clip_path=str(tmp_path / "no-clip"),
                            allow_network=False, images=True, log=notes.append)
    assert not binder.clip_on and notes and "no usable CLIP" in notes[0]
    assert [c.id for c in binder.candidates] == ["w-1"]  # candidates still name referents
    [x] = binder.bind(qs)
    assert x.image_text is None and x.referent_id is None
