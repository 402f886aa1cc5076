"""GRPO for a multi-turn retrieval agent with TRL 1.16, the real retrieval tool inside every rollout.

Why ``rollout_func`` (and not ``tools=`` or ``environment_factory``): TRL's tool loop needs the
model to emit its chat template's native tool-call syntax and a tokenizer response schema to
parse it. MM-R2's policy speaks the paper's own protocol instead — ``<search>[{"retrieval_unit":
{"id": …}, "query": …}]</search>`` answered by an ``<information>`` turn — which is exactly what
SFT taught it. A ``rollout_func`` runs that protocol unchanged: it samples an assistant turn from
the current policy, hands it to the environment (``mmr2.agent.RetrievalEnv``: parses it, searches
the per-unit FAISS index, returns the observation), appends the observation as a user turn, and
continues until the agent answers, the search budget is spent or the token cap is reached. It
returns ``env_mask`` = 1 on sampled tokens and 0 on observation/template tokens; TRL multiplies
the loss mask by it, so tool responses never receive gradient.

Reward (paper): ``0.1 · R_route + 1.0 · R_ans`` through ``reward_funcs`` + ``reward_weights``:
R_route is the share of the episode's searches whose unit holds gold evidence (0 when it never
searched), R_ans the evaluator's accuracy of the final answer. Format errors are logged (through
TRL's ``log_metric``), never rewarded. Checkpoints every ``save_steps`` make an interrupted run
resume; the log history goes to ``curves.csv``.

The paper profile runs the same module under ``accelerate launch`` with a DeepSpeed ZeRO-3
config (``configs/accelerate_zero3.yaml``): ``python -m mmrag.train.grpo JOB.json``.
"""

from __future__ import annotations

import copy
import csv
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mmrag.evaluate.metrics import accuracy
from mmrag.io import atomic_path, write_json
from mmrag.mmr2.agent import RetrievalEnv, View
from mmrag.mmr2.intent import Intent
from mmrag.mmr2.knowledge_map import KnowledgeMap
from mmrag.models.registry import load_text_encoder
from mmrag.schema import Question, load_questions
from mmrag.train.checkpoints import claim, last_checkpoint, release
from mmrag.train.progress import console_progress
from mmrag.train.sft import plain_template

Message = dict[str, Any]
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.S)


class Environment(Protocol):
    """One episode of the agent's tool (``mmr2.agent.RetrievalEnv`` implements it)."""

    def reset(self, question: Question, image_text: str | None = None,
              intent: Any = None) -> list[Message]: ...

    def step(self, text: str) -> Any:
        """Returns an object with ``observation``, ``done``, ``route_correct``, ``format_error``."""
        ...


@dataclass(frozen=True)
class GRPOSettings:
    """Hyper-parameters of one GRPO run. No defaults: the mmr2_train stage builds them from its
    params section (``stages.mmr2_train.grpo_settings``), passing every field."""

    max_steps: int
    prompts_per_step: int
    num_generations: int  # group size G
    temperature: float
    top_p: float
    learning_rate: float
    beta: float  # KL to the reference; 0 = no reference model (TRL's default)
    loss_type: str  # TRL GRPOConfig.loss_type
    route_weight: float
    answer_weight: float
    max_turns: int  # assistant turns per episode
    turn_tokens: int  # new tokens per assistant turn
    max_completion_tokens: int  # sampled + observation tokens per episode
    micro_batch: int  # episodes per forward/backward; the step still spans the whole batch
    lora_r: int  # used only when starting without an SFT adapter
    lora_alpha: int
    lora_dropout: float
    target_modules: tuple[str, ...]
    save_steps: int
    seed: int


@dataclass
class GRPOResult:
    adapter_dir: str
    steps: int
    seconds: float
    resumed_from: str | None
    curves_csv: str
    final_reward: float | None
    settings: dict[str, Any] = field(default_factory=dict)
    rollout_seconds: float | None = None  # of `seconds`, sampling episodes; the rest is the update


# --------------------------------------------------------------------------- rewards
def answer_of(text: str) -> str | None:
    """The content of the agent's <answer> tag, or None when it gave none."""
    m = _ANSWER.search(text or "")
    return m.group(1).strip() if m else None


def route_reward(completions: list, route_correct: list[list[bool | None]], **_: Any) -> list[float]:
    """R_route: share of searches whose unit holds gold evidence (0.0 for an episode without search)."""
    out = []
    for flags in route_correct:
        known = [bool(f) for f in (flags or []) if f is not None]
        out.append(sum(known) / len(known) if known else 0.0)
    return out


