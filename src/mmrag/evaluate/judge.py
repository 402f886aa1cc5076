"""Process-level judging of a trace: is the answer consistent with the trace, supported by its evidence?

MM-R2 scores both with an LLM judge (GPT-4o). Two judges implement one interface here:

- :class:`LLMJudge` asks any chat backend (``models.llm.OpenAIChat`` in the paper profile, or a
  local model) with the rubric below and parses two scores in [0, 1];
- :class:`LexicalJudge`, the default, is a **deterministic proxy, not an LLM judge**: *support*
  is how much of the (normalised) answer appears in the retrieved evidence, *consistency* how
  much of it appears in the reasoning the trace exposed (summaries and thoughts; the answer
  step, format-error turns and summaries that merely restate the answer excluded; an answer
  with only format-error turns behind it is rated 0). It cannot see paraphrase or contradiction, so it under-rates
  paraphrased support and over-rates an answer that merely echoes a retrieved word. Every table
  that shows its numbers names it (``LexicalJudge.name``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Protocol

from mmrag.evaluate.metrics import SYSTEM_ACTIONS, normalize, resolved_answer
from mmrag.schema import Question, Trace

STOPWORDS = frozenset(
    "a an the of in on at to for by with from and or is are was were be been it its this that "
    "these those as which who whom what when where how why do does did has have had not no".split())
_ANSWER_TAG = re.compile(r"<answer>.*?(</answer>|$)", re.S)
_TAG = re.compile(r"</?[a-z_]+>")

RUBRIC = """You are grading the reasoning trace of a retrieval-augmented question-answering agent.
You see the question, the evidence the agent retrieved, the reasoning it exposed (its thoughts
and its summaries of the evidence) and its final answer. Give two scores:

consistency: 1 if the final answer follows from the exposed reasoning and nothing in the
reasoning contradicts it; 0.5 if the reasoning is related but does not reach this answer, or
reaches it only partly; 0 if the reasoning contradicts the answer or is unrelated to it.
support: 1 if the retrieved evidence states the facts the answer needs; 0.5 if it states some
of them; 0 if it states none.

