"""Stage ``toolagent_eval``: DnC vs ToolsAnswer vs mm-ReAct, the DnC paper's Tables 3 and 4 on our world.

One set of tools (:mod:`mmrag.toolagent.tools`), every LLM of ``toolagent_eval.llms`` under
each strategy (:mod:`mmrag.toolagent.system`), base and fine-tuned (the adapter of
``toolagent_finetune``), on a kind-balanced sample of the multi-hop set and whole
conversations of the conversational set. Scores with the one EM/F1 rule of
:mod:`mmrag.evaluate.metrics`, checks the paper's claims on the means, and writes every trace
to data/toolagent_eval/traces/<system>__<set>.jsonl for the two-axis evaluator.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mmrag.baselines import bm25
from mmrag.evaluate.metrics import exact_match, golds, token_f1
from mmrag.evaluate.params import Report
from mmrag.io import DATA, TRACE_SEP, read_jsonl, save_figure, stage_dirs, write_json, write_traces
from mmrag.models.params import Inference, Models
from mmrag.params import Base, Sections
from mmrag.sampling import round_robin
from mmrag.schema import Question, Trace, load_documents, load_question_set, load_questions, question_path
from mmrag.stages import StageResult, new_figure
from mmrag.toolagent.params import ToolagentEval
from mmrag.toolagent.strategies import render_dialogue
from mmrag.toolagent.system import STRATEGIES, ToolsAnswer
from mmrag.train.checkpoints import checkpoint_dir, fingerprint, package_files, save_run, saved_run

STAGE = "toolagent_eval"
STRATEGY_ORDER = {"tools_answer": 0, "react": 1, "dnc": 2}  # the paper's row order


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    inference: Inference
    models: Models
    toolagent_eval: ToolagentEval
    report: Report


@dataclass
class ToolagentEvalResult(StageResult):
    """Traces and scores of every run, and the example dialogues shown in the notebook."""

    traces: dict[tuple[str, str], list[Trace]] = field(default_factory=dict)  # (system, set) ->
    questions: dict[str, list[Question]] = field(default_factory=dict)  # set -> test questions
    n_params: dict[str, int] = field(default_factory=dict)  # llm -> parameter count
    tools: list[str] = field(default_factory=list)  # the tools' names
    pages: int = 0  # pages the tools index
    scores: Any = None  # DataFrame: one row per (run, question)
    dialogues: str = ""
    adapters: str = ""  # which adapters the fine-tuned rows used, and what they were trained on


# --------------------------------------------------------------------------- tools and questions
def load_tools(cfg: ToolagentEval, clip_name: str, base: Base, corpus_dir: Path
               ) -> tuple[dict[str, Any], int]:
    """(tools, pages): the four tools over the corpus, with the text encoder and CLIP of params."""
    from mmrag.models.clip import load_clip
    from mmrag.models.registry import load_text_encoder
    from mmrag.toolagent.tools import build_tools, world_maps
    from mmrag.world import render

    documents = load_documents(corpus_dir)
    entities_path = corpus_dir / "entities.jsonl"
    types, names, groups = world_maps(read_jsonl(entities_path)) if entities_path.exists() else \
        ({d.title: "entity" for d in documents}, {}, {})
    encoder = load_text_encoder(cfg.text_encoder, allow_network=base.allow_network, device="cpu")
    clip = load_clip(clip_name, allow_network=base.allow_network)
    tools = build_tools(documents, encoder, types, clip=clip, load_image=lambda p: str(corpus_dir / p),
                        attributes=render.ATTRIBUTES, prompts=render.prompts, entity_names=names,
                        groups=groups)
    return tools, len(documents)


def load_sets(cfg: ToolagentEval, corpus_dir: Path) -> dict[str, list[Question]]:
    """The multi-hop set, and the conversational one when asked for and present."""
    sets = {cfg.question_set: load_question_set(corpus_dir, cfg.question_set, "toolagent_eval.question_set")}
    conv_path = question_path(corpus_dir, cfg.conv_set)
    if cfg.conv_set and cfg.n_mmcoqa and conv_path.exists():
        sets[cfg.conv_set] = load_questions(conv_path)
    return sets


def tool_ceilings(sets: dict[str, list[Question]], tools: dict[str, Any], split: str, n: int,
                  seed: int) -> Any:
    """Each tool's EM/F1 on up to ``n`` seeded gold sub-questions of the split: a bound on any strategy."""
    import pandas as pd

    subs = [(q, s) for qs in sets.values() for q in qs if q.split == split for s in q.decomposition]
    random.Random(seed).shuffle(subs)
    rows = []
    for q, s in subs[:n]:
        a = tools[s.tool](s.text) if s.tool in tools else None
        pred = a.answer if a else ""
        rows.append({"tool": s.tool, "kind": q.kind, "em": exact_match(pred, [s.answer]),
                     "f1": token_f1(pred, [s.answer])})
    return pd.DataFrame(rows, columns=["tool", "kind", "em", "f1"])


