"""Training throughput of the small open_clip model on this CPU (images/s), and render speed.

Usage: bin/py scripts/bench_clip.py [--steps 20] [--batch 128] [--width 32]
"""

from __future__ import annotations

import argparse
import time

import torch

from mmrag.models import clip


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
    t = time.perf_counter()
    ex = clip.rendered_examples(512, seed=0)
    u8 = clip.pixels(ex)
    print(f"render+resize: {(time.perf_counter() - t) / len(ex) * 1000:.2f} ms/image")
    cfg = clip.model_config(embed_dim=args.embed, vision_width=args.width,
                            text_width=args.text_width, text_layers=args.text_layers)
    model = clip.create_model(cfg, seed=0)
    vis = sum(p.numel() for p in model.visual.parameters())
    tot = sum(p.numel() for p in model.parameters())
    print(f"params: vision {vis / 1e6:.2f}M, total {tot / 1e6:.2f}M")
    tcfg = clip.TrainConfig(steps=args.steps, batch_size=args.batch, warmup_steps=5, log_every=10)
    log = clip.train(model, clip.tokenizer_for(cfg), ex, u8, tcfg)
    print(f"train: {log.images_per_second:.1f} images/s ({log.seconds:.1f} s, threads "
          f"{torch.get_num_threads()}), loss {log.rows[0]['loss']} -> {log.rows[-1]['loss']}")


if __name__ == "__main__":
    main()
