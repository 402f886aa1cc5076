"""MM-R2 SFT labels: the model-generated segments are trained, every <information> token is masked."""

from __future__ import annotations

import pytest

from mmrag.models.registry import MODELS_DIR
from mmrag.train import sft

SMOL = MODELS_DIR / "smollm2-135m-instruct"
needs_smol = pytest.mark.skipif(not (SMOL / "READY").exists(),
                                reason="SmolLM2 tokenizer not provisioned (dvc repro models)")

SEARCH = '<search>[{"retrieval_unit": {"id": "U02"}, "query": "where is Reitei Rilytus based"}]</search>'
TRAJECTORY = [
    {"role": "system", "content": "You answer questions about an image by searching a knowledge map."},
    {"role": "user", "content": "Image: a person with red hair\nQuestion: Where is the person based?"},
    {"role": "assistant", "content": "<think>I need the person's base; unit U02 covers people.</think>" + SEARCH},
    {"role": "user", "content": "<information>\n[1] (U02) Reitei Rilytus: office listed at Daezom Centre "
                                "since 2019.\n</information>"},
    {"role": "assistant", "content": "<summary>Reitei Rilytus is based at Daezom Centre.</summary>"
                                     "<think>That answers it.</think><answer>Daezom Centre</answer>"},
]


def tiny_settings() -> sft.SFTSettings:
    """One step of batch 1 (SFTSettings has no defaults: every field is given)."""
    return sft.SFTSettings(epochs=1.0, max_steps=1, batch_size=1, grad_accum=1, learning_rate=2e-4,
                           warmup_ratio=0.05, max_length=512, lora_r=4, lora_alpha=8, lora_dropout=0.0,
                           target_modules=("q_proj", "k_proj", "v_proj", "o_proj"), quantize_4bit=False,
                           gradient_checkpointing=False, save_steps=1, keep_checkpoints=False, seed=0)


@needs_smol
def test_information_is_masked_and_every_generated_segment_is_trained(tmp_path):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(str(SMOL))
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=1, num_attention_heads=2,
                                         num_key_value_heads=1, pad_token_id=tok.pad_token_id))
    trainer = sft.build_trainer(model, tok, [TRAJECTORY], tmp_path,
                                tiny_settings())
    batch = next(iter(trainer.get_train_dataloader()))
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    trained = tok.decode([i for i, label in zip(ids, labels) if label != -100])
    masked = tok.decode([i for i, label in zip(ids, labels) if label == -100])
    for segment in ("<think>I need the person's base", SEARCH, "<summary>Reitei Rilytus is based",
                    "<think>That answers it.</think>", "<answer>Daezom Centre</answer>"):
        assert segment in trained
    assert "<information>" not in trained and "since 2019" not in trained
    assert TRAJECTORY[3]["content"] in masked and "Question: Where is the person based?" in masked
