"""The generation service: llama.cpp reads what Hugging Face reads, adapters included."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from mmrag.models import gguf_lora, registry
from mmrag.models.generation import EngineSettings, LlamaCppLLM, load_chat
from mmrag.models.llm import dialogue_groups
from mmrag.models.registry import MODELS_DIR, ModelError

SMOL = "smollm2-135m-instruct"
PROMPTS = ("Name three primary colours.", "What is the capital of France?", "Say hello.",
           "Count to five.", "Write one sentence about rivers.")
NEAR_TIE = 0.05  # logits closer than this: either token is a correct greedy choice numerically


def settings(tmp: Path, slots: int = 2, ctx: int = 1024, weights: str = "shipped") -> EngineSettings:
    return EngineSettings(threads=2, slots=slots, ctx_per_slot=ctx, hf_batch_size=2, cache_dir=tmp,
                          weights=weights)


@pytest.fixture(scope="module")
def f32_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2's GGUF dequantized to F32: the very weights the fp32 HF checkpoint holds."""
    out = tmp_path_factory.mktemp("gguf") / "smol-f32.gguf"
    return gguf_lora.dequantize_gguf(MODELS_DIR / SMOL / "model.gguf", out)


def hf_greedy(model, tok, prompt: str, n: int) -> tuple[list[int], list[float]]:
    """Greedy tokens and, per step, the margin between the best and second-best logit."""
    import torch

    from mmrag.models.llm import render_prompt

    ids = tok(render_prompt(tok, [{"role": "user", "content": prompt}]), add_special_tokens=False,
              return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=n, do_sample=False, output_scores=True,
                             return_dict_in_generate=True, pad_token_id=tok.pad_token_id)
    tokens = out.sequences[0, ids.shape[1]:].tolist()
    margins = [float(s[0].topk(2).values[0] - s[0].topk(2).values[1]) for s in out.scores]
    return tokens, margins


def first_divergence(tok, tokens: list[int], text: str) -> int | None:
    """The first HF step whose text is not a prefix of llama.cpp's reply (None: they agree)."""
    for k in range(len(tokens)):
        if tokens[k] in tok.all_special_ids:
            return None
        if not text.startswith(tok.decode(tokens[:k + 1], skip_special_tokens=True)):
            return k
    return None


def assert_same_greedy(model, tok, llm, n: int = 24) -> int:
    """Every reply equal token for token, except after a numerical near-tie; returns exact matches."""
    replies = llm.generate([[{"role": "user", "content": p}] for p in PROMPTS], max_new_tokens=n)
    exact = 0
    for prompt, reply in zip(PROMPTS, replies):
        tokens, margins = hf_greedy(model, tok, prompt, n)
        k = first_divergence(tok, tokens, reply.text)
        if k is None:
            exact += 1
            continue
        assert margins[k] < NEAR_TIE, (f"{prompt!r}: llama.cpp left HF's greedy path at step {k} where "
                                       f"HF's margin is {margins[k]:.3f}: {reply.text!r}")
    assert exact >= len(PROMPTS) - 2, f"only {exact}/{len(PROMPTS)} replies identical"
    return exact


def assert_llamacpp_reads_as(hf, gguf: Path, tmp: Path) -> None:
    """llama.cpp on ``gguf`` gives the hf model's greedy tokens (:func:`assert_same_greedy`)."""
    llm = LlamaCppLLM(gguf, hf.tok, SMOL, settings(tmp))
    try:
        assert_same_greedy(hf.model, hf.tok, llm)
    finally:
        llm.close()


@pytest.mark.slow
def test_llamacpp_gives_hfs_greedy_tokens_at_equal_precision(f32_gguf, tmp_path):
    from mmrag.models.llm import load_policy

    hf = load_policy(SMOL, None, allow_network=False, device="cpu", batch_size=1)
    assert_llamacpp_reads_as(hf, f32_gguf, tmp_path)


