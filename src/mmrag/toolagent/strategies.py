"""ToolsAnswer, mm-ReAct and DnC over the same tools and handler; each returns a schema.Trace.

Dialogue formats (what the teacher writes and the fine-tuned divider learns):

DnC (after the paper's Table 1)::

    system     instruction: divide into unimodal single-hop sub-questions, one tool each
    user       Question: <open question>            (+ earlier conversation turns, if any)
    assistant  Sub-questions: 1) <q1> [TableQA] 2) <q2 about #1> [TextQA]
               <q1> (Tool=TableQA)                   <- divide first, then the first call
    user       <tool answer>                         <- conqueror turn (masked in training)
    assistant  <q2 with #1 filled in> (Tool=TextQA)
    ...
    assistant  #1 = <answer 1>; #2 = <answer 2>
               [Answer: <final answer>]              <- compose

mm-ReAct::

    assistant  Thought: <reasoning>\nAction: (Tool=TextQA) <query>
    user       Observation: <tool answer>
    assistant  Thought: <reasoning>\nFinal Answer: <answer>

All strategies step a batch of questions together, so the local LLM generates for several
dialogues at once (batch 4 is ~2.5x the throughput of batch 1 on two cores).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mmrag.models.llm import dialogue_groups
from mmrag.schema import Question, Step, Trace
from mmrag.toolagent.tools import NO_ANSWER, TOOLS, ToolHandler

TOOL_HELP = ("TextQA answers a question from the text of the wiki pages; TableQA from the "
             "pages' tables (lookups, counts, highest/lowest, comparisons); ImageQA from the "
             "pictures of a named entity (colours, shapes, clothing, buildings); WebSearch "
             "searches everything when the others fail.")

DNC_INSTRUCTION = (
    "You are the divider. First divide the question into simple single-hop sub-questions, each "
    "answered by one tool: write 'Sub-questions: 1) ... [Tool] 2) ...', where #1 stands for the "
    "answer of sub-question 1. Then ask them one per turn, each ending with its tool: "
    "(Tool=TextQA), (Tool=TableQA), (Tool=ImageQA) or (Tool=WebSearch), with #k replaced by "
    "the answer you got. " + TOOL_HELP + " At the end compose: write '#1 = ...; #2 = ...' and "
    "reply [Answer: <short answer>].")

REACT_INSTRUCTION = (
    "Answer the question by reasoning and acting. Each turn write 'Thought: ...' and then "
    "either 'Action: (Tool=<TextQA|TableQA|ImageQA|WebSearch>) <question>' or "
    "'Final Answer: <short answer>'. " + TOOL_HELP)

FUSE_INSTRUCTION = ("Several tools answered the question below. Reply with the correct short "
                    "answer only.")

_TOOL_RE = re.compile(r"\(\s*Tool\s*=\s*([A-Za-z]+)\s*\)")
_ANSWER_RE = re.compile(r"\[\s*Answer\s*:\s*(.*?)\s*\]", re.S)
_FINAL_RE = re.compile(r"Final Answer\s*:\s*(.+)", re.S)


@dataclass
class Parsed:
    """One divider / agent turn, parsed."""

    kind: str  # call | answer | error
    tool: str = ""
    query: str = ""
    answer: str = ""
    thought: str = ""
    error: str = ""


def parse_dnc(text: str) -> Parsed:
    """A divider turn: '<sub-question> (Tool=X)' or '[Answer: ...]'; anything else is an error."""
    text = (text or "").strip()
    m = _ANSWER_RE.search(text)
    t = _TOOL_RE.search(text)
    if m and (not t or m.start() < t.start()):
        return Parsed("answer", answer=m.group(1).strip())
    if t:
        tool = t.group(1)
        if tool not in TOOLS:
            return Parsed("error", error=f"unknown tool {tool!r}")
        # the line that holds the tag is the call (a plan may come on the lines before it)
        start = text.rfind("\n", 0, t.start()) + 1
        end = text.find("\n", t.end())
        line = text[start:t.start()] + " " + text[t.end():end if end >= 0 else len(text)]
        query = line.strip()
        if not query:
            return Parsed("error", error="tool tag without a sub-question")
        return Parsed("call", tool=tool, query=query)
    return Parsed("error", error="neither (Tool=X) nor [Answer: ...]")


def parse_react(text: str) -> Parsed:
    """A ReAct turn: 'Thought: ... Action: (Tool=X) q' or 'Thought: ... Final Answer: a'."""
    text = (text or "").strip()
    thought = ""
    tm = re.search(r"Thought\s*:\s*(.*?)(?=\n|Action\s*:|Final Answer\s*:|$)", text, re.S)
    if tm:
        thought = tm.group(1).strip()
    fm = _FINAL_RE.search(text)
    am = re.search(r"Action\s*:\s*(.*)", text)
    if fm and (not am or fm.start() < am.start()):
        return Parsed("answer", answer=fm.group(1).strip().splitlines()[0].strip(), thought=thought)
    if am:
        p = parse_dnc(am.group(1).splitlines()[0])
        if p.kind == "call":
            p.thought = thought
            return p
        return Parsed("error", error="Action: " + (p.error or "without a tool call"), thought=thought)
    return Parsed("error", error="neither Action: nor Final Answer:", thought=thought)


def first_line(text: str, limit: int = 80) -> str:
    """The fallback answer of a malformed turn: its first non-empty line, clipped."""
    line = next((x.strip() for x in (text or "").splitlines() if x.strip()), "")
    return line[:limit]


def context_block(question: Question) -> str:
    """The open question, with earlier conversation turns before it (MMCoQA-style)."""
    lines = []
    if question.history:
        lines.append("Conversation so far:")
        for t in question.history:
            lines += [f"Q: {t.question}", f"A: {t.answer}"]
    lines.append(f"Question: {question.text}")
    return "\n".join(lines)


def dnc_prompt(question: Question) -> list[dict[str, str]]:
    return [{"role": "system", "content": DNC_INSTRUCTION},
            {"role": "user", "content": context_block(question)}]


def react_prompt(question: Question) -> list[dict[str, str]]:
    return [{"role": "system", "content": REACT_INSTRUCTION},
            {"role": "user", "content": context_block(question)}]


@dataclass
class _Dialogue:
    question: Question
    messages: list[dict[str, str]]
    handler: ToolHandler
    steps: list[Step] = field(default_factory=list)
    answer: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    format_errors: int = 0
    seconds: float = 0.0


def _observation(strategy: str, answer: str) -> str:
    return f"Observation: {answer}" if strategy == "react" else answer


def _take_turn(d: _Dialogue, text: str, strategy: str, *, max_calls: int, max_format_errors: int) -> None:
    """Parse one reply of dialogue d and act on it: answer, a tool call, or a format error."""
    parse = parse_dnc if strategy == "dnc" else parse_react
    d.messages.append({"role": "assistant", "content": text})
    p = parse(text)
    if p.kind == "error":
        d.format_errors += 1
        d.steps.append(Step(action="think", text=text, format_error=p.error))
        if d.format_errors >= max_format_errors:
            d.answer = first_line(text)  # the model did not follow the protocol
        else:
            d.messages.append({"role": "user", "content": "Format error: " + p.error})
        return
    if p.kind == "answer":
        d.steps.append(Step(action="answer", text=text, summary=p.answer))
        d.answer = p.answer
        return
    if d.handler.exhausted:
        d.steps.append(Step(action="answer", text=text,
                            format_error=f"tool-call cap of {max_calls} reached"))
        d.answer = d.steps[-2].summary if len(d.steps) > 1 and d.steps[-2].summary else NO_ANSWER
        return
    earlier = next((c for c in d.handler.calls if c.tool.lower() == p.tool.lower()
                    and c.query.strip().lower() == p.query.strip().lower()), None)
    if earlier is not None:
        # Tools are deterministic: a repeated call cannot bring new information.
        d.format_errors += 1
        d.steps.append(Step(action="answer", text=text, summary=earlier.answer.answer,
                            format_error="repeated the same tool call"))
        d.answer = earlier.answer.answer
        return
    t1 = time.time()
    ans = d.handler.call(p.tool, p.query)
    d.seconds += time.time() - t1
    d.steps.append(Step(action="tool", target=ans.tool, query=p.query,
                        evidence=ans.evidence, summary=ans.answer, text=text))
    d.messages.append({"role": "user", "content": _observation(strategy, ans.answer)})


def run_agent(strategy: str, questions: Sequence[Question], llm: Any, tools: dict[str, Any],
              system: str, *, max_calls: int, max_new_tokens: int, max_format_errors: int = 1,
              examples: str = "") -> list[Trace]:
    """DnC ('dnc') or mm-ReAct ('react') over a batch of questions, stepped together in
    ``dialogue_groups`` (all at once for a batching engine, one slot's worth for llama.cpp).

    ``examples`` (few-shot dialogues) is appended to the instruction; the LLM teacher uses it.
    """
    if strategy not in ("dnc", "react"):
        raise ValueError(f"strategy must be 'dnc' or 'react', not {strategy!r}")
    prompt = dnc_prompt if strategy == "dnc" else react_prompt
    dialogues = [_Dialogue(q, prompt(q), ToolHandler(tools, max_calls=max_calls)) for q in questions]
    if examples:
        for d in dialogues:
            d.messages[0] = {"role": "system", "content": d.messages[0]["content"] + "\n\n" + examples}
    for group in dialogue_groups(llm, len(dialogues)):
        members = [dialogues[i] for i in group]
        for _round in range(max_calls + 2):
            active = [d for d in members if d.answer is None]
            if not active:
                break
            t0 = time.time()
            gens = llm.generate([d.messages for d in active], max_new_tokens=max_new_tokens)
            share = (time.time() - t0) / len(active)
            for d, g in zip(active, gens):
                d.seconds += share
                d.tokens_in += g.tokens_in
                d.tokens_out += g.tokens_out
                _take_turn(d, g.text.strip(), strategy, max_calls=max_calls,
                           max_format_errors=max_format_errors)
    traces = []
    for d in dialogues:
        traces.append(Trace(
            question_id=d.question.id, system=system,
            answer=d.answer if d.answer is not None else NO_ANSWER, steps=d.steps,
            tokens_in=d.tokens_in, tokens_out=d.tokens_out, tool_calls=len(d.handler.calls),
            seconds=round(d.seconds, 3), format_errors=d.format_errors,
            meta={"strategy": strategy, "dialogue": d.messages}))
    return traces


def run_tools_answer(questions: Sequence[Question], llm: Any, tools: dict[str, Any], system: str,
                     max_new_tokens: int = 16) -> list[Trace]:
    """ToolsAnswer: every tool answers the whole question; the LLM fuses their answers."""
    prompts, steps_of, secs = [], [], []
    for q in questions:
        t0 = time.time()
        steps = []
        for name in [t for t in TOOLS if t in tools]:
            a = tools[name](context_block(q) if q.history else q.text)
            steps.append(Step(action="tool", target=name, query=q.text, evidence=a.evidence,
                              summary=a.answer))
        secs.append(time.time() - t0)
        listing = "\n".join(f"{s.target}: {s.summary}" for s in steps)
        prompts.append([{"role": "system", "content": FUSE_INSTRUCTION},
                        {"role": "user", "content": f"{context_block(q)}\n{listing}\nAnswer:"}])
        steps_of.append(steps)
    t0 = time.time()
    gens = llm.generate(prompts, max_new_tokens=max_new_tokens) if prompts else []
    share = (time.time() - t0) / max(1, len(prompts))
    traces = []
    for q, steps, g, s, msgs in zip(questions, steps_of, gens, secs, prompts):
        ans = first_line(g.text.replace("Answer:", ""))
        steps.append(Step(action="answer", text=g.text, summary=ans))
        traces.append(Trace(question_id=q.id, system=system, answer=ans, steps=steps,
                            tokens_in=g.tokens_in, tokens_out=g.tokens_out,
                            tool_calls=len(steps) - 1, seconds=round(s + share, 3),
                            meta={"strategy": "tools_answer",
                                  "dialogue": msgs + [{"role": "assistant", "content": g.text}]}))
    return traces


def render_dialogue(trace: Trace, width: int = 100) -> str:
    """A trace as a readable dialogue (instruction elided)."""
    out = []
    for m in trace.meta.get("dialogue", []):
        role = {"system": "INSTRUCTION", "user": "USER/TOOL", "assistant": "LLM"}.get(m["role"], m["role"])
        text = m["content"]
        if m["role"] == "system":
            text = text[:width] + ("…" if len(text) > width else "")
        out.append(f"{role:>11} | " + text.replace("\n", "\n            | "))
    out.append(f"{'ANSWER':>11} | {trace.answer}   (tool calls {trace.tool_calls}, "
               f"format errors {trace.format_errors})")
    return "\n".join(out)
