"""What grouping dialogues by the engine's slots buys llama.cpp: lockstep vs one slot's worth at a time.

    bin/py benchmarks/bench_dialogues.py [--n 12] [--llms qwen2.5-coder-0.5b-instruct] [--slices dnc mmr2]

The agents (DnC / mm-ReAct dialogues, MM-R2 episodes) used to step every question of a run
together: turn 1 of all, then turn 2 of all. With one llama.cpp slot that evicts each dialogue
from the KV cache before its next turn, so every turn re-prefills the whole dialogue except the
instruction shared by all. Now they run ``llm.dialogue_groups``: one slot's worth of dialogues
to their end, then the next, so each turn is an append to the slot's cached prompt. Per model
and slice (the fixed slices of ``bench_inference.py``, first ``n`` test questions, one slot),
each in its own process: lockstep, then grouped; questions per minute, prompt tokens computed
and reused from the cache, and whether the greedy replies are the same. Time it with nothing
else running; the load is printed beside the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench_inference import run_slice
from machine import snapshot, with_load_after

ROOT = Path(__file__).resolve().parents[1]
KEEP = ("questions", "seconds", "questions_per_minute", "llm_calls", "computed_prompt_tokens",
        "cached_prompt_tokens", "completion_tokens", "texts_sha256", "peak_rss_mb")


def one_run(slice_name: str, llm: str, n: int, lockstep: bool) -> dict[str, Any]:
    """One (slice, grouping) in a fresh process: its own engine, a cold cache, its own peak memory."""
    proc = subprocess.run([sys.executable, __file__, "--one", slice_name, llm, str(n), str(int(lockstep))],
                          cwd=ROOT, text=True, capture_output=True, env={**os.environ,
                                                                         "TOKENIZERS_PARALLELISM": "false"})
    if proc.returncode:
        raise SystemExit(f"bench_dialogues: {slice_name} on {llm} failed:\n{proc.stderr[-3000:]}")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    return {k: row[k] for k in KEEP}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=12, help="questions per slice")
    ap.add_argument("--llms", nargs="+", default=["qwen2.5-coder-0.5b-instruct"])
    ap.add_argument("--slices", nargs="+", default=["dnc", "mmr2"], choices=("dnc", "mmr2"))
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "dialogues.json"))
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        slice_name, llm, n, lockstep = args.one
        print(json.dumps(run_slice(slice_name, "llamacpp", llm, int(n), "cpu", None, False, slots=1,
                                   lockstep=bool(int(lockstep)))))
        return 0
    before, runs = snapshot(), []
    for llm in args.llms:
        for slice_name in args.slices:
            lock, grouped = (one_run(slice_name, llm, args.n, lockstep) for lockstep in (True, False))
            runs.append({"llm": llm, "slice": slice_name, "lockstep": lock, "grouped": grouped,
                         "speedup": round(grouped["questions_per_minute"] / lock["questions_per_minute"], 2),
                         "same_replies": lock["texts_sha256"] == grouped["texts_sha256"]})
            r = runs[-1]
            print(f"{llm} {slice_name}: lockstep {lock['seconds']:.1f} s ({lock['computed_prompt_tokens']} "
                  f"prompt tokens computed), grouped {grouped['seconds']:.1f} s "
                  f"({grouped['computed_prompt_tokens']}): {r['speedup']}x, same replies {r['same_replies']}",
                  flush=True)
    from mmrag.io import write_json

    write_json(Path(args.out), {"machine": with_load_after(before),
                                "n_per_slice": args.n, "slots": 1, "runs": runs,
                                "command": "bin/py benchmarks/bench_dialogues.py " + " ".join(sys.argv[1:])})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
