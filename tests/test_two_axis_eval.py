"""The two_axis_eval stage's helpers on tiny hand-built questions and traces (no model loaded)."""

from __future__ import annotations

import hashlib

from mmrag.evaluate import tables
from mmrag.evaluate.judge import LexicalJudge
from mmrag.io import write_traces
from mmrag.schema import Question, Step, Trace
from mmrag.stages import two_axis_eval as stage


def question(qid: str, split: str, answer: str = "Helix") -> Question:
    return Question(id=qid, text=f"Who makes {qid}?", answer=answer, dataset="infoseek", split=split)


def trace(q: Question, system: str, right: bool) -> Trace:
    return Trace(question_id=q.id, system=system, answer=q.answer if right else "nobody",
                 steps=[Step(action="answer", text="<answer>x</answer>")])


def test_questions_are_a_seeded_sample_per_split_in_split_order():
    qs = [question(f"e{i}", "test_unseen_entity") for i in range(8)] + \
         [question(f"u{i}", "test_unseen_question") for i in range(8)] + [question("t", "train")]
    got = stage.sample_questions(qs, ["test_unseen_question", "test_unseen_entity"], 3, seed=7)

    def seeded(items, n):  # the seeded sample written out longhand: the first n by salted hash
        return sorted(items, key=lambda q: hashlib.sha1(f"7:{q.id}".encode()).hexdigest())[:n]

    assert got == (seeded([q for q in qs if q.split == "test_unseen_question"], 3)
                   + seeded([q for q in qs if q.split == "test_unseen_entity"], 3))


def test_effects_read_the_direction_of_each_step():
    qs = [question("e1", "test_unseen_entity"), question("u1", "test_unseen_question")]
    right = {"mmr2_base": 0, "mmr2_sft": 1, "mmr2_grpo": 2, "ablation_flat": 0, "ablation_km": 0,
             "ablation_intent_km": 1, "mmr2_grpo_top1": 0}
    scores = {}
    for name, n_right in right.items():
        traces = [trace(q, name, i < n_right) for i, q in enumerate(qs)]
        scores[name] = stage.score(traces, qs, _Cfg(), {}, LexicalJudge(), name)
    checks = dict(stage.effects(scores, {1: "mmr2_grpo_top1", 3: "mmr2_grpo"}))
    assert checks == {"SFT beats the zero-shot base": True, "GRPO beats SFT": True,
                      "KM routing beats flat retrieval (single shot)": False,  # a tie does not count
                      "intent binding on top of KM routing helps (single shot)": True,
                      "the agent loop beats single-shot routing": True,
                      "training raises Route Recall@1": False,  # nothing routed: None -> 0
                      "more passages per search help": True}
    metrics = stage.stage_metrics("proxy", qs, scores, {}, {}, [], list(checks.items()))
    assert metrics["training_table"]["SFT+GRPO"] == {"unseen_entity": 1.0, "unseen_question": 1.0,
                                                     "overall": 1.0}
    assert all("cost" not in s for s in metrics["mmr2"].values())  # no timings in metrics.json


