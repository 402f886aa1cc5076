"""Stage `mmr2_traj`: MM-R2-Traj, executed teacher trajectories for supervised fine-tuning.

For each training (image, question): Φ binds the intent (:mod:`mmrag.mmr2.intent`), a
programmatic teacher that knows the gold unit writes the assistant turns in the paper's format,
every search is executed on the KnowledgeMap's per-unit indexes, and the paper's filters remove
failed trajectories. The stage also feeds malformed turns to the environment (parser
robustness) and runs the untrained chat model through the same loop (zero-shot baselines,
whose traces go to the evaluator). Timings are returned, never written to metrics.json.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mmrag.io import DATA, ROOT, save_figure, stage_dirs, write_json, write_jsonl, write_traces
from mmrag.mmr2 import agent, trajectories
from mmrag.mmr2 import intent as intent_binding
from mmrag.mmr2.knowledge_map import KnowledgeMap
from mmrag.mmr2.params import Mmr2Train, Mmr2Traj
from mmrag.mmr2.trajectories import Trajectory
from mmrag.models.params import Inference, Models
from mmrag.params import Base, Sections
from mmrag.sampling import seeded_order
from mmrag.schema import Question, load_question_set
from mmrag.stages import StageResult, new_figure

STAT_ROWS = ("trajectories", "two_or_three_steps", "multi_step_share", "miss_then_hit", "mean_tokens", "train",
             "val", "wrong_first_route", "max_tokens")
ZERO_SHOT_SYSTEMS = (("zeroshot_routed", "routed"), ("zeroshot_flat", "flat"), ("parametric", "parametric"))


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    inference: Inference
    models: Models
    mmr2_train: Mmr2Train
    mmr2_traj: Mmr2Traj


@dataclass
class Mmr2TrajResult(StageResult):
    """Besides tables and figures: the sample trajectories and zero-shot turn the notebook prints."""

    samples: list[str] = field(default_factory=list)  # one direct, one wrong-first trajectory
    zero_shot_example: str | None = None  # the first turn of the last zero-shot system
    timings: dict[str, float] = field(default_factory=dict)  # seconds: shown, never in metrics
    units_compact: str = ""


@dataclass
class Synthesis:
    """Executed trajectories before and after the filters."""

    raw: list[Trajectory]
    no_gold: int
    rewritten: int
    kept: list[Trajectory]
    removed: dict[str, int]
    examples: list[dict[str, str]]


def question_splits(questions: list[Question], seed: int, max_questions: int,
                    ) -> tuple[list[Question], list[Question]]:
    """(training questions, dev questions) with gold passages, each in seeded order; the
    training ones cut to ``max_questions``."""
    train = seeded_order([q for q in questions if q.split == "train" and q.gold_passages], seed)
    dev = seeded_order([q for q in questions if q.split == "dev" and q.gold_passages], seed)
    return train[:max_questions], dev


def binding_table(questions: list[Question], intents: list[intent_binding.Intent], n: int = 8) -> pd.DataFrame:
    """Φ's output beside the gold entity for the first ``n`` questions."""
    return pd.DataFrame([{"question": q.text, "image (as CLIP reads it)": x.image_text, "need": x.need,
                          "referent": x.referent, "gold": q.gold_entity,
                          "match": x.referent_id == q.gold_entity, "constraints": x.constraints}
                         for q, x in zip(questions[:n], intents[:n])])


def view(section: Mmr2Traj) -> agent.View:
    """What the agent reads (data/mmr2_traj/view.json: the policy is trained and evaluated on it)."""
    return agent.View(passage_chars=section.passage_chars, unit_descriptions=section.unit_descriptions)


def load_teacher(section: Mmr2Traj, base: Base, inference: Inference) -> Any:
    """The LLM that rewrites the thoughts: an OpenAI-compatible server, or a local model on the
    stage's engine."""
    from mmrag.models.generation import engine_settings, load_chat

    return load_chat(section.teacher, engine="openai" if section.teacher_base_url else section.engine,
                     settings=engine_settings(inference), allow_network=base.allow_network,
                     device=base.device, base_url=section.teacher_base_url or None)


