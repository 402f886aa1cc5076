"""Task-level and process-level metrics computed from a ``Trace`` and its ``Question``.

Everything here is deterministic and model-free, so any system's traces (ours or a user's)
are scored the same way:

- **answers**: SQuAD-style normalisation, exact match and token F1 against the answer and its
  aliases; *accuracy* is EM for open questions (on InfoSeek only, a quantity within a relative
  tolerance, as InfoSeek scores numerical answers; a year only when it is the same year) and
  choice identity for multiple-choice questions (a reply may name the choice
  by its text or by its letter);
- **retrieval**: Recall@k of the gold passages/evidence among the first k distinct items the
  trace retrieved (alternatives, such as every picture of an entity, count as any-of), and
  whether the gold knowledge unit was among them;
- **process**: Route Recall@1 (the units of the first routing/search step meet the gold units),
  Explanation Sparsity (tokens per exposed summary, retrieval bookkeeping excluded), format errors;
- **cost**: tokens, tool calls, seconds.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mmrag.schema import Evidence, Question, Trace

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)
_TOKEN = re.compile(r"\w+|[^\w\s]")
_NUMBER = re.compile(r"-?\d+(?:[.,]\d+)*")
_YEAR = re.compile(r"[12]\d{3}")
_LETTER = re.compile(r"^\(?([A-Za-z])[\).:]?(?:\s|$)")
# Separators between an id and the id of one of its parts (doc#s1, doc#s1#c0, unit::3, ...).
ID_SEPARATORS = ("#", "::", "/", "|", ":")
ROUTE_ACTIONS = frozenset({"route", "search"})


# --------------------------------------------------------------------------- answers
def normalize(text: str) -> str:
    """Lower-case, drop punctuation and articles, squeeze spaces (the SQuAD answer normaliser)."""
    text = "".join(ch for ch in str(text).lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_tokens(text: str) -> list[str]:
    """Tokens of a normalised answer, the unit of token F1."""
    return normalize(text).split()


def golds(question: Question) -> list[str]:
    """The gold answer and its aliases, without empties or duplicates."""
    return [g for g in dict.fromkeys([question.answer, *question.answer_aliases]) if str(g).strip()]


def list_items(text: str) -> list[str] | None:
    """The sorted, normalised items of a list answer ("B, A" -> ["a", "b"]); None if not a list."""
    if ", " not in str(text):
        return None
    return sorted(normalize(x) for x in str(text).split(","))


def same_list(prediction: str, gold: Iterable[str]) -> bool:
    """A list answer names the same items as a gold list, in any order (the one list rule)."""
    pred = list_items(prediction)
    return pred is not None and any(list_items(g) == pred for g in gold)


def exact_match(prediction: str, gold: Iterable[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer (lists in any order)."""
    gold = list(gold)
    p = normalize(prediction)
    return float(any(p == normalize(g) for g in gold) or same_list(prediction, gold))


def token_f1(prediction: str, gold: Iterable[str]) -> float:
    """Best bag-of-tokens F1 between the prediction and any gold answer (a same list scores 1)."""
    gold = list(gold)
    if same_list(prediction, gold):
        return 1.0
    pred = answer_tokens(prediction)
    best = 0.0
    for g in gold:
        ref = answer_tokens(g)
        if not pred or not ref:
            best = max(best, float(pred == ref))
            continue
        common = sum((Counter(pred) & Counter(ref)).values())
        if common:
            prec, rec = common / len(pred), common / len(ref)
            best = max(best, 2 * prec * rec / (prec + rec))
    return best


def _as_number(text: str) -> float | None:
    """The single number a short answer states, if it states exactly one."""
    found = _NUMBER.findall(str(text))
    if len(found) != 1:
        return None
    try:
        return float(found[0].replace(",", ""))
    except ValueError:
        return None


def is_numeric_answer(text: str) -> bool:
    """A quantity ("120", "120 m", "4.5 kg"), not a name that holds a number ("Dovo 200")."""
    tokens = str(text).strip().split()
    return bool(tokens) and len(tokens) <= 2 and _NUMBER.fullmatch(tokens[0]) is not None