Reply with JSON only: {"consistency": <0|0.5|1>, "support": <0|0.5|1>}"""


class Judge(Protocol):
    name: str

    def judge(self, items: Sequence[tuple[Question, Trace]]) -> list[tuple[float | None, float | None]]:
        """(consistency, support) per (question, trace); None where it cannot be judged."""
        ...


def content_tokens(text: str) -> list[str]:
    """Normalised tokens without stopwords: what an answer has to be supported on."""
    return [t for t in normalize(text).split() if t not in STOPWORDS]


def lexical_support(answer: str, texts: Sequence[str]) -> float:
    """1 when the answer appears verbatim (normalised) in the texts, else its content-token recall."""
    ans = normalize(answer)
    if not ans:
        return 0.0
    body = normalize(" ".join(texts))
    if re.search(rf"(?:^|\s){re.escape(ans)}(?:\s|$)", body):
        return 1.0
    need = content_tokens(answer)
    if not need:
        return 0.0
    have = set(body.split())
    return sum(t in have for t in need) / len(need)


def exposed_reasoning(trace: Trace) -> list[str]:
    """Summaries and thoughts the trace shows: answer tags, the answer step's text, format-error
    turns and summaries that only restate the final answer are removed (they would make any answer look
    consistent with itself)."""
    answer = normalize(trace.answer)
    texts = [s.summary for s in trace.steps
             if s.summary and s.summary.strip() and s.action not in SYSTEM_ACTIONS
             and not s.format_error and normalize(s.summary) != answer]
    for s in trace.steps:
        if s.action == "answer" or not s.text or s.format_error:
            continue
        text = _TAG.sub(" ", _ANSWER_TAG.sub(" ", s.text))
        if s.summary:
            text = text.replace(s.summary, " ")
        if text.strip():
            texts.append(text)
    return texts


class LexicalJudge:
    """Deterministic, model-free proxy of the LLM judge (see the module docstring)."""

    name = "lexical proxy (not an LLM judge)"

    def judge(self, items: Sequence[tuple[Question, Trace]]) -> list[tuple[float | None, float | None]]:
        out = []
        for question, trace in items:
            answer = resolved_answer(trace.answer, question)
            reasoning = exposed_reasoning(trace)
            evidence = [e.content for e in trace.evidence() if e.content]
            garbled = any(s.format_error for s in trace.steps) or trace.format_errors > 0
            consistency = (lexical_support(answer, reasoning) if reasoning
                           else 0.0 if garbled and trace.answer.strip() else None)
            out.append((consistency, lexical_support(answer, evidence) if evidence else 0.0))
        return out


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + " ..."


def judge_prompt(question: Question, trace: Trace, max_chars: int = 1200) -> list[dict]:
    """The chat messages sent to an LLM judge for one trace."""
    evidence = "\n".join(f"- {_clip(e.content, 300)}" for e in trace.evidence() if e.content)
    reasoning = "\n".join(f"- {_clip(t, 300)}" for t in exposed_reasoning(trace))
    user = (f"Question: {question.text}\n"
            + (f"Choices: {'; '.join(question.choices)}\n" if question.choices else "")
            + f"Retrieved evidence:\n{_clip(evidence, max_chars) or '(none)'}\n"
            f"Exposed reasoning:\n{_clip(reasoning, max_chars) or '(none)'}\n"
            f"Final answer: {trace.answer}")
    return [{"role": "system", "content": RUBRIC}, {"role": "user", "content": user}]


def parse_scores(text: str) -> tuple[float | None, float | None]:
    """Two scores from a judge reply (JSON, or `consistency: x` lines); None when absent."""
    m = re.search(r"\{.*?\}", text, re.S)
    found: dict[str, float] = {}
    if m:
        try:
            found = {k: float(v) for k, v in json.loads(m.group(0)).items()
                     if k in ("consistency", "support")}
        except (ValueError, TypeError, AttributeError):
            found = {}
    for key in ("consistency", "support"):
        if key not in found:
            hit = re.search(rf"{key}\W+(\d+(?:\.\d+)?)", text, re.I)
            if hit:
                found[key] = float(hit.group(1))
    return tuple(min(1.0, max(0.0, found[k])) if k in found else None  # type: ignore[return-value]
                 for k in ("consistency", "support"))


class LLMJudge:
    """An LLM judge through any ``models.llm`` backend (GPT-4o via OpenAIChat in the paper profile)."""

    def __init__(self, llm, max_new_tokens: int = 48):
        self.llm, self.max_new_tokens = llm, max_new_tokens
        self.name = f"LLM judge ({llm.name})"

    def judge(self, items: Sequence[tuple[Question, Trace]]) -> list[tuple[float | None, float | None]]:
        prompts = [judge_prompt(q, t) for q, t in items]
        replies = self.llm.generate(prompts, max_new_tokens=self.max_new_tokens, temperature=0.0)
        return [parse_scores(r.text) for r in replies]


class SampledJudge:
    """A judge applied to some questions only (the LLM judge's cost on CPU): the others get no
    score (None), so a summary's judge means are over the judged questions (judged_*_n says how
    many)."""

    def __init__(self, inner: Judge, question_ids: Sequence[str]):
        self.inner, self.ids = inner, set(question_ids)
        self.name = f"{inner.name}, {len(self.ids)} questions"

    def judge(self, items: Sequence[tuple[Question, Trace]]) -> list[tuple[float | None, float | None]]:
        chosen = [i for i, (q, _) in enumerate(items) if q.id in self.ids]
        verdicts = self.inner.judge([items[i] for i in chosen]) if chosen else []
        out: list[tuple[float | None, float | None]] = [(None, None)] * len(items)
        for i, v in zip(chosen, verdicts):
            out[i] = v
        return out
