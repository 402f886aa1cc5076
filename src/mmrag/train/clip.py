"""Training and evaluating the small open_clip encoder of :mod:`mmrag.models.clip`.

The training pictures are the world's (``mmrag.world.render``): the world's page images plus
pictures of random attribute combinations rendered here, each paired with a fresh *generic*
attribute caption (never an entity name).

Training uses a multi-positive contrastive loss: a caption is a positive for every image in
the batch whose attributes include all the attributes the caption states. Plain CLIP loss
would push "a red product" away from the other red products of the batch. A share of the
batches holds a single kind, so that every negative differs only in its attributes.

Captions alone do not teach the small details: a batch of random pictures is told apart by body
colour and count, because almost no two pictures of a batch differ *only* in the logo or the
pattern, so the vision tower never learns them (a linear probe of its features finds logo
position near chance, while the same tower trained on labels learns it in 300 steps). So each
step also embeds one caption per attribute value ("a product with a logo at the top left") and
adds, per attribute, the cross-entropy of every picture over its kind's value captions
(``attribute_loss``): a classifier whose weights the text tower writes, as in UniCL's label
texts. Everything the encoder reads is still a generic caption.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from mmrag import io
from mmrag.models.clip import OPENAI_MEAN, OPENAI_STD
from mmrag.world import render


# --------------------------------------------------------------------------- data
@dataclass(frozen=True)
class Example:
    """One picture with its kind and gold attributes: a world image file or a render seed."""

    id: str
    kind: str
    attributes: Mapping[str, str]
    path: str | None = None  # absolute or relative to the working directory
    seed: int | None = None  # rendered with render.render(kind, attributes, seed)
    entity_id: str | None = None

    def image(self, size: int = 96) -> Image.Image:
        """The picture (read from disk, or rendered from the seed)."""
        if self.path is not None:
            with Image.open(self.path) as im:
                return im.convert("RGB")
        if self.seed is None:
            raise ValueError(f"example {self.id} has neither a path nor a seed")
        return render.render(self.kind, dict(self.attributes), self.seed, size)

    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """Identity of what is depicted: kind plus sorted attributes."""
        return self.kind, tuple(sorted(self.attributes.items()))


def world_examples(corpus_dir: str | Path, split: str) -> tuple[list[Example], dict[str, int]]:
    """Images of a world corpus (``images.jsonl``) of one split (train | heldout), plus skip counts."""
    corpus_dir = Path(corpus_dir)
    index = corpus_dir / "images.jsonl"
    if not index.exists():
        raise FileNotFoundError(f"{index} is missing: run the world stage first (`dvc repro world`).")
    out: list[Example] = []
    skipped = {"other_split": 0, "unknown_kind_or_attributes": 0, "missing_file": 0}
    for row in io.read_jsonl(index):
        if row.get("split") != split:
            skipped["other_split"] += 1
            continue
        kind, attrs = row.get("kind"), row.get("attributes") or {}
        if kind not in render.ATTRIBUTES or set(attrs) != set(render.ATTRIBUTES[kind]):
            skipped["unknown_kind_or_attributes"] += 1
            continue
        path = corpus_dir / row["path"]
        if not path.exists():
            skipped["missing_file"] += 1
            continue
        out.append(Example(row["id"], kind, dict(attrs), path=str(path),
                           entity_id=row.get("entity_id")))
    return out, skipped


def rendered_examples(n: int, seed: int, prefix: str = "r",
                      avoid: Iterable[tuple[str, tuple[tuple[str, str], ...]]] = ()) -> list[Example]:
    """``n`` pictures of random attribute combinations (kinds in turn), none depicting ``avoid``."""
    rng = random.Random(f"rendered:{seed}")
    banned = set(avoid)
    out = []
    while len(out) < n:
        kind = render.KINDS[len(out) % len(render.KINDS)]
        attrs = render.sample_attributes(kind, rng)
        ex = Example(f"{prefix}{len(out):06d}", kind, attrs, seed=rng.randrange(2**31))
        if ex.key() in banned:
            continue
        out.append(ex)
    return out


def pixels(examples: Sequence[Example], image_size: int, render_size: int) -> torch.Tensor:
    """(n, 3, s, s) uint8 tensor: the same bicubic resize open_clip's preprocess applies."""
    arr = np.empty((len(examples), image_size, image_size, 3), dtype=np.uint8)
    for i, ex in enumerate(examples):
        img = ex.image(render_size)
        if img.size != (image_size, image_size):
            img = img.resize((image_size, image_size), Image.Resampling.BICUBIC)
        arr[i] = np.asarray(img)
    return torch.from_numpy(arr).permute(0, 3, 1, 2).contiguous()


