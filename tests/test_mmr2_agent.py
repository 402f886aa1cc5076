"""The agent's parser and environment on malformed outputs: counted, recovered or retried,
never a crash; searches run on the real per-unit FAISS indexes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mmrag.mmr2 import agent
from mmrag.mmr2 import knowledge_map as km
from mmrag.models.llm import Generation
from mmrag.schema import Passage, Question

WORDS = ["volcano", "violin", "enzyme"]


class BagEncoder:
    """Test double: a word-count encoder over a tiny vocabulary (normalised, deterministic)."""

    vocab = WORDS + ["alpha", "beta", "gamma", "delta"]

    def encode(self, texts, **_):
        out = np.zeros((len(texts), len(self.vocab)), dtype=np.float32) + 1e-3
        for i, t in enumerate(texts):
            for j, w in enumerate(self.vocab):
                out[i, j] += t.lower().count(w)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def kmap():
    tags = ["alpha", "beta", "gamma", "delta"]
    P = [Passage(id=f"{w}-{t}", doc_id=f"{w}-{t}", title=f"{w} {t}", text=f"{w} {w} {t} fact {t}")
         for w in WORDS for t in tags]
    X = BagEncoder().encode([p.text for p in P])
    labels = np.repeat(np.arange(3), 4)
    return km.KnowledgeMap.build(P, X, labels, top_keywords=8, n_representatives=3, n_card_titles=16)


def _q():
    return Question(id="q1", text="Which violin fact is beta?", answer="beta", dataset="t",
                    gold_passages=["violin-beta"])


@pytest.mark.parametrize("text, errors, action", [
    ('<think>ok</think><search>[{"retrieval_unit":{"id":"U01"},"query":"x"}]</search>', [], "search"),
    ('<think>ok</think><answer>Paris</answer>', [], "answer"),
    ('<think>ok</think><search>[{"retrieval_unit":{"id":"U01"},"query":"x"</search>',
     ["malformed search JSON"], "search"),
    ("<think>ok</think><search>[{'retrieval_unit': {'id': 'U02'}, 'query': 'violin'}]</search>",
     ["malformed search JSON"], "search"),
    ('<think>ok</think><search>{"retrieval_unit":{"id":"U01"},"query":"x"}</search>',
     ["search is an object, not a list"], "search"),
    ("<think>ok", ["unclosed <think>", "no <search> or <answer>"], "none"),
    ("just words", ["missing <think>", "no <search> or <answer>"], "none"),
    ("<think>a</think><search>[]</search><answer>b</answer>", ["both <search> and <answer>"], "answer"),
    ("<think>a</think><answer></answer>", ["empty <answer>"], "answer"),
    ("<think>a</think><search>[{\"query\": \"\"}]</search>", ["search item without a query"], "none"),
    ("", ["missing <think>", "no <search> or <answer>"], "none"),
])
def test_parser_is_strict_and_never_raises(text, errors, action):
    p = agent.parse_turn(text)
    assert p.errors == errors and p.action == action


def test_loose_recovery_reads_unit_and_query():
    p = agent.parse_turn("<think>a</think><search>[{'retrieval_unit': {'id': 'U02'}, "
                         "'query': 'violin beta'}]</search>")
    assert [(c.unit, c.query) for c in p.calls] == [("U02", "violin beta")]


def test_env_routes_searches_and_scores_route(kmap):
    env = agent.RetrievalEnv(kmap, BagEncoder(), k=2, budget=2)
    conv = env.reset(_q(), image_text="a violin", intent=None)
    assert "U01" in conv[0]["content"] and "Question: Which violin" in conv[1]["content"]
    gold_unit = kmap.unit_of("violin-beta")
    wrong = next(u for u in kmap.unit_ids if u != gold_unit)
    r = env.step(f'<think>t</think><search>[{{"retrieval_unit":{{"id":"{wrong}"}},'
                 f'"query":"violin beta"}}]</search>')
    assert r.route_correct is False and not r.done and "violin-beta" not in r.observation
    r = env.step(f'<summary>nothing</summary><think>t</think><search>[{{"retrieval_unit":'
                 f'{{"id":"{gold_unit}"}},"query":"violin beta"}}]</search>')
    assert r.route_correct is True and r.step.evidence[0].id == "violin-beta"
    assert r.observation.startswith("<information>") and "violin beta" in r.observation
    # over budget: the episode stops, counted
    r = env.step(f'<think>t</think><search>[{{"retrieval_unit":{{"id":"{gold_unit}"}},'
                 f'"query":"x"}}]</search>')
    assert r.done and "over budget" in r.format_error


def test_env_recovers_or_retries_bad_units_then_stops(kmap):
    env = agent.RetrievalEnv(kmap, BagEncoder(), k=3, budget=3, max_format_retries=1)
    env.reset(_q())
    r = env.step('<think>t</think><search>[{"retrieval_unit":{"id":"u2"},"query":"violin"}]</search>')
    assert r.step.target == "U02" and "invalid unit" in r.format_error and not r.done
    r = env.step('<think>t</think><search>[{"retrieval_unit":{"id":"Z"},"query":"violin"}]</search>')
    assert not r.done and "valid ids" in r.observation and r.step.evidence == []
    r = env.step("garbage")
    assert r.done and r.observation is None  # second retry exceeds the limit


class ScriptLLM:
    """Test double for a ChatLLM: replays scripted turns per conversation."""

    def __init__(self, script):
        self.script = script

    def generate(self, convs, max_new_tokens=0, temperature=0.0, stop=None):
        return [Generation(self.script[sum(m["role"] == "assistant" for m in c)], 10, 5)
                for c in convs]


def test_run_agent_builds_traces(kmap):
    gold = kmap.unit_of("violin-beta")
    llm = ScriptLLM([f'<think>t</think><search>[{{"retrieval_unit":{{"id":"{gold}"}},'
                     f'"query":"violin beta"}}]</search>',
                     "<summary>violin beta fact</summary><think>done</think><answer>beta</answer>"])
    traces = agent.run_agent(llm, lambda: agent.RetrievalEnv(kmap, BagEncoder(), k=3, budget=3),
                             [_q(), _q()], system="mmr2", max_turns=6, max_new_tokens=160)
    t = traces[0]
    assert t.answer == "beta" and t.tool_calls == 1 and t.format_errors == 0
    assert [s.action for s in t.steps] == ["search", "answer"]
    assert agent.route_recall_at1(t) == 1.0 and t.steps[1].summary == "violin beta fact"
    flat = agent.run_agent(llm, lambda: agent.RetrievalEnv(kmap, BagEncoder(), mode="flat", k=3, budget=3),
                           [_q()], system="flat", max_turns=6, max_new_tokens=160)[0]
    assert flat.steps[0].target == "ALL" and flat.steps[0].evidence[0].id == "violin-beta"


class SlotLLM(ScriptLLM):
    """A one-slot engine double: records which episode each generate() call held."""

    dialogue_width = 1

    def __init__(self, script):
        super().__init__(script)
        self.calls: list[list[str]] = []

    def generate(self, convs, **kw):
        self.calls.append([c[1]["content"] for c in convs])
        return super().generate(convs, **kw)


def test_a_one_slot_engine_runs_each_episode_to_its_end_before_the_next(kmap):
    """Stepped together, a one-slot llama.cpp engine re-prefills every dialogue each turn."""
    gold = kmap.unit_of("violin-beta")
    script = [f'<think>t</think><search>[{{"retrieval_unit":{{"id":"{gold}"}},"query":"violin beta"}}]</search>',
              "<summary>violin beta fact</summary><think>done</think><answer>beta</answer>"]
    env = lambda: agent.RetrievalEnv(kmap, BagEncoder(), k=3, budget=3)  # noqa: E731
    qs = [_q(), dataclasses.replace(_q(), id="q2", text="Who plays the violin beta?")]
    slot = SlotLLM(script)
    one = agent.run_agent(slot, env, qs, system="mmr2", max_turns=6, max_new_tokens=160)
    assert [len(c) for c in slot.calls] == [1, 1, 1, 1]  # one dialogue per call ...
    firsts = [c[0] for c in slot.calls]
    assert firsts[0] == firsts[1] != firsts[2] == firsts[3]  # ... both turns of q1, then q2's
    together = agent.run_agent(ScriptLLM(script), env, qs, system="mmr2", max_turns=6, max_new_tokens=160)
    assert [t.to_dict() | {"seconds": 0} for t in one] == [t.to_dict() | {"seconds": 0} for t in together]
