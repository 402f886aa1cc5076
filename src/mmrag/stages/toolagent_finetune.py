"""Stage ``toolagent_finetune``: one epoch of LoRA SFT of each divider LLM on the teacher dialogues.

A seeded, strategy-balanced sample of data/toolagent_data/dialogues.jsonl trains every LLM of
``toolagent_finetune.llms`` with the same settings (``mmrag.train.sft``, loss on the assistant
turns only). Writes data/toolagent_finetune/<llm>/adapter, its loss.csv and cost.json, and
results/toolagent_finetune/{metrics.json,loss.png}.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmrag import config
from mmrag.io import DATA, read_jsonl, stage_dirs, write_json
from mmrag.models.registry import resolve
from mmrag.stages import StageResult, new_figure, save_figure
from mmrag.train import sft
from mmrag.train.checkpoints import checkpoint_dir

STAGE = "toolagent_finetune"


@dataclass
class ToolagentFinetuneResult(StageResult):
    """The training runs per LLM, their wall costs, and one example's trained/masked text."""

    results: dict[str, sft.SFTResult] = field(default_factory=dict)
    costs: dict[str, dict[str, Any]] = field(default_factory=dict)
    mask_report: dict[str, str] = field(default_factory=dict)


def settings_of(cfg: config.ToolagentFinetune, seed: int) -> sft.SFTSettings:
    """The SFT settings of this stage: every field from params (the seed from ``base.seed``)."""
    return sft.SFTSettings(
        epochs=cfg.epochs, max_steps=cfg.max_steps, batch_size=cfg.batch_size,
        grad_accum=cfg.grad_accum, learning_rate=cfg.learning_rate,
        warmup_ratio=cfg.warmup_ratio, max_length=cfg.max_length, lora_r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
        target_modules=tuple(cfg.target_modules), quantize_4bit=cfg.quantize_4bit,
        gradient_checkpointing=cfg.gradient_checkpointing, save_steps=cfg.save_steps,
        keep_checkpoints=cfg.keep_checkpoints, seed=seed)


def training_sample(rows: Sequence[dict[str, Any]], strategies: Sequence[str], max_dialogues: int,
                    seed: int) -> list[dict[str, Any]]:
    """A seeded, strategy-balanced sample: ``max_dialogues // len(strategies)`` of each, shuffled."""
    rng = random.Random(seed)
    per = max(1, max_dialogues // len(strategies))
    chosen: list[dict[str, Any]] = []
    for strategy in strategies:
        pool = [r for r in rows if r["strategy"] == strategy]
        rng.shuffle(pool)
        chosen += pool[:per]
    rng.shuffle(chosen)
    return chosen


def label_mask_example(model_path: str, conversations: list[sft.Conversation],
                       settings: sft.SFTSettings) -> dict[str, str]:
    """The first training example split into the text that carries a loss and the masked text."""
    model, tok = sft.load_base(model_path, quantize_4bit=False, device="cpu")
    probe = sft.build_trainer(model, tok, conversations[:1], tempfile.mkdtemp(), settings)
    report = sft.label_mask_report(probe, 1)[0]
    del probe, model
    return report


def train_all(llms: Sequence[str], conversations: list[sft.Conversation], data_dir: Path,
              settings: sft.SFTSettings, base: config.Base
              ) -> tuple[dict[str, sft.SFTResult], dict[str, dict[str, Any]]]:
    """Fine-tune every LLM on the same conversations: (results, wall costs) per LLM."""
    results, costs = {}, {}
    for name in llms:
        path = resolve(name, "llm", base.allow_network)
        res = sft.train_sft(path, conversations, data_dir / name, settings, device=base.device,
                            checkpoints=checkpoint_dir("toolagent_finetune", name))
        results[name] = res
        costs[name] = {"seconds": res.seconds, "steps": res.steps, "epochs": round(res.epochs, 3),
                       "seconds_per_epoch": round(res.seconds / max(res.epochs, 1e-9), 1),
                       "seconds_per_step": round(res.seconds / max(res.steps, 1), 2),
                       "train_tokens": res.train_tokens, "resumed_from": res.resumed_from}
        print(name, costs[name])
    return results, costs


def loss_curves(results: dict[str, sft.SFTResult]) -> Any:
    """Every LLM's training loss per step, one frame (column ``llm``)."""
    import pandas as pd

    return pd.concat([pd.read_csv(r.loss_csv).assign(llm=n) for n, r in results.items()])


def loss_figure(curves: Any) -> Any:
    """The SFT loss curves of every LLM."""
    import seaborn as sns

    fig, ax = new_figure(figsize=(8, 4))
    sns.lineplot(curves, x="step", y="loss", hue="llm", ax=ax)
    ax.set_title("LoRA SFT loss on the divider's turns (one epoch)")
    fig.tight_layout()
    return fig


def stage_metrics(results: dict[str, sft.SFTResult], n_dialogues: int) -> dict[str, Any]:
    """results/toolagent_finetune/metrics.json: steps, tokens, first and final loss per LLM."""
    import pandas as pd

    return {name: {"steps": r.steps, "train_tokens": r.train_tokens,
                   "first_loss": round(float(pd.read_csv(r.loss_csv).loss.iloc[0]), 4),
                   "final_loss": round(float(r.final_loss), 4) if r.final_loss is not None else None,
                   "dialogues": n_dialogues}
            for name, r in results.items()}


def run(params: config.Params) -> ToolagentFinetuneResult:
    """LoRA adapters for every divider LLM, trained on the same seeded sample of teacher dialogues."""
    import pandas as pd
    import seaborn as sns

    base, cfg = params.base, params.toolagent_finetune
    data_dir, out_dir = stage_dirs(STAGE)
    sns.set_theme(style="whitegrid")

    rows = read_jsonl(DATA / "toolagent_data" / "dialogues.jsonl")
    chosen = training_sample(rows, cfg.strategies, cfg.max_dialogues, base.seed)
    conversations = [r["messages"] for r in chosen]
    settings = settings_of(cfg, base.seed)
    print(f"{len(conversations)} dialogues "
          f"({pd.Series([r['strategy'] for r in chosen]).value_counts().to_dict()}), "
          f"{sft.steps_per_epoch(len(conversations), settings)} steps per epoch")

    mask_report = label_mask_example(resolve(cfg.llms[0], "llm", base.allow_network),
                                     conversations, settings)
    results, costs = train_all(cfg.llms, conversations, data_dir, settings, base)

    curves = loss_curves(results)
    fig = loss_figure(curves)
    save_figure(fig, out_dir / "loss.png", dpi=110)
    metrics = stage_metrics(results, len(conversations))
    write_json(out_dir / "metrics.json", metrics)
    write_json(data_dir / "cost.json", costs)  # wall times: not in metrics.json
    return ToolagentFinetuneResult(
        metrics=metrics,
        tables={"training_set": pd.Series([r["strategy"] for r in chosen]).value_counts().to_frame("dialogues"),
                "loss": curves.groupby("llm").loss.agg(["first", "last", "min"]).round(4)},
        figures={"loss": fig},
        artifacts={**{f"adapter_{n}": Path(r.adapter_dir) for n, r in results.items()},
                   "metrics": out_dir / "metrics.json", "cost": data_dir / "cost.json",
                   "figure": out_dir / "loss.png"},
        results=results, costs=costs, mask_report=mask_report)
