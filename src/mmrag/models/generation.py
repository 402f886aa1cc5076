"""The generation service: every LLM call of evaluation, teachers, readers and judges goes here.

Three engines behind one ``ChatLLM.generate(conversations) -> [Generation]`` call:

- ``llamacpp`` (default for inference): llama.cpp in-process (``xllamacpp``) on the model's
  GGUF, questions run concurrently through the server's slots (continuous batching), and each
  slot keeps its prompt in the KV cache, so the next turn of a dialogue and the shared prefix
  of the next question are not recomputed. Prompts are rendered and tokenized by the same
  Hugging Face tokenizer and chat template as the ``hf`` engine and sent as token ids, so both
  engines see identical inputs; a LoRA adapter is exported to GGUF and applied at load.
- ``hf``: the Hugging Face model (training, tests that need logits, GPU generation).
- ``openai``: any OpenAI-compatible server (vLLM, llama.cpp CUDA, an API), requests in parallel.

Open one with :func:`open_chat` as a context manager: the engine is started by the stage and
stopped when the block ends.

llama.cpp's threads are OpenMP threads (the system libgomp, read once when ``xllamacpp`` is
first imported). Leave ``OMP_WAIT_POLICY`` unset: libgomp's default (spin briefly, then sleep)
decoded SmolLM2-135M at 183 tok/s on 2 quiet cores, ``PASSIVE`` at 40 tok/s, since a token's
graph has hundreds of thread barriers and each one then costs a futex wake-up. Under a busy
second core the order flips (default 22, ``PASSIVE`` 82, one thread 142 tok/s): keep the
machine quiet, or set ``inference.threads: 1``.
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from gguf import GGUFReader

from mmrag.models.gguf_lora import adapter_gguf, q4_0_gguf
from mmrag.models.llm import (
    ChatLLM,
    Generation,
    LocalLLM,
    Message,
    OpenAIChat,
    ProgressLog,
    Usage,
    cut_at_stop,
    load_policy,
    render_prompt,
)
from mmrag.models.registry import MODELS_DIR, PROVISIONED, ModelError, resolve
from mmrag.train import sft

ENGINES = ("llamacpp", "hf", "openai")


@dataclass(frozen=True)
class EngineSettings:
    """How the service runs a model; built from params (`inference` section) by the stage."""

    threads: int  # llama.cpp CPU threads
    slots: int  # llama.cpp concurrent sequences; the openai engine's parallel requests
    ctx_per_slot: int  # tokens of context each slot holds (prompt + reply)
    hf_batch_size: int  # the hf engine's generate() batch
    cache_dir: Path  # where adapters exported on demand (and Q4_0 copies) are kept
    weights: str  # llama.cpp: "shipped" (the provisioned GGUF) or "q4_0" (a requantized copy)


def engine_settings(inference: Any) -> EngineSettings:
    """EngineSettings from the params `inference` section (config.Inference)."""
    return EngineSettings(inference.threads, inference.slots, inference.ctx_per_slot,
                          inference.hf_batch_size, Path(inference.cache_dir), inference.weights)


def require_gguf(gguf: Path) -> None:
    """A missing model file is named with its fix before anything loads or is requantized."""
    if not gguf.exists():
        raise ModelError(f"llama.cpp engine: model file {gguf} is missing. Run `dvc repro "
                         f"models` (or `make models`), or set the stage's engine: hf.")


class LlamaCppLLM:
    """A GGUF served by llama.cpp in this process; thread-safe, concurrent over its slots."""

    def __init__(self, gguf: Path, tokenizer: Any, name: str, settings: EngineSettings,
                 adapters: tuple[Path, ...] = ()):
        """Greedy/sampled replies end at the model's end-of-generation tokens (llama.cpp reads them
        from the GGUF: <|im_end|> for SmolLM2 and Qwen, <end_of_turn> for Gemma-3)."""
        # native llama.cpp, only for this engine; its libgomp reads OMP_* once, at this first import
        import xllamacpp

        require_gguf(gguf)
        params = xllamacpp.CommonParams()
        params.model.path = str(gguf)
        params.n_parallel = settings.slots
        params.n_ctx = settings.slots * settings.ctx_per_slot
        params.cpuparams.n_threads = settings.threads
        params.cpuparams_batch.n_threads = settings.threads
        params.verbosity = -1
        params.warmup = False
        loras = []
        for path in adapters:
            info = xllamacpp.CommonAdapterLoraInfo()
            info.path, info.scale = str(path), 1.0
            loras.append(info)
        params.lora_adapters = loras
        try:
            self.server = xllamacpp.Server(params)
        except Exception as e:  # noqa: BLE001 - the C++ side raises plain RuntimeError
            raise ModelError(f"llama.cpp could not load {gguf.name}"
                             f"{' with ' + ', '.join(p.name for p in adapters) if adapters else ''}: "
                             f"{e}. Check the file (rerun `dvc repro models`) or use engine: hf.") from e
        host = str(self.server.listening_address)
        if "127.0.0.1" not in host and "localhost" not in host:
            raise ModelError(f"llama.cpp server bound to {host}, not 127.0.0.1; refusing to serve.")
        self.tok, self.name, self.settings, self.gguf = tokenizer, name, settings, gguf
        self._wait_for_main_loop()
        self.usage = Usage()
        self.dialogue_width = settings.slots  # agents run this many dialogues at a time (llm.dialogue_groups)
        self.pool = ThreadPoolExecutor(settings.slots, thread_name_prefix="llamacpp")

    def _wait_for_main_loop(self) -> None:
        """One 1-token request, answered only once the server's task loop runs.

        ``xllamacpp.Server`` returns before its loop thread enters that loop; a server stopped in
        that window loses the stop signal and its destructor joins forever; answering one request first
        proves the loop runs."""
        ids = self.tok("ok", add_special_tokens=False)["input_ids"][:1] or [0]
        reply = self.server.handle_completions({"prompt": ids, "n_predict": 1, "cache_prompt": False,
                                                "temperature": 0.0})
        if "error" in reply:
            raise ModelError(f"llama.cpp ({self.name}) did not answer its first request: {str(reply)[:300]}")

    def render(self, messages: list[Message]) -> str:
        return render_prompt(self.tok, messages)

    def _one(self, messages: list[Message], max_new_tokens: int, temperature: float,
             stop: list[str] | None, seed: int) -> Generation:
        ids = self.tok(self.render(messages), add_special_tokens=False)["input_ids"]
        if len(ids) + max_new_tokens > self.settings.ctx_per_slot:
            raise ModelError(f"{self.name}: prompt of {len(ids)} tokens + {max_new_tokens} new "
                             f"exceeds inference.ctx_per_slot={self.settings.ctx_per_slot}; raise it "
                             f"(memory grows with slots x ctx_per_slot) or shorten the prompt.")
        body: dict[str, Any] = {"prompt": ids, "n_predict": max_new_tokens, "cache_prompt": True,
                                "temperature": temperature, "seed": seed}
        if stop:  # stop decoding there, not only cut the text afterwards
            body["stop"] = list(stop)
        if temperature > 0:
            body.update(top_k=0, top_p=1.0, min_p=0.0)
        reply = self.server.handle_completions(body)
        if "error" in reply or not reply.get("choices"):
            raise ModelError(f"llama.cpp ({self.name}) returned an error: {str(reply)[:300]}")
        text = reply["choices"][0].get("text") or ""
        timings = reply.get("timings") or {}
        self.usage.add(int(timings.get("prompt_n", len(ids))), int(timings.get("cache_n", 0)),
                       int(timings.get("predicted_n", 0)), timings.get("prompt_ms", 0.0) / 1e3,
                       timings.get("predicted_ms", 0.0) / 1e3)
        return Generation(cut_at_stop(text, stop), len(ids), int(timings.get("predicted_n", 0)))

    def generate(self, conversations: list[list[Message]], max_new_tokens: int = 128,
                 temperature: float = 0.0, stop: list[str] | None = None,
                 seed: int = 0) -> list[Generation]:
        """All conversations at once: the server schedules them over its slots.

        With one slot they go in order from this thread, so the slot's cached prefix, and with
        it every reply, is the same on a rerun (with several slots the batch mix is not)."""
        progress = ProgressLog(self.name, len(conversations))

        def one(conv: list[Message], i: int) -> Generation:
            reply = self._one(conv, max_new_tokens, temperature, stop, seed + i)
            progress.update()
            return reply

        if self.settings.slots == 1:
            return [one(conv, i) for i, conv in enumerate(conversations)]
        futures = [self.pool.submit(one, conv, i) for i, conv in enumerate(conversations)]
        return [f.result() for f in futures]

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        del self.server


def parameter_count(llm: Any) -> int:
    """Parameters of a loaded chat model: the torch module's, or the GGUF's tensor shapes."""
    if hasattr(llm, "model") and hasattr(llm.model, "parameters"):
        return int(sum(p.numel() for p in llm.model.parameters()))
    if isinstance(llm, LlamaCppLLM):
        count = 0
        for tensor in GGUFReader(str(llm.gguf)).tensors:
            size = 1
            for dim in tensor.shape:
                size *= int(dim)
            count += size
        return count
    return 0  # a remote server: unknown


def gguf_file(name: str, models_dir: Path) -> Path:
    """The GGUF llama.cpp serves for a model name: provisioned (model.gguf) or a .gguf path."""
    if name in PROVISIONED:
        return models_dir / name / "model.gguf"
    path = Path(name).expanduser()
    if path.suffix == ".gguf":
        return path
    if path.is_dir() and sorted(path.glob("*.gguf")):
        return sorted(path.glob("*.gguf"))[0]
    raise ModelError(f"engine llamacpp needs a GGUF file for '{name}': point the setting at a "
                     f".gguf (or a folder holding one), use a provisioned name, or set engine: hf.")


def _tokenizer(name: str, allow_network: bool, models_dir: Path) -> Any:
    """The Hugging Face tokenizer (with the chat template the model was tuned with)."""
    from transformers import AutoTokenizer  # heavy: transformers loads in seconds; only llama.cpp needs it here

    where = resolve(name, "llm", allow_network, models_dir=models_dir)
    tok = AutoTokenizer.from_pretrained(where)
    if not getattr(tok, "chat_template", None):  # Gemma base: the template it was tuned with
        tok.chat_template = sft.plain_template(tok)
    return tok


def hf_weights(name: str, *, allow_network: bool, cache_dir: Path, models_dir: Path | None = None) -> str:
    """Hugging Face weights for a model name: the models stage's fp32 checkpoint where it wrote
    one, else (a ladder model provisioned for llama.cpp only) its GGUF dequantized to fp32 once
    into ``cache_dir``: the very weights llama.cpp serves, so the hf engine reads the same model
    and an adapter trained on them fits the GGUF. The copy is named by the GGUF's sha256, which
    the models stage checks, so reprovisioning the same file (a new mtime) keeps it; copies of
    other versions of the model are removed."""
    path = Path(resolve(name, "llm", allow_network, models_dir=models_dir or MODELS_DIR))
    if name not in PROVISIONED or (path / "config.json").exists():
        return str(path)
    gguf = path / "model.gguf"
    require_gguf(gguf)
    out = Path(cache_dir) / f"{name}-hf-f32-{PROVISIONED[name].gguf_sha256[:16]}"
    for old in Path(cache_dir).glob(f"{name}-hf-f32-*"):
        if old != out:
            shutil.rmtree(old, ignore_errors=True)
    if not (out / "config.json").exists():
        # heavy: torch and transformers load in seconds; only this one-time dequantization needs them
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        print(f"{name}: provisioned for llama.cpp only; dequantizing its GGUF once into the cache ({out.name})")
        model = AutoModelForCausalLM.from_pretrained(str(path), gguf_file=gguf.name, dtype=torch.float32)
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)  # an interrupted earlier copy
        model.save_pretrained(str(tmp), safe_serialization=True)
        AutoTokenizer.from_pretrained(str(path)).save_pretrained(str(tmp))
        del model
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    return str(out)


def load_chat(name: str, *, engine: str, settings: EngineSettings, allow_network: bool, device: str,
              adapter: Path | None = None, base_url: str | None = None,
              models_dir: Path | None = None) -> ChatLLM:
    """A chat model on the engine the stage's params name; llama.cpp ones stop with ``close()``
    (or at process exit: each stage runs in its own process)."""
    models_dir = models_dir or MODELS_DIR
    if engine not in ENGINES:
        raise ModelError(f"engine '{engine}' is not one of {', '.join(ENGINES)}")
    if engine == "openai":
        if not base_url:
            raise ModelError(f"engine openai needs a base_url for '{name}' (an OpenAI-compatible "
                             f"server such as vLLM: http://127.0.0.1:8000/v1).")
        return OpenAIChat(base_url, name, allow_network=allow_network, parallel=settings.slots)
    if engine == "hf":
        weights = hf_weights(name, allow_network=allow_network, cache_dir=settings.cache_dir,
                             models_dir=models_dir)
        return load_policy(name, adapter, allow_network=allow_network, device=device,
                           batch_size=settings.hf_batch_size, weights=weights)
    gguf = gguf_file(name, models_dir)
    require_gguf(gguf)
    tok = _tokenizer(name, allow_network, models_dir)
    adapters = (adapter_gguf(adapter, gguf, settings.cache_dir),) if adapter else ()
    known = PROVISIONED[name].gguf_sha256 if name in PROVISIONED else ""
    served = q4_0_gguf(gguf, settings.cache_dir, known) if settings.weights == "q4_0" else gguf
    return LlamaCppLLM(served, tok, name + (f"+{Path(adapter).name}" if adapter else ""), settings, adapters)


@contextmanager
def open_chat(name: str, **kwargs: Any) -> Iterator[ChatLLM]:
    """:func:`load_chat` for the duration of a block: the engine is stopped when it ends."""
    llm = load_chat(name, **kwargs)
    try:
        yield llm
    finally:
        if hasattr(llm, "close"):
            llm.close()


__all__ = ["ENGINES", "EngineSettings", "LlamaCppLLM", "LocalLLM", "engine_settings", "gguf_file",
           "hf_weights", "load_chat", "open_chat", "parameter_count"]
