"""Shared SFT: the template renders as the original, only assistant tokens carry labels, LoRA learns."""

from __future__ import annotations

import csv

import pytest

from mmrag.models.registry import MODELS_DIR
from mmrag.train import sft

SMOL = MODELS_DIR / "smollm2-135m-instruct"
needs_smol = pytest.mark.skipif(not (SMOL / "READY").exists(),
                                reason="SmolLM2 tokenizer not provisioned (dvc repro models)")

CONV = [{"role": "system", "content": "Divide the question."},
        {"role": "user", "content": "Question: What is the price of the product designed by Ada?"},
        {"role": "assistant", "content": "Which product did Ada design? (Tool=TextQA)"},
        {"role": "user", "content": "Vorkel X2"},
        {"role": "assistant", "content": "What is the price of the Vorkel X2? (Tool=TableQA)"},
        {"role": "tool", "content": "<information>420 USD</information>"},
        {"role": "assistant", "content": "[Answer: 420]"}]


def tiny_settings(**overrides) -> sft.SFTSettings:
    """Small explicit SFT settings (SFTSettings has no defaults: a stage passes every field)."""
    fields = dict(epochs=1.0, max_steps=1, batch_size=1, grad_accum=1, learning_rate=2e-4,
                  warmup_ratio=0.05, max_length=384, lora_r=4, lora_alpha=8, lora_dropout=0.0,
                  target_modules=("q_proj", "k_proj", "v_proj", "o_proj"), quantize_4bit=False,
                  gradient_checkpointing=False, save_steps=25, keep_checkpoints=False, seed=0)
    return sft.SFTSettings(**{**fields, **overrides})


def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(SMOL))


def tiny_model(tok):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=2, num_attention_heads=2,
                                        num_key_value_heads=1, pad_token_id=tok.pad_token_id))


@needs_smol
@pytest.mark.parametrize("conv", [CONV, CONV[1:], CONV[1:3]])
def test_marked_template_renders_byte_identical(conv):
    tok = tokenizer()
    original = tok.apply_chat_template(conv, tokenize=False)
    tok.chat_template = sft.marked_template(tok)
    assert tok.apply_chat_template(conv, tokenize=False) == original
    tok.chat_template = sft.plain_template(tok)
    assert tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True) == \
        original + "<|im_start|>assistant\n"


@needs_smol
def test_labels_are_exactly_the_assistant_tokens(tmp_path):
    tok = tokenizer()
    trainer = sft.build_trainer(tiny_model(tok), tok, [CONV], tmp_path,
                                tiny_settings(max_steps=1, batch_size=1))
    batch = next(iter(trainer.get_train_dataloader()))
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    trained = [i for i, label in zip(ids, labels) if label != -100]
    assert all(label in (-100, i) for i, label in zip(ids, labels))  # labels are the ids or masked
    expected = "".join(m["content"] + "<|im_end|>" for m in CONV if m["role"] == "assistant")
    assert tok.decode(trained) == expected
    # Everything else (instruction, question, tool answers, <information>, role headers) is -100.
    masked = tok.decode([i for i, label in zip(ids, labels) if label == -100])
    for m in CONV:
        if m["role"] != "assistant":
            assert m["content"] in masked
    assert "Vorkel X2<|im_end|>" in masked and "420 USD" not in tok.decode(trained)


def test_conversations_without_assistant_turns_are_refused():
    with pytest.raises(sft.SFTError, match="no conversation has an assistant turn"):
        sft.check_conversations([[{"role": "user", "content": "hi"}]])
    with pytest.raises(sft.SFTError, match="not a list"):
        sft.check_conversations([[{"role": "user", "content": 3}]])
    assert sft.steps_per_epoch(9, tiny_settings(batch_size=4)) == 3


@needs_smol
@pytest.mark.slow
def test_tiny_lora_run_moves_loss_changes_weights_and_resumes(tmp_path):
    import torch
    from safetensors.torch import load_file

    tok = tokenizer()
    base = tmp_path / "base"
    tiny_model(tok).save_pretrained(str(base))
    tok.save_pretrained(str(base))
    convs = [CONV, CONV[1:], CONV[:3] + [CONV[-1]]] * 4
    settings = tiny_settings(max_steps=12, batch_size=4, learning_rate=5e-3, warmup_ratio=0.0,
                             save_steps=6, lora_r=4, lora_alpha=8, lora_dropout=0.0,
                             keep_checkpoints=True)
    ckpt = tmp_path / "checkpoints"
    res = sft.train_sft(str(base), convs, tmp_path / "run", settings, device="cpu", checkpoints=ckpt,
                        log=lambda s: None)
    assert res.steps == 12
    rows = list(csv.DictReader(open(res.loss_csv)))
    losses = [float(r["loss"]) for r in rows]
    assert len(losses) == 12 and losses[-1] < losses[0] - 0.1
    weights = load_file(str(tmp_path / "run" / "adapter" / "adapter_model.safetensors"))
    lora_b = [v for k, v in weights.items() if "lora_B" in k]
    assert lora_b and any(torch.count_nonzero(v) > 0 for v in lora_b)  # B starts at zero
    # An interrupted run resumes from its checkpoint instead of starting over.
    more = sft.SFTSettings(**{**res.settings, "max_steps": 14,
                              "target_modules": ("q_proj", "k_proj", "v_proj", "o_proj")})
    res2 = sft.train_sft(str(base), convs, tmp_path / "run", more, device="cpu", checkpoints=ckpt,
                         log=lambda s: None)
    assert res2.resumed_from and res2.resumed_from.endswith("checkpoint-12") and res2.steps == 14


@needs_smol
@pytest.mark.slow
def test_tiny_qlora_run_trains_on_4bit_nf4_base_weights(tmp_path):
    """QLoRA as in the paper: the frozen base is bitsandbytes 4-bit NF4 (on CPU here), LoRA learns."""
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = tokenizer()
    torch.manual_seed(0)
    base = tmp_path / "base"
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                                 num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                 pad_token_id=tok.pad_token_id)).save_pretrained(str(base))
    tok.save_pretrained(str(base))
    model, _ = sft.load_base(str(base), quantize_4bit=True, device="cpu")
    q_proj = model.model.layers[0].self_attn.q_proj
    assert type(q_proj).__name__ == "Linear4bit" and q_proj.weight.quant_state.quant_type == "nf4"
    del model
    settings = tiny_settings(max_steps=8, batch_size=4, learning_rate=5e-3, warmup_ratio=0.0, quantize_4bit=True)
    res = sft.train_sft(str(base), [CONV, CONV[1:], CONV[:3] + [CONV[-1]]] * 4, tmp_path / "run", settings,
                        device="cpu", checkpoints=tmp_path / "ck", log=lambda s: None)
    losses = [float(r["loss"]) for r in csv.DictReader(open(res.loss_csv))]
    assert res.steps == 8 and losses[-1] < losses[0] - 0.1
    weights = load_file(str(tmp_path / "run" / "adapter" / "adapter_model.safetensors"))
    assert any(torch.count_nonzero(v) > 0 for k, v in weights.items() if "lora_B" in k)
