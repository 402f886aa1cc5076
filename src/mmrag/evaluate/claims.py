"""Every claim of the three papers as data, decided from per-question traces with a test and a CI.

A :class:`Claim` names the paper's numbers and the contrast measured here: which systems' traces
(``data/<stage>/traces/<system>__<set>.jsonl``), which metric, which question kinds. :func:`decide`
pairs the two systems question by question (by question id; by conversation for MMCoQA), then
gives the estimate, its 95 % interval (Newcombe's paired score interval for 0/1 outcomes, a paired
bootstrap for means, a conversation-level bootstrap for MMCoQA; Wilson for a level), the exact
McNemar p for paired 0/1 outcomes, n, the smallest difference this n can detect (``mde``), the n
the paper's effect needs at the configured power (``n_needed``) and a verdict: **reproduced** (the paper's
direction, CI excludes 0), **contradicted** (the opposite direction with CI excluding 0, or a CI
that excludes the paper's effect where the set is big enough to see that effect), **inconclusive**
(neither) or **untestable here** (no data, or the CI holds 0 and the effect needs more questions
than the set has; the reason is given). Each verdict's robustness is the verdict on three seeded
redraws of the evaluation sample (``verdict_holds``: "3/3" = it does not hinge on which questions
were drawn).
``python -m mmrag.evaluate claims`` recomputes the table from ``data/``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mmrag import io
from mmrag.brit import paper as brit_paper
from mmrag.evaluate import evaluator, stats
from mmrag.evaluate.judge import LexicalJudge
from mmrag.evaluate.metrics import Scored, accuracy
from mmrag.io import read_json, read_jsonl, trace_path
from mmrag.models.registry import PROVISIONED
from mmrag.schema import Question, load_questions, load_traces
from mmrag.stages import new_figure

BINARY = ("accuracy", "em", "brit_recall", "route_recall@1")
CROSS = brit_paper.CROSS  # BRIT's two complex (cross-modal) kinds
MEANS = ("f1", "tool_calls", "sparsity")
# why a metric is undefined on every question of a system (the reason of an empty claim)
UNDEFINED = {"sparsity": " (its traces expose no summary: the model does not write the summary format)",
             "accuracy": " (it has no reader: retrieval-only traces)",
             "route_recall@1": " (it never routes to a unit)"}


@dataclass(frozen=True)
class Claim:
    """One claim of a paper and the contrast that tests it here (A minus B, or A's level)."""

    id: str
    paper: str  # BRIT | DnC | MM-R2
    table: str  # where the paper states it
    claim: str
    stage: str  # the stage whose traces hold the runs
    question_set: str
    a: str  # A's system (trace file name part)
    b: str | None  # B's system; None: A's level against the paper's number
    metric: str  # accuracy | em | f1 | brit_recall | route_recall@1 | recall@5 | tool_calls | sparsity
    paper_value: tuple[float | None, ...] = ()  # the paper's A (and B), as fractions (or tokens/calls)
    direction: int = 1  # +1 the paper has A above B, -1 below; 0 a level
    kinds: tuple[str, ...] = ()  # only questions of these kinds
    untestable: str = ""  # why it cannot be measured here at all
    # a twin set (NEA's original half): each system's value is its change from the twin question
    # (question_set minus twin_set, paired by meta["pair_id"]), and the claim compares the changes
    twin_set: str = ""
    # an equivalence claim (A ~ B, direction 0): reproduced when the 95 % CI of A - B lies within +-margin;
    # a level or ratio claim: when its CI lies within +-margin of the paper's value (None: never reproduced)
    margin: float | None = None
    # a ratio claim (direction 0): A's right answers over B's on the same questions (fidelity:
    # summary-only over full), a level against the paper's ratio; decided only when B has at least
    # ``min_correct`` right answers (1/1 is not a fidelity of 1.0)
    ratio: bool = False
    min_correct: int = 0
    # questions come in conversations (MMCoQA): the CI resamples whole conversations
    conversational: bool = False
    # a contrast of strategies, not of training: its agents must hold the dialogue format, or the
    # verdict reads format compliance (decided untestable above report.max_format_errors)
    needs_format: bool = False
    # where the paper's numbers come from, or why this repository does not hold them
    paper_source: str = ""

    @property
    def paper_pair(self) -> tuple[float, float] | None:
        """The paper's two rates (A, B) of a contrast whose n needed can be sized; None for a level,
        an equivalence claim, or a claim without both numbers."""
        vals = self.paper_value
        if self.b is None or self.margin is not None or len(vals) != 2 or None in vals:
            return None
        return float(vals[0]), float(vals[1])  # type: ignore[arg-type]

    @property
    def paper_effect(self) -> float | None:
        """The paper's A - B (or its level, or its ratio), None where this repository does not hold
        its numbers."""
        vals = self.paper_value
        if self.b is None or self.ratio:
            return vals[0] if vals and vals[0] is not None else None
        if len(vals) == 2 and None not in vals:
            return float(vals[0]) - float(vals[1])  # type: ignore[operator]
        return None


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
    paper_source: str = ""
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    n: int = 0
    mde: float | None = None
    n_needed: int | None = None
    pool: int | None = None  # questions of that set this repository has (all splits)
    verdict: str = "untestable here"
    reason: str = ""
    # the verdict on seeded redraws of the evaluation sample (same n, questions or whole
    # conversations drawn with replacement): "3/3" = it does not hinge on which questions were drawn
    verdict_holds: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ClaimSets:
    """The question sets whose traces decide the claims: each stage writes its traces under its
    configured set (``write_traces(stage, system, set)``), so a user's own set is decided too."""

    brit: str  # brit_linking.question_set (Table 1; Table 2's ``<set>_retrieval`` traces)
    nea: str  # brit_linking.nea_set (Table 3; its original half is ``<set>_orig``)
    multihop: str  # toolagent_eval.question_set (DnC Table 3)
    conversational: str  # toolagent_eval.conv_set (DnC Table 4; "" = none)
    infoseek: str  # two_axis_eval.question_set (MM-R2's tables)

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

    @classmethod
    def from_params(cls, params: Any) -> ClaimSets:
        """The sets the stages of ``params`` (a :class:`mmrag.config.Params`) write traces under."""
        return cls(params.brit_linking.question_set, params.brit_linking.nea_set,
                   params.toolagent_eval.question_set, params.toolagent_eval.conv_set,
                   params.two_axis_eval.question_set)


# BRIT's Table 1 (BRIT, the best flat baseline) per kind and on the complex kinds' mean: 0.85 vs 0.73
# (0.73 is both baselines' mean, not BRIT's own average, as an earlier label said)
BRIT_TABLE1 = {k: brit_paper.brit_vs_best_baseline(k) for k in ("Image-Image", "Text-Image", "Image-Text", "complex")}
BRIT_TABLE1_SOURCE = brit_paper.TABLE1_SOURCE
# DnC (Rajabzadeh et al., arXiv 2309.08922): its EM / F1 / tool-call tables could not be read offline,
# so its claims carry no paper effect and no n needed for it
DNC_SOURCE = "not held here: the paper's Table 3/4 numbers were not readable offline (arXiv 2309.08922)"

# the generated world's sets, which the default profile evaluates on
WORLD_SETS = ClaimSets(brit="brit", nea="brit_nea", multihop="mmqa", conversational="mmcoqa", infoseek="infoseek")
RETRIEVAL = WORLD_SETS.retrieval  # brit_linking's retrieval-only traces of every BRIT test question
SUMMARY_ONLY = "_summary_only"  # two_axis_eval: a policy's answers from its exposed summaries alone
REDRAW_SEEDS = (1, 2, 3)  # redraws of the evaluation sample behind each verdict's robustness


# --------------------------------------------------------------------------- the registry
def sensitivity_claims(settings: Sequence[Mapping[str, Any]], margin: float | None,
                       retrieval: str = RETRIEVAL) -> list[Claim]:
    """BRIT's sensitivity claim, one equivalence test per moved knob setting that brit_linking ran
    (its sensitivity.json); one untestable claim when it ran none."""
    if settings and margin is None:
        raise ValueError("sensitivity claims need an equivalence margin (params report.stability_margin)")
    if not settings:
        return [Claim("brit.threshold_pcst", "BRIT", "§5 sensitivity", "recall is stable across graph "
                      "thresholds and PCST settings", "brit_linking", retrieval, "brit__ca_ls_si", None,
                      "brit_recall", (), 0, CROSS, untestable="data/brit_linking/sensitivity.json lists no "
                      "moved knob (rerun `dvc repro brit_linking`)")]
    return [Claim(f"brit.sensitivity.{s['knob']}={s['value']:g}", "BRIT", "§5 sensitivity",
                  f"recall is stable when {s['knob']} moves from {s['params_value']:g} to {s['value']:g} "
                  f"(within ±{margin:g})", "brit_linking", retrieval, str(s["system"]), str(s["params_system"]),
                  "brit_recall", (), 0, CROSS, margin=margin) for s in settings]


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


def registry(llms: Sequence[str] = (), size_llms: Sequence[str] = (),
             sensitivity: Sequence[Mapping[str, Any]] = (), margin: float | None = None,
             fidelity_min_correct: int = 0, sets: ClaimSets = WORLD_SETS) -> list[Claim]:
    """Every claim, in the papers' order, on the question sets ``sets`` (the stages' params); DnC's
    per LLM (``llms``) and the size claim from the smallest to the biggest comparable LLM of ``llms`` +
    ``size_llms`` (those run DnC only; :func:`size_sweep`); BRIT's sensitivity per knob setting in
    ``sensitivity`` (brit_linking's sensitivity.json), its Image-Image equivalence and fidelity's level
    within ``margin``; fidelity decided from ``fidelity_min_correct`` right full answers on."""
    brit, retrieval = "brit_linking", sets.retrieval
    out = [
        # Recall claims read the retrieval-only traces of every test question (<set>_retrieval:
        # every Table 2 linking combination and baseline, no reader), not Table 1's read subset.
        Claim("brit.recall_vs_baseline", "BRIT", "Table 2", "BRIT (CA+LS+SI) recalls more cross-modal "
              "evidence than the best flat baseline", brit, retrieval, "brit__ca_ls_si", "text_enc__clip_top_k",
              "brit_recall", (0.80, 0.59), 1, CROSS),
        Claim("brit.recall_image_text", "BRIT", "Table 2", "the gain over the baseline holds on Image-Text "
              "questions (where the paper's gain is largest)", brit, retrieval, "brit__ca_ls_si",
              "text_enc__clip_top_k", "brit_recall", (), 1, ("Image-Text",)),
        Claim("brit.ls_vs_lp", "BRIT", "Table 2", "section-level layout links (LS) beat page-level (LP)",
              brit, retrieval, "brit__ca_ls", "brit__ca_lp", "brit_recall", (), 1, CROSS),
        *[Claim(f"brit.linker_{x.lower()}", "BRIT", "Table 2", f"removing {x} lowers recall", brit, retrieval,
                "brit__ca_ls_si", without, "brit_recall", (), 1, CROSS)
          for x, without in (("CA", "brit__ls_si"), ("LS", "brit__ca_si"), ("SI", "brit__ca_ls"))],
        Claim("brit.nea", "BRIT", "Table 3", "BRIT's recall holds under Named Entity Anonymization better "
              "than the best flat baseline's (change original -> anonymised, BRIT minus baseline)",
              brit, sets.nea, "brit__ca_ls_si", "text_enc__clip_top_k", "brit_recall", (), 1,
              twin_set=f"{sets.nea}_orig"),
        Claim("brit.table1_accuracy", "BRIT", "Table 1", "BRIT answers the complex (cross-modal) questions "
              "more accurately than the best flat baseline (paper: 0.85 against 0.73, the mean of Text-Image "
              "and Image-Text)", brit, sets.table1_claim, "brit__ca_ls_si", "text_enc__clip_top_k", "accuracy",
              BRIT_TABLE1["complex"], 1, CROSS, paper_source=BRIT_TABLE1_SOURCE),
        Claim("brit.table1_text_image", "BRIT", "Table 1", "BRIT answers Text-Image questions more accurately "
              "than the best flat baseline (the paper's largest gain)", brit, sets.table1_claim, "brit__ca_ls_si",
              "text_enc__clip_top_k", "accuracy",
              BRIT_TABLE1["Text-Image"], 1, ("Text-Image",), paper_source=BRIT_TABLE1_SOURCE),
        Claim("brit.table1_image_text", "BRIT", "Table 1", "BRIT answers Image-Text questions more accurately "
              "than the best flat baseline", brit, sets.table1_claim, "brit__ca_ls_si", "text_enc__clip_top_k",
              "accuracy", BRIT_TABLE1["Image-Text"], 1, ("Image-Text",), paper_source=BRIT_TABLE1_SOURCE),
        *([Claim("brit.table1_image_image", "BRIT", "Table 1", f"on the simple Image-Image questions the flat "
                 f"baseline is as accurate as BRIT (within ±{margin:g})", brit, sets.brit, "brit__ca_ls_si",
                 "text_enc__clip_top_k", "accuracy", BRIT_TABLE1["Image-Image"], 0, ("Image-Image",),
                 margin=margin, paper_source=BRIT_TABLE1_SOURCE)] if margin is not None else []),
        *sensitivity_claims(sensitivity, margin, retrieval),
    ]
    multihop = sets.multihop
    for llm in llms:
        dnc, ta, react = (f"{s}__{llm}__{v}" for s, v in (("dnc", "ft"), ("tools_answer", "base"),
                                                           ("react", "ft")))
        out += [
            Claim(f"dnc.vs_toolsanswer.em.{llm}", "DnC", "Table 3", f"fine-tuned DnC beats ToolsAnswer on EM "
                  f"({llm})", "toolagent_eval", multihop, dnc, ta, "em", needs_format=True, paper_source=DNC_SOURCE),
            Claim(f"dnc.vs_react.em.{llm}", "DnC", "Table 3", f"fine-tuned DnC beats mm-ReAct on EM ({llm})",
                  "toolagent_eval", multihop, dnc, react, "em", needs_format=True, paper_source=DNC_SOURCE),
            Claim(f"dnc.vs_react.f1.{llm}", "DnC", "Table 3", f"fine-tuned DnC beats mm-ReAct on F1 ({llm})",
                  "toolagent_eval", multihop, dnc, react, "f1", needs_format=True, paper_source=DNC_SOURCE),
            Claim(f"dnc.vs_react.tool_calls.{llm}", "DnC", "Table 3", f"DnC calls fewer tools than mm-ReAct "
                  f"({llm})", "toolagent_eval", multihop, dnc, react, "tool_calls", (), -1, needs_format=True,
                  paper_source=DNC_SOURCE),
            Claim(f"dnc.finetuning.{llm}", "DnC", "Table 3", f"fine-tuning raises DnC's EM ({llm})",
                  "toolagent_eval", multihop, dnc, f"dnc__{llm}__base", "em", paper_source=DNC_SOURCE),
            Claim(f"dnc.conversational.{llm}", "DnC", "Table 4", f"fine-tuned DnC beats ToolsAnswer on "
                  f"MMCoQA EM ({llm})", "toolagent_eval", sets.conversational, dnc, ta, "em", conversational=True,
                  needs_format=True, paper_source=DNC_SOURCE,
                  untestable="" if sets.conversational else "no conversational set (toolagent_eval.conv_set is empty)"),
        ]
    swept = [*llms, *[n for n in size_llms if n not in llms]]
    sizes, how = size_sweep(swept)
    if len(sizes) > 1:
        out.append(Claim("dnc.model_size", "DnC", "Table 3", f"the bigger LLM ({sizes[-1]}) makes a better "
                         f"DnC than the smaller ({sizes[0]}) on F1 ({how})", "toolagent_eval", multihop,
                         f"dnc__{sizes[-1]}__ft", f"dnc__{sizes[0]}__ft", "f1", paper_source=DNC_SOURCE))
    elif len(swept) > 1:
        out.append(Claim("dnc.model_size", "DnC", "Table 3", "a bigger LLM makes a better DnC (F1)",
                         "toolagent_eval", multihop, "", None, "f1", untestable=f"no two comparable LLMs: {how}"))
    mm = "two_axis_eval"
    out += [
        Claim("mmr2.sft", "MM-R2", "Table (training)", "SFT lifts accuracy over the zero-shot base",
              mm, sets.infoseek, "mmr2_sft", "mmr2_base", "accuracy", (0.538, 0.112)),
        Claim("mmr2.grpo", "MM-R2", "Table (training)", "GRPO lifts accuracy over SFT", mm, sets.infoseek,
              "mmr2_grpo", "mmr2_sft", "accuracy", (0.543, 0.538)),
        Claim("mmr2.route_recall", "MM-R2", "Table (process)", "MM-R2 routes to the right unit more often "
              "(Route Recall@1; paper's baseline agent vs MM-R2, here base vs SFT+GRPO)", mm, sets.infoseek,
              "mmr2_grpo", "mmr2_base", "route_recall@1", (0.74, 0.2339)),
        Claim("mmr2.sparsity", "MM-R2", "Table (process)", "MM-R2's summaries are sparser (tokens per "
              "summary)", mm, sets.infoseek, "mmr2_grpo", "mmr2_base", "sparsity", (18.28, 24.58), -1),
        Claim("mmr2.fidelity", "MM-R2", "Table (process)", "summaries alone keep the answer "
              "(fidelity: Acc(summary only) / Acc(full) 0.90)", mm, sets.infoseek,
              f"mmr2_grpo{SUMMARY_ONLY}", "mmr2_grpo", "fidelity", (0.9011,), 0, ratio=True,
              min_correct=fidelity_min_correct, margin=margin),
        Claim("mmr2.ablation_km", "MM-R2", "Table (ablation)", "KM routing alone beats flat retrieval",
              mm, sets.infoseek, "ablation_km", "ablation_flat", "accuracy", (0.302, 0.221)),
        Claim("mmr2.ablation_intent", "MM-R2", "Table (ablation)", "intent binding on top of KM routing helps",
              mm, sets.infoseek, "ablation_intent_km", "ablation_km", "accuracy", (0.387, 0.302)),
        Claim("mmr2.ablation_loop", "MM-R2", "Table (ablation)", "the agentic loop beats single-shot "
              "intent + KM routing", mm, sets.loop_claim, "mmr2_grpo", "ablation_intent_km", "accuracy",
              (0.543, 0.387)),
        Claim("mmr2.budget", "MM-R2", "Table (budget)", "five passages per search beat one", mm, sets.infoseek,
              "mmr2_grpo_top5", "mmr2_grpo_top1", "accuracy", (0.543, 0.479), needs_format=True),
        Claim("mmr2.routed_vs_flat_retrieval", "MM-R2", "§4 KnowledgeMap", "routing into a unit retrieves "
              "gold passages more often than flat search (Recall@5)", mm, sets.infoseek, "ablation_km",
              "ablation_flat", "recall@5"),
        Claim("mmr2.knowledge_map_quality", "MM-R2", "§4 KnowledgeMap", "the configuration search yields "
              "coherent, balanced units", "knowledge_map", sets.infoseek, "", None, "", (), 0,
              untestable="a property of one clustering, not of questions: see knowledge_map's metrics"),
    ]
    return out


# --------------------------------------------------------------------------- data
def data_dir(data: Path | None) -> Path:
    """``data``, or the data folder at call time (a test that redirects io.DATA is never read past)."""
    return io.DATA if data is None else data


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


def per_question(stage: str, system: str, question_set: str, metric: str, kinds: Sequence[str],
                 questions: Mapping[str, Question], units: Mapping[str, str],
                 data: Path | None = None) -> dict[str, float] | None:
    """question id -> value for one system's traces (None when the trace file is missing)."""
    path = trace_path(stage, system, question_set, data)
    if not path.exists():
        return None
    traces = [t for t in load_traces(path) if t.question_id in questions]
    qs = [questions[t.question_id] for t in traces]
    scored = evaluator.score(traces, qs, (1, 5), dict(units), LexicalJudge(), system=system)
    return {s.question_id: v for s, q in zip(scored, qs)
            if (not kinds or q.kind in kinds) and (v := value(s, metric)) is not None}


def changes(claim: Claim, system: str, questions: Mapping[str, Question], units: Mapping[str, str],
            data: Path | None = None) -> dict[str, float] | None:
    """pair id -> the system's value on the question minus on its twin (None: a trace file is missing)."""
    now = per_question(claim.stage, system, claim.question_set, claim.metric, claim.kinds, questions, units, data)
    twin = per_question(claim.stage, system, claim.twin_set, claim.metric, claim.kinds, questions, units, data)
    if now is None or twin is None:
        return None
    twin_by_pair = {str(questions[i].meta.get("pair_id")): v for i, v in twin.items()}
    return {pair: v - twin_by_pair[pair] for i, v in now.items()
            if (pair := str(questions[i].meta.get("pair_id"))) in twin_by_pair}


# --------------------------------------------------------------------------- deciding
def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), digits)


