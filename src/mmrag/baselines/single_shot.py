"""Single-shot retrieve-then-read systems: the flat dense baseline and MM-R2's module ablations.

One retrieval, one read, no loop. Three switches reproduce the rows of MM-R2's module ablation:
the query is the raw question or the intent's grounded need (``queries``); the search runs over
the whole corpus (flat) or inside one unit (KM routing: the unit whose card lists the intent's
referent, else the unit whose centroid is nearest the query); the agentic loop is what this
module leaves out (the full agent is :class:`mmrag.mmr2.system.MMR2Agent`). With a base LLM as
reader and flat search it is the cross-system table's flat dense-retrieval baseline
(:class:`FlatDense`). Every answer comes back as a ``schema.Trace``, so the same evaluator
scores it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from mmrag.evaluate.fidelity import extract_answer
from mmrag.mmr2.knowledge_map import KnowledgeMap, embed_texts
from mmrag.schema import Evidence, Question, Step, Trace

READER = ("Answer the question using the information below. Reply with a short answer inside "
          "<answer></answer>.")
# the reader answers in a few words: a short cap keeps a rambling base model cheap
READER_TOKENS = 32


def reader_prompt(question: Question, passages: Sequence[str], image_text: str | None = None,
                  max_chars: int = 400) -> list[dict]:
    """Chat messages: retrieved passages, the image as text, earlier turns, the question."""
    info = "\n".join(f"[{i}] {p[:max_chars]}" for i, p in enumerate(passages, 1)) or "(none)"
    parts = [f"<information>\n{info}\n</information>"]
    if image_text:
        parts.append(f"Image: {image_text}")
    for turn in question.history:
        parts.append(f"Earlier question: {turn.question}\nEarlier answer: {turn.answer}")
    parts.append(f"Question: {question.text}")
    if question.choices:
        parts.append("Choices: " + "; ".join(question.choices))
    return [{"role": "system", "content": READER}, {"role": "user", "content": "\n".join(parts)}]


def single_shot(llm: Any, kmap: KnowledgeMap, encoder: Any, questions: Sequence[Question],
                queries: Sequence[str], system: str, *, k: int, routed: bool = False,
                image_texts: Sequence[str | None] | None = None, max_new_tokens: int = READER_TOKENS,
                referents: Sequence[str | None] | None = None) -> list[Trace]:
    """Retrieve top-k once (flat, or inside the routed unit), read once; one Trace per question."""
    if len(queries) != len(questions):
        raise ValueError(f"single_shot: {len(questions)} questions but {len(queries)} queries")
    t0 = time.time()
    vecs = embed_texts(encoder, list(queries))
    steps, prompts = [], []
    for i, (q, query, v) in enumerate(zip(questions, queries, vecs)):
        if routed:
            card = kmap.card_unit(referents[i]) if referents and referents[i] else None
            unit = card or kmap.route(v, 1)[0]
            hits = kmap.search(unit, v, k)
            step = Step(action="route", target=unit, query=query)
        else:
            hits = kmap.search_flat(v, k)
            step = Step(action="retrieve", target="flat", query=query)
        step.evidence = [Evidence(id=h.passage.id, kind="passage", content=h.passage.text,
                                  score=round(float(h.score), 4), doc_id=h.passage.doc_id,
                                  unit=h.unit) for h in hits]
        steps.append(step)
        prompts.append(reader_prompt(q, [f"{h.passage.title}: {h.passage.text}" for h in hits],
                                     image_texts[i] if image_texts else None))
    gens = llm.generate(prompts, max_new_tokens=max_new_tokens, temperature=0.0)
    per_q = (time.time() - t0) / max(len(questions), 1)
    traces = []
    for q, step, g in zip(questions, steps, gens):
        answer = extract_answer(g.text)
        traces.append(Trace(question_id=q.id, system=system, answer=answer,
                            steps=[step, Step(action="answer", text=g.text)],
                            tokens_in=g.tokens_in, tokens_out=g.tokens_out, tool_calls=1,
                            seconds=round(per_q, 3)))
    return traces


class SingleShot:
    """A one-retrieval, one-read system (a :class:`mmrag.systems.System`).

    ``queries``, ``image_texts`` and ``referents`` map a question id to what the row of the
    ablation feeds in (an intent's grounded need, the image as text, Φ's referent); a question
    absent from ``queries`` is searched with its own text. ``routed`` confines the search to one
    unit of the KnowledgeMap.
    """

    def __init__(self, name: str, llm: Any, kmap: KnowledgeMap, encoder: Any, *, k: int,
                 routed: bool, queries: Mapping[str, str] | None = None,
                 image_texts: Mapping[str, str | None] | None = None,
                 referents: Mapping[str, str | None] | None = None,
                 max_new_tokens: int = READER_TOKENS):
        self.name, self.llm, self.kmap, self.encoder = name, llm, kmap, encoder
        self.k, self.routed, self.max_new_tokens = k, routed, max_new_tokens
        self.queries, self.image_texts, self.referents = queries, image_texts, referents

    def answer(self, questions: Sequence[Question]) -> list[Trace]:
        """One trace per question, in order."""
        queries = [(self.queries or {}).get(q.id, q.text) for q in questions]
        image_texts = ([self.image_texts.get(q.id) for q in questions]
                       if self.image_texts is not None else None)
        referents = ([self.referents.get(q.id) for q in questions]
                     if self.referents is not None else None)
        return single_shot(self.llm, self.kmap, self.encoder, questions, queries, self.name,
                           k=self.k, routed=self.routed, image_texts=image_texts,
                           max_new_tokens=self.max_new_tokens, referents=referents)


class FlatDense(SingleShot):
    """The flat dense-retrieval baseline: the question itself, one flat top-k search, one read."""

    def __init__(self, llm: Any, kmap: KnowledgeMap, encoder: Any, *, k: int,
                 name: str = "flat_dense", max_new_tokens: int = READER_TOKENS):
        super().__init__(name, llm, kmap, encoder, k=k, routed=False, max_new_tokens=max_new_tokens)
