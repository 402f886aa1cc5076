"""Training throughput of the small open_clip model on this CPU (images/s), and render speed.

The model and the schedule are the `clip` stage's (:mod:`mmrag.stages.clip`, from params.yaml
`clip`), with the sizes and the steps below changed.

Usage: bin/py benchmarks/bench_clip.py [--steps 20] [--batch 128] [--width 32] [--out results/bench/clip.json]

Prints the figures and writes them to ``--out`` with the machine's load beside them; time it with
nothing else running.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch
from machine import snapshot, with_load_after

from mmrag import config
from mmrag.models import clip as clip_model
from mmrag.stages import clip as stage
from mmrag.train import clip as clip_train

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    """Print render ms/image and training images/s for one model size."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--text-width", type=int, default=128)
    ap.add_argument("--text-layers", type=int, default=3)
    ap.add_argument("--embed", type=int, default=128)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "clip.json"))
    args = ap.parse_args()
    params = config.load()
    clip = dataclasses.replace(
        params.clip, steps=args.steps, batch_size=args.batch, vision_width=args.width,
        text_width=args.text_width, text_layers=args.text_layers, embed_dim=args.embed,
        warmup_steps=5, log_every=10)
    params = dataclasses.replace(params, clip=clip)
    before = snapshot()
    t = time.perf_counter()
    ex = clip_train.rendered_examples(512, seed=0)
    u8 = clip_train.pixels(ex, clip.image_size, clip.render_size)
    render_ms = (time.perf_counter() - t) / len(ex) * 1000
    print(f"render+resize: {render_ms:.2f} ms/image")
    cfg = stage.model_config(clip)
    model = clip_model.create_model(cfg, seed=0)
    vis = sum(p.numel() for p in model.visual.parameters())
    tot = sum(p.numel() for p in model.parameters())
    print(f"params: vision {vis / 1e6:.2f}M, total {tot / 1e6:.2f}M")
    log = clip_train.train(model, clip_model.tokenizer_for(cfg), ex, u8, stage.train_config(params))
    print(f"train: {log.images_per_second:.1f} images/s ({log.seconds:.1f} s, threads "
          f"{torch.get_num_threads()}), loss {log.rows[0]['loss']} -> {log.rows[-1]['loss']}")
    from mmrag.io import write_json

    write_json(Path(args.out), {
        "machine": with_load_after(before), "torch_threads": torch.get_num_threads(),
        "settings": {"steps": args.steps, "batch_size": args.batch, "vision_width": args.width,
                     "text_width": args.text_width, "text_layers": args.text_layers, "embed_dim": args.embed,
                     "image_size": clip.image_size, "render_size": clip.render_size},
        "render_ms_per_image": round(render_ms, 3), "vision_params_m": round(vis / 1e6, 3),
        "total_params_m": round(tot / 1e6, 3), "train_images_per_second": round(log.images_per_second, 1),
        "train_seconds": round(log.seconds, 1), "loss_first": log.rows[0]["loss"], "loss_last": log.rows[-1]["loss"],
        "command": "bin/py benchmarks/bench_clip.py " + " ".join(sys.argv[1:])})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