def normalise(batch_u8: torch.Tensor) -> torch.Tensor:
    """uint8 pixels -> the float input open_clip expects (OpenAI mean/std)."""
    mean = torch.tensor(OPENAI_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(OPENAI_STD).view(1, 3, 1, 1)
    return (batch_u8.float() / 255.0 - mean) / std


# --------------------------------------------------------------------------- training
@dataclass(frozen=True)
class TrainConfig:
    """How long and how hard to train: built from params.yaml `clip` (the stage's ``train_config``)."""

    steps: int
    batch_size: int
    lr: float
    weight_decay: float
    warmup_steps: int
    caption_drop: float
    kind_batches: float  # share of steps whose batch holds one kind (harder negatives)
    attribute_weight: float  # weight of the per-attribute loss over value captions (0: off)
    seed: int
    log_every: int
    eval_every: int
    threads: int
    checkpoint_every: int  # steps between resumable checkpoints (0: none)


@dataclass
class TrainLog:
    """The training curve (loss per logged step, held-out accuracy per eval) and throughput."""

    rows: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0  # this run's training time (after a resume: the resumed part only)
    images_seen: int = 0  # over the whole schedule
    resumed_at: int = 0  # the step this run started from (0: from scratch)
    images_before: int = 0  # images seen before that step, by the interrupted run

    @property
    def images_per_second(self) -> float:
        """Throughput of this run (images it trained on / its seconds)."""
        return (self.images_seen - self.images_before) / self.seconds if self.seconds else 0.0


def matches(kept: Mapping[str, str], kind: str, attributes: Mapping[str, str], cap_kind: str) -> bool:
    """Does a caption (its kind and the attributes it states) describe this picture?"""
    return cap_kind == kind and all(attributes.get(k) == v for k, v in kept.items())


_SLOTS = max(len(attrs) for attrs in render.ATTRIBUTES.values())


def attribute_codes(kind: str, stated: Mapping[str, str]) -> np.ndarray:
    """[kind index, value index of each attribute slot or -1 if unstated]: matching as array compares."""
    row = np.full(1 + _SLOTS, -1, dtype=np.int16)
    row[0] = render.KINDS.index(kind)
    for slot, (attr, values) in enumerate(render.ATTRIBUTES[kind].items(), start=1):
        if attr in stated:
            row[slot] = values.index(stated[attr])
    return row


def positive_matrix(images: np.ndarray, captions: np.ndarray) -> torch.Tensor:
    """(images, captions) bool from :func:`attribute_codes` rows: :func:`matches` for a whole batch."""
    same_kind = images[:, None, 0] == captions[None, :, 0]
    cap = captions[None, :, 1:]
    agree = (cap < 0) | (cap == images[:, None, 1:])
    return torch.from_numpy(same_kind & agree.all(-1))


def value_texts(kind: str, rng: random.Random) -> tuple[list[str], list[dict[str, str]]]:
    """One caption per attribute value of a kind, stating that value alone (fresh wording)."""
    stated = [{attr: v} for attr, values in render.ATTRIBUTES[kind].items() for v in values]
    return [render.phrase(kind, one, rng) for one in stated], stated


def separation(block: torch.Tensor) -> torch.Tensor:
    """Mean squared positive cosine between the captions of one attribute's (exclusive) values.

    Without it the text tower learns to ignore words the vision tower cannot see yet ("top left"
    and "top right" reach cosine 0.996), and then no gradient ever teaches the vision tower.
    """
    cos = block @ block.T
    off = ~torch.eye(len(block), dtype=torch.bool)
    return cos[off].clamp(min=0).pow(2).mean()


def attribute_loss(img: torch.Tensor, codes: np.ndarray, value_emb: Mapping[str, torch.Tensor],
                   scale: torch.Tensor) -> torch.Tensor:
    """Mean over (kind, attribute) of two terms: each picture's cross-entropy over the attribute's
    value captions, and the :func:`separation` of those captions.

    ``value_emb[kind]`` holds the embeddings of :func:`value_texts` (attribute by attribute, in
    ``render.ATTRIBUTES`` order). The text tower writes the classifier, so every picture is told
    "logo top left, not top right" directly: in-batch captions almost never differ that little.
    """
    losses = []
    for kind, emb in value_emb.items():
        rows = np.flatnonzero(codes[:, 0] == render.KINDS.index(kind))
        if not len(rows):
            continue
        rows_t = torch.from_numpy(rows)
        start = 0
        for slot, values in enumerate(render.ATTRIBUTES[kind].values(), start=1):
            block = emb[start:start + len(values)]
            target = torch.from_numpy(codes[rows, slot].astype(np.int64))
            losses.append(F.cross_entropy(scale * img[rows_t] @ block.T, target))
            losses.append(separation(block))
            start += len(values)
    if not losses:
        raise ValueError("attribute_loss: no picture of a kind with value texts")
    return torch.stack(losses).mean()


def multi_positive_loss(img: torch.Tensor, txt: torch.Tensor, scale: torch.Tensor,
                        positives: torch.Tensor) -> torch.Tensor:
    """Symmetric InfoNCE whose targets spread evenly over every matching (caption, image) pair."""
    logits = scale * img @ txt.T  # (images, captions)
    pos = positives.float()
    t_i2t = pos / pos.sum(1, keepdim=True)
    t_t2i = pos.T / pos.T.sum(1, keepdim=True)
    loss_i = -(t_i2t * F.log_softmax(logits, dim=1)).sum(1).mean()
    loss_t = -(t_t2i * F.log_softmax(logits.T, dim=1)).sum(1).mean()
    return (loss_i + loss_t) / 2


def _param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """No weight decay on gains, biases, embeddings and the temperature (as in open_clip)."""
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.ndim < 2 or "bn" in n or "ln" in n or "bias" in n or "logit_scale" in n \
                or "embedding" in n:
            no_decay.append(p)
        else:
            decay.append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up then cosine decay to zero."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    t = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.lr * 0.5 * (1 + math.cos(math.pi * t))


def run_fingerprint(cfg: TrainConfig, examples: Sequence[Example]) -> str:
    """What a checkpoint must match to be resumed: the schedule (not its logging) and the data."""
    kept = {k: v for k, v in dataclasses.asdict(cfg).items()
            if k not in ("log_every", "threads", "checkpoint_every")}
    return json.dumps({**kept, "examples": len(examples), "first": examples[0].id if examples else ""},
                      sort_keys=True)


def save_training_state(path: Path, state: dict[str, Any]) -> None:
    """Atomically: an interrupted save never leaves a checkpoint that cannot be loaded."""
    with io.atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_training_state(path: Path | None, fingerprint: str) -> dict[str, Any] | None:
    """The saved state of an interrupted run of the same schedule and data, else None."""
    if path is None or not path.exists():
        return None
    state = torch.load(path, weights_only=False)
    if state.get("fingerprint") != fingerprint:
        print(f"{path}: a checkpoint of a different run (schedule or data changed); starting afresh")
        return None
    return state


def train(model: torch.nn.Module, tokenizer: Callable[[list[str]], torch.Tensor],
          examples: Sequence[Example], images_u8: torch.Tensor, cfg: TrainConfig,
          evaluate: Callable[[torch.nn.Module], Mapping[str, float]] | None = None,
          progress: Callable[[dict[str, float]], None] | None = None,
          checkpoint: Path | None = None) -> TrainLog:
    """Contrastive training on (picture, fresh generic caption) pairs; returns the curve.

    With ``checkpoint`` (a file), the whole state (weights, optimiser, random streams, curve)
    is saved every ``cfg.checkpoint_every`` steps and an interrupted run resumes from it,
    giving the same model as an uninterrupted one."""
    if len(examples) != len(images_u8):
        raise ValueError(f"train: {len(examples)} examples but {len(images_u8)} images")
    if len(examples) < 2:
        raise ValueError("train: need at least two training images")
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    rng = random.Random(f"train:{cfg.seed}")
    opt = torch.optim.AdamW(_param_groups(model, cfg.weight_decay), lr=cfg.lr,
                            betas=(0.9, 0.98), eps=1e-6)
    log = TrainLog()
    batch = min(cfg.batch_size, len(examples))
    by_kind = {k: [i for i, ex in enumerate(examples) if ex.kind == k] for k in render.KINDS}
    kinds = [k for k in render.KINDS if len(by_kind[k]) >= 2]
    codes = np.stack([attribute_codes(ex.kind, ex.attributes) for ex in examples])
    model.visual.to(memory_format=torch.channels_last)  # ~10% faster convolutions on CPU
    start = time.perf_counter()
    running: list[float] = []
    fingerprint = run_fingerprint(cfg, examples)
    first = 0
    state = load_training_state(checkpoint, fingerprint)
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        rng.setstate(state["rng"])
        torch.set_rng_state(state["torch_rng"])
        log.rows, log.images_seen, running, first = state["rows"], state["images_seen"], state["running"], state["step"]
        log.resumed_at, log.images_before = first, log.images_seen
        print(f"resuming CLIP training at step {first} of {cfg.steps} from {checkpoint}", flush=True)
    for step in range(first, cfg.steps):
        model.train()
        if kinds and rng.random() < cfg.kind_batches:
            pool = by_kind[kinds[step % len(kinds)]]
            idx = rng.sample(pool, min(batch, len(pool)))
        else:
            idx = rng.sample(range(len(examples)), batch)
        texts, stated = [], []
        for i in idx:
            text, kept = render.caption(examples[i].kind, examples[i].attributes, rng,
                                        cfg.caption_drop)
            texts.append(text)
            stated.append(attribute_codes(examples[i].kind, kept))
        pos = positive_matrix(codes[idx], np.stack(stated))
        present = [k for k in render.KINDS if any(examples[i].kind == k for i in idx)]
        values = [value_texts(k, rng)[0] for k in present] if cfg.attribute_weight else []
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg)
        pics = normalise(images_u8[idx]).contiguous(memory_format=torch.channels_last)
        img = F.normalize(model.encode_image(pics), dim=-1)
        txt = F.normalize(model.encode_text(tokenizer(texts + sum(values, []))), dim=-1)
        scale = model.logit_scale.exp()
        loss = multi_positive_loss(img, txt[:len(texts)], scale, pos)
        if values:
            value_emb = dict(zip(present, txt[len(texts):].split([len(v) for v in values])))
            loss = loss + cfg.attribute_weight * attribute_loss(img, codes[idx], value_emb, scale)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        running.append(loss.item())
        log.images_seen += len(idx)
        last = step + 1 == cfg.steps
        if (step + 1) % cfg.log_every == 0 or last:
            row = {"step": step + 1, "loss": round(sum(running) / len(running), 4),
                   "lr": round(lr_at(step, cfg), 6)}
            running = []
            if evaluate is not None and ((step + 1) % cfg.eval_every == 0 or last):
                model.eval()
                row.update({k: round(float(v), 4) for k, v in evaluate(model).items()})
            log.rows.append(row)
            if progress is not None:
                progress(row)
        if checkpoint is not None and cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0 and not last:
            save_training_state(checkpoint, {
                "fingerprint": fingerprint, "step": step + 1, "model": model.state_dict(),
                "optimizer": opt.state_dict(), "rng": rng.getstate(), "torch_rng": torch.get_rng_state(),
                "rows": log.rows, "images_seen": log.images_seen, "running": running})
    log.seconds = time.perf_counter() - start
    model.eval()
    return log


