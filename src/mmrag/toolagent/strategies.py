"""ToolsAnswer, mm-ReAct and DnC over the same tools and handler; each returns a schema.Trace.

Dialogue formats (what the teachers write and the fine-tuned models learn):

DnC (the paper's Table 1: one unimodal single-hop sub-question per turn, built from the last answer)::

    system     instruction (Table 1's, with our four tools)
    user       Open Question: <question>              (+ earlier conversation turns, if any)
    assistant  To answer this question, I first need ... So, I need to ask this sub-question:
               Sub-question: <q1> (Tool=TableQA)
    user       Answer from the TableQA Tool: <answer 1>   <- conqueror turn (masked in training)
    assistant  Now, I need ... Sub-question: <q2, written with answer 1> (Tool=TextQA)
    ...
    assistant  Based on the answers, the final answer is: [Answer: <final answer>]

mm-ReAct (vanilla: the tool descriptions only, no decomposition anywhere)::

    assistant  Thought: <reasoning>\nAction: (Tool=TextQA) <query>
    user       Observation: <tool answer>
    assistant  Thought: <reasoning>\nFinal Answer: <answer>

ToolsAnswer: the original question to every tool, then one LLM call that fuses their answers.

The parser reads what the model meant (:func:`parse_dnc`): a plan line (``Sub-questions: 1) ...
[TextQA] 2) ...``, a numbered list) is never sent as a query; the call is the line holding
``(Tool=X)`` (``Text``, ``Table``, ``Image``, ``Web`` name the tools too), after its last
``Sub-question:``. In the loop (:func:`run_agent`) a repeated call is answered with the tool's
earlier answer, counts toward the cap (the paper's 12 calls) and the dialogue goes on; a
malformed turn is answered with a format reminder, and only ``max_format_errors`` of them end it.

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
from mmrag.toolagent.tools.handler import ToolCall

TOOL_HELP = ("TextQA answers a question from the text of the wiki pages; TableQA from the "
             "pages' tables (lookups, counts, highest/lowest, comparisons); ImageQA from the "
             "pictures of a named entity (colours, shapes, clothing, buildings); WebSearch "
             "searches everything when the others fail.")

# The paper's Table 1 instruction, with our four tools named.
DNC_INSTRUCTION = (
    "Your task is to answer a given Open Question. However, the Open Question needs information "
    "from different modules, which are the Text module (TextQA), the Table module (TableQA), the "
    "Image module (ImageQA) and WebSearch. " + TOOL_HELP + " You can divide the Open Question "
    "into a simpler Sub-question and wait to receive the answer to it. Each time you can ask a "
    "Sub-question from only one module: write 'Sub-question: <question> (Tool=<TextQA|TableQA|"
    "ImageQA|WebSearch>)'. If the provided answer was not complete, you ask a new Sub-question "
    "from different or the same module. You can repeat this loop until you get the complete "
    "information to answer the Open Question; then write 'Based on the answers, the final "
    "answer is: [Answer: <short answer>]'.")

# Vanilla mm-ReAct: the tool descriptions and the action format, nothing about decomposing.
REACT_INSTRUCTION = (
    "Answer the question by reasoning and acting. Each turn write 'Thought: ...' and then "
    "either 'Action: (Tool=<TextQA|TableQA|ImageQA|WebSearch>) <question>' or "
    "'Final Answer: <short answer>'. " + TOOL_HELP)

FUSE_INSTRUCTION = ("Several tools answered the question below. Reply with the correct short "
                    "answer only.")

# Names a model may give a tool -> the tool (the paper's shots write (Tool=Text)).
TOOL_ALIASES = {"textqa": "TextQA", "text": "TextQA", "tableqa": "TableQA", "table": "TableQA",
                "imageqa": "ImageQA", "image": "ImageQA", "websearch": "WebSearch", "web": "WebSearch",
                "search": "WebSearch"}
MODULE = {"TextQA": "Text", "TableQA": "Table", "ImageQA": "Image", "WebSearch": "Web"}

_TOOL_RE = re.compile(r"\(\s*Tool\s*=\s*([A-Za-z]+)\s*\)")
_ANSWER_RE = re.compile(r"\[\s*Answer\s*:\s*(.*?)\s*\]", re.S)
_FINAL_RE = re.compile(r"Final Answer\s*:\s*(.+)", re.S)
_FINAL_IS_RE = re.compile(r"final answer is\s*:?\s*(.+)", re.I)
_PLAN_LINE_RE = re.compile(r"^\s*(?:Sub-questions\s*:|Plan\s*:|\d+\s*[).:]\s)", re.I)
_PLAN_TAG_RE = re.compile(r"\[\s*(?:TextQA|TableQA|ImageQA|WebSearch|Text|Table|Image|Web)\s*\]", re.I)
_PLAN_ITEM_RE = re.compile(r"\d+\s*[).]\s*(.+?)\s*(?:\[\s*([A-Za-z]+)\s*\]|\(\s*Tool\s*=\s*([A-Za-z]+)\s*\))")
_SUBQ_RE = re.compile(r"Sub-question\s*:\s*", re.I)


def tool_name(name: str) -> str | None:
    """The tool a model's name means (TextQA, Text, text → TextQA); None when it names none."""
    return TOOL_ALIASES.get(name.strip().lower())


