"""The evaluator's sections: both axes over every system's traces (`two_axis_eval`) and the claims
and headline tables (`report`).

Each key's meaning is documented in params.yaml, the only place (here: types, ranges and model metadata)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mmrag.params import model, rng


@dataclass(frozen=True)
class TwoAxisEval:
    """Both evaluation axes for every system's traces; the MM-R2 tables and the cross-system table."""

    corpus: str
    question_set: str
    splits: tuple[str, ...]
    per_split: int = field(metadata=rng(ge=1))
    descriptive_per_split: int = field(metadata=rng(ge=1))
    claim_per_split: int = field(metadata=rng(ge=1))
    k: int = field(metadata=rng(ge=1))
    budgets: tuple[int, ...]
    max_turns: int = field(metadata=rng(ge=1))
    max_new_tokens: int = field(metadata=rng(ge=8))
    engine: Literal["llamacpp", "hf", "openai"]
    recall_k: tuple[int, ...]
    trace_stages: tuple[str, ...]
    cross_per_set: int = field(metadata=rng(ge=1))
    text_corpus: str
    text_question_set: str
    text_questions: int = field(metadata=rng(ge=0))
    judge: Literal["proxy", "llm"]
    judge_base_url: str
    judge_model: str = field(metadata=model("llm", when=lambda s: s.judge == "llm" and not s.judge_base_url))
    judge_questions: int = field(metadata=rng(ge=1))
    judge_check_questions: int = field(metadata=rng(ge=0))
    fidelity: bool
    fidelity_min_correct: int = field(metadata=rng(ge=1))
    ablation_router: Literal["embedding", "policy"]
    ablation_per_split: int = field(metadata=rng(ge=1))



@dataclass(frozen=True)
class Report:
    """The repository's own paper: every headline table from the stages' metrics."""

    headline_digits: int = field(metadata=rng(ge=1, le=6))
    alpha: float = field(metadata=rng(gt=0, lt=0.5))
    power: float = field(metadata=rng(gt=0.5, lt=1))
    bootstrap: int = field(metadata=rng(ge=100))
    stability_margin: float = field(metadata=rng(gt=0, lt=1))
    max_format_errors: float = field(metadata=rng(gt=0, le=1))