def synthesize_all(questions: list[Question], intents: list[intent_binding.Intent], kmap: KnowledgeMap,
                   encoder: Any, section: Mmr2Traj, base: Base,
                   inference: Inference) -> Synthesis:
    """One executed teacher trajectory per question (a seeded draw each for wrong-first; a seeded sample of
    miss_then_hit_frac of the questions first misses, then hits), the
    optional LLM rewrite of the thoughts, then the filters."""
    rng = random.Random(base.seed)
    raw, no_gold = [], 0
    miss = trajectories.miss_then_hit_ids(questions, section.miss_then_hit_frac, base.seed)
    for q, x in zip(questions, intents):
        env = agent.RetrievalEnv(kmap, encoder, k=section.k, budget=section.budget, view=view(section))
        traj = trajectories.synthesize(q, env, kmap, encoder, rng,
                                       wrong_first=rng.random() < section.wrong_route_frac,
                                       image_text=x.image_text, intent=x, miss_first=q.id in miss)
        if traj is None:
            no_gold += 1
        else:
            traj.meta["referent_match"] = x.referent_id == q.gold_entity
            raw.append(traj)
    rewritten = 0
    if section.teacher != "programmatic":  # an LLM teacher rewrites the thoughts in its own words
        rewritten = trajectories.llm_rewrite_thinks(raw, load_teacher(section, base, inference))
        print(f"teacher {section.teacher}: {rewritten} thoughts rewritten")
    kept, removed, examples = trajectories.apply_filters(raw)
    return Synthesis(raw, no_gold, rewritten, kept, removed, examples)


def filter_table(synthesis: Synthesis) -> pd.DataFrame:
    """Removals per filter (each counted by the first filter that fires), then what was kept."""
    return pd.DataFrame([{"filter": k, "removed": v} for k, v in synthesis.removed.items()]
                        + [{"filter": "(no gold unit in the map)", "removed": synthesis.no_gold},
                           {"filter": "kept", "removed": len(synthesis.kept)}])


def split_trajectories(kept: list[Trajectory], val_frac: float, seed: int,
                       ) -> tuple[list[Trajectory], list[Trajectory]]:
    """(train, val) by a seeded hash of the question id."""
    train = [t for t in kept if trajectories.split_of(t.id, val_frac, seed) == "train"]
    val = [t for t in kept if trajectories.split_of(t.id, val_frac, seed) == "val"]
    return train, val


def statistics_table(stats: dict[str, Any]) -> pd.DataFrame:
    """Our statistics beside the paper's MM-R2-Traj."""
    return pd.DataFrame([{"statistic": k, "ours": stats[k],
                          "paper (MM-R2-Traj)": trajectories.PAPER_STATS.get(k, "")} for k in STAT_ROWS])


def statistics_figure(stats: dict[str, Any], tokens: list[int], tokenizer_llm: str) -> Any:
    """Searches per trajectory and trajectory length in tokens."""
    fig, axes = new_figure(1, 2, figsize=(11, 3.8))
    steps = stats["steps_distribution"]
    axes[0].bar(list(steps), list(steps.values()), color="steelblue")
    axes[0].set_xlabel("searches per trajectory")
    axes[0].set_ylabel("trajectories")
    axes[0].set_title("steps")
    axes[1].hist(tokens, bins=30, color="seagreen")
    axes[1].axvline(np.mean(tokens), color="k", ls="--", label=f"mean {np.mean(tokens):.0f}")
    axes[1].set_xlabel(f"tokens ({tokenizer_llm} chat template)")
    axes[1].legend()
    axes[1].set_title("length")
    fig.tight_layout()
    return fig


def format_trajectory(traj: Trajectory) -> str:
    """A trajectory as the notebook prints it (the system prompt left out)."""
    head = f"=== {traj.id} (searches {traj.meta['searches']}, routes {traj.meta['route_correct']})"
    return "\n".join([head, *(f"[{m['role']}] {m['content']}\n" for m in traj.messages[1:])])


def sample_trajectories(train: list[Trajectory]) -> list[str]:
    """One direct trajectory and one that routes wrong first, when there are such."""
    picks = (next((t for t in train if t.meta["wrong_first"] == want), None) for want in (False, True))
    return [format_trajectory(t) for t in picks if t]


def malformed_turns(unit: str) -> dict[str, str]:
    """Turns a policy might write, from well formed to broken in every way the parser forgives."""
    u = unit
    search = f'<search>[{{"retrieval_unit":{{"id":"{u}"}},"query":"x"}}]</search>'
    return {
        "well formed": f"<think>look it up</think>{search}",
        "unknown unit id": '<think>t</think><search>[{"retrieval_unit":{"id":"U99"},"query":"x"}]</search>',
        "loose unit id": f'<think>t</think><search>[{{"retrieval_unit":{{"id":"{u.lower()}"}},"query":"x"}}]</search>',
        "single quotes (not JSON)":
            f"<think>t</think><search>[{{'retrieval_unit': {{'id': '{u}'}}, 'query': 'x'}}]</search>",
        "truncated JSON": f'<think>t</think><search>[{{"retrieval_unit":{{"id":"{u}"}},"query":"x"</search>',
        "object not list": f'<think>t</think><search>{{"retrieval_unit":{{"id":"{u}"}},"query":"x"}}</search>',
        "missing think": "<answer>Paris</answer>",
        "unclosed tag": "<think>the answer is",
        "no action": "I think the answer might be Paris.",
        "search and answer": f"<think>t</think>{search}<answer>y</answer>",
        "writes its own information": f"<think>t</think>{search}<information>fake</information>",
        "empty": "",
    }