@dataclass
class Parsed:
    """One divider / agent turn, parsed."""

    kind: str  # call | answer | error
    tool: str = ""
    query: str = ""
    answer: str = ""
    thought: str = ""
    error: str = ""
    note: str = ""  # how the parser read it, when it had to ("first item of a plan")


def is_plan_line(line: str) -> bool:
    """A line of a written-out plan: 'Sub-questions: ...', a numbered item, or '[Tool]' tags."""
    return bool(_PLAN_LINE_RE.match(line) or _PLAN_TAG_RE.search(line))


def _clean_query(text: str) -> str:
    text = text.strip().strip('"').strip()
    return re.sub(r"\s+", " ", text)


def parse_dnc(text: str) -> Parsed:
    """A divider turn: '... Sub-question: <q> (Tool=X)' or '... [Answer: a]'; else an error.

    A plan line is never a query: the call is the first non-plan line that holds a tool tag,
    its query the text after its last 'Sub-question:' (or after a leading tag). A turn that is
    only a plan asks its first item that needs no earlier answer (``note`` says so).
    """
    text = (text or "").strip()
    m = _ANSWER_RE.search(text)
    t = _TOOL_RE.search(text)
    if m and (not t or m.start() < t.start()):
        return Parsed("answer", answer=m.group(1).strip())
    bad_tool = None
    for line in text.splitlines():
        if is_plan_line(line):
            continue
        tag = _TOOL_RE.search(line)
        if not tag:
            continue
        tool = tool_name(tag.group(1))
        if tool is None:
            bad_tool = bad_tool or tag.group(1)
            continue
        before, after = line[:tag.start()], line[tag.end():]
        subs = list(_SUBQ_RE.finditer(before))
        if subs:
            query = before[subs[-1].end():]
        elif before.strip():
            query = before
        else:
            query = after
        query = _clean_query(query)
        if not query:
            return Parsed("error", error="tool tag without a sub-question")
        return Parsed("call", tool=tool, query=query)
    for line in text.splitlines():
        if not is_plan_line(line):
            continue
        for item in _PLAN_ITEM_RE.finditer(line):
            tool = tool_name(item.group(2) or item.group(3))
            if tool and not re.search(r"#\d", item.group(1)):
                return Parsed("call", tool=tool, query=_clean_query(item.group(1)),
                              note="first item of a plan")
    if bad_tool:
        return Parsed("error", error=f"unknown tool {bad_tool!r}")
    if t:
        return Parsed("error", error="a plan line is not a sub-question")
    f = _FINAL_IS_RE.search(text)
    if f and f.group(1).strip():
        return Parsed("answer", answer=f.group(1).strip().splitlines()[0].strip(" .[]"))
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
        line = am.group(1).splitlines()[0]
        p = parse_dnc(line) if not is_plan_line(line) else Parsed("error", error="a plan is not an action")
        if p.kind == "call":
            p.thought = thought
            return p
        return Parsed("error", error="Action: " + (p.error or "without a tool call"), thought=thought)
    return Parsed("error", error="neither Action: nor Final Answer:", thought=thought)


def first_line(text: str, limit: int = 80) -> str:
    """The fallback answer of a malformed turn: its first non-empty line, clipped."""
    line = next((x.strip() for x in (text or "").splitlines() if x.strip()), "")
    return line[:limit]


def context_block(question: Question, label: str = "Question") -> str:
    """The open question, with earlier conversation turns before it (MMCoQA-style)."""
    lines = []
    if question.history:
        lines.append("Conversation so far:")
        for t in question.history:
            lines += [f"Q: {t.question}", f"A: {t.answer}"]
    lines.append(f"{label}: {question.text}")
    return "\n".join(lines)


