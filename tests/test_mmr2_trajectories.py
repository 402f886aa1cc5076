"""Synthesized trajectories are executed, pass the filters, and the filters catch planted bad ones."""

from __future__ import annotations

import copy
import random

import pytest
from test_mmr2_agent import BagEncoder, kmap  # noqa: F401  (fixture)

from mmrag.mmr2 import trajectories as tj
from mmrag.mmr2.agent import RetrievalEnv
from mmrag.schema import Question


def _q(tag="beta", word="violin"):
    return Question(id=f"q-{word}-{tag}", text=f"Which {word} fact is {tag}?",
                    answer=f"{word} {tag}", dataset="t", gold_passages=[f"{word}-{tag}"])


@pytest.fixture()
def made(kmap):  # noqa: F811
    enc = BagEncoder()
    out = []
    for wrong in (False, True):
        env = RetrievalEnv(kmap, enc, k=2, budget=3)
        out.append(tj.synthesize(_q(), env, kmap, enc, random.Random(0), wrong_first=wrong))
    return out


def test_direct_and_recovering_trajectories_pass_filters(made, kmap):  # noqa: F811
    direct, recover = made
    assert direct.meta["searches"] == 1 and direct.meta["route_correct"] == [True]
    assert recover.meta["searches"] == 2 and recover.meta["route_correct"] == [False, True]
    roles = [m["role"] for m in recover.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert all(m["content"].startswith("<information>") for m in recover.messages[3::2])
    assert "violin beta" in recover.messages[-2]["content"]  # real retrieval output
    kept, counts, _ = tj.apply_filters(made)
    assert len(kept) == 2 and sum(counts.values()) == 0


def _edit_last(t, old, new):
    t = copy.deepcopy(t)
    t.messages[-1]["content"] = t.messages[-1]["content"].replace(old, new)
    return t


def test_filters_catch_planted_bad_trajectories(made):
    good = made[1]
    wrong = _edit_last(good, "<answer>violin beta</answer>", "<answer>enzyme gamma</answer>")
    missing = _edit_last(good, "</think>", "")
    fabricated = copy.deepcopy(good)
    fabricated.messages[-1]["content"] = fabricated.messages[-1]["content"].replace(
        "<summary>", "<summary>Invented by Napoleon Bonaparte in Marseille during 1802. ")
    degenerate = copy.deepcopy(good)
    t = degenerate.messages[4]["content"]
    first_think = degenerate.messages[2]["content"].split("<think>")[1].split("</think>")[0]
    degenerate.messages[4]["content"] = t.split("<think>")[0] + f"<think>{first_think}</think>" \
        + t.split("</think>")[1]
    denial = copy.deepcopy(good)
    denial.messages[-1]["content"] = denial.messages[-1]["content"].replace(
        denial.messages[-1]["content"].split("<summary>")[1].split("</summary>")[0],
        "The passages retrieved are about violin beta; none mentions the answer.")
    kept, counts, ex = tj.apply_filters([wrong, missing, fabricated, degenerate, denial, good])
    assert kept == [good]
    assert counts == {"incomplete_steps": 1, "wrong_final_answer": 1, "summary_inconsistent": 2,
                      "degenerate_reasoning": 1}
    assert [e["filter"] for e in ex] == ["wrong_final_answer", "incomplete_steps",
                                        "summary_inconsistent", "degenerate_reasoning",
                                        "summary_inconsistent"]


def test_stats_and_split(made):
    s = tj.statistics(made, [], [10, 30])
    assert s["steps_distribution"] == {"1": 1, "2": 1} and s["two_or_three_steps"] == 1
    assert s["mean_tokens"] == 20.0
    # both variants of a question share a split
    assert tj.split_of("traj-q7-w", 0.5, 0) == tj.split_of("traj-q7-d", 0.5, 0)


def test_answer_matching():
    assert tj.answer_matches("The Violin.", "violin") and not tj.answer_matches("", "x")


class EchoTeacher:
    """Test double for an LLM teacher: rephrases, or drops the unit id when told to."""

    def __init__(self, drop_ids=False):
        self.drop_ids = drop_ids

    def generate(self, convs, max_new_tokens=0, temperature=0.0, stop=None):
        from mmrag.models.llm import Generation

        outs = []
        for c in convs:
            think = c[0]["content"].split("\n\n", 1)[1]
            text = "In short: " + (tj.re.sub(r"\bU\d+\b", "a unit", think) if self.drop_ids else think)
            outs.append(Generation(text, 1, 1))
        return outs


def test_llm_teacher_rewrites_keep_routes(made):
    trajs = copy.deepcopy(made)
    assert tj.llm_rewrite_thinks(trajs, EchoTeacher()) == 5
    assert all("In short:" in m["content"] for t in trajs for m in t.messages
               if m["role"] == "assistant")
    assert len(tj.apply_filters(trajs)[0]) == 2
    trajs = copy.deepcopy(made)
    kept = tj.llm_rewrite_thinks(trajs, EchoTeacher(drop_ids=True))
    assert kept < 5  # thoughts naming a unit id keep the programmatic text


def test_teacher_answers_only_from_gold_evidence(kmap):  # noqa: F811
    # "violin" is in every violin passage; the gold one is violin-delta, which the query
    # "violin beta" does not bring into the top 1, so a lucky distractor must not be used
    q = Question(id="q-lucky", text="Which violin fact?", answer="violin", dataset="t",
                 gold_passages=["violin-delta"])
    enc = BagEncoder()
    env = RetrievalEnv(kmap, enc, k=1, budget=1)

    class Need:
        need, referent, constraints = "violin beta", "violin", "none"

    t = tj.synthesize(q, env, kmap, enc, random.Random(0), wrong_first=False, intent=Need())
    assert "violin-beta" in t.messages[3]["content"] or "violin beta" in t.messages[3]["content"]
    assert t.meta["final"] == "unknown"  # not answered from the non-gold passage
    assert tj.apply_filters([t])[1]["wrong_final_answer"] == 1


def test_teacher_routes_by_the_unit_card_when_it_lists_the_referent(kmap):  # noqa: F811
    enc = BagEncoder()

    class Intent:
        def __init__(self, referent):
            self.need, self.referent, self.constraints = "violin beta", referent, "none"

    gold_unit = kmap.unit_of("violin-beta")
    # the card names the gold unit: a direct route, even when a wrong first route was drawn
    env = RetrievalEnv(kmap, enc, k=2, budget=3)
    t = tj.synthesize(_q(), env, kmap, enc, random.Random(0), wrong_first=True,
                      intent=Intent("violin beta"))
    assert t.meta["card_route"] and not t.meta["wrong_first"]
    assert t.meta["route_correct"] == [True]
    assert "card" in t.messages[2]["content"] and gold_unit in t.messages[2]["content"]
    # Φ grounded the image to a page of another unit: follow its card, then recover
    other = next(p.title for p in kmap.passages if kmap.unit_of(p.id) != gold_unit)
    env = RetrievalEnv(kmap, enc, k=2, budget=3)
    t = tj.synthesize(_q(), env, kmap, enc, random.Random(0), wrong_first=False,
                      intent=Intent(other))
    assert t.meta["card_route"] and t.meta["wrong_first"]
    assert t.meta["route_correct"] == [False, True]
    assert len(tj.apply_filters([t])[0]) == 1


def test_miss_then_hit_trajectories_first_miss_then_find_the_answer(kmap):  # noqa: F811
    enc = BagEncoder()
    env = RetrievalEnv(kmap, enc, k=2, budget=3)
    t = tj.synthesize(_q(), env, kmap, enc, random.Random(0), wrong_first=False, miss_first=True)
    assert t.meta["searches"] == 2 and t.meta["route_correct"] == [False, True]
    assert t.meta["miss_then_hit"] and t.id.endswith("-m")
    kept, counts, _ = tj.apply_filters([t])
    assert len(kept) == 1  # the filters keep it


def test_multi_step_share_follows_the_configured_share(kmap):  # noqa: F811
    """As mmr2_traj picks them: a seeded sample of round(miss_then_hit_frac x n) questions first
    misses, then hits; the statistics report the multi-step share beside the paper's (~2.4 %)."""
    enc = BagEncoder()
    qs = []
    for i in range(200):
        q = _q(["alpha", "beta", "gamma", "delta"][i % 4], ["volcano", "violin", "enzyme"][i % 3])
        qs.append(Question(id=f"{q.id}-{i}", text=q.text, answer=q.answer, dataset="t",
                           gold_passages=q.gold_passages))
    miss = tj.miss_then_hit_ids(qs, 0.25, seed=3)
    assert len(miss) == 50 and miss == tj.miss_then_hit_ids(qs, 0.25, seed=3)
    assert tj.miss_then_hit_ids(qs, 0.0, seed=3) == set() and tj.miss_then_hit_ids(qs[:3], 0.1, seed=3) == set()
    rng = random.Random(3)
    trajs = [tj.synthesize(q, RetrievalEnv(kmap, enc, k=2, budget=3), kmap, enc, rng, wrong_first=False,
                           miss_first=q.id in miss) for q in qs]
    stats = tj.statistics(trajs, [], [100] * len(trajs))
    assert stats["miss_then_hit"] == 50 and stats["multi_step_share"] == 0.25
    assert stats["multi_step_share"] >= tj.PAPER_STATS["multi_step_share"]