# --------------------------------------------------------------------------- evaluation
def canonical_caption(kind: str, attributes: Mapping[str, str]) -> str:
    """The one full caption used as a retrieval candidate for these attributes."""
    return render.describe(kind, attributes, random.Random(0), drop=0.0)


def prompt_bank(encode_texts: Callable[[list[str]], np.ndarray]) -> dict[tuple[str, str], np.ndarray]:
    """(kind, attribute) -> (values, d) prompt-ensemble class embeddings for zero-shot scoring."""
    bank = {}
    for kind, attrs in render.ATTRIBUTES.items():
        for attr, values in attrs.items():
            rows = []
            for v in values:
                e = encode_texts(render.prompts(kind, attr, v)).mean(0)
                rows.append(e / np.linalg.norm(e))
            bank[(kind, attr)] = np.stack(rows).astype(np.float32)
    return bank


def classify_attributes(image_emb: np.ndarray, kinds: Sequence[str],
                        bank: Mapping[tuple[str, str], np.ndarray]) -> list[dict[str, str]]:
    """Zero-shot attribute values for each image: the best-scoring prompt of every attribute."""
    out = []
    for e, kind in zip(image_emb, kinds):
        out.append({attr: values[int(np.argmax(bank[(kind, attr)] @ e))]
                    for attr, values in render.ATTRIBUTES[kind].items()})
    return out


