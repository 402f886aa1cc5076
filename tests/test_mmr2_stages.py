"""Helpers of the mmr2_traj and mmr2_train stage modules: settings from params, samples, summaries."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pandas as pd

from mmrag import config
from mmrag.sampling import seeded_order
from mmrag.stages import mmr2_train, mmr2_traj


def test_training_settings_take_every_field_from_params():
    section = dataclasses.replace(config.load().mmr2_train, sft_max_steps=6)
    sft = mmr2_train.sft_settings(section, seed=7, n_conversations=40)
    assert (sft.max_steps, sft.batch_size, sft.learning_rate, sft.max_length) == (
        section.sft_max_steps, section.sft_batch_size, section.sft_lr, section.sft_max_length)
    assert (sft.warmup_ratio, sft.lora_dropout, sft.epochs, sft.seed) == (
        section.sft_warmup_ratio, section.sft_lora_dropout, section.sft_epochs, 7)
    assert sft.save_steps == 3
    # sft_max_steps 0: the epochs decide (one epoch of 40 conversations at batch 1 x accum 1)
    by_epochs = dataclasses.replace(section, sft_max_steps=0, sft_epochs=1.0, sft_batch_size=1,
                                    sft_grad_accum=1)
    sft = mmr2_train.sft_settings(by_epochs, seed=7, n_conversations=40)
    assert sft.max_steps == -1 and sft.save_steps == 20
    grpo = mmr2_train.grpo_settings(section, seed=7)
    assert (grpo.max_steps, grpo.num_generations, grpo.turn_tokens, grpo.micro_batch) == (
        section.grpo_steps, section.group_size, section.turn_tokens, section.grpo_micro_batch)
    assert (grpo.loss_type, grpo.lora_dropout, grpo.target_modules) == (
        section.grpo_loss_type, section.grpo_lora_dropout, tuple(section.target_modules))
    changed = dataclasses.replace(section, turn_tokens=section.turn_tokens + 1)
    assert mmr2_train.grpo_settings(changed, 7).turn_tokens == section.turn_tokens + 1


def test_halves_summary_splits_the_run():
    curves = pd.DataFrame({"step": [1, 2, 3, 4], "reward": [0.0, 0.2, 0.4, 0.6],
                           **{col: [1.0, 1.0, 3.0, 3.0] for _, col in mmr2_train.CURVE_QUANTITIES
                              if col != "reward"}})
    table = mmr2_train.halves_summary(curves).set_index("quantity")
    assert table.loc["reward", "first half"] == 0.1 and table.loc["reward", "second half"] == 0.5
    assert table.loc["R_route", "second half"] == 3.0
    one = mmr2_train.halves_summary(curves.iloc[:1]).set_index("quantity")
    assert one.loc["reward", "first half"] == one.loc["reward", "second half"] == 0.0


def test_grpo_questions_are_seeded_and_need_gold_in_the_map():
    qs = [SimpleNamespace(id=f"q{i}", split="train" if i % 3 else "dev", gold_passages=[f"p{i}"])
          for i in range(12)]
    kmap = SimpleNamespace(pid_index={f"p{i}": i for i in range(12) if i != 4})
    picked, eligible = mmr2_train.grpo_questions(qs, kmap, seed=3, n=5)
    pool = [q for q in qs if q.split == "train" and q.id != "q4"]
    assert eligible == len(pool) and picked == seeded_order(pool, 3)[:5]


def test_question_splits_keep_only_questions_with_gold():
    qs = [SimpleNamespace(id=f"q{i}", split=("train", "dev", "test")[i % 3],
                          gold_passages=[] if i == 3 else ["p"]) for i in range(9)]
    train, dev = mmr2_traj.question_splits(qs, seed=1, max_questions=2)
    assert len(train) == 2 and all(q.split == "train" and q.gold_passages for q in train)
    assert {q.id for q in dev} == {"q1", "q4", "q7"}
    assert train == seeded_order([q for q in qs if q.split == "train" and q.gold_passages], 1)[:2]


def test_malformed_turns_and_trajectory_printout():
    turns = mmr2_traj.malformed_turns("U02")
    assert turns["well formed"].startswith("<think>look it up</think><search>")
    assert '"id":"u02"' in turns["loose unit id"] and turns["empty"] == ""
    traj = SimpleNamespace(id="traj-q1-d", meta={"searches": 1, "route_correct": [True]},
                           messages=[{"role": "system", "content": "sys"},
                                     {"role": "user", "content": "Q?"},
                                     {"role": "assistant", "content": "<answer>A</answer>"}])
    assert mmr2_traj.format_trajectory(traj) == (
        "=== traj-q1-d (searches 1, routes [True])\n[user] Q?\n\n[assistant] <answer>A</answer>\n")


def test_group_variance_counts_groups_with_a_learning_signal():
    # 3 steps of 2 groups: TRL's share of zero-std groups 1.0, 0.5, 0.0 -> 0 + 1 + 2 groups vary
    curves = pd.DataFrame({"step": [1, 2, 3], "frac_reward_zero_std": [1.0, 0.5, 0.0],
                           "answer_groups_with_variance": [0.0, 0.0, 0.5]})
    out = mmr2_train.group_variance(curves, prompts_per_step=2)
    assert out == {"groups": 6, "groups_with_reward_variance": 3, "share_groups_with_reward_variance": 0.5,
                   "groups_with_answer_variance": 1}
