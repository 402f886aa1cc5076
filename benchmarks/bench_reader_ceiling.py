"""Whether the MM-R2 policy's reader ceiling depends on the engine that serves it, and which
ladder model reads well enough to be a policy.

    bin/py benchmarks/bench_reader_ceiling.py [--per-split 10] [--policies sft grpo] [--engines hf llamacpp]
    bin/py benchmarks/bench_reader_ceiling.py --per-split 20 --policies --engines llamacpp \
        --llms smollm2-135m-instruct qwen2.5-coder-0.5b-instruct qwen2.5-coder-1.5b-instruct \
        --out results/bench/reader_ceiling_ladder.json

two_axis_eval reads each trained policy (mmr2_train's LoRA on ``mmr2_train.policy``) through
``two_axis_eval.engine``. On llama.cpp the adapter is exported to GGUF and applied to the
provisioned GGUF, whose weights are quantized (SmolLM2-135M ships as Q4_1), while SFT and GRPO
trained the adapter on the fp32 Hugging Face weights. This runs the stage's reader ceiling
(:class:`mmrag.mmr2.system.GoldReader`: the gold passages in the ``<information>`` block, no
retrieval) on the first ``per_split`` questions of each split of the stage's seeded sample,
through each engine. Per (policy, engine) it writes the accuracy with its Wilson 95 % CI, the
share of answers that contain a gold answer (a diagnostic of reading apart from the span format),
every question's answer, the answered share and seconds per question, with the machine's load
beside them. Trained policies need ``data/mmr2_train`` (``dvc repro mmr2_train``). Time it with
nothing else running.

``--llms`` adds zero-shot rows for ladder models (issue 19: choose the policy size where the
ceiling is meaningful): each named model reads the same gold passages with no adapter, in the view
of ``data/mmr2_traj/view.json``, so those rows need only ``dvc repro mmr2_traj``
(``--policies`` with no names skips the trained policies).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from machine import snapshot, with_load_after

ROOT = Path(__file__).resolve().parents[1]


def contains_gold(answer: str, gold: list[str]) -> bool:
    """A diagnostic, not the stage's metric: a gold answer's normalized words appear, in order, in
    the answer's (a zero-shot model that replies "X is assembled at Teimand Hall." read the passage
    but fails the span-level accuracy)."""
    from mmrag.evaluate.metrics import normalize

    words = f" {normalize(answer)} "
    return any(normalize(g) and f" {normalize(g)} " in words for g in gold)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-split", type=int, default=None,
                    help="questions per split; default: two_axis_eval.descriptive_per_split (the stage's ceiling)")
    ap.add_argument("--policies", nargs="*", default=["sft", "grpo"], choices=["base", "sft", "grpo"])
    ap.add_argument("--llms", nargs="*", default=[],
                    help="ladder models read zero-shot (no adapter), e.g. qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--adapter", default=None,
                    help="a LoRA adapter for the --llms rows (e.g. bench_sft.py --keep): read as 'sft-bench'")
    ap.add_argument("--engines", nargs="*", default=["hf", "llamacpp"], choices=["hf", "llamacpp"])
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "reader_ceiling.json"))
    args = ap.parse_args()

    from dataclasses import replace

    from mmrag import config
    from mmrag.evaluate.metrics import accuracy, golds
    from mmrag.evaluate.stats import wilson
    from mmrag.io import DATA, read_json, write_json
    from mmrag.mmr2.agent import PAPER_VIEW, View
    from mmrag.mmr2.intent import bind_questions
    from mmrag.mmr2.knowledge_map import KnowledgeMap
    from mmrag.mmr2.system import GoldReader
    from mmrag.models import registry
    from mmrag.models.generation import engine_settings, load_chat
    from mmrag.schema import load_question_set
    from mmrag.stages import two_axis_eval as stage
    from mmrag.stages.mmr2_train import load_view

    registry.offline_env()
    params = config.load()
    cfg, base = params.two_axis_eval, params.base
    per_split = cfg.descriptive_per_split if args.per_split is None else args.per_split
    policies_file = DATA / "mmr2_train" / "policies.json"
    if args.policies and not policies_file.exists():
        raise SystemExit(f"bench_reader_ceiling: no {policies_file.relative_to(ROOT)} (run `dvc repro mmr2_train`, "
                         "or pass `--policies` with no names and `--llms` for zero-shot rows only)")
    policies = read_json(policies_file) if args.policies else {"base": params.mmr2_train.policy,
                                                                 "view": load_view(DATA / "mmr2_traj").to_dict()}
    view = View(**policies["view"]) if "view" in policies else PAPER_VIEW
    corpus_dir = DATA / cfg.corpus
    kmap, encoder = KnowledgeMap.open(DATA / "knowledge_map" / cfg.corpus, allow_network=False, device="cpu")
    sample = stage.sample_questions(load_question_set(corpus_dir, cfg.question_set, "two_axis_eval.question_set"),
                                    cfg.splits, cfg.per_split, base.seed)
    questions = [q for s in cfg.splits for q in [x for x in sample if x.split == s][:per_split]]
    intents = bind_questions(questions, corpus_dir, spacy=params.models.spacy, clip_path=params.models.clip,
                             allow_network=False)
    before = snapshot()
    rows = []
    for engine in args.engines:
        run_cfg = replace(cfg, engine=engine)
        ladder_policy = "sft-bench" if args.adapter else "zero-shot"
        runs = [(policy, policies["base"]) for policy in args.policies] + [(ladder_policy, m) for m in args.llms]
        for policy, model in runs:
            llm = (stage.load_policy(policies, policy, run_cfg, base, params.inference) if policy in args.policies
                   else load_chat(model, engine=engine, settings=engine_settings(params.inference),
                                  allow_network=False, device=base.device,
                                  adapter=Path(args.adapter) if args.adapter else None))
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
            held = sum(contains_gold(t.answer or "", golds(q)) for q, t in zip(questions, traces))
            hlo, hhi = wilson(held, len(questions), params.report.alpha)
            lo, hi = wilson(right, len(questions), params.report.alpha)
            rows.append({"policy": policy, "llm": model, "engine": engine, "n": len(questions), "right": int(right),
                         "accuracy": round(right / len(questions), 3), "ci": [round(lo, 3), round(hi, 3)],
                         "contains_gold": round(held / len(questions), 3), "contains_gold_ci": [round(hlo, 3),
                                                                                                 round(hhi, 3)],
                         "answered": round(sum(bool(t.answer) for t in traces) / len(traces), 3),
                         "seconds_per_q": round(seconds / len(questions), 2),
                         "answers": [t.answer for t in traces[:6]],
                         "per_question": [{"id": q.id, "split": q.split, "gold": q.answer, "answer": t.answer}
                                          for q, t in zip(questions, traces)]})
            r = rows[-1]
            print(f"{policy} {model} on {engine}: ceiling {r['accuracy']} {r['ci']} (n {r['n']}), gold inside the "
                  f"answer {r['contains_gold']} {r['contains_gold_ci']}, answered "
                  f"{r['answered']}, {r['seconds_per_q']} s per question; first answers {r['answers']}", flush=True)
    write_json(Path(args.out), {"machine": with_load_after(before),
                                "policy_llm": policies["base"], "gold": [q.answer for q in questions[:6]],
                                "rows": rows, "command": "bin/py benchmarks/bench_reader_ceiling.py "
                                + " ".join(sys.argv[1:])})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
