"""Chat LLM backends behind one call: a local Hugging Face causal LM or an OpenAI-compatible server.

``generate(batch_of_conversations) -> [Generation]``. The local backend batches (on two CPU
cores batch 4 is ~2.5x the throughput of batch 1); the remote one sends one request each.
Keys come from the environment only and never enter artifacts or logs.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mmrag.models.registry import ModelError, load_llm
from mmrag.train import sft

Message = dict[str, Any]  # {"role": ..., "content": str | list[parts]}


@dataclass(frozen=True)
class Generation:
    text: str
    tokens_in: int
    tokens_out: int


class ChatLLM(Protocol):
    name: str

    def generate(self, conversations: list[list[Message]], max_new_tokens: int = 128,
                 temperature: float = 0.0, stop: list[str] | None = None) -> list[Generation]: ...


def dialogue_groups(llm: Any, n: int) -> list[range]:
    """Dialogues to step together, in order: all at once, or ``llm.dialogue_width`` at a time.

    An engine that keeps each dialogue's prompt in a KV cache slot sets the width to its slot
    count: a dialogue run to its end before the next starts sends each turn as an append to its
    own cached prefix; stepped together with more dialogues than slots, every turn re-prefills
    the whole dialogue, since the others evicted it in between."""
    width = getattr(llm, "dialogue_width", None) or n
    return [range(i, min(i + width, n)) for i in range(0, n, max(width, 1))]


class ProgressLog:
    """Plain progress lines for one long generate() call: prompts done of the total, rate and ETA,
    at most one line per ``every`` seconds and none for calls of fewer than ``min_prompts`` (a tqdm
    bar does not survive papermill's log; these lines reach the console as a stage runs)."""

    def __init__(self, label: str, total: int, every: float = 60.0, min_prompts: int = 16) -> None:
        self.label, self.total, self.every = label, total, every
        self.on = total >= min_prompts
        self.done, self.start = 0, time.perf_counter()
        self.last = self.start
        self.lock = threading.Lock()

    def line(self, now: float) -> str:
        """``<label>: done/total prompts, rate/s, ETA m``."""
        rate = self.done / max(now - self.start, 1e-9)
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        return f"{self.label}: {self.done}/{self.total} prompts, {rate:.2f}/s, ETA {eta / 60:.1f} min"

    def update(self, n: int = 1) -> None:
        with self.lock:
            self.done += n
            now = time.perf_counter()
            if self.on and self.done < self.total and now - self.last >= self.every:
                self.last = now
                print(self.line(now), flush=True)


def cut_at_stop(text: str, stop: list[str] | None) -> str:
    """Truncate at the first stop string (kept out of the returned text)."""
    if not stop:
        return text
    cut = min((i for i in (text.find(s) for s in stop) if i >= 0), default=-1)
    return text if cut < 0 else text[:cut]


def _text_only(messages: list[Message]) -> list[Message]:
    """Local text LMs see images only through their captions/descriptions in the text parts."""
    out = []
    for m in messages:
        c = m["content"]
        if isinstance(c, list):
            c = "\n".join(p.get("text", "") for p in c if p.get("type") == "text")
        out.append({"role": m["role"], "content": c})
    return out


def render_prompt(tokenizer: Any, messages: list[Message]) -> str:
    """The prompt string the model sees (chat template, generation prompt appended); shared by
    the hf and llamacpp engines so both read exactly the same tokens."""
    msgs = _text_only(messages)
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    return "\n".join(f"{m['role']}: {m['content']}" for m in msgs) + "\nassistant:"


@dataclass
class Usage:
    """Tokens and time the engine spent: what the benchmark and cost tables report. The hf engine
    prefills and decodes in one generate() call, so it counts all its time as decode."""

    calls: int = 0
    prompt_tokens: int = 0  # prompt tokens computed (prefill), the cached ones not included
    cached_tokens: int = 0  # prompt tokens reused from a slot's KV cache
    completion_tokens: int = 0
    prompt_seconds: float = 0.0
    decode_seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, prompt: int, cached: int, completion: int, prompt_s: float, decode_s: float) -> None:
        with self.lock:
            self.calls += 1
            self.prompt_tokens += prompt
            self.cached_tokens += cached
            self.completion_tokens += completion
            self.prompt_seconds += prompt_s
            self.decode_seconds += decode_s

    def as_dict(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in ("calls", "prompt_tokens", "cached_tokens",
                                              "completion_tokens", "prompt_seconds", "decode_seconds")}


