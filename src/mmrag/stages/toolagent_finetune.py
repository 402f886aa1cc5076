"""Stage ``toolagent_finetune``: one LoRA adapter per divider LLM and strategy, on its own dialogues.

The paper fine-tunes each strategy's LLM on that strategy's teacher dialogues. Here every LLM of
``toolagent_finetune.llms`` gets a DnC adapter trained on DnC dialogues and an mm-ReAct adapter
trained on mm-ReAct dialogues, each sample drawn from the same seeded question order, with the
multi-hop share of the test set and the same budget of training tokens (mm-ReAct dialogues are
longer, so it sees fewer of them). Each adapter is exported to GGUF for the llama.cpp engine.
A teacher-forced check on held-out dev dialogues (every turn generated from the gold prefix)
scores the base and fine-tuned models, the zero-shot ladder models, and the optional QLoRA/LoRA
comparison. Writes data/toolagent_finetune/<llm>/<strategy>/{adapter,loss.csv},
data/toolagent_finetune/cost.json and results/toolagent_finetune/{metrics.json,loss.png}.
"""

from __future__ import annotations

import json
import random
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from mmrag.io import DATA, read_jsonl, save_figure, stage_dirs, write_json
from mmrag.models.params import Inference
from mmrag.models.registry import MODELS_DIR, PROVISIONED, resolve
from mmrag.params import Base, ConfigError, Sections
from mmrag.stages import StageResult, new_figure
from mmrag.toolagent.params import ToolagentFinetune
from mmrag.train import sft
from mmrag.train.checkpoints import checkpoint_dir

STAGE = "toolagent_finetune"


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    inference: Inference
    toolagent_finetune: ToolagentFinetune


@dataclass
class ToolagentFinetuneResult(StageResult):
    """The training runs per (LLM, run), their wall costs, and one example's trained/masked text."""

    results: dict[tuple[str, str], sft.SFTResult] = field(default_factory=dict)
    costs: dict[str, dict[str, Any]] = field(default_factory=dict)
    mask_report: dict[str, str] = field(default_factory=dict)


def settings_of(cfg: ToolagentFinetune, seed: int, quantize_4bit: bool | None = None) -> sft.SFTSettings:
    """The SFT settings of this stage: every field from params (the seed: one of ``seeds``)."""
    return sft.SFTSettings(
        epochs=cfg.epochs, max_steps=cfg.max_steps, batch_size=cfg.batch_size,
        grad_accum=cfg.grad_accum, learning_rate=cfg.learning_rate,
        warmup_ratio=cfg.warmup_ratio, max_length=cfg.max_length, lora_r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
        target_modules=tuple(cfg.target_modules),
        quantize_4bit=cfg.quantize_4bit if quantize_4bit is None else quantize_4bit,
        gradient_checkpointing=cfg.gradient_checkpointing, save_steps=cfg.save_steps,
        keep_checkpoints=cfg.keep_checkpoints, seed=seed)


# --------------------------------------------------------------------------- the training samples
def question_order(rows: Sequence[dict[str, Any]], seed: int) -> list[str]:
    """Every train question id once, in one seeded order shared by all strategies."""
    ids = sorted({r["question_id"] for r in rows if r.get("split", "train") == "train"})
    random.Random(seed).shuffle(ids)
    return ids


def shared_questions(rows: Sequence[dict[str, Any]], strategies: Sequence[str]) -> set[str]:
    """The train questions that have a dialogue of every strategy (each trains on the same ids)."""
    have = [{r["question_id"] for r in rows if r["strategy"] == s and r.get("split", "train") == "train"}
            for s in strategies]
    return set.intersection(*have) if have else set()


def same_questions(rows: Sequence[dict[str, Any]], strategy: str, ids: Sequence[str]) -> list[dict[str, Any]]:
    """A strategy's train dialogues of exactly these questions, in their order."""
    by_id = {r["question_id"]: r for r in rows if r["strategy"] == strategy and r.get("split", "train") == "train"}
    return [by_id[q] for q in ids if q in by_id]


