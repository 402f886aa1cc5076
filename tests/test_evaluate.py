"""The two-axis evaluator on hand-built traces whose metric values are known in advance."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mmrag.evaluate import evaluator, fidelity, judge, metrics, tables
from mmrag.evaluate.__main__ import main as cli
from mmrag.io import trace_name, write_jsonl
from mmrag.models.llm import Generation
from mmrag.schema import Evidence, Question, Step, Trace


def q_open(**kw) -> Question:
    base = dict(id="q1", text="Which company makes the Vantor X2?", answer="Helix Corp",
                dataset="infoseek", split="test_unseen_entity", answer_aliases=["Helix"],
                gold_passages=["d1#s0"], meta={"gold_unit": "u3"})
    base.update(kw)
    return Question(**base)


def q_mc() -> Question:
    return Question(id="q2", text="What colour is the logo?", answer="red", dataset="brit",
                    choices=["blue", "red", "green", "black"], gold_evidence=["d2#i0"])


def routed_trace(answer="Helix Corp", first_unit="u3") -> Trace:
    """Routes to `first_unit`, then u1; reads d1#s0#c0 first; one 5-token and one 3-token summary."""
    return Trace(question_id="q1", system="mmr2", answer=answer, tokens_in=100, tokens_out=20,
                 tool_calls=2, seconds=1.5, steps=[
                     Step(action="search", target=first_unit, query="Vantor X2 maker",
                          evidence=[Evidence(id="d1#s0#c0", kind="passage", unit="u3",
                                             content="The Vantor X2 is made by Helix Corp."),
                                    Evidence(id="d9#s1#c0", kind="passage", unit="u3",
                                             content="Unrelated text.")],
                          summary="Vantor X2 maker: Helix Corp", text="<think>find maker</think>"),
                     Step(action="search", target="u1", query="Helix",
                          evidence=[Evidence(id="d5#s0#c0", kind="passage", unit="u1")],
                          summary="nothing new ."),
                     Step(action="answer", text=f"<answer>{answer}</answer>")])


# --------------------------------------------------------------------------- answers
def test_normalisation_em_and_f1():
    assert metrics.normalize("The  Helix-Corp!") == "helixcorp"
    assert metrics.exact_match("the Helix Corp.", ["Helix Corp"]) == 1.0
    assert metrics.exact_match("Helix Corporation", ["Helix Corp"]) == 0.0
    # pred {helix, corporation} vs gold {helix, corp}: P = R = 1/2 -> F1 = 0.5
    assert metrics.token_f1("Helix Corporation", ["Helix Corp"]) == pytest.approx(0.5)
    assert metrics.token_f1("Helix", ["Helix Corp", "Helix"]) == 1.0  # best alias


def test_multiple_choice_by_text_letter_or_containment():
    q = q_mc()
    assert metrics.accuracy("red", q) == 1.0
    assert metrics.accuracy("B", q) == 1.0 and metrics.accuracy("(B) red", q) == 1.0
    assert metrics.accuracy("A", q) == 0.0
    assert metrics.accuracy("The logo is red.", q) == 1.0
    assert metrics.accuracy("red or blue", q) == 0.0  # names two choices: no choice
    assert metrics.resolved_answer("b", q) == "red"


def test_numeric_answers_within_ten_percent():
    q = Question(id="n", text="Height?", answer="120 m", dataset="infoseek")
    assert metrics.accuracy("about 130", q) == 1.0
    assert metrics.accuracy("140", q) == 0.0
    named = Question(id="m", text="Where?", answer="Bimeirk 7", dataset="infoseek")
    assert metrics.accuracy("assembled at site 7", named) == 0.0  # a name, not a quantity
    assert metrics.accuracy("Bimeirk 7", named) == 1.0
    year = Question(id="y", text="When?", answer="2026", dataset="infoseek")
    assert metrics.accuracy("2026", year) == 1.0
    assert metrics.accuracy("2027", year) == 0.0  # a year must be the year, not within 10 %
    assert metrics.accuracy("Vrodul Fair 2026", year) == 0.0  # a name holding the year
    assert metrics.accuracy("Vrodul Fair 130", q) == 0.0