@pytest.mark.slow
def test_a_lora_adapter_in_llamacpp_gives_the_merged_models_greedy_tokens(f32_gguf, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model

    from mmrag.models.llm import load_policy

    torch.manual_seed(0)
    hf = load_policy(SMOL, None, allow_network=False, device="cpu", batch_size=1)
    base_replies = [g.text for g in hf.generate([[{"role": "user", "content": p}] for p in PROMPTS],
                                                max_new_tokens=16)]
    # q and k included on purpose: llama.cpp stores them rope-permuted, so B must be too.
    peft_model = get_peft_model(hf.model, LoraConfig(r=4, lora_alpha=8, init_lora_weights=False,
                                                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    peft_model.save_pretrained(str(tmp_path / "adapter"))
    merged = peft_model.merge_and_unload().eval()
    exported = gguf_lora.export_lora(tmp_path / "adapter", f32_gguf, tmp_path / "adapter.gguf")
    llm = LlamaCppLLM(f32_gguf, hf.tok, SMOL + "+lora", settings(tmp_path), (exported,))
    try:
        adapted = [g.text for g in llm.generate([[{"role": "user", "content": p}] for p in PROMPTS],
                                                max_new_tokens=16)]
        assert adapted != base_replies, "the adapter changed nothing: the test would prove nothing"
        assert_same_greedy(merged, hf.tok, llm, n=16)
    finally:
        llm.close()


def test_rope_permutation_interleaves_the_two_rotary_halves():
    rows = np.arange(8, dtype=np.float32).reshape(8, 1)
    assert gguf_lora.rope_permute(rows, n_head=1)[:, 0].tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    assert gguf_lora.rope_permute(rows, n_head=2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


@pytest.mark.parametrize("config", [{"use_dora": True}, {"modules_to_save": ["lm_head"]}])
def test_adapters_llamacpp_cannot_express_are_refused(tmp_path, config):
    (tmp_path / "adapter_config.json").write_text(json.dumps({"lora_alpha": 8, "r": 4, **config}))
    with pytest.raises(gguf_lora.AdapterExportError, match="adapter"):
        gguf_lora.export_lora(tmp_path, MODELS_DIR / SMOL / "model.gguf", tmp_path / "a.gguf")


def test_a_missing_model_file_names_the_fix(tmp_path):
    with pytest.raises(ModelError, match="dvc repro models"):
        LlamaCppLLM(tmp_path / "absent.gguf", None, "absent", settings(tmp_path))


def test_engines_are_checked_before_anything_loads(tmp_path):
    with pytest.raises(ModelError, match="not one of"):
        load_chat(SMOL, engine="vllm", settings=settings(tmp_path), allow_network=False, device="cpu")
    with pytest.raises(ModelError, match="base_url"):
        load_chat(SMOL, engine="openai", settings=settings(tmp_path), allow_network=False, device="cpu")
    with pytest.raises(ModelError, match="GGUF"):
        load_chat(str(tmp_path), engine="llamacpp", settings=settings(tmp_path), allow_network=False,
                  device="cpu")


@pytest.mark.slow
def test_a_prompt_longer_than_a_slot_is_a_clear_error(tmp_path):
    with load_chat_ctx(tmp_path, ctx=256) as llm:
        with pytest.raises(ModelError, match="ctx_per_slot"):
            llm.generate([[{"role": "user", "content": "word " * 400}]], max_new_tokens=8)


@pytest.mark.slow
def test_many_conversations_at_once_equal_one_at_a_time(tmp_path):
    """Replies come back in the order asked, whatever slot served them. On these short replies
    the text does not depend on the batch mix; on the evaluation slices it can (8 slots give other
    greedy replies than one: results/bench/inference.json), hence one slot by default."""
    convs = [[{"role": "user", "content": p}] for p in PROMPTS]
    with load_chat_ctx(tmp_path, slots=4) as llm:
        together = [g.text for g in llm.generate(convs, max_new_tokens=12)]
        alone = [llm.generate([c], max_new_tokens=12)[0].text for c in convs]
        again = [g.text for g in llm.generate(convs, max_new_tokens=12)]  # now from the prompt cache
        assert llm.usage.cached_tokens > 0
    assert together == alone == again


@pytest.mark.slow
def test_one_slot_gives_the_same_replies_on_a_fresh_engine(tmp_path):
    """Rerunning a stage must reproduce its LLM outputs: one slot, prompts in order, same texts."""
    convs = [[{"role": "user", "content": p}] for p in PROMPTS * 2]  # repeats hit the prompt cache
    runs = []
    for _ in range(2):
        with load_chat_ctx(tmp_path, slots=1) as llm:
            runs.append([g.text for g in llm.generate(convs, max_new_tokens=40)])
            assert llm.usage.cached_tokens > 0
    assert runs[0] == runs[1]
    assert all(runs[0])


@pytest.mark.slow
def test_a_one_slot_dialogues_next_turn_reuses_its_whole_cached_prompt(tmp_path):
    """Why the agents run a one-slot engine's dialogues one at a time (llm.dialogue_groups): sent
    right after its first turn, the second is an append. (After another dialogue ran in the slot,
    llama.cpp's host-memory prompt cache may restore it or not: short prompts it did here, the
    long MM-R2 episodes of results/bench/dialogues.json only in part.)"""
    a = [{"role": "user", "content": PROMPTS[4]}]
    with load_chat_ctx(tmp_path, slots=1) as llm:
        assert llm.dialogue_width == 1
        first = llm.generate([a], max_new_tokens=16)[0]
        before = llm.usage.cached_tokens
        llm.generate([a + [{"role": "assistant", "content": first.text},
                           {"role": "user", "content": "And in one word?"}]], max_new_tokens=4)
        reused = llm.usage.cached_tokens - before
    assert reused >= first.tokens_in  # the whole first prompt, not just the chat template's header


@pytest.mark.slow
def test_an_engine_stopped_before_its_first_request_does_not_hang(tmp_path):
    """A stage with nothing to ask still opens and closes its engine; the stop must not be lost.

    Without a wait for the first request the destructor can join a loop that never saw the stop
    and hang, so the engine is opened and closed 12 times in a child process that a timeout can kill."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    script = (f"import sys; sys.path[:0] = [{str(root / 'src')!r}, {str(root)!r}]\n"
              f"from pathlib import Path\nfrom tests.test_generation import load_chat_ctx\n"
              f"for _ in range(12):\n    with load_chat_ctx(Path({str(tmp_path)!r})):\n        pass\n")
    try:
        proc = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True,
                              timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("opening and closing an unused llama.cpp engine hung")
    assert proc.returncode == 0, proc.stderr[-2000:]


def load_chat_ctx(tmp: Path, slots: int = 1, ctx: int = 1024, weights: str = "shipped"):
    from mmrag.models.generation import open_chat

    return open_chat(SMOL, engine="llamacpp", settings=settings(tmp, slots=slots, ctx=ctx, weights=weights),
                     allow_network=False, device="cpu")


def test_an_assembled_gguf_with_another_checksum_is_refused(tmp_path):
    spec = dataclasses.replace(registry.PROVISIONED[SMOL], gguf_sha256="0" * 64)
    with pytest.raises(ModelError, match="sha256"):
        registry._llm_gguf(spec, tmp_path / "model.gguf")


def test_no_stage_or_system_loads_a_chat_model_around_the_generation_service():
    """Evaluation, teachers, readers and judges get their LLM from load_chat/open_chat only;
    Hugging Face models are loaded directly only for training (src/mmrag/train) and by the
    service itself (src/mmrag/models)."""
    import re

    src = Path(__file__).resolve().parents[1] / "src" / "mmrag"
    direct = re.compile(r"LocalLLM\.load\(|OpenAIChat\(|llm import load_policy|\bload_policy\(.*batch_size=")
    offenders = [f"{path.relative_to(src)}:{n}" for path in src.rglob("*.py")
                 if path.parts[-2] not in ("models", "train")
                 for n, line in enumerate(path.read_text().splitlines(), 1) if direct.search(line)]
    assert not offenders, f"LLMs loaded outside the generation service: {offenders}"


def test_requantizing_rewrites_4_and_5_bit_tensors_as_q4_0_and_keeps_the_rest(tmp_path):
    """A tiny GGUF built here: its Q4_1 matrix becomes Q4_0 (close to the same weights), while
    the F32 norm and the Q8_0 embedding are copied byte for byte, metadata included."""
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFReader, GGUFWriter
    from gguf.quants import dequantize, quantize

    rng = np.random.default_rng(0)
    w = rng.normal(size=(8, 64)).astype(np.float32)
    emb = rng.normal(size=(16, 64)).astype(np.float32)
    norm = rng.normal(size=(64,)).astype(np.float32)
    src = tmp_path / "tiny.gguf"
    writer = GGUFWriter(str(src), "llama")
    writer.add_uint32("llama.block_count", 1)
    writer.add_tensor("blk.0.ffn_up.weight", quantize(w, Q.Q4_1), raw_dtype=Q.Q4_1)
    writer.add_tensor("token_embd.weight", quantize(emb, Q.Q8_0), raw_dtype=Q.Q8_0)
    writer.add_tensor("blk.0.attn_norm.weight", norm)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    out, counts = gguf_lora.requantize_gguf(src, tmp_path / "tiny-q4_0.gguf")
    assert counts == {"requantized": 1, "kept": 2}
    before = {t.name: t for t in GGUFReader(str(src)).tensors}
    after = GGUFReader(str(out))
    assert after.fields["llama.block_count"].contents() == 1
    tensors = {t.name: t for t in after.tensors}
    up = tensors["blk.0.ffn_up.weight"]
    assert Q(up.tensor_type) == Q.Q4_0
    back = dequantize(up.data, Q.Q4_0).reshape(8, 64)
    # two roundings, each at most half a step: Q4_1's (range/15) and Q4_0's (|max|/8) per block
    assert np.abs(back - w).max() <= np.abs(w).max() * (2 / 15 / 2 + 1 / 8 / 2) + 1e-6
    assert np.sqrt(np.mean((back - w) ** 2)) < 0.2 * np.sqrt(np.mean(w ** 2))
    for name in ("token_embd.weight", "blk.0.attn_norm.weight"):
        assert tensors[name].tensor_type == before[name].tensor_type
        assert bytes(tensors[name].data) == bytes(before[name].data)


@pytest.mark.slow
def test_q4_0_weights_are_served_from_a_cached_copy(tmp_path):
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFReader

    with load_chat_ctx(tmp_path, weights="q4_0") as llm:
        reply = llm.generate([[{"role": "user", "content": "What is the capital of France?"}]],
                             max_new_tokens=12)[0].text
        served = llm.gguf
    assert served.parent == tmp_path and "Paris" in reply
    types = {Q(t.tensor_type) for t in GGUFReader(str(served)).tensors}
    assert Q.Q4_0 in types and Q.Q4_1 not in types
    mtime = served.stat().st_mtime_ns
    with load_chat_ctx(tmp_path, weights="q4_0") as llm:  # the second engine reuses the copy
        assert llm.gguf == served and served.stat().st_mtime_ns == mtime


@pytest.mark.parametrize("width, n, groups", [(None, 5, [[0, 1, 2, 3, 4]]), (1, 3, [[0], [1], [2]]),
                                              (2, 5, [[0, 1], [2, 3], [4]]), (8, 3, [[0, 1, 2]]),
                                              (1, 0, [])])
def test_dialogue_groups_follow_the_engines_width(width, n, groups):
    class Engine:
        dialogue_width = width

    assert [list(g) for g in dialogue_groups(Engine(), n)] == groups
    assert [list(g) for g in dialogue_groups(object(), n)] == ([list(range(n))] if n else [])


def gguf_only_models_dir(tmp: Path) -> Path:
    """A models folder where SmolLM2 is provisioned as the ladder's larger models are: its GGUF and
    tokenizer, no Hugging Face checkpoint."""
    src, dst = MODELS_DIR / SMOL, tmp / "models" / SMOL
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.is_file() and f.name not in ("config.json", "generation_config.json") and f.suffix != ".safetensors":
            (dst / f.name).symlink_to(f)
    assert not (dst / "config.json").exists() and (dst / "READY").exists()
    return dst.parent


@pytest.mark.slow
def test_the_hf_engine_reads_a_gguf_only_model_as_llamacpp_serves_it(f32_gguf, tmp_path):
    """engine: hf on a ladder model with no fp32 checkpoint dequantizes its GGUF once into the
    cache, so both engines read the same weights (greedy tokens equal, up to near-ties)."""
    from mmrag.models.generation import hf_weights

    models = gguf_only_models_dir(tmp_path)
    cache = tmp_path / "cache"
    stale = cache / f"{SMOL}-hf-f32-0000000000000000"  # a copy of another version of the GGUF
    stale.mkdir(parents=True)
    (stale / "config.json").write_text("{}")
    weights = Path(hf_weights(SMOL, allow_network=False, cache_dir=cache, models_dir=models))
    assert weights.parent == cache and (weights / "config.json").exists()
    assert weights.name.endswith(registry.PROVISIONED[SMOL].gguf_sha256[:16]) and not stale.exists()
    stamp = (weights / "config.json").stat().st_mtime_ns
    assert hf_weights(SMOL, allow_network=False, cache_dir=cache, models_dir=models) == str(weights)
    assert (weights / "config.json").stat().st_mtime_ns == stamp  # written once
    hf = load_chat(SMOL, engine="hf", settings=settings(cache), allow_network=False, device="cpu",
                   models_dir=models)
    assert hf.name == SMOL
    assert_llamacpp_reads_as(hf, f32_gguf, tmp_path)


@pytest.mark.slow
def test_hf_batches_sorted_by_length_return_replies_in_the_order_asked(tmp_path):
    from mmrag.models.llm import load_policy

    convs = [[{"role": "user", "content": p}] for p in ("Say hello.", "Write one sentence about rivers "
                                                        "and the seas they run into.", "Count to five.")]
    hf = load_policy(SMOL, None, allow_network=False, device="cpu", batch_size=2)
    batched = [g.text for g in hf.generate(convs, max_new_tokens=12)]
    assert hf.usage.calls == 3 and hf.usage.completion_tokens > 0 and hf.usage.decode_seconds > 0
    hf.batch_size = 1
    alone = [g.text for g in hf.generate(convs, max_new_tokens=12)]
    assert batched == alone and len(set(alone)) == 3


def test_a_long_generate_call_prints_progress_lines_and_a_short_one_stays_quiet(capsys):
    from mmrag.models.llm import ProgressLog

    long = ProgressLog("qwen", total=20, every=0.0, min_prompts=16)
    for _ in range(20):
        long.update()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 19 and lines[0].startswith("qwen: 1/20 prompts,") and "ETA" in lines[-1]
    assert lines[-1].startswith("qwen: 19/20")  # the last prompt is the call's end: no line for it
    short = ProgressLog("qwen", total=4, every=0.0, min_prompts=16)
    for _ in range(4):
        short.update()
    assert capsys.readouterr().out == ""


def test_the_q4_0_copy_is_named_by_the_sources_sha256_and_replaces_older_copies(tmp_path, monkeypatch):
    made = []

    def requantize(src, dst):
        made.append(Path(dst).name)
        Path(dst).write_bytes(b"q4_0")

    monkeypatch.setattr(gguf_lora, "requantize_gguf", requantize)
    src = tmp_path / "smollm2" / "model.gguf"
    src.parent.mkdir()
    src.write_bytes(b"f32")
    cache = tmp_path / "cache"
    cache.mkdir()
    first = gguf_lora.q4_0_gguf(src, cache, "ab" * 32)
    src.write_bytes(b"f32")  # the models stage rewrites the file: a new mtime, the same content
    assert gguf_lora.q4_0_gguf(src, cache, "ab" * 32) == first and made == [first.name]
    assert first.name == "smollm2-model-q4_0-" + "ab" * 8 + ".gguf"
    second = gguf_lora.q4_0_gguf(src, cache, "cd" * 32)  # another version of the model
    assert sorted(p.name for p in cache.iterdir()) == [second.name]
