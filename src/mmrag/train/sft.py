"""Supervised fine-tuning of a causal chat LM with LoRA on chat conversations, loss on assistant turns only.

Shared by DnC (divider dialogues, tool answers masked) and MM-R2 (trajectories, ``<information>``
observations masked): any message whose role is not ``assistant`` is context, never a target.

Why a custom chat template: TRL's ``assistant_only_loss`` needs ``{% generation %}`` markers in
the template, which SmolLM2's ChatML template lacks (and Gemma-3 base has no template at all).
:func:`marked_template` gives an equivalent template with the assistant content and its
end-of-turn token wrapped in the markers; for SmolLM2 it renders byte-identical to the original
(a test proves it), so the model is trained on exactly what it sees at inference.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from mmrag.io import atomic_path
from mmrag.train.checkpoints import claim, last_checkpoint, release
from mmrag.train.progress import console_progress

Message = dict[str, Any]
Conversation = list[Message]

SMOL_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

# ChatML with generation markers (SmolLM2, Qwen-style).  The `default_system` line reproduces
# the original template's implicit system message.
_CHATML = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' and default_system %}"
    "{{ '<|im_start|>system\\n' + default_system + '<|im_end|>\\n' }}{% endif %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' }}{% generation %}{{ message['content'] + '<|im_end|>' }}"
    "{% endgeneration %}{{ '\\n' }}"
    "{% else %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
# Gemma turn format (Gemma-3 base ships no template); non-assistant roles map to `user`.
_GEMMA = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<start_of_turn>model\\n' }}{% generation %}{{ message['content'] + '<end_of_turn>' }}"
    "{% endgeneration %}{{ '\\n' }}"
    "{% else %}{{ '<start_of_turn>user\\n' + message['content'] + '<end_of_turn>\\n' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)


class SFTError(ValueError):
    """Training input that cannot be used; the message names the fix."""


def marked_template(tokenizer: Any) -> str:
    """A chat template equivalent to the tokenizer's, with assistant turns in generation markers."""
    current = getattr(tokenizer, "chat_template", None) or ""
    if "{% generation %}" in current:
        return current
    if "<|im_start|>" in current:
        system = SMOL_SYSTEM if SMOL_SYSTEM in current else ""
        return "{% set default_system = " + json.dumps(system) + " %}" + _CHATML
    if not current and "<start_of_turn>" in tokenizer.get_vocab():
        return _GEMMA
    if not current:
        return "{% set default_system = '' %}" + _CHATML
    raise SFTError("sft: this tokenizer's chat template is neither ChatML nor absent; give it a "
                   "template with {% generation %}...{% endgeneration %} around assistant content "
                   "(see trl.chat_template_utils) before training.")


def plain_template(tokenizer: Any) -> str:
    """The inference template: the marked one without the markers (renders identically)."""
    return marked_template(tokenizer).replace("{% generation %}", "").replace(
        "{% endgeneration %}", "")


def stop_token_ids(tokenizer: Any) -> list[int]:
    """Token ids that end an assistant turn under :func:`marked_template` (for generation)."""
    ids = [tokenizer.eos_token_id]
    for tok in ("<|im_end|>", "<end_of_turn>"):
        tid = tokenizer.get_vocab().get(tok)
        if tid is not None:
            ids.append(tid)
    return sorted({i for i in ids if i is not None})


@dataclass(frozen=True)
class SFTSettings:
    """Hyper-parameters of one LoRA SFT run. No defaults: each stage builds them from its params
    section (params.yaml is the only home of a default), passing every field."""

    epochs: float
    max_steps: int  # > 0 caps the run (smoke profile); -1: epochs decide
    batch_size: int
    grad_accum: int
    learning_rate: float
    warmup_ratio: float  # passed as TRL warmup_steps: below 1 it is a ratio of the run
    max_length: int
    lora_r: int
    lora_alpha: int
    lora_dropout: float
    target_modules: tuple[str, ...]
    quantize_4bit: bool  # QLoRA: 4-bit NF4 base weights via bitsandbytes
    gradient_checkpointing: bool  # off is ~20% faster on CPU for these sizes
    save_steps: int  # checkpoint every N steps so an interrupted run resumes
    keep_checkpoints: bool  # after a finished run only the adapter is needed
    seed: int


