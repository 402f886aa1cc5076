"""GRPO throughput on this machine: seconds per step of P prompts x G episodes against the real
world KnowledgeMap (needs `dvc repro knowledge_map`). Sizes mmr2_train.grpo_steps for a budget.
Settings are params.yaml's mmr2_train (as the stage builds them) with the flags below replacing
steps, group size, turn tokens and turns.

    bin/py benchmarks/bench_grpo.py [--steps 3] [--group 4] [--turn-tokens 64] [--max-turns 3] \
        [--out results/bench/grpo.json]

The policy is SmolLM2-135M (``--adapter`` starts it from a LoRA adapter). Prints the figures and writes
them to ``--out`` with the machine's load beside them; time it with nothing else running.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

from machine import snapshot, with_load_after

from mmrag import config
from mmrag.io import DATA
from mmrag.mmr2.agent import RetrievalEnv
from mmrag.mmr2.knowledge_map import KnowledgeMap
from mmrag.models import registry
from mmrag.schema import load_questions
from mmrag.stages.mmr2_train import grpo_settings
from mmrag.train import grpo

ROOT = Path(__file__).resolve().parents[1]
POLICY = "smollm2-135m-instruct"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--turn-tokens", type=int, default=64)
    ap.add_argument("--max-turns", type=int, default=3)
    ap.add_argument("--adapter", default=None, help="start from this LoRA adapter (e.g. the SFT one)")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "grpo.json"))
    args = ap.parse_args()
    registry.offline_env()
    params = config.load()
    train = params.mmr2_train
    kmap, enc = KnowledgeMap.open(DATA / "knowledge_map" / "world", allow_network=False, device="cpu")
    qs = [q for q in load_questions(DATA / "world" / "questions" / "infoseek.jsonl")
          if q.split == "train" and any(p in kmap.pid_index for p in q.gold_passages)][: args.steps]
    settings = dataclasses.replace(grpo_settings(params.mmr2_train, params.base.seed), max_steps=args.steps,
                                   num_generations=args.group, turn_tokens=args.turn_tokens,
                                   max_turns=args.max_turns, save_steps=10_000)
    model, tok = grpo.load_policy(registry.resolve(POLICY, "llm", False), args.adapter, "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        env = lambda: RetrievalEnv(kmap, enc, k=train.k, budget=train.budget)  # noqa: E731
        trainer = grpo.build_trainer(model, tok, qs, env, tmp, settings)
        before = snapshot()
        t0 = time.time()
        trainer.train()
        dt = time.time() - t0
    lengths = [r.get("completions/mean_length", 0) for r in trainer.state.log_history if "reward" in r]
    tokens = sum(lengths) / max(len(lengths), 1)
    print(f"{args.steps} steps x {settings.prompts_per_step} prompt(s) x {args.group} episodes: "
          f"{dt / args.steps:.1f} s/step; sampled tokens/episode {tokens:.0f}")
    from mmrag.io import write_json

    write_json(Path(args.out), {
        "machine": with_load_after(before), "policy": POLICY, "adapter": args.adapter, "steps": args.steps,
        "prompts_per_step": settings.prompts_per_step, "group": args.group, "turn_tokens": args.turn_tokens,
        "max_turns": args.max_turns,
        "seconds": round(dt, 1), "seconds_per_step": round(dt / args.steps, 2),
        "sampled_tokens_per_episode": round(tokens, 1),
        "command": "bin/py benchmarks/bench_grpo.py " + " ".join(sys.argv[1:])})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
