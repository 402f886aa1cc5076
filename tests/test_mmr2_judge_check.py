"""The judge's labelled check: traces whose right judgement is known, and agreement with them."""

from __future__ import annotations

import numpy as np

from mmrag.evaluate.judge import LexicalJudge, SampledJudge
from mmrag.mmr2 import judge_check
from mmrag.mmr2 import knowledge_map as kmaps
from mmrag.schema import Passage, Question


class _Enc:
    def encode(self, texts, **_):
        v = np.array([[len(t), t.count("a") + 1.0, 1.0] for t in texts], dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def _kmap():
    P = [Passage(id=f"d{i}#p0", doc_id=f"d{i}", title=f"Item {i}",
                 text=f"Item {i} is a product. Item {i} is made by Maker{i}. It is blue.") for i in range(6)]
    return kmaps.KnowledgeMap.build(P, _Enc().encode([p.text for p in P]), np.array([0, 0, 0, 1, 1, 1]),
                                    top_keywords=4, n_representatives=1, n_card_titles=4)


def _questions():
    return [Question(id=f"q{i}", text=f"Who makes Item {i}?", answer=f"Maker{i}", dataset="t",
                     gold_passages=[f"d{i}#p0"]) for i in range(6)]


class PerfectJudge:
    name = "perfect"

    def judge(self, items):
        return [(1.0, 1.0) if t.system.endswith("supported") and not t.system.endswith("unsupported")
                else (0.0, 0.0) for _, t in items]


def test_check_items_have_three_labelled_cases_per_question():
    items = judge_check.check_items(_questions(), _kmap(), n=2, seed=0)
    assert len(items) == 6 and [it.case for it in items[:3]] == list(judge_check.CASES)
    sup, uns, con = items[:3]
    assert (sup.consistency, sup.support, uns.support, con.consistency) == (1, 1, 0, 0)
    assert sup.question.answer in sup.trace.evidence()[0].content and sup.trace.answer == sup.question.answer
    assert sup.question.answer not in uns.trace.evidence()[0].content
    assert con.trace.answer != con.question.answer


def test_agreement_of_a_perfect_judge_and_of_the_lexical_proxy():
    items = judge_check.check_items(_questions(), _kmap(), n=3, seed=0)
    perfect = judge_check.agreement(PerfectJudge(), items)
    assert perfect["consistency_agreement"] == perfect["support_agreement"] == 1.0
    assert perfect["consistency_kappa"] == 1.0 and perfect["n"] == 9
    lexical = judge_check.agreement(LexicalJudge(), items)
    # the proxy sees the answer string in the evidence: it cannot catch an unsupported gold answer
    # hidden behind another page's summary only by chance, but it misses no supported one
    assert lexical["by_case"]["supported"]["support_yes"] == 3
    assert 0.0 <= lexical["support_agreement"] <= 1.0


def test_sampled_judge_scores_only_its_questions():
    items = judge_check.check_items(_questions(), _kmap(), n=2, seed=0)
    chosen = {items[0].question.id}
    out = SampledJudge(PerfectJudge(), chosen).judge([(it.question, it.trace) for it in items])
    assert out[:3] == [(1.0, 1.0), (0.0, 0.0), (0.0, 0.0)] and out[3:] == [(None, None)] * 3
