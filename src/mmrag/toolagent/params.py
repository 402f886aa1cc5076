"""DnC's sections: teacher dialogues (`toolagent_data`), (Q)LoRA adapters (`toolagent_finetune`)
and the strategies on the test splits (`toolagent_eval`).

Each field's comment is the key's only documentation (params.yaml says which value is used)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mmrag.params import model, rng


@dataclass(frozen=True)
class ToolagentData:
    """Each strategy's teacher dialogues (stage toolagent_data)."""

    corpus: str
    question_sets: tuple[str, ...]
    # programmatic: the strategies' own programmatic teachers; llm: an LLM writes the dialogues
    # of teacher_questions train questions (kept when they pass the gold check) and the
    # programmatic ones fill in the rest; both: the LLM's kept dialogues are added to them
    teacher: Literal["programmatic", "llm", "both"]
    observations: Literal["gold", "tools"]  # the programmatic teachers' observations
    # the LLM teacher: a ladder name (engine llamacpp/hf) or a served model (openai)
    teacher_model: str = field(metadata=model(
        "llm", when=lambda s: s.teacher in ("llm", "both") and not s.teacher_base_url))
    engine: Literal["llamacpp", "hf", "openai"]  # the LLM teacher's engine
    teacher_base_url: str  # engine openai: an OpenAI-compatible server; the key comes from the env
    teacher_questions: int = field(metadata=rng(ge=0))  # train questions the LLM teacher attempts
    teacher_shots: int = field(metadata=rng(ge=0, le=32))
    teacher_max_new_tokens: int = field(metadata=rng(ge=8, le=512))
    max_tool_calls: int = field(metadata=rng(ge=1, le=50))
    examples_shown: int = field(metadata=rng(ge=0, le=20))



@dataclass(frozen=True)
class ToolagentFinetune:
    """One LoRA adapter per divider LLM and strategy, each on its own strategy's teacher
    dialogues at the same token budget (toolagent_finetune)."""

    llms: tuple[str, ...] = field(metadata=model("llm"))  # trained; evaluated zero-shot too on the held-out dialogues
    # held-out check only, untrained (e.g. a bigger ladder model)
    zero_shot_llms: tuple[str, ...] = field(metadata=model("llm"))
    strategies: tuple[str, ...]
    train_tokens: int = field(metadata=rng(ge=1))  # per adapter: the same budget for every strategy
    # share of multi-hop dialogues in each training sample; null: the test split's share of the
    # multi-hop question set (toolagent_data's summary.json)
    multi_hop_share: float | None = field(metadata=rng(ge=0, le=1))
    epochs: float = field(metadata=rng(gt=0))
    max_steps: int  # > 0 caps the run (smoke)
    batch_size: int = field(metadata=rng(ge=1))
    learning_rate: float = field(metadata=rng(gt=0))
    max_length: int = field(metadata=rng(ge=64))
    lora_r: int = field(metadata=rng(ge=1))
    lora_alpha: int = field(metadata=rng(ge=1))
    lora_dropout: float = field(metadata=rng(ge=0, lt=1))
    target_modules: tuple[str, ...]  # the Linear layers that get a LoRA adapter
    grad_accum: int = field(metadata=rng(ge=1))
    warmup_ratio: float = field(metadata=rng(ge=0, lt=1))  # learning-rate warm-up, a share of the steps
    quantize_4bit: bool  # QLoRA (bitsandbytes NF4), as in the paper, for every adapter
    # one LLM whose DnC adapter is trained a second time with the other setting (QLoRA vs
    # LoRA): loss, held-out EM, time and memory side by side; "" = no comparison
    qlora_compare: str
    gradient_checkpointing: bool  # off is ~20% faster on CPU for these sizes
    save_steps: int = field(metadata=rng(ge=1))
    keep_checkpoints: bool  # after a finished run only the adapter is needed
    heldout_dialogues: int = field(metadata=rng(ge=0))  # dev dialogues per strategy, teacher-forced check
    engine: Literal["llamacpp", "hf", "openai"]  # the held-out check's engine (+ exported LoRA)



@dataclass(frozen=True)
class ToolagentEval:
    """The paper's Tables 3 and 4: strategies x LLMs on the test splits (toolagent_eval)."""

    corpus: str
    llms: tuple[str, ...] = field(metadata=model("llm"))
    # other sizes for the size claim only: their fine-tuned DnC on question_set
    size_llms: tuple[str, ...] = field(metadata=model("llm"))
    # TextQA's retriever (DnC's paper: instructor-large); the rest use models.text_encoder
    text_encoder: str = field(metadata=model("text_encoder"))
    question_set: str  # data/<corpus>/questions/<set>.jsonl: the multi-hop set (Table 3)
    conv_set: str  # the conversational set (Table 4); "" = none
    n_mmqa: int = field(metadata=rng(ge=1))  # questions of question_set
    n_mmcoqa: int = field(metadata=rng(ge=0))  # turns of conv_set
    split: str
    # agents that also run on the base model (no adapter): dnc is the fine-tuning claim's control;
    # react base decides no claim of the paper
    base_strategies: tuple[Literal["react", "dnc"], ...]
    max_tool_calls: int = field(metadata=rng(ge=1, le=50))
    max_new_tokens: int = field(metadata=rng(ge=8, le=512))
    engine: Literal["llamacpp", "hf", "openai"]  # the dialogues' LLM
    ceiling_subquestions: int = field(metadata=rng(ge=1))