def ceiling_table(ceilings: Any) -> Any:
    """Sub-questions, EM and F1 per tool."""
    return ceilings.groupby("tool").agg(n=("em", "size"), EM=("em", "mean"), F1=("f1", "mean")).round(3)


def test_questions(sets: dict[str, list[Question]], cfg: ToolagentEval,
                   seed: int) -> dict[str, list[Question]]:
    """A kind-balanced seeded sample of the multi-hop set; the first turns of the conversational one."""
    multi = cfg.question_set
    test = {multi: round_robin([q for q in sets[multi] if q.split == cfg.split], cfg.n_mmqa, seed,
                               by=lambda q: q.kind)}
    if not test[multi]:
        raise ValueError(f"toolagent_eval: {multi}.jsonl has no question in split '{cfg.split}' "
                         f"(splits: {sorted({q.split for q in sets[multi]})}); set toolagent_eval.split")
    if cfg.conv_set in sets:
        conv = [q for q in sets[cfg.conv_set] if q.split == cfg.split][:cfg.n_mmcoqa]
        if conv:
            test[cfg.conv_set] = conv
        else:  # runs over no question would only add empty rows to Table 4
            print(f"toolagent_eval: {cfg.conv_set}.jsonl has no question in split '{cfg.split}': Table 4 skipped")
    return test


# --------------------------------------------------------------------------- baselines without an LLM
BASELINE_KS = (1, 5)  # answer in the top-1 / top-5 retrieved sections


def majority_answer(questions: Sequence[Question], split: str) -> str:
    """The most frequent gold answer outside ``split`` (ties: alphabetical); "" when there is none."""
    from collections import Counter

    counts = Counter(q.answer for q in questions if q.split != split and q.answer)
    return min(counts, key=lambda a: (-counts[a], a)) if counts else ""


def leave_one_out_answers(questions: Sequence[Question], targets: Sequence[Question]) -> list[str]:
    """For each target, the most frequent gold answer among the set's other questions (ties:
    alphabetical; "" when no other question has an answer).

    A target that belongs to ``questions`` (same id) leaves its own answer out, so the prior never
    reads the gold it is scored against. Counted once for the set, so a set of thousands costs one
    pass, not one per question.
    """
    from collections import Counter

    counts = Counter(q.answer for q in questions if q.answer)
    ranked = sorted(counts, key=lambda a: (-counts[a], a))[:2]
    members = {q.id for q in questions}
    out = []
    for t in targets:
        if not ranked or t.id not in members or t.answer != ranked[0]:
            out.append(ranked[0] if ranked else "")
            continue
        # the target's own answer is the top one: one fewer of it may tie with or fall below the next
        left = {ranked[0]: counts[ranked[0]] - 1, **({ranked[1]: counts[ranked[1]]} if len(ranked) > 1 else {})}
        left = {a: n for a, n in left.items() if n > 0}
        out.append(min(left, key=lambda a: (-left[a], a)) if left else "")
    return out


@dataclass(frozen=True)
class Prior:
    """The most-frequent-answer baseline of one set: how it was taken, or why it does not apply."""

    how: str  # "outside split" | "leave-one-out" | "not applicable"
    description: str  # one line for the log and the baselines table
    answer: str = ""  # the single answer of "outside split"


def most_frequent_prior(questions: Sequence[Question], split: str) -> Prior:
    """Which most-frequent-answer baseline a set supports.

    With questions outside ``split`` (the generated world's train split) it is their most frequent
    answer, one answer for every test question. When no question outside ``split`` has an answer
    (a user's HotpotQA or MuSiQue file loads every question into it) that answer would be "", which
    scores 0 and says nothing; the fair prior without a train split is leave-one-out: for each
    question, the most frequent answer of the *other* questions (:func:`leave_one_out_answers`),
    which never reads the gold it is scored against. It is not applicable when no gold
    answer occurs twice in the set: every other answer then counts one, and the pick would be the
    alphabetically first answer, a guess that cannot be right, not a prior.
    """
    from collections import Counter

    outside = majority_answer(questions, split)
    if outside:
        return Prior("outside split", f"most frequent answer outside '{split}': {outside!r}", outside)
    counts = Counter(q.answer for q in questions if q.answer)
    if not counts or max(counts.values()) < 2:
        return Prior("not applicable", f"not applicable: no question outside '{split}' has an answer and none "
                                       f"of the set's {sum(counts.values())} answers repeats, so none is more "
                                       f"frequent than another")
    top = min(counts, key=lambda a: (-counts[a], a))
    return Prior("leave-one-out", f"leave-one-out: no question outside '{split}' has an answer, so each is "
                                  f"given the most frequent answer of the set's other questions (overall "
                                  f"{top!r}, {counts[top]} of {sum(counts.values())})")


