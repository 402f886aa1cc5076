"""The papers' claims, pre-registered in ``claims.yaml``, decided from per-question traces.

``claims.yaml`` (the repository root) holds every claim the three papers make (each citing its
sentence, its numbers as ``paper_tables.yaml`` cells), our own checks apart as diagnostics, and the
rules that decide them. :func:`registry` and :func:`diagnostics` expand it into :class:`Claim` s on
the question sets the stages' params name (:class:`ClaimSets`). :func:`measure` pairs the two
systems' traces (``data/<stage>/traces/<system>__<set>.jsonl``) question by question and gives the
estimate, its (1 - alpha) CI, the exact test's p, n, mde, the paper's effect scaled to our ceiling
and the n that effect needs; :func:`evaluate` applies the format rule, Holm-Bonferroni within each
paper, the verdict (reproduced, weaker, stronger, contradicted, inconclusive, untestable here, each
with its reason), the training-seed reruns (``holds``) and the rule-change check, and returns the
document the report writes as ``results/report/claims.json``.
``python -m mmrag.evaluate claims`` recomputes it from ``data/`` in seconds, with no model call.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from mmrag import io
from mmrag.evaluate import evaluator, papers, stats
from mmrag.evaluate.judge import LexicalJudge
from mmrag.evaluate.metrics import Scored, accuracy
from mmrag.io import read_json, read_jsonl, trace_path
from mmrag.models.registry import PROVISIONED
from mmrag.schema import Question, load_questions, load_traces
from mmrag.stages import new_figure

PREREG = io.ROOT / "claims.yaml"
VERDICTS = ("reproduced", "weaker", "stronger", "contradicted", "inconclusive", "untestable here")
BINARY = ("accuracy", "em", "brit_recall", "route_recall@1", "loop_fired")
# why a metric is undefined on every question of a system (the reason of an empty claim)
UNDEFINED = {"sparsity": " (its traces expose no summary: the model does not write the summary format)",
             "accuracy": " (it has no reader: retrieval-only traces)",
             "route_recall@1": " (it never routes to a unit)"}
SUMMARY_ONLY = "_summary_only"  # two_axis_eval: a policy's answers from its exposed summaries alone
POLICIES = ("base", "sft", "grpo")  # MM-R2's policies (a diagnostic's for_each: policy)
SEED = "{}@seed{}"  # a training seed's rerun of a system (claims.yaml rules.seeds): <system>@seed<k>


# --------------------------------------------------------------------------- the pre-registration
def blob_hash(data: bytes) -> str:
    """What ``git hash-object`` prints for a file with these bytes (its blob id)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True)
class Prereg:
    """claims.yaml, read: its rules, claim and diagnostic entries, and its git blob hash."""

    path: Path
    raw: Mapping[str, Any]
    blob: str

    @property
    def rules(self) -> Mapping[str, Any]:
        return self.raw["rules"]

    def value(self, key: str) -> Any:
        """A rule's value ("alpha", "format.limit", ...)."""
        node: Any = self.rules
        for part in key.split("."):
            node = node[part]
        return node["value"] if isinstance(node, Mapping) and "value" in node else node

    @property
    def claims(self) -> list[Mapping[str, Any]]:
        return list(self.raw.get("claims") or [])

    @property
    def diagnostics(self) -> list[Mapping[str, Any]]:
        return list(self.raw.get("diagnostics") or [])

    def entry(self, spec_id: str) -> Mapping[str, Any] | None:
        return next((e for e in self.claims + self.diagnostics if e.get("id") == spec_id), None)

    def seed_source(self, source: str) -> Mapping[str, Any]:
        """A seed source of rules.seed_sources as ``{stage, why}``: ``stage`` names the stage whose
        folder holds its seed reruns' traces (absent: the claim's own stage's folder), ``why`` says
        what the source redraws; a bare string is the ``why`` alone."""
        node = (self.rules.get("seed_sources") or {}).get(source, source)
        return node if isinstance(node, Mapping) else {"why": str(node)}

    def seed_reason(self, source: str) -> str:
        return str(self.seed_source(source).get("why", source))

    def seed_stage(self, source: str, claim_stage: str) -> str:
        """The stage whose data/<stage>/traces holds a claim's seed reruns (the claim's own stage
        unless its seed source names another, e.g. CLIP's seeds in brit_seeds)."""
        return str(self.seed_source(source).get("stage") or claim_stage)


_PREREG_CACHE: dict[tuple[str, int, int], Prereg] = {}


def load_prereg(path: str | Path | None = None) -> Prereg:
    """claims.yaml (default: the repository's), read once per version of the file."""
    p = Path(path or PREREG).resolve()
    stat = p.stat()
    key = (str(p), stat.st_mtime_ns, stat.st_size)
    if key not in _PREREG_CACHE:
        data = p.read_bytes()
        raw = yaml.safe_load(data.decode("utf-8"))
        if not isinstance(raw, dict) or "rules" not in raw or not isinstance(raw.get("claims"), list):
            raise ValueError(f"{p}: expected a mapping with 'rules' and a 'claims' list")
        _PREREG_CACHE[key] = Prereg(p, raw, blob_hash(data))
    return _PREREG_CACHE[key]


# --------------------------------------------------------------------------- claims
@dataclass(frozen=True)
class Claim:
    """One claim of a paper (or one diagnostic) and the contrast that tests it here (A - B, or A's level)."""

    id: str
    paper: str  # BRIT | DnC | MM-R2
    table: str  # where the paper states it: the cells' table, else the cited section
    claim: str
    stage: str  # the stage whose traces hold the runs
    question_set: str  # A's set (B's too unless b_set)
    a: str  # A's system (trace file name part)
    b: str | None  # B's system; None: A's level
    metric: str
    paper_value: tuple[float | None, ...] = ()  # the paper's A (and B), from paper_tables.yaml cells
    direction: int = 1  # +1 the paper has A above B, -1 below; 0 an equivalence or a level
    kinds: tuple[str, ...] = ()  # only questions of these kinds
    untestable: str = ""  # why it cannot be measured here at all (with the run that is missing)
    twin_set: str = ""  # (a diagnostic) each side's change from its twin question (meta.pair_id)
    b_set: str = ""  # B's own set, paired with A's by ``pair_by``
    pair_by: str = ""  # "": by question id; "pair_id": by meta.pair_id (NEA's two halves)
    margin: float | None = None  # equivalence (A ~ B) or level (A ~ the paper's value) within +-margin
    ratio: bool = False  # A's right answers over B's on the same questions (fidelity), a level
    min_correct: int = 0  # a ratio is undefined below this many right B answers
    conversational: bool = False  # questions come in conversations: resample and flip whole ones
    type: str = "method"  # method | model: which side of claims.yaml's format rule
    magnitude: bool = True  # False: only the direction is compared (magnitude_note says why)
    magnitude_note: str = ""
    ceiling: Mapping[str, Any] | None = None  # what caps the metric here (claims.yaml rules.ceiling)
    ceilings: Mapping[str, Any] | None = None  # (the ceilings diagnostic) kind -> ceiling source
    cite: Mapping[str, str] = field(default_factory=dict)  # {section, quote}
    cells: tuple[str, ...] = ()  # the paper_tables.yaml cells of A (and B), as "table / row / column"
    seeds: str = "none"  # the trained component a seed run redraws (claims.yaml rules.seed_sources)
    n_ref: Mapping[str, Any] | None = None  # the params key that sizes the sample, with its value
    diagnostic: bool = False
    why: str = ""  # a diagnostic: why it is ours, not the paper's
    note: str = ""
    spec: str = ""  # the claims.yaml entry's id (a template's, for per-LLM claims)

    @property
    def needs_format(self) -> bool:
        """A method contrast: the format rule applies (claims.yaml rules.format)."""
        return self.type == "method"

    @property
    def level(self) -> bool:
        return self.b is None or self.ratio

    @property
    def paper_pair(self) -> tuple[float, float] | None:
        """The paper's two rates (A, B) of a directional contrast whose size is compared; None otherwise
        (a level, an equivalence, a claim with only its direction compared)."""
        vals = self.paper_value
        if self.level or self.direction == 0 or not self.magnitude or len(vals) != 2 or None in vals:
            return None
        return float(vals[0]), float(vals[1])  # type: ignore[arg-type]

    @property
    def paper_effect(self) -> float | None:
        """The paper's A - B (or its level), None where it prints no number for it."""
        vals = self.paper_value
        if self.level:
            return float(vals[0]) if vals and vals[0] is not None else None
        if len(vals) == 2 and None not in vals:
            return float(vals[0]) - float(vals[1])  # type: ignore[arg-type]
        return None


