"""What one MM-R2 SFT epoch costs per policy size: seconds per step and training tokens per second
of mmr2_train's SFT (params.yaml's settings, LoRA on the fp32 weights) on the first ``--n``
trajectories of ``data/mmr2_traj`` (needs ``dvc repro mmr2_traj``), for one ladder model per run.

    bin/py benchmarks/bench_sft.py --llm qwen2.5-coder-0.5b-instruct [--n 8]

Each run adds its row (the model, steps, tokens, seconds, first and last loss, peak memory of the
process, the machine's load) to ``results/bench/sft.json`` and prints the minutes a full
``mmr2_train.max_trajectories`` epoch would take at that rate. Run one model per process (peak
memory is the process's) and with nothing else running.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import resource
import shutil
import sys
import tempfile
from pathlib import Path

from machine import snapshot, with_load_after

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llm", required=True, help="a ladder model name (mmr2_train.policy for the stage's own policy)")
    ap.add_argument("--n", type=int, default=8, help="trajectories (= steps at batch 1) to time")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "sft.json"))
    ap.add_argument("--keep", default=None,
                    help="copy the trained adapter here (for benchmarks/bench_reader_ceiling.py --adapter)")
    ap.add_argument("--lr", type=float, default=None,
                    help="learning rate instead of mmr2_train.sft_lr (a policy-size trial, not the stage's setting)")
    args = ap.parse_args()

    import pandas as pd

    from mmrag import config
    from mmrag.io import DATA, read_json, write_json
    from mmrag.models import registry
    from mmrag.models.generation import hf_weights
    from mmrag.stages.mmr2_train import load_trajectories, sft_settings
    from mmrag.train import sft

    registry.offline_env()
    params = config.load()
    section = params.mmr2_train
    train_traj, _ = load_trajectories(DATA / "mmr2_traj", section.max_trajectories)
    if len(train_traj) < args.n:
        raise SystemExit(f"bench_sft: {len(train_traj)} trajectories in data/mmr2_traj, fewer than --n {args.n}")
    convs = [t["messages"] for t in train_traj[: args.n]]
    settings = dataclasses.replace(sft_settings(section, params.base.seed, len(convs)), keep_checkpoints=False,
                                   save_steps=10 ** 6)
    if args.lr is not None:
        settings = dataclasses.replace(settings, learning_rate=args.lr)
    weights = hf_weights(args.llm, allow_network=False, cache_dir=ROOT / params.inference.cache_dir)
    before = snapshot()
    with tempfile.TemporaryDirectory() as tmp:
        res = sft.train_sft(weights, convs, Path(tmp) / "out", settings, device="cpu",
                            checkpoints=Path(tmp) / "ckpt")
        if args.keep:
            shutil.copytree(res.adapter_dir, args.keep, dirs_exist_ok=True)
        curve = pd.read_csv(res.loss_csv)
        losses = curve["loss"].dropna().tolist() if "loss" in curve else []
    per_step = res.seconds / max(1, res.steps)
    full = section.max_trajectories or len(train_traj)
    full_steps = math.ceil(sft.steps_per_epoch(full, settings) * settings.epochs)
    row = {"llm": args.llm, "learning_rate": settings.learning_rate, "adapter_kept_at": args.keep,
           "trajectories": len(convs), "steps": res.steps,
           "train_tokens": res.train_tokens,
           "seconds": res.seconds, "seconds_per_step": round(per_step, 2),
           "tokens_per_second": round(res.train_tokens / res.seconds, 1),
           "loss_first": round(losses[0], 4) if losses else None, "loss_last": round(losses[-1], 4) if losses else None,
           "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
           "full_epoch_minutes": round(full_steps * per_step / 60, 1), "full_epoch_steps": full_steps,
           "machine": with_load_after(before),
           "command": "bin/py benchmarks/bench_sft.py " + " ".join(sys.argv[1:])}
    out = Path(args.out)
    rows = [r for r in (read_json(out)["rows"] if out.exists() else []) if r["llm"] != args.llm]
    write_json(out, {"what": "mmr2_train SFT cost per policy size (benchmarks/bench_sft.py)", "rows": [*rows, row]})
    print(f"{args.llm}: {res.steps} steps, {res.train_tokens} tokens in {res.seconds} s ({row['seconds_per_step']} s "
          f"a step, {row['tokens_per_second']} tokens/s, peak {row['peak_rss_mb']} MB); loss {row['loss_first']} -> "
          f"{row['loss_last']}; a full epoch of {full_steps} steps ~ {row['full_epoch_minutes']} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