def _is_quantity_reply(text: str) -> bool:
    """A short reply stating a number ("about 130", "130 m"), not a capitalised name holding one."""
    tokens = str(text).strip().split()
    words = [t for t in tokens if not _NUMBER.fullmatch(t.strip(string.punctuation))]
    return 0 < len(tokens) <= 3 and not any(w[:1].isupper() for w in words)


def is_year(text: str) -> bool:
    """A bare four-digit year ("1998"): a date, where 10 % would span two centuries."""
    return _YEAR.fullmatch(str(text).strip()) is not None


def numeric_match(prediction: str, gold: Iterable[str], rel_tol: float = 0.1) -> float:
    """1.0 when a quantity answers a quantity within ``rel_tol`` (InfoSeek's numerical rule).

    The reply must itself be a quantity ("Vrodul Fair 2033" is a name, not 2033), and a year
    gold needs the same year (InfoSeek's time answers), not one within 10 %.
    """
    if not _is_quantity_reply(prediction):
        return 0.0
    p = _as_number(prediction)
    if p is None:
        return 0.0
    for g in gold:
        if not is_numeric_answer(g):
            continue
        n = _as_number(g)
        if n is None:
            continue
        if is_year(g):
            if p == n:
                return 1.0
        elif abs(p - n) <= rel_tol * max(abs(n), 1e-9):
            return 1.0
    return 0.0


def resolve_choice(prediction: str, choices: Sequence[str]) -> str | None:
    """The choice a multiple-choice reply names: its text, its letter (A/B/...), or the one it contains."""
    if not choices:
        return None
    p = normalize(prediction)
    by_text = {normalize(c): c for c in choices}
    if p in by_text:
        return by_text[p]
    m = _LETTER.match(str(prediction).strip())
    if m:
        i = ord(m.group(1).upper()) - ord("A")
        rest = str(prediction).strip()[m.end():].strip()
        if 0 <= i < len(choices) and (not rest or normalize(rest) == normalize(choices[i])):
            return choices[i]
    contained = [c for n, c in by_text.items() if n and re.search(rf"\b{re.escape(n)}\b", p)]
    return contained[0] if len(contained) == 1 else None


def resolved_answer(prediction: str, question: Question) -> str:
    """The answer text a reply stands for (the named choice for multiple choice)."""
    choice = resolve_choice(prediction, question.choices)
    return choice if choice is not None else prediction


# Sets scored with InfoSeek's relative tolerance on quantities; every other set (DnC's MMQA and
# MMCoQA, BRIT, Wikipedia) is scored by exact match, as its paper does.
NUMERIC_TOLERANCE_DATASETS = frozenset({"infoseek"})


def accuracy(prediction: str, question: Question, rel_tol: float = 0.1) -> float:
    """Correctness: choice identity for multiple choice, else EM (or, on InfoSeek only, numeric
    agreement within ``rel_tol``)."""
    gold = golds(question)
    if question.choices:
        choice = resolve_choice(prediction, question.choices)
        return float(choice is not None and any(normalize(choice) == normalize(g) for g in gold))
    em = exact_match(prediction, gold)
    if question.dataset not in NUMERIC_TOLERANCE_DATASETS:
        return em
    return max(em, numeric_match(prediction, gold, rel_tol))


# --------------------------------------------------------------------------- retrieval
def id_matches(found: str, gold: str) -> bool:
    """Same id, or one is a part of the other (``doc#s1`` holds chunk ``doc#s1#c0``)."""
    if found == gold:
        return True
    a, b = (found, gold) if len(found) > len(gold) else (gold, found)
    return any(a.startswith(b + sep) for sep in ID_SEPARATORS)


def ranked_evidence(trace: Trace) -> list[Evidence]:
    """Distinct retrieved items in the order the system first saw them (units are routes, not items)."""
    seen, out = set(), []
    for e in trace.evidence():
        if e.kind == "unit" or e.id in seen:
            continue
        seen.add(e.id)
        out.append(e)
    return out


