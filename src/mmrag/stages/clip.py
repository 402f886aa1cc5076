"""Stage `clip`: train a small CLIP on generic attribute captions and test it on held-out pictures.

The world's page images (split ``train``) plus pictures of random attribute combinations
rendered here train the open_clip model of :mod:`mmrag.models.clip` (the losses are in
:mod:`mmrag.train.clip`); the paper profile evaluates a pretrained OpenCLIP instead. Every
held-out figure is recomputed from the saved checkpoint, loaded back as any later stage loads
it. Only deterministic quantities go into ``results/clip/metrics.json``; timings go to
``train_cost.json``.
"""

from __future__ import annotations

import json
import random
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from mmrag import io
from mmrag.io import save_figure
from mmrag.models import clip as clip_model
from mmrag.models.clip import ClipEncoder
from mmrag.params import Base, Sections
from mmrag.stages import StageResult, new_figure
from mmrag.train import clip as clip_train
from mmrag.train.checkpoints import checkpoint_dir
from mmrag.train.clip import Example, TrainConfig, TrainLog
from mmrag.train.params import Clip
from mmrag.world import render

TARGETS = {"zero_shot_each": 0.85, "zero_shot_mean": 0.93, "i2t_r5": 0.90}  # the bar fixed before training


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    clip: Clip


@dataclass
class ClipData:
    """The stage's pictures: world train, rendered extras, world held-out, and what was skipped."""

    world_train: list[Example]
    extra: list[Example]
    heldout: list[Example]
    skipped_train: dict[str, int]
    skipped_heldout: dict[str, int]

    @property
    def train_set(self) -> list[Example]:
        """Everything trained on: the world's train pictures, then the rendered extras."""
        return self.world_train + self.extra


@dataclass
class Training:
    """A freshly trained model with what the stage reports about it."""

    model: torch.nn.Module
    model_cfg: dict[str, Any]
    tokenizer: Any
    log: TrainLog
    held_u8: torch.Tensor  # held-out pixels, resized as for training
    cost: dict[str, Any]  # timings and throughput (never in metrics.json)
    n_params: int


@dataclass
class ClipResult(StageResult):
    """The held-out evaluation (recall, zero-shot accuracy, confusion) and the training cost."""

    evaluation: dict[str, Any] = field(default_factory=dict)
    cost: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- data
def load_data(params: Params) -> ClipData:
    """The world's train and held-out pictures plus ``extra_images`` rendered combinations."""
    corpus_dir = io.DATA / params.clip.corpus
    world_train, skipped_train = clip_train.world_examples(corpus_dir, "train")
    heldout, skipped_held = clip_train.world_examples(corpus_dir, "heldout")
    extra = clip_train.rendered_examples(params.clip.extra_images, seed=params.base.seed)
    return ClipData(world_train, extra, heldout, skipped_train, skipped_held)


def data_counts(data: ClipData) -> pd.DataFrame:
    """Pictures per set and kind (the notebook's data table)."""
    counts = pd.DataFrame([{"set": name, "kind": ex.kind} for name, exs in
                           (("world train", data.world_train), ("rendered extra", data.extra),
                            ("world held-out", data.heldout)) for ex in exs])
    return counts.groupby(["set", "kind"]).size().unstack(fill_value=0)


def require_heldout(data: ClipData, corpus_dir: Path) -> None:
    """Fail with the fix when the world has no held-out pictures to test on."""
    if not data.heldout:
        raise RuntimeError(f"{corpus_dir}/images.jsonl has no 'heldout' images: nothing to test on "
                           f"(world.heldout_images must be >= 1)")


def training_pairs_figure(data: ClipData, clip: Clip, seed: int) -> Any:
    """Eight training pictures with a caption drawn for each, as training draws them."""
    rng = random.Random(seed)
    world_train = data.world_train
    show = [world_train[i] for i in rng.sample(range(len(world_train)), min(4, len(world_train)))] + \
        data.extra[:4]
    fig, axes = new_figure(2, 4, figsize=(13, 7.2))
    for ax, ex in zip(axes.flat, show):
        ax.imshow(ex.image(clip.render_size))
        text = render.describe(ex.kind, ex.attributes, rng, clip.caption_drop)
        ax.set_title("\n".join([text[i:i + 34] for i in range(0, len(text), 34)]), fontsize=8)
        ax.axis("off")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- training