def training_sample(rows: Sequence[dict[str, Any]], strategy: str, order: Sequence[str], budget: int,
                    multi_share: float | None, count: Callable[[dict[str, Any]], int]) -> list[dict[str, Any]]:
    """A strategy's train dialogues, taken in ``order`` until ``budget`` tokens (by ``count``).

    With ``multi_share`` the next dialogue is multi-hop while the sample's multi-hop share is
    below it, single-hop otherwise (each list in ``order``), so every strategy's sample has the
    same share and, as far as the budget goes, the same questions.
    """
    rank = {q: i for i, q in enumerate(order)}
    pool = sorted((r for r in rows if r["strategy"] == strategy and r["question_id"] in rank),
                  key=lambda r: rank[r["question_id"]])
    multi = [r for r in pool if r["hops"] > 1]
    single = [r for r in pool if r["hops"] <= 1]
    chosen, used, n_multi = [], 0, 0
    while used < budget and (multi or single):
        if multi_share is None:  # the plain seeded order
            src = multi if multi and (not single or rank[multi[0]["question_id"]] < rank[single[0]["question_id"]]) \
                else single
        else:
            want_multi = n_multi < multi_share * (len(chosen) + 1)
            src = multi if (want_multi and multi) or not single else single
        r = src.pop(0)
        chosen.append(r)
        used += count(r)
        n_multi += r["hops"] > 1
    return chosen


def token_counter(name: str, allow_network: bool, max_length: int) -> Callable[[dict[str, Any]], int]:
    """Tokens of a dialogue as it is trained (chat template of ``name``, cut at ``max_length``)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(resolve(name, "llm", allow_network))
    tok.chat_template = sft.plain_template(tok)

    def count(row: dict[str, Any]) -> int:
        text = tok.apply_chat_template(row["messages"], tokenize=False)
        return min(max_length, len(tok(text, add_special_tokens=False)["input_ids"]))

    return count


def target_share(cfg: ToolagentFinetune, data: Path | None = None) -> float | None:
    """The multi-hop share each training sample gets: params, else the test set's (toolagent_data,
    under ``data``, else the stage's data folder)."""
    if cfg.multi_hop_share is not None:
        return cfg.multi_hop_share
    summary = (DATA if data is None else data) / "toolagent_data" / "summary.json"
    return json.loads(summary.read_text()).get("target_multi_hop_share") if summary.exists() else None


def sample_table(samples: dict[str, list[dict[str, Any]]], count: Callable[[dict[str, Any]], int]) -> Any:
    """Per strategy: dialogues, tokens, multi-hop share, questions shared with the other samples."""
    import pandas as pd

    ids = {s: {r["question_id"] for r in rows} for s, rows in samples.items()}
    return pd.DataFrame([{"strategy": s, "dialogues": len(rows), "tokens": sum(count(r) for r in rows),
                          "multi_hop_share": round(sum(r["hops"] > 1 for r in rows) / max(1, len(rows)), 3),
                          "mmcoqa_share": round(sum(r["dataset"] == "mmcoqa" for r in rows) / max(1, len(rows)), 3),
                          "questions_in_every_sample": len(set.intersection(*ids.values()) & ids[s])}
                         for s, rows in samples.items()]).set_index("strategy")


# --------------------------------------------------------------------------- training
def training_base(name: str, allow_network: bool, cache_dir: Path) -> str:
    """The Hugging Face weights LoRA trains on (:func:`mmrag.models.generation.hf_weights`): for a
    ladder model provisioned for llama.cpp only, the same weights llama.cpp serves, so the
    exported adapter fits them."""
    from mmrag.models.generation import hf_weights

    return hf_weights(name, allow_network=allow_network, cache_dir=cache_dir)


def _rss_mb() -> float:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return float("nan")
    import os

    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


@contextmanager
def peak_memory(every: float = 0.25) -> Iterator[dict[str, float]]:
    """Peak resident memory (MB) of this process while the block runs, sampled every ``every`` s."""
    out = {"start_mb": _rss_mb(), "peak_mb": _rss_mb()}
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(every):
            out["peak_mb"] = max(out["peak_mb"], _rss_mb())

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        yield out
    finally:
        stop.set()
        t.join()
        out["peak_mb"] = round(max(out["peak_mb"], _rss_mb()), 1)
        out["start_mb"] = round(out["start_mb"], 1)


