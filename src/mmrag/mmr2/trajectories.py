"""MM-R2-Traj: agent trajectories synthesized from gold, executed for real, filtered.

For each training question a programmatic teacher (an LLM teacher is a param of the stage) knows
the gold unit and passage, and writes the assistant turns a good agent would write; every
search it writes is *executed* by :class:`~mmrag.mmr2.agent.RetrievalEnv` on the real per-unit
indexes, so each ``<information>`` turn is exactly what the agent would see. A share of the
trajectories first routes to a plausible but wrong unit, notices that the evidence does not
answer, and recovers — so multi-step behaviour is in the data.

Filters (after the paper): wrong final answer, incomplete steps (any turn the strict parser
rejects, no final answer, over budget), a summary inconsistent with the evidence it follows,
degenerate reasoning (empty, repeated or copy-the-question thinking; a repeated search). Each
removal is counted by the first filter that fires.

Output rows are chat conversations ``{"id", "messages": [{"role", "content"}...], "meta"}``:
assistant turns carry think/search/summary/answer, user turns carry the prompt and the
``<information>`` observations (masked out of the SFT loss by role).
"""

from __future__ import annotations

import json
import random
import re
import string
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mmrag.mmr2.agent import RetrievalEnv, parse_turn
from mmrag.mmr2.knowledge_map import KnowledgeMap, embed_texts
from mmrag.sampling import seeded_sample, seeded_unit
from mmrag.schema import Question

_STOP: frozenset[str] | None = None
# The words a summary may use to frame evidence without asserting anything new.
FRAME = frozenset("""passage passages unit units mention mentions mentioned evidence none nothing
information retrieved question asks asked says states stated relevant found shows answer
describes described article about result results search searched""".split())


def normalize(text: str) -> str:
    """Lowercase, no punctuation or articles, single spaces (SQuAD-style answer matching)."""
    text = (text or "").lower()
    text = "".join(ch if ch not in string.punctuation else " " for ch in text)
    return " ".join(w for w in text.split() if w not in ("a", "an", "the"))


def answer_matches(pred: str, gold: str, aliases: Sequence[str] = ()) -> bool:
    """Exact match after normalisation against the answer or any alias."""
    p = normalize(pred)
    return bool(p) and any(p == normalize(g) for g in (gold, *aliases) if g)


def _stopwords() -> frozenset[str]:
    global _STOP
    if _STOP is None:
        # heavy: scikit-learn imports in ~1 s; only its stop-word list is needed, once
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        _STOP = frozenset(ENGLISH_STOP_WORDS)
    return _STOP


def content_words(text: str) -> list[str]:
    return [w for w in normalize(text).split() if w not in _stopwords() and len(w) > 1]


# --------------------------------------------------------------------------- the teacher
@dataclass
class Trajectory:
    id: str
    question_id: str
    messages: list[dict[str, str]]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "question_id": self.question_id, "messages": self.messages,
                "meta": self.meta}


def _sentence_with(text: str, needle: str, max_chars: int = 220) -> str | None:
    """The sentence of ``text`` that contains ``needle`` (normalised match), trimmed."""
    n = normalize(needle)
    for sent in re.split(r"(?<=[.!?])\s+|\n", text):
        if n and n in normalize(sent):
            return sent.strip()[:max_chars]
    return None


def locate(observation: str, answers: Sequence[str],
           allowed: Sequence[int] | None = None) -> tuple[str, str] | None:
    """(title, supporting sentence) of the first retrieved passage that contains an answer;
    ``allowed`` restricts it to those result numbers (the teacher: gold passages only)."""
    for line in observation.splitlines():
        m = re.match(r"\[(\d+)\] \((\w+)\) (.*?): (.*)", line)
        if not m or (allowed is not None and int(m.group(1)) not in allowed):
            continue
        m = re.match(r"\[\d+\] \((\w+)\) (.*?): (.*)", line)  # (unit, title, body)
        title, body = m.group(2), m.group(3)
        for a in answers:
            if not a:
                continue
            if normalize(a) == normalize(title):
                return title, f"The passage titled {title} says: {body[:200].strip()}"
            sent = _sentence_with(body, a)
            if sent:
                return title, f"{title}: {sent}"
    return None


def _titles(observation: str, n: int = 3) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^\[\d+\] \(\w+\) (.*?): ", observation, re.M)][:n]