class LocalLLM:
    """A Hugging Face causal LM with its chat template, greedy or sampled, batched."""

    def __init__(self, model: Any, tokenizer: Any, name: str = "local", *, batch_size: int):
        self.model, self.tok, self.name, self.batch_size = model, tokenizer, name, batch_size
        self.tok.padding_side = "left"
        self.usage = Usage()

    @classmethod
    def load(cls, name: str, *, allow_network: bool, device: str, batch_size: int,
             adapter: str | Path | None = None, weights: str | None = None) -> "LocalLLM":
        """Load by registry name (or from ``weights``, a checkpoint folder, keeping the name);
        ``adapter`` is a peft LoRA folder applied on top."""
        model, tok = load_llm(weights or name, allow_network=allow_network, device=device)
        if adapter:
            from peft import PeftModel  # heavy: peft loads torch and transformers; only adapters need it

            model = PeftModel.from_pretrained(model, str(adapter))
            model.eval()
        return cls(model, tok, name=name + (f"+{Path(adapter).name}" if adapter else ""),
                   batch_size=batch_size)

    def render(self, messages: list[Message]) -> str:
        return render_prompt(self.tok, messages)

    def generate(self, conversations: list[list[Message]], max_new_tokens: int = 128,
                 temperature: float = 0.0, stop: list[str] | None = None) -> list[Generation]:
        import torch  # heavy: torch loads in seconds; only the hf engine generates with it

        rendered = [self.render(c) for c in conversations]
        # Batch prompts of similar length: left padding then costs little compute.
        order = sorted(range(len(rendered)), key=lambda i: len(rendered[i]))
        out: list[Generation | None] = [None] * len(rendered)
        progress = ProgressLog(self.name, len(rendered))
        for i in range(0, len(order), self.batch_size):
            batch = order[i:i + self.batch_size]
            prompts = [rendered[j] for j in batch]
            enc = self.tok(prompts, return_tensors="pt", padding=True,
                           add_special_tokens=False).to(self.model.device)
            kwargs: dict[str, Any] = dict(max_new_tokens=max_new_tokens,
                                          pad_token_id=self.tok.pad_token_id)
            if temperature > 0:
                kwargs.update(do_sample=True, temperature=temperature, top_p=1.0)
            else:
                kwargs.update(do_sample=False)
            start = time.perf_counter()
            with torch.no_grad():
                gen = self.model.generate(**enc, **kwargs)
            share = (time.perf_counter() - start) / len(batch)
            new = gen[:, enc["input_ids"].shape[1]:]
            for j, row, mask in zip(batch, new, enc["attention_mask"]):
                n_out = int((row != self.tok.pad_token_id).sum())
                text = self.tok.decode(row, skip_special_tokens=True)
                out[j] = Generation(cut_at_stop(text, stop), int(mask.sum()), n_out)
                self.usage.add(int(mask.sum()), 0, n_out, 0.0, share)
            progress.update(len(batch))
        return [g for g in out if g is not None]


def image_part(path: str | Path) -> dict[str, Any]:
    """An OpenAI-style image content part with the file inlined as a base64 data URL."""
    data = Path(path).read_bytes()
    mime = "image/png" if str(path).lower().endswith(".png") else "image/jpeg"
    return {"type": "image_url",
            "image_url": {"url": f"data:{mime};base64,{base64.b64encode(data).decode()}"}}


class OpenAIChat:
    """Any OpenAI-compatible /chat/completions server (GPT-4o, vLLM, Ollama, a proxy)."""

    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY",
                 timeout: float = 120.0, *, allow_network: bool, parallel: int = 1):
        if not allow_network and not base_url.startswith(("http://localhost", "http://127.")):
            raise ModelError(f"endpoint {base_url} needs the network, but this profile runs "
                             f"offline: set base.profile: paper and base.allow_network: true.")
        self.base_url, self.model, self.name = base_url.rstrip("/"), model, model
        self.api_key_env, self.timeout, self.parallel = api_key_env, timeout, parallel

    def _one(self, conv: list[Message], max_new_tokens: int, temperature: float,
             stop: list[str] | None) -> Generation:
        key = os.environ.get(self.api_key_env, "")
        body = {"model": self.model, "messages": conv, "max_tokens": max_new_tokens,
                "temperature": temperature}
        if stop:
            body["stop"] = stop
        req = urllib.request.Request(
            f"{self.base_url}/chat/completions", data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json",
                     **({"Authorization": f"Bearer {key}"} if key else {})})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                reply = json.loads(resp.read())
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            raise ModelError(f"cannot reach {self.base_url} ({e}); check the server, the "
                             f"network, and ${self.api_key_env}.") from None
        try:
            text = reply["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise ModelError(f"{self.base_url} returned no choices: "
                             f"{str(reply)[:200]}") from None
        usage = reply.get("usage") or {}
        return Generation(cut_at_stop(text, stop), int(usage.get("prompt_tokens", 0)),
                          int(usage.get("completion_tokens", 0)))

    def generate(self, conversations: list[list[Message]], max_new_tokens: int = 128,
                 temperature: float = 0.0, stop: list[str] | None = None) -> list[Generation]:
        """``parallel`` requests in flight at once: a vLLM server batches them."""
        with ThreadPoolExecutor(max(1, self.parallel)) as pool:
            return list(pool.map(lambda c: self._one(c, max_new_tokens, temperature, stop),
                                 conversations))


def load_policy(name: str, adapter: Path | None, *, allow_network: bool, device: str,
                batch_size: int, weights: str | None = None) -> LocalLLM:
    """A local chat policy as it was fine-tuned: base model, optional LoRA adapter, tuned template.

    Shared by the stages that evaluate a fine-tuned adapter (DnC, MM-R2), so every one sees
    the model exactly as ``mmrag.train.sft`` trained it: a tokenizer without a chat template
    (Gemma-3 base) gets the plain template it was tuned with; a non-4-bit adapter is merged
    into the base weights (same outputs, plain Linear layers: faster); generation stops at
    the end-of-turn tokens of that template.
    """
    llm = LocalLLM.load(name, allow_network=allow_network, device=device, adapter=adapter,
                        batch_size=batch_size, weights=weights)
    if not getattr(llm.tok, "chat_template", None):  # Gemma base: the template it was tuned with
        llm.tok.chat_template = sft.plain_template(llm.tok)
    if adapter is not None and not getattr(llm.model, "is_loaded_in_4bit", False):
        llm.model = llm.model.merge_and_unload()  # same outputs, plain Linear layers: faster
        llm.model.eval()
    llm.model.generation_config.eos_token_id = sft.stop_token_ids(llm.tok)
    return llm