def float32_adapter(adapter_dir: str | Path) -> bool:
    """Store the adapter's LoRA matrices as float32 (a QLoRA run saves bfloat16, which the GGUF
    exporter's numpy reader cannot read); True when it rewrote them."""
    import torch
    from safetensors.torch import load_file, save_file

    path = Path(adapter_dir) / "adapter_model.safetensors"
    weights = load_file(str(path))
    if all(v.dtype == torch.float32 for v in weights.values()):
        return False
    save_file({k: v.float().contiguous() for k, v in weights.items()}, str(path), metadata={"format": "pt"})
    return True


def export_gguf(name: str, adapter_dir: str | Path, models_dir: Path = MODELS_DIR) -> Path | None:
    """The adapter as GGUF beside it (adapter.gguf) for the llama.cpp engine; None without a base GGUF."""
    from mmrag.models.generation import gguf_file
    from mmrag.models.gguf_lora import export_lora
    from mmrag.models.registry import ModelError

    float32_adapter(adapter_dir)
    try:
        base_gguf = gguf_file(name, models_dir)
    except ModelError:
        return None
    if not base_gguf.exists():
        return None
    return export_lora(adapter_dir, base_gguf, Path(adapter_dir) / "adapter.gguf")


def label_mask_example(model_path: str, conversations: list[sft.Conversation],
                       settings: sft.SFTSettings) -> dict[str, str]:
    """The first training example split into the text that carries a loss and the masked text."""
    model, tok = sft.load_base(model_path, quantize_4bit=False, device="cpu")
    probe = sft.build_trainer(model, tok, conversations[:1], tempfile.mkdtemp(), settings)
    report = sft.label_mask_report(probe, 1)[0]
    del probe, model
    return report


def train_one(name: str, run: str, base_path: str, conversations: list[sft.Conversation], data_dir: Path,
              settings: sft.SFTSettings, base: Base) -> tuple[sft.SFTResult, dict[str, Any]]:
    """One adapter (data_dir/<llm>/<run>/adapter + adapter.gguf): (result, cost)."""
    with peak_memory() as mem:
        res = sft.train_sft(base_path, conversations, data_dir / name / run, settings, device=base.device,
                            checkpoints=checkpoint_dir(STAGE, name, run))
    t0 = time.time()
    gguf = export_gguf(name, res.adapter_dir)
    cost = {"seconds": res.seconds, "steps": res.steps, "epochs": round(res.epochs, 3),
            "seconds_per_step": round(res.seconds / max(res.steps, 1), 2),
            "train_tokens": res.train_tokens,
            "tokens_per_second": round(res.train_tokens * max(res.epochs, 1e-9) / max(res.seconds, 1e-9), 1),
            "peak_rss_mb": mem["peak_mb"], "rss_before_mb": mem["start_mb"],
            "quantize_4bit": settings.quantize_4bit, "export_seconds": round(time.time() - t0, 1),
            "gguf": gguf is not None, "resumed_from": res.resumed_from}
    print(name, run, cost)
    return res, cost


def run_name(strategy: str, seed: int, seeds: Sequence[int]) -> str:
    """An adapter's folder: the strategy for the first seed (the names the eval and registry read
    since the start), '<strategy>@seed<k>' for each further seed."""
    return strategy if not seeds or seed == seeds[0] else f"{strategy}@seed{seed}"


def strategy_of(run: str) -> str:
    """The strategy a run trains: 'dnc@seed1' -> dnc, 'dnc-qlora' -> dnc."""
    return run.split("@")[0].split("-")[0]