THINK_ROUTE = [
    "The question asks {need}. The referent is {referent}. Unit {unit} ({title}) should cover this, "
    "so I search it for the referent.",
    "I need {need}. The image points to {referent}; the map says unit {unit} is about {title}, "
    "which fits, so I query it.",
    "To answer I must find {need}. Given {referent}, the most relevant unit is {unit} ({title}).",
]
THINK_CARD = [
    "I need {need}. The map lists {referent} on the card of unit {unit} ({title}), so I search it.",
    "The question asks {need}. The image points to {referent}, which the card of unit {unit} "
    "lists, so I query {unit}.",
]
THINK_MISS = [
    "The results from {unit} are about {found}, not what I need. Unit {next} ({title}) fits "
    "{referent} better, so I search there.",
    "None of these passages answers it; they cover {found}. I switch to unit {next} ({title}).",
]
THINK_RETRY = [
    "The passages do not state it yet. I rephrase the query and search unit {unit} again.",
]
THINK_DONE = [
    "The evidence states the answer directly, so I can answer.",
    "This passage answers the question; no further search is needed.",
]


def query_for(question: Question, intent: Any | None) -> str:
    """A grounded query: the intent's need with its referent, else the question itself."""
    q = intent.need if intent is not None and getattr(intent, "need", "") else question.text
    return " ".join(q.split()[:40])


def search_turn(unit: str, query: str) -> str:
    """A well-formed ``<search>`` of one unit."""
    return "<search>" + json.dumps([{"retrieval_unit": {"id": unit}, "query": query}],
                                   ensure_ascii=False) + "</search>"


def miss_then_hit_ids(questions: Sequence[Question], frac: float, seed: int) -> set[str]:
    """The questions whose trajectory first misses, then finds the answer in a second search:
    round(frac x n) of them, a seeded sample (the configured share exactly, not a draw per question)."""
    n = round(frac * len(questions))
    return {q.id for q in seeded_sample(questions, n, seed, salt="miss_then_hit")} if n > 0 else set()


def synthesize(question: Question, env: RetrievalEnv, kmap: KnowledgeMap, encoder: Any,
               rng: random.Random, wrong_first: bool, image_text: str | None = None,
               intent: Any | None = None, miss_first: bool = False) -> Trajectory | None:
    """One executed teacher trajectory (None when the question has no gold unit in the map).

    ``wrong_first``: where no unit card lists the referent, first route to the nearest unit that
    holds no gold passage, then recover. ``miss_first``: the same for every question, card-routed
    ones included (the first search misses, the second, in the gold unit, finds the answer): the
    multi-step trajectories the loop learns from (mmr2_traj.miss_then_hit_frac)."""
    messages = env.reset(question, image_text, intent)
    gold_units = sorted(env.gold_units)
    if not gold_units:
        return None
    query = query_for(question, intent)
    qv = embed_texts(encoder, [query])[0]
    ranked = kmap.route(qv, k=len(kmap.unit_ids))
    gold = min(gold_units, key=ranked.index)
    referent = getattr(intent, "referent", "") or "the subject of the question"
    card = kmap.card_unit(referent)
    if card in gold_units:  # the map names the unit: a first route elsewhere would teach ignoring it
        gold, plan = card, [card]
    elif card is not None:  # Φ grounded the image to another entity: follow the card, then recover
        plan = [card, gold]
    else:
        plan = [gold]
        if wrong_first:
            wrong = next((u for u in ranked if u not in gold_units), None)
            if wrong is not None:
                plan = [wrong, gold]
    if miss_first and len(plan) == 1:
        miss = next((u for u in ranked if u not in gold_units), None)
        if miss is not None:
            plan = [miss, plan[0]]
    need = getattr(intent, "need", "") or question.text
    answers = [question.answer, *question.answer_aliases]
    routes: list[bool] = []
    summary: str | None = None
    text = ""
    u0 = plan[0]
    think = rng.choice(THINK_CARD if u0 == card else THINK_ROUTE).format(
        need=need.rstrip("?"), referent=referent, unit=u0, title=kmap.by_id[u0].title)
    turn = f"<think>{think}</think>{search_turn(u0, query)}"
    step_i = 0
    final = None
    retried = False
    while True:
        messages.append({"role": "assistant", "content": turn})
        res = env.step(turn)
        if res.route_correct is not None:
            routes.append(res.route_correct)
        if res.done or res.observation is None:
            break
        messages.append({"role": "user", "content": res.observation})
        # the teacher answers only from gold evidence, never from a lucky distractor
        gold_hits = [i for i, e in enumerate(res.step.evidence, 1)
                     if e.id in set(question.gold_passages)]
        found = locate(res.observation, answers, gold_hits)
        step_i += 1
        if found:
            summary = found[1]
            final = question.answer
            text = f"<summary>{summary}</summary><think>{rng.choice(THINK_DONE)}</think>" \
                   f"<answer>{final}</answer>"
        elif step_i < len(plan):
            nxt = plan[step_i]
            titles = _titles(res.observation) or ["other topics"]
            summary = f"The passages retrieved are about {', '.join(titles)}; none mentions the answer."
            think = rng.choice(THINK_MISS).format(unit=plan[step_i - 1], found=", ".join(titles),
                                                  next=nxt, title=kmap.by_id[nxt].title,
                                                  referent=referent)
            text = f"<summary>{summary}</summary><think>{think}</think>{search_turn(nxt, query)}"
        elif env.searches < env.budget and not retried:
            retried = True
            titles = _titles(res.observation) or ["other topics"]
            summary = f"The passages retrieved are about {', '.join(titles)}; none mentions the answer."
            alt = " ".join(content_words(query)[:12]) or query
            text = (f"<summary>{summary}</summary><think>{rng.choice(THINK_RETRY).format(unit=gold)}"
                    f"</think>{search_turn(gold, alt)}")
        else:
            summary = "The passages retrieved do not state the answer."
            final = "unknown"
            text = (f"<summary>{summary}</summary><think>The evidence is not enough; I give my best "
                    f"guess.</think><answer>{final}</answer>")
        turn = text
    n_search = sum(1 for m in messages if m["role"] == "assistant" and "<search>" in m["content"])
    return Trajectory(
        id=f"traj-{question.id}-{'m' if miss_first else 'w' if wrong_first else 'd'}", question_id=question.id,
        messages=messages,
        meta={"answer": question.answer, "aliases": list(question.answer_aliases),
              "final": final, "searches": n_search, "wrong_first": len(plan) > 1,
              "miss_then_hit": bool(miss_first and len(plan) > 1 and final == question.answer
                                    and n_search >= 2),
              "card_route": u0 == card,
              "route_correct": routes, "gold_units": gold_units, "budget": env.budget,
              "referent": referent})


