"""The three DnC-paper strategies as systems: an LLM and a set of tools that answer questions.

Each is a :class:`mmrag.systems.System` (``name``, ``answer(questions) -> list[Trace]``), so the
two-axis evaluator and any benchmark script can run them like every other system::

    system = DnC(llm, tools, name="dnc__smollm2__ft", max_calls=12, max_new_tokens=72)
    traces = system.answer(questions)

The strategies themselves live in :mod:`mmrag.toolagent.strategies`; these classes only bind
an LLM, the tools and the generation limits to them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mmrag.schema import Question, Trace
from mmrag.toolagent import strategies


class ToolsAnswer:
    """ToolsAnswer: every tool answers the whole question, the LLM fuses their answers."""

    strategy = "tools_answer"

    def __init__(self, llm: Any, tools: dict[str, Any], name: str = "tools_answer"):
        self.llm, self.tools, self.name = llm, tools, name

    def answer(self, questions: Sequence[Question]) -> list[Trace]:
        """One trace per question: the tool answers and the LLM's fusion of them."""
        return strategies.run_tools_answer(questions, self.llm, self.tools, self.name)


class _Agent:
    """An LLM that calls tools turn by turn (the strategy's dialogue format, a tool-call cap)."""

    strategy = ""

    def __init__(self, llm: Any, tools: dict[str, Any], name: str = "", *, max_calls: int,
                 max_new_tokens: int):
        self.llm, self.tools, self.name = llm, tools, name or self.strategy
        self.max_calls, self.max_new_tokens = max_calls, max_new_tokens

    def answer(self, questions: Sequence[Question]) -> list[Trace]:
        """One trace per question: the whole dialogue, its tool calls and its final answer."""
        return strategies.run_agent(self.strategy, questions, self.llm, self.tools, self.name,
                                    max_calls=self.max_calls, max_new_tokens=self.max_new_tokens)


class ReAct(_Agent):
    """mm-ReAct: thought, action (a tool call), observation, until a final answer."""

    strategy = "react"


class DnC(_Agent):
    """DnC: the divider asks one unimodal single-hop sub-question per tool call."""

    strategy = "dnc"


STRATEGIES: dict[str, type] = {"tools_answer": ToolsAnswer, "react": ReAct, "dnc": DnC}
