"""What serving a LoRA adapter costs llama.cpp, per ladder model (prefill and decode tok/s).

    bin/py benchmarks/bench_lora.py [--llms qwen2.5-coder-0.5b-instruct ...] [--out results/bench/lora.json]

Fine-tuned agents (DnC and mm-ReAct adapters, the MM-R2 SFT/GRPO policies) are served as the
shipped GGUF plus a GGUF LoRA adapter applied at run time. Trained-policy episodes ran ~2.5x
slower than base episodes in two_axis_eval; this script separates the adapter's own cost from
the longer dialogues a trained policy has. Per model, each in a fresh engine (same threads,
one slot): the base weights alone, then with a rank-``--rank`` adapter on q/k/v/o (the stages'
target modules, random weights: the cost of the graph does not depend on their values), a fixed
~1,500-token prompt (prefill, uncached) and a 128-token reply (decode), llama.cpp's own timings,
best of ``--repeat``. Time it with nothing else running; the load is printed beside the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

from bench_quant import DECODE_TOKENS, long_prompt
from machine import snapshot, with_load_after

ROOT = Path(__file__).resolve().parents[1]


def random_adapter(name: str, rank: int, folder: Path) -> Path:
    """A PEFT LoRA on the model's HF weights, saved to ``folder`` (the stages' target modules)."""
    import torch
    from peft import LoraConfig, get_peft_model

    from mmrag.models.llm import load_policy

    torch.manual_seed(0)
    hf = load_policy(name, None, allow_network=False, device="cpu", batch_size=1)
    peft_model = get_peft_model(hf.model, LoraConfig(r=rank, lora_alpha=2 * rank, init_lora_weights=False,
                                                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    peft_model.save_pretrained(str(folder))
    return folder


def speed(name: str, adapter: Path | None, settings: Any, repeat: int) -> dict[str, float]:
    """Best-of-``repeat`` prefill and decode tokens per second, a fresh engine per run."""
    from mmrag.models.generation import open_chat

    prefill, decode = [], []
    for _ in range(repeat):
        with open_chat(name, adapter=adapter, engine="llamacpp", settings=settings, allow_network=False,
                       device="cpu") as llm:
            llm.generate([[{"role": "user", "content": long_prompt(llm.tok)}]], max_new_tokens=DECODE_TOKENS)
            u = llm.usage.as_dict()
            prefill.append(u["prompt_tokens"] / max(u["prompt_seconds"], 1e-9))
            decode.append(u["completion_tokens"] / max(u["decode_seconds"], 1e-9))
    return {"prefill_tok_s": round(max(prefill), 1), "decode_tok_s": round(max(decode), 1)}


def measure(name: str, rank: int, repeat: int) -> dict[str, Any]:
    """One model: base weights vs base + adapter, and the ratios."""
    from mmrag import config
    from mmrag.models import registry
    from mmrag.models.generation import engine_settings

    registry.offline_env()
    registry.provision(name, hf=True)
    with tempfile.TemporaryDirectory(prefix="bench_lora.") as tmp:
        settings = dataclasses.replace(engine_settings(config.load().inference), slots=1,
                                       cache_dir=Path(tmp) / "gguf")
        adapter = random_adapter(name, rank, Path(tmp) / "adapter")
        base = speed(name, None, settings, repeat)
        lora = speed(name, adapter, settings, repeat)
    return {"model": name, "rank": rank, "base": base, "lora": lora,
            "prefill_ratio": round(lora["prefill_tok_s"] / base["prefill_tok_s"], 2),
            "decode_ratio": round(lora["decode_tok_s"] / base["decode_tok_s"], 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llms", nargs="*", default=["smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct"])
    ap.add_argument("--rank", type=int, default=16, help="LoRA rank (params: lora_r)")
    ap.add_argument("--repeat", type=int, default=2, help="speed runs per variant; the best counts")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "lora.json"))
    args = ap.parse_args()
    before = snapshot()
    rows = []
    for name in args.llms:
        rows.append(measure(name, args.rank, args.repeat))
        print(json.dumps(rows[-1]), flush=True)
    out = {"machine": with_load_after(before),
           "command": f"bin/py benchmarks/bench_lora.py --llms {' '.join(args.llms)} --rank {args.rank}",
           "runs": rows}
    from mmrag.io import write_json

    write_json(Path(args.out), out)  # atomic, like every artifact
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
