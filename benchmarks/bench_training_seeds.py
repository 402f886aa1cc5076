"""Do BRIT's verdicts survive retraining CLIP with another seed? (issue 18: "state each claim's
verdict robustness ... of training where it is cheap").

    bin/py benchmarks/bench_training_seeds.py [--seeds 0 1 2] [--table1] [--work build/training_seeds]
                                           [--out results/bench/brit_training_seeds.json]

CLIP is the cheap training under BRIT (~9 min on 2 cores): every graph, flat baseline and linker
reads its embeddings. Each seed runs as the pipeline's ``brit_seeds`` stage runs it
(:func:`mmrag.stages.brit_seeds.seed_run`: CLIP trained as the ``clip`` stage does, only the
initialisation and batch-order seed differing; BRIT's graph and NEA twin rebuilt as ``brit_graph``
does; ``brit_linking``'s retrieval-only runs rerun, and with ``--table1`` Table 1's claim pair read by
its reader on its claim sample, ~16 min a seed; without it Table 1's claims are left out;
Image-Image, read on Table 1's own run, always is). This bench then decides BRIT's claims on each
seed's traces alone with ``mmrag.evaluate.claims`` on the same test split (the split's seed stays
``base.seed``) and compares each verdict with the committed run's; the stage instead publishes
further seeds' traces for the registry's ``holds``. Unlike the stage, the bench may rerun base.seed
itself. Each seed works in ``--work``/seed_<s> (data/world and data/models are linked, never
written; a seed finished there is read back); data/ and results/ of the pipeline are untouched.
Needs the ``models`` and ``world`` stages (``bin/py -m dvc repro -s models world``)."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from machine import snapshot, with_load_after

ROOT = Path(__file__).resolve().parents[1]


def decide(params: Any, work: Path, table1: bool) -> list[dict[str, Any]]:
    """BRIT's claims from the seed's traces: Table 1's complex-kind claims only with ``table1``
    (Image-Image reads Table 1's own run, which is not rerun here)."""
    from mmrag.evaluate import claims

    rep = params.report
    out = claims.compute(work, alpha=rep.alpha, power=rep.power, reps=rep.bootstrap, seed=params.base.seed,
                         llms=(), papers=("BRIT",), margin=rep.stability_margin,
                         sets=claims.ClaimSets.from_params(params))
    return [d for d in out if not d["id"].startswith("brit.table1")
            or (table1 and d["id"] != "brit.table1_image_image")]


def run_seed(params: Any, seed: int, work: Path, table1: bool) -> dict[str, Any]:
    """One training seed, end to end, as the brit_seeds stage runs it (resumed from ``work`` when it
    finished there under the same fingerprint), then BRIT's claims decided on its traces."""
    from mmrag.stages import brit_seeds

    run = brit_seeds.seed_run(params, seed, work, table1)
    with brit_seeds.data_folder(work):  # the registry reads the seed's traces as a data folder
        decisions = decide(params, work, table1)
    keep = ("id", "claim", "estimate", "ci_low", "ci_high", "n", "verdict")
    return {"seed": seed, "clip": {**run["clip"], "trained": run["clip_trained"]}, "reused": run["reused"],
            "seconds": run["seconds"], "components": run["components"], "test_questions": run["test_questions"],
            "claims": [{k: d[k] for k in keep} for d in decisions]}


def summarise(runs: list[dict[str, Any]], committed: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per claim: its verdict under each training seed, how often it matches the committed one."""
    rows = []
    for claim in runs[0]["claims"]:
        per_seed = {r["seed"]: next(c for c in r["claims"] if c["id"] == claim["id"]) for r in runs}
        verdicts = {s: c["verdict"] for s, c in per_seed.items()}
        mine = committed.get(claim["id"], {})
        ref = mine.get("verdict")
        rows.append({"id": claim["id"], "committed_verdict": ref, "committed_estimate": mine.get("estimate"),
                     "estimates": {s: c["estimate"] for s, c in per_seed.items()},
                     "cis": {s: [c["ci_low"], c["ci_high"]] for s, c in per_seed.items()},
                     "verdicts": verdicts,
                     "holds": f"{sum(v == ref for v in verdicts.values())}/{len(verdicts)}" if ref else None,
                     "verdict_counts": dict(Counter(verdicts.values()))})
    return rows


def main() -> int:
    from mmrag import config
    from mmrag.io import read_json, write_json

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", help="CLIP training seeds (default: base.seed and the next two)")
    ap.add_argument("--work", default="build/training_seeds")
    ap.add_argument("--out", default="results/bench/brit_training_seeds.json")
    ap.add_argument("--table1", action="store_true",
                    help="also read Table 1's claim sample with the reader (~16 min a seed): its claims too")
    args = ap.parse_args()
    params = config.load()
    seeds = args.seeds or [params.base.seed + i for i in range(3)]
    committed_file = ROOT / "results" / "report" / "claims.json"
    doc = read_json(committed_file) if committed_file.exists() else {}
    records = doc["claims"] + doc.get("diagnostics", []) if isinstance(doc, dict) else doc  # or an older list
    committed = {d["id"]: d for d in records}
    before, started = snapshot(), time.time()
    runs = [run_seed(params, s, (ROOT / args.work / f"seed_{s}").resolve(), args.table1) for s in seeds]
    rows = summarise(runs, committed)
    out = {"machine": with_load_after(before), "seeds": seeds, "runs": runs, "claims": rows,
           "table1": args.table1, "note": "Table 1's claims are decided only with --table1 (the reader on the "
                                             "claim sample); Image-Image reads Table 1's own run, not rerun here",
           "load_avg_end": round(os.getloadavg()[0], 2),  # = machine.load_1min_after; scripts/update_readme.py reads it
           "seconds": round(time.time() - started, 1)}
    write_json(ROOT / args.out, out)
    print(f"{'claim':40s} committed  " + "  ".join(f"seed {s:<4}" for s in seeds))
    for r in rows:
        print(f"{r['id']:40s} {str(r['committed_verdict']):10s} "
              + "  ".join(f"{r['estimates'][s]:+.3f} {r['verdicts'][s][:5]}" for s in seeds)
              + f"  holds {r['holds']}")
    print(json.dumps({r["seed"]: r["clip"] for r in runs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