def varied_groups(values: Sequence[float], groups: Sequence[int]) -> float:
    """Share of groups (episodes with the same group id) whose values are not all equal."""
    by: dict[int, set[float]] = {}
    for v, g in zip(values, groups):
        by.setdefault(g, set()).add(round(float(v), 9))
    return sum(len(v) > 1 for v in by.values()) / len(by) if by else 0.0


def answer_reward(completions: list, question: list[str], final_answer: list[str | None],
                  format_errors: list[int] | None = None, group: list[int] | None = None,
                  log_metric: Callable[[str, float], None] | None = None, **_: Any) -> list[float]:
    """R_ans: the evaluator's accuracy of the final answer (0.0 without an answer); logs format
    errors, the answered share and the share of groups whose answer reward varies."""
    rewards = [accuracy(a, Question.from_dict(json.loads(q))) if a is not None else 0.0
               for q, a in zip(question, final_answer)]
    if log_metric is not None and format_errors is not None:
        log_metric("format_errors", sum(format_errors) / max(len(format_errors), 1))
        log_metric("answered", sum(a is not None for a in final_answer) / max(len(final_answer), 1))
        if group is not None:
            log_metric("answer_groups_with_variance", varied_groups(rewards, group))
    return rewards


# --------------------------------------------------------------------------- rollouts
def prompt_key(messages: list[Message]) -> str:
    """A stable key of a prompt conversation (the rollout maps prompts back to their questions)."""
    return json.dumps([[m["role"], m["content"]] for m in messages], ensure_ascii=False)


def _stop_ids(tok: Any) -> list[int]:
    ids = {tok.eos_token_id}
    for t in ("<|im_end|>", "<end_of_turn>"):
        i = tok.get_vocab().get(t)
        if i is not None:
            ids.add(i)
    return sorted(i for i in ids if i is not None)


def observation_ids(tok: Any, conversation: list[Message], observation: str, end_token: str) -> list[int]:
    """Template tokens after the policy's end-of-turn token: the observation turn and the next
    assistant header (all masked from the loss)."""
    before = tok.apply_chat_template(conversation, tokenize=False)
    after = tok.apply_chat_template(conversation + [{"role": "user", "content": observation}],
                                    tokenize=False, add_generation_prompt=True)
    cut = before.rfind(end_token)
    if cut < 0 or not after.startswith(before[:cut + len(end_token)]):
        raise ValueError("grpo: the chat template does not end assistant turns with "
                         f"{end_token!r}; use a ChatML or Gemma template (train.sft.plain_template)")
    return tok(after[cut + len(end_token):], add_special_tokens=False)["input_ids"]


def sample_turns(model: Any, tok: Any, sequences: list[list[int]], max_new_tokens: int,
                 temperature: float, top_p: float, stop_ids: list[int]) -> list[list[int]]:
    """One sampled assistant turn per sequence (batched, left-padded), cut after its stop token."""
    import torch  # heavy: torch imports in seconds; only training needs it

    width = max(len(s) for s in sequences)
    pad = tok.pad_token_id
    ids = torch.tensor([[pad] * (width - len(s)) + s for s in sequences], device=model.device)
    mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences],
                        device=model.device)
    was_training = model.training
    model.eval()  # no dropout while sampling: the episode is drawn from the policy itself
    try:
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True,
                                 temperature=temperature, top_p=top_p, top_k=0, use_cache=True,
                                 max_new_tokens=max_new_tokens, eos_token_id=stop_ids,
                                 pad_token_id=pad)
    finally:
        model.train(was_training)
    turns = []
    for row in out[:, width:].tolist():
        cut = next((i for i, t in enumerate(row) if t in stop_ids), None)
        turns.append(row[: cut + 1] if cut is not None else row)
    return turns


