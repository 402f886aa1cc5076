"""MM-R2 as a :class:`mmrag.systems.System`: the trained routing agent over a KnowledgeMap.

Wraps :func:`mmrag.mmr2.agent.run_agent` (episodes in lockstep, greedy turns, one
:class:`~mmrag.mmr2.agent.RetrievalEnv` per question) behind ``answer(questions)``, so the
two-axis evaluation runs MM-R2 the way it runs every other system.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mmrag.mmr2.agent import RetrievalEnv, run_agent
from mmrag.mmr2.knowledge_map import KnowledgeMap
from mmrag.schema import Question, Trace


class MMR2Agent:
    """A policy (``llm``) that routes, searches, summarises and answers over ``kmap``.

    ``intents`` and ``image_texts`` map a question id to Φ's binding and the image as text
    (absent: none); ``k`` passages per search, ``budget`` searches, ``max_turns`` turns of at most
    ``max_new_tokens`` each; ``mode`` is routed (per-unit indexes), flat or parametric.
    """

    def __init__(self, name: str, llm: Any, kmap: KnowledgeMap | None, encoder: Any, *, k: int,
                 budget: int, max_turns: int, max_new_tokens: int, mode: str = "routed",
                 intents: Mapping[str, Any] | None = None,
                 image_texts: Mapping[str, str | None] | None = None):
        self.name, self.llm, self.kmap, self.encoder = name, llm, kmap, encoder
        self.k, self.budget, self.max_turns, self.max_new_tokens = k, budget, max_turns, max_new_tokens
        self.mode, self.intents, self.image_texts = mode, intents, image_texts

    def env(self) -> RetrievalEnv:
        """A fresh retrieval environment for one episode."""
        return RetrievalEnv(self.kmap, self.encoder, mode=self.mode, k=self.k, budget=self.budget)

    def answer(self, questions: Sequence[Question]) -> list[Trace]:
        """One trace per question, in order (episodes batched through the policy)."""
        image_texts = ([self.image_texts.get(q.id) for q in questions]
                       if self.image_texts is not None else None)
        intents = [self.intents.get(q.id) for q in questions] if self.intents is not None else None
        return run_agent(self.llm, self.env, questions, system=self.name, image_texts=image_texts,
                         intents=intents, max_turns=self.max_turns, max_new_tokens=self.max_new_tokens)
