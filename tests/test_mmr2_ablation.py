"""MM-R2's module ablation rows differ by one factor each; every row reads the same image
description; the embedding router sends a second search to the next unit; the loop-firing
figures on hand-built traces."""

from __future__ import annotations

import re

import pytest
from test_mmr2_agent import BagEncoder, kmap  # noqa: F401  (fixture)

from mmrag.mmr2 import ablation
from mmrag.mmr2.agent import RetrievalEnv
from mmrag.mmr2.intent import Intent
from mmrag.schema import Question, Step, Trace

SIZES = {"budget": 3, "k": 3, "max_turns": 4, "max_new_tokens": 160}


@pytest.mark.parametrize("router", ["embedding", "policy"])
def test_adjacent_rows_differ_in_exactly_one_factor(router):
    rows = ablation.rows(router)
    ladder = [r for r in rows if r.name in ablation.LADDER]
    assert [r.name for r in ladder] == list(ablation.LADDER)
    for a, b in zip(ladder, ladder[1:]):
        assert len(ablation.differing(a, b)) == 1, (a.name, b.name, ablation.differing(a, b))
    assert [ablation.differing(a, b)[0] for a, b in zip(ladder, ladder[1:])] == ["routing", "intent", "loop"]
    diag = next(r for r in rows if r.name == ablation.DIAGNOSTIC)
    assert ablation.differing(ladder[-1], diag) == ["router"]
    # one router in every routed row of the ladder
    assert {r.router for r in ladder if r.routing == "km"} == {router}


def test_row_configs_share_everything_but_their_factors():
    rows = ablation.rows("embedding")
    configs = [ablation.config(r, policy="SFT+GRPO", **SIZES) for r in rows]
    varying = {"intent", "routing", "loop", "router", "budget"}
    shared = [{k: v for k, v in c.items() if k not in varying} for c in configs]
    assert all(s == shared[0] for s in shared)
    for r, c in zip(rows, configs):  # the budget follows the loop factor alone
        assert c["budget"] == (SIZES["budget"] if r.loop else 1)


def test_every_row_gets_the_same_image_description_and_only_intent_rows_the_binding(kmap):  # noqa: F811
    qs = [Question(id=f"q{i}", text="What is this?", answer="x", dataset="t") for i in range(3)]
    xs = [Intent("need", f"ref{i}", "", image_text=f"a red thing {i}") for i in range(3)]
    agents = {r.name: ablation.build(r, object(), kmap, BagEncoder(), qs, xs, **SIZES)
              for r in ablation.rows("embedding")}
    texts = [a.image_texts for a in agents.values()]
    assert all(t == {"q0": "a red thing 0", "q1": "a red thing 1", "q2": "a red thing 2"} for t in texts)
    for r in ablation.rows("embedding"):
        a = agents[r.name]
        assert (a.intents is not None) == r.intent
        assert a.budget == (3 if r.loop else 1) and a.mode == "routed"
        assert a.router == (r.router if r.routing == "km" else "flat")
        # the same prompt in every row but the loop factor's budget
        assert a.env().system_prompt() == re.sub(r"at most 3\s+searches", lambda m: m.group(0).replace(
            "3", str(a.budget)), agents["row_full"].env().system_prompt())


def _search(unit, query):
    return f'<think>t</think><search>[{{"retrieval_unit":{{"id":"{unit}"}},"query":"{query}"}}]</search>'


def test_embedding_router_sends_a_repeated_search_to_the_next_unit(kmap):  # noqa: F811
    q = Question(id="q1", text="Which violin fact is beta?", answer="beta", dataset="t",
                 gold_passages=["violin-beta"])
    env = RetrievalEnv(kmap, BagEncoder(), k=2, budget=3, router="embedding")
    env.reset(q)
    gold = kmap.unit_of("violin-beta")
    other = next(u for u in kmap.unit_ids if u != gold)
    r1 = env.step(_search(other, "violin beta"))  # the policy's unit id is ignored
    assert r1.step.target == gold and r1.route_correct is True
    r2 = env.step(_search(gold, "violin beta"))
    assert r2.step.target != gold and r2.route_correct is False
    flat = RetrievalEnv(kmap, BagEncoder(), k=2, budget=3, router="flat")
    flat.reset(q)
    r = flat.step(_search(other, "violin beta"))
    assert r.step.target == "ALL" and r.route_correct is None and r.step.evidence[0].id == "violin-beta"
    with pytest.raises(ValueError):
        RetrievalEnv(kmap, BagEncoder(), k=2, budget=3, router="oracle")


def _trace(qid, answer, n_search):
    steps = [Step(action="search", target="U01", query="x") for _ in range(n_search)]
    return Trace(question_id=qid, system="s", answer=answer, steps=[*steps, Step(action="answer")])


def test_loop_stats_count_searches_and_second_searches_that_change_the_answer():
    loop = [_trace("a", "Paris", 1), _trace("b", "Rome", 2), _trace("c", "Oslo", 3), _trace("d", "Bern", 2)]
    single = [_trace("a", "Paris", 1), _trace("b", "Milan", 1), _trace("c", "oslo", 1), _trace("d", "Bonn", 1)]
    correct = {"loop": {"a": True, "b": True, "c": False, "d": False},
               "single": {"a": True, "b": False, "c": False, "d": True}}
    s = ablation.loop_stats(loop, single, correct)
    assert s["n"] == 4 and s["searches_per_question"] == 2.0
    assert s["share_two_plus_searches"] == 0.75 and s["searches_distribution"] == {"1": 1, "2": 2, "3": 1}
    # b and d changed (c differs only in case: the same answer)
    assert s["second_search_questions"] == 3 and s["answer_changed"] == 2
    assert s["answer_changed_share"] == round(2 / 3, 4)
    assert s["wrong_to_right"] == 1 and s["right_to_wrong"] == 1
    assert ablation.loop_stats([_trace("a", "x", 1)])["searches_per_question"] == 1.0


def test_the_policys_unit_id_is_not_read_when_the_environment_routes(kmap):  # noqa: F811
    q = Question(id="q1", text="Which violin fact is beta?", answer="beta", dataset="t",
                 gold_passages=["violin-beta"])
    for router, target in (("embedding", kmap.unit_of("violin-beta")), ("flat", "ALL")):
        env = RetrievalEnv(kmap, BagEncoder(), k=2, budget=3, router=router)
        env.reset(q)
        r = env.step(_search("ALL", "violin beta"))  # not a unit id: no format error, no retry
        assert r.step.target == target and r.format_error is None and not r.done