@dataclass
class Episode:
    """What one rollout did: token ids with their loss mask, and what the rewards read."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    route_correct: list[bool | None] = field(default_factory=list)
    final_answer: str | None = None
    format_errors: int = 0
    searches: int = 0
    done: bool = False


def run_episodes(model: Any, tok: Any, envs: Sequence[Environment], starts: Sequence[list[Message]],
                 settings: GRPOSettings) -> list[Episode]:
    """Roll out one episode per environment in lockstep, sampling from ``model``."""
    stops = _stop_ids(tok)
    end_token = tok.convert_ids_to_tokens(stops[-1]) if len(stops) > 1 else tok.eos_token
    convs = [copy.deepcopy(s) for s in starts]
    eps = [Episode(prompt_ids=list(tok.apply_chat_template(c, tokenize=True, add_generation_prompt=True,
                                                          return_dict=True)["input_ids"]))
           for c in convs]
    for _ in range(settings.max_turns):
        alive = [i for i, e in enumerate(eps) if not e.done]
        if not alive:
            break
        turns = sample_turns(model, tok, [eps[i].prompt_ids + eps[i].completion_ids for i in alive],
                             settings.turn_tokens, settings.temperature, settings.top_p, stops)
        for i, turn in zip(alive, turns):
            e = eps[i]
            e.completion_ids += turn
            e.env_mask += [1] * len(turn)
            if not turn or turn[-1] not in stops:  # cut by the per-turn cap: close the turn, unsampled
                e.completion_ids.append(stops[-1])
                e.env_mask.append(0)
            text = tok.decode(turn, skip_special_tokens=True)
            res = envs[i].step(text)
            e.format_errors += bool(getattr(res, "format_error", None))
            if getattr(res, "route_correct", None) is not None or "<search>" in text:
                e.searches += 1
                e.route_correct.append(getattr(res, "route_correct", None))
            convs[i].append({"role": "assistant", "content": text})
            if res.done or res.observation is None:
                e.final_answer = answer_of(text)
                e.done = True
                continue
            obs = observation_ids(tok, convs[i], res.observation, end_token)
            if len(e.completion_ids) + len(obs) + settings.turn_tokens > settings.max_completion_tokens:
                e.done = True  # token cap: the episode ends unanswered
                continue
            convs[i].append({"role": "user", "content": res.observation})
            e.completion_ids += obs
            e.env_mask += [0] * len(obs)
    return eps


def make_rollout(env_factory: Callable[[], Environment],
                 episodes: dict[str, tuple[Question, str | None, Any]],
                 settings: GRPOSettings) -> Callable[[list, Any], dict[str, Any]]:
    """A TRL ``rollout_func``: prompts (each already repeated G times by TRL) -> episodes.

    Its ``seconds`` list gets the wall time of each call, so a run can say where a step goes."""

    def rollout(prompts: list, trainer: Any) -> dict[str, Any]:
        from trl.models.utils import unwrap_model_for_generation  # heavy: trl imports transformers (seconds)

        envs, starts, group_of, groups = [], [], {}, []
        for p in prompts:
            key = prompt_key(p)
            groups.append(group_of.setdefault(key, len(group_of)))
            if key not in episodes:
                raise KeyError("grpo: a prompt the trainer sampled is not in the episode table")
            question, image_text, intent = episodes[key]
            env = env_factory()
            starts.append(env.reset(question, image_text, intent))
            envs.append(env)
        tok = trainer.processing_class
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                         gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                                         ) as model:
            t0 = time.time()
            eps = run_episodes(model, tok, envs, starts, settings)
            rollout.seconds.append(time.time() - t0)
        return {"prompt_ids": [e.prompt_ids for e in eps],
                "completion_ids": [e.completion_ids for e in eps],
                "logprobs": None,  # on-policy (num_iterations=1): TRL recomputes them
                "env_mask": [e.env_mask for e in eps],
                "route_correct": [e.route_correct for e in eps],
                "final_answer": [e.final_answer for e in eps],
                "format_errors": [e.format_errors for e in eps],
                "searches": [e.searches for e in eps],
                "group": groups}

    rollout.seconds = []  # type: ignore[attr-defined]
    return rollout


# --------------------------------------------------------------------------- training
CURVE_KEYS = ("loss", "reward", "reward_std", "frac_reward_zero_std", "answer_groups_with_variance",
              "rewards/route_reward/mean", "rewards/answer_reward/mean", "format_errors", "answered",
              "completions/mean_length", "kl", "entropy", "grad_norm", "learning_rate")


def write_curves(log_history: list[dict[str, Any]], path: str | Path) -> Path:
    """Per-step loss, reward and its two parts, format errors, lengths (CSV)."""
    with atomic_path(path) as tmp, tmp.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["step", *CURVE_KEYS])
        for row in log_history:
            if "loss" in row or "reward" in row:
                w.writerow([row.get("step"), *(("" if row.get(k) is None else round(float(row[k]), 6))
                                               for k in CURVE_KEYS)])
    return Path(path)


def reward_trend(log_history: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Did the reward and the loss move: per-step rewards and losses, the two halves' mean reward
    and their difference (the curve notebook 32 plots; mmr2_train's halves table reads the same)."""
    rows = [r for r in log_history if "reward" in r]
    rewards = [float(r["reward"]) for r in rows]
    losses = [float(r["loss"]) for r in rows if "loss" in r]
    half = max(1, len(rewards) // 2)
    first, last = rewards[:half], rewards[half:] or rewards[:half]

    def mean(xs: Sequence[float]) -> float | None:
        return round(sum(xs) / len(xs), 4) if xs else None

    out = {"steps": len(rewards), "rewards": rewards, "losses": losses,
           "reward_first_half": mean(first), "reward_second_half": mean(last)}
    out["reward_delta"] = (None if out["reward_first_half"] is None
                           else round(out["reward_second_half"] - out["reward_first_half"], 4))
    out["reward_moved"] = len(set(rewards)) > 1
    out["loss_moved"] = any(abs(x) > 0 for x in losses)
    return out


def build_trainer(model: Any, tok: Any, questions: Sequence[Question],
                  env_factory: Callable[[], Environment], out_dir: str | Path,
                  settings: GRPOSettings, image_texts: Sequence[str | None] | None = None,
                  intents: Sequence[Any] | None = None, use_cpu: bool = True) -> Any:
    """A TRL GRPOTrainer whose rollouts run the agent against ``env_factory()`` environments."""
    # heavy: datasets, peft and trl import torch and transformers (seconds); only training needs them
    from datasets import Dataset
    from peft import LoraConfig, PeftModel
    from trl import GRPOConfig, GRPOTrainer

    if not questions:
        raise ValueError("grpo: no training questions")
    episodes: dict[str, tuple[Question, str | None, Any]] = {}
    rows = []
    for i, q in enumerate(questions):
        image_text = image_texts[i] if image_texts else None
        intent = intents[i] if intents else None
        prompt = env_factory().reset(q, image_text, intent)
        key = prompt_key(prompt)
        if key in episodes:  # same prompt twice: keep the first (its gold is the same question)
            continue
        episodes[key] = (q, image_text, intent)
        rows.append({"prompt": prompt, "question": json.dumps(q.to_dict(), ensure_ascii=False)})
    batch = settings.prompts_per_step * settings.num_generations
    if settings.micro_batch < 1 or batch % settings.micro_batch:
        raise ValueError(f"grpo: micro_batch {settings.micro_batch} must divide the batch of "
                         f"{batch} episodes (prompts_per_step x num_generations)")
    bf16 = not use_cpu and _bf16_ok()
    # one rollout round of `batch` episodes per optimizer step, back-propagated `micro_batch`
    # episodes at a time: full-vocabulary logits of 4 x 3,000-token episodes exhaust 23 GB
    cfg = GRPOConfig(
        output_dir=str(out_dir), max_steps=settings.max_steps,
        per_device_train_batch_size=settings.micro_batch,
        gradient_accumulation_steps=batch // settings.micro_batch,
        num_generations=settings.num_generations, temperature=settings.temperature,
        top_p=settings.top_p, learning_rate=settings.learning_rate, beta=settings.beta,
        loss_type=settings.loss_type, reward_weights=[settings.route_weight, settings.answer_weight],
        max_completion_length=settings.max_completion_tokens, logging_steps=1,
        save_strategy="steps", save_steps=settings.save_steps, save_total_limit=1,
        use_cpu=use_cpu, bf16=bf16, fp16=False, report_to="none",
        gradient_checkpointing=False, seed=settings.seed, data_seed=settings.seed,
        disable_tqdm=True, dataloader_num_workers=0, remove_unused_columns=False)
    peft_config = None
    if not isinstance(model, PeftModel):
        peft_config = LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha,
                                 lora_dropout=settings.lora_dropout,
                                 target_modules=list(settings.target_modules), task_type="CAUSAL_LM")
    return GRPOTrainer(model=model, reward_funcs=[route_reward, answer_reward], args=cfg,
                       train_dataset=Dataset.from_list(rows), processing_class=tok,
                       peft_config=peft_config, callbacks=[console_progress("grpo")],
                       rollout_func=make_rollout(env_factory, episodes, settings))