def verdict(est: float, lo: float, hi: float, claim: Claim, n_needed: int | None = None,
            pool: int | None = None) -> tuple[str, str]:
    """(verdict, why) from the interval, the paper's direction and effect, and whether the set
    could show that effect at all (``n_needed`` > ``pool``: a CI holding 0 says nothing)."""
    effect = claim.paper_effect
    level = claim.b is None or claim.ratio
    if claim.margin is not None and not level:  # equivalence: the whole CI inside +-margin
        m = claim.margin
        if -m < lo and hi < m:
            return "reproduced", f"the 95 % CI lies within ±{m:g}"
        if lo > m or hi < -m:
            return "contradicted", f"the 95 % CI lies outside ±{m:g}"
        return "inconclusive", f"the 95 % CI crosses ±{m:g}"
    if claim.direction == 0:
        if effect is None:
            return "inconclusive", "no paper number to compare the level with"
        if not lo <= effect <= hi:
            return "contradicted", f"the paper's {effect:g} is outside the 95 % CI"
        # a wide CI holds the paper's value and much else: equal only within the margin
        m = claim.margin
        if m is None:
            return "inconclusive", (f"the paper's {effect:g} is inside the 95 % CI, with no equivalence margin "
                                    f"(report.stability_margin) to call them equal")
        if effect - m < lo and hi < effect + m:
            return "reproduced", f"the 95 % CI lies within ±{m:g} of the paper's {effect:g}"
        return "inconclusive", f"the paper's {effect:g} is inside the 95 % CI, which is wider than ±{m:g} around it"
    up = claim.direction > 0
    if (lo > 0 and up) or (hi < 0 and not up):
        return "reproduced", "the paper's direction, CI excludes 0"
    if (hi < 0 and up) or (lo > 0 and not up):
        return "contradicted", "the opposite direction, CI excludes 0"
    if n_needed and pool and n_needed > pool:  # the CI holds 0 and no sample of this set could help
        return "untestable here", (f"the CI holds 0 and the paper's effect needs {n_needed} questions; "
                                   f"the set has {pool}")
    if effect is not None and not lo <= effect <= hi:
        return "contradicted", f"the CI excludes the paper's effect ({effect:+.3g})"
    return "inconclusive", "the CI holds 0" + ("" if effect is None else " and the paper's effect")


