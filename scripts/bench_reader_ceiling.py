"""Whether the MM-R2 policy's reader ceiling depends on the engine that serves it.

    bin/py scripts/bench_reader_ceiling.py [--per-split 10] [--policies sft grpo] [--engines hf llamacpp]

two_axis_eval reads each trained policy (mmr2_train's LoRA on ``models.llm``) through
``two_axis_eval.engine``. On llama.cpp the adapter is exported to GGUF and applied to the
provisioned GGUF, whose weights are quantized (SmolLM2-135M ships at ~5.8 bits per weight), while
SFT and GRPO trained the adapter on the fp32 Hugging Face weights. This runs the stage's reader
ceiling (:class:`mmrag.mmr2.system.GoldReader`: the gold passages in the ``<information>``
block, no retrieval) on the first ``per_split`` questions of each split of the stage's seeded
sample, through each engine, and writes per (policy, engine) the accuracy with its Wilson 95 %
CI, the answered share and seconds per question to ``results/bench/reader_ceiling.json``, with
the machine's load beside them. Needs ``data/mmr2_train`` (run ``dvc repro mmr2_train``). Time it
with nothing else running.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-split", type=int, default=None,
                    help="questions per split; default: two_axis_eval.descriptive_per_split (the stage's ceiling)")
    ap.add_argument("--policies", nargs="*", default=["sft", "grpo"], choices=["base", "sft", "grpo"])
    ap.add_argument("--engines", nargs="*", default=["hf", "llamacpp"], choices=["hf", "llamacpp"])
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "reader_ceiling.json"))
    args = ap.parse_args()

    from dataclasses import replace

    from mmrag import config
    from mmrag.evaluate.metrics import accuracy
    from mmrag.evaluate.stats import wilson
    from mmrag.io import DATA, read_json, write_json
    from mmrag.mmr2.agent import PAPER_VIEW, View
    from mmrag.mmr2.intent import bind_questions
    from mmrag.mmr2.knowledge_map import KnowledgeMap
    from mmrag.mmr2.system import GoldReader
    from mmrag.models import registry
    from mmrag.schema import load_question_set
    from mmrag.stages import two_axis_eval as stage

    registry.offline_env()
    params = config.load()
    cfg, base = params.two_axis_eval, params.base
    per_split = cfg.descriptive_per_split if args.per_split is None else args.per_split
    policies_file = DATA / "mmr2_train" / "policies.json"
    if not policies_file.exists():
        raise SystemExit(f"bench_reader_ceiling: no {policies_file.relative_to(ROOT)} (run `dvc repro mmr2_train`)")
    policies = read_json(policies_file)
    view = View(**policies["view"]) if "view" in policies else PAPER_VIEW
    corpus_dir = DATA / cfg.corpus
    kmap, encoder = KnowledgeMap.open(DATA / "knowledge_map" / cfg.corpus, allow_network=False, device="cpu")
    sample = stage.sample_questions(load_question_set(corpus_dir, cfg.question_set, "two_axis_eval.question_set"),
                                    cfg.splits, cfg.per_split, base.seed)
    questions = [q for s in cfg.splits for q in [x for x in sample if x.split == s][:per_split]]
    intents = bind_questions(questions, corpus_dir, spacy=params.models.spacy, clip_path=params.models.clip,
                             allow_network=False)
    load1, load5, _ = os.getloadavg()
    rows = []
    for engine in args.engines:
        run_cfg = replace(cfg, engine=engine)
        for policy in args.policies:
            llm = stage.load_policy(policies, policy, run_cfg, base, params.inference)
            reader = GoldReader(f"ceiling_{policy}", llm, kmap, encoder, k=cfg.k, budget=params.mmr2_train.budget,
                                max_turns=cfg.max_turns - 1 or 1, max_new_tokens=cfg.max_new_tokens,
                                intents=stage.by_id(questions, intents),
                                image_texts=stage.by_id(questions, [x.image_text for x in intents]), view=view)
            t0 = time.perf_counter()
            traces = reader.answer(questions)
            seconds = time.perf_counter() - t0
            if hasattr(llm, "close"):
                llm.close()
            right = sum(accuracy(t.answer, q) for q, t in zip(questions, traces))
            lo, hi = wilson(right, len(questions), params.report.alpha)
            rows.append({"policy": policy, "engine": engine, "n": len(questions), "right": int(right),
                         "accuracy": round(right / len(questions), 3), "ci": [round(lo, 3), round(hi, 3)],
                         "answered": round(sum(bool(t.answer) for t in traces) / len(traces), 3),
                         "seconds_per_q": round(seconds / len(questions), 2),
                         "answers": [t.answer for t in traces[:6]]})
            r = rows[-1]
            print(f"{policy} on {engine}: ceiling {r['accuracy']} {r['ci']} (n {r['n']}), answered "
                  f"{r['answered']}, {r['seconds_per_q']} s per question; first answers {r['answers']}", flush=True)
    write_json(Path(args.out), {"machine": {"cores": os.cpu_count(), "load_1min_before": round(load1, 2),
                                            "load_5min_before": round(load5, 2),
                                            "load_1min_after": round(os.getloadavg()[0], 2)},
                                "llm": policies["base"], "gold": [q.answer for q in questions[:6]],
                                "rows": rows, "command": "bin/py scripts/bench_reader_ceiling.py "
                                + " ".join(sys.argv[1:])})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