def model_config(clip: Clip) -> dict[str, Any]:
    """The open_clip model config that params.yaml `clip` describes."""
    return clip_model.model_config(
        embed_dim=clip.embed_dim, image_size=clip.image_size,
        vision_layers=clip.vision_layers, vision_width=clip.vision_width,
        text_width=clip.text_width, text_layers=clip.text_layers, text_heads=clip.text_heads,
        context_length=clip.context_length)


def train_config(params: Params) -> TrainConfig:
    """The training schedule from params.yaml `clip` (every field explicit: no second default)."""
    clip = params.clip
    return TrainConfig(steps=clip.steps, batch_size=clip.batch_size, lr=clip.lr,
                       weight_decay=clip.weight_decay, warmup_steps=clip.warmup_steps,
                       caption_drop=clip.caption_drop, kind_batches=clip.kind_batches,
                       attribute_weight=clip.attribute_weight, seed=params.base.seed,
                       log_every=clip.log_every, eval_every=clip.eval_every, threads=clip.threads,
                       checkpoint_every=clip.checkpoint_every)


class Progress:
    """Training progress on the console: step, loss, ETA every logged step, held-out figures
    when they are computed (a 10-minute stage must not be silent)."""

    def __init__(self, steps: int):
        self.steps, self.started, self.first = steps, time.perf_counter(), None

    def __call__(self, row: dict[str, float]) -> None:
        step = int(row["step"])
        if self.first is None:  # a resumed run starts its clock at its first logged step
            self.first, self.started = step, time.perf_counter()
            print(f"step {step}/{self.steps}  loss {row['loss']:.4f}", flush=True)
        else:
            rate = (time.perf_counter() - self.started) / max(step - self.first, 1)
            print(f"step {step}/{self.steps}  loss {row['loss']:.4f}  ETA {rate * (self.steps - step) / 60:.1f} min",
                  flush=True)
        if "zero_shot_mean" in row:
            print(row, flush=True)


def checkpoint_file() -> Path:
    """Where an interrupted CLIP training resumes from (see mmrag.train.checkpoints)."""
    return checkpoint_dir("clip") / "training_state.pt"


def train_encoder(params: Params, train_set: list[Example], heldout: list[Example],
                  evaluate_heldout: bool = True) -> Training:
    """Resize the pictures once, then train a fresh model (held-out headline figures logged every
    ``eval_every`` steps for the curve only, unless ``evaluate_heldout`` is off)."""
    clip = params.clip
    model_cfg = model_config(clip)
    tcfg = train_config(params)
    cost: dict[str, Any] = {}
    t0 = time.perf_counter()
    train_u8 = clip_train.pixels(train_set, clip.image_size, clip.render_size)
    held_u8 = clip_train.pixels(heldout, clip.image_size, clip.render_size)
    cost["pixels_seconds"] = round(time.perf_counter() - t0, 1)
    model = clip_model.create_model(model_cfg, seed=params.base.seed)
    tokenizer = clip_model.tokenizer_for(model_cfg)
    n_params = sum(p.numel() for p in model.parameters())
    n_vision = sum(p.numel() for p in model.visual.parameters())
    print(f"{clip_model.MODEL_NAME}: {n_params / 1e6:.2f}M parameters ({n_vision / 1e6:.2f}M vision); "
          f"{len(train_set)} training pictures; {tcfg.steps} steps of {tcfg.batch_size}")
    evaluate = ((lambda m: clip_train.quick_eval(m, tokenizer, heldout, held_u8))
                if evaluate_heldout else None)
    log = clip_train.train(model, tokenizer, train_set, train_u8, tcfg, evaluate=evaluate,
                           progress=Progress(tcfg.steps) if evaluate_heldout else None,
                           checkpoint=checkpoint_file() if evaluate_heldout else None)
    cost.update({"train_seconds": round(log.seconds, 1),
                 "train_images_per_second": round(log.images_per_second, 1),
                 "images_seen": log.images_seen, "torch_threads": torch.get_num_threads(),
                 "resumed_at_step": log.resumed_at})
    return Training(model, model_cfg, tokenizer, log, held_u8, cost, n_params)


