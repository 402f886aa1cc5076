"""A small capability probe that places each ladder model before the stages choose one.

Two skills the systems need, on invented facts (no model can know them beforehand):
reading a short passage and answering with a span (every reader, MM-R2's answer turn), and
emitting one JSON tool call (DnC's dialogues, MM-R2's search turn). 16 items is a probe, not
an evaluation: it orders models that differ a lot and says what each costs per call.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from mmrag.evaluate.metrics import exact_match, normalize, token_f1

READING = (
    ("The Vantor X2 was designed by Ada Quill at Helix Labs in 2031.",
     "Who designed the Vantor X2?", "Ada Quill"),
    ("Helix Labs moved its headquarters from Bergen to Tromsø in 2029.",
     "Where is Helix Labs headquartered now?", "Tromsø"),
    ("The Orlin kettle has a copper body and a green logo.",
     "What colour is the logo of the Orlin kettle?", "green"),
    ("Mira Santos founded Kestrel Foods after leaving Dunmore Mills in 2018.",
     "Which company did Mira Santos leave?", "Dunmore Mills"),
    ("The Palo bridge is 412 metres long and opened in 1998.", "In which year did the Palo bridge open?", "1998"),
    ("Quenby Robotics makes the Sable vacuum. Quenby Robotics is based in Lyon.",
     "In which city is the maker of the Sable vacuum based?", "Lyon"),
    ("The Tessar festival is held in Vilnius. Vilnius lies on the Neris river.",
     "On which river does the city of the Tessar festival lie?", "Neris"),
    ("Ilsa Brenner directs the Arden lab. The Arden lab built the Nimbus drone.",
     "Who directs the lab that built the Nimbus drone?", "Ilsa Brenner"),
    ("The Corvo lamp comes in three finishes: brass, chrome and matte black.",
     "How many finishes does the Corvo lamp come in?", "three"),
    ("Dario Venn was born in Porto and studied in Leeds before joining Atlas Yards.",
     "Where did Dario Venn study?", "Leeds"),
)
TOOLS = ("TextQA", "ImageQA", "TableQA")
TOOL_CALLS = (
    ("What is the population of the town shown in image_3.jpg?", "ImageQA"),
    ("Which year did the company in the text passage start trading?", "TextQA"),
    ("In table T1, which product has the highest price?", "TableQA"),
    ("What colour is the car in image_7.png?", "ImageQA"),
    ("According to the sales table, how many units sold in March?", "TableQA"),
    ("Who wrote the novel mentioned in the article about Lisbon?", "TextQA"),
)
READ_PROMPT = ("Read the passage and answer the question with a short span copied from it, "
               "nothing else.\nPassage: {passage}\nQuestion: {question}\nAnswer:")
TOOL_PROMPT = ("You can call one of these tools: TextQA(question) for text passages, "
               "ImageQA(image, question) for pictures, TableQA(table, question) for tables. "
               "Reply with exactly one JSON object {{\"tool\": <name>, \"input\": <question>}} "
               "and nothing else.\nTask: {task}")


@dataclass(frozen=True)
class ProbeItem:
    """One probe reply, scored."""

    skill: str  # reading | tool_call
    prompt: str
    gold: str
    reply: str
    correct: bool
    f1: float


def first_json(text: str) -> dict[str, Any] | None:
    """The first JSON object in a reply (models wrap it in prose or code fences)."""
    for match in re.finditer(r"\{[^{}]*\}", text):
        try:
            value = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def span(reply: str) -> str:
    """The answer line of a reply, without a leading 'Answer:'."""
    line = reply.strip().splitlines()[0] if reply.strip() else ""
    return re.sub(r"^(answer\s*:\s*)", "", line, flags=re.I).strip().rstrip(".")


NUMBERS = {w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine ten".split())}


def _words(text: str) -> list[str]:
    return [NUMBERS.get(w, w) for w in normalize(text).split()]


def score_reading(reply: str, gold: str) -> tuple[bool, float]:
    """Right when the short answer span holds the gold answer ("the Neris river" for "Neris",
    "3" for "three"): a reader is not penalised for one extra word, but a paragraph is not a span."""
    said, want = _words(span(reply)), _words(gold)
    inside = any(said[i:i + len(want)] == want for i in range(len(said) - len(want) + 1))
    return bool(exact_match(span(reply), [gold])) or (inside and len(said) <= len(want) + 3), \
        float(token_f1(span(reply), [gold]))


def score_tool_call(reply: str, gold_tool: str) -> tuple[bool, float]:
    call = first_json(reply)
    ok = bool(call) and str(call.get("tool", "")).strip() == gold_tool and bool(call.get("input"))
    return ok, float(ok)


PROBE_TOKENS = 64  # a fenced, pretty-printed JSON call needs ~45 tokens


def run_probe(llm: Any, max_new_tokens: int) -> tuple[list[ProbeItem], float]:
    """Every probe item through one model (all at once: the engine batches), and the wall time."""
    prompts = ([("reading", READ_PROMPT.format(passage=p, question=q), a) for p, q, a in READING]
               + [("tool_call", TOOL_PROMPT.format(task=t), tool) for t, tool in TOOL_CALLS])
    start = time.perf_counter()
    gens = llm.generate([[{"role": "user", "content": p}] for _, p, _ in prompts],
                        max_new_tokens=max_new_tokens, temperature=0.0)
    seconds = time.perf_counter() - start
    items = []
    for (skill, prompt, gold), gen in zip(prompts, gens):
        correct, f1 = (score_reading if skill == "reading" else score_tool_call)(gen.text, gold)
        items.append(ProbeItem(skill, prompt, gold, gen.text, correct, f1))
    return items, seconds