def llm_rewrite_thinks(trajs: Sequence[Trajectory], llm: Any, max_new_tokens: int = 80,
                       ) -> int:
    """LLM teacher pass: rewrite every <think> in the teacher's own words (batched).

    A rewrite is kept only if it is non-empty and still names every unit id the original named,
    so the route stays what was executed; otherwise the programmatic thought stays. Returns the
    number of rewrites kept. The filters run afterwards, so a degenerate rewrite is removed.
    """
    sites = []
    for t in trajs:
        for m in t.messages:
            if m["role"] == "assistant":
                think = parse_turn(m["content"]).think
                if think:
                    sites.append((m, think))
    prompts = [[{"role": "user", "content":
                 "Rewrite this reasoning step of a search agent in your own words, in one or two "
                 "sentences. Keep every unit id (like U03) and every name exactly.\n\n" + think}]
               for _, think in sites]
    outs = llm.generate(prompts, max_new_tokens=max_new_tokens) if prompts else []
    kept = 0
    for (m, think), g in zip(sites, outs):
        new = " ".join(g.text.replace("<", " ").replace(">", " ").split())
        ids = set(re.findall(r"\bU\d+\b", think))
        if new and ids <= set(re.findall(r"\bU\d+\b", new)):
            m["content"] = m["content"].replace(f"<think>{think}</think>", f"<think>{new}</think>", 1)
            kept += 1
    return kept


# --------------------------------------------------------------------------- filters
def _assistant(t: Trajectory) -> list[str]:
    return [m["content"] for m in t.messages if m["role"] == "assistant"]


def check_incomplete(t: Trajectory) -> str | None:
    """Every turn parses cleanly; turns after an observation open with a summary; it ends answered."""
    turns = _assistant(t)
    if not turns:
        return "no assistant turn"
    for i, turn in enumerate(turns):
        p = parse_turn(turn)
        if p.errors:
            return f"turn {i}: {p.errors[0]}"
        if i > 0 and p.summary is None:
            return f"turn {i}: no <summary> after <information>"
    if parse_turn(turns[-1]).answer is None:
        return "no final <answer>"
    if sum(1 for x in turns if "<search>" in x) > t.meta.get("budget", 99):
        return "over the retrieval budget"
    return None


def check_answer(t: Trajectory) -> str | None:
    """The final answer must match the gold answer."""
    ans = parse_turn(_assistant(t)[-1]).answer or ""
    if not answer_matches(ans, t.meta["answer"], t.meta.get("aliases", ())):
        return f"answer {ans!r} != {t.meta['answer']!r}"
    return None