def prior_row(prior: Prior, questions: Sequence[Question], whole: Sequence[Question],
              scope: str) -> dict[str, Any]:
    """The most-frequent-answer row on ``questions``: scored, or a null row that says why not."""
    if prior.how == "outside split":
        return answer_rows("most frequent answer", scope, questions, [prior.answer] * len(questions), None)
    if prior.how == "leave-one-out":
        row = answer_rows("most frequent answer (leave-one-out)", scope, questions,
                          leave_one_out_answers(whole, questions), None)
        return {**row, "note": prior.description}
    return {"system": "most frequent answer", "questions": scope, "n": len(questions), "k": None,
            "EM": None, "F1": None, "answer_in_context": None, "note": prior.description}


def answer_rows(name: str, scope: str, questions: Sequence[Question], answers: Sequence[str],
                contexts: Sequence[Sequence[str]] | None) -> dict[str, Any]:
    """One baseline row: EM, F1 and (when it retrieved) answer in its context, over ``questions``."""
    import numpy as np

    gold = [golds(q) for q in questions]
    hit = ([bm25.answer_in_context(g, c) for g, c in zip(gold, contexts)] if contexts is not None else [])
    return {"system": name, "questions": scope, "n": len(questions), "k": None,
            "EM": round(float(np.mean([exact_match(a, g) for a, g in zip(answers, gold)])), 4) if gold else None,
            "F1": round(float(np.mean([token_f1(a, g) for a, g in zip(answers, gold)])), 4) if gold else None,
            "answer_in_context": round(float(np.mean(hit)), 4) if hit else None}


def baseline_table(tools: dict[str, Any], questions: Sequence[Question], sample: Sequence[Question],
                   split: str, corpus_dir: Path) -> Any:
    """Baselines no LLM is part of, on the sampled test questions and on the whole split: the
    TextQA tool alone on the whole question, the most frequent answer (:func:`most_frequent_prior`;
    a ``note`` column says how it was taken when the set has no train split), and BM25 / dense
    top-k sections with the share of questions whose answer is in them."""
    import pandas as pd

    from mmrag.toolagent.tools.common import encode

    whole = [q for q in questions if q.split == split]
    docs = load_documents(corpus_dir)
    texts = [f"{d.title}: {s.text}" for d in docs for s in d.sections if s.text.strip()]
    rankers: dict[str, Any] = {"BM25 top-k": bm25.BM25(texts)}
    rows = []
    prior = most_frequent_prior(questions, split)
    for scope, qs in (("sample", list(sample)), (f"all {split}", whole)):
        if "TextQA" in tools:
            replies = [tools["TextQA"](q.text) for q in qs]
            rows.append(answer_rows("TextQA tool alone", scope, qs, [r.answer for r in replies],
                                    [[e.content for e in r.evidence] for r in replies]))
        rows.append(prior_row(prior, qs, questions, scope))
        if "TextQA" in tools and "dense top-k" not in rankers:
            encoder = tools["TextQA"].index.encoder
            rankers["dense top-k"] = bm25.Dense(texts, lambda t: encode(encoder, list(t)))
        for r in bm25.context_rows(rankers, texts, qs, BASELINE_KS):
            rows.append({**r, "questions": scope, "EM": None, "F1": None})
    cols = ["system", "questions", "n", "k", "EM", "F1", "answer_in_context"]
    cols += ["note"] if any(r.get("note") for r in rows) else []  # only a set without a train split has one
    return pd.DataFrame(rows)[cols].astype({"k": "Int64"})


def strategy_adapter(data: Path, llm: str, strategy: str, variant: str = "ft") -> Path:
    """The LoRA adapter of one LLM, strategy and seed (toolagent_finetune trains one per strategy
    and seed: variant 'ft' is the first seed's, 'ft@seed<k>' seed k's)."""
    run = strategy + variant[2:] if variant.startswith("ft@") else strategy
    return data / "toolagent_finetune" / llm / run / "adapter"


def extra_seeds(data: Path, llm: str) -> list[str]:
    """The further seeds' variants ('ft@seed<k>') whose adapters exist for every strategy."""
    root = data / "toolagent_finetune" / llm
    found = sorted({p.parent.name.split("@", 1)[1] for p in root.glob("*@seed*/adapter")}) if root.exists() else []
    return [f"ft@{k}" for k in found
            if all(strategy_adapter(data, llm, s, f"ft@{k}").exists() for s in ("react", "dnc"))]


