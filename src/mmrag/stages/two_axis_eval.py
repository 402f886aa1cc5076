"""Stage `two_axis_eval`: MM-R2's tables and every system on one scale, from traces only.

MM-R2 runs in every configuration the paper reports (base zero-shot / SFT / SFT+GRPO policies,
the module ablation as single-shot readers, the retrieval budget) on a seeded sample of the
world's InfoSeek-style unseen-entity and unseen-question splits, then on real Wikipedia
questions beside the flat baseline. Every run writes ``data/two_axis_eval/traces/<system>__<set>.jsonl``
and the evaluator (:mod:`mmrag.evaluate`) scores the traces on the task axis (accuracy, F1,
Recall@k) and the process axis (Route Recall@1, sparsity, fidelity, judge). The cross-system
table adds BRIT's and DnC's traces (the stages of ``trace_stages``) and a flat dense-retrieval
baseline, each set scored on the questions all its systems answered.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from mmrag import sampling
from mmrag.baselines.single_shot import FlatDense, SingleShot
from mmrag.evaluate import evaluator, fidelity, stats, tables
from mmrag.evaluate.claims import SUMMARY_ONLY
from mmrag.evaluate.judge import Judge, LexicalJudge, LLMJudge, SampledJudge
from mmrag.evaluate.metrics import Scored, summaries
from mmrag.evaluate.params import Report, TwoAxisEval
from mmrag.io import (
    DATA,
    ROOT,
    TRACE_SEP,
    dumps,
    read_json,
    save_figure,
    stage_dirs,
    trace_name,
    write_json,
    write_traces,
)
from mmrag.mmr2 import ablation, judge_check
from mmrag.mmr2.agent import PAPER_VIEW, View
from mmrag.mmr2.intent import bind_questions
from mmrag.mmr2.knowledge_map import KnowledgeMap
from mmrag.mmr2.params import Mmr2Train
from mmrag.mmr2.system import GoldReader, MMR2Agent
from mmrag.mmr2.trajectories import query_for
from mmrag.models.params import Inference, Models
from mmrag.params import Base, Sections
from mmrag.schema import Question, Trace, load_question_set, load_questions, load_traces, question_path
from mmrag.stages import StageResult, new_figure
from mmrag.systems import System
from mmrag.train.checkpoints import checkpoint_dir, fingerprint, package_files, save_run, saved_run

STAGE = "two_axis_eval"
POLICIES = ("base", "sft", "grpo")
# the paper's training table: row label -> the run it reads
VARIANTS = {"base (zero-shot)": "mmr2_base", "SFT": "mmr2_sft", "SFT+GRPO": "mmr2_grpo"}
# the paper's module ablation: row -> the run it reads
ABLATION_ROWS = tables.ABLATION_RUNS
TRAINING_SPLITS = ("unseen_entity", "unseen_question", "overall")
# the code an MM-R2 run's traces depend on (agents, single-shot readers, engines, Φ, the answer rules)
RUN_CODE = ("mmr2", "baselines", "models", "train/sft.py", "world/render.py", "evaluate/fidelity.py",
            "evaluate/metrics.py", "schema.py", "sampling.py")

Scores = tuple[list[Scored], dict[str, Any]]


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    inference: Inference
    models: Models
    mmr2_train: Mmr2Train
    two_axis_eval: TwoAxisEval
    report: Report


@dataclass
class TwoAxisEvalResult(StageResult):
    """The runs (system -> traces), their scores, the questions and the judge that scored them."""

    questions: list[Question] = field(default_factory=list)
    runs: dict[str, list[Trace]] = field(default_factory=dict)
    scores: dict[str, Scores] = field(default_factory=dict)
    judge: str = ""
    cost: dict[str, float] = field(default_factory=dict)


# --------------------------------------------------------------------------- setup
def make_judge(cfg: TwoAxisEval, base: Base, inference: Inference) -> Judge:
    """The deterministic lexical proxy, or an LLM judge through the generation service (a local
    ladder model on the stage's engine, or an OpenAI-compatible server when judge_base_url is set)."""
    if cfg.judge == "llm":
        from mmrag.models.generation import engine_settings, load_chat

        return LLMJudge(load_chat(cfg.judge_model, engine="openai" if cfg.judge_base_url else cfg.engine,
                                  settings=engine_settings(inference), allow_network=base.allow_network,
                                  device=base.device, base_url=cfg.judge_base_url or None))
    return LexicalJudge()


def judges(cfg: TwoAxisEval, base: Base, inference: Inference,
           all_questions: Sequence[Question], kmap: KnowledgeMap, sample: Sequence[Question],
           ) -> tuple[Judge, dict[str, dict[str, Any]]]:
    """(the process table's judge, judge name -> agreement with the labelled check). judge: llm
    scores a seeded ``judge_questions`` of the sample (CPU cost) and is checked, beside the lexical
    proxy, on ``judge_check_questions`` dev questions x 3 labelled traces (mmr2.judge_check)."""
    lexical = LexicalJudge()
    items = judge_check.check_items([q for q in all_questions if q.split == "dev"], kmap,
                                    cfg.judge_check_questions, base.seed)
    if cfg.judge != "llm":
        return lexical, ({lexical.name: judge_check.agreement(lexical, items)} if items else {})
    llm_judge = make_judge(cfg, base, inference)
    agreement = {j.name: judge_check.agreement(j, items) for j in (llm_judge, lexical)} if items else {}
    chosen = sampling.seeded_sample(list(sample), cfg.judge_questions, base.seed)
    return SampledJudge(llm_judge, [q.id for q in chosen]), agreement


def on_questions(scored: Sequence[Scored], of: Sequence[Scored]) -> dict[str, Any]:
    """A run's summary on the questions another run was asked: a run of 80 set beside a
    descriptive run of 20 is compared on those 20, not on 60 the other never saw."""
    ids = {s.question_id for s in of}
    return evaluator.summarize([s for s in scored if s.question_id in ids])


def ceiling_table(scores: Mapping[str, Scores]) -> pd.DataFrame:
    """Each policy's accuracy with retrieval (on all its questions, and on the ceiling's) beside its
    reader ceiling (gold passages shown), each with its own 95 % CI and n."""
    rows = []
    for label, run in VARIANTS.items():
        policy = run.removeprefix("mmr2_")
        full, gold = scores[run][1], scores[f"ceiling_{policy}"][1]
        paired = on_questions(scores[run][0], scores[f"ceiling_{policy}"][0])
        rows.append({"policy": label, "accuracy with retrieval": full.get("accuracy"),
                     "95% CI": tables.ci_text(full, "accuracy"),
                     "with retrieval, on the ceiling's questions": paired.get("accuracy"),
                     "95% CI (same questions)": tables.ci_text(paired, "accuracy"),
                     "reader ceiling (gold passages)": gold.get("accuracy"),
                     "ceiling 95% CI": tables.ci_text(gold, "accuracy"),
                     "route_recall@1": full.get("route_recall@1")})
    return pd.DataFrame(rows)


def ceiling_metrics(scores: Mapping[str, Scores]) -> dict[str, dict[str, Any]]:
    """policy -> accuracy with retrieval (all its questions, and the ceiling's) and with the gold
    passages, each with its n (metrics.json)."""
    out = {}
    for run in VARIANTS.values():
        full, gold = scores[run], scores[f"ceiling_{run.removeprefix('mmr2_')}"]
        paired = on_questions(full[0], gold[0])
        out[run] = {"accuracy": full[1].get("accuracy"), "n": full[1].get("n"),
                    "accuracy_on_ceiling_questions": paired.get("accuracy"),
                    "ceiling": gold[1].get("accuracy"), "ceiling_n": gold[1].get("n")}
    return out


def sample_questions(questions: Sequence[Question], splits: Sequence[str], per_split: int,
                     seed: int) -> list[Question]:
    """A seeded sample of ``per_split`` questions of each split, split after split."""
    return [q for s in splits
            for q in sampling.seeded_sample([x for x in questions if x.split == s], per_split, seed)]


def load_policy(policies: Mapping[str, str], policy: str, cfg: TwoAxisEval,
                base: Base, inference: Inference) -> Any:
    """One MM-R2 policy of mmr2_train: the base LLM, with its LoRA adapter unless ``base``, on the
    stage's engine (llama.cpp serves the adapter exported to GGUF)."""
    from mmrag.models.generation import engine_settings, load_chat

    adapter = None if policy == "base" else ROOT / policies[policy]
    return load_chat(policies["base"], engine=cfg.engine, settings=engine_settings(inference),
                     allow_network=base.allow_network, device=base.device, adapter=adapter)


def runs_fingerprint(params: Params, view: View, data: Path | None = None) -> str:
    """What every run's traces depend on besides its system and questions: the code, the stage's
    answering settings, the policies (mmr2_train's adapters), the KnowledgeMaps, the corpora's pages,
    CLIP and spaCy (Φ), the provisioned models; not the judge or the sample sizes (each run's
    questions are stamped on their own, :func:`run_stamp`)."""
    data = DATA if data is None else data
    cfg = params.two_axis_eval
    clip = Path(params.models.clip)
    files = [*sorted((data / "mmr2_train").rglob("*")), *sorted((data / "knowledge_map").rglob("*")),
             *(data / c / f for c in (cfg.corpus, cfg.text_corpus) for f in ("documents.jsonl", "entities.jsonl")),
             *sorted((data / "models").glob("*/READY")), *(sorted(clip.rglob("*")) if clip.is_dir() else [])]
    settings = {"stage": {k: getattr(cfg, k) for k in ("corpus", "question_set", "text_corpus", "text_question_set",
                                                       "k", "max_turns", "max_new_tokens", "engine",
                                                       "ablation_router")},
                "budget": params.mmr2_train.budget, "view": view.to_dict(), "inference": asdict(params.inference),
                "models": {"policy": params.mmr2_train.policy, "spacy": params.models.spacy,
                           "clip": params.models.clip},
                "seed": params.base.seed, "device": params.base.device}
    return fingerprint(settings, package_files(*RUN_CODE), files)


def run_stamp(stamp: str, name: str, questions: Sequence[Question]) -> str:
    """One run's fingerprint: the stage's, the run's name (system and set) and its questions."""
    return hashlib.sha256("\n".join([stamp, name, dumps([q.to_dict() for q in questions], indent=None)]).encode()
                          ).hexdigest()


def answer(system: System, questions: Sequence[Question], question_set: str,
           stamp: str | None) -> tuple[list[Trace], bool]:
    """(traces, resumed): the system's answers, or, with a ``stamp``, the finished run an earlier
    (interrupted) run of the stage kept under data/.checkpoints/two_axis_eval when its stamp matches."""
    if stamp is None or not questions:
        return (system.answer(questions) if questions else []), False
    name, folder = f"{system.name}{TRACE_SEP}{question_set}", checkpoint_dir(STAGE)
    mine = run_stamp(stamp, name, questions)
    traces = saved_run(folder, name, mine)
    if traces is not None:
        print(f"{name}: read back from data/.checkpoints (an earlier run with the same fingerprint finished it)")
        return traces, True
    traces = system.answer(questions)
    save_run(folder, name, mine, traces)
    return traces, False


def answer_and_save(system: System, questions: Sequence[Question], question_set: str,
                    cost: dict[str, float], stamp: str | None = None) -> list[Trace]:
    """Run one system (see :func:`answer`), time it (into ``cost``; a resumed run: the seconds its
    traces recorded) and write its traces, all the evaluator reads."""
    t0 = time.time()
    traces, resumed = answer(system, questions, question_set, stamp)
    seconds = sum(t.seconds or 0 for t in traces) if resumed else time.time() - t0
    cost[f"{system.name}__{question_set}"] = round(seconds, 1)
    write_traces(STAGE, system.name, question_set, traces)
    return traces


def token_counts(runs: Mapping[str, Sequence[Trace]], llms: Mapping[str, Any]) -> dict[str, Any]:
    """Tokens each run sent and wrote (its traces) and what each policy's engine computed or took
    from its KV cache: where an episode's seconds go (a trained policy's turns cost more)."""
    per_run = {name: {"questions": len(ts), "turns": sum(len(t.steps) for t in ts),
                      "prompt_tokens": sum(t.tokens_in for t in ts),
                      "completion_tokens": sum(t.tokens_out for t in ts)} for name, ts in runs.items()}
    engines = {policy: {k: round(v, 1) for k, v in llm.usage.as_dict().items()}
               for policy, llm in llms.items() if getattr(llm, "usage", None) is not None}
    return {"per_run": per_run, "engine_usage": engines}


def by_id(questions: Sequence[Question], values: Sequence[Any]) -> dict[str, Any]:
    """Per-question inputs keyed by question id (what the System classes take)."""
    return {q.id: v for q, v in zip(questions, values)}


# --------------------------------------------------------------------------- MM-R2's runs
def make_agent(name: str, llm: Any, k: int, kmap: KnowledgeMap, encoder: Any, questions: Sequence[Question],
               intents: Sequence[Any], cfg: TwoAxisEval, train: Mmr2Train,
               view: View = PAPER_VIEW) -> MMR2Agent:
    """An MM-R2 policy as an agent over ``questions`` (their bound intents), ``k`` passages a search."""
    return MMR2Agent(name, llm, kmap, encoder, k=k, budget=train.budget, max_turns=cfg.max_turns,
                     max_new_tokens=cfg.max_new_tokens, intents=by_id(questions, intents),
                     image_texts=by_id(questions, [x.image_text for x in intents]), view=view)


def intent_km(llm: Any, kmap: KnowledgeMap, encoder: Any, questions: Sequence[Question], intents: Sequence[Any],
              cfg: TwoAxisEval) -> SingleShot:
    """The paper's "+ intent binding" row: single-shot, the intent's query routed to its nearest unit."""
    return SingleShot("ablation_intent_km", llm, kmap, encoder, k=cfg.k, routed=True,
                      queries=by_id(questions, [query_for(q, x) for q, x in zip(questions, intents)]),
                      image_texts=by_id(questions, [x.image_text for x in intents]))


def claim_sample(questions: Sequence[Question], cfg: TwoAxisEval, seed: int
                 ) -> tuple[list[Question], list[Question]]:
    """(the main sample, the agentic-loop claim's sample): ``per_split`` and ``claim_per_split``
    seeded questions of each split; the first holds the second's first questions of each split."""
    return (sample_questions(questions, cfg.splits, cfg.per_split, seed),
            sample_questions(questions, cfg.splits, max(cfg.per_split, cfg.claim_per_split), seed))


def loop_claim_runs(llm: Any, kmap: KnowledgeMap, encoder: Any, runs: Mapping[str, list[Trace]],
                    extra: Sequence[Question], intents: Sequence[Any], cfg: TwoAxisEval,
                    train: Mmr2Train, cost: dict[str, float], view: View = PAPER_VIEW,
                    stamp: str | None = None) -> dict[str, list[Trace]]:
    """The agentic-loop claim's pair (full MM-R2 against single-shot intent + KM routing, both read
    by SFT+GRPO) on the claim sample: their main runs plus the ``extra`` questions, written as
    <question_set>_claim traces. Only this pair reads the extra questions: the claim needs ~163 paired
    questions for the paper's 54.3 vs 38.7, the other rows decide their claims at per_split."""
    claim_set = f"{cfg.question_set}_claim"
    out = {}
    for system in (make_agent("mmr2_grpo", llm, cfg.k, kmap, encoder, extra, intents, cfg, train, view),
                   intent_km(llm, kmap, encoder, extra, intents, cfg)):
        t0 = time.time()
        more, resumed = answer(system, extra, claim_set, stamp)
        traces = [*runs[system.name], *more]
        cost[f"{system.name}__{claim_set}"] = round(sum(t.seconds for t in more) if resumed else time.time() - t0, 1)
        write_traces(STAGE, system.name, claim_set, traces)
        out[system.name] = traces
    return out


def mmr2_runs(load_llm: Callable[[str], Any], kmap: KnowledgeMap, encoder: Any,
              questions: Sequence[Question], intents: Sequence[Any], cfg: TwoAxisEval,
              train: Mmr2Train, cost: dict[str, float], view: View = PAPER_VIEW,
              stamp: str | None = None) -> tuple[dict[str, Any], dict[str, list[Trace]]]:
    """(policy -> LLM, run -> traces): the three policies, each loaded as its turn comes, each
    with its reader ceiling (``ceiling_<policy>``: the gold passages in the <information> block, no
    retrieval), the budget sweep (SFT+GRPO) and the single-shot module ablation (SFT+GRPO as the
    reader). ``view``: what the policies were trained to read (policies.json); ``stamp``: the
    stage's :func:`runs_fingerprint` (finished runs of an interrupted run are read back)."""
    image_texts = by_id(questions, [x.image_text for x in intents])
    bound = by_id(questions, intents)

    def agent(name: str, llm: Any, k: int) -> MMR2Agent:
        return make_agent(name, llm, k, kmap, encoder, questions, intents, cfg, train, view)

    # The ceilings, the budget sweep and the two ablation rows no claim uses (intent-only, the
    # oracle router) are descriptive (the budget effect needs ~960 questions), so they read the
    # first descriptive_per_split questions of each split of the same seeded sample, fixed before any run.
    described = [q for s in cfg.splits for q in [x for x in questions if x.split == s][:cfg.descriptive_per_split]]
    llms, runs = {}, {}
    for policy in POLICIES:
        llms[policy] = load_llm(policy)
        runs[f"mmr2_{policy}"] = answer_and_save(agent(f"mmr2_{policy}", llms[policy], cfg.k),
                                                 questions, cfg.question_set, cost, stamp)
        ceiling = GoldReader(f"ceiling_{policy}", llms[policy], kmap, encoder, k=cfg.k, budget=train.budget,
                             max_turns=cfg.max_turns - 1 or 1, max_new_tokens=cfg.max_new_tokens,
                             intents=bound, image_texts=image_texts, view=view)
        runs[ceiling.name] = answer_and_save(ceiling, described, cfg.question_set, cost, stamp)
    for k in cfg.budgets:
        if k != cfg.k:
            runs[f"mmr2_grpo_top{k}"] = answer_and_save(agent(f"mmr2_grpo_top{k}", llms["grpo"], k),
                                                        described, cfg.question_set, cost, stamp)
    referents = by_id(questions, [getattr(x, "referent", None) for x in intents])
    intent_queries = by_id(questions, [query_for(q, x) for q, x in zip(questions, intents)])
    # the paper's four rows: direct retrieval (22.1), KM routing only (30.2: raw question, nearest
    # unit), + intent binding (38.7: the intent's query routed to its nearest unit), full MM-R2
    # (mmr2_grpo); beside them intent-only (ours) and an oracle-like router (the unit whose card
    # lists Φ's referent: a name lookup, not the paper's routing)
    ablations = [SingleShot("ablation_flat", llms["grpo"], kmap, encoder, k=cfg.k, routed=False),
                 SingleShot("ablation_km", llms["grpo"], kmap, encoder, k=cfg.k, routed=True),
                 SingleShot("ablation_intent", llms["grpo"], kmap, encoder, k=cfg.k, routed=False,
                            queries=intent_queries, image_texts=image_texts),
                 intent_km(llms["grpo"], kmap, encoder, questions, intents, cfg),
                 SingleShot("ablation_intent_card", llms["grpo"], kmap, encoder, k=cfg.k, routed=True,
                            queries=intent_queries, image_texts=image_texts, referents=referents)]
    descriptive = {"ablation_intent", "ablation_intent_card"}  # ours and the oracle: no claim rests on them
    for system in ablations:
        runs[system.name] = answer_and_save(system, described if system.name in descriptive else questions,
                                            cfg.question_set, cost, stamp)
    return llms, runs


def ablation_questions(questions: Sequence[Question], cfg: TwoAxisEval) -> list[Question]:
    """The one-factor rows' questions: the first ``ablation_per_split`` of each split of the sample."""
    return [q for s in cfg.splits for q in [x for x in questions if x.split == s][:cfg.ablation_per_split]]


def ablation_runs(llm: Any, kmap: KnowledgeMap, encoder: Any, questions: Sequence[Question],
                  intents: Sequence[Any], runs: dict[str, list[Trace]], cfg: TwoAxisEval, train: Mmr2Train,
                  cost: dict[str, float], view: View = PAPER_VIEW, stamp: str | None = None
                  ) -> dict[str, list[Trace]]:
    """The module ablation as rows that differ by one factor each (:mod:`mmrag.mmr2.ablation`):
    the SFT+GRPO policy in every row, the same prompt, image description, k and turns; one router
    (``ablation_router``) for every routed row, the other as a diagnostic row. Written as
    ``row_*`` traces beside the earlier ``ablation_*`` rows (kept: the before of the before/after).
    A row that is the headline agent (the policy's router) reuses mmr2_grpo's traces."""
    qs = ablation_questions(questions, cfg)
    bound = by_id(questions, intents)
    xs = [bound[q.id] for q in qs]
    out = {}
    for row in ablation.rows(cfg.ablation_router):
        if ablation.same_as_agent(row) and "mmr2_grpo" in runs:
            ids = {q.id for q in qs}
            traces = [Trace.from_dict({**t.to_dict(), "system": row.name})
                      for t in runs["mmr2_grpo"] if t.question_id in ids]
            write_traces(STAGE, row.name, cfg.question_set, traces)
        else:
            system = ablation.build(row, llm, kmap, encoder, qs, xs, budget=train.budget, k=cfg.k,
                                    max_turns=cfg.max_turns, max_new_tokens=cfg.max_new_tokens, view=view)
            traces = answer_and_save(system, qs, cfg.question_set, cost, stamp)
        runs[row.name] = out[row.name] = traces
    return out


def ablation_configs(cfg: TwoAxisEval, train: Mmr2Train, view: View = PAPER_VIEW) -> dict[str, dict[str, Any]]:
    """row -> what its agent is built from (metrics.json; the notebook shows it)."""
    return {row.name: {"label": row.label, **ablation.config(row, budget=train.budget, k=cfg.k,
                                                              max_turns=cfg.max_turns,
                                                              max_new_tokens=cfg.max_new_tokens,
                                                              policy="SFT+GRPO", view=view)}
            for row in ablation.rows(cfg.ablation_router)}


# before (the earlier rows) -> after (the one-factor rows), step by step
BEFORE_AFTER = (("flat retrieval", "ablation_flat", "row_flat"),
                ("+ KM routing", "ablation_km", "row_km"),
                ("+ intent binding", "ablation_intent_km", "row_intent_km"),
                ("+ agentic loop", "mmr2_grpo", "row_full"))


def paired_effect(a: Sequence[Scored], b: Sequence[Scored], alpha: float = 0.05) -> dict[str, Any]:
    """acc(a) - acc(b) on the questions both answered, with its 95 % interval (Newcombe's paired
    score interval for 0/1 accuracy, else a paired bootstrap) and n."""
    x, y = {s.question_id: s.accuracy for s in a}, {s.question_id: s.accuracy for s in b}
    ids = [i for i in x if i in y]
    if not ids:
        return {"effect": None, "low": None, "high": None, "n": 0}
    va, vb = [x[i] for i in ids], [y[i] for i in ids]
    if stats.is_binary(va + vb):
        both = sum(1 for p, q in zip(va, vb) if p and q)
        only_a, only_b = stats.discordant(va, vb)
        d, lo, hi = stats.newcombe_paired(both, only_a, only_b, len(ids) - both - only_a - only_b, alpha)
    else:
        d, lo, hi = stats.paired_bootstrap(va, vb, alpha)
    return {"effect": round(d, 4), "low": round(lo, 4), "high": round(hi, 4), "n": len(ids)}


def effect_text(e: Mapping[str, Any]) -> str | None:
    return None if e["effect"] is None else f"{e['effect']:+.3f} [{e['low']:+.3f}, {e['high']:+.3f}] n={e['n']}"


def before_after(scores: Mapping[str, Scores]) -> pd.DataFrame:
    """Each step of the ablation before (the earlier rows: no image for the rows without intent,
    nearest-centroid single shots against the policy-routed loop) and after (one factor a step),
    on the same questions (the one-factor rows'): accuracy with its 95 % CI, and each step's
    effect over the step before, paired, with its CI."""
    rows, prev = [], None
    for step, old, new in BEFORE_AFTER:
        if old not in scores or new not in scores:
            continue
        ids = {s.question_id for s in scores[new][0]}
        b = [s for s in scores[old][0] if s.question_id in ids]
        a = [s for s in scores[new][0] if s.question_id in {x.question_id for x in b}]
        before, after = evaluator.summarize(b), evaluator.summarize(a)
        row = {"step": step, "before (run)": old, "before accuracy": before.get("accuracy"),
               "before 95% CI": tables.ci_text(before, "accuracy"), "after (run)": new,
               "after accuracy": after.get("accuracy"), "after 95% CI": tables.ci_text(after, "accuracy")}
        row["before: effect of the step"] = effect_text(paired_effect(b, prev[0])) if prev else None
        row["after: effect of the step"] = effect_text(paired_effect(a, prev[1])) if prev else None
        rows.append(row)
        prev = (b, a)
    return pd.DataFrame(rows)


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """A table's rows for metrics.json, empty cells as null (never NaN, which is not JSON)."""
    return df.astype(object).where(df.notna(), None).to_dict(orient="records")


def loop_metrics(runs: Mapping[str, Sequence[Trace]], scores: Mapping[str, Scores]) -> dict[str, dict[str, Any]]:
    """Searches per question of every agent run; for the one-factor loop row, how often a second
    search changed the answer against the same row with one search (row_intent_km)."""
    agents = [*(f"mmr2_{p}" for p in POLICIES), *ablation.LADDER, ablation.DIAGNOSTIC]
    out = {name: ablation.loop_stats(runs[name]) for name in agents if name in runs}
    if "row_full" in runs and "row_intent_km" in runs:
        correct = {"loop": {s.question_id: bool(s.accuracy) for s in scores["row_full"][0]},
                   "single": {s.question_id: bool(s.accuracy) for s in scores["row_intent_km"][0]}}
        out["row_full"] = ablation.loop_stats(runs["row_full"], runs["row_intent_km"], correct)
    return out


def loop_table(loop: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The loop-firing figures, one row per agent run."""
    keys = ("n", "searches_per_question", "share_two_plus_searches", "second_search_questions",
            "answer_changed", "answer_changed_share", "wrong_to_right", "right_to_wrong")
    return pd.DataFrame([{"run": name, **{k: s.get(k) for k in keys}} for name, s in loop.items()])


# --------------------------------------------------------------------------- scoring
def score(traces: Sequence[Trace], questions: Sequence[Question], cfg: TwoAxisEval,
          units: Mapping[str, str], judge: Judge, system: str) -> Scores:
    """(per-question scores, the system's summary) on both axes."""
    scored = evaluator.score(traces, questions, cfg.recall_k, dict(units), judge, system=system)
    return scored, evaluator.summarize(scored)


def asked(traces: Sequence[Trace], questions: Sequence[Question]) -> list[Question]:
    """The questions a run was asked, in set order: the descriptive runs (ceilings, budget sweep,
    two ablation rows) read a subset, and scoring them on the whole set counted the rest as wrong.
    A run writes one trace per question asked, failures included, so its traces name them."""
    ids = {t.question_id for t in traces}
    return [q for q in questions if q.id in ids]


def by_split(scored: Sequence[Scored]) -> dict[str, dict[str, Any]]:
    """Summaries per split (named as the paper's table names them), plus overall."""
    out = {tables.SPLITS.get(k, k): v for k, v in evaluator.summarize_by(scored, "split").items()}
    out["overall"] = evaluator.summarize(scored)
    return out


def fidelity_scores(llms: Mapping[str, Any], runs: Mapping[str, list[Trace]],
                    questions: Sequence[Question], scores: dict[str, Scores],
                    min_correct: int, question_set: str) -> dict[str, dict]:
    """Summary-only accuracy over full accuracy for the trained policies (same backbone reads
    the exposed summaries alone); also recorded in their summaries. The summary-only answers are
    written as traces (``<policy>_summary_only``), from which the claims recompute fidelity."""
    fid = {}
    for policy in ("sft", "grpo"):
        name = f"mmr2_{policy}"
        items = list(zip(questions, runs[name]))
        answers = fidelity.summary_only_answers(llms[policy], items)
        write_traces(STAGE, name + SUMMARY_ONLY, question_set,
                     [Trace(question_id=q.id, system=name + SUMMARY_ONLY, answer=a,
                            meta={"reads": "the exposed summaries of " + name, "summaries": len(summaries(t))})
                      for (q, t), a in zip(items, answers)], data=DATA)
        fid[name] = fidelity.fidelity(items, answers, min_correct)
        scores[name][1]["fidelity"] = (None if fid[name]["fidelity"] is None
                                       else round(fid[name]["fidelity"], 4))
    return fid


def budget_summaries(scores: Mapping[str, Scores], budget_runs: Mapping[int, str]) -> dict[int, dict[str, Any]]:
    """Each budget's summary on the questions every budget run was asked (the sweep's own k reads
    more questions as the headline run: it is compared on the sweep's)."""
    asked = [{s.question_id for s in scores[r][0]} for r in budget_runs.values()]
    common = [s for s in scores[budget_runs[min(budget_runs)]][0] if all(s.question_id in a for a in asked)]
    return {k: on_questions(scores[r][0], common) for k, r in budget_runs.items()}


def mmr2_tables(scores: Mapping[str, Scores], budget_runs: Mapping[int, str],
                judge: str) -> dict[str, pd.DataFrame]:
    """The paper's training, ablation, budget and process tables, ours beside theirs."""
    return {"training": tables.training_table({v: by_split(scores[s][0]) for v, s in VARIANTS.items()}),
            "ablation": tables.ablation_table({row: scores[s][1] for row, s in ABLATION_ROWS.items()}),
            "budget": tables.budget_table(budget_summaries(scores, budget_runs)),
            "process": tables.process_table({v: scores[s][1] for v, s in VARIANTS.items()}, judge=judge)}


def process_figure(process: pd.DataFrame) -> Any:
    """The process-level fractions per policy, and the sparsity (tokens per summary) beside."""
    fig, axes = new_figure(1, 2, figsize=(13, 3.8), gridspec_kw={"width_ratios": [4, 1]})

    def numeric(df: pd.DataFrame) -> pd.DataFrame:
        return df.set_index("metric").apply(pd.to_numeric, errors="coerce")

    frac = numeric(process[~process.metric.str.startswith("sparsity")])
    frac.plot.bar(ax=axes[0], rot=0)
    axes[0].set_ylim(0, 1.05)
    axes[0].set_title("process-level metrics (fractions)")
    axes[0].tick_params(axis="x", labelsize=8)
    spars = numeric(process[process.metric.str.startswith("sparsity")])
    spars.plot.bar(ax=axes[1], rot=0, legend=False)
    axes[1].set_title("sparsity (tokens / summary)")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- the Wikipedia part
def text_corpus_part(grpo: Any, base_llm: Any, cfg: TwoAxisEval, train: Mmr2Train, models: Models,
                     base: Base, judge: Judge, cost: dict[str, float],
                     view: View = PAPER_VIEW, stamp: str | None = None) -> dict[str, dict[str, Any]]:
    """The SFT+GRPO policy, unchanged, on real Wikipedia questions over the Wikipedia map (units
    never seen in training), beside the flat baseline: system -> summary ({} when skipped)."""
    if not (cfg.text_questions and (DATA / "knowledge_map" / cfg.text_corpus).exists()):
        return {}
    wmap, wenc = KnowledgeMap.open(DATA / "knowledge_map" / cfg.text_corpus,
                                   allow_network=base.allow_network, device=base.device)
    wunits = wmap.unit_map()
    wq_all = load_question_set(DATA / cfg.text_corpus, cfg.text_question_set, "two_axis_eval.text_question_set")
    wq = sampling.seeded_sample([q for q in wq_all if q.split == "test"
                                 and any(p in wmap.pid_index for p in q.gold_passages)],
                                cfg.text_questions, base.seed)
    if not wq:
        return {}
    w_int = bind_questions(wq, DATA / cfg.text_corpus, spacy=models.spacy, clip_path=models.clip,
                           allow_network=base.allow_network)
    systems = [MMR2Agent("mmr2_grpo", grpo, wmap, wenc, k=cfg.k, budget=train.budget,
                         max_turns=cfg.max_turns, max_new_tokens=cfg.max_new_tokens,
                         intents=by_id(wq, w_int), view=view),
               FlatDense(base_llm, wmap, wenc, k=cfg.k)]
    w_runs = {system.name: answer_and_save(system, wq, cfg.text_question_set, cost, stamp) for system in systems}
    summaries = {}
    for name, traces in w_runs.items():
        s = score(traces, wq, cfg, wunits, judge, name)[1]
        s.update(system=name, question_set=cfg.text_question_set)
        summaries[name] = s
    return summaries


# --------------------------------------------------------------------------- every system
def question_file(qset: str, cfg: TwoAxisEval) -> Path | None:
    """The question file of a set, in the world or the text corpus (None: neither has it)."""
    for corpus in (cfg.corpus, cfg.text_corpus):
        f = question_path(DATA / corpus, qset)
        if f.exists():
            return f
    return None


def other_traces(cfg: TwoAxisEval) -> dict[str, dict[str, list[Trace]]]:
    """question set -> "<stage>:<system>" -> traces, from the trace folders of ``trace_stages``."""
    found: dict[str, dict[str, list[Trace]]] = {}
    for stage in cfg.trace_stages:
        for f in sorted((DATA / stage / "traces").glob("*.jsonl")):
            system, qset = trace_name(f)
            if question_file(qset, cfg) is None:
                print(f"skipped {f.relative_to(ROOT)}: no question file for set '{qset}'")
                continue
            found.setdefault(qset, {})[f"{stage}:{system}"] = load_traces(f)
    missing = [s for s in cfg.trace_stages if not (DATA / s / "traces").exists()]
    if missing:
        print("no traces yet from:", ", ".join(missing))
    return found


def cross_system(found: Mapping[str, Mapping[str, list[Trace]]], flat: FlatDense,
                 cfg: TwoAxisEval, seed: int, units: Mapping[str, str], judge: Judge,
                 stamp: str | None = None) -> list[dict[str, Any]]:
    """Per question set: every system and the flat baseline, scored on a seeded sample of the
    questions all of them traced (so the rows of one set are comparable)."""
    cross = []
    for qset, systems in sorted(found.items()):
        qs_all = {q.id: q for q in load_questions(question_file(qset, cfg))}
        traced = sorted(set.intersection(*[{t.question_id for t in ts} for ts in systems.values()]))
        qs = sampling.seeded_sample([qs_all[i] for i in traced if i in qs_all], cfg.cross_per_set, seed)
        if not qs:
            continue
        ids = {q.id for q in qs}
        flat_traces, _ = answer(flat, qs, qset, stamp)
        write_traces(STAGE, flat.name, qset, flat_traces)
        for name, traces in {**systems, f"baseline:{flat.name}": flat_traces}.items():
            s = score([t for t in traces if t.question_id in ids], qs, cfg, units, judge, name)[1]
            s.update(system=name, question_set=qset)
            cross.append(s)
    return cross


def cross_figure(cross: pd.DataFrame) -> Any:
    """Accuracy against tokens per question, one point per system and set."""
    import seaborn as sns

    if len(cross):
        fig, ax = new_figure(figsize=(8, 4.2))
        sns.scatterplot(data=cross, x="tokens_per_q", y="accuracy", hue="system", style="question_set",
                        s=120, ax=ax)
        ax.set_xscale("symlog")
        ax.set_title("accuracy vs tokens per question (each point: one system on one set)")
        ax.legend(fontsize=7, bbox_to_anchor=(1.02, 1), loc="upper left")
        fig.tight_layout()
    else:
        fig, ax = new_figure(figsize=(4, 2))
        ax.text(0.5, 0.5, "no cross-system traces yet", ha="center")
        ax.axis("off")
    return fig


# --------------------------------------------------------------------------- what we see
def effects(scores: Mapping[str, Scores], budget_runs: Mapping[int, str]) -> list[tuple[str, bool]]:
    """Each of the paper's effects, and whether our measurement shows it (by direction)."""
    ov = {v: by_split(scores[s][0])["overall"] for v, s in VARIANTS.items()}
    acc = {v: ov[v]["accuracy"] for v in ov}
    checks = [
        ("SFT beats the zero-shot base", acc["SFT"] > acc["base (zero-shot)"]),
        ("GRPO beats SFT", acc["SFT+GRPO"] > acc["SFT"]),
        ("KM routing beats flat retrieval (single shot)",
         scores["ablation_km"][1]["accuracy"] > scores["ablation_flat"][1]["accuracy"]),
        ("intent binding on top of KM routing helps (single shot)",
         scores["ablation_intent_km"][1]["accuracy"] > scores["ablation_km"][1]["accuracy"]),
        ("the agent loop beats single-shot routing",
         scores["mmr2_grpo"][1]["accuracy"] > scores["ablation_intent_km"][1]["accuracy"]),
        ("training raises Route Recall@1",
         (ov["SFT+GRPO"]["route_recall@1"] or 0) > (ov["base (zero-shot)"]["route_recall@1"] or 0)),
    ]
    if all(r in scores for r in ablation.LADDER):
        a = {r: scores[r][1]["accuracy"] for r in ablation.LADDER}
        checks += [("KM routing beats flat retrieval (one-factor rows)", a["row_km"] > a["row_flat"]),
                   ("intent binding on top of KM routing helps (one-factor rows)", a["row_intent_km"] > a["row_km"]),
                   ("the agent loop beats one search (one-factor rows)", a["row_full"] > a["row_intent_km"])]
    if len(budget_runs) > 1:
        ks, by_k = sorted(budget_runs), budget_summaries(scores, budget_runs)
        checks.append(("more passages per search help", by_k[ks[-1]]["accuracy"] > by_k[ks[0]]["accuracy"]))
    return checks


def strip(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A summary without its timings (metrics.json must be byte-identical on a rerun)."""
    return {k: v for k, v in summary.items() if k != "cost"}


def stage_metrics(judge: str, questions: Sequence[Question], scores: Mapping[str, Scores],
                  fid: Mapping[str, dict], text_summaries: Mapping[str, dict],
                  cross: Sequence[dict[str, Any]], checks: Sequence[tuple[str, bool]]) -> dict[str, Any]:
    """Everything metrics.json records (no timings)."""
    return {
        "judge": judge,
        "questions": len(questions),
        "mmr2": {name: strip(s) for name, (_, s) in sorted(scores.items())},
        "training_table": {v: {sp: by_split(scores[s][0])[sp]["accuracy"] for sp in TRAINING_SPLITS}
                           for v, s in VARIANTS.items()},
        # [low, high, n] of each training-table cell (95 %, Wilson)
        "training_ci": {v: {sp: by_split(scores[s][0])[sp]["ci"].get("accuracy") for sp in TRAINING_SPLITS}
                        for v, s in VARIANTS.items()},
        "fidelity": dict(fid),
        "text_corpus": {n: strip(s) for n, s in text_summaries.items()},
        "cross_system": [strip(s) for s in cross],
        "effects": {c: bool(ok) for c, ok in checks},
    }


# --------------------------------------------------------------------------- the stage
def run(params: Params) -> TwoAxisEvalResult:
    """Run MM-R2 in every configuration, the baselines, and score every system's traces."""
    import seaborn as sns

    cfg, train, base = params.two_axis_eval, params.mmr2_train, params.base
    data_dir, out_dir = stage_dirs(STAGE)
    sns.set_theme(style="whitegrid")
    policies = read_json(DATA / "mmr2_train" / "policies.json")
    view = View(**policies["view"]) if "view" in policies else PAPER_VIEW  # what the policies were trained on
    cost: dict[str, float] = {}

    corpus_dir = DATA / cfg.corpus
    kmap, encoder = KnowledgeMap.open(DATA / "knowledge_map" / cfg.corpus,
                                      allow_network=base.allow_network, device=base.device)
    units = kmap.unit_map()
    all_qs = load_question_set(corpus_dir, cfg.question_set, "two_axis_eval.question_set")
    questions, claim_qs = claim_sample(all_qs, cfg, base.seed)
    bound = by_id(claim_qs, bind_questions(claim_qs, corpus_dir, spacy=params.models.spacy,
                                           clip_path=params.models.clip, allow_network=base.allow_network))
    intents = [bound[q.id] for q in questions]
    main_ids = {q.id for q in questions}
    extra = [q for q in claim_qs if q.id not in main_ids]
    print(f"{len(questions)} questions: "
          + ", ".join(f"{s} {sum(q.split == s for q in questions)}" for s in cfg.splits)
          + f"; the agentic-loop claim's pair reads {len(extra)} more ({len(claim_qs)} in all)")
    # the process table's judge (an LLM by default, on judge_questions of the sample) and its
    # agreement with labels known by construction; every other run gets the lexical proxy
    lexical = LexicalJudge()
    process_judge, agreement = judges(cfg, base, params.inference, all_qs, kmap, questions)
    judge = process_judge
    print("judge:", judge.name)

    # finished runs are kept under data/.checkpoints/two_axis_eval: a rerun after an interruption
    # (or after a change none of them depends on, such as the judge) reads them back
    stamp = runs_fingerprint(params, view)
    llms, runs = mmr2_runs(lambda policy: load_policy(policies, policy, cfg, base, params.inference), kmap, encoder,
                           questions, intents, cfg, train, cost, view, stamp)
    loop_claim_runs(llms["grpo"], kmap, encoder, runs, extra, [bound[q.id] for q in extra], cfg, train, cost, view,
                    stamp)
    ablation_runs(llms["grpo"], kmap, encoder, questions, intents, runs, cfg, train, cost, view, stamp)
    scores = {name: score(traces, asked(traces, questions), cfg, units,
                          judge if name in VARIANTS.values() else lexical, name)
              for name, traces in runs.items()}
    fid = (fidelity_scores(llms, runs, questions, scores, cfg.fidelity_min_correct, cfg.question_set)
           if cfg.fidelity else {})

    budget_runs = {k: ("mmr2_grpo" if k == cfg.k else f"mmr2_grpo_top{k}") for k in sorted({*cfg.budgets, cfg.k})}
    result_tables = mmr2_tables(scores, budget_runs, judge.name)
    if fid:
        result_tables["fidelity"] = pd.DataFrame(fid).T
    figures = {"process": process_figure(result_tables["process"])}
    save_figure(figures["process"], out_dir / "process.png", dpi=100)

    result_tables["reader_ceiling"] = ceiling_table(scores)
    result_tables["ablation_rows"] = pd.DataFrame(ablation_configs(cfg, train, view)).T
    result_tables["before_after"] = before_after(scores)
    loop = loop_metrics(runs, scores)
    result_tables["loop"] = loop_table(loop)
    if agreement:
        result_tables["judge_agreement"] = pd.DataFrame([{k: v for k, v in a.items() if k != "by_case"}
                                                         for a in agreement.values()])
    text_summaries = text_corpus_part(llms["grpo"], llms["base"], cfg, train, params.models, base, lexical,
                                      cost, view, stamp)
    if text_summaries:
        result_tables["text_corpus"] = tables.cross_system_table(list(text_summaries.values()), ci=True)

    found = other_traces(cfg)
    found.setdefault(cfg.question_set, {})["mmr2:sft+grpo"] = runs["mmr2_grpo"]
    cross = cross_system(found, FlatDense(llms["base"], kmap, encoder, k=cfg.k), cfg, base.seed,
                         units, lexical, stamp)
    result_tables["cross_system"] = tables.cross_system_table(cross, ci=True)
    figures["cross_system"] = cross_figure(tables.cross_system_table(cross))
    save_figure(figures["cross_system"], out_dir / "cross_system.png", dpi=100)

    checks = effects(scores, budget_runs)
    result_tables["effects"] = pd.DataFrame([{"paper's effect": c, "same direction here (no test: see "
                                              "50_report's claims)": bool(ok)} for c, ok in checks])
    metrics = stage_metrics(judge.name, questions, scores, fid, text_summaries, cross, checks)
    metrics.update(judge_other_runs=lexical.name, judge_agreement=agreement,
                   reader_ceiling=ceiling_metrics(scores),
                   ablation_rows={"router": cfg.ablation_router, "configs": ablation_configs(cfg, train, view)},
                   before_after=records(result_tables["before_after"]), loop=loop)
    write_json(out_dir / "metrics.json", metrics)
    write_json(data_dir / "cost.json", {"seconds_per_run": cost, "tokens": token_counts(runs, llms),
                                        "seconds_per_q": {s.get("system") + "__" + s.get("question_set"):
                                                          s["cost"]["seconds_per_q"] for s in cross}})
    return TwoAxisEvalResult(
        metrics=metrics, tables=result_tables, figures=figures,
        artifacts={"traces": data_dir / "traces", "cost": data_dir / "cost.json",
                   "metrics": out_dir / "metrics.json", "process.png": out_dir / "process.png",
                   "cross_system.png": out_dir / "cross_system.png"},
        questions=questions, runs=runs, scores=scores, judge=judge.name, cost=cost)
