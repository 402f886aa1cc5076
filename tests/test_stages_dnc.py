"""The DnC stage modules' helpers (toolagent_data, toolagent_finetune, toolagent_eval) on tiny inputs."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter, defaultdict
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
    """A by-kind stratified sample written out longhand: each kind's questions shuffled by one
    seeded RNG, then one question per kind in turn (kinds sorted) until ``n`` are drawn."""
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
def test_round_robin_draws_each_kind_in_turn_from_a_seeded_shuffle(n, seed):
    qs = questions()
    got = round_robin(qs, n, seed, by=lambda q: q.kind)
    assert [q.id for q in got] == [q.id for q in stratified(qs, n, seed)]
    counts = Counter(q.kind for q in got)
    assert len(got) == min(n, len(qs))
    if n <= 15:  # no kind has run out (each has at least 5): the kinds stay balanced
        assert max(counts.values()) - min(counts.values()) <= 1 and len(counts) == min(n, 3)


def dialogue_rows(n: int = 40) -> list[dict]:
    """DnC rows of 30 'tokens', mm-ReAct rows of 40; every third question single-hop."""
    return [{"question_id": f"q{i}", "strategy": s, "split": "train", "dataset": "mmqa",
             "hops": 1 if i % 3 == 0 else 2, "size": 30 if s == "dnc" else 40}
            for i in range(n) for s in ("dnc", "react")]


def test_training_samples_have_equal_token_budgets_one_order_and_the_target_share():
    rows = dialogue_rows()
    order = toolagent_finetune.question_order(rows, seed=0)
    assert order == toolagent_finetune.question_order(rows, seed=0) != toolagent_finetune.question_order(rows, seed=1)
    count = lambda r: r["size"]  # noqa: E731
    dnc = toolagent_finetune.training_sample(rows, "dnc", order, 600, 0.5, count)
    react = toolagent_finetune.training_sample(rows, "react", order, 600, 0.5, count)
    assert all(r["strategy"] == "dnc" for r in dnc) and all(r["strategy"] == "react" for r in react)
    assert sum(map(count, dnc)) == sum(map(count, react)) == 600  # the same budget...
    assert len(dnc) == 20 and len(react) == 15  # ...buys fewer of the longer dialogues
    assert sum(r["hops"] > 1 for r in dnc) == 10 and sum(r["hops"] > 1 for r in react) in (7, 8)
    shared = {r["question_id"] for r in react} - {r["question_id"] for r in dnc}
    assert not shared  # the smaller sample's questions are all in the bigger one
    high = toolagent_finetune.training_sample(rows, "dnc", order, 600, 0.9, count)
    assert sum(r["hops"] > 1 for r in high) == 18
    plain = toolagent_finetune.training_sample(rows, "dnc", order, 10_000, None, count)
    assert [r["question_id"] for r in plain] == order  # no share: the seeded order, all of it
    table = toolagent_finetune.sample_table({"dnc": dnc, "react": react}, count)
    assert table.loc["dnc", "tokens"] == 600 and table.loc["react", "multi_hop_share"] > 0.45


def test_target_share_reads_the_data_stage_summary(tmp_path):
    cfg = config.load().toolagent_finetune
    (tmp_path / "toolagent_data").mkdir()
    (tmp_path / "toolagent_data" / "summary.json").write_text('{"target_multi_hop_share": 0.71}')
    assert toolagent_finetune.target_share(cfg, tmp_path) == (0.71 if cfg.multi_hop_share is None
                                                               else cfg.multi_hop_share)
    from dataclasses import replace

    assert toolagent_finetune.target_share(replace(cfg, multi_hop_share=0.5), tmp_path) == 0.5
    assert toolagent_finetune.target_share(replace(cfg, multi_hop_share=None), tmp_path / "none") is None


def test_one_adapter_per_llm_and_strategy_plus_the_qlora_twin():
    from dataclasses import replace

    cfg = replace(config.load().toolagent_finetune, llms=("a", "b"), strategies=("dnc", "react"),
                  quantize_4bit=False, qlora_compare="", seeds=(0,), seed_llms=())
    assert toolagent_finetune.runs_of(cfg) == [("a", "dnc", False, 0), ("a", "react", False, 0),
                                               ("b", "dnc", False, 0), ("b", "react", False, 0)]
    assert toolagent_finetune.runs_of(replace(cfg, qlora_compare="b"))[-1] == ("b", "dnc-qlora", True, 0)
    assert toolagent_finetune.runs_of(replace(cfg, qlora_compare="b", quantize_4bit=True))[-1] == \
        ("b", "dnc-lora", False, 0)
    # further seeds: one adapter per LLM, strategy and seed, named <strategy>@seed<k> (the first keeps its name)
    seeded = toolagent_finetune.runs_of(replace(cfg, llms=("a",), seeds=(0, 1, 2), seed_llms=("a",)))
    assert seeded == [("a", "dnc", False, 0), ("a", "react", False, 0), ("a", "dnc@seed1", False, 1),
                      ("a", "react@seed1", False, 1), ("a", "dnc@seed2", False, 2), ("a", "react@seed2", False, 2)]
    assert [toolagent_finetune.strategy_of(r) for _, r, _, _ in seeded] == ["dnc", "react"] * 3
    assert toolagent_finetune.strategy_of("dnc-qlora") == "dnc"
    with pytest.raises(config.ConfigError):
        toolagent_finetune.runs_of(replace(cfg, qlora_compare="c"))
    # a further seed retrains the seed LLMs only (the ones the claims re-answer), never a stranger
    only_b = toolagent_finetune.runs_of(replace(cfg, seeds=(0, 1), seed_llms=("b",)))
    assert [(n, r) for n, r, _, k in only_b if k == 1] == [("b", "dnc@seed1"), ("b", "react@seed1")]
    with pytest.raises(config.ConfigError, match="seed_llms"):
        toolagent_finetune.runs_of(replace(cfg, seed_llms=("c",)))
    # the evaluation loads each strategy's own adapter
    from pathlib import Path

    got = toolagent_eval.strategy_adapter(Path("data"), "a", "react")
    assert got == Path("data/toolagent_finetune/a/react/adapter")
    assert toolagent_eval.strategy_adapter(Path("data"), "a", "dnc", "ft@seed2") == \
        Path("data/toolagent_finetune/a/dnc@seed2/adapter")


def test_every_strategy_trains_on_the_same_question_ids():
    rows = dialogue_rows()
    rows = [r for r in rows if not (r["strategy"] == "react" and r["question_id"].endswith("3"))]
    common = toolagent_finetune.shared_questions(rows, ["dnc", "react"])
    assert common and not any(q.endswith("3") for q in common)
    order = [q for q in toolagent_finetune.question_order(rows, 0) if q in common]
    lead = toolagent_finetune.training_sample(rows, "dnc", order, 600, 0.5, lambda r: r["size"])
    ids = [r["question_id"] for r in lead]
    react = toolagent_finetune.same_questions(rows, "react", ids)
    assert [r["question_id"] for r in react] == ids and all(r["strategy"] == "react" for r in react)


def test_extra_seed_adapters_become_their_own_eval_rows(tmp_path):
    for run in ("dnc", "react", "dnc@seed1", "react@seed1", "dnc@seed2"):
        (tmp_path / "toolagent_finetune" / "m" / run / "adapter").mkdir(parents=True)
    assert toolagent_eval.extra_seeds(tmp_path, "m") == ["ft@seed1"]  # seed 2 lacks its mm-ReAct adapter
    plan = toolagent_eval.plan_for(True, ("dnc",), ["ft@seed1"])
    assert plan[-2:] == [("react", "ft@seed1"), ("dnc", "ft@seed1")]
    assert toolagent_eval.Row("m", "dnc", "ft@seed1", "mmqa").system == "dnc__m__ft@seed1"


def test_heldout_rows_and_peak_memory():
    rows = [{**r, "split": "dev", "kind": "K", "messages": []} for r in dialogue_rows(10)]
    dev = toolagent_finetune.heldout_rows(rows, ("dnc", "react"), 3, seed=0)
    ids = {r["question_id"] for r in dev}
    assert len(ids) == 3 and len(dev) == 6 and all(r["hops"] == 2 for r in dev)  # multi-hop first
    import mmap

    # A fresh anonymous mapping: its pages become resident only when touched, whatever the
    # allocator kept from earlier tests (a bytearray could reuse already-resident heap).
    with toolagent_finetune.peak_memory(every=0.01) as mem:
        block = mmap.mmap(-1, 32 * 2**20)
        for offset in range(0, len(block), 4096):
            block[offset] = 1
    block.close()
    assert mem["peak_mb"] >= mem["start_mb"] + 16


def test_ladder_table_says_which_models_are_instruct_tuned():
    t = toolagent_finetune.ladder_table(["smollm2-135m-instruct", "gemma3-270m", "qwen2.5-coder-1.5b-instruct"],
                                        ["smollm2-135m-instruct"])
    assert t.instruct.tolist() == [True, False, True] and t["trained here"].tolist() == [True, False, False]


def test_sft_settings_take_every_field_from_params():
    cfg = config.load().toolagent_finetune
    settings = toolagent_finetune.settings_of(cfg, seed=7)
    for f in fields(settings):
        assert getattr(settings, f.name) == (7 if f.name == "seed" else getattr(cfg, f.name)), f.name
    assert settings.target_modules == ("q_proj", "k_proj", "v_proj", "o_proj")


def test_plan_rows():
    assert toolagent_eval.plan_for(False, ()) == [("tools_answer", "base")]
    assert toolagent_eval.plan_for(True, ("dnc", "react")) == [("tools_answer", "base"), ("react", "base"),
                                                               ("dnc", "base"), ("react", "ft"), ("dnc", "ft")]
    # the default: DnC base is the fine-tuning claim's control; mm-ReAct base decides no claim
    assert toolagent_eval.plan_for(True, ("dnc",)) == [("tools_answer", "base"), ("dnc", "base"),
                                                       ("react", "ft"), ("dnc", "ft")]


def test_row_plan_puts_the_multi_hop_rows_and_the_size_row_before_the_conversational_ones():
    cfg = dataclasses.replace(config.load().toolagent_eval, llms=("big",), size_llms=("small", "big"),
                              base_strategies=("dnc",), question_set="mmqa", conv_set="mmcoqa")
    rows = toolagent_eval.row_plan(cfg, ["mmqa", "mmcoqa"], has_adapters=lambda name: True)
    assert [(r.system, r.question_set) for r in rows] == [
        ("tools_answer__big__base", "mmqa"), ("dnc__big__base", "mmqa"), ("react__big__ft", "mmqa"),
        ("dnc__big__ft", "mmqa"), ("dnc__small__ft", "mmqa"),  # a size LLM also in llms is not run twice
        ("tools_answer__big__base", "mmcoqa"), ("dnc__big__base", "mmcoqa"), ("react__big__ft", "mmcoqa"),
        ("dnc__big__ft", "mmcoqa")]
    no_adapters = toolagent_eval.row_plan(cfg, ["mmqa"], has_adapters=lambda name: False)
    assert [r.system for r in no_adapters] == ["tools_answer__big__base", "dnc__big__base", "dnc__small__ft"]


def test_a_finished_run_resumes_only_under_its_own_fingerprint(tmp_path):
    from mmrag.schema import Trace
    from mmrag.train.checkpoints import save_run, saved_run

    params = config.load()
    cfg = params.toolagent_eval
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "documents.jsonl").write_text('{"id": "d0"}\n')
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"weights")
    row, qs = toolagent_eval.Row("m", "dnc", "ft", "mmqa"), questions(3)
    stamp = toolagent_eval.row_fingerprint(row, qs, cfg, params, corpus, adapter, data=tmp_path)
    assert stamp == toolagent_eval.row_fingerprint(row, qs, cfg, params, corpus, adapter, data=tmp_path)
    traces = [Trace(q.id, row.system, q.answer, tool_calls=2, format_errors=1) for q in qs]
    folder = tmp_path / "checkpoints"
    name = toolagent_eval.row_name(row)
    assert saved_run(folder, name, stamp) is None
    save_run(folder, name, stamp, traces)
    assert saved_run(folder, name, stamp) == traces
    other_row = dataclasses.replace(row, question_set="mmcoqa")
    assert saved_run(folder, toolagent_eval.row_name(other_row), stamp) is None
    # anything a dialogue depends on changes the fingerprint: the adapter, the pages, the questions,
    # the turn length
    changed = []
    (adapter / "adapter_model.safetensors").write_bytes(b"other weights")
    changed.append(toolagent_eval.row_fingerprint(row, qs, cfg, params, corpus, adapter, data=tmp_path))
    (adapter / "adapter_model.safetensors").write_bytes(b"weights")
    (corpus / "documents.jsonl").write_text('{"id": "d1"}\n')
    changed.append(toolagent_eval.row_fingerprint(row, qs, cfg, params, corpus, adapter, data=tmp_path))
    (corpus / "documents.jsonl").write_text('{"id": "d0"}\n')
    changed.append(toolagent_eval.row_fingerprint(row, qs[:2], cfg, params, corpus, adapter, data=tmp_path))
    shorter = dataclasses.replace(cfg, max_new_tokens=cfg.max_new_tokens // 2)
    changed.append(toolagent_eval.row_fingerprint(row, qs, shorter, params, corpus, adapter, data=tmp_path))
    assert stamp not in changed and len(set(changed)) == 4
    assert toolagent_eval.row_fingerprint(row, qs, cfg, params, corpus, adapter, data=tmp_path) == stamp
    assert saved_run(folder, name, changed[0]) is None


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
    assert missing == []  # rows that did not run are left out, never counted as a failed claim
    # a size-claim LLM runs only its fine-tuned DnC: it enters the DnC size row and nothing else
    frame = scores_frame({"small": 0.5, "big": 0.9})
    frame = frame[(frame.llm == "small") | (frame.strategy == "dnc")]
    sized = toolagent_eval.check_claims(frame, ["mmqa"], ["small", "big"])
    assert {c["llm"] for c in sized if not c["claim"].startswith("bigger")} == {"small"}
    assert [c["claim"] for c in sized if c["claim"].startswith("bigger")] == ["bigger is better: dnc·ft F1"]


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


def test_multi_hop_share_target_is_the_multi_hop_sets_test_split():
    multi = questions(6)  # hops 1, 2, 1, 2, ...: half multi-hop, all test
    conv = [Question(f"c{i}", "?", "a", "mmcoqa", split="test", decomposition=[SubQuestion("s?", "TextQA", "a")])
            for i in range(10)]
    sets = {"mmqa": multi, "mmcoqa": conv}
    assert toolagent_data.multi_hop_shares(sets) == {"mmqa": {"test": 0.5}, "mmcoqa": {"test": 0.0}}
    assert toolagent_data.target_multi_hop_share(sets) == 0.5  # the conversational set does not dilute it
    assert toolagent_data.target_multi_hop_share({"mmcoqa": conv}) is None


def test_a_bfloat16_qlora_adapter_is_stored_as_float32_for_the_gguf_exporter(tmp_path):
    import torch
    from safetensors.numpy import load_file as load_numpy
    from safetensors.torch import save_file

    key = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
    save_file({key: torch.ones(2, 4, dtype=torch.bfloat16)}, str(tmp_path / "adapter_model.safetensors"))
    assert toolagent_finetune.float32_adapter(tmp_path)
    assert load_numpy(str(tmp_path / "adapter_model.safetensors"))[key].dtype.name == "float32"
    assert not toolagent_finetune.float32_adapter(tmp_path)  # already float32: left alone


def test_table3_shows_each_em_with_its_n_and_wilson_interval():
    from mmrag.evaluate.stats import wilson

    sc = pd.DataFrame([{"set": "mmqa", "llm": "a", "strategy": "dnc", "model": "ft", "em": e, "f1": e,
                        "tool_calls": 2, "format_errors": 0} for e in [1, 0, 1, 1]])
    row = toolagent_eval.strategy_table(sc, "mmqa", 0.05).iloc[0]
    assert row.n == 4 and row.EM == 0.75
    assert row["EM 95% CI"] == "[{:.3f}, {:.3f}]".format(*wilson(3, 4, 0.05))


def _trace(qid, system, answer, calls, format_errors=0, repeats=0):
    from mmrag.schema import Step, Trace

    steps = [Step(action="tool", target=t, query="q", summary="x") for t in calls]
    return Trace(question_id=qid, system=system, answer=answer, steps=steps, tool_calls=len(calls),
                 format_errors=format_errors, meta={"repeated_calls": repeats})


def test_reports_by_hops_kept_format_and_calls_by_gold_modality():
    qs = [Question("a", "?", "x", "mmqa", kind="TextQ", decomposition=[SubQuestion("s?", "TextQA", "x")]),
          Question("b", "?", "y", "mmqa", kind="Compose", decomposition=[SubQuestion("s1?", "ImageQA", "z"),
                                                                          SubQuestion("s2?", "TableQA", "y")])]
    qmap = {q.id: q for q in qs}
    traces = {("dnc__m__ft", "mmqa"): [_trace("a", "dnc__m__ft", "x", ["TextQA"]),
                                       _trace("b", "dnc__m__ft", "no", ["TextQA", "TableQA", "TableQA"], 1, 1)]}
    scores = toolagent_eval.score_traces(traces, qmap)
    hops = toolagent_eval.hops_table(scores, 0.05).set_index("hops")
    assert hops.loc[1, "EM"] == 1.0 and hops.loc[2, "EM"] == 0.0 and hops.loc[2, "n"] == 1
    kept = toolagent_eval.format_kept_table(scores, 0.05).iloc[0]
    assert (kept.n, kept.kept_format, kept.EM_all, kept.EM_kept_format, kept.repeated_calls) == (2, 1, 0.5, 1.0, 0.5)
    mod = toolagent_eval.calls_by_modality(traces, qmap).loc[("mmqa", "m", "dnc", "ft")]
    assert mod.loc["ImageQA", "TextQA"] == 1 and mod.loc["TableQA", "TableQA"] == 1
    assert mod.loc["beyond gold hops", "TableQA"] == 1 and mod.loc["TextQA", "TextQA"] == 1


def test_finetune_on_teacher_dialogues_moves_the_loss(tmp_path):
    """The stage's SFT settings on DnC teacher dialogues (Table 1 format): one seeded tiny LoRA
    run whose loss falls; a different seed gives a different adapter."""
    import csv

    import torch
    from safetensors.torch import load_file

    from mmrag.models.registry import MODELS_DIR
    from mmrag.toolagent import teacher
    from mmrag.train import sft

    smol = MODELS_DIR / "smollm2-135m-instruct"
    if not (smol / "READY").exists():
        pytest.skip("SmolLM2 tokenizer not provisioned (dvc repro models)")
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(str(smol))
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=2, num_key_value_heads=1,
                                 pad_token_id=tok.pad_token_id)).save_pretrained(str(tmp_path / "base"))
    tok.save_pretrained(str(tmp_path / "base"))
    q = Question("q1", "What is the price of the product designed by Ada Quill?", "420", "mmqa",
                 decomposition=[SubQuestion("Which product was designed by Ada Quill?", "TextQA", "Vorkel X2"),
                                SubQuestion("What is the price of the Vorkel X2 in USD?", "TableQA", "420")])
    convs = [teacher.dnc_dialogue(q)[0]] * 2
    cfg = dataclasses.replace(config.load().toolagent_finetune, max_steps=6, batch_size=2, learning_rate=3e-2,
                              warmup_ratio=0.0, lora_r=8, lora_alpha=32, lora_dropout=0.0, max_length=384,
                              quantize_4bit=False, keep_checkpoints=False)
    adapters = []
    for seed, steps in ((0, 6), (1, 1)):
        res = sft.train_sft(str(tmp_path / "base"), convs, tmp_path / f"run{seed}",
                            toolagent_finetune.settings_of(dataclasses.replace(cfg, max_steps=steps), seed),
                            device="cpu", checkpoints=tmp_path / f"ckpt{seed}", log=lambda s: None)
        losses = [float(r["loss"]) for r in csv.DictReader(open(res.loss_csv))]
        if steps > 1:
            assert losses[-1] < losses[0] - 0.1, losses
        adapters.append(load_file(str(tmp_path / f"run{seed}" / "adapter" / "adapter_model.safetensors")))
    k = next(k for k in adapters[0] if "lora_A" in k)
    assert not torch.equal(adapters[0][k], adapters[1][k])