def test_trace_file_names_split_at_the_last_separator():
    assert trace_name("data/x/traces/brit__ca_ls_si__brit_nea.jsonl") == (
        "brit__ca_ls_si", "brit_nea")
    assert trace_name("mine.jsonl") == ("mine", "mine")


# --------------------------------------------------------------------------- retrieval + process
def test_scores_of_a_routed_trace_are_the_known_values():
    s = metrics.score_trace(routed_trace(), q_open(), ks=(1, 2))
    assert (s.accuracy, s.em, s.f1) == (1.0, 1.0, 1.0)
    assert s.recall["1"] == 1.0  # the gold section's chunk is the first item read
    assert s.unit_hit["1"] == 1.0
    assert s.route_recall_at_1 == 1.0
    assert s.route_precision == 0.5  # u3 right, u1 wrong
    # "Vantor X2 maker: Helix Corp" = 6 tokens, "nothing new ." = 3 -> mean 4.5
    assert s.sparsity == 4.5 and s.n_summaries == 2
    assert (s.tokens, s.tool_calls) == (120, 2)


def test_wrong_route_and_wrong_answer():
    s = metrics.score_trace(routed_trace(answer="Vantor Labs", first_unit="u7"), q_open(), ks=(1,))
    assert s.accuracy == 0.0 and s.f1 == 0.0
    assert s.route_recall_at_1 == 0.0


def test_route_recall_at_1_intersects_the_first_steps_units_with_the_gold_set():
    # the paper intersects sets: a gold unit anywhere in the first step's list counts, not only the first one
    s = metrics.score_trace(routed_trace(first_unit="u7,u3"), q_open(), ks=(1,))
    assert s.route_recall_at_1 == 1.0 and s.route_precision == 0.5
    s = metrics.score_trace(routed_trace(first_unit="u3,u7"), q_open(), ks=(1,))
    assert s.route_recall_at_1 == 1.0
    s = metrics.score_trace(routed_trace(first_unit="u7,u8"), q_open(), ks=(1,))
    assert s.route_recall_at_1 == 0.0


def test_recall_at_k_counts_distinct_items_in_order():
    t = routed_trace()
    t.steps[0].evidence.reverse()  # the gold chunk is now second
    q = q_open()
    s = metrics.score_trace(t, q, ks=(1, 2))
    assert s.recall["1"] == 0.0 and s.recall["2"] == 1.0 and s.recall["all"] == 1.0


def test_recall_looks_for_gold_passages_before_gold_evidence():
    q = q_open(gold_evidence=["d1-s02"])
    assert metrics.gold_ids(q) == ["d1#s0"]
    assert metrics.gold_ids(q_mc()) == ["d2#i0"]


def test_id_matching_parts_but_not_prefixes():
    assert metrics.id_matches("d1#s0#c2", "d1#s0")
    assert metrics.id_matches("d1#s0", "d1#s0#c2")
    assert not metrics.id_matches("d1#s01", "d1#s0")


def test_gold_unit_from_passage_map():
    q = q_open(meta={})
    assert metrics.gold_units(q, {"d1#s0#c0": "u3", "d5#s0#c0": "u1"}) == {"u3"}
    assert metrics.gold_units(q, None) == set()


# --------------------------------------------------------------------------- judge
def test_lexical_judge_support_and_consistency():
    j = judge.LexicalJudge()
    [(cons, sup)] = j.judge([(q_open(), routed_trace())])
    assert cons == 1.0 and sup == 1.0
    [(cons, sup)] = j.judge([(q_open(), routed_trace(answer="Orbis Ltd"))])
    assert cons == 0.0 and sup == 0.0
    bare = Trace(question_id="q1", system="x", answer="Helix Corp")
    [(cons, sup)] = j.judge([(q_open(), bare)])
    assert cons is None and sup == 0.0  # nothing exposed: consistency is not judgeable
    assert judge.lexical_support("Helix Orbis", ["helix only"]) == 0.5
    assert "proxy" in j.name


def test_llm_judge_parses_replies():
    class Fake:
        name = "fake"

        def generate(self, convs, **kw):
            assert "consistency" in convs[0][0]["content"]
            return [Generation('{"consistency": 1, "support": 0.5}', 1, 1),
                    Generation("consistency: 0.5\nsupport: 2", 1, 1),
                    Generation("no idea", 1, 1)][:len(convs)]

    out = judge.LLMJudge(Fake()).judge([(q_open(), routed_trace())] * 3)
    assert out == [(1.0, 0.5), (0.5, 1.0), (None, None)]


