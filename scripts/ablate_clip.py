"""Ablation of the CLIP attribute loss: zero-shot accuracy per attribute with and without it.

Trains the stage's model on the stage's data (world train pictures + rendered extras, from
params.yaml `clip`) once per `attribute_weight`, and scores the world's held-out pictures.
About 9 min per weight at 700 steps on 2 cores; the `clip` stage itself trains only the weight
in params.yaml.

Usage: bin/py scripts/ablate_clip.py [--weights 0 10] [--steps 700] [--extra 6000]
"""

from __future__ import annotations

import argparse

import pandas as pd
import torch
import torch.nn.functional as F

from mmrag import config, io
from mmrag.models import clip as C


def run(weight: float, steps: int, extra: int) -> dict[str, float]:
    """Held-out zero-shot accuracy per attribute (plus mean, min, i2t R@5) for one weight."""
    P = config.section("clip")
    cfg = C.model_config(embed_dim=P.clip.embed_dim, image_size=P.clip.image_size,
                         vision_layers=P.clip.vision_layers, vision_width=P.clip.vision_width,
                         text_width=P.clip.text_width, text_layers=P.clip.text_layers,
                         text_heads=P.clip.text_heads, context_length=P.clip.context_length)
    corpus = io.DATA / P.clip.corpus
    train, _ = C.world_examples(corpus, "train")
    held, _ = C.world_examples(corpus, "heldout")
    train += C.rendered_examples(extra, seed=P.base.seed)
    u8 = C.pixels(train, P.clip.image_size, P.clip.render_size)
    h8 = C.pixels(held, P.clip.image_size, P.clip.render_size)
    tcfg = C.TrainConfig(steps=steps, batch_size=P.clip.batch_size, lr=P.clip.lr,
                         weight_decay=P.clip.weight_decay, warmup_steps=P.clip.warmup_steps,
                         caption_drop=P.clip.caption_drop, kind_batches=P.clip.kind_batches,
                         attribute_weight=weight, seed=P.base.seed, log_every=steps,
                         eval_every=steps, threads=P.clip.threads)
    model = C.create_model(cfg, seed=P.base.seed)
    tok = C.tokenizer_for(cfg)
    log = C.train(model, tok, train, u8, tcfg)
    with torch.no_grad():
        img = F.normalize(model.encode_image(C.normalise(h8)), dim=-1).numpy()
        res = C.evaluate(img, held, lambda t: F.normalize(model.encode_text(tok(t)), dim=-1).numpy())
    return {**res["zero_shot"], "MEAN": res["zero_shot_mean"], "MIN": res["zero_shot_min"],
            "i2t_r5": res["i2t_r5"], "images/s": log.images_per_second}


def main() -> None:
    """Print one column per attribute_weight."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--weights", type=float, nargs="+", default=[0.0, 10.0])
    ap.add_argument("--steps", type=int, default=700)
    ap.add_argument("--extra", type=int, default=6000, help="rendered extra pictures")
    args = ap.parse_args()
    table = pd.DataFrame({f"attribute_weight={w:g}": run(w, args.steps, args.extra)
                          for w in args.weights})
    print(f"held-out zero-shot accuracy after {args.steps} steps")
    print(table.round(3).to_string())


if __name__ == "__main__":
    main()