def dnc_prompt(question: Question) -> list[dict[str, str]]:
    return [{"role": "system", "content": DNC_INSTRUCTION},
            {"role": "user", "content": context_block(question, "Open Question")}]


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
    repeats: int = 0
    seconds: float = 0.0


def observation(strategy: str, tool: str, answer: str) -> str:
    """The conqueror's turn: Table 1's 'Answer from the Text Tool: ...' (DnC), or ReAct's observation."""
    return f"Observation: {answer}" if strategy == "react" else f"Answer from the {tool} Tool: {answer}"


FORMAT_HINT = {"dnc": "Ask one Sub-question ending with (Tool=TextQA|TableQA|ImageQA|WebSearch), "
                      "or reply [Answer: <short answer>].",
               "react": "Write 'Thought: ...' and then 'Action: (Tool=X) <question>' or "
                        "'Final Answer: <short answer>'."}


def _take_turn(d: _Dialogue, text: str, strategy: str, *, max_calls: int, max_format_errors: int) -> None:
    """Parse one reply of dialogue d and act on it: answer, a tool call, or a format error.

    A repeated call (same tool, same query) is answered with the tool's earlier answer (tools
    are deterministic), counts toward the cap, and the dialogue goes on.
    """
    parse = parse_dnc if strategy == "dnc" else parse_react
    d.messages.append({"role": "assistant", "content": text})
    p = parse(text)
    if p.kind == "error":
        d.format_errors += 1
        d.steps.append(Step(action="think", text=text, format_error=p.error))
        if d.format_errors >= max_format_errors:
            d.answer = first_line(text)  # the model did not follow the protocol
        else:
            d.messages.append({"role": "user", "content": f"Format error: {p.error}. {FORMAT_HINT[strategy]}"})
        return
    if p.kind == "answer":
        d.steps.append(Step(action="answer", text=text, summary=p.answer))
        d.answer = p.answer
        return
    if d.handler.exhausted:
        d.steps.append(Step(action="answer", text=text,
                            format_error=f"tool-call cap of {max_calls} reached"))
        last = next((s.summary for s in reversed(d.steps) if s.action == "tool" and s.summary), "")
        d.answer = last or NO_ANSWER
        return
    earlier = next((c for c in d.handler.calls if c.tool.lower() == p.tool.lower()
                    and c.query.strip().lower() == p.query.strip().lower()), None)
    if earlier is not None:
        d.repeats += 1
        d.handler.calls.append(ToolCall(earlier.tool, p.query, earlier.answer))  # counts toward the cap
        d.steps.append(Step(action="tool", target=earlier.tool, query=p.query, evidence=earlier.answer.evidence,
                            summary=earlier.answer.answer, text=text))
        d.messages.append({"role": "user", "content": observation(strategy, earlier.tool, earlier.answer.answer)})
        return
    t1 = time.time()
    ans = d.handler.call(p.tool, p.query)
    d.seconds += time.time() - t1
    d.steps.append(Step(action="tool", target=ans.tool, query=p.query,
                        evidence=ans.evidence, summary=ans.answer, text=text))
    d.messages.append({"role": "user", "content": observation(strategy, ans.tool, ans.answer)})


def run_agent(strategy: str, questions: Sequence[Question], llm: Any, tools: dict[str, Any],
              system: str, *, max_calls: int, max_new_tokens: int, max_format_errors: int = 3,
              examples: str = "", instruction: str | None = None) -> list[Trace]:
    """DnC ('dnc') or mm-ReAct ('react') over a batch of questions, stepped together in
    ``dialogue_groups`` (all at once for a batching engine, one slot's worth for llama.cpp).

    ``examples`` (few-shot dialogues) is appended to the instruction; the LLM teacher uses it.
    ``max_format_errors`` malformed turns end a dialogue (each earlier one gets a reminder).
    """
    if strategy not in ("dnc", "react"):
        raise ValueError(f"strategy must be 'dnc' or 'react', not {strategy!r}")
    prompt = dnc_prompt if strategy == "dnc" else react_prompt
    dialogues = [_Dialogue(q, prompt(q), ToolHandler(tools, max_calls=max_calls)) for q in questions]
    for d in dialogues:
        head = instruction or d.messages[0]["content"]
        d.messages[0] = {"role": "system", "content": head + ("\n\n" + examples if examples else "")}
    for group in dialogue_groups(llm, len(dialogues)):
        members = [dialogues[i] for i in group]
        for _round in range(max_calls + max_format_errors + 2):
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
            meta={"strategy": strategy, "dialogue": d.messages, "repeated_calls": d.repeats}))
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