# --------------------------------------------------------------------------- fidelity
def test_fidelity_prompt_holds_only_summaries_and_ratio():
    t = routed_trace()
    msgs = fidelity.summary_only_prompt(q_open(), t)
    text = msgs[1]["content"]
    assert "Vantor X2 maker: Helix Corp" in text and "Unrelated text" not in text

    class Echo:
        name = "echo"

        def generate(self, convs, **kw):
            return [Generation("<answer>Helix", 1, 1), Generation("Orbis\nmore", 1, 1)]

    items = [(q_open(), t), (q_open(id="q3"), routed_trace())]
    answers = fidelity.summary_only_answers(Echo(), items)
    assert answers == ["Helix", "Orbis"]
    out = fidelity.fidelity(items, answers, min_correct=2)
    assert out["acc_full"] == 1.0 and out["acc_summary_only"] == 0.5 and out["fidelity"] == 0.5


def test_fidelity_is_undefined_below_the_minimum_number_of_correct_answers():
    # one correct answer read back from its summary would otherwise report fidelity 1.0
    items = [(q_open(), routed_trace()), (q_open(id="q3"), routed_trace(answer="Orbis"))]
    out = fidelity.fidelity(items, ["Helix Corp", "Orbis"], min_correct=10)
    assert out["correct_full"] == 1 and out["fidelity"] is None
    assert "fidelity_min_correct" in out["undefined_because"]
    assert fidelity.fidelity(items, ["Helix Corp", "x"], min_correct=1)["fidelity"] == 1.0


# --------------------------------------------------------------------------- files + CLI
def test_missing_and_unknown_traces(tmp_path):
    qs = [q_open(), q_open(id="q9")]
    stray = routed_trace()
    stray.question_id = "zzz"
    with pytest.warns(UserWarning, match="unknown questions"):
        scored = evaluator.score([routed_trace(), stray], qs, ks=(1,))
    summary = evaluator.summarize(scored)
    assert summary["n"] == 2 and summary["answered"] == 1 and summary["accuracy"] == 0.5
    assert summary["route_recall@1"] == 0.5  # the untraced question never routed


def test_route_recall_is_not_applicable_for_systems_that_never_route():
    t = Trace(question_id="q1", system="brit", answer="Helix Corp",
              steps=[Step(action="retrieve", evidence=[Evidence(id="d1#s0", kind="text")])])
    summary = evaluator.summarize(evaluator.score([t], [q_open()], ks=(1,)))
    assert summary["route_recall@1"] is None and summary["recall@1"] == 1.0


def test_cli_scores_a_user_trace_file(tmp_path, capsys):
    qpath, tpath = tmp_path / "q.jsonl", tmp_path / "mine__demo.jsonl"
    write_jsonl(qpath, [q_open().to_dict(), q_mc().to_dict()])
    wrong_mc = Trace(question_id="q2", system="mine", answer="A")
    write_jsonl(tpath, [routed_trace().to_dict(), wrong_mc.to_dict()])
    out = tmp_path / "s.json"
    assert cli([str(tpath), "--questions", str(qpath), "--out", str(out), "--by", "split"]) == 0
    printed = capsys.readouterr().out
    assert "| demo | mine |" in printed  # the file name names the system and "proxy" in printed
    summaries = json.loads(out.read_text())
    assert summaries[0]["accuracy"] == 0.5 and summaries[0]["question_set"] == "demo"
    assert {s["question_set"] for s in summaries[1:]} == {
        "demo [split=test]", "demo [split=test_unseen_entity]"}


def test_cli_refuses_traces_of_another_question_set(tmp_path, capsys):
    qpath, tpath = tmp_path / "q.jsonl", tmp_path / "x__y.jsonl"
    write_jsonl(qpath, [q_mc().to_dict()])
    write_jsonl(tpath, [routed_trace().to_dict()])
    assert cli([str(tpath), "--questions", str(qpath)]) == 2
    assert "none of its 1 traces" in capsys.readouterr().err


