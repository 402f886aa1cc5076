"""The CLIP encoder: config, loss, metrics, offline refusal, and a tiny real training run."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mmrag.corpora import render
from mmrag.models import clip as C
from mmrag.models.registry import ModelError


def test_model_config_is_a_modified_resnet_and_refuses_bad_shapes():
    cfg = C.model_config(image_size=64, vision_layers=(1, 1, 1, 1), vision_width=16)
    assert cfg["vision_cfg"]["patch_size"] is None and cfg["vision_cfg"]["layers"] == [1, 1, 1, 1]
    with pytest.raises(ValueError, match="multiple of 32"):
        C.model_config(image_size=48)
    with pytest.raises(ValueError, match="4 stage depths"):
        C.model_config(vision_layers=(1, 1))


def test_pretrained_tag_is_refused_offline_with_the_fix():
    with pytest.raises(ModelError, match=r"allow_network.*profile: paper"):
        C.load_clip("ViT-H-14/laion2b_s32b_b79k", allow_network=False)


def test_missing_or_unknown_checkpoint_names_the_fix(tmp_path):
    with pytest.raises(ModelError, match="dvc repro clip"):
        C.load_clip(tmp_path)  # a folder without a saved config
    with pytest.raises(ModelError, match="neither a checkpoint folder"):
        C.load_clip("no/such-thing")


def test_multi_positive_loss_equals_clip_loss_when_only_the_diagonal_matches():
    from open_clip.loss import ClipLoss

    g = torch.Generator().manual_seed(0)
    img = F.normalize(torch.randn(6, 8, generator=g), dim=-1)
    txt = F.normalize(torch.randn(6, 8, generator=g), dim=-1)
    scale = torch.tensor(10.0)
    ours = C.multi_positive_loss(img, txt, scale, torch.eye(6, dtype=torch.bool))
    assert torch.allclose(ours, ClipLoss()(img, txt, scale), atol=1e-6)


def test_partial_caption_matches_every_image_that_has_its_attributes():
    a = {"colour": "red", "shape": "round"}
    assert C.matches({"colour": "red"}, "product", a, "product")
    assert not C.matches({"colour": "blue"}, "product", a, "product")
    assert not C.matches({"colour": "red"}, "product", a, "person")  # other kind never matches


def test_positive_matrix_agrees_with_matches_on_random_partial_captions():
    rng = random.Random(0)
    pics = [(k, render.sample_attributes(k, rng)) for k in render.KINDS * 6]
    caps = [(k, render.caption(k, a, rng, drop=0.7)[1]) for k, a in pics]
    caps += [(k, one) for k in render.KINDS for one in C.value_texts(k, rng)[1]]
    got = C.positive_matrix(np.stack([C.attribute_codes(k, a) for k, a in pics]),
                            np.stack([C.attribute_codes(k, c) for k, c in caps]))
    want = [[C.matches(c, k, a, ck) for ck, c in caps] for k, a in pics]
    assert got.tolist() == want
    assert all(got[i, i] for i in range(len(pics)))  # its own caption always matches a picture


def test_value_texts_state_each_value_of_a_kind_once():
    rng = random.Random(1)
    texts, stated = C.value_texts("product", rng)
    n = sum(len(v) for v in render.ATTRIBUTES["product"].values())
    assert len(texts) == len(stated) == n and all(len(s) == 1 for s in stated)
    assert "a logo at the top left" in texts[stated.index({"logo_position": "top left"})]
    assert "striped" in texts[stated.index({"pattern": "striped"})]
    # a picture matches exactly one value text per attribute
    a = render.sample_attributes("product", rng)
    assert sum(C.matches(s, "product", a, "product") for s in stated) == len(a)


def test_separation_is_zero_for_orthogonal_captions_and_grows_as_they_collapse():
    eye = torch.eye(4)
    assert C.separation(eye) == 0
    assert C.separation(torch.tensor([[1.0, 0.0], [-1.0, 0.0]])) == 0  # opposite: no penalty
    close = F.normalize(torch.ones(3, 4) + 0.1 * torch.eye(3, 4), dim=-1)
    assert C.separation(close) > 0.9 and C.separation(torch.ones(3, 4) / 2) == 1


def test_attribute_loss_is_the_cross_entropy_over_each_attributes_value_captions():
    rng = random.Random(2)
    pics = [("place", render.sample_attributes("place", rng)) for _ in range(5)]
    codes = np.stack([C.attribute_codes(k, a) for k, a in pics])
    n = sum(len(v) for v in render.ATTRIBUTES["place"].values())
    g = torch.Generator().manual_seed(0)
    values = F.normalize(torch.randn(n, 16, generator=g), dim=-1)
    img = F.normalize(torch.randn(5, 16, generator=g), dim=-1)
    scale = torch.tensor(10.0)
    want, start = [], 0
    for slot, (attr, vals) in enumerate(render.ATTRIBUTES["place"].items(), start=1):
        block = values[start:start + len(vals)]
        want.append(F.cross_entropy(scale * img @ block.T,
                                    torch.from_numpy(codes[:, slot].astype(np.int64))))
        want.append(C.separation(block))
        start += len(vals)
    got = C.attribute_loss(img, codes, {"place": values}, scale)
    assert torch.allclose(got, torch.stack(want).mean())
    # pictures that sit on their own value captions score a lower loss than random ones
    rows, start = [], 0
    for slot, vals in enumerate(render.ATTRIBUTES["place"].values(), start=1):
        rows.append(values[start + torch.from_numpy(codes[:, slot].astype(np.int64))])
        start += len(vals)
    aligned = F.normalize(torch.stack(rows).sum(0), dim=-1)
    assert C.attribute_loss(aligned, codes, {"place": values}, scale) < got
    with pytest.raises(ValueError, match="no picture of a kind"):
        C.attribute_loss(img, codes, {"person": values[:19]}, scale)


def test_recall_and_zero_shot_on_hand_made_embeddings():
    exs = [C.Example(f"i{i}", "place", render.sample_attributes("place", random.Random(i)))
           for i in range(4)]
    keys = sorted({e.key() for e in exs})
    text_emb = np.eye(len(keys), 8, dtype=np.float32)
    image_emb = np.stack([text_emb[keys.index(e.key())] for e in exs])
    assert C.recall_at(image_emb, exs, text_emb, keys) == {
        "i2t_r1": 1.0, "i2t_r5": 1.0, "t2i_r1": 1.0, "t2i_r5": 1.0}
    flipped = C.recall_at(image_emb, exs, np.roll(text_emb, 1, axis=0), keys, ks=(1,))
    assert flipped["i2t_r1"] == 0.0
    # zero-shot: an image embedding equal to one value's class vector is classified as it
    bank = {("place", a): np.eye(len(v), 8, k=0, dtype=np.float32)
            for a, v in render.ATTRIBUTES["place"].items()}
    pred = C.classify_attributes(np.eye(1, 8, k=1, dtype=np.float32), ["place"], bank)[0]
    assert pred == {a: v[1] for a, v in render.ATTRIBUTES["place"].items()}


def test_training_pixels_match_open_clips_preprocessing():
    import open_clip

    ex = C.rendered_examples(2, seed=3)
    pre = open_clip.image_transform(64, is_train=False, mean=C.OPENAI_MEAN, std=C.OPENAI_STD)
    ours = C.normalise(C.pixels(ex, 64, 96))
    theirs = torch.stack([pre(e.image(96)) for e in ex])
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_rendered_examples_cycle_kinds_and_avoid_banned_combinations():
    first = C.rendered_examples(6, seed=1)
    assert [e.kind for e in first] == list(render.KINDS) * 2
    again = C.rendered_examples(6, seed=1, avoid={first[0].key()})
    assert first[0].key() not in {e.key() for e in again}


def test_world_examples_read_the_index_and_count_what_they_skip(tmp_path):
    from mmrag import io

    (tmp_path / "images").mkdir()
    attrs = render.sample_attributes("person", random.Random(0))
    render.render("person", attrs, 1, 32).save(tmp_path / "images" / "a.png")
    io.write_jsonl(tmp_path / "images.jsonl", [
        {"id": "a", "path": "images/a.png", "kind": "person", "attributes": attrs,
         "split": "heldout", "entity_id": "e1"},
        {"id": "b", "path": "images/b.png", "kind": "person", "attributes": attrs,
         "split": "heldout"},
        {"id": "c", "path": "images/a.png", "kind": "person", "attributes": {"hat": "cap"},
         "split": "heldout"},
        {"id": "d", "path": "images/a.png", "kind": "person", "attributes": attrs,
         "split": "train"}])
    got, skipped = C.world_examples(tmp_path, "heldout")
    assert [e.id for e in got] == ["a"] and got[0].image().size == (32, 32)
    assert skipped == {"other_split": 1, "unknown_kind_or_attributes": 1, "missing_file": 1}
    with pytest.raises(FileNotFoundError, match="world stage"):
        C.world_examples(tmp_path / "nowhere", "train")


@pytest.mark.slow
def test_tiny_training_run_learns_and_round_trips_through_open_clip(tmp_path):
    import open_clip

    cfg = C.model_config(embed_dim=32, image_size=32, vision_width=8, text_width=32,
                         text_layers=1, text_heads=2, context_length=32)
    exs = C.rendered_examples(96, seed=0)
    u8 = C.pixels(exs, 32, 32)
    model = C.create_model(cfg, seed=0)
    tcfg = C.TrainConfig(steps=40, batch_size=32, lr=3e-3, warmup_steps=4, log_every=5)
    log = C.train(model, C.tokenizer_for(cfg), exs, u8, tcfg)
    losses = [r["loss"] for r in log.rows]
    assert np.mean(losses[-2:]) < losses[0] - 0.3, losses

    C.save_checkpoint(model, cfg, tmp_path, name="mmrag-clip-test")
    open_clip.add_model_config(tmp_path / "mmrag-clip-test.json")
    loaded, _, preprocess = open_clip.create_model_and_transforms(
        "mmrag-clip-test", pretrained=str(tmp_path / C.WEIGHTS_FILE))
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k

    enc = C.load_clip(tmp_path)
    imgs = enc.encode_images([e.image(32) for e in exs[:3]])
    txts = enc.encode_texts(["a red product", "a person with blonde hair"])
    for arr, n in ((imgs, 3), (txts, 2)):
        assert arr.dtype == np.float32 and arr.shape == (n, 32)
        assert np.allclose(np.linalg.norm(arr, axis=1), 1.0, atol=1e-5)
    assert enc.encode_texts([]).shape == (0, 32)
    with torch.no_grad():  # the encoder's image path equals the trained model on the same pixels
        direct = F.normalize(model.eval().encode_image(C.normalise(u8[:3])), dim=-1).numpy()
    assert np.allclose(imgs, direct, atol=1e-4)


@pytest.mark.slow
def test_training_is_deterministic_for_a_seed():
    cfg = C.model_config(embed_dim=16, image_size=32, vision_width=8, text_width=32,
                         text_layers=1, text_heads=2, context_length=32)
    exs = C.rendered_examples(24, seed=1)
    u8 = C.pixels(exs, 32, 32)
    states = []
    for _ in range(2):
        model = C.create_model(cfg, seed=0)
        C.train(model, C.tokenizer_for(cfg), exs, u8,
                C.TrainConfig(steps=3, batch_size=12, warmup_steps=1, log_every=1))
        states.append(model.state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