@dataclass(frozen=True)
class ClaimSets:
    """The question sets whose traces decide the claims: each stage writes its traces under its
    configured set (``write_traces(stage, system, set)``), so a user's own set is decided too."""

    brit: str  # brit_linking.question_set (Table 1; Table 2's ``<set>_retrieval`` traces)
    nea: str  # brit_linking.nea_set (Table 3; its original half is ``<set>_orig``)
    multihop: str  # toolagent_eval.question_set (DnC Table 3)
    conversational: str  # toolagent_eval.conv_set (DnC Table 4; "" = none)
    infoseek: str  # two_axis_eval.question_set (MM-R2's tables)

    def all(self) -> list[str]:
        """The question sets named (the files every trace set is scored against)."""
        return [s for s in (self.brit, self.nea, self.multihop, self.conversational, self.infoseek) if s]

    @property
    def retrieval(self) -> str:
        """brit_linking's retrieval-only traces of every test question of the BRIT set."""
        return f"{self.brit}_retrieval"

    @property
    def table1_claim(self) -> str:
        """brit_linking's Table 1 claim pair on its whole sample (brit_linking.claim_questions)."""
        return f"{self.brit}_claim"

    @property
    def loop_claim(self) -> str:
        """two_axis_eval's agentic-loop claim pair on its whole sample (two_axis_eval.claim_per_split)."""
        return f"{self.infoseek}_claim"

    def role(self, name: str) -> str:
        """A claims.yaml set role as this configuration's set name ("" for an empty conv_set)."""
        roles = {"brit": self.brit, "brit.retrieval": self.retrieval, "brit.claim": self.table1_claim,
                 "nea": self.nea, "nea.orig": f"{self.nea}_orig", "multihop": self.multihop,
                 "conversational": self.conversational, "infoseek": self.infoseek,
                 "infoseek.claim": self.loop_claim}
        if name not in roles:
            raise ValueError(f"unknown question-set role '{name}' (roles: {', '.join(roles)})")
        return roles[name]

    @classmethod
    def from_params(cls, params: Any) -> ClaimSets:
        """The sets the stages of ``params`` (a :class:`mmrag.config.Params`) write traces under."""
        return cls(params.brit_linking.question_set, params.brit_linking.nea_set,
                   params.toolagent_eval.question_set, params.toolagent_eval.conv_set,
                   params.two_axis_eval.question_set)


ROLES = ("brit", "brit.retrieval", "brit.claim", "nea", "nea.orig", "multihop", "conversational", "infoseek",
         "infoseek.claim")
# the generated world's sets, which the default profile evaluates on
WORLD_SETS = ClaimSets(brit="brit", nea="brit_nea", multihop="mmqa", conversational="mmcoqa", infoseek="infoseek")
RETRIEVAL = WORLD_SETS.retrieval


def size_sweep(names: Sequence[str]) -> tuple[list[str], str]:
    """(the LLMs a size claim may compare, smallest first; how they are comparable). Models of the
    registry are ordered by parameter count and only those of one tuning are compared (the larger
    group; instruction-tuned on a tie): a base model beside a chat model differs in more than size.
    Names the registry does not know (hub ids) keep the order given, smallest first."""
    specs = [PROVISIONED.get(n) for n in names]
    if not names or any(sp is None or not sp.parameters_m for sp in specs):
        return list(names), "in the order given (sizes not in the model registry)"
    chat = [sp for sp in specs if sp and sp.instruct]
    base = [sp for sp in specs if sp and not sp.instruct]
    group, tuning = (chat, "instruction-tuned") if len(chat) >= len(base) else (base, "base")
    left_out = [sp.name for sp in specs if sp and sp not in group]
    how = f"all {tuning}" + (f"; left out, of another tuning: {', '.join(left_out)}" if left_out else "")
    return [sp.name for sp in sorted(group, key=lambda sp: sp.parameters_m)], how


def _fill(text: Any, values: Mapping[str, Any]) -> Any:
    """``text`` with each {key} replaced (numbers as %g); other braces are left alone."""
    if not isinstance(text, str):
        return text
    for k, v in values.items():
        text = text.replace("{" + k + "}", f"{v:g}" if isinstance(v, float) else str(v))
    return text


def _ref_value(node: Any) -> Any:
    return node.get("value") if isinstance(node, Mapping) else node


def _claim(spec: Mapping[str, Any], sets: ClaimSets, values: Mapping[str, Any], *, diagnostic: bool,
           margin: float | None, min_correct: int | None, untestable: str = "") -> Claim:
    """One Claim from a claims.yaml entry, its placeholders filled with ``values``."""
    paper = spec["paper"]
    cells = spec.get("cells") or {}
    refs = [cells[s] for s in ("a", "b") if s in cells]
    paper_value = tuple(papers.value(paper, *ref) for ref in refs)
    section = (spec.get("cite") or {}).get("section", "")
    set_name = sets.role(spec["set"])
    why_not = untestable or _fill(spec.get("untestable", ""), values)
    if not why_not and not set_name and spec["set"] == "conversational":
        why_not = "no conversational set (toolagent_eval.conv_set is empty)"
    mag = spec.get("magnitude") or {}
    b = _fill(spec.get("b"), values)
    return Claim(
        id=_fill(spec["id"], values), paper=paper, table=refs[0][0] if refs else section,
        claim=_fill(spec.get("claim", ""), values), stage=spec["stage"], question_set=set_name,
        a=_fill(spec.get("a", ""), values), b=b or None, metric=spec.get("metric", ""),
        paper_value=paper_value, direction=int(spec.get("direction", 1 if b else 0)),
        kinds=tuple(spec.get("kinds") or ()), untestable=why_not,
        twin_set=sets.role(spec["twin_set"]) if spec.get("twin_set") else "",
        b_set=sets.role(spec["b_set"]) if spec.get("b_set") else "", pair_by=spec.get("pair_by", ""),
        margin=(margin if margin is not None else _ref_value(spec["margin"])) if spec.get("margin") else None,
        ratio=bool(spec.get("ratio")),
        min_correct=int(min_correct if min_correct else _ref_value(spec.get("min_correct")) or 0),
        conversational=bool(spec.get("conversational")), type=spec.get("type", "method"),
        magnitude=mag.get("compare", True) is not False, magnitude_note=mag.get("why", ""),
        ceiling=spec.get("ceiling"), ceilings=spec.get("ceilings"),
        cite=dict(spec.get("cite") or {}), cells=tuple(" / ".join(map(str, r)) for r in refs),
        seeds=spec.get("seeds", "none"), n_ref=spec.get("n"), diagnostic=diagnostic, why=spec.get("why", ""),
        note=spec.get("note", ""), spec=spec["id"])


def _expand(spec: Mapping[str, Any], sets: ClaimSets, llms: Sequence[str], size_llms: Sequence[str],
            settings: Sequence[Mapping[str, Any]], *, diagnostic: bool, margin: float | None,
            min_correct: int | None) -> list[Claim]:
    """A claims.yaml entry as claims: one per LLM (for_each: llm), per policy, per sensitivity
    setting (from: sensitivity), the size pair (size: true), or itself."""
    kw = dict(diagnostic=diagnostic, margin=margin, min_correct=min_correct)
    if spec.get("for_each") == "llm":
        if not llms:
            return [_claim(spec, sets, {"llm": "no LLM"}, **kw,  # type: ignore[arg-type]
                           untestable="no DnC LLM configured (toolagent_eval.llms is empty)")]
        return [_claim(spec, sets, {"llm": m}, **kw) for m in llms]  # type: ignore[arg-type]
    if spec.get("for_each") == "policy":
        return [_claim(spec, sets, {"policy": p}, **kw) for p in POLICIES]  # type: ignore[arg-type]
    if spec.get("from") == "sensitivity":
        if not settings:
            return [_claim(spec, sets, {"knob": "a knob", "params_value": "its value", "value": "another",
                                        "system": "", "params_system": ""}, **kw,  # type: ignore[arg-type]
                           untestable="data/brit_linking/sensitivity.json lists no moved knob "
                                      "(rerun `dvc repro brit_linking`)")]
        out = []
        for s in settings:
            c = _claim(spec, sets, dict(s), **kw)  # type: ignore[arg-type]
            out.append(replace(c, id=f"{spec['id']}.{s['knob']}={s['value']:g}"))
        return out
    if spec.get("size"):
        swept = [*llms, *[n for n in size_llms if n not in llms]]
        sizes, how = size_sweep(swept)
        if len(sizes) > 1:
            c = _claim(spec, sets, {"small": sizes[0], "big": sizes[-1]}, **kw)  # type: ignore[arg-type]
            return [replace(c, claim=f"{c.claim} ({how})")]
        why = (f"no two comparable LLMs: {how}" if len(swept) > 1 else
               "one LLM configured (toolagent_eval.llms and size_llms): no size contrast "
               "(missing run: DnC fine-tuned on a second LLM of the same tuning)")
        return [_claim(spec, sets, {"small": "a smaller LLM", "big": "a bigger LLM"}, **kw,  # type: ignore[arg-type]
                       untestable=why)]
    return [_claim(spec, sets, {}, **kw)]  # type: ignore[arg-type]


