"""MM-R2 as a System: the agent loop behind answer(questions), byte-for-byte run_agent's traces."""

from __future__ import annotations

import numpy as np
import pytest

from mmrag.mmr2 import agent
from mmrag.mmr2 import knowledge_map as kmaps
from mmrag.mmr2.system import GoldReader, MMR2Agent
from mmrag.models.llm import Generation
from mmrag.schema import Passage, Question
from mmrag.systems import System, system_class

WORDS = ["volcano", "violin", "enzyme"]
TAGS = ["alpha", "beta", "gamma", "delta"]


class BagEncoder:
    """A word-count encoder over a tiny vocabulary (normalised, deterministic)."""

    def encode(self, texts, **_):
        vocab = WORDS + TAGS
        out = np.zeros((len(texts), len(vocab)), dtype=np.float32) + 1e-3
        for i, t in enumerate(texts):
            for j, w in enumerate(vocab):
                out[i, j] += t.lower().count(w)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


class ScriptLLM:
    """Replays scripted turns per conversation."""

    def __init__(self, script):
        self.script = script

    def generate(self, convs, max_new_tokens=0, temperature=0.0, stop=None):
        return [Generation(self.script[sum(m["role"] == "assistant" for m in c)], 10, 5) for c in convs]


@pytest.fixture(scope="module")
def kmap():
    P = [Passage(id=f"{w}-{t}", doc_id=f"{w}-{t}", title=f"{w} {t}", text=f"{w} {w} {t} fact {t}")
         for w in WORDS for t in TAGS]
    return kmaps.KnowledgeMap.build(P, BagEncoder().encode([p.text for p in P]), np.repeat(np.arange(3), 4),
                                    top_keywords=8, n_representatives=3, n_card_titles=16)


def _qs():
    return [Question(id=f"q{i}", text="Which violin fact is beta?", answer="beta", dataset="t",
                     gold_passages=["violin-beta"]) for i in range(2)]


class RecordingLLM(ScriptLLM):
    def __init__(self, script):
        super().__init__(script)
        self.convs = []

    def generate(self, convs, **kw):
        self.convs += [list(c) for c in convs]
        return super().generate(convs, **kw)


def test_mmr2_agent_is_run_agent_behind_the_system_protocol(kmap):
    gold = kmap.unit_of("violin-beta")
    script = [f'<think>t</think><search>[{{"retrieval_unit":{{"id":"{gold}"}},"query":"violin beta"}}]'
              f'</search>', "<summary>violin beta fact</summary><think>done</think><answer>beta</answer>"]
    qs = _qs()
    llm = RecordingLLM(script)
    system = MMR2Agent("mmr2_grpo", llm, kmap, BagEncoder(), k=2, budget=2, max_turns=4,
                       max_new_tokens=32, image_texts={"q1": "a violin"})
    assert isinstance(system, System) and system_class("mmr2") is MMR2Agent
    traces = system.answer(qs)
    direct = agent.run_agent(ScriptLLM(script), lambda: agent.RetrievalEnv(kmap, BagEncoder(), k=2, budget=2),
                             qs, system="mmr2_grpo", image_texts=[None, "a violin"], max_turns=4,
                             max_new_tokens=32)
    strip = lambda t: {**t.to_dict(), "seconds": 0}  # noqa: E731 (timings differ run to run)
    assert [strip(t) for t in traces] == [strip(t) for t in direct]
    assert traces[0].answer == "beta" and traces[0].system == "mmr2_grpo"
    # the image text reaches the question it belongs to, by id
    first_turns = [c[1]["content"] for c in llm.convs[:2]]
    assert "a violin" not in first_turns[0] and "a violin" in first_turns[1]


def test_gold_reader_shows_the_gold_passages_without_retrieval(kmap):
    """The reader ceiling: the first turn is written (a search of the gold unit), the observation
    holds exactly the gold passage, and the policy only has to read and answer."""
    llm = RecordingLLM(["unused", "<summary>violin beta fact</summary><think>done</think><answer>beta</answer>"])
    qs = _qs()
    traces = GoldReader("ceiling_grpo", llm, kmap, BagEncoder(), k=2, budget=2, max_turns=1,
                        max_new_tokens=32).answer(qs)
    gold_unit = kmap.unit_of("violin-beta")
    assert [t.answer for t in traces] == ["beta", "beta"]
    first = traces[0].steps[0]
    assert first.action == "search" and first.target == gold_unit
    assert [e.id for e in first.evidence] == ["violin-beta"]
    assert traces[0].meta["written_first_turn"] and traces[0].meta["route_correct"] == [True]
    # one generated turn per question: the written search is not generated, its result is shown
    assert len(llm.convs) == 2 and llm.convs[0][-1]["role"] == "user"
    assert "violin beta" in llm.convs[0][-1]["content"] and "<information>" in llm.convs[0][-1]["content"]


def test_view_cuts_passages_to_the_query_sentences_and_drops_card_descriptions(kmap):
    text = "Alpha is a product. It ships in 2030. Orbis Corp makes Alpha. The colour is red."
    assert agent.passage_view(text, None, 500) == text
    assert agent.passage_view(text, None, 20) == text[:20]
    # the query's sentence first, then others in page order while they fit
    assert agent.passage_view(text, "who makes Alpha Orbis", 45) == "Alpha is a product. Orbis Corp makes Alpha."
    assert agent.passage_view(text, "colour of it", 5) == "The c"
    env = agent.RetrievalEnv(kmap, BagEncoder(), k=1, budget=1,
                             view=agent.View(passage_chars=40, unit_descriptions=False))
    system = env.reset(_qs()[0])[0]["content"]
    assert kmap.units[0].description not in system and kmap.units[0].title in system
    assert kmap.units[0].description in agent.RetrievalEnv(kmap, BagEncoder(), k=1, budget=1).system_prompt()
