"""The DnC stage modules' helpers (toolagent_data, toolagent_finetune, toolagent_eval) on tiny inputs."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import fields

import pandas as pd
import pytest

from mmrag import config
from mmrag.sampling import round_robin
from mmrag.schema import Question, SubQuestion
from mmrag.stages import toolagent_data, toolagent_eval, toolagent_finetune
from mmrag.toolagent.tools import ToolAnswer


def questions(n: int = 20) -> list[Question]:
    kinds = ["TextQ", "TableQ", "Compose(TableQ,TextQ)"]
    return [Question(f"q{i}", f"question {i}?", f"a{i}", "mmqa", kind=kinds[i % 3 if i < 15 else 0],
                     split="test", decomposition=[SubQuestion(f"sub {i}?", "TextQA", f"a{i}")] * (1 + i % 2))
            for i in range(n)]


def stratified(qs, n, seed):
    """notebooks/22_toolagent_eval's sample before it moved to sampling.round_robin (kept to compare)."""
    by = defaultdict(list)
    for q in qs:
        by[q.kind].append(q)
    rng = random.Random(seed)
    for k in by:
        rng.shuffle(by[k])
    out, kinds = [], sorted(by)
    while len(out) < n and any(by.values()):
        for k in kinds:
            if by[k] and len(out) < n:
                out.append(by[k].pop())
    return out


@pytest.mark.parametrize("n,seed", [(2, 0), (7, 0), (13, 3), (40, 1)])
def test_round_robin_is_the_old_stratified_sample(n, seed):
    qs = questions()
    assert [q.id for q in round_robin(qs, n, seed, by=lambda q: q.kind)] == [q.id for q in stratified(qs, n, seed)]


def test_training_sample_is_balanced_and_seeded():
    rows = [{"strategy": s, "i": i} for i in range(10) for s in ("dnc", "react")]
    a = toolagent_finetune.training_sample(rows, ("dnc", "react"), 8, seed=0)
    assert len(a) == 8 and sum(r["strategy"] == "dnc" for r in a) == 4
    assert a == toolagent_finetune.training_sample(rows, ("dnc", "react"), 8, seed=0)
    assert a != toolagent_finetune.training_sample(rows, ("dnc", "react"), 8, seed=1)
    assert len(toolagent_finetune.training_sample(rows, ("dnc", "react"), 1, seed=0)) == 2  # at least 1 each


def test_sft_settings_take_every_field_from_params():
    cfg = config.load().toolagent_finetune
    settings = toolagent_finetune.settings_of(cfg, seed=7)
    for f in fields(settings):
        assert getattr(settings, f.name) == (7 if f.name == "seed" else getattr(cfg, f.name)), f.name
    assert settings.target_modules == ("q_proj", "k_proj", "v_proj", "o_proj")


def test_plan_rows():
    assert toolagent_eval.plan_for(False, False) == [("tools_answer", "base")]
    assert toolagent_eval.plan_for(True, True) == [("tools_answer", "base"), ("react", "base"), ("dnc", "base"),
                                                   ("react", "ft"), ("dnc", "ft")]


def test_tool_ceilings_score_each_gold_subquestion():
    qs = questions(6)
    tools = {"TextQA": lambda text: ToolAnswer("TextQA", "a" + text.split()[1].rstrip("?"))}
    ceilings = toolagent_eval.tool_ceilings({"mmqa": qs}, tools, "test", n=100, seed=0)
    assert len(ceilings) == sum(len(q.decomposition) for q in qs) and ceilings.em.mean() == 1.0
    table = toolagent_eval.ceiling_table(ceilings)
    assert table.loc["TextQA", "n"] == len(ceilings) and table.loc["TextQA", "F1"] == 1.0


def scores_frame(dnc_f1: dict[str, float]) -> pd.DataFrame:
    rows = []
    for llm, f1 in dnc_f1.items():
        for strategy, model, em, f, calls in (("dnc", "ft", 1.0, f1, 2), ("react", "ft", 0.0, 0.2, 3),
                                              ("tools_answer", "base", 0.0, 0.1, 4)):
            rows.append({"set": "mmqa", "llm": llm, "strategy": strategy, "model": model, "em": em, "f1": f,
                         "tool_calls": calls})
    return pd.DataFrame(rows)


def test_claims_hold_strictly_and_bigger_is_better():
    claims = toolagent_eval.check_claims(scores_frame({"small": 0.5, "big": 0.9}), ["mmqa"], ["small", "big"])
    assert [c["holds"] for c in claims[:3]] == [True, True, True]
    size = {c["claim"]: c for c in claims if c["claim"].startswith("bigger")}
    dnc = size["bigger is better: dnc·ft F1"]
    assert dnc["holds"] and dnc["f1_by_size"] == [0.5, 0.9]
    assert not size["bigger is better: react·ft F1"]["holds"]  # a tie does not hold
    one = toolagent_eval.check_claims(scores_frame({"small": 0.5}), ["mmqa"], ["small"])
    assert len(one) == 3  # no size claim with one LLM
    missing = toolagent_eval.check_claims(scores_frame({"small": 0.5}), ["mmqa"], ["other"])
    assert not any(c["holds"] for c in missing)  # rows that did not run (NaN) never hold


def test_list_answers_score_in_any_order():
    from mmrag.evaluate.metrics import exact_match, token_f1

    assert exact_match("Brant Q1, Vorkel X2", ["Vorkel X2, Brant Q1"]) == 1.0
    assert token_f1("Brant Q1, Vorkel X2", ["Vorkel X2, Brant Q1"]) == 1.0


def test_example_dialogues_show_both_strategies_once_per_kind():
    rows = [{"question_id": "q1", "strategy": s, "kind": "TextQ", "hops": 1,
             "messages": [{"role": "system", "content": "instr"}, {"role": "user", "content": "Question: x"},
                          {"role": "assistant", "content": "[Answer: y]"}]} for s in ("dnc", "react")]
    rows += [{**r, "question_id": "q2"} for r in rows]  # the same kind again: not shown
    text = toolagent_data.example_dialogues(rows, 3)
    assert text.count("--- dnc · TextQ · q1") == 1 and text.count("--- react · TextQ · q1") == 1
    assert "q2" not in text and "ANSWER" not in text