def registry(llms: Sequence[str] = (), size_llms: Sequence[str] = (),
             sensitivity: Sequence[Mapping[str, Any]] = (), margin: float | None = None,
             fidelity_min_correct: int = 0, sets: ClaimSets = WORLD_SETS,
             prereg: Prereg | None = None) -> list[Claim]:
    """Every paper claim of claims.yaml, in its order, on the question sets ``sets``: DnC's per LLM
    (``llms``) and the size claim from the smallest to the biggest comparable LLM of ``llms`` +
    ``size_llms``; ``margin`` / ``fidelity_min_correct`` override claims.yaml's values
    (``sensitivity`` feeds the diagnostics only; accepted here for the callers' convenience)."""
    pre = prereg or load_prereg()
    return [c for spec in pre.claims for c in _expand(spec, sets, llms, size_llms, sensitivity, diagnostic=False,
                                                      margin=margin, min_correct=fidelity_min_correct or None)]


def diagnostics(sensitivity: Sequence[Mapping[str, Any]] = (), margin: float | None = None,
                sets: ClaimSets = WORLD_SETS, prereg: Prereg | None = None, llms: Sequence[str] = ()) -> list[Claim]:
    """claims.yaml's diagnostics (our own checks), BRIT's sensitivity one per setting in ``sensitivity``
    (brit_linking's sensitivity.json)."""
    pre = prereg or load_prereg()
    return [c for spec in pre.diagnostics for c in _expand(spec, sets, llms, (), sensitivity, diagnostic=True,
                                                           margin=margin, min_correct=None)]


# --------------------------------------------------------------------------- data
def data_dir(data: Path | None) -> Path:
    """``data``, or the data folder at call time (a test that redirects io.DATA is never read past)."""
    return io.DATA if data is None else data


def results_dir(data: Path | None, results: Path | None = None) -> Path:
    """Where the stages' metrics.json are: ``results``, else io.RESULTS beside the repository's
    data folder, else ``<data>/../results``."""
    if results is not None:
        return results
    d = data_dir(data)
    return io.RESULTS if d.resolve() == io.DATA.resolve() else d.parent / "results"


def question_file(question_set: str, data: Path | None = None) -> Path | None:
    """data/<corpus>/questions/<set>.jsonl, the world's first; a retrieval-only trace set
    (``<set>_retrieval``), Table 1's claim sample (``<set>_claim``) and NEA's original half
    (``<set>_orig``) are scored against their question set's file."""
    question_set = question_set.removesuffix("_retrieval").removesuffix("_orig").removesuffix("_claim")
    found = sorted(data_dir(data).glob(f"*/questions/{question_set}.jsonl"), key=lambda p: p.parts[-3] != "world")
    return found[0] if found else None


def unit_map(data: Path | None = None) -> dict[str, str]:
    """passage id -> KnowledgeMap unit of the world's map (Route Recall@1's gold units)."""
    path = data_dir(data) / "knowledge_map" / "world" / "passages.jsonl"
    if not path.exists():
        return {}
    return {str(r.get("passage_id", r.get("id"))): str(r["unit"]) for r in read_jsonl(path)}


def data_relative(path: Path, data: Path | None) -> str:
    """A trace file's name under the data folder: what claims.json records (never a machine's path)."""
    return path.relative_to(data_dir(data)).as_posix()


@dataclass(frozen=True)
class SeedRun:
    """A training seed's rerun of a claim's systems: seed ``k``, whose traces
    (``<system>@seed<k>__<set>.jsonl``) are in data/<stage>/traces, ``stage`` being the seed
    source's (claims.yaml rules.seed_sources) or the claim's own."""

    k: int
    stage: str


def trace_file(stage: str, system: str, question_set: str, data: Path | None = None,
               seed: SeedRun | None = None) -> Path:
    """A system's trace file; with ``seed``, its seed-k rerun's (system ``<system>@seed<k>`` in the
    seed run's stage folder) where there is one, else the main run's (a side nothing trained differs in)."""
    if seed is not None:
        seeded = trace_path(seed.stage, SEED.format(system, seed.k), question_set, data)
        if seeded.exists():
            return seeded
    return trace_path(stage, system, question_set, data)


def seed_runs(stage: str, systems: Sequence[str], question_sets: Sequence[str], data: Path | None = None) -> list[int]:
    """The training seeds k whose reruns wrote traces for one of ``systems`` on one of the sets
    (data/<stage>/traces/<system>@seed<k>__<set>.jsonl)."""
    folder = data_dir(data) / stage / "traces"
    found = set()
    for system in systems:
        for qset in question_sets:
            for p in folder.glob(f"{system}@seed*{io.TRACE_SEP}{qset}.jsonl") if folder.exists() else []:
                k = p.name[len(system) + len("@seed"):-len(f"{io.TRACE_SEP}{qset}.jsonl")]
                if k.isdigit():
                    found.add(int(k))
    return sorted(found)


def value(s: Scored, metric: str) -> float | None:
    """One question's number for a claim's metric (None: not applicable to it)."""
    if metric == "brit_recall":  # BRIT's recall ratio: every any-of gold group found
        r = s.recall.get("all")
        return None if r is None else float(r == 1.0)
    if metric.startswith("recall@"):
        return s.recall.get(metric.split("@")[1])
    if metric == "route_recall@1":
        return s.route_recall_at_1
    if metric == "tool_calls":
        return float(s.tool_calls)
    if metric == "accuracy" and not s.reads:
        return None
    return getattr(s, metric)


_SCORED: dict[tuple[str, int, int, int], list[Scored]] = {}  # one scoring per trace file and question set


def _scored(path: Path, questions: Mapping[str, Question], units: Mapping[str, str], system: str) -> list[Scored]:
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size, id(questions))
    if key not in _SCORED:
        traces = [t for t in load_traces(path) if t.question_id in questions]
        qs = [questions[t.question_id] for t in traces]
        _SCORED[key] = evaluator.score(traces, qs, (1, 5), dict(units), LexicalJudge(), system=system)
    return _SCORED[key]


def per_question(stage: str, system: str, question_set: str, metric: str, kinds: Sequence[str],
                 questions: Mapping[str, Question], units: Mapping[str, str],
                 data: Path | None = None, seed: SeedRun | None = None) -> dict[str, float] | None:
    """question id -> value for one system's traces (None when the trace file is missing)."""
    path = trace_file(stage, system, question_set, data, seed)
    if not path.exists():
        return None
    if metric == "loop_fired":  # the episode searched more than once
        return {t.question_id: float(sum(s.action == "search" for s in t.steps) >= 2) for t in load_traces(path)
                if t.question_id in questions and (not kinds or questions[t.question_id].kind in kinds)}
    return {s.question_id: v for s in _scored(path, questions, units, system)
            if (not kinds or questions[s.question_id].kind in kinds) and (v := value(s, metric)) is not None}


def format_flags(stage: str, system: str, question_set: str, data: Path | None = None,
                 seed: SeedRun | None = None) -> dict[str, bool]:
    """question id -> whether the system's replies broke the format at least once."""
    path = trace_file(stage, system, question_set, data, seed)
    return {t.question_id: bool(t.format_errors or any(s.format_error for s in t.steps))
            for t in (load_traces(path) if path.exists() else [])}


def format_error_share(stage: str, system: str, question_set: str, ids: Sequence[str],
                       data: Path | None = None) -> float:
    """Share of the claim's questions on which the system's replies broke the format at least once."""
    flags = format_flags(stage, system, question_set, data)
    hit = [flags[i] for i in ids if i in flags]
    return round(sum(hit) / len(hit), 4) if hit else 0.0


def right_answers(stage: str, system: str, question_set: str, questions: Mapping[str, Question],
                  data: Path | None = None, seed: SeedRun | None = None) -> dict[str, float] | None:
    """question id -> 1.0 if the trace's answer is right, else 0.0 (an empty answer is a wrong one,
    not a missing one: a ratio of right answers must not drop the hard questions)."""
    path = trace_file(stage, system, question_set, data, seed)
    if not path.exists():
        return None
    return {t.question_id: float(accuracy(t.answer, questions[t.question_id]))
            for t in load_traces(path) if t.question_id in questions}


