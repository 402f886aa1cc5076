"""MM-R2's module ablation (Table 3, right) as rows that differ by one factor each.

The paper's rows add one module at a time: flat retrieval, + KM routing, + intent binding, + the
agentic loop. Every row here is the same agent (:class:`mmrag.mmr2.system.MMR2Agent`): the same
policy (backbone and adapter), the same system prompt (the routed prompt with the unit cards),
the same image description (the CLIP-grounded attribute caption Φ computes, ``Intent.image_text``:
what a text-only model can see of the image, given to every row), the same passages per search and
turns. The three factors are the only differences:

- ``intent``: the first user turn carries Φ's binding (need, referent, constraints) or not;
- ``routing``: the policy's searches go to the whole corpus (``flat``) or to one unit chosen by the
  row's router (``km``); one router for every routed row (two_axis_eval.ablation_router);
- ``loop``: the policy may search up to the training budget, or once (budget 1, then it answers).

The other router is a diagnostic row (the full row with it), not a step of the ladder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mmrag.mmr2.agent import PAPER_VIEW, View
from mmrag.mmr2.knowledge_map import KnowledgeMap
from mmrag.mmr2.system import MMR2Agent
from mmrag.mmr2.trajectories import normalize
from mmrag.schema import Question, Trace

FACTORS = ("intent", "routing", "loop")
# the rows' names: trace files data/two_axis_eval/traces/<name>__<set>.jsonl
LADDER = ("row_flat", "row_km", "row_intent_km", "row_full")
DIAGNOSTIC = "row_full_other_router"


@dataclass(frozen=True)
class Row:
    """One row of the ablation: its run name, label, the three factors and the router."""

    name: str
    label: str
    intent: bool
    routing: str  # "flat" | "km"
    loop: bool
    router: str  # who picks a routed search's unit: "embedding" | "policy" (flat rows: "flat")

    def factors(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in FACTORS}


def other_router(router: str) -> str:
    return "policy" if router == "embedding" else "embedding"


def rows(router: str) -> list[Row]:
    """The ladder (each row adds one factor to the row before) and the diagnostic row (the full
    row with the other router)."""
    if router not in ("embedding", "policy"):
        raise ValueError(f"ablation router must be embedding or policy, not {router!r}")
    return [Row("row_flat", "flat retrieval (no intent, no KM, no loop)", False, "flat", False, "flat"),
            Row("row_km", "+ KM routing (no intent, no loop)", False, "km", False, router),
            Row("row_intent_km", "+ intent binding (no loop)", True, "km", False, router),
            Row("row_full", "+ agentic loop (full MM-R2)", True, "km", True, router),
            Row(DIAGNOSTIC, f"full MM-R2, {other_router(router)} router (diagnostic)", True, "km", True,
                other_router(router))]


def differing(a: Row, b: Row) -> list[str]:
    """The factors two rows differ in (the router counts when both rows route)."""
    out = [f for f in FACTORS if getattr(a, f) != getattr(b, f)]
    if a.routing == b.routing == "km" and a.router != b.router:
        out.append("router")
    return out


def config(row: Row, *, budget: int, k: int, max_turns: int, max_new_tokens: int, policy: str,
           view: View = PAPER_VIEW) -> dict[str, Any]:
    """Everything an agent of this row is built from (besides the questions): what the tests
    compare across rows."""
    return {"intent": row.intent, "routing": row.routing, "loop": row.loop,
            "router": row.router if row.routing == "km" else "flat",
            "budget": budget if row.loop else 1, "k": k, "max_turns": max_turns,
            "max_new_tokens": max_new_tokens, "mode": "routed", "prompt": "SYSTEM_ROUTED (unit cards)",
            "policy": policy, "view": view.to_dict(), "image_text": "Intent.image_text (every row)"}


def build(row: Row, llm: Any, kmap: KnowledgeMap, encoder: Any, questions: Sequence[Question],
          intents: Sequence[Any], *, budget: int, k: int, max_turns: int, max_new_tokens: int,
          view: View = PAPER_VIEW) -> MMR2Agent:
    """The row's agent over ``questions`` (their bound ``intents``): every row gets the same
    image description; only an intent row gets the binding."""
    image_texts = {q.id: getattr(x, "image_text", None) for q, x in zip(questions, intents)}
    bound = {q.id: x for q, x in zip(questions, intents)} if row.intent else None
    return MMR2Agent(row.name, llm, kmap, encoder, k=k, budget=budget if row.loop else 1,
                     max_turns=max_turns, max_new_tokens=max_new_tokens, mode="routed",
                     intents=bound, image_texts=image_texts, view=view,
                     router=row.router if row.routing == "km" else "flat")


def same_as_agent(row: Row) -> bool:
    """Whether the row is the headline agent (``mmr2_grpo``: intent, the policy's own routing, the
    loop), whose traces it can reuse."""
    return row.intent and row.routing == "km" and row.loop and row.router == "policy"


# --------------------------------------------------------------------------- does the loop fire
def searches(trace: Trace) -> int:
    """Searches a trace executed."""
    return sum(1 for s in trace.steps if s.action == "search")


def loop_stats(loop: Sequence[Trace], single: Sequence[Trace] | None = None,
               correct: Mapping[str, Mapping[str, bool]] | None = None) -> dict[str, Any]:
    """How often the loop fires and what the second search does.

    ``loop``: a run allowed several searches; ``single``: the same row with one search (same
    questions): a question the loop run searched twice or more is one where a second search
    could change the answer, and it did when the two runs' answers differ. ``correct``: run name
    ('loop', 'single') -> question id -> correct, for the flips either way."""
    n = len(loop)
    counts = [searches(t) for t in loop]
    out: dict[str, Any] = {"n": n, "searches_per_question": round(sum(counts) / n, 4) if n else None,
                           "share_two_plus_searches": round(sum(c >= 2 for c in counts) / n, 4) if n else None,
                           "searches_distribution": {str(c): counts.count(c) for c in sorted(set(counts))}}
    if single is None:
        return out
    one = {t.question_id: t for t in single}
    multi = [t for t, c in zip(loop, counts) if c >= 2 and t.question_id in one]
    changed = [t for t in multi if normalize(t.answer or "") != normalize(one[t.question_id].answer or "")]
    out.update(second_search_questions=len(multi), answer_changed=len(changed),
               answer_changed_share=round(len(changed) / len(multi), 4) if multi else None)
    if correct is not None:
        lc, sc = correct.get("loop", {}), correct.get("single", {})
        out["wrong_to_right"] = sum(1 for t in changed if lc.get(t.question_id) and not sc.get(t.question_id))
        out["right_to_wrong"] = sum(1 for t in changed if sc.get(t.question_id) and not lc.get(t.question_id))
    return out