def runs_of(cfg: ToolagentFinetune) -> list[tuple[str, str, bool, int]]:
    """(llm, run name, 4-bit, seed) of every adapter: one per LLM and strategy for the first seed,
    one per seed LLM and strategy for each further seed (only the claims' LLMs are re-answered
    with a seed's adapters, so training the others again would buy nothing), plus the QLoRA/LoRA
    twin (first seed)."""
    seeds = list(cfg.seeds)
    stray = [n for n in cfg.seed_llms if n not in cfg.llms]
    if stray:
        raise ConfigError(f"toolagent_finetune.seed_llms {stray} are not in llms {list(cfg.llms)}: "
                          "a further seed retrains adapters of the trained LLMs only")
    runs = [(n, run_name(s, k, seeds), cfg.quantize_4bit, k) for k in seeds for n in cfg.llms for s in cfg.strategies
            if k == seeds[0] or n in cfg.seed_llms]
    if cfg.qlora_compare:
        if cfg.qlora_compare not in cfg.llms or "dnc" not in cfg.strategies:
            raise ConfigError(f"toolagent_finetune.qlora_compare = '{cfg.qlora_compare}' must be one "
                                     f"of llms {list(cfg.llms)} (its DnC adapter is trained twice)")
        runs.append((cfg.qlora_compare, "dnc-lora" if cfg.quantize_4bit else "dnc-qlora", not cfg.quantize_4bit,
                     seeds[0]))
    return runs


# --------------------------------------------------------------------------- held-out check
def heldout_rows(rows: Sequence[dict[str, Any]], strategies: Sequence[str], n: int, seed: int) -> list[dict[str, Any]]:
    """Up to ``n`` dev dialogues per strategy, the same questions for each, multi-hop first."""
    dev = [r for r in rows if r.get("split") == "dev" and r.get("teacher", "programmatic") == "programmatic"]
    ids = sorted({r["question_id"] for r in dev})
    random.Random(seed).shuffle(ids)
    hops = {r["question_id"]: r["hops"] for r in dev}
    ids.sort(key=lambda q: hops[q] <= 1)  # multi-hop first: the sample's point is decomposition
    keep = set(ids[:n])
    return [r for r in dev if r["question_id"] in keep and r["strategy"] in strategies]


def check_models(cfg: ToolagentFinetune, base: Base, inference: Inference,
                 dev: Sequence[dict[str, Any]], trained: dict[tuple[str, str], sft.SFTResult]) -> Any:
    """The teacher-forced check of every (LLM, variant): base, fine-tuned, QLoRA twin, zero-shot."""
    import pandas as pd

    from mmrag.models.generation import engine_settings, load_chat
    from mmrag.toolagent.heldout import teacher_forced

    frames = []
    by_strategy = {s: [r for r in dev if r["strategy"] == s] for s in cfg.strategies}
    settings = engine_settings(inference)
    variants: list[tuple[str, str, dict[str, Path | None]]] = []
    for name in list(cfg.llms) + [n for n in cfg.zero_shot_llms if n not in cfg.llms]:
        variants.append((name, "base", {s: None for s in cfg.strategies}))
        if name in cfg.llms:
            variants.append((name, "ft", {s: Path(trained[(name, s)].adapter_dir) for s in cfg.strategies
                                          if (name, s) in trained}))
        for run in ("dnc-qlora", "dnc-lora"):
            if (name, run) in trained:
                variants.append((name, run.split("-")[1], {"dnc": Path(trained[(name, run)].adapter_dir)}))
    for name, variant, adapters in variants:
        for strategy, adapter in adapters.items():
            if not by_strategy.get(strategy):
                continue
            t0 = time.time()
            llm = load_chat(name, engine=cfg.engine, settings=settings, allow_network=base.allow_network,
                            device=base.device, adapter=adapter)
            try:
                turns = teacher_forced(by_strategy[strategy], llm, strategy, max_new_tokens=96)
            finally:
                if hasattr(llm, "close"):
                    llm.close()
            frames.append(turns.assign(llm=name, variant=variant, seconds=round(time.time() - t0, 1)))
            print(f"held-out {name} {variant} {strategy}: {len(turns)} turns, {time.time() - t0:.0f} s")
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def heldout_table(turns: Any) -> Any:
    """Per LLM, variant and strategy: turn exact match, action match, tool, final-answer EM, format."""
    from mmrag.toolagent.heldout import summary

    return summary(turns)


