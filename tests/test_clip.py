"""The CLIP encoder: config, loss, metrics, offline refusal, and a tiny real training run."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mmrag.models import clip as clip_model
from mmrag.models.registry import ModelError
from mmrag.train import clip as clip_train
from mmrag.world import render

# every knob explicit: params.yaml `clip` is the only home of the stage's values
TINY_MODEL = dict(embed_dim=32, image_size=32, vision_layers=(1, 1, 1, 1), vision_width=8,
                  text_width=32, text_layers=1, text_heads=2, context_length=32)


def tiny_schedule(**changes: float) -> clip_train.TrainConfig:
    """A short training schedule for tests (all fields given: TrainConfig has no defaults)."""
    fields = dict(steps=3, batch_size=12, lr=2e-3, weight_decay=0.1, warmup_steps=1,
                  caption_drop=0.2, kind_batches=0.5, attribute_weight=10.0, seed=0, log_every=1,
                  eval_every=250, threads=2, checkpoint_every=0)
    return clip_train.TrainConfig(**{**fields, **changes})


def test_model_config_is_a_modified_resnet_and_refuses_bad_shapes():
    cfg = clip_model.model_config(**{**TINY_MODEL, "image_size": 64, "vision_width": 16})
    assert cfg["vision_cfg"]["patch_size"] is None and cfg["vision_cfg"]["layers"] == [1, 1, 1, 1]
    with pytest.raises(ValueError, match="multiple of 32"):
        clip_model.model_config(**{**TINY_MODEL, "image_size": 48})
    with pytest.raises(ValueError, match="4 stage depths"):
        clip_model.model_config(**{**TINY_MODEL, "vision_layers": (1, 1)})


def test_train_config_and_model_config_have_no_defaults_of_their_own():
    with pytest.raises(TypeError):
        clip_train.TrainConfig()
    with pytest.raises(TypeError):
        clip_model.model_config()


def test_pretrained_tag_is_refused_offline_with_the_fix():
    with pytest.raises(ModelError, match=r"allow_network.*profile: paper"):
        clip_model.load_clip("ViT-H-14/laion2b_s32b_b79k", allow_network=False)


def test_missing_or_unknown_checkpoint_names_the_fix(tmp_path):
    with pytest.raises(ModelError, match="dvc repro clip"):
        clip_model.load_clip(tmp_path, allow_network=False)  # a folder without a saved config
    with pytest.raises(ModelError, match="neither a checkpoint folder"):
        clip_model.load_clip("no/such-thing", allow_network=False)


def test_multi_positive_loss_equals_clip_loss_when_only_the_diagonal_matches():
    from open_clip.loss import ClipLoss

    g = torch.Generator().manual_seed(0)
    img = F.normalize(torch.randn(6, 8, generator=g), dim=-1)
    txt = F.normalize(torch.randn(6, 8, generator=g), dim=-1)
    scale = torch.tensor(10.0)
    ours = clip_train.multi_positive_loss(img, txt, scale, torch.eye(6, dtype=torch.bool))
    assert torch.allclose(ours, ClipLoss()(img, txt, scale), atol=1e-6)


def test_partial_caption_matches_every_image_that_has_its_attributes():
    a = {"colour": "red", "shape": "round"}
    assert clip_train.matches({"colour": "red"}, "product", a, "product")
    assert not clip_train.matches({"colour": "blue"}, "product", a, "product")
    assert not clip_train.matches({"colour": "red"}, "product", a, "person")  # other kind never matches


def test_positive_matrix_agrees_with_matches_on_random_partial_captions():
    rng = random.Random(0)
    pics = [(k, render.sample_attributes(k, rng)) for k in render.KINDS * 6]
    caps = [(k, render.caption(k, a, rng, drop=0.7)[1]) for k, a in pics]
    caps += [(k, one) for k in render.KINDS for one in clip_train.value_texts(k, rng)[1]]
    got = clip_train.positive_matrix(np.stack([clip_train.attribute_codes(k, a) for k, a in pics]),
                            np.stack([clip_train.attribute_codes(k, c) for k, c in caps]))
    want = [[clip_train.matches(c, k, a, ck) for ck, c in caps] for k, a in pics]
    assert got.tolist() == want
    assert all(got[i, i] for i in range(len(pics)))  # its own caption always matches a picture


def test_value_texts_state_each_value_of_a_kind_once():
    rng = random.Random(1)
    texts, stated = clip_train.value_texts("product", rng)
    n = sum(len(v) for v in render.ATTRIBUTES["product"].values())
    assert len(texts) == len(stated) == n and all(len(s) == 1 for s in stated)
    assert "a logo at the top left" in texts[stated.index({"logo_position": "top left"})]
    assert "striped" in texts[stated.index({"pattern": "striped"})]
    # a picture matches exactly one value text per attribute
    a = render.sample_attributes("product", rng)
    assert sum(clip_train.matches(s, "product", a, "product") for s in stated) == len(a)


def test_separation_is_zero_for_orthogonal_captions_and_grows_as_they_collapse():
    eye = torch.eye(4)
    assert clip_train.separation(eye) == 0
    assert clip_train.separation(torch.tensor([[1.0, 0.0], [-1.0, 0.0]])) == 0  # opposite: no penalty
    close = F.normalize(torch.ones(3, 4) + 0.1 * torch.eye(3, 4), dim=-1)
    assert clip_train.separation(close) > 0.9 and clip_train.separation(torch.ones(3, 4) / 2) == 1


def test_attribute_loss_is_the_cross_entropy_over_each_attributes_value_captions():
    rng = random.Random(2)
    pics = [("place", render.sample_attributes("place", rng)) for _ in range(5)]
    codes = np.stack([clip_train.attribute_codes(k, a) for k, a in pics])
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
        want.append(clip_train.separation(block))
        start += len(vals)
    got = clip_train.attribute_loss(img, codes, {"place": values}, scale)
    assert torch.allclose(got, torch.stack(want).mean())
    # pictures that sit on their own value captions score a lower loss than random ones
    rows, start = [], 0
    for slot, vals in enumerate(render.ATTRIBUTES["place"].values(), start=1):
        rows.append(values[start + torch.from_numpy(codes[:, slot].astype(np.int64))])
        start += len(vals)
    aligned = F.normalize(torch.stack(rows).sum(0), dim=-1)
    assert clip_train.attribute_loss(aligned, codes, {"place": values}, scale) < got
    with pytest.raises(ValueError, match="no picture of a kind"):
        clip_train.attribute_loss(img, codes, {"person": values[:19]}, scale)


def test_recall_and_zero_shot_on_hand_made_embeddings():
    exs = [clip_train.Example(f"i{i}", "place", render.sample_attributes("place", random.Random(i)))
           for i in range(4)]
    keys = sorted({e.key() for e in exs})
    text_emb = np.eye(len(keys), 8, dtype=np.float32)
    image_emb = np.stack([text_emb[keys.index(e.key())] for e in exs])
    assert clip_train.recall_at(image_emb, exs, text_emb, keys) == {
        "i2t_r1": 1.0, "i2t_r5": 1.0, "t2i_r1": 1.0, "t2i_r5": 1.0}
    flipped = clip_train.recall_at(image_emb, exs, np.roll(text_emb, 1, axis=0), keys, ks=(1,))
    assert flipped["i2t_r1"] == 0.0
    # zero-shot: an image embedding equal to one value's class vector is classified as it
    bank = {("place", a): np.eye(len(v), 8, k=0, dtype=np.float32)
            for a, v in render.ATTRIBUTES["place"].items()}
    pred = clip_train.classify_attributes(np.eye(1, 8, k=1, dtype=np.float32), ["place"], bank)[0]
    assert pred == {a: v[1] for a, v in render.ATTRIBUTES["place"].items()}


def test_training_pixels_match_open_clips_preprocessing():
    import open_clip

    ex = clip_train.rendered_examples(2, seed=3)
    pre = open_clip.image_transform(64, is_train=False, mean=clip_model.OPENAI_MEAN, std=clip_model.OPENAI_STD)
    ours = clip_train.normalise(clip_train.pixels(ex, 64, 96))
    theirs = torch.stack([pre(e.image(96)) for e in ex])
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_rendered_examples_cycle_kinds_and_avoid_banned_combinations():
    first = clip_train.rendered_examples(6, seed=1)
    assert [e.kind for e in first] == list(render.KINDS) * 2
    again = clip_train.rendered_examples(6, seed=1, avoid={first[0].key()})
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
    got, skipped = clip_train.world_examples(tmp_path, "heldout")
    assert [e.id for e in got] == ["a"] and got[0].image().size == (32, 32)
    assert skipped == {"other_split": 1, "unknown_kind_or_attributes": 1, "missing_file": 1}
    with pytest.raises(FileNotFoundError, match="world stage"):
        clip_train.world_examples(tmp_path / "nowhere", "train")


@pytest.mark.slow
def test_tiny_training_run_learns_and_round_trips_through_open_clip(tmp_path):
    import open_clip

    cfg = clip_model.model_config(**TINY_MODEL)
    exs = clip_train.rendered_examples(96, seed=0)
    u8 = clip_train.pixels(exs, 32, 32)
    model = clip_model.create_model(cfg, seed=0)
    tcfg = tiny_schedule(steps=40, batch_size=32, lr=3e-3, warmup_steps=4, log_every=5)
    log = clip_train.train(model, clip_model.tokenizer_for(cfg), exs, u8, tcfg)
    losses = [r["loss"] for r in log.rows]
    assert np.mean(losses[-2:]) < losses[0] - 0.3, losses

    clip_model.save_checkpoint(model, cfg, tmp_path, name="mmrag-clip-test")
    open_clip.add_model_config(tmp_path / "mmrag-clip-test.json")
    loaded, _, preprocess = open_clip.create_model_and_transforms(
        "mmrag-clip-test", pretrained=str(tmp_path / clip_model.WEIGHTS_FILE))
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k

    enc = clip_model.load_clip(tmp_path, allow_network=False)
    imgs = enc.encode_images([e.image(32) for e in exs[:3]])
    txts = enc.encode_texts(["a red product", "a person with blonde hair"])
    for arr, n in ((imgs, 3), (txts, 2)):
        assert arr.dtype == np.float32 and arr.shape == (n, 32)
        assert np.allclose(np.linalg.norm(arr, axis=1), 1.0, atol=1e-5)
    assert enc.encode_texts([]).shape == (0, 32)
    with torch.no_grad():  # the encoder's image path equals the trained model on the same pixels
        direct = F.normalize(model.eval().encode_image(clip_train.normalise(u8[:3])), dim=-1).numpy()
    assert np.allclose(imgs, direct, atol=1e-4)


@pytest.mark.slow
def test_training_is_deterministic_for_a_seed():
    cfg = clip_model.model_config(**{**TINY_MODEL, "embed_dim": 16})
    exs = clip_train.rendered_examples(24, seed=1)
    u8 = clip_train.pixels(exs, 32, 32)
    states = []
    for _ in range(2):
        model = clip_model.create_model(cfg, seed=0)
        clip_train.train(model, clip_model.tokenizer_for(cfg), exs, u8, tiny_schedule())
        states.append(model.state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


@pytest.mark.slow
def test_an_interrupted_training_resumes_from_its_checkpoint_to_the_same_model(tmp_path):
    cfg = clip_model.model_config(**{**TINY_MODEL, "embed_dim": 16})
    exs = clip_train.rendered_examples(24, seed=1)
    u8 = clip_train.pixels(exs, 32, 32)
    schedule = tiny_schedule(steps=6, checkpoint_every=2)
    whole = clip_model.create_model(cfg, seed=0)
    whole_log = clip_train.train(whole, clip_model.tokenizer_for(cfg), exs, u8, schedule)

    class Interrupt(Exception):
        pass

    def stop_at_5(row):
        if row["step"] == 5:
            raise Interrupt

    ckpt = tmp_path / "state.pt"
    with pytest.raises(Interrupt):
        clip_train.train(clip_model.create_model(cfg, seed=0), clip_model.tokenizer_for(cfg), exs, u8, schedule,
                         progress=stop_at_5, checkpoint=ckpt)
    assert torch.load(ckpt, weights_only=False)["step"] == 4
    resumed = clip_model.create_model(cfg, seed=0)
    seen = []
    log = clip_train.train(resumed, clip_model.tokenizer_for(cfg), exs, u8, schedule, progress=seen.append,
                           checkpoint=ckpt)
    assert [r["step"] for r in seen] == [5, 6], "the resumed run does only the steps that were left"
    assert [r["step"] for r in log.rows] == [1, 2, 3, 4, 5, 6] and log.rows == whole_log.rows
    assert log.resumed_at == 4 and 0 < log.images_before < log.images_seen == whole_log.images_seen
    assert all(torch.equal(whole.state_dict()[k], resumed.state_dict()[k]) for k in whole.state_dict())
    other = tiny_schedule(steps=6, checkpoint_every=2, lr=1e-3)  # a different run never resumes it
    assert clip_train.load_training_state(ckpt, clip_train.run_fingerprint(other, exs)) is None


def test_the_model_module_does_not_import_the_world_generator():
    import subprocess
    import sys

    code = ("import sys, mmrag.models.clip; "
            "print([m for m in sys.modules if m.startswith('mmrag.world')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_stage_builds_the_schedule_and_the_model_from_params_only():
    import dataclasses

    from mmrag import config
    from mmrag.stages import clip as stage

    params = config.load()
    tcfg = stage.train_config(params)
    for f in dataclasses.fields(tcfg):
        want = params.base.seed if f.name == "seed" else getattr(params.clip, f.name)
        assert getattr(tcfg, f.name) == want, f.name
    cfg = stage.model_config(params.clip)
    assert cfg["embed_dim"] == params.clip.embed_dim
    assert cfg["vision_cfg"]["layers"] == list(params.clip.vision_layers)
    assert cfg["text_cfg"]["context_length"] == params.clip.context_length


def test_stage_summary_and_metrics_from_a_hand_made_evaluation():
    import pandas as pd

    from mmrag import config
    from mmrag.stages import clip as stage

    res = {"zero_shot": {"place.roof": 0.912345, "place.trees": 0.8}, "zero_shot_mean": 0.9561725,
           "zero_shot_min": 0.8, "i2t_r1": 0.5, "i2t_r5": 0.95, "t2i_r1": 0.25, "t2i_r5": 0.75,
           "n_images": 10, "n_texts": 7}
    summary = stage.summary_table(res)
    assert summary["met"].tolist() == [False, True, None, True, None, None]
    clip = config.load().clip
    curve = pd.DataFrame([{"step": 10, "loss": 2.5, "lr": 0.001}, {"step": 20, "loss": 1.25, "lr": 0.0}])
    metrics = stage.clip_metrics(clip, 1_234_567, 42, res, curve)
    assert metrics["params_m"] == 1.23 and metrics["zero_shot"]["place.roof"] == 0.9123
    assert metrics["train_pictures"] == (0 if clip.pretrained else 42)
    assert metrics["targets_met"] == {"zero_shot_each": False, "zero_shot_mean": True, "i2t_r5": True}
    assert metrics["final_loss"] == 1.25
    assert "final_loss" not in stage.clip_metrics(clip, 1, 0, res, curve.iloc[:0])


def test_stage_counts_pictures_per_set_and_kind():
    from mmrag.stages import clip as stage

    place = clip_train.Example("p", "place", {})
    person = clip_train.Example("q", "person", {})
    data = stage.ClipData([place, place], [person], [place], {}, {})
    counts = stage.data_counts(data)
    assert counts.loc["world train", "place"] == 2 and counts.loc["rendered extra", "person"] == 1
    assert counts.loc["world held-out", "person"] == 0
    assert len(data.train_set) == 3
