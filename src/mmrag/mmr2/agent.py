"""The MM-R2 agent loop: route to a unit, search inside it, read, summarise, stop or continue.

Serialization (after the paper's Appendix E): each assistant turn is
``<think>…</think>`` then either ``<search>[{"retrieval_unit":{"id":"U03"},"query":"…"}]</search>``
or ``<answer>…</answer>``; the environment answers a search with ``<information>…</information>``
and the next assistant turn opens with ``<summary>…</summary>`` of what it read.

The parser is strict (tags closed, exactly one action, valid JSON, known unit ids) and the
environment is forgiving: every violation is counted as a format error on the step and the
trace, recovered where the intent is unambiguous (a unit id written loosely, JSON with single
quotes), otherwise answered with a corrective observation (retry) until a retry limit, then the
episode stops. Nothing a policy writes can crash the loop.

:class:`RetrievalEnv` is also the rollout environment for GRPO: ``reset`` gives the prompt,
``step(text)`` executes the search on the real per-unit FAISS indexes and returns the
``<information>`` observation with the route correctness of that step (for R_route).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mmrag.mmr2.knowledge_map import Hit, KnowledgeMap, embed_texts
from mmrag.models.llm import dialogue_groups
from mmrag.schema import Evidence, Question, Step, Trace

Message = dict[str, Any]
TAGS = ("think", "search", "summary", "answer", "information")
FLAT_UNIT = "ALL"
# who picks the unit a <search> goes to: the policy's unit ids (the paper's agent), the nearest
# centroid of the policy's query (among units not yet searched), or no unit (the whole corpus)
ROUTERS = ("policy", "embedding", "flat")

SYSTEM_ROUTED = """You answer questions about an image by searching a knowledge map before you answer.
The knowledge map divides the corpus into retrieval units:
{units}

Work in steps. In every step:
1. Reason inside <think> ... </think>: what is still missing, and which unit should hold it.
2. Then do exactly one of:
   - search: <search>[{{"retrieval_unit": {{"id": "UNIT_ID"}}, "query": "a short, grounded query"}}]</search>
     Use only unit ids from the list above; you may list up to {max_units} units. The results
     come back inside <information> ... </information>.
   - answer: <answer> a short answer </answer>
After each <information>, first write <summary> ... </summary> with only the facts from the
information that bear on the question, then continue with <think>. You have at most {budget}
searches. Answer with a few words, not a sentence."""

SYSTEM_FLAT = """You answer questions about an image by searching a document collection before you answer.
Work in steps. In every step:
1. Reason inside <think> ... </think>: what is still missing.
2. Then do exactly one of:
   - search: <search>[{{"retrieval_unit": {{"id": "ALL"}}, "query": "a short, grounded query"}}]</search>
     The results come back inside <information> ... </information>.
   - answer: <answer> a short answer </answer>
