"""A teacher-forced check of a divider on held-out teacher dialogues: no tools, no compounding.

Every assistant turn of a held-out dialogue is generated from the gold prefix before it (the
instruction, the question, the teacher's earlier turns and the gold observations), and compared
with the teacher's turn: the whole turn (normalised text), the action (the same tool and query,
or the same final answer), the tool alone, and the final answer's exact match. It isolates
what fine-tuning teaches (the format, the division, the composition) from the tools' mistakes
and is cheap enough to run for every adapter, base model and zero-shot ladder model.
Prompts go to the engine in waves of equal turn index, so a dialogue's next prompt finds its
prefix in the llama.cpp slot cache.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pandas as pd

from mmrag.toolagent.strategies import Parsed, parse_dnc, parse_react


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w#=;:()\[\] ]", " ", (text or "").lower())).strip()


def same_action(a: Parsed, b: Parsed) -> bool:
    """The same tool call (tool and normalised query) or the same final answer."""
    if a.kind != b.kind or a.kind == "error":
        return False
    if a.kind == "answer":
        return _norm(a.answer) == _norm(b.answer)
    return a.tool == b.tool and _norm(a.query) == _norm(b.query)


def prompts_of(rows: Sequence[dict[str, Any]]) -> list[tuple[int, int, list[dict[str, str]], str]]:
    """(row index, turn index, gold prefix, teacher turn) for every assistant turn."""
    out = []
    for i, r in enumerate(rows):
        msgs = r["messages"]
        k = 0
        for j, m in enumerate(msgs):
            if m["role"] == "assistant":
                out.append((i, k, msgs[:j], m["content"]))
                k += 1
    return out


def teacher_forced(rows: Sequence[dict[str, Any]], llm: Any, strategy: str, *, max_new_tokens: int) -> Any:
    """One row per (dialogue, turn): the generated turn scored against the teacher's."""
    parse = parse_dnc if strategy == "dnc" else parse_react
    items = prompts_of(rows)
    out = []
    for k in sorted({t for _, t, _, _ in items}):
        wave = [x for x in items if x[1] == k]
        gens = llm.generate([p for _, _, p, _ in wave], max_new_tokens=max_new_tokens, temperature=0.0)
        for (i, turn, _, gold), g in zip(wave, gens):
            got, want = parse(g.text), parse(gold)
            out.append({"question_id": rows[i]["question_id"], "strategy": strategy, "kind": rows[i]["kind"],
                        "hops": rows[i]["hops"], "turn": turn, "final": want.kind == "answer",
                        "exact": _norm(g.text) == _norm(gold), "match": same_action(got, want),
                        "tool": got.kind == want.kind and got.tool == want.tool,
                        "format_ok": got.kind != "error", "tokens_out": g.tokens_out, "text": g.text})
    return pd.DataFrame(out)


def summary(turns: Any) -> Any:
    """Per LLM, variant and strategy: turns, turn exact match, action match, tool match on calls,
    final-answer EM and the share of turns in the strategy's format."""
    rows = []
    for (llm, variant, strategy), d in turns.groupby(["llm", "variant", "strategy"], sort=False):
        calls, finals = d[~d.final], d[d.final]
        rows.append({"llm": llm, "variant": variant, "strategy": strategy, "dialogues": d.question_id.nunique(),
                     "turns": len(d), "turn_exact": round(float(d.exact.mean()), 3),
                     "action_match": round(float(d.match.mean()), 3),
                     "call_tool": round(float(calls.tool.mean()), 3) if len(calls) else None,
                     "answer_EM": round(float(finals.match.mean()), 3) if len(finals) else None,
                     "format_ok": round(float(d.format_ok.mean()), 3),
                     "seconds": float(d.seconds.iloc[0]) if "seconds" in d else None})
    return pd.DataFrame(rows).set_index(["llm", "variant", "strategy"])