def _bf16_ok() -> bool:
    """bf16 on GPUs that support it (paper profile); CPU runs stay fp32."""
    import torch  # heavy: torch imports in seconds; only training needs it

    return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())


def load_policy(model_path: str, adapter: str | Path | None, device: str,
                ) -> tuple[Any, Any]:
    """(model, tokenizer): the base, with the SFT LoRA adapter loaded trainable when given."""
    # heavy: torch and transformers import in seconds; only training needs them
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(adapter or model_path))
    tok.chat_template = plain_template(tok)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    if device not in ("cpu", "auto"):
        model.to(device)
    if adapter:
        from peft import PeftModel  # heavy: peft imports torch and transformers

        model = PeftModel.from_pretrained(model, str(adapter), is_trainable=True)
    return model, tok


def train_grpo(model_path: str, questions: Sequence[Question], env_factory: Callable[[], Environment],
               out_dir: str | Path, settings: GRPOSettings,
               adapter: str | Path | None = None, image_texts: Sequence[str | None] | None = None,
               intents: Sequence[Any] | None = None, *, device: str, checkpoints: str | Path,
               log: Callable[[str], None] = print) -> GRPOResult:
    """GRPO from ``adapter`` (the SFT policy) or a fresh LoRA; adapter saved in out_dir/adapter.

    Checkpoints go to ``checkpoints`` (outside the stage's outputs); an interrupted run of the
    same model, adapter, prompts and settings resumes from the newest one.
    """
    import torch  # heavy: torch imports in seconds; only training needs it

    torch.manual_seed(settings.seed)
    out_dir = Path(out_dir)
    stamp = json.dumps({"model": str(model_path), "adapter": str(adapter), "questions": [q.id for q in questions],
                        "settings": {k: v for k, v in asdict(settings).items() if k != "max_steps"}},
                       sort_keys=True, default=str)
    ckpt_dir = claim(checkpoints, stamp, log)
    model, tok = load_policy(model_path, adapter, device)
    use_cpu = device == "cpu" or not torch.cuda.is_available()
    trainer = build_trainer(model, tok, questions, env_factory, ckpt_dir, settings, image_texts,
                            intents, use_cpu=use_cpu)
    last = last_checkpoint(ckpt_dir)
    if last:
        log(f"grpo: resuming from {last}")
    t0 = time.time()
    trainer.train(resume_from_checkpoint=last)
    seconds = time.time() - t0
    adapter_dir = out_dir / "adapter"
    if trainer.accelerator.is_main_process:
        trainer.model.save_pretrained(str(adapter_dir))
        tok.save_pretrained(str(adapter_dir))
    curves = write_curves(trainer.state.log_history, out_dir / "curves.csv")
    rollout_seconds = sum(getattr(trainer.rollout_func, "seconds", []))
    rewards = [r["reward"] for r in trainer.state.log_history if "reward" in r]
    if trainer.accelerator.is_main_process:
        release(ckpt_dir, keep=False)
    return GRPOResult(adapter_dir=str(adapter_dir), steps=int(trainer.state.global_step),
                      seconds=round(seconds, 1), resumed_from=last, curves_csv=str(curves),
                      final_reward=rewards[-1] if rewards else None, settings=asdict(settings),
                      rollout_seconds=round(rollout_seconds, 1))


