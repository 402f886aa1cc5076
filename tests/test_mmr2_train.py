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
    {"role": "user", "content": "<information>\n[1] (U02) Reitei Rilytus: office listed at Daezom Centre since 2019.\n</information>"},
    {"role": "assistant", "content": "<summary>Reitei Rilytus is based at Daezom Centre.</summary>"
                                     "<think>That answers it.</think><answer>Daezom Centre</answer>"},
]


@needs_smol
def test_information_is_masked_and_every_generated_segment_is_trained(tmp_path):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(str(SMOL))
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=1, num_attention_heads=2,
                                         num_key_value_heads=1, pad_token_id=tok.pad_token_id))
    trainer = sft.build_trainer(model, tok, [TRAJECTORY], tmp_path,
                                sft.SFTSettings(max_steps=1, batch_size=1, max_length=512))
    batch = next(iter(trainer.get_train_dataloader()))
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    trained = tok.decode([i for i, l in zip(ids, labels) if l != -100])
    masked = tok.decode([i for i, l in zip(ids, labels) if l == -100])
    for segment in ("<think>I need the person's base", SEARCH, "<summary>Reitei Rilytus is based",
                    "<think>That answers it.</think>", "<answer>Daezom Centre</answer>"):
        assert segment in trained
    assert "<information>" not in trained and "since 2019" not in trained
    assert TRAJECTORY[3]["content"] in masked and "Question: Where is the person based?" in masked