After each <information>, first write <summary> ... </summary> with only the facts from the
information that bear on the question, then continue with <think>. You have at most {budget}
searches. Answer with a few words, not a sentence."""

SYSTEM_PARAMETRIC = """You answer questions about an image from what you know; there is no search.
Reason inside <think> ... </think>, then give <answer> a short answer </answer>."""


# --------------------------------------------------------------------------- parsing
@dataclass
class Call:
    unit: str
    query: str


@dataclass
class Parsed:
    """One assistant turn, read strictly; ``errors`` lists every format violation found."""

    think: str | None = None
    summary: str | None = None
    calls: list[Call] | None = None  # None: no <search>
    answer: str | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def action(self) -> str:
        if self.answer is not None:
            return "answer"
        if self.calls:
            return "search"
        return "none"


def _tag(text: str, name: str) -> tuple[str | None, str | None]:
    """(content of the first <name>…</name>, error) — an opened but unclosed tag is an error."""
    m = re.search(rf"<{name}>(.*?)</{name}>", text, flags=re.S)
    if m:
        return m.group(1).strip(), None
    if f"<{name}>" in text:
        return text.split(f"<{name}>", 1)[1].strip(), f"unclosed <{name}>"
    return None, None


def _loose_calls(body: str) -> list[Call]:
    """Best-effort reading of a broken search body: unit ids and queries by pattern."""
    units = re.findall(r"""["']?id["']?\s*[:=]\s*["']?([A-Za-z]+\d+|ALL)""", body)
    queries = re.findall(r"""["']?query["']?\s*[:=]\s*["']([^"']+)["']""", body)
    if not queries:
        plain = re.sub(r"[\[\]{}\"']|retrieval_unit|\bid\b\s*:?\s*\w+\d+|query\s*:", " ", body)
        plain = " ".join(plain.replace(",", " ").split())
        queries = [plain] if plain else []
    if not queries:
        return []
    units = units or [""]
    return [Call(units[min(i, len(units) - 1)], q.strip()) for i, q in enumerate(queries)]


def parse_search(body: str) -> tuple[list[Call], list[str]]:
    """The JSON inside <search>: strict first, then a counted, loose recovery."""
    errors: list[str] = []
    try:
        data = json.loads(body)
        if isinstance(data, dict):
            data, errors = [data], ["search is an object, not a list"]
        if not isinstance(data, list):
            raise ValueError("not a list")
        calls = []
        for item in data:
            unit = item.get("retrieval_unit", {}) if isinstance(item, dict) else {}
            uid = unit.get("id") if isinstance(unit, dict) else unit
            q = item.get("query") if isinstance(item, dict) else None
            if not isinstance(q, str) or not q.strip():
                errors.append("search item without a query")
                continue
            if uid is None:
                errors.append("search item without retrieval_unit.id")
                uid = ""
            calls.append(Call(str(uid).strip(), q.strip()))
        return calls, errors
    except (ValueError, TypeError, AttributeError):
        calls = _loose_calls(body)
        return calls, ["malformed search JSON" + ("" if calls else " (unrecoverable)")]


def parse_turn(text: str) -> Parsed:
    """Read one assistant turn strictly; never raises."""
    p = Parsed()
    text = text or ""
    p.think, err = _tag(text, "think")
    if err:
        p.errors.append(err)
    p.summary, err = _tag(text, "summary")
    if err:
        p.errors.append(err)
    answer, err_a = _tag(text, "answer")
    search, err_s = _tag(text, "search")
    if "<information>" in text:
        p.errors.append("the policy wrote <information> itself")
        text = text.split("<information>", 1)[0]
        search, err_s = _tag(text, "search")
        answer, err_a = _tag(text, "answer")
    for e in (err_a, err_s):
        if e:
            p.errors.append(e)
    if p.think is None:
        p.errors.append("missing <think>")
    if answer is not None and search is not None:
        p.errors.append("both <search> and <answer>")
        search = None  # answering wins: the episode ends
    if answer is not None:
        p.answer = answer
        if not answer:
            p.errors.append("empty <answer>")
    elif search is not None:
        p.calls, errs = parse_search(search)
        p.errors.extend(errs)
    else:
        p.errors.append("no <search> or <answer>")
    return p


def canonical_unit(uid: str, valid: Sequence[str]) -> str | None:
    """Map a loosely written unit id (u3, U3, 'U03 Biology') onto a valid one, or None."""
    if uid in valid:
        return uid
    m = re.search(r"(\d+)", uid or "")
    if m:
        want = int(m.group(1))
        for v in valid:
            n = re.search(r"(\d+)", v)
            if n and int(n.group(1)) == want:
                return v
    return None


# --------------------------------------------------------------------------- environment
_SENT = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[a-z0-9]+")
_FUNCTION_WORDS = frozenset("""a an the of in on at to for by with from and or is are was were be been
it its this that these those as which who whom what when where how why do does did has have had
not no about""".split())


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _FUNCTION_WORDS and len(w) > 1}


def passage_view(text: str, query: str | None, max_chars: int) -> str:
    """The passage as the agent reads it: whole when it fits in ``max_chars``; else, with a query,
    the sentences sharing the most words with the query (ties: earlier first), kept in page order
    until ``max_chars``; without one, its first ``max_chars`` characters."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    if not query:
        return text[:max_chars]
    sents = [s for s in _SENT.split(text) if s]
    want = _words(query)
    order = sorted(range(len(sents)), key=lambda i: (-len(want & _words(sents[i])), i))
    keep, used = [], 0
    for i in order:
        extra = len(sents[i]) + bool(keep)
        if used + extra <= max_chars:
            keep.append(i)
            used += extra
    if not keep:  # the best sentence alone is too long: cut it
        return sents[order[0]][:max_chars]
    return " ".join(sents[i] for i in sorted(keep))


def format_information(hits: list[Hit], max_chars: int, query: str | None = None) -> str:
    """The observation a search returns: one line per passage, numbered, with unit and title;
    each passage through :func:`passage_view` (the query's sentences when it is too long)."""
    if not hits:
        return "<information>No passages found.</information>"
    lines = [f"[{i}] ({h.unit}) {h.passage.title}: {passage_view(h.passage.text, query, max_chars)}"
             for i, h in enumerate(hits, 1)]
    return "<information>\n" + "\n".join(lines) + "\n</information>"


def user_prompt(question: Question, image_text: str | None, intent: Any | None) -> str:
    """The first user turn: image (as the encoder exposes it), question, intent."""
    parts = []
    if image_text:
        parts.append(f"Image: {image_text}")
    parts.append(f"Question: {question.text}")
    if question.choices:
        parts.append("Choices: " + "; ".join(question.choices))
    if intent is not None:
        parts.append(f"Intent: need = {intent.need}; referent = {intent.referent}; "
                     f"constraints = {intent.constraints}")
    return "\n".join(parts)


@dataclass(frozen=True)
class View:
    """What the agent is shown: each passage cut to ``passage_chars`` (the query's sentences
    first, :func:`passage_view`) and the unit cards with or without their keyword descriptions.
    A policy is evaluated with the view it was trained on (mmr2_traj writes it, mmr2_train copies
    it into policies.json)."""

    passage_chars: int
    unit_descriptions: bool

    def to_dict(self) -> dict[str, Any]:
        return {"passage_chars": self.passage_chars, "unit_descriptions": self.unit_descriptions}


# the paper's view: whole chunks (800 characters) and full unit cards
PAPER_VIEW = View(passage_chars=800, unit_descriptions=True)


@dataclass
class StepResult:
    observation: str | None  # the next user turn (None when the episode is over)
    done: bool
    step: Step
    route_correct: bool | None = None  # any chosen unit holds gold evidence (None: no search)
    format_error: str | None = None


class RetrievalEnv:
    """One episode at a time: routed (per-unit indexes), flat (one index), parametric (none) or
    gold (the reader ceiling: every search returns the question's gold passages, no retrieval)."""

    def __init__(self, kmap: KnowledgeMap | None, encoder: Any, mode: str = "routed", *, k: int,
                 budget: int, max_units_per_search: int = 2, max_format_retries: int = 2,
                 view: View = PAPER_VIEW, router: str = "policy"):
        if mode not in ("routed", "flat", "parametric", "gold"):
            raise ValueError(f"mode must be routed, flat or parametric, not {mode!r}")
        if router not in ROUTERS:
            raise ValueError(f"router must be one of {', '.join(ROUTERS)}, not {router!r}")
        if mode != "parametric" and kmap is None:
            raise ValueError(f"mode {mode!r} needs a KnowledgeMap")
        self.kmap, self.encoder, self.mode, self.k, self.budget = kmap, encoder, mode, k, budget
        self.max_units, self.max_retries, self.view = max_units_per_search, max_format_retries, view
        self.router = router
        self.searches = self.retries = 0
        self.gold_units: set[str] = set()
        self.searched_units: list[str] = []

    def system_prompt(self) -> str:
        if self.mode in ("routed", "gold"):
            return SYSTEM_ROUTED.format(units=self.kmap.compact(self.view.unit_descriptions),
                                        budget=self.budget,
                                        max_units=self.max_units)
        if self.mode == "flat":
            return SYSTEM_FLAT.format(budget=self.budget)
        return SYSTEM_PARAMETRIC

    def reset(self, question: Question, image_text: str | None = None, intent: Any = None,
              ) -> list[Message]:
        """Start an episode; returns the conversation so far (system + first user turn)."""
        self.searches = self.retries = 0
        self.gold_units = set()
        self.searched_units = []
        self.gold_hits: list[Hit] = []
        if self.kmap is not None:
            gold = [p for p in question.gold_passages if p in self.kmap.pid_index]
            self.gold_units = {self.kmap.unit_of(p) for p in gold}
            self.gold_hits = [Hit(self.kmap.passages[self.kmap.pid_index[p]], 1.0, self.kmap.unit_of(p))
                              for p in gold]
        return [{"role": "system", "content": self.system_prompt()},
                {"role": "user", "content": user_prompt(question, image_text, intent)}]

    def _retry(self, step: Step, message: str) -> StepResult:
        self.retries += 1
        if self.retries > self.max_retries:
            return StepResult(None, True, step, None, step.format_error)
        return StepResult(f"<information>Format error: {message}. Follow the format exactly."
                          f"</information>", False, step, None, step.format_error)

    def reroute(self, calls: list[Call]) -> list[Call]:
        """The policy's queries sent where the environment's router says (the policy's unit ids
        are ignored): ``flat`` searches the whole corpus; ``embedding`` sends each query to the
        unit whose centroid is nearest it among the units this episode has not searched yet (all
        searched: the nearest), so a second search of the same need reaches the next unit."""
        if self.router == "flat":
            return [Call(FLAT_UNIT, c.query) for c in calls]
        vecs = embed_texts(self.encoder, [c.query for c in calls])
        out, taken = [], set(self.searched_units)
        for c, v in zip(calls, vecs):
            ranked = self.kmap.route(v, len(self.kmap.unit_ids))
            unit = next((u for u in ranked if u not in taken), ranked[0])
            taken.add(unit)
            out.append(Call(unit, c.query))
        return out

    def step(self, text: str) -> StepResult:
        """Execute one assistant turn: a search returns the observation, an answer ends it."""
        p = parse_turn(text)
        step = Step(action=p.action if p.action != "none" else "think", text=text,
                    summary=p.summary, format_error="; ".join(p.errors) or None)
        if p.answer is not None:
            step.action = "answer"
            return StepResult(None, True, step, None, step.format_error)
        if self.mode == "parametric":
            return self._retry(step, "give your answer inside <answer> ... </answer>")
        if not p.calls:
            return self._retry(step, "write a <search> with a JSON list, or an <answer>")
        if self.searches >= self.budget:
            step.format_error = ((step.format_error + "; ") if step.format_error else "") + \
                "search over budget"
            return StepResult(None, True, step, None, step.format_error)
        calls, bad = [], []
        for c in p.calls[: self.max_units]:
            if self.mode == "flat" or (self.mode == "routed" and self.router != "policy"):
                calls.append(Call(FLAT_UNIT, c.query))
                continue
            uid = canonical_unit(c.unit, self.kmap.unit_ids)
            if uid is None:
                bad.append(c.unit)
            else:
                if uid != c.unit:
                    bad.append(c.unit)
                calls.append(Call(uid, c.query))
        if bad:
            step.format_error = ((step.format_error + "; ") if step.format_error else "") + \
                f"invalid unit id(s) {bad}"
        if not calls:
            return self._retry(step, f"unit id(s) {bad} do not exist; valid ids: "
                                     f"{', '.join(self.kmap.unit_ids)}")
        if self.mode == "routed" and self.router != "policy":  # the policy's unit ids are not read
            calls = self.reroute(calls)
        self.searches += 1
        step.action, step.target = "search", ",".join(c.unit for c in calls)
        step.query = " | ".join(c.query for c in calls)
        hits: list[Hit] = []
        seen: set[str] = set()
        # gold mode (the reader ceiling): every search returns the question's gold passages
        vecs = embed_texts(self.encoder, [c.query for c in calls]) if self.mode != "gold" else []
        if self.mode == "gold":
            hits = list(self.gold_hits[: self.k * len(calls)])
        for c, v in zip(calls, vecs):
            found = (self.kmap.search_flat(v, self.k) if c.unit == FLAT_UNIT
                     else self.kmap.search(c.unit, v, self.k))
            for h in found:
                if h.passage.id not in seen:
                    seen.add(h.passage.id)
                    hits.append(h)
        hits.sort(key=lambda h: -h.score)
        hits = hits[: self.k * len(calls)]
        step.evidence = [Evidence(id=h.passage.id, kind="passage", content=h.passage.text,
                                  score=round(h.score, 4), doc_id=h.passage.doc_id, unit=h.unit)
                         for h in hits]
        self.searched_units.extend(c.unit for c in calls)
        route_ok = (bool({c.unit for c in calls} & self.gold_units) if self.mode in ("routed", "gold")
                    and self.router != "flat" and self.gold_units else None)
        return StepResult(format_information(hits, self.view.passage_chars, step.query), False, step, route_ok,
                          step.format_error)


# --------------------------------------------------------------------------- the loop
def final_answer(steps: list[Step]) -> str:
    """The answer of the last answering step, else the last summary (a stopped episode)."""
    for s in reversed(steps):
        if s.action == "answer":
            ans, _ = _tag(s.text or "", "answer")
            return ans or ""
    for s in reversed(steps):
        if s.summary:
            return s.summary
    return ""


def run_agent(llm: Any, env_factory: Any, questions: Sequence[Question], system: str,
              image_texts: Sequence[str | None] | None = None, intents: Sequence[Any] | None = None,
              *, max_turns: int, max_new_tokens: int,
              first_turns: Sequence[str] | None = None) -> list[Trace]:
    """Run episodes in lockstep groups (``dialogue_groups``: all at once for a batching engine,
    one slot's worth for llama.cpp); one Trace per question.

    ``first_turns``: an assistant turn per question executed before the policy's own (written
    for it, not generated: the reader ceiling's search); ``max_turns`` counts generated turns."""
    n = len(questions)
    envs = [env_factory() for _ in range(n)]
    convs = [env.reset(q, image_texts[i] if image_texts else None,
                       intents[i] if intents else None) for i, (env, q) in enumerate(zip(envs, questions))]
    steps: list[list[Step]] = [[] for _ in range(n)]
    routes: list[list[bool]] = [[] for _ in range(n)]
    tin, tout = [0] * n, [0] * n
    seconds = [0.0] * n
    stopped: set[int] = set()

    def advance(i: int, text: str) -> bool:
        """Execute one assistant turn of episode i; whether the episode goes on."""
        res = envs[i].step(text)
        steps[i].append(res.step)
        if res.route_correct is not None:
            routes[i].append(res.route_correct)
        convs[i].append({"role": "assistant", "content": text})
        if not res.done and res.observation is not None:
            convs[i].append({"role": "user", "content": res.observation})
            return True
        return False

    for group in dialogue_groups(llm, n):
        t0 = time.time()
        alive = list(group)
        if first_turns is not None:
            alive = [i for i in alive if advance(i, first_turns[i])]
        for _ in range(max_turns):
            if not alive:
                break
            gens = llm.generate([convs[i] for i in alive], max_new_tokens=max_new_tokens,
                                stop=["<information>"])
            still = []
            for i, g in zip(alive, gens):
                tin[i] += g.tokens_in
                tout[i] += g.tokens_out
                if advance(i, g.text):
                    still.append(i)
            alive = still
        stopped.update(alive)
        for i in group:
            seconds[i] = (time.time() - t0) / len(group)
    traces = []
    for i, q in enumerate(questions):
        fe = sum(1 for s in steps[i] if s.format_error)
        traces.append(Trace(question_id=q.id, system=system, answer=final_answer(steps[i]),
                            steps=steps[i], tokens_in=tin[i], tokens_out=tout[i],
                            tool_calls=sum(1 for s in steps[i] if s.action == "search"),
                            seconds=round(seconds[i], 3), format_errors=fe,
                            meta={"route_correct": routes[i], "stopped": i in stopped,
                                  "written_first_turn": first_turns is not None}))
    return traces


def route_recall_at1(trace: Trace) -> float | None:
    """Whether the first search went to a gold unit (None when the trace never searched)."""
    rc = trace.meta.get("route_correct") or []
    return float(rc[0]) if rc else None