# --------------------------------------------------------------------------- launcher (paper profile)
def mmr2_env_factory(job: dict[str, Any]) -> Callable[[], Environment]:
    """RetrievalEnv factory from a job spec (knowledge map folder, encoder, mode, k, budget)."""
    kmap = KnowledgeMap.load(job["knowledge_map"])
    encoder = load_text_encoder(job["text_encoder"], allow_network=job.get("allow_network", False),
                                device="cpu")
    env_kw = dict(job.get("env", {}))
    if isinstance(env_kw.get("view"), dict):
        env_kw["view"] = View(**env_kw["view"])
    return lambda: RetrievalEnv(kmap, encoder, **env_kw)


def main(argv: list[str] | None = None) -> int:
    """`[accelerate launch ...] python -m mmrag.train.grpo JOB.json`: run a GRPO job spec.

    JOB.json: {model_path, adapter, out_dir, checkpoints, questions (jsonl), image_texts and intents (optional
    lists, one per question), knowledge_map, text_encoder, env: {mode, k, budget, ...},
    settings: {GRPOSettings fields}}.
    """
    if not argv and len(sys.argv) > 1:
        argv = sys.argv[1:]
    if not argv:
        print(main.__doc__, file=sys.stderr)
        return 2
    job = json.loads(Path(argv[0]).read_text())
    settings = GRPOSettings(**{k: tuple(v) if isinstance(v, list) else v
                               for k, v in job.get("settings", {}).items()})
    intents = None
    if job.get("intents"):
        intents = [Intent(**d) if d else None for d in job["intents"]]
    result = train_grpo(job["model_path"], load_questions(job["questions"]), mmr2_env_factory(job),
                        job["out_dir"], settings, adapter=job.get("adapter"),
                        image_texts=job.get("image_texts"), intents=intents,
                        device=job.get("device", "auto"), checkpoints=job["checkpoints"])
    write_json(Path(job["out_dir"]) / "grpo_result.json", asdict(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
