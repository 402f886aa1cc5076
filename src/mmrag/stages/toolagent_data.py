"""Stage ``toolagent_data``: each strategy's own teacher dialogues (DnC, mm-ReAct) to fine-tune on.

The paper's teacher (``teacher: llm``, the default) is an LLM with few shots running each
strategy's real loop with the tools, its dialogues kept when they reach the gold answer (answered by
the teacher itself, with no repeated call: :func:`mmrag.toolagent.teacher.llm_teacher`): here
the strongest ladder model that runs on 2 cores (``teacher_model``), on ``teacher_questions``
kind-balanced train questions per strategy (the time budget). The scripted teachers
(:mod:`mmrag.toolagent.teacher`) write the dialogues of the other questions, and every one in
``teacher: programmatic`` (the smoke profile: its only ladder model, SmolLM2-135M, keeps
almost no dialogue). DnC's scripted teacher asks one sub-question per turn (Table 1), from the
gold decomposition; mm-ReAct's never reads the decomposition. Both teachers are compared on the
questions the LLM attempted (kept share, tool calls, tools used: ``teacher_comparison``).
Writes data/toolagent_data/{dialogues.jsonl,summary.json,llm_teacher.jsonl},
results/toolagent_data/{metrics.json,dialogues.png}.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmrag.io import DATA, save_figure, stage_dirs, write_json, write_jsonl
from mmrag.models.params import Inference, Models
from mmrag.params import Base, ConfigError, Sections
from mmrag.schema import Question, Trace, load_question_set
from mmrag.stages import StageResult, new_figure
from mmrag.toolagent import teacher
from mmrag.toolagent.params import ToolagentData
from mmrag.toolagent.strategies import render_dialogue

STAGE = "toolagent_data"


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    inference: Inference
    models: Models
    toolagent_data: ToolagentData


@dataclass
class ToolagentDataResult(StageResult):
    """The dialogues and the stage's tables; ``examples`` is the rendered sample of dialogues."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    examples: str = ""
    llm_checks: list[dict[str, Any]] = field(default_factory=list)  # the LLM teacher's gold check


def overview_table(questions: dict[str, list[Question]]) -> Any:
    """Questions per kind and split (counted by their hops), to see what the teacher gets."""
    import pandas as pd

    overview = pd.DataFrame([{"set": n, "split": q.split, "kind": q.kind, "hops": len(q.decomposition)}
                             for n, qs in questions.items() for q in qs])
    return overview.pivot_table(index="kind", columns="split", values="hops", aggfunc="count",
                                fill_value=0)


def multi_hop_shares(questions: dict[str, list[Question]]) -> dict[str, dict[str, float]]:
    """Share of questions with more than one gold hop, per question set and split."""
    out: dict[str, dict[str, float]] = {}
    for name, qs in questions.items():
        for split in sorted({q.split for q in qs}):
            sel = [q for q in qs if q.split == split]
            out.setdefault(name, {})[split] = round(sum(len(q.decomposition) > 1 for q in sel) / len(sel), 4)
    return out


def target_multi_hop_share(questions: dict[str, list[Question]], split: str = "test") -> float | None:
    """The multi-hop share of the test split of the sets that have multi-hop questions (the
    multi-hop benchmark, not the conversational one): what the training sample should match."""
    multi = [qs for qs in questions.values() if any(len(q.decomposition) > 1 for q in qs)]
    sel = [q for qs in multi for q in qs if q.split == split]
    return round(sum(len(q.decomposition) > 1 for q in sel) / len(sel), 4) if sel else None


def build_tools(models: Models, base: Base, corpus_dir: Path) -> dict[str, Any]:
    """The four tools over the corpus, as the evaluation builds them (text encoder, CLIP of params)."""
    from mmrag.io import read_jsonl
    from mmrag.models.clip import load_clip
    from mmrag.models.registry import load_text_encoder
    from mmrag.schema import load_documents
    from mmrag.toolagent.tools import build_tools as build
    from mmrag.toolagent.tools import world_maps
    from mmrag.world import render

    types, names, groups = world_maps(read_jsonl(corpus_dir / "entities.jsonl"))
    return build(load_documents(corpus_dir),
                 load_text_encoder(models.text_encoder, allow_network=base.allow_network, device="cpu"),
                 types, clip=load_clip(models.clip, allow_network=base.allow_network),
                 load_image=lambda p: str(corpus_dir / p), attributes=render.ATTRIBUTES,
                 prompts=render.prompts, entity_names=names, groups=groups)


def gold_check(answer: str, q: Question) -> bool:
    """The teachers' filter: the dialogue's answer is an exact match of a gold answer."""
    from mmrag.evaluate.metrics import exact_match, golds

    return exact_match(answer, golds(q)) == 1.0


def llm_sample(train: Sequence[Question], n: int, seed: int) -> list[Question]:
    """A kind-balanced seeded sample of the train questions the LLM teacher attempts."""
    from mmrag.sampling import round_robin

    return round_robin([q for q in train if q.decomposition], n, seed, by=lambda q: q.kind)