@dataclass
class SFTResult:
    adapter_dir: str
    steps: int
    epochs: float
    seconds: float
    train_tokens: int
    final_loss: float | None
    resumed_from: str | None
    loss_csv: str
    settings: dict[str, Any] = field(default_factory=dict)


def check_conversations(conversations: list[Conversation]) -> list[Conversation]:
    """Keep well-formed conversations; raise if none has an assistant turn to learn from."""
    good = []
    for i, conv in enumerate(conversations):
        if not isinstance(conv, list) or not all(
                isinstance(m, dict) and isinstance(m.get("content"), str) and m.get("role")
                for m in conv):
            raise SFTError(f"sft: conversation {i} is not a list of {{role, content: str}} messages")
        if any(m["role"] == "assistant" for m in conv):
            good.append([{"role": m["role"], "content": m["content"]} for m in conv])
    if not good:
        raise SFTError("sft: no conversation has an assistant turn; nothing to train on")
    return good


def load_base(model_path: str, quantize_4bit: bool, device: str) -> tuple[Any, Any]:
    """(model, tokenizer) with the marked chat template, optionally 4-bit quantized (QLoRA)."""
    # heavy: torch and transformers import in seconds; only training needs them
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path)
    tok.chat_template = marked_template(tok)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    kwargs: dict[str, Any] = {"dtype": torch.float32}
    if quantize_4bit:
        from transformers import BitsAndBytesConfig  # heavy: only QLoRA needs it

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.float32)
        kwargs["device_map"] = {"": device if device != "auto" else 0}
    model = AutoModelForCausalLM.from_pretrained(model_path, **kwargs)
    if quantize_4bit:
        from peft import prepare_model_for_kbit_training  # heavy: peft imports torch and transformers

        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    return model, tok


def build_trainer(model: Any, tokenizer: Any, conversations: list[Conversation], out_dir: str | Path,
                  settings: SFTSettings, use_cpu: bool = True) -> Any:
    """A TRL SFTTrainer with LoRA and assistant-only loss over ``conversations``."""
    # heavy: datasets, peft and trl import torch and transformers (seconds); only training needs them
    from datasets import Dataset
    from peft import LoraConfig
    from trl import SFTConfig, SFTTrainer

    if "{% generation %}" not in (tokenizer.chat_template or ""):
        tokenizer.chat_template = marked_template(tokenizer)
    convs = check_conversations(conversations)
    cfg = SFTConfig(
        output_dir=str(out_dir), num_train_epochs=settings.epochs, max_steps=settings.max_steps,
        per_device_train_batch_size=settings.batch_size,
        gradient_accumulation_steps=settings.grad_accum, learning_rate=settings.learning_rate,
        warmup_steps=settings.warmup_ratio, lr_scheduler_type="linear",
        max_length=settings.max_length, assistant_only_loss=True, packing=False,
        gradient_checkpointing=settings.gradient_checkpointing, use_cpu=use_cpu,
        bf16=False, fp16=False, report_to="none", logging_steps=1,
        save_strategy="steps", save_steps=settings.save_steps, save_total_limit=1,
        seed=settings.seed, data_seed=settings.seed, dataloader_num_workers=0,
        disable_tqdm=True, dataset_num_proc=None)
    lora = LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha,
                      lora_dropout=settings.lora_dropout,
                      target_modules=list(settings.target_modules), task_type="CAUSAL_LM")
    return SFTTrainer(model=model, args=cfg, train_dataset=Dataset.from_list(
        [{"messages": c} for c in convs]), processing_class=tokenizer, peft_config=lora,
        callbacks=[console_progress("sft")])


