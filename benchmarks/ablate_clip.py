"""Ablation of the CLIP attribute loss: zero-shot accuracy per attribute with and without it.

Trains the stage's model on the stage's data (world train pictures + rendered extras, from
params.yaml `clip`) once per `attribute_weight`, with the `clip` stage's own functions
(:mod:`mmrag.stages.clip`), and scores the world's held-out pictures. About 9 min per weight at
700 steps on 2 cores; the `clip` stage itself trains only the weight in params.yaml.

Usage: bin/py benchmarks/ablate_clip.py [--weights 0 10] [--steps 700] [--extra 6000] \
           [--out results/bench/ablate_clip.json]

Prints the table and writes it to ``--out`` with the machine's load beside it.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import pandas as pd
from machine import snapshot, with_load_after

from mmrag import config
from mmrag.stages import clip as stage
from mmrag.train import clip as clip_train

ROOT = Path(__file__).resolve().parents[1]


def run(weight: float, steps: int, extra: int) -> dict[str, float]:
    """Held-out zero-shot accuracy per attribute (plus mean, min, i2t R@5) for one weight."""
    params = config.load()
    clip = dataclasses.replace(params.clip, attribute_weight=weight, steps=steps, extra_images=extra,
                               log_every=steps, eval_every=steps)
    params = dataclasses.replace(params, clip=clip)
    data = stage.load_data(params)
    training = stage.train_encoder(params, data.train_set, data.heldout, evaluate_heldout=False)
    res = clip_train.evaluate_model(training.model, training.tokenizer, data.heldout, training.held_u8)
    return {**res["zero_shot"], "MEAN": res["zero_shot_mean"], "MIN": res["zero_shot_min"],
            "i2t_r5": res["i2t_r5"], "images/s": training.log.images_per_second}


def main() -> None:
    """Print one column per attribute_weight."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--weights", type=float, nargs="+", default=[0.0, 10.0])
    ap.add_argument("--steps", type=int, default=700)
    ap.add_argument("--extra", type=int, default=6000, help="rendered extra pictures")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "ablate_clip.json"))
    args = ap.parse_args()
    before = snapshot()
    columns = {f"attribute_weight={w:g}": run(w, args.steps, args.extra) for w in args.weights}
    table = pd.DataFrame(columns)
    print(f"held-out zero-shot accuracy after {args.steps} steps")
    print(table.round(3).to_string())
    from mmrag.io import write_json

    write_json(Path(args.out), {"machine": with_load_after(before), "steps": args.steps, "extra_images": args.extra,
                                "weights": {name: {k: round(float(v), 4) for k, v in col.items()}
                                            for name, col in columns.items()},
                                "command": "bin/py benchmarks/ablate_clip.py " + " ".join(sys.argv[1:])})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
