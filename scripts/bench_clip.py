"""Training throughput of the small open_clip model on this CPU (images/s), and render speed.

The model and the schedule are the `clip` stage's (:mod:`mmrag.stages.clip`, from params.yaml
`clip`), with the sizes and the steps below changed.

Usage: bin/py scripts/bench_clip.py [--steps 20] [--batch 128] [--width 32]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from mmrag import config
from mmrag.models import clip as clip_model
from mmrag.stages import clip as stage
from mmrag.train import clip as clip_train


def main() -> None:
    """Print render ms/image and training images/s for one model size."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--text-width", type=int, default=128)
    ap.add_argument("--text-layers", type=int, default=3)
    ap.add_argument("--embed", type=int, default=128)
    args = ap.parse_args()
    params = config.section("clip")
    clip = dataclasses.replace(
        params.clip, steps=args.steps, batch_size=args.batch, vision_width=args.width,
        text_width=args.text_width, text_layers=args.text_layers, embed_dim=args.embed,
        warmup_steps=5, log_every=10)
    params = dataclasses.replace(params, clip=clip)
    t = time.perf_counter()
    ex = clip_train.rendered_examples(512, seed=0)
    u8 = clip_train.pixels(ex, clip.image_size, clip.render_size)
    print(f"render+resize: {(time.perf_counter() - t) / len(ex) * 1000:.2f} ms/image")
    cfg = stage.model_config(clip)
    model = clip_model.create_model(cfg, seed=0)
    vis = sum(p.numel() for p in model.visual.parameters())
    tot = sum(p.numel() for p in model.parameters())
    print(f"params: vision {vis / 1e6:.2f}M, total {tot / 1e6:.2f}M")
    log = clip_train.train(model, clip_model.tokenizer_for(cfg), ex, u8, stage.train_config(params))
    print(f"train: {log.images_per_second:.1f} images/s ({log.seconds:.1f} s, threads "
          f"{torch.get_num_threads()}), loss {log.rows[0]['loss']} -> {log.rows[-1]['loss']}")


if __name__ == "__main__":
    main()
