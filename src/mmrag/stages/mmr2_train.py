"""Stage `mmr2_train`: LoRA SFT on MM-R2-Traj, then GRPO with the retriever in the loop.

SFT (:mod:`mmrag.train.sft`) trains on the trajectories of stage `mmr2_traj` with the loss on
assistant turns only; a one-example probe shows what is trained and what is masked. GRPO
(:mod:`mmrag.train.grpo`) samples groups of episodes against the KnowledgeMap's real per-unit
indexes and optimises ``route_weight * R_route + answer_weight * R_ans``. Both runs' settings
are built here from ``params.mmr2_train``, every field explicitly. Timings go to
data/mmr2_train/cost.json, never to metrics.json.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from mmrag.io import DATA, ROOT, read_json, read_jsonl, save_figure, stage_dirs, write_json, write_jsonl
from mmrag.mmr2 import agent
from mmrag.mmr2 import intent as intent_binding
from mmrag.mmr2.agent import View
from mmrag.mmr2.knowledge_map import KnowledgeMap
from mmrag.mmr2.params import Mmr2Train
from mmrag.models.params import Inference, Models
from mmrag.params import Base, Sections
from mmrag.sampling import seeded_order
from mmrag.schema import Question, load_question_set
from mmrag.stages import StageResult, new_figure
from mmrag.train import grpo, sft
from mmrag.train.checkpoints import checkpoint_dir

# (row of the halves table, column of curves.csv)
CURVE_QUANTITIES = (("reward", "reward"), ("R_route", "rewards/route_reward/mean"),
                    ("R_ans", "rewards/answer_reward/mean"), ("format errors / episode", "format_errors"),
                    ("answered share", "answered"), ("sampled tokens / episode", "completions/mean_length"))
HALVES = ("first half", "second half")


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    inference: Inference
    models: Models
    mmr2_train: Mmr2Train


@dataclass
class Mmr2TrainResult(StageResult):
    """Besides tables and figures: the label-mask probe and both runs' results."""

    label_mask: dict[str, str] = field(default_factory=dict)  # trained / masked text of one example
    information_tokens_trained: int = 0
    sft_result: sft.SFTResult | None = None
    grpo_result: dict[str, Any] = field(default_factory=dict)  # GRPOResult as a dict (either launcher)
    cost: dict[str, Any] = field(default_factory=dict)  # seconds and steps (data/mmr2_train/cost.json)

    def describe_mask(self) -> str:
        """What the SFT loss sees on one trajectory (trained text, then an excerpt of the masked)."""
        return ("TRAINED:\n" + self.label_mask["trained"][:900] + "\n\nMASKED (excerpt):\n"
                + self.label_mask["masked"][-700:]
                + f"\n\n<information> occurrences inside trained tokens: {self.information_tokens_trained}")