def gold_ids(question: Question) -> list[str]:
    """What Recall@k looks for: the gold passages when the set names them, else the gold evidence."""
    return list(dict.fromkeys(question.gold_passages or question.gold_evidence))


# BRIT's gold lists every picture of the entity a question needs (any one shows the attribute)
# and the section that states the fact: one any-of group of images, one of the rest.
ANY_OF_DATASETS = frozenset({"brit"})
_IMAGE_ID = re.compile(r"^img[-_]|\.(?:png|jpe?g|gif|webp)$", re.I)


def gold_groups(question: Question) -> list[list[str]]:
    """Gold evidence as any-of groups: ``meta.gold_groups`` if given; BRIT's convention (images
    any-of, sections any-of) on its sets; else every gold id is a group of its own."""
    explicit = (question.meta or {}).get("gold_groups")
    if explicit:
        return [[str(i) for i in g] for g in explicit if g]
    ids = gold_ids(question)
    if question.dataset in ANY_OF_DATASETS and not question.gold_passages:
        images = [i for i in ids if _IMAGE_ID.search(i)]
        rest = [i for i in ids if not _IMAGE_ID.search(i)]
        return [g for g in (rest, images) if g]
    return [[i] for i in ids]


def _found(e: Evidence, g: str) -> bool:
    return id_matches(e.id, g) or (e.doc_id is not None and e.doc_id == g)


def recall_at_k(items: Sequence[Evidence], gold: Sequence[str] | Sequence[Sequence[str]],
                k: int | None) -> float | None:
    """Share of gold groups with a member among the first ``k`` items (all items when k is None);
    a plain id list is one group per id."""
    if not gold:
        return None
    groups = [[g] if isinstance(g, str) else list(g) for g in gold]
    top = items if k is None else items[:k]
    return sum(any(_found(e, g) for e in top for g in grp) for grp in groups) / len(groups)


def unit_hit_at_k(items: Sequence[Evidence], units: set[str], k: int | None) -> float | None:
    """1.0 when an item among the first ``k`` came from a gold knowledge unit."""
    if not units:
        return None
    top = items if k is None else items[:k]
    return float(any(e.unit in units for e in top))


def route_targets(trace: Trace) -> list[list[str]]:
    """Units of each routing/search step, in order (a step may name several: ``U01,U03``)."""
    out = []
    for s in trace.steps:
        if s.action in ROUTE_ACTIONS and s.target:
            units = [u.strip() for u in s.target.split(",") if u.strip()]
            if units:
                out.append(units)
    return out


def route_recall_at_1(trace: Trace, units: set[str]) -> float | None:
    """1.0 when the units of the first routing step meet the gold units (MM-R2 intersects the
    sets); None without gold units."""
    if not units:
        return None
    targets = route_targets(trace)
    return float(bool(targets) and bool(set(targets[0]) & units))


def route_precision(trace: Trace, units: set[str]) -> float | None:
    """Share of routing steps that searched a gold unit (MM-R2's R_route)."""
    if not units:
        return None
    targets = route_targets(trace)
    return sum(bool(set(t) & units) for t in targets) / len(targets) if targets else 0.0


# --------------------------------------------------------------------------- process
def count_tokens(text: str) -> int:
    """Word and punctuation tokens: a tokenizer-free, deterministic length."""
    return len(_TOKEN.findall(text or ""))


# Steps a retriever writes, not a model: their "summary" is bookkeeping (BRIT's entities and kept
# graphs), not an explanation the system exposed.
SYSTEM_ACTIONS = frozenset({"retrieve"})


def summaries(trace: Trace) -> list[str]:
    """The summaries a trace exposed (non-empty), retrieval bookkeeping left out."""
    return [s.summary for s in trace.steps
            if s.summary and s.summary.strip() and s.action not in SYSTEM_ACTIONS]


