"""Benchmark the generation service: the same evaluation slices with Hugging Face and llama.cpp.

    bin/py benchmarks/bench_inference.py [--n 16] [--llm smollm2-135m-instruct] [--out results/bench/inference.json]

On a GPU machine the same slices are the paper-scale check (HF on CUDA, and a vLLM or other
OpenAI-compatible server for the ``openai`` engine; start it first, on 127.0.0.1):

    bin/py benchmarks/bench_inference.py --device cuda --engines hf openai \
        --llm Qwen/Qwen2.5-7B-Instruct --base-url http://127.0.0.1:8000/v1 --n 100 --allow-network

Three fixed slices of the systems' evaluations on the generated world, each answered by the
same model on both engines, each (slice, engine) in its own process (peak memory is per
process, and one engine's threads never wait behind the other's):

- ``dnc``: DnC dialogues (divide, call tools, compose) on the first ``n`` MMQA test questions;
- ``mmr2``: MM-R2 episodes (route, search, summarise, answer) on ``n`` InfoSeek-style test
  questions over the world's KnowledgeMap;
- ``reading``: single-shot reading of the top-3 passages for ``n`` BRIT questions (the reader
  every retrieve-then-read system shares).

The slices need no trained CLIP: DnC runs without its ImageQA tool and MM-R2 reads the
question's picture as its gold caption, which changes answers, not the LLM work measured.
Prints and writes questions per minute, prefill and decode tokens per second, peak memory and
the llama.cpp/HF ratio, with the machine's load and core count beside them. The compared engine
runs ``--repeat`` times at each of ``--slots``; a digest of its replies tells whether a rerun
gives the same greedy texts (``same_replies_on_rerun``), since continuous batching may not. Time
it with nothing else running: two jobs on two cores slow each several-fold.

    bin/py benchmarks/bench_inference.py --n 12 --slots 1 8   # the ratio uses the first slot count
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from machine import snapshot, with_load_after

ROOT = Path(__file__).resolve().parents[1]
SLICES = ("dnc", "mmr2", "reading")
ENGINES = ("hf", "llamacpp")  # reference first


def first_test(questions: list[Any], n: int, split_prefix: str = "test") -> list[Any]:
    """The first n test questions in file order: a fixed slice, chosen before any run."""
    return [q for q in questions if q.split.startswith(split_prefix)][:n]


def run_slice(slice_name: str, engine: str, llm_name: str, n: int, device: str, base_url: str | None,
              allow_network: bool, slots: int | None = None, lockstep: bool = False) -> dict[str, Any]:
    """Answer one slice on one engine in this process; returns its counts and timings.

    ``lockstep``: step every dialogue of the slice together, whatever the engine's
    ``dialogue_width`` (how the agents ran before they grouped by it: benchmarks/bench_dialogues.py)."""
    from mmrag import config
    from mmrag.io import DATA
    from mmrag.models import registry
    from mmrag.models.generation import engine_settings, load_chat
    from mmrag.schema import load_question_set

    if not allow_network:
        registry.offline_env()
    params = config.load()
    settings = engine_settings(params.inference)
    if slots:
        settings = dataclasses.replace(settings, slots=slots)
    world = DATA / "world"
    llm = load_chat(llm_name, engine=engine, settings=settings, allow_network=allow_network,
                    device=device, base_url=base_url)
    counted = Counting(llm)
    if lockstep:
        counted.dialogue_width = None
    start = time.perf_counter()
    if slice_name == "dnc":
        from mmrag.io import read_jsonl
        from mmrag.models.registry import load_text_encoder
        from mmrag.schema import load_documents
        from mmrag.toolagent.system import STRATEGIES
        from mmrag.toolagent.tools import build_tools, world_maps

        cfg = params.toolagent_eval
        questions = first_test(load_question_set(world, "mmqa", "toolagent_eval.question_set"), n)
        types, names, groups = world_maps(read_jsonl(world / "entities.jsonl"))
        tools = build_tools(load_documents(world), load_text_encoder(cfg.text_encoder, allow_network=False,
                                                                     device="cpu"),
                            types, entity_names=names, groups=groups)
        system = STRATEGIES["dnc"](counted, tools, "dnc_bench", max_calls=cfg.max_tool_calls,
                                   max_new_tokens=cfg.max_new_tokens)
        start = time.perf_counter()
        traces = system.answer(questions)
    else:
        from mmrag.mmr2.knowledge_map import KnowledgeMap

        kmap, encoder = KnowledgeMap.open(DATA / "knowledge_map" / "world", allow_network=False, device="cpu")
        if slice_name == "mmr2":
            from mmrag.mmr2.system import MMR2Agent

            cfg, train = params.two_axis_eval, params.mmr2_train
            questions = first_test(load_question_set(world, "infoseek", "two_axis_eval.question_set"), n)
            from mmrag.io import read_jsonl

            caption = {r["id"]: r.get("caption", "") for r in read_jsonl(world / "images.jsonl")}
            captions = {q.id: caption.get(q.image_id or "") for q in questions}
            system = MMR2Agent("mmr2_bench", counted, kmap, encoder, k=cfg.k, budget=train.budget,
                               max_turns=cfg.max_turns, max_new_tokens=cfg.max_new_tokens,
                               image_texts=captions)
            start = time.perf_counter()
            traces = system.answer(questions)
        else:
            from mmrag.baselines.single_shot import single_shot

            questions = first_test(load_question_set(world, "brit", "brit_linking.question_set"), n)
            start = time.perf_counter()
            traces = single_shot(counted, kmap, encoder, questions, [q.text for q in questions],
                                 "reading_bench", k=3)
    seconds = time.perf_counter() - start
    usage = getattr(llm, "usage", None)
    out = {"slice": slice_name, "engine": engine, "llm": llm_name, "questions": len(traces),
           "seconds": round(seconds, 2), "questions_per_minute": round(60 * len(traces) / seconds, 2),
           "slots": settings.slots if engine != "hf" else None, "lockstep": lockstep,
           "texts_sha256": counted.digest.hexdigest()[:16],
           "llm_calls": counted.calls, "prompt_tokens": counted.prompt_tokens,
           "completion_tokens": counted.completion_tokens,
           "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    # Aggregate rates over the wall time spent inside generate(), comparable across engines.
    out.update(generate_seconds=round(counted.seconds, 2),
               output_tok_s=round(counted.completion_tokens / max(counted.seconds, 1e-9), 1),
               input_tok_s=round(counted.prompt_tokens / max(counted.seconds, 1e-9), 1))
    if usage is not None and usage.prompt_seconds:  # llama.cpp also times prefill, decode and cache hits
        u = usage.as_dict()
        out.update(cached_prompt_tokens=u["cached_tokens"], computed_prompt_tokens=u["prompt_tokens"],
                   per_request_prefill_tok_s=round(u["prompt_tokens"] / max(u["prompt_seconds"], 1e-9), 1),
                   per_request_decode_tok_s=round(u["completion_tokens"] / max(u["decode_seconds"], 1e-9), 1))
    if hasattr(llm, "close"):
        llm.close()
    return out


class Counting:
    """Counts what passes through ``generate`` (calls, tokens, seconds), whatever the engine."""

    def __init__(self, llm: Any):
        self.llm, self.name = llm, llm.name
        self.dialogue_width = getattr(llm, "dialogue_width", None)  # the agents group dialogues by it
        self.calls = self.prompt_tokens = self.completion_tokens = 0
        self.seconds = 0.0
        self.digest = hashlib.sha256()  # of every reply in order: equal digests = the same texts

    def generate(self, conversations: list[Any], **kwargs: Any) -> list[Any]:
        t0 = time.perf_counter()
        out = self.llm.generate(conversations, **kwargs)
        self.seconds += time.perf_counter() - t0
        self.calls += len(conversations)
        self.prompt_tokens += sum(g.tokens_in for g in out)
        self.completion_tokens += sum(g.tokens_out for g in out)
        for g in out:
            self.digest.update(g.text.encode() + b"\0")
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=16, help="questions per slice")
    ap.add_argument("--llm", default="smollm2-135m-instruct")
    ap.add_argument("--slices", nargs="*", default=list(SLICES), choices=SLICES)
    ap.add_argument("--engines", nargs=2, default=list(ENGINES), choices=("hf", "llamacpp", "openai"),
                    help="the reference engine, then the one compared with it")
    ap.add_argument("--device", default="cpu", help="the hf engine's device (cuda on a GPU machine)")
    ap.add_argument("--base-url", default=None, help="the openai engine's server, e.g. http://127.0.0.1:8000/v1")
    ap.add_argument("--allow-network", action="store_true", help="hub ids (GPU/paper runs only)")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "inference.json"))
    ap.add_argument("--slots", type=int, nargs="*", default=None,
                    help="slot counts to run the compared engine at (default: inference.slots); "
                         "the ratio uses the first")
    ap.add_argument("--repeat", type=int, default=2,
                    help="runs of the compared engine per slot count (their replies are compared)")
    ap.add_argument("--one", nargs=2, metavar=("SLICE", "ENGINE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        slots = args.slots[0] if args.slots else None
        print(json.dumps(run_slice(args.one[0], args.one[1], args.llm, args.n, args.device, args.base_url,
                                   args.allow_network, slots)))
        return 0
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}  # OMP_WAIT_POLICY as the caller has it
    ref, new = args.engines
    extra = ["--device", args.device] + (["--base-url", args.base_url] if args.base_url else []) \
        + (["--allow-network"] if args.allow_network else [])
    rows, before = [], snapshot()
    for slice_name in args.slices:
        plan = [(ref, None, 0)] + [(new, slots, rep) for slots in args.slots or [None]
                                   for rep in range(args.repeat)]
        for engine, slots, rep in plan:
            proc = subprocess.run([sys.executable, __file__, "--one", slice_name, engine, "--llm", args.llm,
                                   "--n", str(args.n), *extra, *(["--slots", str(slots)] if slots else [])],
                                  cwd=ROOT, env=env, text=True, capture_output=True)
            if proc.returncode:
                raise SystemExit(f"bench: {slice_name} on {engine} failed:\n{proc.stderr[-3000:]}")
            row = {**json.loads(proc.stdout.strip().splitlines()[-1]), "repeat": rep}
            rows.append(row)
            print(f"{slice_name:8s} {engine:9s} slots {row['slots'] or '-':>2} #{rep} {row['questions']:3d} q in "
                  f"{row['seconds']:7.1f} s  {row['questions_per_minute']:6.2f} q/min  "
                  f"out {row['output_tok_s']:6.1f} tok/s  in {row['input_tok_s']:7.1f} tok/s  "
                  f"peak {row['peak_rss_mb']:.0f} MB  texts {row['texts_sha256']}", flush=True)
    ratios, by_slots, repeatable = {}, {}, {}
    for slice_name in args.slices:
        base = next(r for r in rows if r["slice"] == slice_name and r["engine"] == ref)
        runs = [r for r in rows if r["slice"] == slice_name and r["engine"] == new]
        for slots in dict.fromkeys(r["slots"] for r in runs):
            same = [r for r in runs if r["slots"] == slots]
            qpm = sum(r["questions_per_minute"] for r in same) / len(same)
            by_slots[f"{slice_name}/slots={slots}"] = round(qpm / base["questions_per_minute"], 2)
            # Greedy decoding: a rerun should give the very same replies; llama.cpp's continuous
            # batching can change float sums with the batch mix, and this shows whether it does.
            # (None with a single run: nothing to compare)
            repeatable[f"{slice_name}/slots={slots}"] = (len({r["texts_sha256"] for r in same}) == 1
                                                         if len(same) > 1 else None)
        ratios[slice_name] = by_slots[f"{slice_name}/slots={runs[0]['slots']}"]
        print(f"{slice_name}: {new} / {ref} = {ratios[slice_name]}x questions per minute")
    for key, ratio in by_slots.items():
        print(f"  {key}: {ratio}x, same replies on rerun: {repeatable[key]}")
    result = {"machine": with_load_after(before),
              "llm": args.llm, "n_per_slice": args.n, "runs": rows, "ratio_questions_per_minute": ratios,
              "ratio_by_slots": by_slots, "same_replies_on_rerun": repeatable,
              "engines": args.engines, "device": args.device,
              "command": "bin/py benchmarks/bench_inference.py " + " ".join(sys.argv[1:])}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    from mmrag.io import write_json

    write_json(out, result)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
