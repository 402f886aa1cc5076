"""MM-R2's sections: the KnowledgeMap (`knowledge_map`), trajectory synthesis (`mmr2_traj`) and
SFT then GRPO (`mmr2_train`).

Each key's meaning is documented in params.yaml, the only place (here: types, ranges and model metadata)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mmrag.params import model, rng


@dataclass(frozen=True)
class KnowledgeMap:
    """MM-R2 KnowledgeMap: passages, HDBSCAN configuration search, metadata, quality check."""

    corpora: tuple[str, ...]
    max_docs: int = field(metadata=rng(ge=0))
    max_chars: int = field(metadata=rng(gt=0))
    chunk_chars: int = field(metadata=rng(gt=0))
    overlap: int = field(metadata=rng(ge=0))
    dims: tuple[int, ...]
    min_cluster_frac: tuple[float, ...]
    min_samples: tuple[int, ...]
    selection: tuple[Literal["eom", "leaf"], ...]
    min_units: int = field(metadata=rng(ge=2))
    max_units: int = field(metadata=rng(ge=2))
    w_coherence: float = field(metadata=rng(ge=0))
    w_balance: float = field(metadata=rng(ge=0))
    w_coverage: float = field(metadata=rng(ge=0))
    w_utility: float = field(metadata=rng(ge=0))
    dev_queries: int = field(metadata=rng(ge=1))
    k: int = field(metadata=rng(ge=1))
    qc_min_size_frac: float = field(metadata=rng(ge=0, lt=1))
    qc_max_share: float = field(metadata=rng(gt=0, le=1))
    qc_min_coherence: float = field(metadata=rng(ge=0, le=1))
    writer: str
    engine: Literal["llamacpp", "hf", "openai"]
    top_keywords: int = field(metadata=rng(ge=1))
    representatives: int = field(metadata=rng(ge=1))
    card_titles: int = field(metadata=rng(ge=0))



@dataclass(frozen=True)
class Mmr2Traj:
    """MM-R2-Traj synthesis: executed teacher trajectories, filters, statistics."""

    corpus: str
    question_set: str
    max_questions: int = field(metadata=rng(ge=1))
    wrong_route_frac: float = field(metadata=rng(ge=0, le=1))
    miss_then_hit_frac: float = field(metadata=rng(ge=0, le=1))
    k: int = field(metadata=rng(ge=1))
    budget: int = field(metadata=rng(ge=1))
    val_frac: float = field(metadata=rng(ge=0, lt=1))
    passage_chars: int = field(metadata=rng(ge=40))
    unit_descriptions: bool
    oracle_referent: bool
    teacher: str
    teacher_base_url: str | None
    engine: Literal["llamacpp", "hf", "openai"]
    zero_shot_questions: int = field(metadata=rng(ge=0))



@dataclass(frozen=True)
class Mmr2Train:
    """MM-R2 training: LoRA SFT on MM-R2-Traj, then GRPO with the retrieval tool in the loop."""

    corpus: str
    question_set: str
    policy: str = field(metadata=model("llm"))
    max_trajectories: int = field(metadata=rng(ge=0))
    sft_max_steps: int = field(metadata=rng(ge=0))
    sft_batch_size: int = field(metadata=rng(ge=1))
    sft_lr: float = field(metadata=rng(gt=0))
    sft_max_length: int = field(metadata=rng(ge=64))
    sft_epochs: float = field(metadata=rng(gt=0))
    sft_grad_accum: int = field(metadata=rng(ge=1))
    sft_warmup_ratio: float = field(metadata=rng(ge=0))
    sft_lora_dropout: float = field(metadata=rng(ge=0, lt=1))
    sft_quantize_4bit: bool
    sft_gradient_checkpointing: bool
    sft_keep_checkpoints: bool
    lora_r: int = field(metadata=rng(ge=1))
    lora_alpha: int = field(metadata=rng(ge=1))
    target_modules: tuple[str, ...]
    grpo_steps: int = field(metadata=rng(ge=1))
    grpo_prompts_per_step: int = field(metadata=rng(ge=1))
    group_size: int = field(metadata=rng(ge=2))
    temperature: float = field(metadata=rng(gt=0))
    top_p: float = field(metadata=rng(gt=0, le=1))
    grpo_lr: float = field(metadata=rng(gt=0))
    beta: float = field(metadata=rng(ge=0))
    grpo_loss_type: str
    grpo_lora_dropout: float = field(metadata=rng(ge=0, lt=1))
    route_weight: float = field(metadata=rng(ge=0))
    answer_weight: float = field(metadata=rng(ge=0))
    k: int = field(metadata=rng(ge=1))
    budget: int = field(metadata=rng(ge=1))
    max_turns: int = field(metadata=rng(ge=1))
    turn_tokens: int = field(metadata=rng(ge=8))
    max_completion_tokens: int = field(metadata=rng(ge=32))
    grpo_micro_batch: int = field(metadata=rng(ge=1))
    save_steps: int = field(metadata=rng(ge=1))
    launcher: Literal["python", "accelerate"]
    accelerate_config: str