def save_trained(training: Training, params: Params, n_train: int, data_dir: Path) -> None:
    """Write the checkpoint folder (open_clip format) atomically."""
    tcfg = train_config(params)
    with io.atomic_dir(data_dir) as tmp:
        clip_model.save_checkpoint(training.model, training.model_cfg, tmp, meta={
            "train_pictures": n_train, "steps": tcfg.steps, "batch_size": tcfg.batch_size,
            "caption_drop": tcfg.caption_drop, "seed": params.base.seed})


def use_pretrained(params: Params, data_dir: Path) -> ClipEncoder:
    """Paper profile: load the named OpenCLIP release (refused offline) and point data_dir at it."""
    device = "cuda" if params.base.device != "cpu" and torch.cuda.is_available() else "cpu"
    encoder = clip_model.load_clip(params.clip.pretrained, allow_network=params.base.allow_network,
                        device=device)
    with io.atomic_dir(data_dir) as tmp:
        io.write_json(tmp / clip_model.PRETRAINED_FILE, {"name": params.clip.pretrained})
    return encoder


def curve_figure(curve: pd.DataFrame) -> Any:
    """Training loss, and the held-out headline figures logged during training."""
    fig, ax = new_figure(1, 2, figsize=(12, 3.8))
    ax[0].plot(curve["step"], curve["loss"])
    ax[0].set(xlabel="step", ylabel="contrastive loss", title="training loss")
    ev = curve.dropna(subset=["zero_shot_mean"]) if "zero_shot_mean" in curve else curve.iloc[:0]
    for col in ("zero_shot_mean", "zero_shot_min", "i2t_r1", "i2t_r5"):
        if col in ev:
            ax[1].plot(ev["step"], ev[col], marker="o", label=col)
    ax[1].axhline(TARGETS["zero_shot_mean"], ls="--", c="grey", lw=0.8)
    ax[1].axhline(TARGETS["zero_shot_each"], ls=":", c="grey", lw=0.8)
    ax[1].set(xlabel="step", ylim=(0, 1.02), title="held-out, during training")
    ax[1].legend(fontsize=8)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- evaluation
def summary_table(res: dict[str, Any]) -> pd.DataFrame:
    """The headline held-out figures against the targets fixed before training (``met``: reached or not)."""
    summary = pd.DataFrame([
        {"figure": "zero-shot accuracy, every attribute (min)", "ours": res["zero_shot_min"],
         "target": TARGETS["zero_shot_each"]},
        {"figure": "zero-shot accuracy, mean over attributes", "ours": res["zero_shot_mean"],
         "target": TARGETS["zero_shot_mean"]},
        {"figure": "image→text Recall@1", "ours": res["i2t_r1"], "target": None},
        {"figure": "image→text Recall@5", "ours": res["i2t_r5"], "target": TARGETS["i2t_r5"]},
        {"figure": "text→image Recall@1", "ours": res["t2i_r1"], "target": None},
        {"figure": "text→image Recall@5", "ours": res["t2i_r5"], "target": None},
    ]).round(4)
    summary["met"] = [None if t is None or pd.isna(t) else bool(o >= t)
                      for o, t in zip(summary["ours"], summary["target"])]
    return summary


def confusion_figure(res: dict[str, Any]) -> Any:
    """One confusion matrix per attribute (rows: true value, columns: predicted)."""
    import seaborn as sns

    names = list(res["confusion"])
    cols = 5
    rows_n = (len(names) + cols - 1) // cols
    fig, axes = new_figure(rows_n, cols, figsize=(4.1 * cols, 3.6 * rows_n))
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    for ax, name in zip(axes.flat, names):
        cm = res["confusion"][name]
        labels = [v[:9] for v in cm["labels"]]
        sns.heatmap(pd.DataFrame(cm["matrix"], index=labels, columns=labels), annot=True, fmt="d",
                    cbar=False, cmap="Blues", ax=ax, annot_kws={"fontsize": 7})
        ax.set_title(f"{name}  ({res['zero_shot'][name]:.2f})", fontsize=9)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    return fig