def parser_robustness(kmap: KnowledgeMap, encoder: Any, question: Question, k: int, budget: int,
                      view: agent.View) -> pd.DataFrame:
    """Each malformed turn fed to a fresh environment: what the parser made of it."""
    rows = []
    for name, text in malformed_turns(kmap.unit_ids[0]).items():
        env = agent.RetrievalEnv(kmap, encoder, k=k, budget=budget, view=view)
        env.reset(question)
        res = env.step(text)
        rows.append({"case": name, "action": res.step.action, "target": res.step.target,
                     "format error": res.format_error, "done": res.done,
                     "observation": (res.observation or "")[:90]})
    return pd.DataFrame(rows)


def zero_shot_row(system: str, traces: list[Any], questions: list[Question], seconds: float) -> dict[str, Any]:
    """Accuracy, format errors, searches and first-route recall of one zero-shot system."""
    acc = np.mean([trajectories.answer_matches(t.answer, q.answer, q.answer_aliases)
                   for t, q in zip(traces, questions)])
    recall = [agent.route_recall_at1(t) for t in traces]
    recall = [x for x in recall if x is not None]
    return {"system": system, "questions": len(traces), "accuracy": round(float(acc), 3),
            "format errors / question": round(np.mean([t.format_errors for t in traces]), 2),
            "searches / question": round(np.mean([t.tool_calls for t in traces]), 2),
            "route recall@1": round(float(np.mean(recall)), 3) if recall else None,
            "seconds": round(seconds, 1)}


def zero_shot(questions: list[Question], binder: intent_binding.QuestionBinder, kmap: KnowledgeMap,
              encoder: Any, section: Mmr2Traj, llm_name: str, base: Base,
              inference: Inference) -> tuple[list[dict[str, Any]], list[Any]]:
    """The untrained chat model as the agent: routed, flat and without retrieval; traces written
    for the evaluator. Returns the table rows and the last system's traces."""
    from mmrag.models.generation import engine_settings, load_chat

    llm = load_chat(llm_name, engine=section.engine, settings=engine_settings(inference),
                    allow_network=base.allow_network, device=base.device)
    intents = binder.bind(questions)
    rows, traces = [], []
    for system, mode in ZERO_SHOT_SYSTEMS:
        t0 = time.time()
        traces = agent.run_agent(llm, lambda: agent.RetrievalEnv(kmap if mode != "parametric" else None,
                                                                 encoder, mode=mode, k=section.k,
                                                                 budget=section.budget,
                                                                 view=view(section)),
                                 questions, system=system, image_texts=[x.image_text for x in intents],
                                 intents=intents, max_turns=section.budget + 2, max_new_tokens=96)
        write_traces("mmr2_traj", system, section.question_set, traces)
        rows.append(zero_shot_row(system, traces, questions, time.time() - t0))
    return rows, traces


