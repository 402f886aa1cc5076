"""DnC's sections: teacher dialogues (`toolagent_data`), (Q)LoRA adapters (`toolagent_finetune`)
and the strategies on the test splits (`toolagent_eval`).

Each key's meaning is documented in params.yaml, the only place (here: types, ranges and model metadata)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mmrag.params import model, rng


@dataclass(frozen=True)
class ToolagentData:
    """Each strategy's teacher dialogues (stage toolagent_data)."""

    corpus: str
    question_sets: tuple[str, ...]
    teacher: Literal["programmatic", "llm", "both"]
    observations: Literal["gold", "tools"]
    teacher_model: str = field(metadata=model(
        "llm", when=lambda s: s.teacher in ("llm", "both") and not s.teacher_base_url))
    engine: Literal["llamacpp", "hf", "openai"]
    teacher_base_url: str
    teacher_questions: int = field(metadata=rng(ge=0))
    teacher_shots: int = field(metadata=rng(ge=0, le=32))
    teacher_max_new_tokens: int = field(metadata=rng(ge=8, le=512))
    max_tool_calls: int = field(metadata=rng(ge=1, le=50))
    examples_shown: int = field(metadata=rng(ge=0, le=20))



@dataclass(frozen=True)
class ToolagentFinetune:
    """One LoRA adapter per divider LLM and strategy, each on its own strategy's teacher
    dialogues at the same token budget (toolagent_finetune)."""

    llms: tuple[str, ...] = field(metadata=model("llm"))
    zero_shot_llms: tuple[str, ...] = field(metadata=model("llm"))
    strategies: tuple[str, ...]
    seeds: tuple[int, ...]
    seed_llms: tuple[str, ...] = field(metadata=model("llm"))
    train_tokens: int = field(metadata=rng(ge=1))
    multi_hop_share: float | None = field(metadata=rng(ge=0, le=1))
    epochs: float = field(metadata=rng(gt=0))
    max_steps: int
    batch_size: int = field(metadata=rng(ge=1))
    learning_rate: float = field(metadata=rng(gt=0))
    max_length: int = field(metadata=rng(ge=64))
    lora_r: int = field(metadata=rng(ge=1))
    lora_alpha: int = field(metadata=rng(ge=1))
    lora_dropout: float = field(metadata=rng(ge=0, lt=1))
    target_modules: tuple[str, ...]
    grad_accum: int = field(metadata=rng(ge=1))
    warmup_ratio: float = field(metadata=rng(ge=0, lt=1))
    quantize_4bit: bool
    qlora_compare: str
    gradient_checkpointing: bool
    save_steps: int = field(metadata=rng(ge=1))
    keep_checkpoints: bool
    heldout_dialogues: int = field(metadata=rng(ge=0))
    engine: Literal["llamacpp", "hf", "openai"]



@dataclass(frozen=True)
class ToolagentEval:
    """The paper's Tables 3 and 4: strategies x LLMs on the test splits (toolagent_eval)."""

    corpus: str
    llms: tuple[str, ...] = field(metadata=model("llm"))
    size_llms: tuple[str, ...] = field(metadata=model("llm"))
    text_encoder: str = field(metadata=model("text_encoder"))
    question_set: str
    conv_set: str
    n_mmqa: int = field(metadata=rng(ge=1))
    n_mmcoqa: int = field(metadata=rng(ge=0))
    split: str
    base_strategies: tuple[Literal["react", "dnc"], ...]
    max_tool_calls: int = field(metadata=rng(ge=1, le=50))
    max_new_tokens: int = field(metadata=rng(ge=8, le=512))
    engine: Literal["llamacpp", "hf", "openai"]
    ceiling_subquestions: int = field(metadata=rng(ge=1))
