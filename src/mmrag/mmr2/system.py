"""MM-R2 as a :class:`mmrag.systems.System`: the trained routing agent over a KnowledgeMap.

Wraps :func:`mmrag.mmr2.agent.run_agent` (episodes in lockstep groups sized by the engine,
greedy turns, one :class:`~mmrag.mmr2.agent.RetrievalEnv` per question) behind
``answer(questions)``, so the two-axis evaluation runs MM-R2 the way it runs every other system.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mmrag.mmr2.agent import PAPER_VIEW, RetrievalEnv, View, run_agent
from mmrag.mmr2.knowledge_map import KnowledgeMap
from mmrag.mmr2.trajectories import THINK_ROUTE, query_for, search_turn
from mmrag.schema import Question, Trace


class MMR2Agent:
    """A policy (``llm``) that routes, searches, summarises and answers over ``kmap``.

    ``intents`` and ``image_texts`` map a question id to Φ's binding and the image as text
    (absent: none); ``k`` passages per search, ``budget`` searches, ``max_turns`` turns of at most
    ``max_new_tokens`` each; ``mode`` is routed (per-unit indexes), flat or parametric; ``view``
    is what the policy was trained to read (passage length, unit cards); ``router`` who picks a
    search's unit in routed mode (:data:`mmrag.mmr2.agent.ROUTERS`).
    """

    def __init__(self, name: str, llm: Any, kmap: KnowledgeMap | None, encoder: Any, *, k: int,
                 budget: int, max_turns: int, max_new_tokens: int, mode: str = "routed",
                 intents: Mapping[str, Any] | None = None,
                 image_texts: Mapping[str, str | None] | None = None, view: View = PAPER_VIEW,
                 router: str = "policy"):
        self.name, self.llm, self.kmap, self.encoder = name, llm, kmap, encoder
        self.k, self.budget, self.max_turns, self.max_new_tokens = k, budget, max_turns, max_new_tokens
        self.mode, self.intents, self.image_texts, self.view = mode, intents, image_texts, view
        self.router = router

    def env(self) -> RetrievalEnv:
        """A fresh retrieval environment for one episode."""
        return RetrievalEnv(self.kmap, self.encoder, mode=self.mode, k=self.k, budget=self.budget,
                            view=self.view, router=self.router)

    def answer(self, questions: Sequence[Question]) -> list[Trace]:
        """One trace per question, in order (episodes batched through the policy)."""
        image_texts = ([self.image_texts.get(q.id) for q in questions]
                       if self.image_texts is not None else None)
        intents = [self.intents.get(q.id) for q in questions] if self.intents is not None else None
        return run_agent(self.llm, self.env, questions, system=self.name, image_texts=image_texts,
                         intents=intents, max_turns=self.max_turns, max_new_tokens=self.max_new_tokens)


class GoldReader(MMR2Agent):
    """The reader ceiling of a policy: its first turn is written for it (a search of a gold unit
    with the intent's query) and answered with the question's gold passages in the
    ``<information>`` block, no retrieval; the policy then summarises and answers (searching
    again returns the gold passages again). Its accuracy is what the policy can read when
    retrieval is perfect: every retrieval run of the same policy is read against it."""

    def __init__(self, name: str, llm: Any, kmap: KnowledgeMap, encoder: Any, *, k: int, budget: int,
                 max_turns: int, max_new_tokens: int, intents: Mapping[str, Any] | None = None,
                 image_texts: Mapping[str, str | None] | None = None, view: View = PAPER_VIEW):
        super().__init__(name, llm, kmap, encoder, k=k, budget=budget, max_turns=max_turns,
                         max_new_tokens=max_new_tokens, mode="gold", intents=intents,
                         image_texts=image_texts, view=view)

    def first_turn(self, question: Question) -> str:
        """The written search: the first gold unit, the intent's need (else the question)."""
        intent = (self.intents or {}).get(question.id)
        gold = [self.kmap.unit_of(p) for p in question.gold_passages if p in self.kmap.pid_index]
        unit = gold[0] if gold else self.kmap.unit_ids[0]
        need = getattr(intent, "need", "") or question.text
        referent = getattr(intent, "referent", "") or "the subject of the question"
        think = THINK_ROUTE[0].format(need=need.rstrip("?"), referent=referent, unit=unit,
                                      title=self.kmap.by_id[unit].title)
        return f"<think>{think}</think>{search_turn(unit, query_for(question, intent))}"

    def answer(self, questions: Sequence[Question]) -> list[Trace]:
        image_texts = ([self.image_texts.get(q.id) for q in questions]
                       if self.image_texts is not None else None)
        intents = [self.intents.get(q.id) for q in questions] if self.intents is not None else None
        return run_agent(self.llm, self.env, questions, system=self.name, image_texts=image_texts,
                         intents=intents, max_turns=self.max_turns, max_new_tokens=self.max_new_tokens,
                         first_turns=[self.first_turn(q) for q in questions])
