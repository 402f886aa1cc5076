"""How long `bin/ask` takes per system: the first load, the first answer, and a warm answer.

    bin/py benchmarks/bench_ask.py [--questions 6] [--systems brit dnc mmr2 bm25] [--data DIR --params FILE]

A user who asks one question waits for the models to load and then for the answer; a user of
``--repl`` or notebooks/explore.ipynb waits for the answer only. This loads each system once, as
``bin/ask`` does (:func:`mmrag.ask.load_systems`, the same objects and generation service the stages
use), and asks it the world's first ``--questions`` MMQA test questions (text and image questions
alike, :func:`mmrag.ask.pick`). Per system it writes the load time, the first answer's time, and the
median, min and max of the warm answers (every answer after the first) with their tokens, beside the
speed the issue asks of a warm answer (BRIT 5 s, DnC and MM-R2 30 s per question, 2 cores). Output:
``results/bench/ask.json`` with the machine's load beside it. Needs the default run's artifacts
(brit_graph, toolagent_finetune, mmr2_train, knowledge_map). Time it with nothing else running.
Systems stay loaded after their turn, as in one ``--repl`` process; the first system's load also
pays the shared imports (torch, transformers, llama.cpp), so its load is a fresh process's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from machine import snapshot, with_load_after

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = {"brit": 5.0, "dnc": 30.0, "mmr2": 30.0}  # a warm answer, 2 cores, default ladder


def summarise(load_seconds: float, answers: list[dict[str, Any]]) -> dict[str, Any]:
    """One system's figures from its answers in order (``seconds``, ``tokens_in``, ``tokens_out``):
    the first is the cold answer (it may fill caches), the rest are the warm ones."""
    first, warm = answers[0], answers[1:]
    secs = [a["seconds"] for a in warm]
    return {
        "load_seconds": round(load_seconds, 2),
        "first_answer_seconds": round(first["seconds"], 2),
        "cold_seconds": round(load_seconds + first["seconds"], 2),  # what a one-off bin/ask waits
        "warm_n": len(warm),
        "warm_median_seconds": round(statistics.median(secs), 2) if secs else None,
        "warm_min_seconds": round(min(secs), 2) if secs else None,
        "warm_max_seconds": round(max(secs), 2) if secs else None,
        "warm_tokens_in_median": statistics.median(a["tokens_in"] for a in warm) if warm else None,
        "warm_tokens_out_median": statistics.median(a["tokens_out"] for a in warm) if warm else None,
        "answered": sum(bool(a["answer"]) for a in answers),
    }


def meets(name: str, row: dict[str, Any]) -> bool | None:
    """Whether the warm median is within the target (None: no target, or no warm answer)."""
    target = TARGET_SECONDS.get(name)
    if target is None or row["warm_median_seconds"] is None:
        return None
    return row["warm_median_seconds"] <= target


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=6, help="MMQA test questions asked of each system (>= 2)")
    ap.add_argument("--systems", nargs="*", default=["brit", "dnc", "mmr2", "bm25"])
    ap.add_argument("--data", default=None, help="the run's data folder (default: data/)")
    ap.add_argument("--params", default=None, help="its params file (default: the one beside the data folder)")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "ask.json"))
    args = ap.parse_args()
    if args.questions < 2:
        ap.error("--questions must be at least 2 (one cold answer, then warm ones)")

    from mmrag import ask
    from mmrag.io import write_json

    machine = snapshot()
    questions = [ask.pick(f"mmqa:{i}", "world", args.data) for i in range(args.questions)]
    systems: dict[str, dict[str, Any]] = {}
    for name in args.systems:  # one system at a time: each load and answer is timed alone
        t0 = time.perf_counter()
        loaded = ask.load_systems([name], "world", args.data, args.params, log=lambda s: print(s, file=sys.stderr))
        load_seconds = time.perf_counter() - t0
        if name not in loaded:
            systems[name] = {"error": "could not load (the line above names the stage to run)"}
            continue
        answers = []
        for q in questions:
            t = ask.ask(q, systems=loaded, log=lambda s: print(s, file=sys.stderr)).get(name)
            if t is None:
                continue
            answers.append({"seconds": t.meta["wall_seconds"], "tokens_in": t.tokens_in,
                            "tokens_out": t.tokens_out, "answer": t.answer})
        if not answers:
            systems[name] = {"error": "answered no question"}
            continue
        row = summarise(load_seconds, answers)
        row["target_warm_seconds"] = TARGET_SECONDS.get(name)
        row["meets_target"] = meets(name, row)
        systems[name] = row
        print(f"{name}: load {row['load_seconds']} s, first {row['first_answer_seconds']} s, warm median "
              f"{row['warm_median_seconds']} s (n={row['warm_n']})", file=sys.stderr)
    out = {"questions": args.questions, "question_set": "mmqa (world, test split)", "systems": systems,
           "machine": with_load_after(machine)}
    write_json(Path(args.out), out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