def recall_at(image_emb: np.ndarray, examples: Sequence[Example], text_emb: np.ndarray,
              texts_keys: Sequence[tuple[str, tuple[tuple[str, str], ...]]],
              ks: Sequence[int] = (1, 5)) -> dict[str, float]:
    """Image->text and text->image Recall@k over distinct attribute captions."""
    sims = image_emb @ text_emb.T  # (images, texts)
    img_keys = [ex.key() for ex in examples]
    col = {k: j for j, k in enumerate(texts_keys)}
    gold = np.array([col[k] for k in img_keys])
    out = {}
    order_i2t = np.argsort(-sims, axis=1, kind="stable")
    for k in ks:
        out[f"i2t_r{k}"] = float(np.mean([gold[i] in order_i2t[i, :k] for i in range(len(gold))]))
    order_t2i = np.argsort(-sims.T, axis=1, kind="stable")
    for k in ks:
        hits = [any(gold[i] == j for i in order_t2i[j, :k]) for j in range(len(texts_keys))]
        out[f"t2i_r{k}"] = float(np.mean(hits))
    return out


def evaluate(image_emb: np.ndarray, examples: Sequence[Example],
             encode_texts: Callable[[list[str]], np.ndarray]) -> dict[str, Any]:
    """Retrieval recall, per-attribute zero-shot accuracy and confusion matrices on held-out images."""
    if not examples:
        raise ValueError("evaluate: no held-out images")
    keys = sorted({ex.key() for ex in examples})
    texts = [canonical_caption(k, dict(a)) for k, a in keys]
    out: dict[str, Any] = recall_at(image_emb, examples, encode_texts(texts), keys)
    bank = prompt_bank(encode_texts)
    preds = classify_attributes(image_emb, [ex.kind for ex in examples], bank)
    acc, confusion = {}, {}
    for kind, attrs in render.ATTRIBUTES.items():
        sel = [(ex, p) for ex, p in zip(examples, preds) if ex.kind == kind]
        if not sel:
            continue
        for attr, values in attrs.items():
            m = np.zeros((len(values), len(values)), dtype=int)
            for ex, p in sel:
                m[values.index(ex.attributes[attr]), values.index(p[attr])] += 1
            name = f"{kind}.{attr}"
            acc[name] = float(np.trace(m) / m.sum())
            confusion[name] = {"labels": list(values), "matrix": m.tolist()}
    out["zero_shot"] = acc
    out["zero_shot_mean"] = float(np.mean(list(acc.values())))
    out["zero_shot_min"] = float(min(acc.values()))
    out["confusion"] = confusion
    out["n_images"] = len(examples)
    out["n_texts"] = len(texts)
    return out


def evaluate_model(model: torch.nn.Module, tokenizer: Callable[[list[str]], torch.Tensor],
                   examples: Sequence[Example], images_u8: torch.Tensor) -> dict[str, Any]:
    """:func:`evaluate` on an in-memory model and its resized pixels (no checkpoint round trip)."""
    with torch.no_grad():
        img = F.normalize(model.encode_image(normalise(images_u8)), dim=-1).numpy()

        def enc(texts: list[str]) -> np.ndarray:
            return F.normalize(model.encode_text(tokenizer(texts)), dim=-1).numpy()

        return evaluate(img, examples, enc)


def quick_eval(model: torch.nn.Module, tokenizer: Callable[[list[str]], torch.Tensor],
               examples: Sequence[Example], images_u8: torch.Tensor) -> dict[str, float]:
    """Headline held-out figures during training (zero-shot mean/min, image->text R@1/5)."""
    res = evaluate_model(model, tokenizer, examples, images_u8)
    return {"zero_shot_mean": res["zero_shot_mean"], "zero_shot_min": res["zero_shot_min"],
            "i2t_r1": res["i2t_r1"], "i2t_r5": res["i2t_r5"]}