def _by_pair(values: Mapping[str, float], questions: Mapping[str, Question]) -> dict[str, float]:
    return {str(questions[i].meta.get("pair_id")): v for i, v in values.items()
            if questions[i].meta.get("pair_id") is not None}


def changes(claim: Claim, system: str, questions: Mapping[str, Question], units: Mapping[str, str],
            data: Path | None = None, seed: SeedRun | None = None) -> dict[str, float] | None:
    """pair id -> the system's value on the question minus on its twin (None: a trace file is missing)."""
    now = per_question(claim.stage, system, claim.question_set, claim.metric, claim.kinds, questions, units, data,
                       seed)
    twin = per_question(claim.stage, system, claim.twin_set, claim.metric, claim.kinds, questions, units, data, seed)
    if now is None or twin is None:
        return None
    before = _by_pair(twin, questions)
    return {p: v - before[p] for p, v in _by_pair(now, questions).items() if p in before}


def chance_of(questions: Mapping[str, Question], ids: Sequence[str]) -> float:
    """The mean 1 / len(choices) of these questions (0 for open answers): a guesser's accuracy."""
    vals = [1 / len(questions[i].choices) if questions[i].choices else 0.0 for i in ids if i in questions]
    return float(np.mean(vals)) if vals else 0.0


def lookup_ceiling(spec: Mapping[str, Any] | None, claim: Claim, questions: Mapping[str, Question],
                   units: Mapping[str, str], data: Path | None, results: Path | None,
                   sets: ClaimSets | None = None) -> tuple[float | None, str]:
    """(our ceiling of the claim's metric, where it was read), None where it was not measured: a
    stage's metrics.json at ``path``, or the accuracy of a ceiling run's traces."""
    if not spec:
        return None, ""
    if "metrics" in spec:
        f = results_dir(data, results) / spec["metrics"] / "metrics.json"
        where = f"results/{spec['metrics']}/metrics.json: {' / '.join(map(str, spec['path']))}"
        if not f.exists():
            return None, where + " (not written yet)"
        node: Any = read_json(f)
        for part in spec["path"]:
            node = node.get(part) if isinstance(node, Mapping) else None
        return (float(node) if isinstance(node, (int, float)) else None), where
    qset = (sets or WORLD_SETS).role(spec["set"]) if spec.get("set") else claim.question_set
    vals = per_question(claim.stage, spec["traces"], qset, "accuracy", claim.kinds, questions, units, data)
    where = f"{spec['traces']} traces on {qset}"
    if not vals:
        return None, where + " (none)"
    return float(np.mean(list(vals.values()))), f"{where} (n = {len(vals)})"


# --------------------------------------------------------------------------- deciding
def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), digits)


@dataclass
class Decision:
    """One record of claims.json."""

    id: str
    paper: str
    table: str
    claim: str
    contrast: str
    metric: str
    paper_value: list[float | None]
    paper_effect: float | None
    test: str
    cite: dict[str, str] = field(default_factory=dict)
    cells: list[str] = field(default_factory=list)
    type: str = "method"
    scaled_effect: float | None = None  # the paper's effect scaled to our ceiling (= paper_effect without one)
    scaling: dict[str, Any] | None = None  # ceiling, chance, factor, source
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    p_adj: float | None = None  # Holm within the paper
    n: int = 0
    mde: float | None = None
    n_needed: int | None = None
    pool: int | None = None  # questions of that set (test split, the claim's kinds) this repository has
    verdict: str = "untestable here"
    reason: str = ""
    holds: str | None = None  # training seeds with the main run's verdict, "j/K"; "1 seed" without seed runs
    holds_reason: str = ""
    seeds: dict[str, str] = field(default_factory=dict)  # training seed k -> its rerun's verdict
    rule_check: str = ""
    rule_changed: bool | None = None
    diagnostic: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def interval(xa: np.ndarray, xb: np.ndarray | None, clusters: Sequence[str] | None, binary: bool,
             alpha: float, reps: int, seed: int) -> tuple[float, float | None, float | None]:
    """(estimate, low, high): A's level (``xb`` None), else A - B: Newcombe's paired score interval
    for 0/1 outcomes, a paired bootstrap for means, whole conversations resampled when ``clusters``
    is given."""
    if xb is None:
        lo, hi = stats.mean_ci(list(xa), alpha, reps, seed)
        return float(xa.mean()), lo, hi
    if binary and clusters is None:  # a percentile bootstrap of few discordant pairs ends at exactly 0
        only_a, only_b = stats.discordant(xa, xb)
        both = int(np.sum((xa == 1) & (xb == 1)))
        return stats.newcombe_paired(both, only_a, only_b, len(xa) - both - only_a - only_b, alpha)
    if clusters is not None:
        est, lo, hi = stats.cluster_bootstrap(xa, xb, clusters, alpha, reps, seed)
    else:
        est, lo, hi = stats.paired_bootstrap(xa, xb, alpha, reps, seed)
    if binary and not np.any(xa != xb):  # no discordant pair: the bootstrap collapses to [0, 0]
        u = stats.wilson(0, len(xa), alpha)[1] or 1.0
        lo, hi = -u, u
    return est, lo, hi


def p_value(xa: np.ndarray, xb: np.ndarray | None, clusters: Sequence[str] | None, binary: bool,
            reps: int, seed: int) -> float | None:
    """The exact test of A - B against 0: McNemar for paired 0/1 outcomes, else sign flipping (of
    whole conversations when ``clusters`` is given)."""
    if xb is None:
        return None
    if clusters is not None:
        return stats.cluster_sign_flip_p(xa - xb, clusters, reps, seed)
    if binary:
        return stats.mcnemar_exact(*stats.discordant(xa, xb))
    return stats.sign_flip_p(xa - xb, reps, seed)


def needed(claim: Claim, binary: bool, d: Decision, alpha: float, power: float) -> int | None:
    """Questions needed to detect the paper's effect, scaled to our ceiling, at ``power`` (paired)."""
    if claim.paper_pair is None:
        return None
    pa, pb = claim.paper_pair
    sc = d.scaling or {}
    factor, chance = sc.get("factor", 1.0), sc.get("chance", 0.0)
    if factor is None or factor <= 0:
        return None
    pa, pb = stats.scale_rate(pa, factor, chance), stats.scale_rate(pb, factor, chance)
    if binary:
        return stats.n_paired(pa, pb, alpha, power)
    sd = d.extra.get("sd_diff")
    return stats.n_mean(pa - pb, sd, alpha, power) if sd else None


def _family(claim: Claim, d: Decision) -> str:
    holm = d.extra.get("holm") or {}
    return f"{claim.paper}'s {holm.get('k', 1)} tested claim{'s' if holm.get('k', 1) != 1 else ''}"


