"""MM-R2's sections: the KnowledgeMap (`knowledge_map`), trajectory synthesis (`mmr2_traj`) and
SFT then GRPO (`mmr2_train`).

Each field's comment is the key's only documentation (params.yaml says which value is used)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mmrag.params import model, rng


@dataclass(frozen=True)
class KnowledgeMap:
    """MM-R2 KnowledgeMap: passages, HDBSCAN configuration search, metadata, quality check."""

    corpora: tuple[str, ...]  # folders under data/
    max_docs: int = field(metadata=rng(ge=0))  # per corpus, seeded; 0 = all
    max_chars: int = field(metadata=rng(gt=0))
    chunk_chars: int = field(metadata=rng(gt=0))
    overlap: int = field(metadata=rng(ge=0))
    # the search grid: PCA dims (0 = none), min cluster size as a share of passages, ...
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
    # quality check
    qc_min_size_frac: float = field(metadata=rng(ge=0, lt=1))
    qc_max_share: float = field(metadata=rng(gt=0, le=1))
    qc_min_coherence: float = field(metadata=rng(ge=0, le=1))
    writer: str  # keywords (c-TF-IDF) | an LLM name (registry) for titles/descriptions
    engine: Literal["llamacpp", "hf", "openai"]  # the LLM writer's engine
    top_keywords: int = field(metadata=rng(ge=1))
    representatives: int = field(metadata=rng(ge=1))
    card_titles: int = field(metadata=rng(ge=0))  # page titles on each unit's card



@dataclass(frozen=True)
class Mmr2Traj:
    """MM-R2-Traj synthesis: executed teacher trajectories, filters, statistics."""

    corpus: str  # its KnowledgeMap must be among knowledge_map.corpora
    question_set: str
    max_questions: int = field(metadata=rng(ge=1))  # training questions used
    # share routed wrong first, then recovering; only where no unit card lists the referent
    wrong_route_frac: float = field(metadata=rng(ge=0, le=1))
    k: int = field(metadata=rng(ge=1))
    budget: int = field(metadata=rng(ge=1))
    val_frac: float = field(metadata=rng(ge=0, lt=1))
    # what the agent reads (the trained policy is evaluated with it): each passage cut to this
    # many characters, the query's sentences first (paper: whole 800-character chunks) ...
    passage_chars: int = field(metadata=rng(ge=40))
    unit_descriptions: bool  # ... and unit cards with their keyword descriptions (paper: yes)
    oracle_referent: bool  # true: the teacher binds each image to its gold entity
    # programmatic | an LLM (registry name, path, or a model served at teacher_base_url) that
    # rewrites the programmatic thoughts in its own words before the filters
    teacher: str
    teacher_base_url: str | None  # OpenAI-compatible endpoint for the teacher
    engine: Literal["llamacpp", "hf", "openai"]  # local teacher and zero-shot agent
    zero_shot_questions: int = field(metadata=rng(ge=0))  # the untrained policy's rollouts (demo)



@dataclass(frozen=True)
class Mmr2Train:
    """MM-R2 training: LoRA SFT on MM-R2-Traj, then GRPO with the retrieval tool in the loop."""

    corpus: str  # its KnowledgeMap and trajectories must exist
    question_set: str  # GRPO prompts: its train split
    # the policy LLM (a provisioned ladder name, a path, or a hub id in the paper profile): its own key,
    # so choosing the policy size reruns MM-R2's stages only, not `models` and everything after it
    policy: str = field(metadata=model("llm"))
    max_trajectories: int = field(metadata=rng(ge=0))  # 0: all of data/mmr2_traj
    # SFT (paper: 5,000 steps, batch 8, lr 5e-6 in the paper profile; sized for 2 CPU cores here)
    sft_max_steps: int = field(metadata=rng(ge=0))  # 0: sft_epochs decide
    sft_batch_size: int = field(metadata=rng(ge=1))
    sft_lr: float = field(metadata=rng(gt=0))
    sft_max_length: int = field(metadata=rng(ge=64))
    sft_epochs: float = field(metadata=rng(gt=0))  # sft_max_steps caps the run first
    sft_grad_accum: int = field(metadata=rng(ge=1))
    sft_warmup_ratio: float = field(metadata=rng(ge=0))
    sft_lora_dropout: float = field(metadata=rng(ge=0, lt=1))
    sft_quantize_4bit: bool  # QLoRA: 4-bit NF4 base weights (bitsandbytes)
    sft_gradient_checkpointing: bool
    sft_keep_checkpoints: bool  # after a finished run only the adapter is needed
    lora_r: int = field(metadata=rng(ge=1))  # SFT's LoRA; GRPO's only when it starts without one
    lora_alpha: int = field(metadata=rng(ge=1))
    target_modules: tuple[str, ...]  # LoRA target modules (SFT, and a GRPO LoRA started fresh)
    # GRPO (paper: 90 steps, batch 16, lr 5e-7)
    grpo_steps: int = field(metadata=rng(ge=1))
    grpo_prompts_per_step: int = field(metadata=rng(ge=1))
    group_size: int = field(metadata=rng(ge=2))
    temperature: float = field(metadata=rng(gt=0))
    top_p: float = field(metadata=rng(gt=0, le=1))
    grpo_lr: float = field(metadata=rng(gt=0))
    beta: float = field(metadata=rng(ge=0))
    grpo_loss_type: str  # TRL GRPOConfig.loss_type
    grpo_lora_dropout: float = field(metadata=rng(ge=0, lt=1))  # a GRPO LoRA started fresh
    route_weight: float = field(metadata=rng(ge=0))
    answer_weight: float = field(metadata=rng(ge=0))
    k: int = field(metadata=rng(ge=1))  # passages per search (retrieval budget)
    budget: int = field(metadata=rng(ge=1))  # searches per episode
    max_turns: int = field(metadata=rng(ge=1))
    turn_tokens: int = field(metadata=rng(ge=8))
    max_completion_tokens: int = field(metadata=rng(ge=32))
    grpo_micro_batch: int = field(metadata=rng(ge=1))  # episodes per backward (memory)
    save_steps: int = field(metadata=rng(ge=1))
    # python: in-process; accelerate: `accelerate launch --config_file <accelerate_config>`
    launcher: Literal["python", "accelerate"]
    accelerate_config: str
