"""How far each candidate process judge agrees with labels known by construction, and what it costs.

    bin/py benchmarks/bench_judge.py [--questions 12] [--llms qwen2.5-coder-0.5b-instruct qwen2.5-coder-1.5b-instruct]

two_axis_eval's process axis (summary consistency, answer support) needs a judge. The default is
the lexical proxy until an LLM judge beats it (issue 19 asks for the strongest ladder model that
fits). This runs the stage's own check (:mod:`mmrag.mmr2.judge_check`: per dev question of the
world's InfoSeek set, a supported, an unsupported and a contradicted trace) through each LLM
judge on the llama.cpp engine and through the proxy, and writes per judge and axis the agreement
with its Wilson 95 % CI, Cohen's kappa, the yes-rate per case, and seconds per item, to
``results/bench/judge.json`` with the machine's load beside them. Needs ``data/world`` and
``data/knowledge_map/world``. Time it with nothing else running.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from machine import snapshot, with_load_after

ROOT = Path(__file__).resolve().parents[1]


def with_intervals(result: dict[str, Any], alpha: float) -> dict[str, Any]:
    """Each axis's agreement with its Wilson interval: 36 items cannot tell 0.9 from 0.75."""
    from mmrag.evaluate.stats import wilson

    n = result["n"]
    for axis in ("consistency", "support"):
        share = result[f"{axis}_agreement"]
        lo, hi = wilson(round(share * n), n, alpha) if share is not None else (None, None)
        result[f"{axis}_agreement_ci"] = [None if lo is None else round(lo, 3), None if hi is None else round(hi, 3)]
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=None,
                    help="dev questions (3 labelled traces each); default: two_axis_eval.judge_check_questions")
    ap.add_argument("--llms", nargs="*", default=["qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"])
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "judge.json"))
    args = ap.parse_args()

    from mmrag import config
    from mmrag.evaluate.judge import LexicalJudge, LLMJudge
    from mmrag.io import DATA, write_json
    from mmrag.mmr2 import judge_check
    from mmrag.mmr2.knowledge_map import KnowledgeMap
    from mmrag.models import registry
    from mmrag.models.generation import engine_settings, open_chat
    from mmrag.schema import load_question_set

    registry.offline_env()
    params = config.load()
    cfg = params.two_axis_eval
    n_questions = cfg.judge_check_questions if args.questions is None else args.questions
    questions = load_question_set(DATA / cfg.corpus, cfg.question_set, "two_axis_eval.question_set")
    kmap, _ = KnowledgeMap.open(DATA / "knowledge_map" / cfg.corpus, allow_network=False, device="cpu")
    items = judge_check.check_items([q for q in questions if q.split == "dev"], kmap, n_questions,
                                    params.base.seed)
    if not items:
        raise SystemExit("bench_judge: no usable dev question (rerun `dvc repro world knowledge_map`)")
    before = snapshot()
    rows = []
    for name in [None, *args.llms]:
        t0 = time.perf_counter()
        if name is None:
            result = judge_check.agreement(LexicalJudge(), items)
        else:
            with open_chat(name, engine="llamacpp", settings=engine_settings(params.inference),
                           allow_network=False, device="cpu") as llm:
                result = judge_check.agreement(LLMJudge(llm), items)
        result["seconds_per_item"] = round((time.perf_counter() - t0) / len(items), 2)
        rows.append(with_intervals(result, params.report.alpha))
        r = rows[-1]
        print(f"{r['judge']}: consistency {r['consistency_agreement']} {r['consistency_agreement_ci']} "
              f"(kappa {r['consistency_kappa']}), support {r['support_agreement']} {r['support_agreement_ci']} "
              f"(kappa {r['support_kappa']}), n {r['n']}, {r['seconds_per_item']} s per item", flush=True)
    write_json(Path(args.out), {"machine": with_load_after(before),
                                "questions": n_questions, "items": len(items), "judges": rows,
                                "command": "bin/py benchmarks/bench_judge.py " + " ".join(sys.argv[1:])})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