def check_summaries(t: Trajectory, min_support: float = 0.8) -> str | None:
    """Each summary must be supported by the <information> before it: its content words
    (framing words aside) must appear there, and a 'none mentions' summary must not hide
    an answer that is in fact present."""
    msgs = t.messages
    answers = [t.meta["answer"], *t.meta.get("aliases", ())]
    for i, m in enumerate(msgs):
        if m["role"] != "assistant" or i == 0:
            continue
        p = parse_turn(m["content"])
        if p.summary is None:
            continue
        obs = msgs[i - 1]["content"] if msgs[i - 1]["role"] == "user" else ""
        words = [w for w in content_words(p.summary) if w not in FRAME]
        vocab = set(content_words(obs))
        if words:
            support = sum(w in vocab for w in words) / len(words)
            if support < min_support:
                return f"summary support {support:.2f} < {min_support}"
        if "none mentions" in p.summary.lower() and locate(obs, answers):
            return "summary denies an answer that the evidence holds"
    return None


def check_degenerate(t: Trajectory, min_think_words: int = 4) -> str | None:
    """Empty, repeated or copy-the-question thinking, or the same search twice."""
    turns = [parse_turn(x) for x in _assistant(t)]
    thinks = [normalize(p.think or "") for p in turns]
    if any(len(x.split()) < min_think_words for x in thinks):
        return "think too short"
    if len(set(thinks)) < len(thinks):
        return "repeated think"
    question = next((m["content"] for m in t.messages if m["role"] == "user"), "")
    qline = next((ln for ln in question.splitlines() if ln.startswith("Question: ")), "")
    if qline and any(x == normalize(qline[len("Question: "):]) for x in thinks):
        return "think copies the question"
    calls = [(c.unit, normalize(c.query)) for p in turns for c in (p.calls or [])]
    if len(set(calls)) < len(calls):
        return "repeated search"
    return None


FILTERS: dict[str, Callable[[Trajectory], str | None]] = {
    "incomplete_steps": check_incomplete,
    "wrong_final_answer": check_answer,
    "summary_inconsistent": check_summaries,
    "degenerate_reasoning": check_degenerate,
}


def apply_filters(trajs: Sequence[Trajectory]) -> tuple[list[Trajectory], dict[str, int],
                                                         list[dict[str, str]]]:
    """(kept, removed count per filter, examples of removals) — first failing filter counts."""
    kept, counts, examples = [], Counter({k: 0 for k in FILTERS}), []
    for t in trajs:
        for name, check in FILTERS.items():
            why = check(t)
            if why:
                counts[name] += 1
                examples.append({"id": t.id, "filter": name, "why": why})
                break
        else:
            kept.append(t)
    return kept, dict(counts), examples


# --------------------------------------------------------------------------- split, stats
def split_of(traj_id: str, val_frac: float, seed: int) -> str:
    """train | val by a seeded hash of the question id (both variants of a question together)."""
    qid = traj_id.rsplit("-", 1)[0]
    return "val" if seeded_unit(seed, qid) < val_frac else "train"


def token_counts(trajs: Sequence[Trajectory], tokenizer: Any | None) -> list[int]:
    """Tokens per trajectory with the LLM's chat template (whitespace words without a tokenizer)."""
    out = []
    for t in trajs:
        if tokenizer is not None and getattr(tokenizer, "chat_template", None):
            ids = tokenizer.apply_chat_template(t.messages, tokenize=True)
            ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
            out.append(len(ids))
        else:
            out.append(sum(len(m["content"].split()) for m in t.messages))
    return out


def statistics(train: Sequence[Trajectory], val: Sequence[Trajectory],
               tokens: Sequence[int]) -> dict[str, Any]:
    """Count, steps distribution, mean tokens, multi-step share, split sizes."""
    allt = [*train, *val]
    steps = Counter(t.meta["searches"] for t in allt)
    return {"trajectories": len(allt), "train": len(train), "val": len(val),
            "steps_distribution": {str(k): steps[k] for k in sorted(steps)},
            "two_or_three_steps": sum(steps[k] for k in (2, 3)),
            "multi_step_share": round(sum(steps[k] for k in steps if k >= 2) / len(allt), 4) if allt else 0.0,
            "miss_then_hit": sum(bool(t.meta.get("miss_then_hit")) for t in allt),
            "wrong_first_route": sum(bool(t.meta.get("wrong_first")) for t in allt),
            "card_route": sum(bool(t.meta.get("card_route")) for t in allt),
            "mean_tokens": round(float(np.mean(tokens)), 1) if len(tokens) else 0.0,
            "max_tokens": int(max(tokens)) if len(tokens) else 0}


PAPER_STATS = {"trajectories": 900_000, "two_or_three_steps": 22_000, "mean_tokens": 2949,
               "train": 860_000, "val": 40_000, "multi_step_share": round(22_000 / 900_000, 4)}