# --------------------------------------------------------------------------- settings
def sft_settings(section: Mmr2Train, seed: int, n_conversations: int) -> sft.SFTSettings:
    """The SFT run's settings, every field from params (checkpoints twice per run); sft_max_steps 0:
    the epochs decide the length of the run."""
    max_steps = section.sft_max_steps or -1
    per_epoch = math.ceil(n_conversations / (section.sft_batch_size * section.sft_grad_accum))
    steps = max_steps if max_steps > 0 else math.ceil(per_epoch * section.sft_epochs)
    return sft.SFTSettings(
        epochs=section.sft_epochs, max_steps=max_steps, batch_size=section.sft_batch_size,
        grad_accum=section.sft_grad_accum, learning_rate=section.sft_lr,
        warmup_ratio=section.sft_warmup_ratio, max_length=section.sft_max_length,
        lora_r=section.lora_r, lora_alpha=section.lora_alpha, lora_dropout=section.sft_lora_dropout,
        target_modules=tuple(section.target_modules), quantize_4bit=section.sft_quantize_4bit,
        gradient_checkpointing=section.sft_gradient_checkpointing,
        save_steps=max(1, steps // 2), keep_checkpoints=section.sft_keep_checkpoints,
        seed=seed)


def grpo_settings(section: Mmr2Train, seed: int) -> grpo.GRPOSettings:
    """The GRPO run's settings, every field from params."""
    return grpo.GRPOSettings(
        max_steps=section.grpo_steps, prompts_per_step=section.grpo_prompts_per_step,
        num_generations=section.group_size, temperature=section.temperature, top_p=section.top_p,
        learning_rate=section.grpo_lr, beta=section.beta, loss_type=section.grpo_loss_type,
        route_weight=section.route_weight, answer_weight=section.answer_weight,
        max_turns=section.max_turns, turn_tokens=section.turn_tokens,
        max_completion_tokens=section.max_completion_tokens, micro_batch=section.grpo_micro_batch,
        lora_r=section.lora_r, lora_alpha=section.lora_alpha, lora_dropout=section.grpo_lora_dropout,
        target_modules=tuple(section.target_modules), save_steps=section.save_steps, seed=seed)


# --------------------------------------------------------------------------- SFT
def load_view(traj_dir: Path) -> View:
    """What the trajectories show the agent (data/mmr2_traj/view.json): GRPO and the evaluation
    present the same."""
    if not (traj_dir / "view.json").exists():
        raise FileNotFoundError(f"{traj_dir / 'view.json'} is missing: run `dvc repro mmr2_traj` first")
    return View(**read_json(traj_dir / "view.json"))


def load_trajectories(traj_dir: Path, max_trajectories: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train, val) trajectories of stage mmr2_traj; train cut to ``max_trajectories`` (0: all)."""
    for name in ("train.jsonl", "val.jsonl"):
        if not (traj_dir / name).exists():
            raise FileNotFoundError(f"{traj_dir / name} is missing: run `dvc repro mmr2_traj` first")
    train, val = read_jsonl(traj_dir / "train.jsonl"), read_jsonl(traj_dir / "val.jsonl")
    if max_trajectories:
        train = train[:max_trajectories]
    return train, val


def label_mask_probe(model_path: str, conversation: list[dict[str, Any]], out_dir: Path,
                     settings: sft.SFTSettings) -> dict[str, str]:
    """One conversation tokenised exactly as the trainer does: its trained and masked text."""
    model, tok = sft.load_base(model_path, False, "cpu")
    probe = sft.build_trainer(model, tok, [conversation], out_dir, settings)
    return sft.label_mask_report(probe, 1)[0]


# --------------------------------------------------------------------------- GRPO
def grpo_questions(questions: list[Question], kmap: KnowledgeMap, seed: int, n: int,
                   ) -> tuple[list[Question], int]:
    """(the first ``n`` eligible training questions in seeded order, how many are eligible):
    eligible ones have a gold passage in the map, so R_route is defined."""
    pool = seeded_order([q for q in questions if q.split == "train"
                         and any(p in kmap.pid_index for p in q.gold_passages)], seed)
    return pool[:n], len(pool)


def train_grpo_python(model_path: str, questions: list[Question], intents: list[intent_binding.Intent],
                      kmap: KnowledgeMap, encoder: Any, env_kw: dict[str, Any], out_dir: Path,
                      settings: grpo.GRPOSettings, adapter: str, device: str) -> dict[str, Any]:
    """GRPO in this process (default profile); ``env_kw["view"]`` is a dict (JSON, as the job file)."""
    kw = {**env_kw, "view": View(**env_kw["view"])}
    return asdict(grpo.train_grpo(
        model_path, questions, lambda: agent.RetrievalEnv(kmap, encoder, **kw), out_dir,
        settings, adapter=adapter, image_texts=[x.image_text for x in intents], intents=intents,
        device=device, checkpoints=checkpoint_dir("mmr2_train", "grpo")))


def train_grpo_accelerate(model_path: str, questions: list[Question], intents: list[intent_binding.Intent],
                          map_dir: Path, env_kw: dict[str, Any], data_dir: Path, settings: grpo.GRPOSettings,
                          adapter: str, section: Mmr2Train, base: Base) -> dict[str, Any]:
    """The same GRPO under ``accelerate launch`` + DeepSpeed ZeRO-3 (paper profile), via a job file."""
    write_jsonl(data_dir / "grpo_questions.jsonl", [q.to_dict() for q in questions])
    job = {"model_path": model_path, "adapter": adapter, "out_dir": str(data_dir / "grpo"),
           "checkpoints": str(checkpoint_dir("mmr2_train", "grpo")),
           "questions": str(data_dir / "grpo_questions.jsonl"),
           "image_texts": [x.image_text for x in intents], "intents": [x.to_dict() for x in intents],
           "knowledge_map": str(map_dir), "text_encoder": read_json(map_dir / "meta.json")["text_encoder"],
           "allow_network": base.allow_network, "env": env_kw, "settings": asdict(settings),
           "device": base.device}
    write_json(data_dir / "grpo_job.json", job)
    subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--config_file",
                    str(ROOT / section.accelerate_config), "-m", "mmrag.train.grpo",
                    str(data_dir / "grpo_job.json")], check=True, cwd=ROOT)
    return read_json(data_dir / "grpo" / "grpo_result.json")


# --------------------------------------------------------------------------- curves and metrics
def curves_figure(loss_sft: pd.DataFrame, curves: pd.DataFrame) -> Any:
    """SFT loss; GRPO reward and its parts, format errors (rolling means) and loss, per step."""
    fig, axes = new_figure(1, 4, figsize=(17, 3.6))
    axes[0].plot(loss_sft["step"], loss_sft["loss"], color="steelblue")
    axes[0].set_title("SFT loss")
    axes[0].set_xlabel("step")
    win = max(1, len(curves) // 6)
    for col, label in [("reward", "reward (weighted)"), ("rewards/route_reward/mean", "R_route"),
                       ("rewards/answer_reward/mean", "R_ans")]:
        axes[1].plot(curves["step"], curves[col].rolling(win, min_periods=1).mean(), label=label)
    axes[1].set_title(f"GRPO reward (rolling mean, {win} steps)")
    axes[1].legend()
    axes[2].plot(curves["step"], curves["format_errors"].rolling(win, min_periods=1).mean(), color="crimson")
    axes[2].set_title("format errors per episode")
    axes[3].plot(curves["step"], curves["loss"], color="gray")
    axes[3].set_title("GRPO loss")
    for ax in axes[1:]:
        ax.set_xlabel("step")
    fig.tight_layout()
    return fig


def reward_variance_figure(curves: pd.DataFrame, prompts_per_step: int, group_size: int) -> Any:
    """GRPO's mean reward with its spread, and per step the share of groups whose rewards vary:
    a group whose episodes all score the same has zero advantage and teaches nothing (TRL's
    frac_reward_zero_std; the answer reward's own share from grpo.answer_reward)."""
    fig, axes = new_figure(1, 2, figsize=(12, 3.6))
    mean, std = curves["reward"], curves["reward_std"].fillna(0.0)
    axes[0].plot(curves["step"], mean, color="steelblue", marker="o", ms=3, label="mean reward")
    axes[0].fill_between(curves["step"], mean - std, mean + std, color="steelblue", alpha=0.2, label="± std")
    axes[0].set_title("GRPO reward per step (mean ± std)")
    axes[0].legend()
    # TRL's frac_reward_zero_std: per step, the share of groups whose G rewards are all equal
    zero_frac = (curves["frac_reward_zero_std"].fillna(1.0) if "frac_reward_zero_std" in curves
                 else (std == 0).astype(float))
    varied = 1.0 - zero_frac
    axes[1].bar(curves["step"], varied, color="darkorange", label="reward (0.1 R_route + R_ans)")
    if "answer_groups_with_variance" in curves:
        axes[1].plot(curves["step"], curves["answer_groups_with_variance"].fillna(0.0), "k.",
                     label="R_ans alone")
    groups = len(curves) * prompts_per_step
    n_varied = int(round(float(varied.sum() * prompts_per_step)))
    axes[1].set_ylim(0, 1.05)
    axes[1].set_ylabel("share of the step's groups")
    axes[1].legend(fontsize=8)
    axes[1].set_title(f"groups whose rewards vary ({prompts_per_step} groups x {group_size} episodes "
                      f"per step)\n{n_varied} of {groups} groups with a learning signal", fontsize=10)
    for ax in axes:
        ax.set_xlabel("step")
    fig.tight_layout()
    return fig


def halves_summary(curves: pd.DataFrame) -> pd.DataFrame:
    """Mean of each GRPO quantity over the first and the second half of the run (one row: both)."""
    half = max(1, len(curves) // 2)
    first, last = curves.iloc[:half], curves.iloc[half:] if len(curves) > 1 else curves
    return pd.DataFrame([{"quantity": name, "first half": round(float(first[col].mean()), 4),
                          "second half": round(float(last[col].mean()), 4)}
                         for name, col in CURVE_QUANTITIES])


def group_variance(curves: pd.DataFrame, prompts_per_step: int) -> dict[str, Any]:
    """How many GRPO groups had a learning signal: groups whose episodes' rewards differ (TRL's
    frac_reward_zero_std per step) and, of those, groups whose answer reward alone differs."""
    groups = len(curves) * prompts_per_step
    zero = curves["frac_reward_zero_std"].fillna(1.0) if "frac_reward_zero_std" in curves else None
    with_var = int(round(float(((1.0 - zero) * prompts_per_step).sum()))) if zero is not None else None
    ans = curves.get("answer_groups_with_variance")
    ans_var = int(round(float((ans.fillna(0.0) * prompts_per_step).sum()))) if ans is not None else None
    return {"groups": groups, "groups_with_reward_variance": with_var,
            "share_groups_with_reward_variance": round(with_var / groups, 4) if groups and with_var is not None
            else None,
            "groups_with_answer_variance": ans_var}


def train_metrics(n_train: int, n_val: int, res_sft: sft.SFTResult, loss_sft: pd.DataFrame,
                  information_trained: int, res_grpo: dict[str, Any], n_prompts: int, group_size: int,
                  summary: pd.DataFrame, curves: pd.DataFrame, prompts_per_step: int) -> dict[str, Any]:
    """Both runs' deterministic outcomes (no timings)."""
    return {
        "trajectories": {"train": n_train, "val": n_val},
        "sft": {"steps": res_sft.steps, "epochs": round(res_sft.epochs, 3), "train_tokens": res_sft.train_tokens,
                "first_loss": round(float(loss_sft["loss"].iloc[0]), 4),
                "final_loss": round(float(res_sft.final_loss), 4),
                "information_tokens_trained": information_trained},
        "grpo": {"steps": res_grpo["steps"], "prompts": n_prompts, "group_size": group_size,
                 **group_variance(curves, prompts_per_step),
                 **{f"{row['quantity']} ({h})": row[h] for row in summary.to_dict("records") for h in HALVES}},
    }


def relative_to_root(path: str | Path) -> str:
    """A path as policies.json stores it (relative to the repository, so a clone can load it)."""
    return str(Path(path).resolve().relative_to(ROOT))


def run(params: Params) -> Mmr2TrainResult:
    """SFT the policy on MM-R2-Traj, then GRPO it against the real retriever; write both adapters."""
    import seaborn as sns

    from mmrag.models.generation import hf_weights

    section, base = params.mmr2_train, params.base
    data_dir, out_dir = stage_dirs("mmr2_train")
    sns.set_theme(style="whitegrid")
    model_path = hf_weights(section.policy, allow_network=base.allow_network,
                            cache_dir=ROOT / params.inference.cache_dir)
    train_traj, val_traj = load_trajectories(DATA / "mmr2_traj", section.max_trajectories)
    cost: dict[str, Any] = {}
    print(f"{len(train_traj)} training and {len(val_traj)} validation trajectories; policy {section.policy}")

    view = load_view(DATA / "mmr2_traj")
    settings_sft = sft_settings(section, base.seed, len(train_traj))
    convs = [t["messages"] for t in train_traj]
    mask = label_mask_probe(model_path, convs[0], data_dir / "probe", settings_sft)
    information_trained = mask["trained"].count("<information>")

    t0 = time.time()
    res_sft = sft.train_sft(model_path, convs, data_dir / "sft", settings_sft, device=base.device,
                            checkpoints=checkpoint_dir("mmr2_train", "sft"))
    cost["sft_seconds"] = round(time.time() - t0, 1)
    loss_sft = pd.read_csv(res_sft.loss_csv)
    print(f"SFT: {res_sft.steps} steps, {res_sft.train_tokens} training tokens, "
          f"final loss {res_sft.final_loss:.3f}")

    map_dir = DATA / "knowledge_map" / section.corpus
    kmap, encoder = KnowledgeMap.open(map_dir, allow_network=base.allow_network, device=base.device)
    corpus_dir = DATA / section.corpus
    questions = load_question_set(corpus_dir, section.question_set, "mmr2_train.question_set")
    prompts, eligible = grpo_questions(questions, kmap, base.seed,
                                       section.grpo_steps * section.grpo_prompts_per_step)
    intents = intent_binding.bind_questions(prompts, corpus_dir, spacy=params.models.spacy,
                                            clip_path=params.models.clip,
                                            allow_network=base.allow_network)
    print(f"{len(prompts)} GRPO prompts (of {eligible} eligible); {len(kmap.units)} units")

    settings_grpo = grpo_settings(section, base.seed)
    env_kw = {"mode": "routed", "k": section.k, "budget": section.budget, "view": view.to_dict()}
    t0 = time.time()
    if section.launcher == "python":
        res_grpo = train_grpo_python(model_path, prompts, intents, kmap, encoder, env_kw, data_dir / "grpo",
                                     settings_grpo, res_sft.adapter_dir, base.device)
    else:  # paper profile: the same code under accelerate + DeepSpeed ZeRO-3
        res_grpo = train_grpo_accelerate(model_path, prompts, intents, map_dir, env_kw, data_dir,
                                         settings_grpo, res_sft.adapter_dir, section, base)
    cost["grpo_seconds"] = round(time.time() - t0, 1)
    cost["grpo_rollout_seconds"] = res_grpo.get("rollout_seconds")
    curves = pd.read_csv(res_grpo["curves_csv"])
    print(f"GRPO: {res_grpo['steps']} steps in {cost['grpo_seconds']} s "
          f"({cost['grpo_seconds'] / max(res_grpo['steps'], 1):.1f} s/step; sampling episodes "
          f"{res_grpo.get('rollout_seconds')} s, the rest model load and updates)")

    fig = curves_figure(loss_sft, curves)
    save_figure(fig, out_dir / "curves.png", dpi=100)
    variance = reward_variance_figure(curves, section.grpo_prompts_per_step, section.group_size)
    save_figure(variance, out_dir / "reward_variance.png", dpi=100)
    summary = halves_summary(curves)
    metrics = train_metrics(len(train_traj), len(val_traj), res_sft, loss_sft, information_trained, res_grpo,
                            len(prompts), section.group_size, summary, curves, section.grpo_prompts_per_step)
    # the loop's training signal in the trajectories SFT read (mmr2_traj.miss_then_hit_frac)
    metrics["trajectories"]["train_multi_step"] = sum(1 for t in train_traj if t["meta"].get("searches", 1) >= 2)
    write_json(out_dir / "metrics.json", metrics)
    write_json(data_dir / "policies.json", {"base": section.policy, "view": view.to_dict(),
                                            "sft": relative_to_root(res_sft.adapter_dir),
                                            "grpo": relative_to_root(res_grpo["adapter_dir"])})
    cost.update({"sft_steps": res_sft.steps, "grpo_steps": res_grpo["steps"]})
    write_json(data_dir / "cost.json", cost)  # timings: never in metrics.json
    return Mmr2TrainResult(
        metrics=metrics, tables={"halves": summary, "sft_loss": loss_sft, "grpo_curves": curves},
        figures={"curves": fig, "reward_variance": variance},
        artifacts={"sft_adapter": Path(res_sft.adapter_dir), "grpo_adapter": Path(res_grpo["adapter_dir"]),
                   "policies": data_dir / "policies.json", "cost": data_dir / "cost.json",
                   "curves": out_dir / "curves.png", "reward_variance": out_dir / "reward_variance.png",
                   "metrics": out_dir / "metrics.json"},
        label_mask=mask, information_tokens_trained=information_trained, sft_result=res_sft,
        grpo_result=res_grpo,
        cost=cost)


# --------------------------------------------------------------------------- what we see
def what_we_see(metrics: dict[str, Any]) -> str:
    """The figures "what we see" rests on (Markdown), written from this run's metrics."""
    s, g, t = metrics["sft"], metrics["grpo"], metrics["trajectories"]
    lines = [f"- **SFT:** {s['steps']} steps = {s['epochs']:.2f} epoch(s) of {t['train']} training trajectories "
             f"({s['train_tokens']} tokens); loss {s['first_loss']:.3f} -> {s['final_loss']:.3f}; "
             f"<information> tokens trained: {s['information_tokens_trained']}."]
    share = g.get("share_groups_with_reward_variance")
    lines.append(f"- **GRPO:** {g['steps']} steps, {g['prompts']} prompts in groups of {g['group_size']}; "
                 + ("groups whose rewards vary (a learning signal): "
                    f"{g['groups_with_reward_variance']} of {g['groups']} ({share:.0%})" if share is not None
                    else "reward variance not logged")
                 + (f", of which the answer reward varies in {g['groups_with_answer_variance']}"
                    if g.get("groups_with_answer_variance") is not None else "") + ".")
    halves = sorted({k.rsplit(" (", 1)[0] for k in g if k.endswith("half)")})
    if halves:
        lines.append("- **First -> second half:** " + "; ".join(
            f"{q} {g[f'{q} (first half)']} -> {g[f'{q} (second half)']}" for q in halves) + ".")
    return "\n".join(lines)
