"""What Q4_0 weights buy (speed) and cost (answers) for each ladder model on llama.cpp.

    bin/py benchmarks/bench_quant.py [--llms smollm2-135m-instruct ...] [--out results/bench/quant.json]

This wheel of llama.cpp (xllamacpp) has AVX2 repacked kernels for Q4_0 but not for the shipped
files' Q4_1 / Q4_K_M. Per model, ``inference.weights`` shipped vs q4_0, each in a fresh engine
(same threads, one slot):

- speed: a fixed ~1,500-token prompt (prefill, uncached) and a 128-token reply (decode),
  tokens per second from llama.cpp's own timings, best of ``--repeat``;
- answers: the models stage's 16-item probe (10 span-reading items, 6 JSON tool calls) with
  each weight set, and how many of the 16 greedy replies are identical. 16 items see only a
  gross loss: a difference below ~5/16 is not evidence either way.

The Q4_0 copy is written once into ``inference.cache_dir`` (its time is reported). Time it with
nothing else running; the load is printed beside the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from machine import snapshot, with_load_after

ROOT = Path(__file__).resolve().parents[1]

DECODE_TOKENS = 128  # the reply whose decode speed is timed


def long_prompt(tok: Any, target: int = 1500) -> str:
    """Probe passages repeated until the prompt holds ``target`` tokens (deterministic)."""
    from mmrag.models.probe import READING

    parts: list[str] = []
    while len(tok("\n".join(parts), add_special_tokens=False)["input_ids"]) < target:
        parts.append(READING[len(parts) % len(READING)][0])
    return "\n".join(parts) + "\nSummarise the passages above in detail."


def measure(name: str, weights: str, repeat: int) -> dict[str, Any]:
    """One model with one weight set: requantization time, prefill/decode tok/s, probe replies."""
    from mmrag import config
    from mmrag.models import gguf_lora, probe, registry
    from mmrag.models.generation import engine_settings, gguf_file, open_chat

    registry.offline_env()
    params = config.load()
    settings = dataclasses.replace(engine_settings(params.inference), slots=1, weights=weights)
    requant_s = None
    if weights == "q4_0":
        start = time.perf_counter()
        gguf_lora.q4_0_gguf(gguf_file(name, registry.MODELS_DIR), settings.cache_dir,
                            registry.PROVISIONED[name].gguf_sha256 if name in registry.PROVISIONED else "")
        requant_s = round(time.perf_counter() - start, 1)
    prefill, decode = [], []
    for _ in range(repeat):
        with open_chat(name, engine="llamacpp", settings=settings, allow_network=False, device="cpu") as llm:
            prompt = long_prompt(llm.tok)
            llm.generate([[{"role": "user", "content": prompt}]], max_new_tokens=DECODE_TOKENS)
            u = llm.usage.as_dict()
            prefill.append(u["prompt_tokens"] / max(u["prompt_seconds"], 1e-9))
            decode.append(u["completion_tokens"] / max(u["decode_seconds"], 1e-9))
    with open_chat(name, engine="llamacpp", settings=settings, allow_network=False, device="cpu") as llm:
        items, seconds = probe.run_probe(llm, max_new_tokens=probe.PROBE_TOKENS)
        served = llm.gguf
    return {"model": name, "weights": weights, "file_mb": round(served.stat().st_size / 2**20, 1),
            "requant_seconds": requant_s, "prefill_tok_s": round(max(prefill), 1),
            "decode_tok_s": round(max(decode), 1), "probe_seconds": round(seconds, 2),
            "reading_correct": sum(i.correct for i in items if i.skill == "reading"),
            "tool_call_correct": sum(i.correct for i in items if i.skill == "tool_call"),
            "replies": [i.reply for i in items]}


def main() -> int:
    from mmrag import config

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llms", nargs="*", default=None, help="default: models.ladder")
    ap.add_argument("--repeat", type=int, default=2, help="speed runs per (model, weights); the best counts")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "quant.json"))
    args = ap.parse_args()
    llms = args.llms or list(config.load().models.ladder)
    before = snapshot()
    rows, comparison = [], []
    for name in llms:
        pair = {w: measure(name, w, args.repeat) for w in ("shipped", "q4_0")}
        rows += [{k: v for k, v in r.items() if k != "replies"} for r in pair.values()]
        same = sum(a == b for a, b in zip(pair["shipped"]["replies"], pair["q4_0"]["replies"]))
        s, q = pair["shipped"], pair["q4_0"]
        comparison.append({"model": name, "prefill_ratio": round(q["prefill_tok_s"] / s["prefill_tok_s"], 2),
                           "decode_ratio": round(q["decode_tok_s"] / s["decode_tok_s"], 2),
                           "probe_shipped": s["reading_correct"] + s["tool_call_correct"],
                           "probe_q4_0": q["reading_correct"] + q["tool_call_correct"],
                           "identical_replies": same, "probe_items": len(s["replies"])})
        print(json.dumps(comparison[-1]), flush=True)
    out = {"machine": with_load_after(before),
           "command": "bin/py benchmarks/bench_quant.py" + (" --llms " + " ".join(args.llms) if args.llms else ""),
           "runs": rows, "comparison": comparison}
    from mmrag.io import write_json

    write_json(Path(args.out), out)  # atomic, like every artifact
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
