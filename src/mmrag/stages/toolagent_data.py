"""Stage ``toolagent_data``: the DnC and mm-ReAct teacher dialogues a divider is fine-tuned on.

The default teacher is programmatic (it walks each train question's gold decomposition, so
every dialogue is correct by construction); ``teacher: llm`` runs the real DnC loop with an
OpenAI-compatible LLM and few-shot examples, and keeps the dialogues that reach the gold answer.
Writes data/toolagent_data/dialogues.jsonl, results/toolagent_data/{metrics.json,dialogues.png}.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmrag import config
from mmrag.io import DATA, stage_dirs, write_json, write_jsonl
from mmrag.schema import Question, Trace, load_question_set
from mmrag.stages import StageResult, new_figure, save_figure
from mmrag.toolagent import teacher
from mmrag.toolagent.strategies import render_dialogue

STAGE = "toolagent_data"


@dataclass
class ToolagentDataResult(StageResult):
    """The dialogues and the stage's tables; ``examples`` is the rendered sample of dialogues."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    examples: str = ""


def overview_table(questions: dict[str, list[Question]]) -> Any:
    """Questions per kind and split (counted by their hops), to see what the teacher gets."""
    import pandas as pd

    overview = pd.DataFrame([{"set": n, "split": q.split, "kind": q.kind, "hops": len(q.decomposition)}
                             for n, qs in questions.items() for q in qs])
    return overview.pivot_table(index="kind", columns="split", values="hops", aggfunc="count",
                                fill_value=0)


def llm_teacher_rows(cfg: config.ToolagentData, models: config.Models, base: config.Base, corpus_dir: Path,
                     train: list[Question], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The paper's teacher: an LLM with few-shot examples runs the real DnC loop; kept if right.

    Returns its DnC dialogues plus the programmatic mm-ReAct dialogues of the same questions.
    """
    from mmrag.evaluate.metrics import exact_match, golds
    from mmrag.io import read_jsonl
    from mmrag.models.clip import load_clip
    from mmrag.models.llm import OpenAIChat
    from mmrag.models.registry import load_text_encoder
    from mmrag.schema import load_documents
    from mmrag.toolagent.tools import build_tools, world_maps
    from mmrag.world import render

    if not cfg.teacher_base_url:
        raise config.ConfigError("toolagent_data.teacher = llm needs teacher_base_url (an "
                                 "OpenAI-compatible server), e.g. in the paper profile.")
    chat = OpenAIChat(cfg.teacher_base_url, cfg.teacher_model, allow_network=base.allow_network)
    types, names, groups = world_maps(read_jsonl(corpus_dir / "entities.jsonl"))
    tools = build_tools(load_documents(corpus_dir),
                        load_text_encoder(models.text_encoder, allow_network=base.allow_network, device="cpu"),
                        types, clip=load_clip(models.clip, allow_network=base.allow_network),
                        load_image=lambda p: str(corpus_dir / p), attributes=render.ATTRIBUTES,
                        prompts=render.prompts, entity_names=names, groups=groups)
    shots = teacher.few_shot(rows, cfg.teacher_shots)
    llm_rows, attempted = teacher.llm_teacher(
        train, chat, tools, shots, lambda a, q: exact_match(a, golds(q)) == 1.0,
        max_calls=cfg.max_tool_calls)
    print(f"LLM teacher: kept {len(llm_rows)} of {attempted} dialogues (answer matches gold)")
    kept = {r["question_id"] for r in llm_rows}
    return llm_rows + [r for r in rows if r["strategy"] == "react" and r["question_id"] in kept]


def dialogue_stats(rows: Sequence[dict[str, Any]]) -> Any:
    """One row per dialogue: strategy, set, kind, hops, turns and length in words."""
    import pandas as pd

    return pd.DataFrame([{"strategy": r["strategy"], "set": r["dataset"], "kind": r["kind"],
                          "hops": r["hops"], "turns": len(r["messages"]),
                          "words": sum(len(m["content"].split()) for m in r["messages"])}
                         for r in rows])


def stats_table(stats: Any) -> Any:
    """Dialogues, mean hops, turns and words per strategy and question set."""
    return stats.groupby(["strategy", "set"]).agg(dialogues=("hops", "size"),
                                                  mean_hops=("hops", "mean"),
                                                  mean_turns=("turns", "mean"),
                                                  mean_words=("words", "mean")).round(2)


def dnc_per_kind(stats: Any) -> Any:
    """DnC dialogues per question type, smallest first (the figure's left panel)."""
    return stats[stats.strategy == "dnc"].groupby("kind").size().sort_values()


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
                  teacher_name: str) -> dict[str, Any]:
    """results/toolagent_data/metrics.json: dialogue counts, skips, hops and lengths."""
    return {
        "train_questions": len(train),
        "dialogues": {s: int((stats.strategy == s).sum()) for s in sorted(stats.strategy.unique())},
        "skipped": dict(sorted(skipped.items())),
        "per_kind": {k: int(v) for k, v in sorted(by_kind.items())},
        "mean_hops": round(float(stats[stats.strategy == "dnc"].hops.mean()), 4),
        "mean_words": {s: round(float(stats[stats.strategy == s].words.mean()), 2)
                       for s in sorted(stats.strategy.unique())},
        "teacher": teacher_name,
    }


def run(params: config.Params) -> ToolagentDataResult:
    """Teacher dialogues (DnC and mm-ReAct) for every usable train question, with their statistics."""
    import seaborn as sns

    base, cfg = params.base, params.toolagent_data
    data_dir, out_dir = stage_dirs(STAGE)
    corpus_dir = DATA / cfg.corpus
    sns.set_theme(style="whitegrid")

    questions = {name: load_question_set(corpus_dir, name, "toolagent_data.question_sets")
                 for name in cfg.question_sets}
    train = [q for qs in questions.values() for q in qs if q.split == "train"]
    rows, skipped = teacher.programmatic(train, seed=base.seed, max_calls=cfg.max_tool_calls)
    if cfg.teacher == "llm":
        rows = llm_teacher_rows(cfg, params.models, base, corpus_dir, train, rows)
    print(f"{len(rows)} dialogues from {len(train)} train questions; skipped: {skipped}")

    stats = dialogue_stats(rows)
    by_kind = dnc_per_kind(stats)
    fig = dialogues_figure(stats, by_kind)
    save_figure(fig, out_dir / "dialogues.png", dpi=110)

    write_jsonl(data_dir / "dialogues.jsonl", rows)
    metrics = stage_metrics(train, stats, skipped, by_kind, cfg.teacher)
    write_json(out_dir / "metrics.json", metrics)
    return ToolagentDataResult(
        metrics=metrics,
        tables={"overview": overview_table(questions), "stats": stats_table(stats)},
        figures={"dialogues": fig},
        artifacts={"dialogues": data_dir / "dialogues.jsonl", "metrics": out_dir / "metrics.json",
                   "figure": out_dir / "dialogues.png"},
        rows=rows, examples=example_dialogues(rows, cfg.examples_shown))
