"""GRPO: reward functions on known completions, observation tokens masked, a tiny real run moves LoRA."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from mmrag.io import ROOT
from mmrag.schema import Question
from mmrag.train import grpo

SMOL = ROOT / "data" / "models" / "smollm2-135m-instruct"
needs_smol = pytest.mark.skipif(not (SMOL / "READY").exists(),
                                reason="SmolLM2 not provisioned (run the models stage)")

QUESTION = Question(id="q1", text="Which company makes the Vantor X2?", answer="Helix Corp",
                    dataset="infoseek", gold_passages=["p1"])


@dataclass
class Result:
    observation: str | None
    done: bool
    route_correct: bool | None = None
    format_error: str | None = None


class TinyEnv:
    """Two units, three passages; a search in a unit returns its passages sharing a query word."""

    UNITS = {"U01": {"p1": "The Vantor X2 is made by Helix Corp."},
             "U02": {"p2": "Orbis is a river.", "p3": "Mount Kell is tall."}}

    def __init__(self):
        self.searches = 0

    def reset(self, question, image_text=None, intent=None):
        self.searches = 0
        return [{"role": "system", "content": "Search units U01, U02, then answer."},
                {"role": "user", "content": f"Question: {question.text}"}]

    def step(self, text):
        if "<answer>" in text:
            return Result(None, True)
        m = re.search(r"<search>(.*?)</search>", text, re.S)
        if not m:
            return Result("<information>Format error.</information>", False, None, "no action")
        try:
            call = json.loads(m.group(1))[0]
            unit, query = call["retrieval_unit"]["id"], call["query"]
        except (ValueError, KeyError, IndexError, TypeError):
            return Result("<information>Format error.</information>", False, None, "bad json")
        self.searches += 1
        words = set(query.lower().split())
        hits = [t for t in self.UNITS.get(unit, {}).values() if words & set(t.lower().split())]
        return Result("<information>" + " ".join(hits or ["nothing"]) + "</information>",
                      self.searches >= 2, unit == "U01")


def tiny_settings(**overrides) -> grpo.GRPOSettings:
    """Small explicit GRPO settings (GRPOSettings has no defaults: a stage passes every field)."""
    fields = dict(max_steps=1, prompts_per_step=1, num_generations=2, temperature=1.0, top_p=1.0,
                  learning_rate=1e-5, beta=0.0, loss_type="dapo", route_weight=0.1, answer_weight=1.0,
                  max_turns=1, turn_tokens=8, max_completion_tokens=64, micro_batch=1, lora_r=16,
                  lora_alpha=32, lora_dropout=0.0, target_modules=("q_proj", "k_proj", "v_proj", "o_proj"),
                  save_steps=10, seed=0)
    return grpo.GRPOSettings(**{**fields, **overrides})


def test_reward_trend_reads_the_halves_of_the_logged_curve():
    history = [{"loss": 0.0, "reward": 0.1}, {"loss": 0.2, "reward": 0.1}, {"learning_rate": 1e-5},
               {"loss": -0.1, "reward": 0.3}, {"loss": 0.05, "reward": 0.5}, {"train_runtime": 9.0}]
    t = grpo.reward_trend(history)
    assert t["steps"] == 4 and t["rewards"] == [0.1, 0.1, 0.3, 0.5] and t["losses"] == [0.0, 0.2, -0.1, 0.05]
    assert (t["reward_first_half"], t["reward_second_half"], t["reward_delta"]) == (0.1, 0.4, 0.3)
    assert t["reward_moved"] and t["loss_moved"]
    flat = grpo.reward_trend([{"loss": 0.0, "reward": 0.2}] * 3)
    assert not flat["reward_moved"] and not flat["loss_moved"] and flat["reward_delta"] == 0.0
    assert grpo.reward_trend([])["reward_delta"] is None


def test_route_reward_is_share_of_correct_searches():
    assert grpo.route_reward([None] * 4, [[True, False], [True], [], [None, True]]) == [0.5, 1.0, 0.0, 1.0]


def test_answer_reward_uses_the_evaluator_and_logs_format_errors():
    logged = {}
    q = json.dumps(QUESTION.to_dict())
    out = grpo.answer_reward([None] * 3, [q] * 3, ["helix corp", "Orbis", None],
                             format_errors=[0, 1, 2], log_metric=logged.__setitem__)
    assert out == [1.0, 0.0, 0.0]
    assert logged == {"format_errors": 1.0, "answered": pytest.approx(2 / 3)}
    # with group ids: the share of groups whose answer reward varies (group 0 varies, group 1 not)
    grpo.answer_reward([None] * 4, [q] * 4, ["helix corp", "Orbis", None, "x"], format_errors=[0] * 4,
                       group=[0, 0, 1, 1], log_metric=logged.__setitem__)
    assert logged["answer_groups_with_variance"] == 0.5


def test_varied_groups():
    assert grpo.varied_groups([0.1, 0.1, 1.1, 0.1], [0, 0, 1, 1]) == 0.5
    assert grpo.varied_groups([], []) == 0.0


def test_answer_of_reads_the_tag():
    assert grpo.answer_of("<think>x</think><answer> Helix </answer>") == "Helix"
    assert grpo.answer_of("<think>no answer</think>") is None


class ScriptedModel:
    """Stands in for the policy: each generate() call emits the next scripted assistant turn."""

    def __init__(self, tok, turns):
        import torch

        self.tok, self.turns, self.device = tok, list(turns), torch.device("cpu")
        self.training, self.modes = True, []

    def eval(self):
        self.training = False

    def train(self, mode=True):
        self.training = mode

    def generate(self, input_ids, attention_mask, **kw):
        import torch

        self.modes.append(self.training)
        turn = self.tok(self.turns.pop(0) + "<|im_end|>", add_special_tokens=False)["input_ids"]
        new = torch.tensor([turn] * input_ids.shape[0])
        return torch.cat([input_ids, new], dim=1)


@needs_smol
def test_episode_masks_every_observation_token_and_keeps_the_policy_tokens():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(SMOL))
    search = '<think>maker?</think><search>[{"retrieval_unit": {"id": "U01"}, "query": "vantor maker"}]</search>'
    answer = "<summary>Helix makes it.</summary><think>done</think><answer>Helix Corp</answer>"
    env = TinyEnv()
    settings = tiny_settings(max_turns=3, turn_tokens=64, max_completion_tokens=512)
    model = ScriptedModel(tok, [search, answer])
    [ep] = grpo.run_episodes(model, tok, [env], [env.reset(QUESTION)], settings)
    assert model.modes == [False, False] and model.training  # sampled without dropout, restored
    assert ep.final_answer == "Helix Corp" and ep.route_correct == [True] and ep.done
    trained = tok.decode([t for t, m in zip(ep.completion_ids, ep.env_mask) if m])
    masked = tok.decode([t for t, m in zip(ep.completion_ids, ep.env_mask) if not m])
    assert "<information>The Vantor X2 is made by Helix Corp.</information>" in masked
    assert "<information>" not in trained and "Helix Corp</answer>" in trained
    assert search in trained and "<|im_start|>user" in masked
    # the whole sequence is exactly what the chat template renders for the conversation
    conv = env.reset(QUESTION) + [
        {"role": "assistant", "content": search},
        {"role": "user", "content": "<information>The Vantor X2 is made by Helix Corp.</information>"},
        {"role": "assistant", "content": answer}]
    assert tok.decode(ep.prompt_ids + ep.completion_ids) == tok.apply_chat_template(
        conv, tokenize=False).rstrip("\n")


@needs_smol
def test_token_cap_ends_the_episode_unanswered():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(SMOL))
    search = '<think>?</think><search>[{"retrieval_unit": {"id": "U02"}, "query": "orbis"}]</search>'
    env = TinyEnv()
    [ep] = grpo.run_episodes(ScriptedModel(tok, [search]), tok, [env], [env.reset(QUESTION)],
                             tiny_settings(max_turns=3, turn_tokens=64, max_completion_tokens=70))
    assert ep.done and ep.final_answer is None and ep.route_correct == [False]
    assert all(ep.env_mask)  # the observation was never appended


class ParityEnv(TinyEnv):
    """One-turn episodes whose route counts as right when the turn has an even length: an
    untrained model earns different rewards within a group, so the advantage is not zero."""

    def step(self, text):
        return Result(None, True, len(text) % 2 == 0)


@pytest.mark.slow
@needs_smol
def test_two_grpo_steps_with_the_real_trainer_change_the_lora_weights(tmp_path):
    import torch

    settings = tiny_settings(max_steps=2, num_generations=4, max_turns=1, turn_tokens=8,
                             max_completion_tokens=64, learning_rate=1e-3, save_steps=1)
    model, tok = grpo.load_policy(str(SMOL), None, "cpu")
    trainer = grpo.build_trainer(model, tok, [QUESTION], ParityEnv, tmp_path / "ckpt", settings)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_B" in n}
    trainer.train()
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(before[n], after[n].detach()) for n in before)
    assert trainer.state.global_step == 2
    timed = trainer.rollout_func.seconds  # one sampling time per step, for the stage's cost.json
    assert len(timed) == 2 and all(t > 0 for t in timed)
    rows = [r for r in trainer.state.log_history if "reward" in r]
    assert rows and all("rewards/route_reward/mean" in r and "format_errors" in r for r in rows)
    assert all("frac_reward_zero_std" in r and "answer_groups_with_variance" in r for r in rows)
    # the loss and the reward moved: a logged, non-zero loss each step (rewards varied within the
    # groups, so the advantages were not all zero) and a reward per step for the curve
    trend = grpo.reward_trend(trainer.state.log_history)
    assert trend["steps"] == 2 and len(trend["losses"]) == 2 and trend["loss_moved"]
    assert all(math.isfinite(x) for x in trend["losses"] + trend["rewards"])
    csv_path = grpo.write_curves(trainer.state.log_history, tmp_path / "curves.csv")
    assert csv_path.read_text().splitlines()[0].startswith("step,loss,reward")
    assert any(Path(tmp_path / "ckpt").glob("checkpoint-*"))
