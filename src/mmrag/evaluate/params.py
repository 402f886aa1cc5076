"""The evaluator's sections: both axes over every system's traces (`two_axis_eval`) and the claims
and headline tables (`report`).

Each field's comment is the key's only documentation (params.yaml says which value is used)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mmrag.params import model, rng


@dataclass(frozen=True)
class TwoAxisEval:
    """Both evaluation axes for every system's traces; the MM-R2 tables and the cross-system table."""

    corpus: str
    question_set: str  # MM-R2's set (its test_unseen_entity/question splits)
    splits: tuple[str, ...]
    per_split: int = field(metadata=rng(ge=1))  # questions per split, seeded
    descriptive_per_split: int = field(metadata=rng(ge=1))  # reader ceilings and budget sweep
    # the agentic-loop claim's pair (full MM-R2, single-shot intent + KM routing) reads this many per
    # split (per_split's questions first); below per_split: per_split
    claim_per_split: int = field(metadata=rng(ge=1))
    k: int = field(metadata=rng(ge=1))  # passages per search (as in training)
    budgets: tuple[int, ...]  # passages per search for the budget table
    max_turns: int = field(metadata=rng(ge=1))
    max_new_tokens: int = field(metadata=rng(ge=8))
    engine: Literal["llamacpp", "hf", "openai"]  # the policies' and the LLM judge's engine
    recall_k: tuple[int, ...]
    # other systems' traces: data/<stage>/traces/<system>__<set>.jsonl
    trace_stages: tuple[str, ...]
    cross_per_set: int = field(metadata=rng(ge=1))  # flat baseline questions per set
    # the text-only part on the real Wikipedia corpus (its own KnowledgeMap); 0 questions: skip
    text_corpus: str
    text_question_set: str
    text_questions: int = field(metadata=rng(ge=0))
    judge: Literal["proxy", "llm"]  # llm: a ladder model through the generation service (or judge_base_url)
    judge_base_url: str
    judge_model: str = field(metadata=model("llm", when=lambda s: s.judge == "llm" and not s.judge_base_url))
    judge_questions: int = field(metadata=rng(ge=1))  # the LLM judge scores this many of the sample (seeded)
    judge_check_questions: int = field(metadata=rng(ge=0))  # dev questions x 3 labelled traces: agreement
    fidelity: bool
    # below this many correct full answers Acc(summary)/Acc(full) is undefined (None), not 1/1
    fidelity_min_correct: int = field(metadata=rng(ge=1))



@dataclass(frozen=True)
class Report:
    """The repository's own paper: every headline table from the stages' metrics."""

    headline_digits: int = field(metadata=rng(ge=1, le=6))
    # the claims table (mmrag.evaluate.claims): two-sided level, power for n-needed, resamples
    alpha: float = field(metadata=rng(gt=0, lt=0.5))
    power: float = field(metadata=rng(gt=0.5, lt=1))
    bootstrap: int = field(metadata=rng(ge=100))
    # a stability claim (BRIT's knob sensitivity) is reproduced when its 95 % CI lies within +-margin
    stability_margin: float = field(metadata=rng(gt=0, lt=1))
    # a strategy contrast (DnC vs ToolsAnswer / mm-ReAct) is untestable here when an agent breaks the
    # dialogue format on at least this share of the questions: the verdict would read the format
    max_format_errors: float = field(metadata=rng(gt=0, le=1))
