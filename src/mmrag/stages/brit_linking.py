"""Stage ``brit_linking``: does linking images into BRIT's text graph help cross-modal retrieval?

Over the graph ``brit_graph`` saved: the graph threshold calibrated on a seeded dev split, the
paper's Table 2 (recall for every linking, against flat CLIP and text-encoder + CLIP baselines),
the text recall beside it (BRIT, BM25 and dense over the gold sections of any question, cross-modal
or not, and per hop of a gold decomposition: HotpotQA's and MuSiQue's supporting paragraphs),
Table 1 (QA accuracy by question kind, with the reader's ceiling), Table 3 (recall without and
with Named Entity Anonymization), one question's retrieved subgraph, and every system's answers
as traces (``data/brit_linking/traces/<system>__<set>.jsonl``). Figures a question set cannot
support (no gold evidence, no choices) are written as "not applicable" notes and reported as null.
"""

from __future__ import annotations

import json
import numbers
import random
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
from PIL import Image as PILImage

from mmrag import io
from mmrag.baselines import bm25
from mmrag.brit import paper as brit_paper
from mmrag.brit.baselines import chunk_sections, within_budget
from mmrag.brit.evaluation import (
    CROSS_KINDS,
    KINDS,
    accuracy_row,
    answer_row,
    covers,
    has_gold_evidence,
    hop_recall_rows,
    recall_row,
    text_recall_row,
)
from mmrag.brit.graph import load_graph
from mmrag.brit.linking import COMBINATIONS, label
from mmrag.brit.params import BritGraph, BritLinking
from mmrag.brit.reader import read_all
from mmrag.brit.retrieval import Retrieved
from mmrag.brit.system import BritSystem, Systems, make_reader, open_systems, similarity_reader, systems_for
from mmrag.evaluate import papers
from mmrag.evaluate.metrics import golds
from mmrag.evaluate.params import Report
from mmrag.evaluate.stats import mcnemar_exact, newcombe_paired, wilson
from mmrag.io import save_figure
from mmrag.models.params import Inference, Models
from mmrag.params import Base, Sections
from mmrag.sampling import round_robin
from mmrag.schema import Document, Question, load_questions, question_path
from mmrag.stages import StageResult, new_figure

STAGE = "brit_linking"
FULL = ("CA", "LS", "SI")  # BRIT full, as in the paper
PAPER_OVERALL = {"CA+LS+SI": 0.80}  # the paper's overall recall quoted by the claims
PAPER = {"overall_recall_brit_full": 0.80, "overall_recall_baseline": 0.59, "threshold": 0.75}
FULL_NAME = f"BRIT ({label(FULL)})"
# params brit_linking.diagnostics -> (Table 1/2 row, what the reader gets of a triplet, threshold): BRIT
# full beside the paper's settings; no claim reads them (their traces: brit_<key>__ca_ls_si)
DIAGNOSTICS = {
    "calibrated": (f"BRIT calibrated ({label(FULL)})", "surface", "calibrated"),
    "sentences": (f"BRIT sentences ({label(FULL)})", "sentences", "params"),
    "lemmas": (f"BRIT lemmas ({label(FULL)})", "lemma", "params"),
    "before": (f"BRIT before ({label(FULL)})", "lemma", "calibrated"),
}
BEFORE = DIAGNOSTICS["before"][0]

Runs = dict[str, tuple[list[dict[str, Any]], list[Any]]]  # system -> (score rows, traces)


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    inference: Inference
    models: Models
    brit_graph: BritGraph
    brit_linking: BritLinking
    report: Report


@dataclass
class QuestionSplit:
    """The question set (only questions whose evidence is in the graph), its seeded dev/test
    split, and which figures the test questions make measurable."""

    questions: list[Question]
    dev: list[Question]
    test: list[Question]
    gold: bool  # recall (Tables 2, 3) is measurable: some cross-modal test question has gold
    multiple_choice: bool  # Table 1 (accuracy per kind) is measurable
    open: list[Question]  # free-text questions: answered, scored by EM / F1
    other: list[Question]  # questions outside Table 1: the answers table


@dataclass
class BritLinkingResult(StageResult):
    """The stage's result, plus the runs and the example retrieval the notebook shows."""

    split: QuestionSplit | None = None
    runs: Runs = field(default_factory=dict)  # Table 2's (and Table 3's "NEA <system>") runs
    qa: Runs = field(default_factory=dict)  # Table 1's runs (with the reader)
    example: Retrieved | None = None


def note_figure(title: str, reason: str) -> Any:
    """A figure that says why a plot is not applicable (the stage's declared outputs exist)."""
    fig, ax = new_figure(figsize=(7, 2.5))
    ax.text(0.5, 0.5, textwrap.fill(f"{title}: not applicable. {reason}", 70), ha="center",
            va="center", fontsize=10, wrap=True)
    ax.axis("off")
    return fig