def value_cosines(encoder: ClipEncoder) -> pd.DataFrame:
    """Mean cosine between the prompt embeddings of one attribute's values (near 1: inseparable)."""
    bank = clip_train.prompt_bank(encoder.encode_texts)
    apart = pd.Series({f"{kind}.{attr}": float((b @ b.T)[~np.eye(len(b), dtype=bool)].mean())
                       for (kind, attr), b in bank.items()}, name="mean cosine between values")
    return apart.to_frame().T.round(3)


def retrieval_figure(encoder: ClipEncoder, held_emb: np.ndarray, heldout: list[Example],
                     seed: int, examples: int) -> Any:
    """Image→text top 3 captions and text→image top 3 pictures for a few seeded picks."""
    keys = sorted({ex.key() for ex in heldout})
    texts = [clip_train.canonical_caption(k, dict(a)) for k, a in keys]
    sims = held_emb @ encoder.encode_texts(texts).T
    pick_rng = random.Random(seed + 1)
    pick = pick_rng.sample(range(len(heldout)), min(examples, len(heldout), len(keys)))
    queries = pick_rng.sample(range(len(keys)), len(pick))  # caption queries, distinct
    fig, axes = new_figure(len(pick), 6, figsize=(16, 2.4 * len(pick)),
                           gridspec_kw={"width_ratios": [1, 2.2, 2.2, 1, 1, 1]})
    axes = np.atleast_2d(axes)
    for r, i in enumerate(pick):
        for ax in axes[r]:
            ax.axis("off")
        ex = heldout[i]
        axes[r, 0].imshow(ex.image())
        top = np.argsort(-sims[i], kind="stable")[:3]
        lines = [("✓ " if keys[j] == ex.key() else "✗ ") + f"{sims[i, j]:.2f}  " +
                 textwrap.shorten(texts[j], 95) for j in top]
        axes[r, 1].text(0, 0.5, "\n".join(textwrap.fill(t, 52) for t in lines), fontsize=7.5,
                        va="center")
        q = queries[r]
        axes[r, 2].text(0, 0.5, "query: " + textwrap.fill(texts[q], 48), fontsize=8, va="center")
        for c, j in enumerate(np.argsort(-sims[:, q], kind="stable")[:3], start=3):
            axes[r, c].imshow(heldout[j].image())
            mark = "✓" if heldout[j].key() == keys[q] else "✗"
            axes[r, c].set_title(f"{mark} {sims[j, q]:.2f}", fontsize=9)
    axes[0, 1].set_title("image → text: top 3 captions", fontsize=10, loc="left")
    axes[0, 2].set_title("text → image: a query", fontsize=10, loc="left")
    fig.tight_layout()
    return fig


def clip_metrics(clip: Clip, n_params: int, n_train: int, res: dict[str, Any],
                 curve: pd.DataFrame) -> dict[str, Any]:
    """The deterministic held-out figures (no timings: metrics.json must rerun byte-identical)."""
    metrics = {
        "model": clip.pretrained or clip_model.MODEL_NAME,
        "params_m": round(n_params / 1e6, 2),
        "heldout_images": res["n_images"], "heldout_captions": res["n_texts"],
        "train_pictures": 0 if clip.pretrained else n_train,
        "i2t_r1": round(res["i2t_r1"], 4), "i2t_r5": round(res["i2t_r5"], 4),
        "t2i_r1": round(res["t2i_r1"], 4), "t2i_r5": round(res["t2i_r5"], 4),
        "zero_shot": {k: round(v, 4) for k, v in res["zero_shot"].items()},
        "zero_shot_mean": round(res["zero_shot_mean"], 4),
        "zero_shot_min": round(res["zero_shot_min"], 4),
        "targets_met": {"zero_shot_each": res["zero_shot_min"] >= TARGETS["zero_shot_each"],
                        "zero_shot_mean": res["zero_shot_mean"] >= TARGETS["zero_shot_mean"],
                        "i2t_r5": res["i2t_r5"] >= TARGETS["i2t_r5"]},
    }
    if len(curve):
        metrics["final_loss"] = float(curve["loss"].iloc[-1])
    return metrics


