"""Single-shot retrieve-then-read systems: the flat dense baseline and MM-R2's module ablations.

One retrieval, one read, no loop. Three switches reproduce the rows of MM-R2's module ablation:
the query is the raw question or the intent's grounded need (``queries``); the search runs over
the whole corpus (flat) or inside one unit (KM routing: the unit whose card lists the intent's
referent, else the unit whose centroid is nearest the query); the agentic loop is what this
module leaves out (the full agent is ``mmr2.agent.run_agent``). With a
base LLM as reader and flat search it is the cross-system table's flat dense-retrieval baseline.
Every answer comes back as a ``schema.Trace``, so the same evaluator scores it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from mmrag.evaluate.fidelity import extract_answer
from mmrag.schema import Evidence, Question, Step, Trace

READER = ("Answer the question using the information below. Reply with a short answer inside "
          "<answer></answer>.")


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


def single_shot(llm: Any, kmap: Any, encoder: Any, questions: Sequence[Question],
                queries: Sequence[str], system: str, k: int = 3, routed: bool = False,
                image_texts: Sequence[str | None] | None = None, max_new_tokens: int = 32,
                referents: Sequence[str | None] | None = None) -> list[Trace]:
    """Retrieve top-k once (flat, or inside the routed unit), read once; one Trace per question."""
    from mmrag.mmr2.knowledge_map import embed_texts

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