# --------------------------------------------------------------------------- tables
def loss_curves(results: dict[tuple[str, str], sft.SFTResult]) -> Any:
    """Every run's training loss per step, one frame (columns ``llm``, ``run``)."""
    import pandas as pd

    return pd.concat([pd.read_csv(r.loss_csv).assign(llm=n, run=run) for (n, run), r in results.items()])


def loss_figure(curves: Any) -> Any:
    """The SFT loss curves of every adapter."""
    import seaborn as sns

    fig, ax = new_figure(figsize=(9, 4))
    sns.lineplot(curves.assign(adapter=curves.llm + " · " + curves.run), x="step", y="loss", hue="adapter", ax=ax)
    ax.set_title("LoRA SFT loss on each strategy's own teacher turns (one epoch, equal token budgets)")
    fig.tight_layout()
    return fig


def ladder_table(names: Sequence[str], trained: Sequence[str]) -> Any:
    """The size sweep's models: parameters, instruct-tuned or base, trained or zero-shot only."""
    import pandas as pd

    size = {"smollm2-135m-instruct": "135M", "gemma3-270m": "270M", "qwen2.5-coder-0.5b-instruct": "0.5B",
            "qwen2.5-coder-1.5b-instruct": "1.5B"}
    return pd.DataFrame([{"llm": n, "size": size.get(n, "?"),
                          "instruct": PROVISIONED[n].instruct if n in PROVISIONED else None,
                          "trained here": n in trained} for n in names]).set_index("llm")


def qlora_table(costs: dict[str, dict[str, Any]], results: dict[tuple[str, str], sft.SFTResult],
                heldout: Any, llm: str) -> Any:
    """QLoRA vs LoRA on one LLM's DnC adapter: final loss, held-out EM, time and peak memory."""
    import pandas as pd

    rows = []
    for run in ("dnc", "dnc-qlora", "dnc-lora"):
        if (llm, run) not in results:
            continue
        c, r = costs[f"{llm}/{run}"], results[(llm, run)]
        variant = "qlora" if c["quantize_4bit"] else "lora"
        h = heldout[(heldout.llm == llm) & (heldout.strategy == "dnc")
                    & (heldout.variant == (variant if run != "dnc" else "ft"))] if len(heldout) else heldout
        rows.append({"adapter": f"{llm} · {run}", "base weights": "4-bit NF4" if c["quantize_4bit"] else "fp32",
                     "steps": r.steps,
                     "final_loss": round(float(r.final_loss), 4) if r.final_loss is not None else None,
                     "heldout_answer_EM": round(float(h[h.final].match.mean()), 3) if len(h) else None,
                     "heldout_turn_EM": round(float(h.exact.mean()), 3) if len(h) else None,
                     "seconds": c["seconds"], "peak_rss_mb": c["peak_rss_mb"]})
    return pd.DataFrame(rows)


def stage_metrics(results: dict[tuple[str, str], sft.SFTResult], samples: dict[str, list[dict[str, Any]]],
                  heldout: Any) -> dict[str, Any]:
    """results/toolagent_finetune/metrics.json: steps, tokens, losses per adapter, held-out scores."""
    import pandas as pd

    out: dict[str, Any] = {}
    for (name, run), r in results.items():
        out.setdefault(name, {})[run] = {
            "steps": r.steps, "train_tokens": r.train_tokens,
            "first_loss": round(float(pd.read_csv(r.loss_csv).loss.iloc[0]), 4),
            "final_loss": round(float(r.final_loss), 4) if r.final_loss is not None else None,
            "dialogues": len(samples.get(run.split("-")[0], []))}
    if len(heldout):  # its wall time stays in the notebook's table: metrics.json must rerun byte for byte
        table = heldout_table(heldout).reset_index().drop(columns=["seconds"], errors="ignore")
        out["heldout"] = json.loads(table.to_json(orient="records"))
    return out