def verdict(claim: Claim, d: Decision, alpha: float = 0.05) -> tuple[str, str]:
    """(verdict, why) from the CI, the Holm-adjusted p (``d.p_adj``, else ``d.p_value``), the
    paper's direction and its effect scaled to our ceiling (claims.yaml rules.verdicts)."""
    est, lo, hi = d.estimate, d.ci_low, d.ci_high
    if est is None or lo is None or hi is None:
        return "untestable here", d.reason or "not measured"
    p = d.p_adj if d.p_adj is not None else d.p_value
    sig = p is not None and p < alpha
    ptxt = "" if p is None else (f"p_adj = {p:.3g}" if d.p_adj is not None else f"p = {p:.3g}")
    if (d.scaling or {}).get("factor") == 0:
        sc = d.scaling or {}
        return "untestable here", (f"our ceiling {sc.get('ceiling'):.3g} is at or below chance "
                                   f"{sc.get('chance'):.3g}: no effect can show")
    if claim.level:
        v, m = claim.paper_effect, claim.margin
        if v is None or m is None:
            return "inconclusive", "no paper value or margin to compare the level with"
        if v - m < lo and hi < v + m:
            if sig:
                return "reproduced", f"the CI lies within ±{m:g} of the paper's {v:g} (TOST {ptxt})"
            return "inconclusive", (f"the CI lies within ±{m:g} of the paper's {v:g} but TOST {ptxt} >= {alpha:g}: "
                                    f"not significant after Holm across {_family(claim, d)}")
        if hi < v:
            return "weaker", f"the CI lies below the paper's {v:g}"
        if lo > v:
            return "stronger", f"the CI lies above the paper's {v:g}"
        return "inconclusive", f"the paper's {v:g} is inside the CI, which is wider than ±{m:g} around it"
    if claim.direction == 0:  # equivalence: the whole CI inside +-margin
        m = claim.margin
        if m is None:
            return "inconclusive", "an equivalence claim without a margin"
        if -m < lo and hi < m:
            if sig:
                return "reproduced", f"the CI lies within ±{m:g} (TOST {ptxt})"
            return "inconclusive", (f"the CI lies within ±{m:g} but TOST {ptxt} >= {alpha:g}: not significant "
                                    f"after Holm across {_family(claim, d)}")
        if lo >= m or hi <= -m:
            return "contradicted", f"the CI lies outside ±{m:g}: a difference beyond the margin"
        return "inconclusive", f"the CI crosses ±{m:g}"
    up = claim.direction > 0
    scaled = d.scaled_effect if claim.magnitude else None
    shown, opposite = (lo > 0, hi < 0) if up else (hi < 0, lo > 0)
    what = "scaled effect" if d.scaling and d.scaling.get("factor") not in (None, 1.0) else "effect"
    if shown or opposite:
        if not sig:
            return "inconclusive", (f"the CI excludes 0 but {ptxt or 'no test'} >= {alpha:g}: not significant after "
                                    f"Holm across {_family(claim, d)}")
        if opposite:
            return "contradicted", f"the opposite direction: the CI excludes 0 ({ptxt})"
        if scaled is None:
            why = claim.magnitude_note or "the paper prints no number for this effect"
            return "reproduced", f"the paper's direction: the CI excludes 0 ({ptxt}); size not compared: {why}"
        if lo <= scaled <= hi:
            return "reproduced", f"the paper's direction ({ptxt}) and its {what} {scaled:+.3g} lies in the CI"
        below = scaled > hi if up else scaled < lo
        return ("weaker" if below else "stronger"), (f"the paper's direction ({ptxt}) but the CI excludes its "
                                                     f"{what} {scaled:+.3g} ({'smaller' if below else 'larger'} here)")
    if sig:
        return "inconclusive", f"the test ({ptxt}) and the CI (which holds 0) disagree"
    if d.n_needed and d.pool and d.n_needed > d.pool:
        return "untestable here", (f"the CI holds 0 and the paper's {what} needs {d.n_needed} questions; "
                                   f"the set has {d.pool}")
    if scaled is not None and not lo <= scaled <= hi:
        return "contradicted", (f"no effect shown (the CI holds 0, {ptxt}) and the CI excludes the paper's "
                                f"{what} {scaled:+.3g}")
    return "inconclusive", "the CI holds 0" + ("" if scaled is None else f" and the paper's {what} {scaled:+.3g}")


def finding(claim: Claim, d: Decision) -> tuple[str, str]:
    """A diagnostic's result (never a paper verdict): what the interval shows."""
    est, lo, hi = d.estimate, d.ci_low, d.ci_high
    if est is None or lo is None or hi is None:
        return "not measured", d.reason or "not measured"
    if claim.b is None:
        return "measured", f"{est:.3f} [{lo:.3f}, {hi:.3f}], n = {d.n}"
    if claim.direction == 0 and claim.margin is not None:
        m = claim.margin
        if -m < lo and hi < m:
            return f"within ±{m:g}", f"the CI lies within ±{m:g}"
        if lo >= m or hi <= -m:
            return f"outside ±{m:g}", f"the CI lies outside ±{m:g}"
        return "crosses the margin", f"the CI crosses ±{m:g}"
    if lo > 0:
        return "A above B", "the CI excludes 0"
    if hi < 0:
        return "A below B", "the CI excludes 0"
    return "no difference shown", "the CI holds 0"


def format_rule(claim: Claim, d: Decision, limit: float | None) -> Decision:
    """claims.yaml's format rule: a method contrast whose side breaks the format on at least ``limit``
    of its questions is untestable here (the measured verdict is kept in ``extra['verdict_if_read']``)."""
    shares = d.extra.get("format_error_share") or {}
    broken = {s: v for s, v in shares.items() if limit is not None and v >= limit}
    if not claim.needs_format or not broken or d.verdict == "untestable here" and d.estimate is None:
        return d
    d.extra["verdict_if_read"], d.verdict = d.verdict, "untestable here"
    d.extra["unreadable"] = True
    who = ", ".join(f"{s} on {v:.0%}" for s, v in broken.items())
    d.reason = (f"the replies break the format ({who} of the questions, limit {limit:.0%}, claims.yaml "
                f"rules.format): a method contrast would read format compliance; decide it on a model that "
                f"holds the format")
    return d


def _pool(claim: Claim, questions: Mapping[str, Question]) -> int | None:
    """Questions (pairs, for a claim paired by pair id) of the claim's kinds this repository has,
    the test split's where it has one."""
    qs = [q for q in questions.values() if not claim.kinds or q.kind in claim.kinds]
    test = [q for q in qs if q.split.startswith("test")] or qs
    if claim.pair_by or claim.twin_set:
        return len({q.meta.get("pair_id") for q in test if q.meta.get("pair_id") is not None}) or None
    return len(test) or None


def _sides(claim: Claim, questions: Mapping[str, Question], units: Mapping[str, str], data: Path | None,
           seed: SeedRun | None) -> tuple[dict[str, float] | None, dict[str, float] | None, str]:
    """(A's values, B's values, the pairing key's name) by question id, or by pair id."""
    if claim.twin_set:
        a = changes(claim, claim.a, questions, units, data, seed)
        b = changes(claim, claim.b, questions, units, data, seed) if claim.b else {}
        return a, b, "pair"
    a = per_question(claim.stage, claim.a, claim.question_set, claim.metric, claim.kinds, questions, units, data,
                     seed)
    b = (per_question(claim.stage, claim.b, claim.b_set or claim.question_set, claim.metric, claim.kinds, questions,
                      units, data, seed) if claim.b else {})
    if claim.pair_by and a is not None and b is not None:
        return _by_pair(a, questions), _by_pair(b, questions), "pair"
    return a, b, "question"