def write_loss_csv(log_history: list[dict[str, Any]], path: str | Path) -> Path:
    """The training curve (step, epoch, loss, learning rate) as CSV."""
    with atomic_path(path) as tmp, tmp.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["step", "epoch", "loss", "learning_rate", "grad_norm"])
        for row in log_history:
            if "loss" in row:
                w.writerow([row.get("step"), round(row.get("epoch", 0.0), 4),
                            round(row["loss"], 5), row.get("learning_rate"),
                            round(row["grad_norm"], 4) if row.get("grad_norm") is not None else ""])
    return Path(path)


def train_sft(model_path: str, conversations: list[Conversation], out_dir: str | Path,
              settings: SFTSettings, *, device: str, checkpoints: str | Path,
              log: Callable[[str], None] = print) -> SFTResult:
    """Fine-tune ``model_path`` with LoRA on ``conversations``; save the adapter in out_dir/adapter.

    Checkpoints go to ``checkpoints`` (outside the stage's outputs: see train.checkpoints); an
    interrupted run of the same model, data and settings resumes from the newest one.
    """
    import torch  # heavy: torch imports in seconds; only training needs it

    torch.manual_seed(settings.seed)
    out_dir = Path(out_dir)
    ckpt_dir = claim(checkpoints, fingerprint(model_path, conversations, settings), log)
    model, tok = load_base(model_path, settings.quantize_4bit, device)
    use_cpu = device == "cpu" or not torch.cuda.is_available()
    trainer = build_trainer(model, tok, conversations, ckpt_dir, settings, use_cpu=use_cpu)
    n_tokens = int(sum(len(x) for x in trainer.train_dataset["input_ids"]))
    last = last_checkpoint(ckpt_dir)
    if last:
        log(f"sft: resuming from {last}")
    t0 = time.time()
    trainer.train(resume_from_checkpoint=last)
    seconds = time.time() - t0
    adapter = out_dir / "adapter"
    trainer.model.save_pretrained(str(adapter))
    tok.chat_template = plain_template(tok)
    tok.save_pretrained(str(adapter))
    loss_csv = write_loss_csv(trainer.state.log_history, out_dir / "loss.csv")
    losses = [r["loss"] for r in trainer.state.log_history if "loss" in r]
    release(ckpt_dir, settings.keep_checkpoints)
    result = SFTResult(adapter_dir=str(adapter), steps=int(trainer.state.global_step),
                       epochs=float(trainer.state.epoch or 0.0), seconds=round(seconds, 1),
                       train_tokens=n_tokens, final_loss=losses[-1] if losses else None,
                       resumed_from=last, loss_csv=str(loss_csv), settings=asdict(settings))
    return result


def fingerprint(model_path: str, conversations: list[Conversation], settings: SFTSettings) -> str:
    """What a checkpoint belongs to: resuming is only safe for the same model, data and settings."""
    blob = json.dumps({"model": str(model_path), "data": conversations,
                       "settings": {k: v for k, v in asdict(settings).items()
                                    if k not in ("max_steps", "save_steps", "keep_checkpoints")}},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def label_mask_report(trainer: Any, n: int = 1) -> list[dict[str, Any]]:
    """For the first n training examples: the text that is trained on vs the text that is masked."""
    tok = trainer.processing_class
    batch = next(iter(trainer.get_train_dataloader()))
    out = []
    for ids, labels in list(zip(batch["input_ids"], batch["labels"]))[:n]:
        keep = [int(i) for i, label in zip(ids, labels) if int(label) != -100]
        drop = [int(i) for i, label in zip(ids, labels) if int(label) == -100 and int(i) != tok.pad_token_id]
        out.append({"trained": tok.decode(keep), "masked": tok.decode(drop)})
    return out


def steps_per_epoch(n_conversations: int, settings: SFTSettings) -> int:
    """Optimizer steps in one epoch (for sizing a run)."""
    return math.ceil(n_conversations / (settings.batch_size * settings.grad_accum))