def adapters_statement(llms: Sequence[str], data: Path) -> Any:
    """Which LoRA adapter each fine-tuned row used, and what it was trained on (not this set)."""
    import pandas as pd

    return pd.DataFrame([{"llm": n, "strategy": s, "adapter": f"data/toolagent_finetune/{n}/{s}/adapter",
                          "used": strategy_adapter(data, n, s).exists(),
                          "trained on": "toolagent_data's teacher dialogues of this strategy only, for the "
                                        "train questions of toolagent_data.question_sets in "
                                        "data/<toolagent_data.corpus> (default: the generated world's mmqa "
                                        "and mmcoqa), not this set unless that names it"}
                         for n in llms for s in ("react", "dnc")])


# --------------------------------------------------------------------------- running the strategies
def plan_for(adapter_exists: bool, base_strategies: Sequence[str],
             seeds: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(strategy, variant) rows of one LLM in the paper's order: ToolsAnswer on the base model, the
    ``base_strategies`` agents on the base model, both agents fine-tuned (when the adapters exist),
    then both agents of each further adapter seed (``seeds``: 'ft@seed<k>' variants)."""
    plan = [("tools_answer", "base")]
    plan += [(s, "base") for s in ("react", "dnc") if s in base_strategies]
    if adapter_exists:
        plan += [("react", "ft"), ("dnc", "ft")]
        plan += [(s, v) for v in seeds for s in ("react", "dnc")]
    return plan


@dataclass(frozen=True)
class Row:
    """One run: an LLM under one strategy, base or fine-tuned, on one question set."""

    llm: str
    strategy: str
    variant: str  # base | ft
    question_set: str

    @property
    def system(self) -> str:
        return f"{self.strategy}__{self.llm}__{self.variant}"


def row_plan(cfg: ToolagentEval, sets: Sequence[str], has_adapters: Callable[[str], bool],
             seeds_of: Callable[[str], Sequence[str]] = lambda name: ()) -> list[Row]:
    """Every run, the multi-hop set's first (its rows decide the most claims), then the size claim's
    fine-tuned DnC of each ``size_llms`` (multi-hop set only), then the conversational set's rows: an
    interrupted stage has the rows that matter most, and a rerun resumes from them (:func:`resume`)."""
    plans = {name: plan_for(has_adapters(name), cfg.base_strategies, seeds_of(name)) for name in cfg.llms}
    rows: list[Row] = []
    for set_name in sets:
        for name in cfg.llms:
            rows += [Row(name, s, v, set_name) for s, v in plans[name]]
        if set_name == cfg.question_set:
            rows += [Row(n, "dnc", "ft", set_name) for n in cfg.size_llms if n not in cfg.llms]
    return rows


# Modules whose code writes a dialogue (the strategies, tools, engines and the chat format adapters
# were trained on, records, CLIP prompts): a checkpointed row is reused only when none of them
# changed since it was written.
DIALOGUE_CODE = ("toolagent", "models", "train/sft.py", "schema.py", "world/render.py")


def row_fingerprint(row: Row, questions: Sequence[Question], cfg: ToolagentEval, params: Params,
                    corpus_dir: Path, adapter: Path | None, data: Path | None = None) -> str:
    """What one run's dialogues depend on: the code that writes them, the settings, the questions,
    the pages and entities the tools index, CLIP, the text encoder, the LLM and its adapter."""
    data = DATA if data is None else data
    inputs = [corpus_dir / "documents.jsonl", corpus_dir / "entities.jsonl",
              *(data / "models" / n / "READY" for n in (row.llm, cfg.text_encoder))]
    clip = Path(params.models.clip)
    inputs += sorted(clip.rglob("*")) if clip.is_dir() else []
    inputs += sorted(adapter.rglob("*")) if adapter else []
    settings = {"row": asdict(row), "questions": [asdict(q) for q in questions], "seed": params.base.seed,
                "device": params.base.device, "inference": asdict(params.inference), "clip": params.models.clip,
                "stage": {k: getattr(cfg, k) for k in ("corpus", "split", "text_encoder", "max_tool_calls",
                                                         "max_new_tokens", "engine")}}
    return fingerprint(settings, package_files(*DIALOGUE_CODE), inputs)


def row_name(row: Row) -> str:
    """A row's checkpoint name, its trace file's: <system>__<question set>."""
    return f"{row.system}{TRACE_SEP}{row.question_set}"


def make_system(strategy: str, llm: Any, tools: dict[str, Any], name: str,
                cfg: ToolagentEval) -> Any:
    """The system of a strategy; the agents get the stage's tool-call cap and turn length."""
    if strategy == "tools_answer":
        return ToolsAnswer(llm, tools, name)
    return STRATEGIES[strategy](llm, tools, name, max_calls=cfg.max_tool_calls,
                                max_new_tokens=cfg.max_new_tokens)


def run_strategies(params: Params, tools: dict[str, Any], test: dict[str, list[Question]],
                   corpus_dir: Path) -> tuple[dict[tuple[str, str], list[Trace]], list[dict[str, Any]], dict[str, int]]:
    """(traces per (system, set), wall time per run, parameters per LLM); traces are written as they come.

    Runs follow :func:`row_plan`; an LLM is loaded once per run of consecutive rows with the same
    adapter (none for base rows, the strategy's own for fine-tuned ones). A run an interrupted
    earlier stage finished is read back from its checkpoint instead of run again.
    """
    from mmrag.models.generation import engine_settings, load_chat, parameter_count
    from mmrag.models.registry import PROVISIONED

    base, cfg = params.base, params.toolagent_eval
    folder = checkpoint_dir(STAGE)
    folder.mkdir(parents=True, exist_ok=True)

    def has_adapters(name: str) -> bool:
        found = all(strategy_adapter(DATA, name, s).exists() for s in ("react", "dnc"))
        if not found:
            print(f"no per-strategy adapters for {name} at {strategy_adapter(DATA, name, 'dnc').parent.parent}: "
                  f"fine-tuned rows skipped (run toolagent_finetune)")
        return found

    rows = row_plan(cfg, list(test), has_adapters, lambda name: extra_seeds(DATA, name))
    traces, runs, n_params = {}, [], {}
    llm, loaded = None, None
    for row in rows:
        adapter = strategy_adapter(DATA, row.llm, row.strategy, row.variant) if row.variant.startswith("ft") else None
        if adapter is not None and not adapter.exists():  # a size_llms row without its adapter
            print(f"no DnC adapter for {row.llm} at {adapter}: the size claim's row skipped (add it to "
                  f"toolagent_finetune.llms and run toolagent_finetune)")
            continue
        qs = test[row.question_set]
        stamp = row_fingerprint(row, qs, cfg, params, corpus_dir, adapter)
        t0 = time.time()
        tr = saved_run(folder, row_name(row), stamp)
        resumed = tr is not None
        if tr is None:
            if loaded != (row.llm, adapter):
                if llm is not None and hasattr(llm, "close"):
                    llm.close()
                llm = load_chat(row.llm, engine=cfg.engine, settings=engine_settings(params.inference),
                                adapter=adapter, allow_network=base.allow_network, device=base.device)
                loaded = (row.llm, adapter)
                n_params.setdefault(row.llm, parameter_count(llm))
            tr = make_system(row.strategy, llm, tools, row.system, cfg).answer(qs)
            save_run(folder, row_name(row), stamp, tr)
        else:
            spec = PROVISIONED.get(row.llm)
            n_params.setdefault(row.llm, int(spec.parameters_m * 1e6) if spec else 0)
        traces[(row.system, row.question_set)] = tr
        runs.append({"system": row.system, "set": row.question_set, "seconds": time.time() - t0,
                     "resumed": resumed})
        write_traces(STAGE, row.system, row.question_set, tr)
        print(f"{row.system:45s} {row.question_set:7s} {time.time() - t0:6.1f} s"
              + (" (read back from data/.checkpoints: an earlier run with the same fingerprint finished it)"
                 if resumed else ""))
    if llm is not None and hasattr(llm, "close"):
        llm.close()
    return traces, runs, n_params


# --------------------------------------------------------------------------- tables
def score_traces(traces: dict[tuple[str, str], list[Trace]], qmap: dict[str, Question]) -> Any:
    """One row per (run, question): EM, F1 (one rule, lists in any order), tool calls, cost."""
    import pandas as pd

    rows = []
    for (system, set_name), tr in traces.items():
        strategy, llm_name, variant = system.split("__")
        for t in tr:
            q = qmap[t.question_id]
            gold = golds(q)
            rows.append({"set": set_name, "llm": llm_name, "strategy": strategy, "model": variant,
                         "kind": q.kind, "hops": len(q.decomposition), "em": exact_match(t.answer, gold),
                         "f1": token_f1(t.answer, gold), "tool_calls": t.tool_calls,
                         "format_errors": t.format_errors, "format_ok": t.format_errors == 0,
                         "repeated_calls": t.meta.get("repeated_calls", 0), "tokens_out": t.tokens_out,
                         "tokens_in": t.tokens_in, "seconds": t.seconds})
    return pd.DataFrame(rows)


def strategy_table(scores: Any, set_name: str, alpha: float) -> Any:
    """Table 3/4: n, EM with its Wilson interval, F1, tool calls and format errors per LLM,
    strategy and model, in the paper's order (a conversational set's turns are not independent:
    its claims resample whole conversations, see the claims)."""
    from mmrag.evaluate.stats import wilson

    d = scores[scores.set == set_name]
    t = d.groupby(["llm", "strategy", "model"]).agg(
        n=("em", "size"), EM=("em", "mean"), right=("em", "sum"), F1=("f1", "mean"),
        tool_calls=("tool_calls", "mean"), format_errors=("format_errors", "mean")).reset_index()
    t.insert(5, f"EM {1 - alpha:.0%} CI", [
        "[{:.3f}, {:.3f}]".format(*wilson(float(k), int(n), alpha)) for k, n in zip(t.right, t.n)])
    t = t.drop(columns="right").round(3)
    return t.sort_values(["llm", "model", "strategy"],
                         key=lambda c: c.map(STRATEGY_ORDER) if c.name == "strategy" else c)


def kind_table(scores: Any, set_name: str) -> Any:
    """EM per question type (rows) and strategy·model (columns)."""
    return scores[scores.set == set_name].pivot_table(index="kind", columns=["strategy", "model"],
                                                      values="em", aggfunc="mean").round(2)


def size_table(scores: Any) -> Any:
    """EM, F1 and tool calls of every row, the LLMs side by side (does size help?)."""
    size = scores.groupby(["set", "strategy", "model", "llm"]).agg(
        EM=("em", "mean"), F1=("f1", "mean"), tool_calls=("tool_calls", "mean")).round(3)
    return size.unstack("llm")


def mean_of(scores: Any, set_name: str, llm_name: str, strategy: str, variant: str, col: str) -> float:
    """The mean of one column over one row of the tables (NaN when that row did not run)."""
    d = scores[(scores.set == set_name) & (scores.llm == llm_name) & (scores.strategy == strategy)
               & (scores.model == variant)]
    return float(d[col].mean()) if len(d) else float("nan")


def check_claims(scores: Any, set_names: Iterable[str], by_size: Sequence[str]) -> list[dict[str, Any]]:
    """The paper's claims per set and LLM (strict comparisons), and "bigger is better" across LLMs.

    ``by_size`` lists the LLMs smallest first; bigger is better holds when F1 never falls with
    size and rises from the smallest to the largest. A row that did not run (a size-claim LLM runs
    only DnC fine-tuned) is left out, not counted as a failed claim.
    """
    def ran(set_name: str, name: str, strategy: str, variant: str) -> bool:
        return not math.isnan(mean_of(scores, set_name, name, strategy, variant, "f1"))

    claim_rows: list[dict[str, Any]] = []
    for set_name in set_names:
        for name in by_size:
            if not all(ran(set_name, name, s, v) for s, v in (("dnc", "ft"), ("tools_answer", "base"),
                                                              ("react", "ft"))):
                continue
            dnc, ta, react = ({c: mean_of(scores, set_name, name, s, v, c) for c in ("em", "f1", "tool_calls")}
                              for s, v in (("dnc", "ft"), ("tools_answer", "base"), ("react", "ft")))
            claim_rows += [
                {"set": set_name, "llm": name, "claim": "fine-tuned DnC beats ToolsAnswer on EM and F1",
                 "holds": dnc["em"] > ta["em"] and dnc["f1"] > ta["f1"]},
                {"set": set_name, "llm": name, "claim": "fine-tuned DnC beats fine-tuned mm-ReAct on EM and F1",
                 "holds": dnc["em"] > react["em"] and dnc["f1"] > react["f1"]},
                {"set": set_name, "llm": name, "claim": "fine-tuned DnC calls fewer tools than fine-tuned mm-ReAct",
                 "holds": dnc["tool_calls"] < react["tool_calls"]}]
        if len(by_size) > 1:
            for s, v in (("dnc", "ft"), ("react", "ft"), ("tools_answer", "base")):
                sizes = [n for n in by_size if ran(set_name, n, s, v)]
                if len(sizes) < 2:
                    continue
                f1 = [mean_of(scores, set_name, n, s, v, "f1") for n in sizes]
                claim_rows.append({"set": set_name, "llm": " < ".join(sizes),
                                   "claim": f"bigger is better: {s}·{v} F1",
                                   "f1_by_size": [round(x, 3) for x in f1],
                                   "holds": all(b >= a for a, b in zip(f1, f1[1:])) and f1[-1] > f1[0]})
    return claim_rows


def hops_table(scores: Any, alpha: float) -> Any:
    """EM (with its Wilson interval) and F1 by the gold hop count, per set, LLM, strategy and model."""
    from mmrag.evaluate.stats import wilson

    t = scores.groupby(["set", "llm", "strategy", "model", "hops"]).agg(
        n=("em", "size"), EM=("em", "mean"), right=("em", "sum"), F1=("f1", "mean")).reset_index()
    t[f"EM {1 - alpha:.0%} CI"] = ["[{:.3f}, {:.3f}]".format(*wilson(float(k), int(n), alpha))
                                   for k, n in zip(t.right, t.n)]
    return t.drop(columns="right").round(3)


def format_kept_table(scores: Any, alpha: float) -> Any:
    """Per run: dialogues that kept the format (no malformed turn), their EM with its interval,
    against EM over all dialogues; repeated calls per dialogue."""
    import pandas as pd

    from mmrag.evaluate.stats import wilson

    rows = []
    for (set_name, llm_name, strategy, model), g in scores.groupby(["set", "llm", "strategy", "model"]):
        kept = g[g.format_ok]
        lo, hi = wilson(float(kept.em.sum()), len(kept), alpha) if len(kept) else (float("nan"), float("nan"))
        rows.append({"set": set_name, "llm": llm_name, "strategy": strategy, "model": model, "n": len(g),
                     "kept_format": len(kept), "EM_all": round(float(g.em.mean()), 3),
                     "EM_kept_format": round(float(kept.em.mean()), 3) if len(kept) else None,
                     f"EM_kept {1 - alpha:.0%} CI": f"[{lo:.3f}, {hi:.3f}]" if len(kept) else "",
                     "repeated_calls": round(float(g.repeated_calls.mean()), 3)})
    return pd.DataFrame(rows)


def calls_by_modality(traces: dict[tuple[str, str], list[Trace]], qmap: dict[str, Question]) -> Any:
    """Tool calls per tool (columns) by the tool the gold hop of that turn needs (rows), per run:
    the i-th call of a dialogue is set against the i-th gold hop ('beyond gold hops' after the last;
    'no gold hops' for a question without a gold decomposition, as a user's HotpotQA set has)."""
    import pandas as pd

    rows = []
    for (system, set_name), tr in traces.items():
        strategy, llm_name, variant = system.split("__")
        for t in tr:
            gold = [s.tool for s in qmap[t.question_id].decomposition]
            calls = [s.target for s in t.steps if s.action == "tool"]
            for i, tool in enumerate(calls):
                rows.append({"set": set_name, "llm": llm_name, "strategy": strategy, "model": variant,
                             "gold_hop_tool": gold[i] if i < len(gold) else
                             "beyond gold hops" if gold else "no gold hops",
                             "called": tool})
    if not rows:
        return pd.DataFrame()
    d = pd.DataFrame(rows)
    return d.pivot_table(index=["set", "llm", "strategy", "model", "gold_hop_tool"], columns="called",
                         values="set", aggfunc="size", fill_value=0)


def chaining_table(scores: Any, set_name: str) -> Any:
    """On multi-hop questions, how often a fine-tuned strategy stops after at most one tool call."""
    multi_hop = scores[(scores.set == set_name) & (scores.model == "ft") & (scores.hops > 1)]
    return multi_hop.assign(one_call=multi_hop.tool_calls <= 1).groupby(["llm", "strategy"]).agg(
        questions=("em", "size"), ended_after_one_call=("one_call", "mean"), EM=("em", "mean"),
        tool_calls=("tool_calls", "mean")).round(3)


def cost_table(scores: Any) -> Any:
    """Tokens, tool calls and seconds per question for every run."""
    return scores.groupby(["set", "llm", "strategy", "model"]).agg(
        tokens_in=("tokens_in", "mean"), tokens_out=("tokens_out", "mean"),
        tool_calls=("tool_calls", "mean"), seconds=("seconds", "mean")).round(2)


def strategies_figure(scores: Any) -> Any:
    """F1 and average tool calls per set, one bar per strategy·model."""
    import seaborn as sns

    fig, axes = new_figure(1, 2, figsize=(13, 4.5))
    plot = scores.assign(row=scores.strategy + "·" + scores.model)
    sns.barplot(plot, x="set", y="f1", hue="row", errorbar=None, ax=axes[0])
    axes[0].set_title("F1 by strategy (rows: strategy·model)")
    sns.barplot(plot, x="set", y="tool_calls", hue="row", errorbar=None, ax=axes[1], legend=False)
    axes[1].set_title("average tool calls")
    fig.tight_layout()
    return fig


def example_dialogues(traces: dict[tuple[str, str], list[Trace]], qmap: dict[str, Question],
                      set_name: str) -> str:
    """One dialogue per run on the set: its first multi-hop question (else its first question)."""
    out = []
    for (system, trace_set), tr in traces.items():
        if trace_set != set_name:
            continue
        pick = next((t for t in tr if len(qmap[t.question_id].decomposition) > 1), tr[0])
        q = qmap[pick.question_id]
        out.append(f"=== {system} · {q.kind} · gold: {q.answer}\n{render_dialogue(pick)}\n")
    return "\n".join(out)


def records(table: Any) -> list[dict[str, Any]]:
    """A table's rows as dicts, floats rounded to 4 digits, NaN as null (for metrics.json)."""
    return [{k: ((None if v != v else round(v, 4)) if isinstance(v, float) else v) for k, v in r.items()}
            for r in table.to_dict(orient="records")]


def stage_metrics(ceilings: Any, table3: Any, table4: Any, test: dict[str, list[Question]],
                  claim_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """results/toolagent_eval/metrics.json: tool ceilings, Tables 3 and 4, question counts, claims."""
    return {
        "ceilings": {tool: {"n": int(r.n), "em": round(float(r.EM), 4), "f1": round(float(r.F1), 4)}
                     for tool, r in ceilings.iterrows()},
        "table3_mmqa": records(table3),  # on toolagent_eval.question_set (MultiModalQA-style by default)
        "table4_mmcoqa": records(table4) if len(table4) else [],  # on toolagent_eval.conv_set
        "questions": {k: len(v) for k, v in test.items()},
        "claims": [{**r, "holds": bool(r["holds"])} for r in claim_rows],
    }


def run(params: Params) -> ToolagentEvalResult:
    """Every strategy x LLM x variant on the test questions: tables, claims, traces and cost."""
    import pandas as pd
    import seaborn as sns

    base, cfg = params.base, params.toolagent_eval
    data_dir, out_dir = stage_dirs(STAGE)
    corpus_dir = DATA / cfg.corpus
    multi = cfg.question_set
    sns.set_theme(style="whitegrid")

    t0 = time.time()
    tools, n_pages = load_tools(cfg, params.models.clip, base, corpus_dir)
    index_seconds = time.time() - t0
    print(f"{n_pages} pages, tools {list(tools)}, indexed in {index_seconds:.0f} s")

    sets = load_sets(cfg, corpus_dir)
    ceilings = tool_ceilings(sets, tools, cfg.split, cfg.ceiling_subquestions, base.seed)
    if not len(ceilings):  # a user's question set without gold decompositions
        print(f"{multi}: no gold single-hop sub-questions in split '{cfg.split}': tool ceilings not applicable")
    ceilings_by_tool = ceiling_table(ceilings)
    test = test_questions(sets, cfg, base.seed)
    baselines = baseline_table(tools, sets[multi], test[multi], cfg.split, corpus_dir)
    print(f"baselines without an LLM on {multi} ({most_frequent_prior(sets[multi], cfg.split).description}):"
          f"\n{baselines.to_string(index=False)}")
    adapters = adapters_statement([*cfg.llms, *cfg.size_llms], DATA)
    print(f"fine-tuned rows use these adapters, trained on {adapters['trained on'].iloc[0]}: "
          + "; ".join(f"{r.adapter} ({'found' if r.used else 'missing: rows skipped'})" for r in adapters.itertuples()))

    traces, runs, n_params = run_strategies(params, tools, test, corpus_dir)
    qmap = {q.id: q for qs in test.values() for q in qs}
    scores = score_traces(traces, qmap)
    table3 = strategy_table(scores, multi, params.report.alpha)
    table4 = strategy_table(scores, cfg.conv_set, params.report.alpha) if cfg.conv_set in test else pd.DataFrame()
    by_size = sorted([*cfg.llms, *cfg.size_llms], key=lambda n: n_params.get(n, 0))
    claim_rows = check_claims(scores, test, by_size)
    print({n: f"{n_params.get(n, 0) / 1e6:.0f}M parameters" for n in by_size})

    fig = strategies_figure(scores)
    save_figure(fig, out_dir / "tables.png", dpi=110)
    cost = cost_table(scores)
    write_json(data_dir / "cost.json", {"index_seconds": round(index_seconds, 1),
                                        "per_question": cost.reset_index().to_dict(orient="records"),
                                        "runs": [{**r, "seconds": round(r["seconds"], 1)} for r in runs]})
    metrics = stage_metrics(ceilings_by_tool, table3, table4, test, claim_rows)
    metrics["baselines"] = json.loads(baselines.to_json(orient="records"))  # NaN / NA as null
    metrics["adapters"] = records(adapters.drop(columns=["trained on"]))
    by_hops = hops_table(scores, params.report.alpha)
    kept_format = format_kept_table(scores, params.report.alpha)
    modality = calls_by_modality(traces, qmap)
    metrics["by_hops"] = records(by_hops)
    metrics["format_kept"] = records(kept_format)
    metrics["calls_by_modality"] = records(modality.reset_index()) if len(modality) else []
    write_json(out_dir / "metrics.json", metrics)
    return ToolagentEvalResult(
        metrics=metrics,
        tables={"ceilings": ceilings_by_tool, "runs": pd.DataFrame(runs).round(1), "table3": table3,
                "table4": table4, "by_kind": kind_table(scores, multi),
                "size": size_table(scores), "claims": pd.DataFrame(claim_rows),
                "chaining": chaining_table(scores, multi), "cost": cost, "baselines": baselines,
                "adapters": adapters, "by_hops": by_hops, "format_kept": kept_format,
                "calls_by_modality": modality},
        figures={"tables": fig},
        artifacts={"traces": data_dir / "traces", "cost": data_dir / "cost.json",
                   "metrics": out_dir / "metrics.json", "figure": out_dir / "tables.png"},
        traces=traces, questions=test, n_params=n_params, tools=list(tools), pages=n_pages, scores=scores,
        dialogues=example_dialogues(traces, qmap, multi), adapters=adapters.to_string(index=False))