def measure(claim: Claim, questions: Mapping[str, Question], units: Mapping[str, str], data: Path | None = None,
            alpha: float = 0.05, power: float = 0.8, reps: int = 2000, seed: int = 0,
            pool: int | None = None, *, results: Path | None = None, sets: ClaimSets | None = None,
            seed_run: SeedRun | None = None) -> Decision:
    """The claim's numbers on the traces (estimate, CI, p, n, mde, scaled effect, n needed, format
    shares): everything but the verdict's multiplicity step. ``seed_run``: read a training seed's
    rerun (system ``<system>@seed<k>`` in its stage's folder) where it has the file."""
    contrast = (f"{claim.a} vs {claim.b}" if claim.b else f"{claim.a} (level)") + f" on {claim.question_set}"
    if claim.b_set:
        contrast = f"{claim.a} on {claim.question_set} vs {claim.b} on {claim.b_set} (paired by {claim.pair_by})"
    if claim.twin_set:
        contrast += f" (change from {claim.twin_set})"
    binary = claim.metric in BINARY and not claim.twin_set
    conv = claim.conversational
    test = ("Wilson interval" if claim.b is None and binary else "bootstrap interval" if claim.b is None
            else "conversation-level bootstrap + conversation sign-flip test" if conv
            else "Newcombe paired score interval + exact McNemar" if binary
            else "paired bootstrap + sign-flip test")
    if claim.margin is not None:
        test += ", TOST against the margin"
    d = Decision(claim.id, claim.paper, claim.table, claim.claim,
                 contrast + (f" [{', '.join(claim.kinds)}]" if claim.kinds else ""), claim.metric,
                 list(claim.paper_value), _r(claim.paper_effect), test, dict(claim.cite), list(claim.cells),
                 claim.type, diagnostic=claim.diagnostic, pool=pool if pool is not None else _pool(claim, questions))
    d.scaled_effect = d.paper_effect if claim.magnitude else None
    if claim.untestable:
        d.reason = claim.untestable
        return d
    if claim.ceilings:
        return _measure_ceilings(claim, d, questions, units, data, results)
    if claim.ratio:
        d.test = "paired bootstrap of the ratio, TOST against the paper's value ± margin"
        return _measure_ratio(claim, d, questions, data, alpha, reps, seed, seed_run)
    a, b, key = _sides(claim, questions, units, data, seed_run)
    if a is None or b is None:
        missing, where = (claim.a, claim.question_set) if a is None else (claim.b, claim.b_set or claim.question_set)
        d.reason = (f"no traces of {missing} on {where} in data/{claim.stage}/traces "
                    f"(run `dvc repro {claim.stage}`)")
        return d
    ids = sorted(set(a) & set(b)) if claim.b else sorted(a)
    d.n = len(ids)
    if not ids:
        empty = [s for s, v in ((claim.a, a), (claim.b, b)) if s and not v]
        d.reason = (f"{' and '.join(empty)} {'has' if len(empty) == 1 else 'have'} no question with "
                    f"{claim.metric} defined{UNDEFINED.get(claim.metric, '')}" if empty
                    else "no question both systems answered with this metric defined")
        return d
    d.extra["files"] = sorted({data_relative(trace_file(claim.stage, s, q, data, seed_run), data)
                               for s, q in ((claim.a, claim.question_set), (claim.b, claim.b_set or claim.question_set),
                                            (claim.a, claim.twin_set), (claim.b, claim.twin_set)) if s and q})
    paired = set(ids)
    qids = ids if key == "question" else [i for i in questions if str(questions[i].meta.get("pair_id")) in paired]
    flags = {}
    if key == "question":
        flags = {s: format_flags(claim.stage, s, claim.question_set, data, seed_run) for s in (claim.a, claim.b) if s}
        shares = {s: round(sum(f.get(i, False) for i in ids) / len(ids), 4) for s, f in flags.items()}
        if any(shares.values()):
            d.extra["format_error_share"] = shares
    xa = np.array([a[i] for i in ids])
    xb = np.array([b[i] for i in ids]) if claim.b else None
    clusters = ([str(questions[i].meta.get("conversation_id", i)) for i in ids]
                if conv and xb is not None else None)
    est, lo, hi = interval(xa, xb, clusters, binary, alpha, reps, seed)
    d.estimate, d.ci_low, d.ci_high = _r(est), _r(lo), _r(hi)
    if clusters is not None:
        d.extra["conversations"] = len(set(clusters))
    if claim.direction == 0 and claim.margin is not None and xb is not None:
        d.p_value = _r(stats.tost_p(est, lo, hi, -claim.margin, claim.margin, alpha), 6)  # type: ignore[arg-type]
        d.extra["p_zero"] = _r(p_value(xa, xb, clusters, binary, reps, seed), 6)
    else:
        d.p_value = _r(p_value(xa, xb, clusters, binary, reps, seed), 6)
    if xb is None:
        d.mde = _r(stats.mde_level(d.n, float(xa.mean()), alpha)) if binary else None
    elif binary:
        only_a, only_b = stats.discordant(xa, xb)
        d.extra.update(only_a=only_a, only_b=only_b, a_rate=_r(float(xa.mean())), b_rate=_r(float(xb.mean())))
        disc = (only_a + only_b) / d.n
        d.mde = _r(stats.mde_paired(d.n, disc or float(xb.mean()) * (1 - float(xb.mean())) * 2, alpha, power))
    else:
        sd = float(np.std(xa - xb, ddof=1)) if d.n > 1 else 0.0
        d.mde = _r(stats.mde_mean(d.n, sd, alpha, power)) if sd > 0 else None
        d.extra["sd_diff"] = _r(sd)
    if claim.ceiling and claim.metric == "accuracy":
        ceiling, where = lookup_ceiling(claim.ceiling, claim, questions, units, data, results, sets)
        chance = chance_of(questions, qids)
        if ceiling is None:
            d.scaling = {"ceiling": None, "chance": _r(chance), "factor": None, "source": where,
                         "note": "ceiling not measured: the paper's effect is compared unscaled"}
        else:
            factor = max(0.0, (ceiling - chance) / (1 - chance)) if chance < 1 else 0.0
            d.scaling = {"ceiling": _r(ceiling), "chance": _r(chance), "factor": _r(factor), "source": where}
            if d.paper_effect is not None and claim.magnitude:
                d.scaled_effect = _r(d.paper_effect * factor)
            d.scaling["scaled_effect"] = d.scaled_effect
    d.n_needed = needed(claim, binary, d, alpha, power)
    if flags and not claim.needs_format and xb is not None and d.extra.get("format_error_share"):
        clean = [k for k, i in enumerate(ids) if not any(f.get(i, False) for f in flags.values())]
        if clean:
            ce, cl, ch = interval(xa[clean], xb[clean], None, binary, alpha, reps, seed)
            d.extra["format_clean"] = {"n": len(clean), "estimate": _r(ce), "ci_low": _r(cl), "ci_high": _r(ch)}
        else:
            d.extra["format_clean"] = {"n": 0, "estimate": None, "ci_low": None, "ci_high": None}
    d.reason = ""
    d.verdict = ""
    return d


def _measure_ratio(claim: Claim, d: Decision, questions: Mapping[str, Question], data: Path | None, alpha: float,
                   reps: int, seed: int, seed_run: SeedRun | None) -> Decision:
    """A's right answers over B's on the questions both answered (fidelity), a level against the
    paper's ratio, undefined below ``claim.min_correct`` right B answers."""
    a = right_answers(claim.stage, claim.a, claim.question_set, questions, data, seed_run)
    b = right_answers(claim.stage, str(claim.b), claim.question_set, questions, data, seed_run)
    if a is None or b is None:
        d.reason = (f"no traces of {claim.a if a is None else claim.b} on {claim.question_set} in "
                    f"data/{claim.stage}/traces (run `dvc repro {claim.stage}`)")
        return d
    ids = sorted(set(a) & set(b))
    d.n = len(ids)
    d.extra["files"] = [data_relative(trace_file(claim.stage, s, claim.question_set, data, seed_run), data)
                        for s in (claim.a, claim.b)]
    top, bottom = np.array([a[i] for i in ids]), np.array([b[i] for i in ids])
    d.extra.update(right_a=int(top.sum()), right_b=int(bottom.sum()))
    least = max(1, claim.min_correct)
    if bottom.sum() < least:
        d.reason = (f"{int(bottom.sum())} of {d.n} {claim.b} answers are right, fewer than the {least} "
                    f"a ratio needs (two_axis_eval.fidelity_min_correct)")
        return d
    est, lo, hi = stats.ratio_bootstrap(top, bottom, alpha, reps, seed)
    d.estimate, d.ci_low, d.ci_high = _r(est), _r(lo), _r(hi)
    v, m = claim.paper_effect, claim.margin
    if v is not None and m is not None:
        d.p_value = _r(stats.tost_p(est, lo, hi, v - m, v + m, alpha), 6)
    d.verdict = ""
    return d


def _measure_ceilings(claim: Claim, d: Decision, questions: Mapping[str, Question], units: Mapping[str, str],
                      data: Path | None, results: Path | None) -> Decision:
    """The ceilings diagnostic: each kind's ceiling beside chance (no interval: a table's figure)."""
    out = {}
    for kind, spec in (claim.ceilings or {}).items():
        ids = [i for i, q in questions.items() if q.kind == kind and q.choices]
        ceiling, where = lookup_ceiling(spec, claim, questions, units, data, results)
        out[kind] = {"ceiling": _r(ceiling), "chance": _r(chance_of(questions, ids)) if ids else None,
                     "source": where}
    d.extra["ceilings"] = out
    measured = {k: v for k, v in out.items() if v["ceiling"] is not None}
    def shown(v: Mapping[str, Any]) -> str:
        return f"ceiling {v['ceiling']:.3g}, chance " + ("n/a" if v["chance"] is None else f"{v['chance']:.3g}")

    d.reason = ("; ".join(f"{k}: {shown(v)}" for k, v in measured.items())
                or "not measured yet: " + "; ".join(v["source"] for v in out.values()))
    d.verdict = "measured" if measured else "not measured"
    return d


def decide(claim: Claim, questions: Mapping[str, Question], units: Mapping[str, str], data: Path | None = None,
           alpha: float = 0.05, power: float = 0.8, reps: int = 2000, seed: int = 0,
           pool: int | None = None, max_format_errors: float | None = None, *, results: Path | None = None,
           sets: ClaimSets | None = None) -> Decision:
    """Measure one claim and decide it alone (a family of one: p_adj = p), with the format rule at
    ``max_format_errors``. :func:`evaluate` decides all claims together (Holm within each paper)."""
    d = measure(claim, questions, units, data, alpha, power, reps, seed, pool, results=results, sets=sets)
    return _judge(claim, d, alpha, max_format_errors)


def _judge(claim: Claim, d: Decision, alpha: float, limit: float | None) -> Decision:
    if claim.diagnostic:
        if d.verdict not in ("measured", "not measured"):
            d.verdict, d.reason = finding(claim, d)
        return d
    if d.estimate is None:
        d.verdict = "untestable here"
        return d
    d.verdict, d.reason = verdict(claim, d, alpha)
    return format_rule(claim, d, limit)