# --------------------------------------------------------------------------- tables
def test_tables_put_ours_beside_the_papers():
    ours = {"SFT": {"overall": {"accuracy": 0.25}}}
    df = tables.training_table(ours)
    row = df[df.model == "SFT"].iloc[0]
    assert row["overall (ours)"] == 25.0 and row["overall (paper)"] == 53.8
    md = tables.markdown(df)
    assert md.splitlines()[0].startswith("| model |") and "–" in md
    cross = tables.cross_system_table([{"system": "b", "question_set": "s", "accuracy": 0.6},
                                       {"system": "a", "question_set": "s", "accuracy": 0.2,
                                        "cost": {"seconds_per_q": 1.0}}])
    # sorted by set and system, never by our own score
    assert list(cross.system) == ["a", "b"] and cross.seconds_per_q.iloc[0] == 1.0


def test_training_table_puts_the_papers_split_columns_where_the_paper_does():
    # 13.3 / 53.6 / 54.1 are the unseen-question split (paper §6.2, §6.4)
    df = tables.training_table({}).set_index("model")
    assert list(df["unseen_question (paper)"]) == [13.3, 53.6, 54.1]
    assert list(df["unseen_entity (paper)"]) == [11.1, 55.1, 56.0]


def test_ablation_never_shows_the_papers_km_only_number_beside_another_configuration():
    # the paper's 30.2 is KM routing only, so it never sits beside the intent-binding-only row
    ours = {"intent binding only (no KM, no loop; not in the paper)": {"accuracy": 0.25, "n": 4}}
    df = tables.ablation_table(ours).set_index("configuration")
    assert df.loc["KM routing only (no intent, no loop)", "accuracy (paper)"] == 30.2
    assert df.loc["KM routing only (no intent, no loop)", "accuracy (ours)"] == "not run"
    intent = df.loc["intent binding only (no KM, no loop; not in the paper)"]
    assert intent["accuracy (ours)"] == 25.0 and pd.isna(intent["accuracy (paper)"])
    assert tables.ABLATION_RUNS["KM routing only (no intent, no loop)"] == "ablation_km"


def test_cross_system_recall_counts_alternative_pictures_as_any_of():
    # BRIT's gold lists every picture of the entity; one of them is enough
    q = Question(id="b1", text="?", answer="red", dataset="brit", choices=["red", "blue"],
                 gold_evidence=["img-001", "img-002", "img-003", "doc-a-s01", "img-004"])
    t = Trace(question_id="b1", system="brit", answer="red", steps=[Step(
        action="retrieve", evidence=[Evidence(id="doc-a-s01", kind="triplet"),
                                     Evidence(id="img-003", kind="image")])])
    assert metrics.gold_groups(q) == [["doc-a-s01"], ["img-001", "img-002", "img-003", "img-004"]]
    s = metrics.score_trace(t, q, ks=(1, 5))
    assert s.recall["5"] == 1.0 and s.recall["1"] == 0.5  # not 2/5 = 0.4, as if every picture were needed
    mmqa = Question(id="m", text="?", answer="x", dataset="mmqa", gold_evidence=["a", "b"])
    assert metrics.gold_groups(mmqa) == [["a"], ["b"]]  # multi-hop gold: every piece needed


def test_a_run_without_reader_has_no_accuracy_and_is_labelled():
    # BRIT's NEA runs retrieve only: no accuracy, rather than an accuracy of 0 with nothing answered
    q = q_mc()
    t = Trace(question_id="q2", system="brit", answer="",
              steps=[Step(action="retrieve", evidence=[Evidence(id="d2#i0", kind="image")],
                          summary="entities=[]; kept graphs=[0]")])
    summary = evaluator.summarize(evaluator.score([t], [q], ks=(5,)))
    assert summary["retrieval_only"] and summary["accuracy"] is None and summary["recall@5"] == 1.0
    summary.update(system="brit", question_set="brit_nea")
    row = tables.cross_system_table([summary]).iloc[0]
    assert row.system == "brit (retrieval only, no reader)" and row.accuracy is None