def split_questions(questions: list[Question], dev_share: float, seed: int,
                    max_questions: int | None) -> tuple[list[Question], list[Question]]:
    """Seeded (dev, test) split; dev is only for threshold calibration, which needs gold
    evidence, so a question set without any gold evidence is all test (dev empty)."""
    rng = random.Random(seed)
    order = sorted(questions, key=lambda q: q.id)
    rng.shuffle(order)
    n_dev = int(round(dev_share * len(order))) if has_gold_evidence(order) else 0
    dev, test = order[:n_dev], order[n_dev:]
    if max_questions:  # a random (seeded) subset keeps every question type
        test = test[:max_questions]
        dev = dev[: max(max_questions // 4, 8)]
    return dev, sorted(test, key=lambda q: q.id)


def balanced_subset(questions: list[Question], n: int | None, seed: int) -> list[Question]:
    """Up to ``n`` questions, as even across kinds as they allow (seeded; None: all), by id: drawn
    in turn from each kind (sorted), each kind in id order shuffled by ``"<seed>:qa"``."""
    if not n or n >= len(questions):
        return list(questions)
    by_id = sorted(questions, key=lambda q: q.id)
    return sorted(round_robin(by_id, n, f"{seed}:qa", by=lambda q: q.kind), key=lambda q: q.id)


def split_question_set(path: Path, systems: Systems, dev_share: float, seed: int,
                       max_questions: int | None) -> QuestionSplit:
    """The questions whose evidence is in the graph, split dev/test (seeded); a set without gold
    evidence is all test (calibration needs gold)."""
    sections = set(systems.sections)
    questions = [q for q in load_questions(path)
                 if all(e in sections or e in systems.captions for e in q.gold_evidence)]
    dev, test = split_questions(questions, dev_share, seed, max_questions)
    print(f"{len(questions)} questions with evidence in the graph: dev {len(dev)}, test {len(test)}")
    split = QuestionSplit(
        questions, dev, test,
        gold=has_gold_evidence(test, CROSS_KINDS),
        multiple_choice=any(q.choices and q.kind in KINDS for q in test),
        open=[q for q in test if not q.choices],
        other=[q for q in test if not q.choices or q.kind not in KINDS])
    if not has_gold_evidence(questions):
        print(f"no question of {path.name} has gold evidence: every question is test; "
              "calibration and recall are not applicable (null)")
    if split.open:
        print(f"{len(split.open)} open questions (no choices): free-text answers, scored by exact match, "
              "token F1 and answer-in-context")
    return split


def question_kinds(test: list[Question]) -> pd.Series:
    """How many test questions of each kind / source."""
    return pd.Series([q.kind + " / " + q.meta.get("source", "") for q in test]).value_counts()


def calibrate(systems: Systems, linkers: Iterable[str], dev: list[Question], grid: Iterable[float]
              ) -> list[dict[str, float]]:
    """Dev recall and retrieved words per threshold (pick: best recall, then fewest words)."""
    out = []
    for th in grid:
        rows, _ = BritSystem.graph(systems, linkers, "calib", threshold=th).run(dev)
        rr = recall_row(rows)
        out.append({"threshold": th, "recall": rr["overall"], "words": rr["words"]})
    return out


def best_threshold(sweep: list[dict[str, float]]) -> float:
    """Highest recall; ties go to fewer words, then the higher threshold."""
    ok = [s for s in sweep if s["recall"] == s["recall"]]
    if not ok:
        raise ValueError("calibration: no dev question with cross-modal gold evidence")
    return max(ok, key=lambda s: (s["recall"], -s["words"], s["threshold"]))["threshold"]


def calibration(systems: Systems, main: tuple[str, ...], dev: list[Question],
                cfg: BritLinking) -> tuple[pd.DataFrame, float | None, Any]:
    """(dev sweep, dev-optimal threshold, figure) of the graph threshold with the main linkers;
    (empty, None, a note) without cross-modal gold evidence in dev."""
    if not has_gold_evidence(dev, CROSS_KINDS):
        why = "no dev question with cross-modal gold evidence"
        print(f"calibration not applicable: {why}; params threshold {cfg.threshold} is used as is")
        return (pd.DataFrame(columns=["threshold", "recall", "words"]), None,
                note_figure("threshold calibration", why))
    sweep = pd.DataFrame(calibrate(systems, main, dev, cfg.calibration_grid))
    best_th = best_threshold(sweep.to_dict("records"))
    print(f"dev-optimal threshold {best_th} (the diagnostic row 'calibrated'); the claim runs use params' "
          f"{cfg.threshold} (the paper's {PAPER['threshold']})")
    return sweep, best_th, calibration_figure(sweep, cfg.threshold)


def calibration_figure(sweep: pd.DataFrame, threshold: float) -> Any:
    """Dev recall and retrieved words against the threshold, params' threshold marked."""
    fig, ax = new_figure(figsize=(6, 3.5))
    ax.plot(sweep.threshold, sweep.recall, marker="o", label="dev recall")
    ax.axvline(threshold, ls="--", color="grey", label="params threshold")
    ax.set_xlabel("graph threshold")
    ax.set_ylabel("recall (cross-modal)")
    ax.legend()
    ax2 = ax.twinx()
    ax2.plot(sweep.threshold, sweep.words, color="#dd8452", marker=".")
    ax2.set_ylabel("retrieved words", color="#dd8452")
    ax2.grid(False)
    fig.tight_layout()
    return fig


def knob_sweep_rows(systems: Systems, linkers: Iterable[str], dev: list[Question],
                    knobs: dict[str, Iterable[float]]) -> list[dict[str, Any]]:
    """One-at-a-time sweep of the paper's retrieval knobs (``threshold``, PCST ``top_k``,
    ``edge_cost`` Ce) around the systems' values: dev recall (cross-modal; every question with
    gold evidence where none is cross-modal, as on a text corpus), retrieved words and images,
    and how many disjoint graphs the threshold kept, per value."""
    linkers = tuple(linkers)
    dev = [q for q in dev if q.gold_evidence]
    out = []
    for knob, values in knobs.items():
        if knob not in ("threshold", "top_k", "edge_cost"):
            raise ValueError(f"knob {knob!r}: choose threshold, top_k or edge_cost")
        for value in values:
            retriever = systems.brit(linkers, **{knob: value})
            kept = []
            rows = []
            for q in dev:
                r = retriever.retrieve(q.text, q.image_path)
                kept.append(r.kept_components)
                rows.append({"kind": q.kind, "source": q.meta.get("source", ""),
                             "recalled": covers(r.evidence_ids(), q.gold_evidence, set(systems.sections)),
                             "words": r.words(systems.captions), "images": len(r.images)})
            rr = recall_row(rows)
            if rr["overall"] != rr["overall"]:  # no cross-modal question (a text corpus): every one
                rr = {"overall": round(float(np.mean([r["recalled"] for r in rows])), 4) if rows else float("nan"),
                      "words": round(float(np.mean([r["words"] for r in rows])), 1) if rows else float("nan"),
                      "images": round(float(np.mean([r["images"] for r in rows])), 2) if rows else float("nan")}
            out.append({"knob": knob, "value": value, "recall": rr["overall"], "words": rr["words"],
                        "images": rr["images"],
                        "kept_graphs": round(float(np.mean(kept)), 2) if kept else float("nan")})
    return out


def knob_sweep(systems: Systems, main: tuple[str, ...], dev: list[Question],
               cfg: BritLinking) -> tuple[pd.DataFrame, Any]:
    """(sweep, figure) of the paper's knobs one at a time on dev: the graph threshold
    (``calibration_grid``), PCST top-k (``sweep_top_k``) and edge cost Ce (``sweep_edge_cost``),
    the others at their params values: recall, retrieved words and images, graphs kept."""
    cols = ["knob", "value", "recall", "words", "images", "kept_graphs"]
    if not has_gold_evidence(dev):
        return pd.DataFrame(columns=cols), note_figure("knob sweep", "no dev question with gold evidence")
    knobs = {"threshold": cfg.calibration_grid, "top_k": cfg.sweep_top_k, "edge_cost": cfg.sweep_edge_cost}
    sweep = pd.DataFrame(knob_sweep_rows(systems, main, dev, knobs), columns=cols)
    fig, axes = new_figure(ncols=3, figsize=(13, 3.6))
    current = {"threshold": cfg.threshold, "top_k": cfg.top_k, "edge_cost": cfg.edge_cost}
    for ax, (knob, part) in zip(axes, sweep.groupby("knob", sort=False)):
        ax.plot(part.value, part.recall, marker="o", label="dev recall")
        ax.axvline(current[knob], ls="--", color="grey", label="params value")
        ax.set_xlabel({"threshold": "graph threshold", "top_k": "PCST top-k",
                       "edge_cost": "PCST edge cost Ce"}[knob])
        ax.set_ylabel("dev recall")
        ax.set_ylim(-0.02, 1.02)
        ax2 = ax.twinx()
        ax2.plot(part.value, part.words, color="#dd8452", marker=".")
        ax2.set_ylabel("retrieved words", color="#dd8452")
        ax2.grid(False)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return sweep, fig


def inert_knobs(sweep: pd.DataFrame) -> list[str]:
    """Knobs whose swept values leave dev recall and retrieved words unchanged."""
    return [k for k, part in sweep.groupby("knob", sort=False)
            if part.recall.nunique(dropna=False) <= 1 and part.words.nunique(dropna=False) <= 1]


@dataclass
class TextTopK:
    """A flat top-k text retriever (BM25 or dense) over BRIT's section chunks, returning BRIT's
    ``Retrieved`` so a BritSystem scores and traces it like the paper's baselines."""

    chunks: list[Any]  # mmrag.brit.baselines.Chunk: .text, .section_id
    ranker: Any  # bm25.BM25 or bm25.Dense over the chunks' texts
    k: int
    words: int | None = None  # text words budget, as the CLIP baselines' (None: k chunks)

    def retrieve(self, question: str, image_path: str | None = None) -> Retrieved:
        """The top-k chunks for the question within the word budget (a query image is ignored:
        text only)."""
        out = Retrieved()
        for i in within_budget(self.ranker.top(question, self.k), self.chunks, self.k, self.words):
            out.texts.append(self.chunks[i].text)
            out.text_sources.append(self.chunks[i].section_id)
        return out


def text_baselines(systems: Systems) -> dict[str, TextTopK]:
    """BM25 and dense (text encoder) top-k over the same section chunks, at the baselines' k and
    word budget: text-only rows a reader trusts on real text, beside the paper's CLIP baselines."""
    chunks = chunk_sections(systems.documents)
    texts = [c.text for c in chunks]
    k, words = systems.baseline_k, systems.baseline_words
    return {"BM25 top-k": TextTopK(chunks, bm25.BM25(texts), k, words),
            "dense top-k": TextTopK(chunks, bm25.Dense(texts, systems.graph.enc.text), k, words)}


def text_baseline_systems(systems: Systems, flat: dict[str, TextTopK],
                          reader: Any = None) -> dict[str, BritSystem]:
    """The text baselines as BritSystems (scored and traced like every other row)."""
    return {name: BritSystem(r, reader, systems.captions, set(systems.sections), name) for name, r in flat.items()}


def context_table(qa: Runs, questions: list[Question]) -> pd.DataFrame:
    """Per system: questions with a gold answer (n) and the share whose answer is in its retrieved context."""
    qmap = {q.id: q for q in questions}
    return pd.DataFrame([{"system": k, **bm25.trace_context(traces, qmap)} for k, (_, traces) in qa.items()]
                        ).set_index("system")


def diagnostic_systems(systems: Systems, diagnostics: Iterable[str], calibrated: float | None,
                       reader: Any = None) -> dict[str, BritSystem]:
    """BRIT full's diagnostic rows (:data:`DIAGNOSTICS`, params ``diagnostics``): the dev-calibrated
    threshold and the other reader texts; a row on the calibrated threshold is skipped (with a note)
    where calibration was not applicable (``calibrated`` None)."""
    out = {}
    for key in diagnostics:
        name, form, th = DIAGNOSTICS[key]
        if th == "calibrated" and calibrated is None:
            print(f"diagnostic row {name!r} skipped: no dev-calibrated threshold")
            continue
        out[name] = BritSystem.graph(systems, FULL, name, reader,
                                     threshold=calibrated if th == "calibrated" else None, text_form=form)
    return out


def recall_runs(systems: Systems, main: tuple[str, ...], test: list[Question],
                flat: dict[str, TextTopK] | None = None,
                diagnostics: dict[str, BritSystem] | None = None) -> Runs:
    """Table 2's runs (retrieval only): the flat baselines, BRIT under every linking, then BRIT full's
    diagnostic rows (``diagnostics``: :func:`diagnostic_systems`)."""
    runs: Runs = {}
    runs["CLIP top-k"] = BritSystem.flat(systems, "clip", "clip_topk").run(test)
    runs["text enc.+CLIP top-k"] = BritSystem.flat(systems, "dual", "dual_topk").run(test)
    for name, system in text_baseline_systems(systems, flat or {}).items():
        runs[name] = system.run(test)
    combos = COMBINATIONS + ([main] if main not in COMBINATIONS else [])
    for combo in combos:
        name = label(combo)
        runs[name] = BritSystem.graph(systems, combo, f"brit_{name}").run(test)
    for name, system in (diagnostics or {}).items():
        runs[name] = system.run(test)
    return runs


SENSITIVITY = "sensitivity.json"  # data/brit_linking: which retrieval traces move which knob


def sensitivity_runs(systems: Systems, main: tuple[str, ...], test: list[Question],
                     cfg: BritLinking) -> tuple[Runs, list[dict[str, Any]]]:
    """BRIT (main linkers) with one knob moved to each end of its swept grid, the others at params,
    on every test question (retrieval only): the paired traces that decide the paper's "recall is
    stable across thresholds and PCST settings" (the dev sweep keeps only means). (runs, settings:
    knob, value, params value, the moved and the params run's trace systems)."""
    current = {"threshold": cfg.threshold, "top_k": cfg.top_k, "edge_cost": cfg.edge_cost}
    grids = {"threshold": cfg.calibration_grid, "top_k": cfg.sweep_top_k, "edge_cost": cfg.sweep_edge_cost}
    runs: Runs = {}
    settings = []
    for knob, grid in grids.items():
        for value in sorted({min(grid), max(grid)} - {current[knob]}) if grid else []:
            name = f"{label(main)} {knob}={value:g}"
            system = BritSystem(systems.brit(main, **{knob: value}), None, systems.captions,
                                set(systems.sections), trace_system(name))
            runs[name] = system.run(test)
            settings.append({"knob": knob, "value": value, "params_value": current[knob],
                             "system": retrieval_system(name),
                             "params_system": retrieval_system(label(main))})
    return runs, settings


def recall_table(runs: Runs) -> pd.DataFrame:
    """Table 2: recall per cross-modal kind and overall, words and images, per system."""
    table2 = pd.DataFrame([{"system": k, **recall_row(rows)} for k, (rows, _) in runs.items()]
                          ).set_index("system")
    table2["paper overall"] = [PAPER_OVERALL.get(k, np.nan) for k in table2.index]
    table2["paper words"] = [paper_table2(k, "Words") for k in table2.index]
    table2["paper images"] = [paper_table2(k, "Images") for k in table2.index]
    return table2


TEXT_BASELINES = ("BM25 top-k", "dense top-k")  # Table 2's text-only rows, beside BRIT in the text recall
TEXT_RECALL_COLUMNS = ["questions", "recall", "recall 95% CI", "all gold", "all gold 95% CI", "gold found",
                       "gold found 95% CI", "answer in context", "answer in context 95% CI", "words"]
HOP_COLUMNS = ["system", "hop", "questions", "recall", "95% CI"]


def text_recall_systems(runs: Runs, main: tuple[str, ...]) -> dict[str, str]:
    """{row name: Table 2 run} of the text recall: BRIT under the main linkers and the text baselines
    (those Table 2 ran)."""
    named = {f"BRIT ({label(main)})": label(main), **{name: name for name in TEXT_BASELINES}}
    return {name: key for name, key in named.items() if key in runs}


def text_recall_table(runs: Runs, main: tuple[str, ...], test: list[Question],
                      sections: set[str]) -> pd.DataFrame:
    """Recall over the gold sections of every test question that has one, cross-modal or not
    (:func:`mmrag.brit.evaluation.text_recall_row`), from Table 2's traces (no new retrieval): BRIT
    (main linkers), BM25 and dense; empty where no test question has a gold section."""
    qmap = {q.id: q for q in test}
    rows = []
    for name, key in text_recall_systems(runs, main).items():
        row = text_recall_row(runs[key][1], qmap, sections)
        if row is not None:
            rows.append({"system": name, **row})
    return pd.DataFrame(rows, columns=["system", *TEXT_RECALL_COLUMNS]).set_index("system")


def hop_recall_table(runs: Runs, main: tuple[str, ...], test: list[Question], sections: set[str]) -> pd.DataFrame:
    """Recall per hop of the gold decompositions (:func:`mmrag.brit.evaluation.hop_recall_rows`: MuSiQue's
    per-step supporting paragraphs) for the text recall's systems, from Table 2's traces; empty where
    no test question's decomposition names gold sections."""
    qmap = {q.id: q for q in test}
    rows = [{"system": name, **row} for name, key in text_recall_systems(runs, main).items()
            for row in hop_recall_rows(runs[key][1], qmap, sections)]
    return pd.DataFrame(rows, columns=HOP_COLUMNS)


PAPER_TABLE2_ROWS = {"CLIP top-k": "CLIP (k=2)"}  # our flat row -> the paper's (BRIT rows: by linking)


def paper_table2(system: str, column: str) -> float:
    """The paper's Table 2 cell (``column``: Words, Images, Overall, ...) for one of our rows (a linking
    label "CA+LS+SI" is the paper's "BRIT [CA+LS+SI]"; the text encoder + CLIP row has no counterpart,
    BLIP2 is not run); NaN where the paper has no such row."""
    row = PAPER_TABLE2_ROWS.get(system) or (f"BRIT [{system}]" if not system.startswith(("BRIT ", "BM25", "dense",
                                                                                             "text enc"))
                                             else None)
    if row is None:
        return float("nan")
    try:
        return papers.value("BRIT", "Table 2", row, column)
    except (KeyError, LookupError, ValueError):
        return float("nan")


def recall_figure(table2: pd.DataFrame) -> Any:
    """Table 2 as bars, with the paper's two overall recalls."""
    import seaborn as sns  # seaborn loads matplotlib: only when a figure is drawn

    kinds = list(CROSS_KINDS) + ["overall", "Image-Image"]
    plot = table2.reset_index().melt(id_vars="system", value_vars=kinds, var_name="question", value_name="recall")
    fig, ax = new_figure(figsize=(13, 4.5))
    sns.barplot(data=plot, x="system", y="recall", hue="question", ax=ax)
    full, flat = PAPER["overall_recall_brit_full"], PAPER["overall_recall_baseline"]
    ax.axhline(full, ls="--", color="k", lw=0.8)
    ax.text(0, full + 0.01, f"paper BRIT full {full:.2f}", fontsize=8)
    ax.axhline(flat, ls=":", color="k", lw=0.8)
    ax.text(0, flat + 0.01, f"paper baseline {flat:.2f}", fontsize=8)
    ax.tick_params(axis="x", rotation=50)
    ax.set_title("Table 2: recall ratio (test)")
    fig.tight_layout()
    return fig


def qa_systems(systems: Systems, main: tuple[str, ...], reader: Any,
               flat: dict[str, TextTopK] | None = None) -> dict[str, BritSystem]:
    """Table 1's systems (with the reader): baselines (the text ones too), BRIT full, each
    "w/o X", no linking, and the main linkers if they are not BRIT full."""
    qa = {"CLIP top-k": BritSystem.flat(systems, "clip", "CLIP top-k", reader),
          "text enc.+CLIP top-k": BritSystem.flat(systems, "dual", "text enc.+CLIP top-k", reader),
          **text_baseline_systems(systems, flat or {}, reader)}
    for name, linkers in [(f"BRIT ({label(FULL)})", FULL), ("w/o CA", ("LS", "SI")),
                          ("w/o LS", ("CA", "SI")), ("w/o SI", ("CA", "LS")), ("no linking", ())]:
        qa[name] = BritSystem.graph(systems, linkers, name, reader)
    if main != FULL:
        name = f"main ({label(main)})"
        qa[name] = BritSystem.graph(systems, main, name, reader)
    return qa


def table1_row(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Table 1 figures of one system; "avg" is over the two complex (cross-modal) kinds, as the
    paper's average is (:func:`mmrag.brit.paper.complex_mean`), not over Image-Image too."""
    out = accuracy_row(rows)
    vals = [out[k] for k in CROSS_KINDS if out.get(k) == out.get(k)]
    out["avg"] = round(float(np.mean(vals)), 4) if vals else float("nan")
    return out


CEILING = "reader ceiling (gold evidence)"
CHANCE = "chance (1 / options)"
BOUNDS = (CEILING, CHANCE, "questions")  # Table 1's rows that are no system


def chance_row(questions: list[Question]) -> dict[str, float]:
    """A guess's expected accuracy per kind (the mean of 1 / options over the kind's multiple-choice
    questions) and over the complex kinds ("avg", as Table 1's average)."""
    out: dict[str, float] = {}
    for kind in KINDS:
        xs = [1 / len(q.choices) for q in questions if q.kind == kind and q.choices]
        out[kind] = round(float(np.mean(xs)), 4) if xs else float("nan")
    vals = [out[k] for k in CROSS_KINDS if out[k] == out[k]]
    out["avg"] = round(float(np.mean(vals)), 4) if vals else float("nan")
    return out


def bounds_table(qa: Runs, table1: pd.DataFrame) -> pd.DataFrame:
    """Every Table 1 cell beside its bounds: per system and kind (and the complex average), the
    accuracy with n and its Wilson 95 % CI, chance, the reader's gold-evidence ceiling, the room
    between them (ceiling - chance) and the cell's share of that room ((acc - chance) / room)."""
    out = []
    for system, (rows, _) in qa.items():
        for kind in (*KINDS, "avg"):
            xs = [r["correct"] for r in rows if r.get("choices", True)
                  and (r["kind"] == kind if kind != "avg" else r["kind"] in CROSS_KINDS)]
            if not xs:
                continue
            acc = float(np.mean(xs))
            lo, hi = wilson(sum(xs), len(xs))
            ch, ce = table1.loc[CHANCE, kind], table1.loc[CEILING, kind]
            room = ce - ch if ce == ce and ch == ch else float("nan")
            out.append({"system": system, "kind": kind, "accuracy": round(acc, 4), "n": len(xs),
                        "95% CI": f"[{lo:.3f}, {hi:.3f}]", "chance": ch, "ceiling": ce,
                        "room": round(float(room), 4) if room == room else float("nan"),
                        "share of room": round(float((acc - ch) / room), 3) if room == room and room > 0
                        else float("nan")})
    return pd.DataFrame(out, columns=["system", "kind", "accuracy", "n", "95% CI", "chance", "ceiling", "room",
                                      "share of room"])


def beside_table(bounds: pd.DataFrame) -> pd.DataFrame:
    """Table 1 with each cell written "accuracy (chance / ceiling, n)": the bounds beside every cell."""
    if bounds.empty:
        return pd.DataFrame()
    cell = bounds.apply(lambda r: f"{r['accuracy']:.2f} ({r['chance']:.2f} / {r['ceiling']:.2f}, n={r['n']})",
                        axis=1)
    return bounds.assign(cell=cell).pivot(index="system", columns="kind", values="cell").reindex(
        columns=[k for k in (*KINDS, "avg") if k in set(bounds.kind)], index=list(dict.fromkeys(bounds.system)))


def before_after(qa: Runs, runs: Runs, questions: list[Question], before: str = BEFORE,
                 after: str = FULL_NAME) -> pd.DataFrame:
    """BRIT before (lemmatised triplets at the dev-calibrated threshold) against BRIT at the paper's
    settings (surface triplets, threshold 0.75), paired on the same questions: Table 1's accuracy
    (complex kinds, every kind), Table 2's recall (cross-modal test questions), the gold answer in
    the retrieved context, words and images per question; each with n, both rates' Wilson 95 % CIs
    and the paired difference's Newcombe CI and exact McNemar p (rates only)."""
    qmap = {q.id: q for q in questions}
    out = []

    def pair(measure: str, a_rows: list[dict], b_rows: list[dict], key: str, keep: Callable[[dict], bool]) -> None:
        bmap = {r["question_id"]: r for r in b_rows}
        ps = [(bool(r[key]), bool(bmap[r["question_id"]][key])) for r in a_rows
              if r["question_id"] in bmap and keep(r) and r.get(key) is not None]
        if not ps:
            return
        n = len(ps)
        both = sum(a and b for a, b in ps)
        only_a = sum(a and not b for a, b in ps)
        only_b = sum(b and not a for a, b in ps)
        ka, kb = both + only_a, both + only_b
        la, ua = wilson(ka, n)
        lb, ub = wilson(kb, n)
        d, lo, hi = newcombe_paired(both, only_b, only_a, n - both - only_a - only_b)
        out.append({"measure": measure, "n": n, "before": round(ka / n, 4), "before 95% CI": f"[{la:.3f}, {ua:.3f}]",
                    "after": round(kb / n, 4), "after 95% CI": f"[{lb:.3f}, {ub:.3f}]",
                    "after - before": round(d, 4), "diff 95% CI": f"[{lo:.3f}, {hi:.3f}]",
                    "McNemar p": round(mcnemar_exact(only_a, only_b), 4)})

    def mean(measure: str, a_rows: list[dict], b_rows: list[dict], key: str) -> None:
        if a_rows and b_rows:
            out.append({"measure": measure, "n": len(a_rows),
                        "before": round(float(np.mean([r[key] for r in a_rows])), 2),
                        "after": round(float(np.mean([r[key] for r in b_rows])), 2)})

    if before in qa and after in qa:
        a, b = qa[before][0], qa[after][0]
        pair("accuracy, complex kinds (Table 1)", a, b, "correct", lambda r: r["kind"] in CROSS_KINDS and r["choices"])
        pair("accuracy, every kind (Table 1)", a, b, "correct", lambda r: r["choices"])
        ctx = {name: {t.question_id: bm25.answer_in_context(golds(qmap[t.question_id]),
                                                             [e.content for st in t.steps for e in st.evidence])
                      for t in qa[name][1] if t.question_id in qmap and golds(qmap[t.question_id])}
               for name in (before, after)}
        ra = [{"question_id": q, "in_context": v} for q, v in ctx[before].items()]
        rb = [{"question_id": q, "in_context": v} for q, v in ctx[after].items()]
        pair("gold answer in the reader's context (Table 1)", ra, rb, "in_context", lambda r: True)
        mean("words per question (Table 1)", a, b, "words")
        mean("images per question (Table 1)", a, b, "images")
    if before in runs and label(FULL) in runs:
        a, b = runs[before][0], runs[label(FULL)][0]
        pair("recall, cross-modal (Table 2)", a, b, "recalled", lambda r: r["kind"] in CROSS_KINDS)
        mean("words per question (Table 2)", a, b, "words")
        mean("images per question (Table 2)", a, b, "images")
    return pd.DataFrame(out)


def claim_pair() -> tuple[str, str]:
    """Table 1's systems whose contrast is the paper's claim: BRIT full and the best flat baseline."""
    return f"BRIT ({label(FULL)})", "text enc.+CLIP top-k"


def claim_sample(test: list[Question], qa_test: list[Question], n: int | None, seed: int) -> list[Question]:
    """The complex test questions Table 1's claim pair reads: Table 1's own complex ones, then seeded
    others balanced by kind up to ``n`` (None or fewer: Table 1's only), so the sample holds Table 1's."""
    own = [q for q in qa_test if q.kind in CROSS_KINDS and q.choices]
    if not n or n <= len(own):
        return own
    taken = {q.id for q in own}
    rest = [q for q in test if q.kind in CROSS_KINDS and q.choices and q.id not in taken]
    return sorted(own + balanced_subset(rest, n - len(own), seed), key=lambda q: q.id)


def claim_runs(qa: Runs, qa_sys: dict[str, Any], sample: list[Question]) -> Runs:
    """The claim pair's rows and traces on the whole claim sample: Table 1's runs where they read the
    question, one more batched read per system for the rest."""
    have = {t.question_id for t in next(iter(qa.values()))[1]} if qa else set()
    extra = [q for q in sample if q.id not in have]
    wanted = {q.id for q in sample}
    out: Runs = {}
    for name in claim_pair():
        if name not in qa:
            continue
        rows, traces = qa[name]
        more_rows, more_traces = qa_sys[name].run(extra) if extra else ([], [])
        out[name] = ([r for r in rows if r["question_id"] in wanted] + more_rows,
                     [t for t in traces if t.question_id in wanted] + more_traces)
    return out


def claim_table(claim: Runs) -> pd.DataFrame:
    """The claim pair's accuracy on its whole sample, per complex kind and on their mean, with n and
    the Wilson 95 % CI of each rate (the claim itself, paired, is decided in claims.json)."""
    out = []
    for name, (rows, _) in claim.items():
        row: dict[str, Any] = {"system": name}
        for kind in (*CROSS_KINDS, "complex"):
            xs = [r["correct"] for r in rows if kind == "complex" or r["kind"] == kind]
            lo, hi = wilson(sum(xs), len(xs)) if xs else (None, None)
            row[kind] = round(float(np.mean(xs)), 4) if xs else float("nan")
            row[f"{kind} 95% CI"] = f"[{lo:.3f}, {hi:.3f}] n={len(xs)}" if xs else ""
        out.append(row)
    return pd.DataFrame(out).set_index("system") if out else pd.DataFrame()


def paper_table1() -> pd.DataFrame:
    """The paper's Table 1 (7B LMM reader, MM-RAG test set) to read beside ours: accuracy per kind
    and the average over the complex kinds, one row per method."""
    return pd.DataFrame([{"system": f"{m} (paper)", **row, "avg": brit_paper.complex_mean(m)}
                         for m, row in brit_paper.TABLE1.items()]).set_index("system")


def ceiling(reader: Any, questions: list[Question], sections: dict[str, str],
            max_images: int | None = None) -> list[dict[str, Any]]:
    """The reader handed the gold evidence (gold sections' text, gold images, at most
    ``max_images`` of them: the world lists every picture of an entity as alternatives): its
    ceiling. One batched read (:func:`mmrag.brit.reader.read_all`)."""
    items, kinds = [], []
    for q in questions:
        if not q.choices:
            continue
        texts = [sections[e] for e in q.gold_evidence if e in sections]
        images = [e for e in q.gold_evidence if e not in sections][:max_images]
        items.append((q.text, list(q.choices), texts, images, q.image_id))
        kinds.append((q.kind, q.answer))
    try:
        answers = read_all(reader, items)
    except KeyError:  # a gold image the reader cannot see (no embedding, no path)
        answers = []
        for it in items:
            try:
                answers.append(read_all(reader, [it])[0])
            except KeyError:
                answers.append(None)
    return [{"kind": k, "correct": a == ans} for (k, ans), a in zip(kinds, answers) if a is not None]


def accuracy_table(qa: Runs, reader: Any, test: list[Question], sections: dict[str, str],
                   max_images: int | None = None) -> pd.DataFrame:
    """Table 1: accuracy per kind and average, words and images the reader got, per system, plus
    the reader's ceiling (gold evidence, at most ``max_images`` gold pictures) and its questions."""
    table1 = pd.DataFrame([{"system": k, **table1_row(rows),
                            "words": round(float(np.mean([r["words"] for r in rows])), 1) if rows else np.nan,
                            "images": round(float(np.mean([r["images"] for r in rows])), 2) if rows else np.nan}
                           for k, (rows, _) in qa.items()]).set_index("system")
    ceil_rows = ceiling(reader, test, sections, max_images)
    table1.loc[CEILING] = pd.Series(table1_row(ceil_rows))
    table1.loc[CHANCE] = pd.Series(chance_row(test))
    counts = {k: sum(q.kind == k for q in test if q.choices) for k in KINDS}
    table1.loc["questions"] = pd.Series({**counts, "avg": sum(counts[k] for k in CROSS_KINDS)})
    return table1


def ceiling_check(table1: pd.DataFrame) -> pd.DataFrame:
    """Per system and kind: accuracy minus the reader's gold-evidence ceiling, and whether it is
    above the ceiling beyond sampling noise (difference > 1.96 x the standard error of two
    independent proportions over the kind's questions): an exception to explain, not a reader."""
    n = table1.loc["questions"]
    ceil = table1.loc[CEILING]
    rows = []
    for system in table1.index.drop(list(BOUNDS), errors="ignore"):
        for kind in KINDS:
            acc, c, m = table1.loc[system, kind], ceil[kind], n[kind]
            if not (acc == acc and c == c and m):
                continue
            se = float(np.sqrt((acc * (1 - acc) + c * (1 - c)) / m))
            rows.append({"system": system, "kind": kind, "accuracy": acc, "ceiling": c,
                         "excess": round(float(acc - c), 4),
                         "above ceiling": bool(acc - c > 1.96 * se + 1e-9)})
    return pd.DataFrame(rows, columns=["system", "kind", "accuracy", "ceiling", "excess", "above ceiling"])


def answers_table(qa: Runs) -> pd.DataFrame:
    """Every question's answers per system: choice accuracy, and free-text EM / F1 / in-context."""
    return pd.DataFrame([{"system": k, **answer_row(rows)} for k, (rows, _) in qa.items()]
                        ).set_index("system")


def accuracy_figure(table1: pd.DataFrame, table_answers: pd.DataFrame | None, split: QuestionSplit) -> Any:
    """Table 1 as bars (chance marked); else the answer scores; else a note."""
    import seaborn as sns  # seaborn loads matplotlib: only when a figure is drawn

    if split.multiple_choice:
        fig, ax = new_figure(figsize=(11, 4))
        t1 = table1.drop(index=["questions", CHANCE], errors="ignore").reset_index().melt(
            id_vars="system", value_vars=list(KINDS) + ["avg"],
                                       var_name="question", value_name="accuracy")
        sns.barplot(data=t1, x="system", y="accuracy", hue="question", ax=ax)
        ax.axhline(0.25, ls=":", color="grey")
        ax.text(0, 0.26, "chance (4 options)", fontsize=8)
        ax.tick_params(axis="x", rotation=30)
        ax.set_title("Table 1: QA accuracy (test)")
        fig.tight_layout()
        return fig
    if table_answers is not None and table_answers[["choice_accuracy", "em"]].notna().any().any():
        fig, ax = new_figure(figsize=(11, 4))
        t1 = table_answers[["choice_accuracy", "em", "f1", "answer_in_context"]].astype(float).reset_index().melt(
            id_vars="system", var_name="score", value_name="value")
        sns.barplot(data=t1, x="system", y="value", hue="score", ax=ax)
        ax.tick_params(axis="x", rotation=30)
        ax.set_title(f"answers ({len(split.test)} test questions, {len(split.open)} free-text)")
        fig.tight_layout()
        return fig
    return note_figure("Table 1 (accuracy)", "no test question has choices or a gold answer")


def nea_pairs(path: Path, max_questions: int | None) -> tuple[list[Question], list[Question]]:
    """(original, anonymised) questions of the NEA pairs (a seeded-free first subset of pairs
    when ``max_questions`` caps the run: at least 4 pairs)."""
    pairs = load_questions(path)
    if max_questions:
        keep = sorted({q.meta["pair_id"] for q in pairs})[: max(max_questions // 2, 4)]
        pairs = [q for q in pairs if q.meta["pair_id"] in keep]
    return [q for q in pairs if not q.meta.get("nea")], [q for q in pairs if q.meta.get("nea")]


def nea_recall(systems: Systems, nea_systems: Systems, orig: list[Question],
               anon: list[Question], runs: Runs) -> pd.DataFrame:
    """Table 3: recall of the baselines and BRIT full on the original questions (original graph)
    and on their anonymised twins (NEA graph); the NEA runs go to ``runs`` as "NEA <system>"."""
    nea_systems.prime(anon)
    systems.prime(orig)
    pairs = [(name, BritSystem.flat(systems, mode, name), BritSystem.flat(nea_systems, mode, name))
             for name, mode in [("CLIP top-k", "clip"), ("text enc.+CLIP top-k", "dual")]]
    name = f"BRIT ({label(FULL)})"
    pairs.append((name, BritSystem.graph(systems, FULL, name), BritSystem.graph(nea_systems, FULL, name)))
    rows3 = []
    for name, without, with_nea in pairs:
        ra, ta = without.run(orig)
        rb, tb = with_nea.run(anon)
        rows3.append({"system": name, "without NEA": round(float(np.mean([r["recalled"] for r in ra])), 4),
                      "with NEA": round(float(np.mean([r["recalled"] for r in rb])), 4)})
        runs[f"NEA {name}"] = (rb, tb)
        runs[f"NEA-orig {name}"] = (ra, ta)  # the pair's original half: the NEA claim pairs them by pair_id
    table3 = pd.DataFrame(rows3).set_index("system")
    table3["change"] = (table3["with NEA"] - table3["without NEA"]).round(4)
    return table3


def nea_figure(table3: pd.DataFrame, pairs: int) -> Any:
    """Table 3 as bars."""
    fig, ax = new_figure(figsize=(7, 3.5))
    table3[["without NEA", "with NEA"]].plot.bar(ax=ax, rot=0)
    ax.set_ylabel("recall")
    ax.set_title(f"Table 3: NEA ({pairs} pairs)")
    fig.tight_layout()
    return fig


def nea_table(systems: Systems, extractor: Any, params: Params, corpus_dir: Path,
              graph_dir: Path, runs: Runs) -> tuple[pd.DataFrame | None, Any]:
    """(Table 3, its figure) where the NEA questions and graph exist; (None, a note) otherwise."""
    graph_cfg, cfg = params.brit_graph, params.brit_linking
    nea_path = question_path(corpus_dir, cfg.nea_set)
    if not (nea_path.exists() and (graph_dir / f"{graph_cfg.corpus}_nea" / "entries.jsonl").exists()):
        print(f"no NEA questions or graph ({nea_path}); Table 3 skipped (null)")
        return None, note_figure("Table 3 (NEA)", f"no NEA question set '{cfg.nea_set}' or NEA graph "
                                                  f"for data/{graph_cfg.corpus}")
    orig, anon = nea_pairs(nea_path, cfg.max_questions)
    nea_graph = load_graph(graph_dir / f"{graph_cfg.corpus}_nea", systems.graph.enc, extractor,
                                      graph_cfg.si_top)
    nea_docs = [Document.from_dict(r) for r in io.read_jsonl(corpus_dir / graph_cfg.nea_documents)]
    nea_systems = systems_for(nea_graph, nea_docs, extractor, cfg)
    table3 = nea_recall(systems, nea_systems, orig, anon, runs)
    return table3, nea_figure(table3, len(anon))


def example_retrieval(systems: Systems, main: tuple[str, ...], test: list[Question],
                      index: int) -> tuple[Question, Retrieved]:
    """(question, what BRIT retrieved for it): the ``index``-th cross-modal test question."""
    cross = [q for q in test if q.kind in CROSS_KINDS] or test  # a folder's questions have no kind
    ex = cross[min(index, len(cross) - 1)]
    return ex, systems.brit(main).retrieve(ex.text, ex.image_path)


def example_figure(systems: Systems, main: tuple[str, ...], ex: Question, r: Retrieved,
                   corpus_dir: Path, seed: int) -> Any:
    """One question's retrieved subgraph: PCST's nodes (blue), nodes reached through image->text
    links (orange), retrieved images as thumbnails joined to their linked nodes."""
    from matplotlib.offsetbox import AnnotationBbox, OffsetImage  # matplotlib: only when a figure is drawn

    v = systems.brit(main).view
    drawn = nx.Graph()
    for e in r.edges:
        a, b = v.edges[e]
        drawn.add_edge(v.names[a], v.names[b], label=v.edge_triplets[e][0].relation)
    for n in r.nodes + r.linked_nodes:
        drawn.add_node(v.names[n])
    for img in r.images:
        drawn.add_node(f"img:{img}")
        for n in v.image_nodes.get(img, []):
            if v.names[n] in drawn:
                drawn.add_edge(f"img:{img}", v.names[n], label="")
    pos = nx.spring_layout(drawn, seed=seed, k=1.0)
    fig, ax = new_figure(figsize=(11, 7))
    nx.draw_networkx_edges(drawn, pos, ax=ax, edge_color="#999")
    nx.draw_networkx_edge_labels(drawn, pos, nx.get_edge_attributes(drawn, "label"), font_size=7, ax=ax)
    linked = {v.names[n] for n in r.linked_nodes} - {v.names[n] for n in r.nodes}
    for n in drawn:
        if not str(n).startswith("img:"):
            ax.text(*pos[n], n, ha="center", va="center", fontsize=8,
                    bbox=dict(fc="#fde0c5" if n in linked else "#dbe9f6", ec="#444", boxstyle="round"))
        else:
            thumb = PILImage.open(corpus_dir / systems.image_paths[n[4:]]).convert("RGB").resize((56, 56))
            ax.add_artist(AnnotationBbox(OffsetImage(thumb), pos[n], pad=0.1))
    if ex.image_path:
        qthumb = PILImage.open(corpus_dir / ex.image_path).convert("RGB").resize((64, 64))
        ax.add_artist(AnnotationBbox(OffsetImage(qthumb), (0.02, 0.95), xycoords="axes fraction", pad=0.2))
    recalled = (covers(r.evidence_ids(), ex.gold_evidence, set(systems.sections)) if ex.gold_evidence
                else "n/a (no gold evidence)")
    ax.set_title(f"{ex.kind or 'question'}: {ex.text}\ngold answer: {ex.answer}; recalled: {recalled}",
                 fontsize=9)
    ax.axis("off")
    fig.tight_layout()
    return fig


def trace_system(name: str) -> str:
    """A system's display name as its trace file's system part ("BRIT (CA+LS+SI)" -> "brit__ca_ls_si")."""
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").lower()


RETRIEVAL_SET = "{}_retrieval"  # Table 2's retrieval-only traces: every test question of the set
CLAIM_SET = "{}_claim"  # Table 1's claim pair on its whole sample (claim_questions complex questions)
NEA_ORIG_SET = "{}_orig"  # Table 3's runs on the original half of each NEA pair (original graph)


def retrieval_system(name: str) -> str:
    """A Table 2 run's trace system: flat baselines as in Table 1, a linking as "BRIT (<linking>)"
    ("CA+LS+SI" -> "brit__ca_ls_si", the name Table 1's BRIT full traces have)."""
    flat = name.endswith("top-k") or name.startswith("BRIT ")  # a diagnostic row is named in full
    return trace_system(name if flat else f"BRIT ({name})")


def write_all_traces(qa: Runs, runs: Runs, question_set: str, nea_set: str) -> dict[str, Path]:
    """Table 1's traces (the reader's answers; ``qa_questions`` of the test questions) on the
    question set, Table 2's retrieval-only traces of every test question and every linking on
    ``<question set>_retrieval`` (recall claims want them all), and Table 3's NEA runs on the NEA
    set (anonymised half) and ``<NEA set>_orig`` (original half); {name: path}."""
    written = {}
    for name, (_, traces) in qa.items():
        written[name] = io.write_traces(STAGE, trace_system(name), question_set, traces)
    for name, (_, traces) in runs.items():
        if name.startswith("NEA-orig "):
            written[name] = io.write_traces(STAGE, trace_system(name[9:]), NEA_ORIG_SET.format(nea_set), traces)
        elif name.startswith("NEA "):
            written[name] = io.write_traces(STAGE, trace_system(name[4:]), nea_set, traces)
        else:
            written[f"retrieval {name}"] = io.write_traces(STAGE, retrieval_system(name),
                                                           RETRIEVAL_SET.format(question_set), traces)
    return written


def nan_to_none(obj: Any) -> Any:
    """NaN floats (not applicable figures) as None, so metrics.json stays valid JSON."""
    if isinstance(obj, dict):
        return {k: nan_to_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [nan_to_none(v) for v in obj]
    if isinstance(obj, float) and obj != obj:
        return None
    return obj


def table_json(df: pd.DataFrame | None) -> dict[str, Any] | None:
    """A table as metrics JSON (rows by index; NaN as null); None stays None."""
    return json.loads(df.to_json(orient="index")) if df is not None else None


def latency(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Median and p95 per-question retrieval (and reading) time, for timings.json."""
    lat = [row["seconds"] for row in rows]
    return {"median_retrieval_ms": round(1000 * float(np.median(lat)), 2),
            "p95_retrieval_ms": round(1000 * float(np.percentile(lat, 95)), 2)}


def run(params: Params) -> BritLinkingResult:
    """Calibrate, run BRIT and the baselines for the paper's three tables, write traces and metrics."""
    import seaborn as sns  # seaborn loads matplotlib: only when the stage draws its figures

    graph_cfg, cfg = params.brit_graph, params.brit_linking
    data_dir, out_dir = io.stage_dirs(STAGE)
    graph_dir = io.DATA / "brit_graph"
    corpus_dir = io.DATA / graph_cfg.corpus
    sns.set_theme(style="whitegrid")
    main = tuple(cfg.linking)
    print("main experiment linkers:", label(main))

    systems, extractor = open_systems(graph_cfg, params.models, cfg, params.base.allow_network, io.DATA)
    split = split_question_set(question_path(corpus_dir, cfg.question_set), systems,
                               cfg.dev_share, params.base.seed, cfg.max_questions)
    if not systems.image_paths:
        print(f"data/{graph_cfg.corpus} is text only: the linkers add no image, so every BRIT row retrieves "
              "the same triplets; image questions and CLIP's image side are not applicable")
    systems.prime(split.dev + split.test)  # one batched encoder call for every query, option and sentence
    tables: dict[str, Any] = {"question_kinds": question_kinds(split.test)}
    figures: dict[str, Any] = {}

    sweep, best_th, figures["calibration"] = calibration(systems, main, split.dev, cfg)
    tables["calibration"] = sweep
    tables["knob_sweep"], figures["knob_sweep"] = knob_sweep(systems, main, split.dev, cfg)
    inert = inert_knobs(tables["knob_sweep"])
    if inert:
        print(f"on this corpus's dev split, recall and retrieved words do not move with: {', '.join(inert)}")

    flat = text_baselines(systems)
    runs = recall_runs(systems, main, split.test, flat, diagnostic_systems(systems, cfg.diagnostics, best_th))
    sens_runs, settings = sensitivity_runs(systems, main, split.test, cfg)
    tables["sensitivity"] = pd.DataFrame([{**{k: v for k, v in st.items() if not k.endswith("system")},
                                           **recall_row(rows)}
                                          for st, (rows, _) in zip(settings, sens_runs.values())])
    tables["table2_recall"] = table2 = recall_table(runs)
    print(f"paper: the best flat baseline reached {PAPER['overall_recall_baseline']:.2f} overall recall "
          f"(the claim quoted above)")
    sections = set(systems.sections)
    tables["text_recall"] = text_recall = text_recall_table(runs, main, split.test, sections)
    tables["per_hop_recall"] = per_hop = hop_recall_table(runs, main, split.test, sections)
    text_note = (f"; text recall over the {int(text_recall['questions'].iloc[0])} test questions with gold "
                 "sections is in text_recall" if not text_recall.empty else "")
    if split.gold:
        figures["table2_recall"] = recall_figure(table2)
    else:
        print("recall not applicable: no test question with cross-modal gold evidence (Table 2 is null)" + text_note)
        figures["table2_recall"] = note_figure("Table 2 (recall)", "no test question with cross-modal gold evidence")
    if text_recall.empty:
        print("text recall not applicable: no test question with a gold section (null)")

    reader = make_reader(cfg, systems, corpus_dir, params.base.allow_network, params.inference,
                                    params.base.device)
    print(f"reader: {cfg.reader}" + (f" ({cfg.reader_llm} on {cfg.engine})" if cfg.reader == "llm" else ""))
    qa_test = balanced_subset(split.test, cfg.qa_questions, params.base.seed)
    if len(qa_test) < len(split.test):
        print(f"Table 1 reads {len(qa_test)} of the {len(split.test)} test questions (brit_linking.qa_questions, "
              "seeded, balanced by kind); Tables 2 and 3 use every test question")
    qa_sys = {**qa_systems(systems, main, reader, flat),
              **diagnostic_systems(systems, cfg.diagnostics, best_th, reader)}
    qa = {name: system.run(qa_test) for name, system in qa_sys.items()}
    claim_qs = claim_sample(split.test, qa_test, cfg.claim_questions, params.base.seed)
    claim = claim_runs(qa, qa_sys, claim_qs)
    print(f"Table 1's claim pair ({' vs '.join(claim)}) read {len(claim_qs)} complex test questions "
          f"(brit_linking.claim_questions; {len(claim_qs) - sum(q.kind in CROSS_KINDS for q in qa_test)} "
          f"beyond Table 1's)")
    tables["table1_claim"] = claim_table(claim)
    tables["answer_in_context"] = in_context = context_table(qa, qa_test)
    print("answer in the retrieved context (share of test questions with a gold answer):",
          in_context["answer_in_context"].to_dict())
    tables["table1_paper"] = paper_table1()
    tables["table1_accuracy"] = table1 = accuracy_table(qa, reader, qa_test, systems.sections,
                                                        cfg.baseline_images)
    tables["ceiling_check"] = check = ceiling_check(table1)
    tables["table1_bounds"] = bounds = bounds_table(qa, table1)
    tables["table1_beside"] = beside_table(bounds)
    tables["before_after"] = ba = before_after(qa, runs, qa_test + split.test)
    if not ba.empty:
        print(f"before ({BEFORE}: lemmatised triplets, dev-calibrated threshold {best_th}) -> after "
              f"({FULL_NAME}: surface triplets, threshold {cfg.threshold}), same questions:")
        print(ba.to_string(index=False))
    reader_info = {"reader": cfg.reader, "llm": cfg.reader_llm if cfg.reader == "llm" else None,
                   "prompts": getattr(reader, "prompts", None), "unparsed": getattr(reader, "unparsed", None)}
    usage = getattr(getattr(reader, "llm", None), "usage", None)
    reader_seconds = None  # wall time: timings.json, never metrics.json (which a rerun must reproduce byte for byte)
    if usage is not None:
        reader_info.update({"prompt_tokens": usage.prompt_tokens, "cached_tokens": usage.cached_tokens,
                            "completion_tokens": usage.completion_tokens})
        reader_seconds = round(usage.prompt_seconds + usage.decode_seconds, 1)
    check_sim = None
    if cfg.reader != "similarity" and split.multiple_choice:  # the cheap scorer, as a named baseline reader
        sim = similarity_reader(cfg, systems, corpus_dir)
        qa_sim = {name: system.run(qa_test) for name, system in qa_systems(systems, main, sim, flat).items()}
        tables["table1_similarity"] = accuracy_table(qa_sim, sim, qa_test, systems.sections, cfg.baseline_images)
        tables["ceiling_check_similarity"] = check_sim = ceiling_check(tables["table1_similarity"])
    if not split.multiple_choice:
        print("Table 1 not applicable: no test question with choices of a Table 1 kind (null)")
    table_answers = None
    if split.other:  # every question: choice accuracy, and free-text EM / token F1 / answer in the context
        tables["answers"] = table_answers = answers_table(qa)
        if split.open and table_answers["em"].isna().all():
            print("no gold answers: exact match / F1 / answer-in-context not applicable (null)")
    figures["table1_accuracy"] = accuracy_figure(table1, table_answers, split)

    table3, figures["table3_nea"] = nea_table(systems, extractor, params, corpus_dir, graph_dir, runs)
    if table3 is not None:
        tables["table3_nea"] = table3

    ex, example = example_retrieval(systems, main, split.test, cfg.example_question)
    figures["example_subgraph"] = example_figure(systems, main, ex, example, corpus_dir, params.base.seed)
    for name, fig in figures.items():
        save_figure(fig, out_dir / f"{name}.png", dpi=110)

    artifacts = write_all_traces(qa, runs, cfg.question_set, cfg.nea_set)
    for name, (_, traces) in claim.items():
        artifacts[f"claim {name}"] = io.write_traces(STAGE, trace_system(name), CLAIM_SET.format(cfg.question_set),
                                                     traces)
    for setting, (_, traces) in zip(settings, sens_runs.values()):
        artifacts[f"retrieval {setting['system']}"] = io.write_traces(
            STAGE, setting["system"], RETRIEVAL_SET.format(cfg.question_set), traces)
    artifacts["sensitivity"] = io.write_json(data_dir / SENSITIVITY, settings)
    main_rows = runs[label(main)][0]  # recall: every test question
    main_qa = qa[f"BRIT ({label(FULL)})" if main == FULL else f"main ({label(main)})"][0]
    if hasattr(getattr(reader, "llm", None), "close"):
        reader.llm.close()
    metrics = {
        "main": nan_to_none({"linking": list(main), "threshold": cfg.threshold,
                                        **recall_row(main_rows),
                                        **{f"acc_{k}": v for k, v in table1_row(main_qa).items()}}),
        "answers": table_json(table_answers),  # questions outside Table 1 (None: every one is in it)
        "calibration": {"dev_questions": len(split.dev), "best_threshold": best_th,
                        "sweep": nan_to_none(sweep.to_dict("records"))},
        "table1_accuracy": table_json(table1),
        "table2_recall": table_json(table2.drop(columns=["paper overall", "paper words", "paper images"])),
        "table2_words": table_json(table2[["words", "paper words", "images", "paper images"]]),
        "table1_bounds": nan_to_none(bounds.to_dict("records")),
        "before_after": nan_to_none(ba.to_dict("records")),
        "diagnostics": {"rows": {k: DIAGNOSTICS[k][0] for k in cfg.diagnostics},
                        "calibrated_threshold": best_th, "threshold": cfg.threshold},
        "reader": reader_info,
        "above_ceiling": check[check["above ceiling"]].to_dict("records"),
        "table1_similarity": table_json(tables.get("table1_similarity")),
        "above_ceiling_similarity": (check_sim[check_sim["above ceiling"]].to_dict("records")
                                     if check_sim is not None else None),
        "knob_sweep": nan_to_none(tables["knob_sweep"].to_dict("records")), "inert_knobs": inert,
        "sensitivity": nan_to_none(tables["sensitivity"].to_dict("records")),
        "table3_nea": table_json(table3), "test_questions": len(split.test), "qa_questions": len(qa_test),
        "table1_claim": table_json(tables["table1_claim"]), "claim_questions": len(claim_qs),
        "answer_in_context": table_json(in_context),
        "text_recall": table_json(text_recall) if not text_recall.empty else None,
        "per_hop_recall": nan_to_none(per_hop.to_dict("records")) if not per_hop.empty else None,
        "paper": PAPER,
    }
    artifacts["metrics"] = io.write_json(out_dir / "metrics.json", metrics)
    artifacts["timings"] = io.write_json(out_dir / "timings.json",
                                         {**latency(runs[label(main)][0]), "reader_seconds": reader_seconds})
    return BritLinkingResult(metrics=metrics, tables=tables, figures=figures, artifacts=artifacts,
                             split=split, runs=runs, qa=qa, example=example)


# --------------------------------------------------------------------------- what we see
def known(x: Any) -> bool:
    """Whether a figure was measured: a number, not None (null in metrics.json) nor NaN."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and x == x


def num(x: Any, spec: str = ".3f") -> str:
    """A figure as text; one not applicable to the question set (None, NaN) as "n/a", so a text corpus's
    null recall prints instead of failing."""
    return format(x, spec) if known(x) else "n/a"


def level_lines(metrics: dict[str, Any]) -> list[str]:
    """Table 2's level (BRIT full against the best flat baseline), the words and images each is handed,
    and the Image-Image recall; one not-applicable line where no test question has cross-modal gold."""
    t2, paper, full = metrics.get("table2_recall") or {}, metrics["paper"], "CA+LS+SI"
    if full not in t2:
        return []
    brit = t2[full]
    if not known(brit.get("overall")):
        return ["- **Level.** Table 2's cross-modal recall is not applicable: no test question has cross-modal "
                "gold evidence" + (" (the text recall below scores the gold sections)."
                                   if metrics.get("text_recall") else ".")]
    flat = {k: v for k, v in t2.items() if k.endswith("top-k")}
    ranked = {k: v for k, v in flat.items() if known(v.get("overall"))}
    best = max(ranked, key=lambda k: ranked[k]["overall"]) if ranked else None
    lines = [f"- **Level.** BRIT ({full}) recalls {num(brit['overall'])} of the cross-modal test "
             f"questions' evidence (paper {paper['overall_recall_brit_full']:.2f})"
             + (f"; the best flat baseline, {best}, {num(ranked[best]['overall'])} (paper "
                f"{paper['overall_recall_baseline']:.2f})" if best else "") + f" (test split: "
             f"{metrics.get('test_questions')} questions of all kinds)."]
    if flat:
        budget = ", ".join(f"{k} {num(v.get('words'), '.0f')} words / {num(v.get('images'), '.2f')} images"
                           for k, v in flat.items())
        lines.append(f"- **What each is handed** per question (paper's CLIP baseline: "
                     f"{num(paper_table2('CLIP top-k', 'Words'), '.0f')} words, "
                     f"{num(paper_table2('CLIP top-k', 'Images'), '.2f')} images; BRIT [CA+LS+SI] "
                     f"{num(paper_table2(full, 'Words'), '.0f')} words): BRIT {num(brit.get('words'), '.0f')} words / "
                     f"{num(brit.get('images'), '.2f')} images; {budget}.")
    if known(brit.get("Image-Image")) and best:
        lines.append(f"- **Simple Image-Image questions** (outside 'overall'): BRIT {num(brit['Image-Image'])}, "
                     f"{best} {num(ranked[best].get('Image-Image'))}.")
    return lines


def text_recall_lines(metrics: dict[str, Any]) -> list[str]:
    """The text recall (every test question with gold sections) and the per-hop recall, where measured."""
    text, hops = metrics.get("text_recall") or {}, metrics.get("per_hop_recall") or []
    lines = []
    if text:
        n = next(iter(text.values()))["questions"]
        lines.append(f"- **Text recall** ({n} test questions with gold sections, any kind): one gold section "
                     "retrieved " + ", ".join(f"{k} {num(v['recall'])} {v['recall 95% CI']}" for k, v in text.items())
                     + "; every gold section " + ", ".join(f"{k} {num(v['all gold'])}" for k, v in text.items())
                     + "; gold answer in the context " + ", ".join(f"{k} {num(v['answer in context'])}"
                                                                   for k, v in text.items())
                     + "; words per question " + ", ".join(f"{k} {num(v['words'], '.0f')}" for k, v in text.items())
                     + ".")
    if hops:
        by_hop: dict[Any, list[str]] = {}
        for r in hops:
            by_hop.setdefault(r["hop"], []).append(f"{r['system']} {num(r['recall'])} (n={r['questions']})")
        lines.append("- **Per hop** (decomposition steps with their own gold sections): "
                     + "; ".join(f"hop {hop}: {', '.join(xs)}" for hop, xs in by_hop.items()) + ".")
    return lines


def above_ceiling(row: dict[str, Any] | str) -> str:
    """One system whose accuracy on a kind beats the reader's gold-evidence ceiling, as a phrase."""
    if not isinstance(row, dict):
        return str(row)
    acc, ceiling = num(row.get("accuracy"), ".2f"), num(row.get("ceiling"), ".2f")
    return f"{row['system']} on {row['kind']} ({acc} against {ceiling})"


def what_we_see(metrics: dict[str, Any], threshold: float) -> str:
    """The descriptive half of "what we see" (Markdown), written from this run's metrics; the
    claims' verdicts come from ``evaluate.claims.narrative``. A figure the question set cannot
    support (null in metrics.json) reads "n/a" or drops its line."""
    t1, paper = metrics.get("table1_accuracy") or {}, metrics["paper"]
    lines = level_lines(metrics) + text_recall_lines(metrics)
    nea = metrics.get("table3_nea") or {}
    if nea:
        lines.append("- **NEA** (recall without -> with): " + "; ".join(
            f"{k} {num(v.get('without NEA'), '.2f')} -> {num(v.get('with NEA'), '.2f')}" for k, v in nea.items()) + ".")
    ceiling = t1.get("reader ceiling (gold evidence)")
    if ceiling and known(ceiling.get("avg")):
        reader = metrics.get("reader") or {}
        above = metrics.get("above_ceiling") or []
        lines.append(f"- **Reading** ({reader.get('llm') or reader.get('reader', 'reader')}, "
                     f"{num((t1.get('questions') or {}).get('avg'), '.0f')} complex questions of "
                     f"{metrics.get('qa_questions')}): its gold-evidence ceiling averages {num(ceiling['avg'])} over "
                     "the complex kinds; " + ("no system is above it." if not above else
                                              f"above it: {', '.join(map(above_ceiling, above))}."))
    ba = {r["measure"]: r for r in metrics.get("before_after") or []}
    acc = ba.get("accuracy, complex kinds (Table 1)")
    if acc:
        ctx = ba.get("gold answer in the reader's context (Table 1)")
        lines.append(f"- **Before / after** ({BEFORE}: lemmatised triplets, dev-calibrated threshold -> "
                     f"{FULL_NAME}: surface triplets, threshold {threshold}; same {acc['n']} complex questions): "
                     f"accuracy {num(acc['before'])} -> {num(acc['after'])} (difference "
                     f"{num(acc['after - before'], '+.3f')}, 95 % CI {acc['diff 95% CI']})"
                     + (f"; gold answer in the context {num(ctx['before'])} -> {num(ctx['after'])} (n={ctx['n']})"
                        if ctx else "") + ".")
    cal = metrics.get("calibration") or {}
    if cal.get("best_threshold") is not None:
        lines.append(f"- **Knobs.** The dev-optimal threshold is {cal['best_threshold']} (a diagnostic row; the claim "
                     f"runs use {threshold}, the paper's {paper['threshold']}); inert on this corpus: "
                     f"{', '.join(metrics.get('inert_knobs') or []) or 'none'}.")
    return "\n".join(lines)