# --------------------------------------------------------------------------- the rule-change check
def traces_sha(files: Sequence[str], data: Path) -> str | None:
    """One hash of the trace files a decision read (their names under ``data`` and contents)."""
    if not files:
        return None
    h = hashlib.sha256()
    for rel in sorted(files):
        path = data / rel
        h.update(rel.encode() + b"\0" + (hashlib.sha256(path.read_bytes()).digest() if path.exists() else b"-"))
    return h.hexdigest()


def rule_sha(spec_id: str, prereg: Prereg) -> str:
    """One hash of what decides a claim: its claims.yaml entry and the global rules."""
    text = json.dumps({"entry": prereg.entry(spec_id), "rules": prereg.rules}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def rule_check(traces: str | None, rule: str, previous: Mapping[str, Any] | None) -> tuple[str, bool | None]:
    """(what the check found, whether the claim's rule changed after the traces it decides were
    written), from the previous report's record of the claim: the same traces under another rule
    mean the rule was edited after the traces. The finding sticks while the traces stay the same,
    so recomputing claims.json from the committed evidence gives the same bytes."""
    if traces is None:
        return "no traces: nothing to check", None
    before = (previous or {}).get("extra", {})
    if not previous or before.get("traces_sha") is None:
        return "first decision of these traces", False
    if before["traces_sha"] != traces:
        return "decided on traces written since the last report, under this rule", False
    if before.get("rule_sha") != rule:
        old = str(before.get("rule_sha"))[:10]
        return f"rule changed after its traces were written (rule {old} -> {rule[:10]})", True
    return str(previous.get("rule_check") or "unchanged since its traces were written"), \
        bool(previous.get("rule_changed"))


# --------------------------------------------------------------------------- everything at once
def evaluate(data: Path, alpha: float, power: float, reps: int, seed: int,
             llms: Sequence[str], size_llms: Sequence[str] = (),
             papers: Sequence[str] = (), margin: float | None = None,
             fidelity_min_correct: int = 0, sets: ClaimSets = WORLD_SETS,
             max_format_errors: float | None = None, *, results: Path | None = None,
             prereg: Prereg | str | Path | None = None,
             previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every claim of claims.yaml (of ``papers`` only, when given) and every diagnostic, decided from
    the traces under ``data``: the document of results/report/claims.json. ``alpha`` / ``power`` /
    ``reps`` / ``margin`` / ``max_format_errors``: the rules' values (None: claims.yaml's);
    ``llms``: DnC's LLMs smallest first; ``size_llms``: other sizes for the size claim only;
    ``sets``: the question sets the stages wrote traces under; ``results``: where the stages'
    metrics.json are (ceilings; default beside ``data``); ``previous``: the last claims.json document,
    whose records say whether a rule changed after its traces (:func:`rule_check`)."""
    pre = prereg if isinstance(prereg, Prereg) else load_prereg(prereg)
    limit = pre.value("format.limit") if max_format_errors is None else max_format_errors
    margin_used = pre.value("equivalence_margin") if margin is None else margin
    units = unit_map(data)
    _SCORED.clear()
    cache: dict[str, dict[str, Question]] = {}

    def questions_of(qset: str) -> dict[str, Question]:
        if qset not in cache:
            f = question_file(qset, data) if qset else None
            cache[qset] = {q.id: q for q in load_questions(f)} if f else {}
        return cache[qset]

    sens = data / "brit_linking" / "sensitivity.json"
    settings = read_json(sens) if sens.exists() else ()
    wanted = [c for c in registry(llms, size_llms, (), margin_used, fidelity_min_correct, sets, pre)
              if not papers or c.paper in papers]
    checks = [c for c in diagnostics(settings, margin_used, sets, pre, llms) if not papers or c.paper in papers]
    kw = dict(results=results, sets=sets)
    decided = [measure(c, questions_of(c.question_set), units, data, alpha, power, reps, seed, **kw)  # type: ignore[arg-type]
               for c in wanted]
    # the format rule, the power and the ceiling first: a contrast they leave untestable is not tested
    # (Holm can only raise a p, so a claim untestable on its own p stays untestable on its p_adj)
    for c, d in zip(wanted, decided):
        if d.estimate is not None:
            d.verdict, d.reason = verdict(c, d, alpha)
            format_rule(c, d, limit)
    for paper in dict.fromkeys(c.paper for c in wanted):
        family = [d for c, d in zip(wanted, decided) if c.paper == paper and d.p_value is not None
                  and d.verdict != "untestable here"]
        adjusted = stats.holm([d.p_value for d in family])  # type: ignore[misc]
        mult = stats.holm_multipliers([d.p_value for d in family])  # type: ignore[misc]
        for d, p, m in zip(family, adjusted, mult):
            d.p_adj = _r(p, 6)
            d.extra["holm"] = {"k": len(family), "multiplier": m}
    before = {r["id"]: r for r in [*(previous or {}).get("claims", []), *(previous or {}).get("diagnostics", [])]}

    def check(c: Claim, d: Decision) -> None:
        d.extra["traces_sha"], d.extra["rule_sha"] = traces_sha(d.extra.get("files", []), data), rule_sha(c.spec, pre)
        d.rule_check, d.rule_changed = rule_check(d.extra["traces_sha"], d.extra["rule_sha"], before.get(d.id))

    for c, d in zip(wanted, decided):
        if not d.extra.get("unreadable"):
            _judge(c, d, alpha, limit)
        _seeds(c, d, pre, questions_of(c.question_set), units, data, alpha, power, reps, seed, limit, **kw)  # type: ignore[arg-type]
        check(c, d)
    shown = []
    for c in checks:
        d = measure(c, questions_of(c.question_set), units, data, alpha, power, reps, seed, **kw)  # type: ignore[arg-type]
        _judge(c, d, alpha, None)
        check(c, d)
        shown.append(d)
    claim_rows = [asdict(d) for d in decided]
    used = {"alpha": alpha, "power": power, "bootstrap": reps, "equivalence_margin": margin_used,
            "format_limit": limit}
    declared = {"alpha": pre.value("alpha"), "power": pre.value("power"), "bootstrap": pre.value("bootstrap"),
                "equivalence_margin": pre.value("equivalence_margin"), "format_limit": pre.value("format.limit")}
    return {"claims_yaml": {"path": "claims.yaml", "blob": pre.blob},
            "rules": {**used, "overridden": sorted(k for k in used if used[k] != declared[k]),
                      "multiplicity": "Holm-Bonferroni within each paper", "seed": seed},
            "counts": counts(claim_rows), "claims": claim_rows, "diagnostics": [asdict(d) for d in shown]}


def _seeds(claim: Claim, d: Decision, pre: Prereg, questions: Mapping[str, Question], units: Mapping[str, str],
           data: Path, alpha: float, power: float, reps: int, seed: int, limit: float | None, **kw: Any) -> None:
    """``holds``: the verdict under each training seed's rerun (same Holm multiplier), or "1 seed".
    The reruns are looked up where the claim's seed source keeps them (its stage's folder, e.g.
    brit_seeds for CLIP's seeds, else the claim's own); each one's estimate, CI and verdict go to
    ``extra['seed_runs']`` beside the verdict in ``seeds``."""
    where = pre.seed_stage(claim.seeds, claim.stage)
    found = seed_runs(where, [s for s in (claim.a, claim.b) if s],
                      [q for q in (claim.question_set, claim.b_set, claim.twin_set) if q], data)
    if not found or claim.untestable:
        d.holds, d.holds_reason = "1 seed", pre.seed_reason(claim.seeds)
        return
    mult = (d.extra.get("holm") or {}).get("multiplier", 1)
    runs = {}
    for k in found:
        s = measure(claim, questions, units, data, alpha, power, reps, seed, seed_run=SeedRun(k, where), **kw)
        if s.p_value is not None:
            s.p_adj = min(1.0, s.p_value * mult)
        _judge(claim, s, alpha, limit)
        d.seeds[str(k)] = s.verdict
        runs[str(k)] = {"estimate": s.estimate, "ci_low": s.ci_low, "ci_high": s.ci_high, "n": s.n,
                        "verdict": s.verdict}
    d.extra["seed_runs"] = runs
    agree = 1 + sum(v == d.verdict for v in d.seeds.values())
    d.holds = f"{agree}/{1 + len(found)}"
    d.holds_reason = (f"the main run and training seeds {', '.join(map(str, found))} "
                      f"(data/{where}/traces/<system>@seed<k>__<set>.jsonl)")


def compute(data: Path, alpha: float, power: float, reps: int, seed: int,
            llms: Sequence[str], size_llms: Sequence[str] = (),
            papers: Sequence[str] = (), margin: float | None = None,
            fidelity_min_correct: int = 0, sets: ClaimSets = WORLD_SETS,
            max_format_errors: float | None = None, **kw: Any) -> list[dict[str, Any]]:
    """The paper claims' records of :func:`evaluate` (the diagnostics left out)."""
    return evaluate(data, alpha, power, reps, seed, llms, size_llms, papers, margin, fidelity_min_correct, sets,
                    max_format_errors, **kw)["claims"]