def decide(claim: Claim, questions: Mapping[str, Question], units: Mapping[str, str], data: Path | None = None,
           alpha: float = 0.05, power: float = 0.8, reps: int = 2000, seed: int = 0,
           pool: int | None = None, max_format_errors: float | None = None) -> Decision:
    """Measure one claim on the traces and decide it (a strategy contrast whose agent breaks the
    dialogue format on at least ``max_format_errors`` of its questions is untestable here)."""
    contrast = f"{claim.a} vs {claim.b}" if claim.b else f"{claim.a} (level)"
    binary = claim.metric in BINARY
    conv = claim.conversational
    test = ("Wilson interval" if claim.b is None and binary else "bootstrap interval" if claim.b is None
            else "conversation-level bootstrap" + (" + exact McNemar" if binary else "") if conv
            else "Newcombe paired score interval + exact McNemar" if binary else "paired bootstrap")
    d = Decision(claim.id, claim.paper, claim.table, claim.claim, f"{contrast} on {claim.question_set}"
                 + (f" [{', '.join(claim.kinds)}]" if claim.kinds else ""), claim.metric,
                 list(claim.paper_value), _r(claim.paper_effect), test, claim.paper_source, pool=pool)
    if claim.untestable:
        d.reason = claim.untestable
        return d
    if claim.ratio:
        d.test = "paired bootstrap of the ratio"
        return decide_ratio(claim, d, questions, data, alpha, reps, seed)
    if claim.twin_set:
        binary = False  # a change per pair (-1, 0, +1 for a rate): a paired mean, no McNemar
        d.test = "paired bootstrap of the per-pair changes"
        a = changes(claim, claim.a, questions, units, data)
        b = changes(claim, claim.b, questions, units, data) if claim.b else {}
    else:
        a = per_question(claim.stage, claim.a, claim.question_set, claim.metric, claim.kinds, questions, units,
                         data)
        b = (per_question(claim.stage, claim.b, claim.question_set, claim.metric, claim.kinds, questions, units,
                          data) if claim.b else {})
    if a is None or b is None:
        missing = claim.a if a is None else claim.b
        d.reason = (f"no traces of {missing} on {claim.question_set} in data/{claim.stage}/traces "
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
    if not claim.twin_set:
        shares = {s: format_error_share(claim.stage, s, claim.question_set, ids, data)
                  for s in (claim.a, claim.b) if s}
        if any(shares.values()):
            d.extra["format_error_share"] = shares
            if max_format_errors is not None:
                d.extra["format_error_limit"] = max_format_errors
    xa = np.array([a[i] for i in ids])
    xb = np.array([b[i] for i in ids]) if claim.b else None
    clusters = ([str(questions[i].meta.get("conversation_id", i)) for i in ids]
                if conv and xb is not None else None)
    est, lo, hi = interval(xa, xb, clusters, binary, alpha, reps, seed)
    d.estimate, d.ci_low, d.ci_high = _r(est), _r(lo), _r(hi)
    if xb is None:
        d.mde = _r(stats.mde_level(d.n, float(xa.mean()), alpha)) if binary else None
    else:
        if clusters is not None:
            d.extra["conversations"] = len(set(clusters))
        if binary:
            only_a, only_b = stats.discordant(xa, xb)
            d.p_value = _r(stats.mcnemar_exact(only_a, only_b), 6)
            d.extra.update(only_a=only_a, only_b=only_b, a_rate=_r(float(xa.mean())), b_rate=_r(float(xb.mean())))
            disc = (only_a + only_b) / d.n
            d.mde = _r(stats.mde_paired(d.n, disc or float(xb.mean()) * (1 - float(xb.mean())) * 2, alpha, power))
        else:
            sd = float(np.std(xa - xb, ddof=1)) if d.n > 1 else 0.0
            d.mde = _r(stats.mde_mean(d.n, sd, alpha, power)) if sd > 0 else None
            d.extra["sd_diff"] = _r(sd)
    d.n_needed = needed(claim, binary, d, alpha, power)
    d.verdict, d.reason = verdict(d.estimate, d.ci_low, d.ci_high, claim, d.n_needed, pool)  # type: ignore[arg-type]
    redrawn = redrawn_verdicts(claim, xa, xb, clusters, binary, alpha, reps, seed, d.n_needed, pool)
    d.extra["redrawn_verdicts"] = redrawn
    d.verdict_holds = f"{sum(v == d.verdict for v in redrawn)}/{len(redrawn)}"
    return unreadable(claim, d, max_format_errors)


def unreadable(claim: Claim, d: Decision, limit: float | None) -> Decision:
    """A strategy contrast whose agent breaks the dialogue format on at least ``limit`` of its
    questions is untestable here: its verdict would say which agent holds the format, not which
    strategy answers better (the measured verdict is kept in ``extra['verdict_if_read']``)."""
    shares = d.extra.get("format_error_share") or {}
    broken = {s: v for s, v in shares.items() if limit is not None and v >= limit}
    if not claim.needs_format or not broken:
        return d
    d.extra["verdict_if_read"], d.verdict, d.verdict_holds = d.verdict, "untestable here", None
    who = ", ".join(f"{s} on {v:.0%}" for s, v in broken.items())
    d.reason = (f"the replies break the dialogue format ({who} of the questions, limit {limit:.0%}, "
                f"report.max_format_errors): the contrast reads format compliance, not the strategy; "
                f"decide it on an LLM that holds the format (toolagent_eval.llms)")
    return d


def right_answers(stage: str, system: str, question_set: str, questions: Mapping[str, Question],
                  data: Path | None = None) -> dict[str, float] | None:
    """question id -> 1.0 if the trace's answer is right, else 0.0 (an empty answer is a wrong one,
    not a missing one: a ratio of right answers must not drop the hard questions)."""
    path = trace_path(stage, system, question_set, data)
    if not path.exists():
        return None
    return {t.question_id: float(accuracy(t.answer, questions[t.question_id]))
            for t in load_traces(path) if t.question_id in questions}


def decide_ratio(claim: Claim, d: Decision, questions: Mapping[str, Question], data: Path | None, alpha: float,
                 reps: int, seed: int) -> Decision:
    """A's right answers over B's on the questions both answered (fidelity), a level against the
    paper's ratio, undefined below ``claim.min_correct`` right B answers."""
    a = right_answers(claim.stage, claim.a, claim.question_set, questions, data)
    b = right_answers(claim.stage, str(claim.b), claim.question_set, questions, data)
    if a is None or b is None:
        d.reason = (f"no traces of {claim.a if a is None else claim.b} on {claim.question_set} in "
                    f"data/{claim.stage}/traces (run `dvc repro {claim.stage}`)")
        return d
    ids = sorted(set(a) & set(b))
    d.n = len(ids)
    top, bottom = np.array([a[i] for i in ids]), np.array([b[i] for i in ids])
    d.extra.update(right_a=int(top.sum()), right_b=int(bottom.sum()))
    least = max(1, claim.min_correct)
    if bottom.sum() < least:
        d.reason = (f"{int(bottom.sum())} of {d.n} {claim.b} answers are right, fewer than the {least} "
                    f"a ratio needs (two_axis_eval.fidelity_min_correct)")
        return d
    est, lo, hi = stats.ratio_bootstrap(top, bottom, alpha, reps, seed)
    d.estimate, d.ci_low, d.ci_high = _r(est), _r(lo), _r(hi)
    d.verdict, d.reason = verdict(est, lo, hi, claim)
    redrawn = []
    for s in REDRAW_SEEDS:
        idx = np.random.default_rng([seed, s]).integers(0, d.n, d.n)
        if bottom[idx].sum() < least:
            redrawn.append("untestable here")
            continue
        redrawn.append(verdict(*stats.ratio_bootstrap(top[idx], bottom[idx], alpha, reps, seed + s), claim)[0])
    d.extra["redrawn_verdicts"] = redrawn
    d.verdict_holds = f"{sum(v == d.verdict for v in redrawn)}/{len(redrawn)}"
    return d


def format_error_share(stage: str, system: str, question_set: str, ids: Sequence[str],
                       data: Path | None = None) -> float:
    """Share of the claim's questions on which the system's replies broke the format at least once: a
    verdict between two readers that fail the format reads the format, not the strategy."""
    path, wanted = trace_path(stage, system, question_set, data), set(ids)
    hit = [bool(t.format_errors or any(s.format_error for s in t.steps))
           for t in (load_traces(path) if path.exists() else []) if t.question_id in wanted]
    return round(sum(hit) / len(hit), 4) if hit else 0.0


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


def redrawn_verdicts(claim: Claim, xa: np.ndarray, xb: np.ndarray | None, clusters: Sequence[str] | None,
                     binary: bool, alpha: float, reps: int, seed: int, n_needed: int | None = None,
                     pool: int | None = None, seeds: Sequence[int] = REDRAW_SEEDS) -> list[str]:
    """The verdict on each seeded redraw of the evaluation sample: the same number of questions
    (of whole conversations when ``clusters`` is given) drawn with replacement from those measured,
    as if another seed had drawn the sample. Costs no model call; a verdict that flips on a
    redraw hinges on which questions were drawn."""
    out = []
    for s in seeds:
        rng = np.random.default_rng([seed, s])
        if clusters is None:
            idx = rng.integers(0, len(xa), len(xa))
            drawn = None
        else:
            groups: dict[str, list[int]] = {}
            for i, c in enumerate(clusters):
                groups.setdefault(c, []).append(i)
            names = sorted(groups)
            picks = rng.integers(0, len(names), len(names))
            idx = np.array([i for p in picks for i in groups[names[p]]])
            drawn = [f"{names[p]}#{j}" for j, p in enumerate(picks) for _ in groups[names[p]]]
        est, lo, hi = interval(xa[idx], None if xb is None else xb[idx], drawn, binary, alpha, reps, seed + s)
        out.append(verdict(est, lo, hi, claim, n_needed, pool)[0])
    return out


def needed(claim: Claim, binary: bool, d: Decision, alpha: float, power: float) -> int | None:
    """Questions needed to detect the paper's effect at ``power`` (paired where A and B share them)."""
    if claim.paper_pair is None:
        return None
    pa, pb = claim.paper_pair
    if binary:
        return stats.n_paired(pa, pb, alpha, power)
    sd = d.extra.get("sd_diff")
    return stats.n_mean(pa - pb, sd, alpha, power) if sd else None


def power_table(registry_claims: Sequence[Claim], alpha: float, power: float) -> list[dict[str, Any]]:
    """The power analysis before any trace: for each claim with the paper's two rates, the paired
    questions its effect needs at ``power`` (McNemar, discordance as for independent systems: an
    upper bound when the systems agree more than chance). Means need the sd of the differences,
    known only from traces (their n needed is in claims.json after a run)."""
    rows = []
    for c in registry_claims:
        if c.paper_pair is None:
            continue
        pa, pb = c.paper_pair
        binary = c.metric in BINARY
        rows.append({"id": c.id, "paper": c.paper, "claim": c.claim, "metric": c.metric,
                     "paper_a": pa, "paper_b": pb, "paper_effect": _r(pa - pb),
                     "n_needed": stats.n_paired(pa, pb, alpha, power) if binary else None,
                     "at_least_10_points": binary and abs(pa - pb) >= 0.10})
    return rows


def compute(data: Path, alpha: float, power: float, reps: int, seed: int,
            llms: Sequence[str], size_llms: Sequence[str] = (),
            papers: Sequence[str] = (), margin: float | None = None,
            fidelity_min_correct: int = 0, sets: ClaimSets = WORLD_SETS,
            max_format_errors: float | None = None) -> list[dict[str, Any]]:
    """Every claim of :func:`registry` (of ``papers`` only, when given), decided from the traces
    under ``data`` (one dict each; ``llms``: DnC's LLMs smallest first; ``size_llms``: other sizes
    for the size claim only; ``margin``: the equivalence margin of BRIT's stability claims
    and of the level claims (fidelity), params report.stability_margin, needed when brit_linking
    wrote sensitivity runs;
    ``fidelity_min_correct``: right full answers below which fidelity is undefined; ``sets``: the
    question sets the stages wrote traces under; ``max_format_errors``: see :func:`unreadable`)."""
    units = unit_map(data)
    cache: dict[str, dict[str, Question]] = {}
    out = []
    sens = data / "brit_linking" / "sensitivity.json"
    settings = read_json(sens) if sens.exists() and (not papers or "BRIT" in papers) else ()
    for claim in registry(llms, size_llms, settings, margin, fidelity_min_correct, sets):
        if papers and claim.paper not in papers:
            continue
        if claim.question_set not in cache:
            f = question_file(claim.question_set, data)
            cache[claim.question_set] = {q.id: q for q in load_questions(f)} if f else {}
        qs = cache[claim.question_set]
        pool = sum(1 for q in qs.values() if q.split.startswith("test")) or len(qs) or None
        out.append(asdict(decide(claim, qs, units, data, alpha, power, reps, seed, pool, max_format_errors)))
    return out


def counts(decisions: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Verdicts per paper (and in all): what the report says reproduced."""
    out: dict[str, dict[str, int]] = {}
    for d in decisions:
        for key in (d["paper"], "all"):
            bucket = out.setdefault(key, {})
            bucket[d["verdict"]] = bucket.get(d["verdict"], 0) + 1
    return out


def table(decisions: Sequence[Mapping[str, Any]]) -> Any:
    """The claims as a DataFrame in the papers' order: verdict, estimate [CI], n, mde, n needed."""
    def fmt(x: Any) -> str:
        return "–" if x is None else f"{x:+.3f}" if isinstance(x, float) else str(x)

    rows = []
    for d in decisions:
        est = d["estimate"]
        ci = "" if d["ci_low"] is None else f" [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"
        paper = d["paper_effect"]
        rows.append({"paper": d["paper"], "table": d["table"], "claim": d["claim"],
                     "paper value": "–" if paper is None else f"{paper:+.3g}",
                     "ours (95% CI)": ("–" if est is None else fmt(est) + ci), "n": d["n"],
                     "mde": fmt(d["mde"]), "n needed": d["n_needed"] if d["n_needed"] else "–",
                     "verdict": d["verdict"], "holds": d.get("verdict_holds") or "–", "why": d["reason"]})
    return pd.DataFrame(rows)


def narrative(decisions: Sequence[Mapping[str, Any]]) -> str:
    """"What we see", written from the decisions (Markdown): each claim's verdict, estimate, CI
    and n, so no number in the prose is typed by hand."""
    lines = []
    for d in decisions:
        head = f"- **{d['claim']}** ({d['paper']} {d['table']}): **{d['verdict']}**"
        if d["estimate"] is None:
            lines.append(f"{head}: {d['reason']}.")
            continue
        ci = "" if d["ci_low"] is None else f" [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"
        paper = "" if d["paper_effect"] is None else f"; the paper's {d['paper_effect']:+.3g}"
        power = "" if d["mde"] is None else f"; smallest detectable at this n ±{d['mde']:.3f}"
        needed = f", {d['n_needed']} needed for the paper's effect" if d["n_needed"] else ""
        holds = f"; the verdict holds in {d['verdict_holds']} redrawn samples" if d.get("verdict_holds") else ""
        extra = d.get("extra") or {}
        shares, limit = extra.get("format_error_share") or {}, extra.get("format_error_limit")
        broken = ("; replies break the format on " + ", ".join(f"{v:.0%} of {k}'s questions" for k, v in shares.items())
                  + ": this reads the format more than the method"
                  if limit is not None and max(shares.values(), default=0) >= limit and "format" not in d["reason"]
                  else "")
        lines.append(f"{head}: {d['contrast']}, {d['metric']} {d['estimate']:+.3f}{ci}, n = {d['n']}"
                     f"{paper}{power}{needed}{holds}{broken} ({d['reason']}).")
    counts = Counter(d["verdict"] for d in decisions)
    summary = ", ".join(f"{counts[v]} {v}" for v in ("reproduced", "contradicted", "inconclusive",
                                                      "untestable here") if counts[v])
    return f"{len(decisions)} claims: {summary}.\n\n" + "\n".join(lines)


def forest(decisions: Sequence[Mapping[str, Any]]) -> Any:
    """Forest plot: each measured claim's estimate and 95 % CI, the paper's effect beside it."""
    shown = [d for d in decisions if d["estimate"] is not None]
    fig, ax = new_figure(figsize=(9, 0.35 * max(len(shown), 3) + 1.2))
    colours = {"reproduced": "#2a9d8f", "contradicted": "#e76f51", "inconclusive": "#8d99ae",
               "untestable here": "#bbbbbb"}
    for y, d in enumerate(shown):
        ax.plot([d["ci_low"], d["ci_high"]], [y, y], color=colours[d["verdict"]], lw=2)
        ax.plot(d["estimate"], y, "o", color=colours[d["verdict"]])
        if d["paper_effect"] is not None and d["metric"] not in ("tool_calls", "sparsity"):
            ax.plot(d["paper_effect"], y, "x", color="k")
    ax.axvline(0, color="grey", lw=0.8, ls=":")
    ax.set_yticks(range(len(shown)), [d["id"] for d in shown], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ours: estimate and 95 % CI (colour = verdict); x = the paper's effect")
    ax.set_title(f"{len(shown)} claims measured here, {len(decisions) - len(shown)} not measurable")
    fig.tight_layout()
    return fig