def traj_metrics(section: Mmr2Traj, kmap: KnowledgeMap, n_questions: int, match: float,
                 clip_on: bool, synthesis: Synthesis, stats: dict[str, Any], robust: pd.DataFrame,
                 zero_shot_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Everything deterministic the stage measured (no timings)."""
    zs_metrics = {row["system"]: {k: v for k, v in row.items() if k not in ("system", "seconds")}
                  for row in zero_shot_rows}
    return {"corpus": section.corpus, "question_set": section.question_set, "units": len(kmap.units),
            "questions": n_questions, "referent_match": round(match, 4), "clip": clip_on,
            "oracle_referent": section.oracle_referent, "view": view(section).to_dict(),
            "synthesized": len(synthesis.raw), "no_gold_unit": synthesis.no_gold,
            "teacher_rewrites": synthesis.rewritten,
            "removed": synthesis.removed, "kept": len(synthesis.kept), **{f"stat_{k}": v for k, v in stats.items()},
            "multi_step_share": stats.get("multi_step_share"),
            "paper_multi_step_share": trajectories.PAPER_STATS["multi_step_share"],
            "miss_then_hit_frac": section.miss_then_hit_frac,
            "parser_cases": len(robust), "parser_cases_with_error": int(robust["format error"].notna().sum()),
            "zero_shot": zs_metrics}


def run(params: Params) -> Mmr2TrajResult:
    """Synthesize, execute, filter and split MM-R2-Traj; probe the parser; run zero-shot baselines."""
    import seaborn as sns
    from transformers import AutoTokenizer

    from mmrag.models.generation import hf_weights

    section, base = params.mmr2_traj, params.base
    data_dir, out_dir = stage_dirs("mmr2_traj")
    sns.set_theme(style="whitegrid")
    kmap, encoder = KnowledgeMap.open(DATA / "knowledge_map" / section.corpus,
                                      allow_network=base.allow_network, device=base.device)
    corpus_dir = DATA / section.corpus
    questions = load_question_set(corpus_dir, section.question_set, "mmr2_traj.question_set")
    train_qs, dev_qs = question_splits(questions, base.seed, section.max_questions)
    print(f"{len(kmap.units)} units in the {section.corpus} map; {len(train_qs)} training questions, "
          f"{len(dev_qs)} dev questions")

    binder = intent_binding.load_binder(corpus_dir, spacy=params.models.spacy, clip_path=params.models.clip,
                                        allow_network=base.allow_network,
                                        images=any(q.image_path for q in train_qs))
    t0 = time.time()
    phi = binder.bind(train_qs)
    bind_s = time.time() - t0
    match = intent_binding.referent_match_rate(phi, [q.gold_entity for q in train_qs])
    print(f"referent match rate vs gold entity: {match:.3f} ({len(binder.candidates)} candidate entities, "
          f"CLIP {'on' if binder.clip_on else 'off'})")
    # the intent the trajectories carry: Φ's own, or (oracle_referent) the gold entity's
    intents = binder.bind(train_qs, oracle=True) if section.oracle_referent else phi

    t0 = time.time()
    synthesis = synthesize_all(train_qs, intents, kmap, encoder, section, base, params.inference)
    synth_s = time.time() - t0

    train, val = split_trajectories(synthesis.kept, section.val_frac, base.seed)
    write_jsonl(data_dir / "train.jsonl", [t.to_dict() for t in train])
    write_jsonl(data_dir / "val.jsonl", [t.to_dict() for t in val])
    write_json(data_dir / "view.json", view(section).to_dict())  # mmr2_train hands it to the evaluation
    policy = params.mmr2_train.policy
    tokenizer = AutoTokenizer.from_pretrained(hf_weights(policy, allow_network=base.allow_network,
                                                         cache_dir=ROOT / params.inference.cache_dir))
    tokens = trajectories.token_counts([*train, *val], tokenizer)
    stats = trajectories.statistics(train, val, tokens)
    fig = statistics_figure(stats, tokens, policy)
    save_figure(fig, out_dir / "stats.png", dpi=100)

    robust = parser_robustness(kmap, encoder, dev_qs[0] if dev_qs else train_qs[0], section.k, section.budget,
                               view(section))

    tables = {"binding": binding_table(train_qs, phi), "filters": filter_table(synthesis),
              "filter_examples": pd.DataFrame(synthesis.examples[:12]), "statistics": statistics_table(stats),
              "parser": robust}
    zs_rows: list[dict[str, Any]] = []
    zero_shot_example = None
    zs_qs = dev_qs[: section.zero_shot_questions]
    if zs_qs:
        zs_rows, traces = zero_shot(zs_qs, binder, kmap, encoder, section, policy, base,
                                    params.inference)
        tables["zero_shot"] = pd.DataFrame(zs_rows)
        zero_shot_example = traces[0].steps[0].text if traces and traces[0].steps else ""

    metrics = traj_metrics(section, kmap, len(train_qs), match, binder.clip_on, synthesis, stats, robust,
                           zs_rows)
    write_json(out_dir / "metrics.json", metrics)
    return Mmr2TrajResult(
        metrics=metrics, tables=tables, figures={"stats": fig},
        artifacts={"train": data_dir / "train.jsonl", "val": data_dir / "val.jsonl", "view": data_dir / "view.json",
                   "stats": out_dir / "stats.png", "metrics": out_dir / "metrics.json"},
        samples=sample_trajectories(train), zero_shot_example=zero_shot_example,
        timings={"binding": bind_s, "synthesis": synth_s}, units_compact=kmap.compact(section.unit_descriptions))