# --------------------------------------------------------------------------- power, before any trace
def power_table(registry_claims: Sequence[Claim], alpha: float, power: float, data: Path | None = None,
                results: Path | None = None, sets: ClaimSets = WORLD_SETS) -> list[dict[str, Any]]:
    """The power analysis from claims.yaml alone: for each claim whose size is compared, the paired
    questions its effect needs at ``power`` (McNemar, discordance as for independent systems: an
    upper bound when the systems agree more than chance), the effect first scaled to our ceiling
    where one is measured under ``data`` / ``results``. Means need the sd of the differences, known
    only from traces (their n needed is in claims.json after a run)."""
    rows, cache = [], {}
    for c in registry_claims:
        if c.paper_pair is None or c.untestable:
            continue
        pa, pb = c.paper_pair
        binary = c.metric in BINARY
        ceiling, chance, factor, where = None, None, 1.0, ""
        if c.ceiling and c.metric == "accuracy":
            if c.question_set not in cache:
                f = question_file(c.question_set, data)
                cache[c.question_set] = {q.id: q for q in load_questions(f)} if f else {}
            qs = {i: q for i, q in cache[c.question_set].items() if not c.kinds or q.kind in c.kinds}
            ceiling, where = lookup_ceiling(c.ceiling, c, qs, unit_map(data), data, results, sets)
            if ceiling is not None:
                chance = chance_of(qs, [i for i, q in qs.items() if q.split.startswith("test")] or list(qs))
                factor = max(0.0, (ceiling - chance) / (1 - chance))
        spa, spb = stats.scale_rate(pa, factor, chance or 0.0), stats.scale_rate(pb, factor, chance or 0.0)
        rows.append({"id": c.id, "paper": c.paper, "claim": c.claim, "metric": c.metric,
                     "paper_a": pa, "paper_b": pb, "paper_effect": _r(pa - pb),
                     "ceiling": _r(ceiling), "chance": _r(chance), "factor": _r(factor),
                     "scaled_effect": _r(spa - spb), "ceiling_source": where or None,
                     "n_needed": stats.n_paired(spa, spb, alpha, power) if binary and factor > 0 else None,
                     "n": _ref_value(c.n_ref) if c.n_ref else None,
                     "at_least_10_points": binary and abs(spa - spb) >= 0.10})
    return rows


# --------------------------------------------------------------------------- showing
def counts(decisions: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Verdicts per paper (then in all) of the paper claims (diagnostics are never counted)."""
    out: dict[str, dict[str, int]] = {}
    for d in decisions:
        if d.get("diagnostic"):
            continue
        for key in (d["paper"], "all"):
            bucket = out.setdefault(key, {})
            bucket[d["verdict"]] = bucket.get(d["verdict"], 0) + 1
    return {k: out[k] for k in sorted(out, key=lambda k: k == "all")}  # the papers in order, then all


def _fmt(x: Any) -> str:
    return "–" if x is None else f"{x:+.3f}" if isinstance(x, float) else str(x)


def table(decisions: Sequence[Mapping[str, Any]]) -> Any:
    """The claims as a DataFrame in claims.yaml's order: the paper's effect (scaled), ours with its
    CI, p and Holm's p_adj, n, n needed, verdict, seeds."""
    rows = []
    for d in decisions:
        est = d["estimate"]
        ci = "" if d["ci_low"] is None else f" [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"
        paper, scaled = d["paper_effect"], d.get("scaled_effect")
        shown = "–" if paper is None else f"{paper:+.3g}"
        if scaled is not None and paper is not None and abs(scaled - paper) > 1e-9:
            shown += f" (scaled {scaled:+.3g})"
        cite = d.get("cite") or {}
        rows.append({"paper": d["paper"], "id": d["id"],
                     "where": cite.get("section") or d["table"] or ("ours" if d.get("diagnostic") else ""),
                     "claim": d["claim"], "paper effect": shown,
                     "ours (95% CI)": ("–" if est is None else _fmt(est) + ci), "n": d["n"],
                     "p": "–" if d.get("p_value") is None else f"{d['p_value']:.3g}",
                     "p_adj": "–" if d.get("p_adj") is None else f"{d['p_adj']:.3g}",
                     "n needed": d["n_needed"] if d["n_needed"] else "–",
                     "verdict": d["verdict"], "holds": d.get("holds") or "–", "why": d["reason"]})
    return pd.DataFrame(rows)


def narrative(decisions: Sequence[Mapping[str, Any]]) -> str:
    """"What we see", written from the decisions (Markdown): each claim's verdict, estimate, CI,
    p_adj and n, so no number in the prose is typed by hand."""
    lines = []
    for d in decisions:
        cite = d.get("cite") or {}
        where = f"{d['paper']} {cite.get('section') or d['table']}"
        head = f"- **{d['claim']}** ({where}): **{d['verdict']}**"
        if d["estimate"] is None:
            lines.append(f"{head}: {d['reason']}.")
            continue
        ci = "" if d["ci_low"] is None else f" [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"
        paper = "" if d["paper_effect"] is None else f"; the paper's {d['paper_effect']:+.3g}"
        sc = d.get("scaling") or {}
        if sc.get("factor") not in (None, 1.0) and d.get("scaled_effect") is not None:
            paper += (f", {d['scaled_effect']:+.3g} scaled to our ceiling {sc['ceiling']:.3g} "
                      f"(chance {sc['chance']:.3g})")
        p = "" if d.get("p_adj") is None else f"; p_adj {d['p_adj']:.3g}"
        needed_txt = f", {d['n_needed']} needed for the paper's effect" if d["n_needed"] else ""
        holds = f"; holds {d['holds']}" if d.get("holds") and d["holds"] != "1 seed" else ""
        extra = d.get("extra") or {}
        clean = extra.get("format_clean")
        shares = extra.get("format_error_share") or {}
        fmt = ""
        if shares and "format" not in d["reason"]:
            fmt = "; replies break the format on " + ", ".join(f"{v:.0%} of {k}'s questions" for k, v in shares.items())
            if clean and clean.get("estimate") is not None:
                fmt += (f"; on the {clean['n']} format-clean questions {clean['estimate']:+.3f} "
                        f"[{clean['ci_low']:+.3f}, {clean['ci_high']:+.3f}]")
        lines.append(f"- **{d['claim']}** ({where}): **{d['verdict']}**: {d['contrast']}, {d['metric']} "
                     f"{d['estimate']:+.3f}{ci}, n = {d['n']}{paper}{p}{needed_txt}{holds}{fmt} ({d['reason']}).")
    tally = Counter(d["verdict"] for d in decisions if not d.get("diagnostic"))
    summary = ", ".join(f"{tally[v]} {v}" for v in VERDICTS if tally[v])
    n = sum(tally.values())
    return f"{n} claims: {summary}.\n\n" + "\n".join(lines)


COLOURS = {"reproduced": "#2a9d8f", "weaker": "#e9c46a", "stronger": "#264653", "contradicted": "#e76f51",
           "inconclusive": "#8d99ae", "untestable here": "#bbbbbb"}


def forest(decisions: Sequence[Mapping[str, Any]]) -> Any:
    """Forest plot: each measured claim's estimate and 95 % CI, the paper's (scaled) effect beside it."""
    shown = [d for d in decisions if d["estimate"] is not None and d["ci_low"] is not None]
    fig, ax = new_figure(figsize=(9, 0.35 * max(len(shown), 3) + 1.2))
    for y, d in enumerate(shown):
        colour = COLOURS.get(d["verdict"], "#999999")
        ax.plot([d["ci_low"], d["ci_high"]], [y, y], color=colour, lw=2)
        ax.plot(d["estimate"], y, "o", color=colour)
        effect = d.get("scaled_effect")
        if effect is not None and d["metric"] not in ("tool_calls", "sparsity"):
            ax.plot(effect, y, "x", color="k")
    ax.axvline(0, color="grey", lw=0.8, ls=":")
    ax.set_yticks(range(len(shown)), [d["id"] for d in shown], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ours: estimate and 95 % CI (colour = verdict); x = the paper's effect, scaled to our ceiling")
    ax.set_title(f"{len(shown)} claims measured here, {len(decisions) - len(shown)} not measurable")
    fig.tight_layout()
    return fig