def reads(trace: Trace) -> bool:
    """The system produced text (an answer or a turn), i.e. it has a reader, not retrieval only."""
    return bool(trace.answer.strip()) or any(s.text and s.text.strip() for s in trace.steps)


def sparsity(trace: Trace, tokens: Callable[[str], int] = count_tokens) -> float | None:
    """Mean tokens per exposed summary; None when the trace exposes none."""
    found = summaries(trace)
    return sum(tokens(s) for s in found) / len(found) if found else None


# --------------------------------------------------------------------------- one question
@dataclass
class Scored:
    """Every per-question number the evaluator reports (None: not applicable)."""

    question_id: str
    system: str
    kind: str
    split: str
    answered: bool
    reads: bool  # the system has a reader (else retrieval only: no answer to score)
    accuracy: float
    em: float
    f1: float
    recall: dict[str, float | None] = field(default_factory=dict)
    unit_hit: dict[str, float | None] = field(default_factory=dict)
    routed: bool = False  # the trace routed to / searched in a named unit at least once
    route_recall_at_1: float | None = None
    route_precision: float | None = None
    sparsity: float | None = None
    n_summaries: int = 0
    judge_consistency: float | None = None
    judge_support: float | None = None
    format_errors: int = 0
    tokens: int = 0
    tool_calls: int = 0
    seconds: float = 0.0

    def row(self) -> dict[str, Any]:
        """Flat dict (recall@k and unit_hit@k as columns) for a DataFrame."""
        out = {k: v for k, v in self.__dict__.items() if k not in ("recall", "unit_hit")}
        out.update({f"recall@{k}": v for k, v in self.recall.items()})
        out.update({f"unit_hit@{k}": v for k, v in self.unit_hit.items()})
        return out


def gold_units(question: Question, unit_of: dict[str, str] | None = None) -> set[str]:
    """Gold knowledge units: ``meta.gold_unit(s)``, else the units holding the gold passages."""
    units = set()
    meta = question.meta or {}
    if meta.get("gold_unit"):
        units.add(str(meta["gold_unit"]))
    units.update(str(u) for u in meta.get("gold_units") or [])
    if not units and unit_of:
        for g in question.gold_passages:
            if g in unit_of:
                units.add(unit_of[g])
            else:
                units.update(u for p, u in unit_of.items() if id_matches(p, g))
    return units


def score_trace(trace: Trace | None, question: Question, ks: Sequence[int],
                unit_of: dict[str, str] | None = None,
                tokens: Callable[[str], int] = count_tokens) -> Scored:
    """All model-free numbers for one question; a missing trace scores as an empty answer."""
    units = gold_units(question, unit_of)
    if trace is None:
        trace = Trace(question_id=question.id, system="", answer="")
        answered = False
    else:
        answered = bool(trace.answer.strip())
    gold = golds(question)
    pred = resolved_answer(trace.answer, question)
    items = ranked_evidence(trace)
    gids = gold_groups(question)
    keys: list[int | None] = [*ks, None]
    return Scored(
        question_id=question.id, system=trace.system, kind=question.kind, split=question.split,
        answered=answered, reads=reads(trace), accuracy=accuracy(trace.answer, question),
        em=exact_match(pred, gold), f1=token_f1(pred, gold),
        recall={("all" if k is None else str(k)): recall_at_k(items, gids, k) for k in keys},
        unit_hit={("all" if k is None else str(k)): unit_hit_at_k(items, units, k) for k in keys},
        routed=bool(route_targets(trace)), route_recall_at_1=route_recall_at_1(trace, units),
        route_precision=route_precision(trace, units),
        sparsity=sparsity(trace, tokens), n_summaries=len(summaries(trace)),
        format_errors=max(trace.format_errors, sum(bool(s.format_error) for s in trace.steps)),
        tokens=trace.tokens_in + trace.tokens_out, tool_calls=trace.tool_calls,
        seconds=trace.seconds)


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the defined values; None when none is defined."""
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None