def run(params: Params) -> ToolagentFinetuneResult:
    """Per-strategy LoRA adapters for every divider LLM, the held-out check, and their costs."""
    import pandas as pd
    import seaborn as sns

    base, cfg = params.base, params.toolagent_finetune
    data_dir, out_dir = stage_dirs(STAGE)
    sns.set_theme(style="whitegrid")

    rows = read_jsonl(DATA / "toolagent_data" / "dialogues.jsonl")
    count = token_counter(cfg.llms[0], base.allow_network, cfg.max_length)
    common = shared_questions(rows, cfg.strategies)
    order = [q for q in question_order(rows, base.seed) if q in common]
    share = target_share(cfg)
    # the first strategy's sample fills the token budget; every other strategy trains on the same questions
    lead = training_sample(rows, cfg.strategies[0], order, cfg.train_tokens, share, count)
    ids = [r["question_id"] for r in lead]
    samples = {s: same_questions(rows, s, ids) for s in cfg.strategies}
    samples_tab = sample_table(samples, count)
    print(f"multi-hop share {share}; token budget {cfg.train_tokens} per adapter\n{samples_tab}")

    settings = settings_of(cfg, cfg.seeds[0])
    bases = {n: training_base(n, base.allow_network, Path(params.inference.cache_dir)) for n in cfg.llms}
    first = samples[cfg.strategies[0]]
    mask_report = label_mask_example(bases[cfg.llms[0]], [r["messages"] for r in first], settings)
    results: dict[tuple[str, str], sft.SFTResult] = {}
    costs: dict[str, dict[str, Any]] = {}
    for name, run, q4, seed in runs_of(cfg):
        convs = [r["messages"] for r in samples[strategy_of(run)]]
        res, cost = train_one(name, run, bases[name], convs, data_dir, settings_of(cfg, seed, q4), base)
        results[(name, run)], costs[f"{name}/{run}"] = res, cost

    dev = heldout_rows(rows, cfg.strategies, cfg.heldout_dialogues, base.seed)
    heldout = check_models(cfg, base, params.inference, dev, results) if dev else pd.DataFrame()

    curves = loss_curves(results)
    fig = loss_figure(curves)
    save_figure(fig, out_dir / "loss.png", dpi=110)
    metrics = stage_metrics(results, samples, heldout)
    write_json(out_dir / "metrics.json", metrics)
    write_json(data_dir / "cost.json", costs)  # wall times and memory: not in metrics.json
    tables = {"training_sets": samples_tab,
              "loss": curves.groupby(["llm", "run"]).loss.agg(["first", "last", "min"]).round(4),
              "cost": pd.DataFrame(costs).T,
              "ladder": ladder_table(list(cfg.llms) + list(cfg.zero_shot_llms), cfg.llms),
              "heldout": heldout_table(heldout) if len(heldout) else pd.DataFrame()}
    if cfg.qlora_compare:
        tables["qlora"] = qlora_table(costs, results, heldout, cfg.qlora_compare)
    return ToolagentFinetuneResult(
        metrics=metrics, tables=tables, figures={"loss": fig},
        artifacts={**{f"adapter_{n}_{r}": Path(res.adapter_dir) for (n, r), res in results.items()},
                   "metrics": out_dir / "metrics.json", "cost": data_dir / "cost.json",
                   "figure": out_dir / "loss.png"},
        results=results, costs=costs, mask_report=mask_report)


# --------------------------------------------------------------------------- what we see
def what_we_see(metrics: dict[str, Any]) -> str:
    """The figures "what we see" rests on (Markdown), written from this run's metrics."""
    lines = []
    for name, runs in metrics.items():
        if name == "heldout":
            continue
        for run, r in runs.items():
            lines.append(f"- **{name} · {run}:** {r['steps']} steps over {r['train_tokens']} training tokens "
                         f"({r['dialogues']} dialogues); loss {r['first_loss']:.3f} -> {r['final_loss']:.3f}.")
    for h in metrics.get("heldout", []):
        answer = "–" if h["answer_EM"] is None else f"{h['answer_EM']:.3f}"
        lines.append(f"- **Held-out {h['llm']} {h['variant']} {h['strategy']}** ({h['dialogues']} dialogues, "
                     f"{h['turns']} turns): turn exact {h['turn_exact']:.3f}, action match {h['action_match']:.3f}, "
                     f"answer EM {answer}, in format {h['format_ok']:.3f}.")
    return "\n".join(lines)