# --------------------------------------------------------------------------- the stage
def run(params: Params) -> ClipResult:
    """Train (or load) the CLIP encoder and score it on the world's held-out pictures."""
    import seaborn as sns

    clip = params.clip
    data_dir, out_dir = io.stage_dirs("clip")
    corpus_dir = io.DATA / clip.corpus
    sns.set_theme(style="whitegrid")
    tables: dict[str, Any] = {}
    figures: dict[str, Any] = {}

    data = load_data(params)
    train_set = data.train_set
    tables["counts"] = data_counts(data)
    print("skipped (train index):", data.skipped_train, "| skipped (held-out index):",
          data.skipped_heldout)
    require_heldout(data, corpus_dir)
    figures["training_pairs"] = training_pairs_figure(data, clip, params.base.seed)
    save_figure(figures["training_pairs"], out_dir / "training_pairs.png", dpi=90)

    if clip.pretrained:  # paper profile: a pretrained OpenCLIP is evaluated, not trained
        encoder = use_pretrained(params, data_dir)
        curve = pd.DataFrame(columns=["step", "loss", "lr"])
        cost: dict[str, Any] = {}
        n_params = sum(p.numel() for p in encoder.model.parameters())
    else:
        training = train_encoder(params, train_set, data.heldout)
        save_trained(training, params, len(train_set), data_dir)
        checkpoint_file().unlink(missing_ok=True)  # the model is saved: nothing left to resume
        curve, cost, n_params = pd.DataFrame(training.log.rows), training.cost, training.n_params
    curve.to_csv(out_dir / "train_curve.csv", index=False)
    io.write_json(out_dir / "train_cost.json", cost)
    print(json.dumps(cost))
    tables["curve"] = curve
    if len(curve):
        figures["train_curve"] = curve_figure(curve)
        save_figure(figures["train_curve"], out_dir / "train_curve.png", dpi=100)

    if not clip.pretrained:  # recomputed from the saved checkpoint, loaded back as later stages do
        encoder = clip_model.load_clip(data_dir, allow_network=False, device="cpu")  # the model just trained
    held_emb = encoder.encode_images([ex.path for ex in data.heldout])
    res = clip_train.evaluate(held_emb, data.heldout, encoder.encode_texts)
    print(f"{res['n_images']} held-out pictures, {res['n_texts']} distinct captions")
    tables["summary"] = summary_table(res)
    tables["zero_shot"] = pd.Series(res["zero_shot"], name="accuracy").to_frame()
    figures["confusion"] = confusion_figure(res)
    save_figure(figures["confusion"], out_dir / "confusion.png", dpi=90)
    tables["value_cosines"] = value_cosines(encoder)
    figures["retrieval"] = retrieval_figure(encoder, held_emb, data.heldout, params.base.seed,
                                            clip.examples)
    save_figure(figures["retrieval"], out_dir / "retrieval.png", dpi=90)

    metrics = clip_metrics(clip, n_params, len(train_set), res, curve)
    io.write_json(out_dir / "metrics.json", metrics)
    io.write_json(out_dir / "confusion.json", res["confusion"])
    artifacts = {"checkpoint": data_dir, "metrics": out_dir / "metrics.json",
                 "confusion": out_dir / "confusion.json", "train_cost": out_dir / "train_cost.json",
                 "train_curve": out_dir / "train_curve.csv",
                 **{name: out_dir / f"{name}.png" for name in figures}}
    return ClipResult(metrics=metrics, tables=tables, figures=figures, artifacts=artifacts,
                      evaluation=res, cost=cost)
