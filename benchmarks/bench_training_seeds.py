"""Do BRIT's verdicts survive retraining CLIP with another seed? (issue 18: "state each claim's
verdict robustness ... of training where it is cheap").

    bin/py benchmarks/bench_training_seeds.py [--seeds 0 1 2] [--table1] [--work build/training_seeds]
                                           [--out results/bench/brit_training_seeds.json]

CLIP is the cheap training under BRIT (~9 min on 2 cores): every graph, flat baseline and linker
reads its embeddings. For each seed this script trains CLIP exactly as the ``clip`` stage does
(params ``clip``; only the initialisation and batch-order seed differ), rebuilds BRIT's graph and
its NEA twin as ``brit_graph`` does (spaCy extractor), reruns ``brit_linking``'s retrieval-only runs
(Table 2, the sensitivity runs and Table 3), with ``--table1`` has the stage's reader read Table 1's
claim pair on its claim sample (~12 min a seed; without it Table 1's claims are left out;
Image-Image, read on Table 1's own run, always is), and decides BRIT's claims from those traces with
``mmrag.evaluate.claims`` on the same test split (the split's seed stays ``base.seed``). Each seed
works in ``--work``/seed_<s> (data/world and data/models are linked, never written); data/ and
results/ of the pipeline are untouched. Needs the ``models`` and ``world`` stages (``bin/py -m dvc
repro -s models world``)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from machine import snapshot, with_load_after

ROOT = Path(__file__).resolve().parents[1]


def link_inputs(work: Path, data: Path, corpus: str) -> None:
    """The seed's data folder: the world's corpus and the provisioned models, linked read-only."""
    work.mkdir(parents=True, exist_ok=True)
    for name in (corpus, "models"):
        if not (data / name).exists():
            raise SystemExit(f"data/{name} is missing: run `bin/py -m dvc repro -s models world` first")
        link = work / name
        if not link.exists():
            link.symlink_to((data / name).resolve(), target_is_directory=True)


def train_clip(params: Any, seed: int, clip_dir: Path) -> dict[str, Any]:
    """Train CLIP as the clip stage does with ``seed``; its held-out headline figures."""
    from mmrag.models.clip import load_clip
    from mmrag.stages import clip as clip_stage
    from mmrag.train import clip as clip_train

    seeded = dataclasses.replace(params, base=dataclasses.replace(params.base, seed=seed))
    data = clip_stage.load_data(params)
    t0 = time.perf_counter()
    trained = not (clip_dir / "meta.json").exists()  # a finished seed is reused on a rerun
    if trained:
        print(f"seed {seed}: training CLIP ({params.clip.steps} steps, ~9 min on 2 cores)", flush=True)
        training = clip_stage.train_encoder(seeded, data.train_set, data.heldout, evaluate_heldout=False)
        clip_stage.save_trained(training, seeded, len(data.train_set), clip_dir)
    encoder = load_clip(clip_dir, allow_network=False, device="cpu")
    res = clip_train.evaluate(encoder.encode_images([ex.path for ex in data.heldout]), data.heldout,
                              encoder.encode_texts)
    return {"seconds": round(time.perf_counter() - t0, 1), "trained": trained,
            "zero_shot_mean": round(res["zero_shot_mean"], 4), "zero_shot_min": round(res["zero_shot_min"], 4)}


def build_graphs(params: Any, work: Path) -> dict[str, Any]:
    """BRIT's graph and its NEA twin over the seed's CLIP, as brit_graph builds them."""
    from mmrag.brit.encoders import load_models
    from mmrag.brit.graph import build_graph
    from mmrag.brit.triplets import make_extractor
    from mmrag.stages import brit_graph

    cfg = params.brit_graph
    corpus_dir = work / cfg.corpus
    docs = brit_graph.load_corpus(corpus_dir, cfg.max_docs)
    nlp, enc = load_models(params.models.spacy, params.models.text_encoder, params.models.clip,
                           corpus_dir, params.base.allow_network)
    extractor = make_extractor("spacy", nlp, cfg.arguments)
    graph = build_graph(docs, enc, extractor, cfg.si_top)
    graph.save(work / "brit_graph" / cfg.corpus)
    brit_graph.nea_graph(docs, cfg, corpus_dir, work / "brit_graph", enc, extractor)
    return brit_graph.component_summary(brit_graph.component_sizes(graph))


def retrieval_traces(params: Any, work: Path, table1: bool) -> int:
    """brit_linking's retrieval-only runs (Table 2, sensitivity, Table 3) written as its traces
    under ``work``, and with ``table1`` its claim pair read by its reader on its claim sample
    (the same seeded questions as the stage's); the number of test questions."""
    from mmrag import io
    from mmrag.brit.system import make_reader, open_systems
    from mmrag.schema import question_path
    from mmrag.stages import brit_linking as bl

    graph_cfg, cfg = params.brit_graph, params.brit_linking
    corpus_dir = work / graph_cfg.corpus
    main = tuple(cfg.linking)
    systems, extractor = open_systems(graph_cfg, params.models, cfg, params.base.allow_network, work)
    split = bl.split_question_set(question_path(corpus_dir, cfg.question_set), systems, cfg.dev_share,
                                  params.base.seed, cfg.max_questions)
    systems.prime(split.dev + split.test)
    runs = bl.recall_runs(systems, main, split.test, bl.text_baselines(systems))
    sens_runs, settings = bl.sensitivity_runs(systems, main, split.test, cfg)
    bl.nea_table(systems, extractor, params, corpus_dir, work / "brit_graph", runs)
    bl.write_all_traces({}, runs, cfg.question_set, cfg.nea_set)  # io.DATA points at work
    for setting, (_, traces) in zip(settings, sens_runs.values()):
        io.write_traces(bl.STAGE, setting["system"], bl.RETRIEVAL_SET.format(cfg.question_set), traces, work)
    io.write_json(work / bl.STAGE / bl.SENSITIVITY, settings)
    if table1:
        reader = make_reader(cfg, systems, corpus_dir, params.base.allow_network, params.inference,
                             params.base.device)
        qa_test = bl.balanced_subset(split.test, cfg.qa_questions, params.base.seed)
        sample = bl.claim_sample(split.test, qa_test, cfg.claim_questions, params.base.seed)
        pair = {name: system for name, system in bl.qa_systems(systems, main, reader).items()
                if name in bl.claim_pair()}
        for name, (_, traces) in bl.claim_runs({n: ([], []) for n in pair}, pair, sample).items():
            io.write_traces(bl.STAGE, bl.trace_system(name), bl.CLAIM_SET.format(cfg.question_set), traces, work)
        if hasattr(getattr(reader, "llm", None), "close"):
            reader.llm.close()
    return len(split.test)


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
    """One training seed, end to end; io.DATA points at ``work`` while it runs."""
    from mmrag import io

    link_inputs(work, io.DATA, params.brit_graph.corpus)
    seeded_models = dataclasses.replace(params.models, clip=str(work / "clip"))
    p = dataclasses.replace(params, models=seeded_models)
    clip = train_clip(p, seed, work / "clip")
    print(f"seed {seed}: CLIP zero-shot mean {clip['zero_shot_mean']}, min {clip['zero_shot_min']}", flush=True)
    data = io.DATA
    io.DATA = work
    try:
        components = build_graphs(p, work)
        n_test = retrieval_traces(p, work, table1)
        decisions = decide(p, work, table1)
    finally:
        io.DATA = data
    keep = ("id", "claim", "estimate", "ci_low", "ci_high", "n", "verdict")
    return {"seed": seed, "clip": clip, "components": {k: v for k, v in components.items() if k != "sizes"},
            "test_questions": n_test, "claims": [{k: d[k] for k in keep} for d in decisions]}


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
                    help="also read Table 1's claim sample with the reader (~12 min a seed): its claims too")
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