def llm_teacher_rows(params: Params, tools: dict[str, Any], questions: Sequence[Question],
                     rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The paper's teacher: an LLM with few-shot examples runs each strategy's real loop with the
    tools; (kept rows, one gold-check row per question and strategy)."""
    from mmrag.models.generation import engine_settings, load_chat

    base, cfg = params.base, params.toolagent_data
    if cfg.engine == "openai" and not cfg.teacher_base_url:
        raise ConfigError("toolagent_data.engine = openai needs teacher_base_url (an "
                                 "OpenAI-compatible server), e.g. in the paper profile.")
    llm = load_chat(cfg.teacher_model, engine=cfg.engine, settings=engine_settings(params.inference),
                    allow_network=base.allow_network, device=base.device,
                    base_url=cfg.teacher_base_url or None)
    kept, checks = [], []
    try:
        for strategy in ("dnc", "react"):
            shots = teacher.few_shot([r for r in rows if r["split"] == "train"], cfg.teacher_shots, strategy,
                                     exclude=[q.id for q in questions])
            got, check = teacher.llm_teacher(questions, llm, tools, shots, gold_check,
                                             max_calls=cfg.max_tool_calls, strategy=strategy,
                                             max_new_tokens=cfg.teacher_max_new_tokens,
                                             name=f"llm:{cfg.teacher_model}")
            kept += got
            checks += check
            print(f"LLM teacher ({cfg.teacher_model}, {strategy}): {len(got)} of {len(check)} "
                  f"dialogues pass the gold check")
    finally:
        if hasattr(llm, "close"):
            llm.close()
    return kept, checks


def records(table: Any) -> list[dict[str, Any]]:
    """A table's rows as plain dicts for metrics.json (floats to 4 digits, NaN as null)."""
    return [{k: (None if v != v else round(v, 4)) if isinstance(v, float) else v for k, v in r.items()}
            for r in table.to_dict(orient="records")]


def llm_check_table(checks: Sequence[dict[str, Any]]) -> Any:
    """The LLM teacher's gold check per strategy and hops: attempted, kept, format errors."""
    import pandas as pd

    if not checks:
        return pd.DataFrame(columns=["strategy", "hops", "attempted", "kept", "kept_share", "format_errors"])
    d = pd.DataFrame(checks)
    t = d.groupby(["strategy", "hops"]).agg(attempted=("kept", "size"), kept=("kept", "sum"),
                                            format_errors=("format_errors", "mean")).reset_index()
    t["kept_share"] = (t.kept / t.attempted).round(3)
    return t


def dialogue_stats(rows: Sequence[dict[str, Any]]) -> Any:
    """One row per dialogue: strategy, set, kind, hops, turns and length in words."""
    import pandas as pd

    return pd.DataFrame([{"strategy": r["strategy"], "set": r["dataset"], "kind": r["kind"],
                          "split": r.get("split", "train"), "teacher": r.get("teacher", "programmatic"),
                          "hops": r["hops"], "turns": len(r["messages"]),
                          "words": sum(len(m["content"].split()) for m in r["messages"])}
                         for r in rows])


def stats_table(stats: Any) -> Any:
    """Dialogues, mean hops, turns and words per strategy and question set."""
    return stats.groupby(["split", "strategy", "teacher", "set"]).agg(dialogues=("hops", "size"),
                                                  mean_hops=("hops", "mean"),
                                                  mean_turns=("turns", "mean"),
                                                  mean_words=("words", "mean")).round(2)


def dnc_per_kind(stats: Any) -> Any:
    """DnC dialogues per question type, smallest first (the figure's left panel)."""
    return stats[(stats.strategy == "dnc") & (stats.split == "train")].groupby("kind").size().sort_values()


def dialogues_figure(stats: Any, by_kind: Any) -> Any:
    """DnC dialogues per question type, and the dialogue length by strategy."""
    import seaborn as sns

    fig, axes = new_figure(1, 2, figsize=(12, 4.5))
    by_kind.plot.barh(ax=axes[0], color="#4c72b0")
    axes[0].set_title("DnC teacher dialogues per question type (train)")
    sns.histplot(stats, x="words", hue="strategy", bins=30, ax=axes[1])
    axes[1].set_title("dialogue length (words)")
    fig.tight_layout()
    return fig


def example_dialogues(rows: Sequence[dict[str, Any]], n: int) -> str:
    """Both dialogues of the first question of up to ``n`` kinds, rendered as they are trained."""
    kinds_seen, shown = set(), []
    for r in rows:
        if r["strategy"] == "dnc" and r["kind"] not in kinds_seen and r["hops"] >= 1:
            kinds_seen.add(r["kind"])
            shown.append(r["question_id"])
        if len(shown) >= n:
            break
    out = []
    for qid in shown:
        for r in rows:
            if r["question_id"] == qid:
                trace = Trace(question_id=qid, system=r["strategy"], answer="",
                              meta={"dialogue": r["messages"]})
                out.append(f"--- {r['strategy']} · {r['kind']} · {qid}\n"
                           + render_dialogue(trace).rsplit("\n", 1)[0] + "\n")
    return "\n".join(out)


def stage_metrics(train: Sequence[Question], stats: Any, skipped: dict[str, int], by_kind: Any,
                  teacher_name: str, shares: dict[str, dict[str, float]], target: float | None,
                  checks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """results/toolagent_data/metrics.json: dialogue counts, skips, hops, lengths and shares."""
    tr = stats[stats.split == "train"]
    out = {
        "train_questions": len(train),
        "dialogues": {s: int((tr.strategy == s).sum()) for s in sorted(stats.strategy.unique())},
        "dev_dialogues": {s: int(((stats.split == "dev") & (stats.strategy == s)).sum())
                          for s in sorted(stats.strategy.unique())},
        "skipped": dict(sorted(skipped.items())),
        "per_kind": {k: int(v) for k, v in sorted(by_kind.items())},
        "mean_hops": round(float(tr[tr.strategy == "dnc"].hops.mean()), 4),
        "mean_words": {s: round(float(tr[tr.strategy == s].words.mean()), 2)
                       for s in sorted(stats.strategy.unique())},
        "multi_hop_share": shares,
        "multi_hop_share_train_dialogues": round(float((tr[tr.strategy == "dnc"].hops > 1).mean()), 4),
        "target_multi_hop_share": target,
        "teacher": teacher_name,
    }
    if checks:
        out["llm_teacher"] = {s: {"attempted": sum(c["strategy"] == s for c in checks),
                                  "kept": sum(c["kept"] for c in checks if c["strategy"] == s)}
                              for s in sorted({c["strategy"] for c in checks})}
    return out


def run(params: Params) -> ToolagentDataResult:
    """Each strategy's teacher dialogues for every usable train (and dev) question, with statistics."""
    import seaborn as sns

    base, cfg = params.base, params.toolagent_data
    data_dir, out_dir = stage_dirs(STAGE)
    corpus_dir = DATA / cfg.corpus
    sns.set_theme(style="whitegrid")

    questions = {name: load_question_set(corpus_dir, name, "toolagent_data.question_sets")
                 for name in cfg.question_sets}
    train = [q for qs in questions.values() for q in qs if q.split == "train"]
    dev = [q for qs in questions.values() for q in qs if q.split == "dev"]
    tools = build_tools(params.models, base, corpus_dir)  # mm-ReAct's scripted teacher and the LLM's
    tool_obs = teacher.tool_observer(tools, cfg.max_tool_calls)
    scripted_checks: list[dict[str, Any]] = []
    rows, skipped = teacher.programmatic(train + dev, seed=base.seed, max_calls=cfg.max_tool_calls,
                                         correct=gold_check,
                                         observer=tool_obs if cfg.observations == "tools" else None,
                                         react_observer=tool_obs, checks=scripted_checks)
    checks: list[dict[str, Any]] = []
    compared = teacher.comparison([])
    if cfg.teacher != "programmatic":
        attempted = llm_sample(train, cfg.teacher_questions, base.seed)
        llm_rows, checks = llm_teacher_rows(params, tools, attempted, rows)
        # wall time stays out of the stage's data: a rerun with the same seed writes the same bytes
        write_jsonl(data_dir / "llm_teacher.jsonl", [{k: v for k, v in c.items() if k != "seconds"} for c in checks])
        ids = {q.id for q in attempted}
        compared = teacher.comparison([c for c in scripted_checks if c["question_id"] in ids] + checks)
        if cfg.teacher == "llm":  # the attempted questions get the LLM's kept dialogues only
            rows = [r for r in rows if r["question_id"] not in ids or r["split"] != "train"]
        rows = rows + llm_rows
    print(f"{len(rows)} dialogues from {len(train)} train and {len(dev)} dev questions; skipped: {skipped}")

    stats = dialogue_stats(rows)
    by_kind = dnc_per_kind(stats)
    fig = dialogues_figure(stats, by_kind)
    save_figure(fig, out_dir / "dialogues.png", dpi=110)

    shares = multi_hop_shares(questions)
    target = target_multi_hop_share(questions)
    write_jsonl(data_dir / "dialogues.jsonl", rows)
    write_json(data_dir / "summary.json", {"target_multi_hop_share": target, "multi_hop_share": shares})
    metrics = stage_metrics(train, stats, skipped, by_kind, cfg.teacher, shares, target, checks)
    metrics["teacher_comparison"] = records(compared)
    write_json(out_dir / "metrics.json", metrics)
    return ToolagentDataResult(
        metrics=metrics,
        tables={"overview": overview_table(questions), "stats": stats_table(stats),
                "llm_teacher": llm_check_table(checks), "teacher_comparison": compared},
        figures={"dialogues": fig},
        artifacts={"dialogues": data_dir / "dialogues.jsonl", "metrics": out_dir / "metrics.json",
                   "figure": out_dir / "dialogues.png"},
        rows=rows, examples=example_dialogues(rows, cfg.examples_shown), llm_checks=checks)