def test_sparsity_ignores_retrieval_bookkeeping_and_says_how_many_questions_it_covers():
    # BRIT's "summary" is a debug string, not a summary; sparsity_n says how many questions had one
    brit = Trace(question_id="q2", system="brit", answer="red",
                 steps=[Step(action="retrieve", summary="entities=['Vantor']; kept graphs=[3, 4]"),
                        Step(action="answer", text="red")])
    assert metrics.sparsity(brit) is None and metrics.summaries(brit) == []
    scored = evaluator.score([routed_trace()], [q_open(), q_open(id="q9")], ks=(1,))
    summary = evaluator.summarize(scored)
    assert summary["sparsity_tokens"] == 4.5 and summary["sparsity_n"] == 1 and summary["n"] == 2


def test_numeric_tolerance_applies_to_infoseek_only():
    # DnC's sets are scored by exact match (a numeric tolerance there would put accuracy above F1)
    infoseek = Question(id="n", text="Height?", answer="120", dataset="infoseek")
    mmqa = Question(id="n", text="Height?", answer="120", dataset="mmqa")
    assert metrics.accuracy("125", infoseek) == 1.0
    assert metrics.accuracy("125", mmqa) == 0.0 and metrics.accuracy("120", mmqa) == 1.0


def test_lexical_judge_does_not_rate_format_error_turns_as_consistent():
    # every turn a format error and a summary that only echoes the answer: not consistent
    q = Question(id="d1", text="Who makes it?", answer="Helix", dataset="mmqa")
    t = Trace(question_id="d1", system="dnc", answer="Helix", format_errors=2, steps=[
        Step(action="think", text="Helix Helix [Ans", format_error="no tool call"),
        Step(action="answer", text="[Answer: Helix]", summary="Helix")])
    [(cons, _)] = judge.LexicalJudge().judge([(q, t)])
    assert cons == 0.0


def test_summaries_report_a_95_percent_interval_and_n_for_each_rate():
    qs = [q_open(id=f"q{i}") for i in range(10)]
    traces = [routed_trace() if i < 5 else routed_trace(answer="Orbis") for i in range(10)]
    for t, q in zip(traces, qs):
        t.question_id = q.id
    summary = evaluator.summarize(evaluator.score(traces, qs, ks=(1,)))
    lo, hi, n = summary["ci"]["accuracy"]
    assert (lo, hi, n) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4), 10)


def test_process_table_names_the_judge():
    df = tables.process_table({"SFT": {"route_recall@1": 0.5, "judge_support": 0.25}}, judge="proxy")
    row = df.set_index("metric")
    assert row.loc["route_recall@1", "SFT (ours)"] == 0.5
    assert row.loc["route_recall@1", "MM-R2 (paper)"] == 0.74
    assert row.loc["judge_support [proxy]", "SFT (ours)"] == 0.25


def test_cli_reads_units_from_a_knowledge_map_folder(tmp_path, capsys):
    qpath, tpath, kmap = tmp_path / "q.jsonl", tmp_path / "a__s.jsonl", tmp_path / "map"
    write_jsonl(qpath, [q_open(meta={}).to_dict()])
    write_jsonl(tpath, [routed_trace().to_dict()])
    write_jsonl(kmap / "passages.jsonl", [{"id": "d1#s0#c0", "unit": "u3"}, {"id": "d5#s0#c0", "unit": "u1"}])
    out = tmp_path / "s.json"
    assert cli([str(tpath), "--questions", str(qpath), "--units", str(kmap), "--out", str(out)]) == 0
    assert json.loads(out.read_text())[0]["route_recall@1"] == 1.0
    with pytest.raises(SystemExit, match="--units"):
        cli([str(tpath), "--questions", str(qpath), "--units", str(qpath)])


def test_brit_table1_average_is_over_the_two_complex_kinds():
    # the paper's avg is (Text-Image + Image-Text) / 2; Image-Image is not averaged in
    from mmrag.stages.brit_linking import table1_row

    rows = ([{"kind": "Text-Image", "correct": c} for c in (1, 1, 0, 0)]
            + [{"kind": "Image-Text", "correct": c} for c in (1, 1, 1, 0)]
            + [{"kind": "Image-Image", "correct": 0} for _ in range(4)])
    row = table1_row(rows)
    assert row["avg"] == 0.625 and row["Image-Image"] == 0.0  # not (0.5 + 0.75 + 0) / 3