def test_other_systems_traces_are_found_by_file_name(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(stage, "DATA", tmp_path)
    monkeypatch.setattr(stage, "ROOT", tmp_path)
    (tmp_path / "world" / "questions").mkdir(parents=True)
    (tmp_path / "world" / "questions" / "mmqa.jsonl").write_text("")
    q = question("m1", "test")
    write_traces("toolagent_eval", "dnc_smollm2", "mmqa", [trace(q, "dnc", True)], data=tmp_path)
    write_traces("toolagent_eval", "react", "nowhere", [trace(q, "react", True)], data=tmp_path)
    found = stage.other_traces(_Cfg())
    assert list(found) == ["mmqa"] and list(found["mmqa"]) == ["toolagent_eval:dnc_smollm2"]
    out = capsys.readouterr().out
    assert "no question file for set 'nowhere'" in out and "no traces yet from: brit_linking" in out


class _Cfg:
    """The two_axis_eval params these helpers read."""

    recall_k = (1, 5)
    corpus = "world"
    text_corpus = "wiki"
    trace_stages = ("brit_linking", "toolagent_eval")


def test_reader_ceiling_sits_beside_each_policy():
    qs = [question("e1", "test_unseen_entity"), question("u1", "test_unseen_question")]
    right = {"mmr2_base": 0, "mmr2_sft": 1, "mmr2_grpo": 1, "ceiling_base": 1, "ceiling_sft": 2,
             "ceiling_grpo": 2}
    scores = {name: stage.score([trace(q, name, i < n) for i, q in enumerate(qs)], qs, _Cfg(), {},
                                LexicalJudge(), name) for name, n in right.items()}
    table = stage.ceiling_table(scores).set_index("policy")
    assert table.loc["SFT", "accuracy with retrieval"] == 0.5
    assert table.loc["SFT", "reader ceiling (gold passages)"] == 1.0
    assert table.loc["SFT", "ceiling 95% CI"].endswith("n=2")
    assert stage.ceiling_metrics(scores)["mmr2_base"] == {
        "accuracy": 0.0, "n": 2, "accuracy_on_ceiling_questions": 0.0, "ceiling": 0.5, "ceiling_n": 2}


def test_a_run_is_set_beside_a_descriptive_run_on_the_questions_both_were_asked():
    # the policy read 4 questions (right on the first 2); its ceiling and the top-1 budget run only
    # the last 2: beside them it is compared on those 2 (0/2), not on all 4 (2/4)
    qs = [question(f"e{i}", "test_unseen_entity") for i in range(4)]
    runs = {"mmr2_base": (qs, 0), "mmr2_sft": (qs, 2), "mmr2_grpo": (qs, 2), "ceiling_base": (qs[2:], 0),
            "ceiling_sft": (qs[2:], 2), "ceiling_grpo": (qs[2:], 2), "mmr2_grpo_top1": (qs[2:], 1)}
    scores = {}
    for name, (asked, n) in runs.items():
        traces = [trace(q, name, i < n) for i, q in enumerate(asked)]
        scores[name] = stage.score(traces, stage.asked(traces, qs), _Cfg(), {}, LexicalJudge(), name)
    row = stage.ceiling_metrics(scores)["mmr2_sft"]
    assert (row["accuracy"], row["n"]) == (0.5, 4)
    assert (row["accuracy_on_ceiling_questions"], row["ceiling"], row["ceiling_n"]) == (0.0, 1.0, 2)
    table = stage.ceiling_table(scores).set_index("policy")
    assert table.loc["SFT", "95% CI (same questions)"].endswith("n=2")
    by_k = stage.budget_summaries(scores, {1: "mmr2_grpo_top1", 3: "mmr2_grpo"})
    assert (by_k[3]["n"], by_k[3]["accuracy"], by_k[1]["accuracy"]) == (2, 0.0, 0.5)
    budget = tables.budget_table(by_k).set_index("top_k")
    assert budget.loc[3, "n"] == 2 and budget.loc[3, "95% CI (ours)"].endswith("n=2")


def test_a_run_asked_a_subset_is_scored_on_that_subset():
    qs = [question(f"e{i}", "test_unseen_entity") for i in range(4)]
    ceiling = [trace(q, "ceiling_sft", True) for q in qs[:2]]  # asked the first two, both right
    got = stage.asked(ceiling, qs)
    assert got == qs[:2]
    summary = stage.score(ceiling, got, _Cfg(), {}, LexicalJudge(), "ceiling_sft")[1]
    assert summary["n"] == 2 and summary["accuracy"] == 1.0
    # scored on the whole set instead, the two questions it was never asked would count as wrong
    assert stage.score(ceiling, qs, _Cfg(), {}, LexicalJudge(), "ceiling_sft")[1]["accuracy"] == 0.5


def test_token_counts_sum_each_runs_traces_and_read_each_engines_usage():
    from mmrag.models.generation import Usage

    def traced(qid, tin, tout, turns):
        return Trace(question_id=qid, system="s", answer="a", steps=[Step(action="search")] * turns,
                     tokens_in=tin, tokens_out=tout)

    usage = Usage()
    usage.add(prompt=120, cached=880, completion=40, prompt_s=1.25, decode_s=0.5)

    class Engine:
        pass

    engine = Engine()
    engine.usage = usage
    counts = stage.token_counts({"mmr2_sft": [traced("q1", 1000, 40, 2), traced("q2", 500, 10, 1)]},
                              {"sft": engine, "remote": object()})
    assert counts["per_run"] == {"mmr2_sft": {"questions": 2, "turns": 3, "prompt_tokens": 1500,
                                              "completion_tokens": 50}}
    assert counts["engine_usage"] == {"sft": {"calls": 1, "prompt_tokens": 120, "cached_tokens": 880,
                                              "completion_tokens": 40, "prompt_seconds": 1.2, "decode_seconds": 0.5}}


class _Reply:
    def __init__(self, text: str) -> None:
        self.text = text


class _NotesReader:
    """A backbone that answers from the notes: right when the summary names the answer."""

    def generate(self, conversations, **kw):
        return [_Reply("<answer>Helix" if "Helix" in c[-1]["content"] else "<answer>nobody") for c in conversations]


def test_fidelity_keeps_each_summary_only_answer_as_a_trace_the_claims_can_pair(tmp_path, monkeypatch):
    from mmrag.evaluate import claims

    monkeypatch.setattr(stage, "DATA", tmp_path)
    qs = [question(f"q{i}", "test_unseen_entity") for i in range(4)]

    def run(system):  # all four right; the summary names the answer on the first three only
        return [Trace(question_id=q.id, system=system, answer="Helix",
                      steps=[Step(action="search", summary="made by Helix" if i < 3 else "a red car"),
                             Step(action="answer", text="<answer>Helix</answer>")]) for i, q in enumerate(qs)]

    runs = {"mmr2_sft": run("mmr2_sft"), "mmr2_grpo": run("mmr2_grpo")}
    scores = {name: ([], {}) for name in runs}
    fid = stage.fidelity_scores({"sft": _NotesReader(), "grpo": _NotesReader()}, runs, qs, scores, 2, "infoseek")
    assert fid["mmr2_grpo"]["fidelity"] == 0.75 and scores["mmr2_grpo"][1]["fidelity"] == 0.75
    kept = claims.right_answers("two_axis_eval", "mmr2_grpo" + claims.SUMMARY_ONLY, "infoseek",
                                {q.id: q for q in qs}, tmp_path)
    assert kept == {"q0": 1.0, "q1": 1.0, "q2": 1.0, "q3": 0.0}


def test_the_loop_claims_sample_holds_the_main_sample_first_in_each_split():
    from dataclasses import replace

    from mmrag import config

    qs = [question(f"e{i}", "test_unseen_entity") for i in range(9)] + \
         [question(f"u{i}", "test_unseen_question") for i in range(9)]
    cfg = replace(config.load().two_axis_eval, splits=("test_unseen_entity", "test_unseen_question"),
                  per_split=3, claim_per_split=5)
    main, claim = stage.claim_sample(qs, cfg, seed=1)
    assert len(main) == 6 and len(claim) == 10
    for split in cfg.splits:
        in_split = [q for q in claim if q.split == split]
        assert in_split[:3] == [q for q in main if q.split == split]
    # a claim sample below per_split is the main sample
    assert stage.claim_sample(qs, replace(cfg, claim_per_split=1), seed=1) == (main, main)


class _Fixed:
    """A system that answers right on the questions it is told to."""

    def __init__(self, name, right):
        self.name, self.right = name, right

    def answer(self, questions):
        return [trace(q, self.name, q.id in self.right) for q in questions]


def test_only_the_loop_claims_pair_reads_the_extra_questions_and_the_claim_is_decided_on_them(tmp_path, monkeypatch):
    from dataclasses import replace

    from mmrag import config
    from mmrag.evaluate import claims
    from mmrag.io import write_jsonl

    monkeypatch.setattr(stage, "DATA", tmp_path)
    monkeypatch.setattr("mmrag.io.DATA", tmp_path)
    main = [question(f"m{i}", "test_unseen_entity") for i in range(4)]
    extra = [question(f"x{i}", "test_unseen_entity") for i in range(6)]
    write_jsonl(tmp_path / "world" / "questions" / "infoseek.jsonl", [q.to_dict() for q in main + extra])
    everyone = {q.id for q in main + extra}
    monkeypatch.setattr(stage, "make_agent", lambda name, *a, **k: _Fixed(name, everyone))
    monkeypatch.setattr(stage, "intent_km", lambda *a, **k: _Fixed("ablation_intent_km", set()))
    runs = {"mmr2_grpo": [trace(q, "mmr2_grpo", True) for q in main],
            "ablation_intent_km": [trace(q, "ablation_intent_km", False) for q in main]}
    cfg = replace(config.load().two_axis_eval, question_set="infoseek")
    cost: dict[str, float] = {}
    out = stage.loop_claim_runs(None, None, None, runs, extra, [None] * len(extra), cfg,
                                config.load().mmr2_train, cost)
    assert [t.question_id for t in out["mmr2_grpo"]] == [q.id for q in main + extra]
    assert set(cost) == {"mmr2_grpo__infoseek_claim", "ablation_intent_km__infoseek_claim"}
    assert sorted(p.name for p in (tmp_path / "two_axis_eval" / "traces").iterdir()) == [
        "ablation_intent_km__infoseek_claim.jsonl", "mmr2_grpo__infoseek_claim.jsonl"]
    loop = next(c for c in claims.registry() if c.id == "mmr2.ablation_loop")
    assert loop.question_set == "infoseek_claim"
    decided = claims.decide(loop, {q.id: q for q in main + extra}, {}, tmp_path, 0.05, 0.8, 200, 0, None)
    assert decided.n == 10 and decided.estimate == 1.0


class _Counting:
    """A system that answers every question right and counts how often it was asked."""

    def __init__(self, name):
        self.name, self.calls = name, 0

    def answer(self, questions):
        self.calls += 1
        return [Trace(question_id=q.id, system=self.name, answer=q.answer, seconds=1.5) for q in questions]


def test_a_finished_run_is_read_back_only_under_its_own_stamp(tmp_path, monkeypatch):
    monkeypatch.setattr("mmrag.io.DATA", tmp_path)
    qs = [question(f"q{i}", "test_unseen_entity") for i in range(3)]
    system, cost = _Counting("mmr2_grpo"), {}
    first = stage.answer_and_save(system, qs, "infoseek", cost, stamp="s1")
    assert system.calls == 1 and (tmp_path / ".checkpoints" / "two_axis_eval" / "mmr2_grpo__infoseek.json").exists()
    # an interrupted stage's rerun: the finished run is read back, its cost is what its traces recorded
    again = stage.answer_and_save(system, qs, "infoseek", cost, stamp="s1")
    assert system.calls == 1 and again == first and cost["mmr2_grpo__infoseek"] == 4.5
    assert (tmp_path / "two_axis_eval" / "traces" / "mmr2_grpo__infoseek.jsonl").exists()
    # another stage fingerprint, other questions, another set, or no stamp: answered again
    stage.answer_and_save(system, qs, "infoseek", cost, stamp="s2")
    stage.answer_and_save(system, qs[:2], "infoseek", cost, stamp="s2")
    stage.answer_and_save(system, qs[:2], "infoseek_claim", cost, stamp="s2")
    stage.answer_and_save(system, qs[:2], "infoseek_claim", cost)
    assert system.calls == 5


def test_the_runs_fingerprint_follows_policies_maps_and_answering_settings_not_the_judge(tmp_path):
    from dataclasses import replace

    from mmrag import config
    from mmrag.mmr2.agent import PAPER_VIEW

    params = config.load()
    adapter = tmp_path / "mmr2_train" / "grpo" / "adapter_model.safetensors"
    units = tmp_path / "knowledge_map" / params.two_axis_eval.corpus / "units.json"
    for f, text in ((adapter, "weights"), (units, "[]")):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    stamp = stage.runs_fingerprint(params, PAPER_VIEW, data=tmp_path)
    cfg = params.two_axis_eval
    other_judge = replace(params, two_axis_eval=replace(cfg, judge="llm" if cfg.judge == "proxy" else "proxy",
                                                        per_split=cfg.per_split + 1))
    assert stage.runs_fingerprint(other_judge, PAPER_VIEW, data=tmp_path) == stamp
    changed = [stage.runs_fingerprint(replace(params, two_axis_eval=replace(cfg, max_new_tokens=7)),
                                      PAPER_VIEW, data=tmp_path)]
    adapter.write_text("other weights")
    changed.append(stage.runs_fingerprint(params, PAPER_VIEW, data=tmp_path))
    adapter.write_text("weights")
    units.write_text('[{"id": "u0"}]')
    changed.append(stage.runs_fingerprint(params, PAPER_VIEW, data=tmp_path))
    assert stamp not in changed and len(set(changed)) == 3


def test_before_after_sets_each_step_old_and_new_on_the_same_questions_with_paired_effects():
    qs = [question(f"e{i}", "test_unseen_entity") for i in range(6)]
    right = {"ablation_flat": 1, "ablation_km": 2, "ablation_intent_km": 2, "mmr2_grpo": 3,
             "row_flat": 2, "row_km": 2, "row_intent_km": 3, "row_full": 4}
    scores = {}
    for name, n in right.items():
        asked = qs if name.startswith("ablation") or name == "mmr2_grpo" else qs[:4]  # rows read a subset
        scores[name] = stage.score([trace(q, name, i < n) for i, q in enumerate(asked)], asked, _Cfg(), {},
                                   LexicalJudge(), name)
    table = stage.before_after(scores).set_index("step")
    assert list(table.index) == ["flat retrieval", "+ KM routing", "+ intent binding", "+ agentic loop"]
    assert table.loc["+ agentic loop", "before accuracy"] == 0.75  # mmr2_grpo on the rows' 4 questions
    assert table.loc["+ agentic loop", "after accuracy"] == 1.0
    assert table.loc["+ agentic loop", "after 95% CI"].endswith("n=4")
    assert table.loc["+ agentic loop", "after: effect of the step"].startswith("+0.250 [")
    assert table.loc["+ KM routing", "before: effect of the step"].startswith("+0.250")
    rows = stage.records(stage.before_after(scores))  # as metrics.json gets them: no NaN
    assert rows[0]["before: effect of the step"] is None and rows[1]["after accuracy"] == 0.5
    e = stage.paired_effect(scores["row_full"][0], scores["row_flat"][0])
    assert (e["effect"], e["n"]) == (0.5, 4) and e["low"] < 0.5 < e["high"]


def test_loop_metrics_count_searches_of_every_agent_run_and_pair_the_loop_row_with_one_search():
    qs = [question(f"e{i}", "test_unseen_entity") for i in range(3)]

    def run(name, answers, searches):
        return [Trace(question_id=q.id, system=name, answer=a,
                      steps=[*(Step(action="search", target="U01") for _ in range(n)), Step(action="answer")])
                for q, a, n in zip(qs, answers, searches)]

    runs = {"mmr2_grpo": run("mmr2_grpo", ["Helix"] * 3, [1, 1, 1]),
            "row_intent_km": run("row_intent_km", ["Helix", "no", "no"], [1, 1, 1]),
            "row_full": run("row_full", ["Helix", "Helix", "no"], [1, 2, 3])}
    scores = {n: stage.score(t, qs, _Cfg(), {}, LexicalJudge(), n) for n, t in runs.items()}
    loop = stage.loop_metrics(runs, scores)
    assert loop["mmr2_grpo"]["searches_per_question"] == 1.0 and loop["mmr2_grpo"]["share_two_plus_searches"] == 0.0
    full = loop["row_full"]
    assert full["searches_per_question"] == 2.0 and full["second_search_questions"] == 2
    assert (full["answer_changed"], full["wrong_to_right"], full["right_to_wrong"]) == (1, 1, 0)
    table = stage.loop_table(loop).set_index("run")
    assert table.loc["row_full", "answer_changed_share"] == 0.5


def test_the_ablation_rows_run_one_agent_each_and_reuse_the_headline_agent_where_they_match(tmp_path, monkeypatch):
    from dataclasses import replace

    from mmrag import config
    from mmrag.mmr2.intent import Intent

    monkeypatch.setattr(stage, "DATA", tmp_path)
    monkeypatch.setattr("mmrag.io.DATA", tmp_path)
    built = []
    monkeypatch.setattr(stage.ablation, "build", lambda row, *a, **k: built.append(row.name) or _Fixed(row.name, set()))
    qs = [question(f"e{i}", "test_unseen_entity") for i in range(3)] + \
         [question(f"u{i}", "test_unseen_question") for i in range(3)]
    cfg = replace(config.load().two_axis_eval, splits=("test_unseen_entity", "test_unseen_question"),
                  ablation_per_split=2, ablation_router="policy", question_set="infoseek")
    runs = {"mmr2_grpo": [trace(q, "mmr2_grpo", True) for q in qs]}
    out = stage.ablation_runs(None, None, None, qs, [Intent("n", "r", "")] * 6, runs, cfg, config.load().mmr2_train, {})
    assert built == ["row_flat", "row_km", "row_intent_km", "row_full_other_router"]
    assert [t.question_id for t in out["row_full"]] == ["e0", "e1", "u0", "u1"]
    assert {t.system for t in out["row_full"]} == {"row_full"}  # the agent's traces, renamed
    assert (tmp_path / "two_axis_eval" / "traces" / "row_full__infoseek.jsonl").exists()
    configs = stage.ablation_configs(cfg, config.load().mmr2_train)
    assert configs["row_km"]["router"] == "policy" and configs["row_full_other_router"]["router"] == "embedding"
