"""A PEFT LoRA adapter written as a GGUF adapter, so llama.cpp serves the fine-tuned policy.

Training stays in Hugging Face (on the fp32 checkpoint converted from the same GGUF); inference
loads the base GGUF plus this file. Only plain LoRA on Linear layers is supported (no DoRA, no
rsLoRA, no ``modules_to_save``): anything else fails with a message rather than exporting a
silently different model.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import dequantize, quantize
from safetensors.numpy import load_file

# Hugging Face module name -> llama.cpp tensor name (same for llama, qwen2 and gemma3).
MODULES = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_KEY = re.compile(r"layers\.(\d+)\.(.+)\.lora_([AB])\.weight$")


class AdapterExportError(ValueError):
    """An adapter this exporter cannot write faithfully; the message says what to change."""


def base_metadata(gguf_path: Path) -> dict[str, object]:
    """Architecture and head counts of the base GGUF (read from its header, not its weights)."""
    reader = GGUFReader(str(gguf_path))

    def value(key: str) -> object:
        field = reader.fields.get(key)
        if field is None:
            return None
        return field.contents()

    arch = str(value("general.architecture"))
    return {"arch": arch, "n_head": value(f"{arch}.attention.head_count"),
            "n_head_kv": value(f"{arch}.attention.head_count_kv")}


def rope_permute(rows: np.ndarray, n_head: int) -> np.ndarray:
    """The row order llama.cpp's 'llama' architecture stores q/k in (interleaved rotary halves)."""
    return (rows.reshape(n_head, 2, rows.shape[0] // n_head // 2, *rows.shape[1:])
            .swapaxes(1, 2).reshape(rows.shape))


def gguf_tensors(adapter_dir: Path, meta: dict[str, object]) -> dict[str, np.ndarray]:
    """llama.cpp tensor name -> float32 array for every LoRA A/B matrix of the adapter."""
    weights = load_file(str(adapter_dir / "adapter_model.safetensors"))
    out: dict[str, np.ndarray] = {}
    for key, array in weights.items():
        match = _KEY.search(key)
        if match is None:
            raise AdapterExportError(f"{adapter_dir.name}: tensor '{key}' is not a LoRA A/B matrix "
                                     f"(modules_to_save or DoRA?); train with plain LoRA to export.")
        layer, module, which = match.groups()
        if module not in MODULES:
            raise AdapterExportError(f"{adapter_dir.name}: no llama.cpp tensor for module '{module}'; "
                                     f"use target_modules among {sorted(m.split('.')[1] for m in MODULES)}.")
        array = array.astype(np.float32)
        if which == "B" and meta["arch"] == "llama" and module in ("self_attn.q_proj", "self_attn.k_proj"):
            heads = meta["n_head"] if module == "self_attn.q_proj" else meta["n_head_kv"]
            array = rope_permute(array, int(heads))
        out[f"blk.{layer}.{MODULES[module]}.weight.lora_{which.lower()}"] = array
    return out


def export_lora(adapter_dir: str | Path, base_gguf: str | Path, out: str | Path) -> Path:
    """Write ``out`` (a GGUF LoRA adapter for ``base_gguf``) from a PEFT adapter folder; atomic."""
    adapter_dir, out = Path(adapter_dir), Path(out)
    cfg = json.loads((adapter_dir / "adapter_config.json").read_text())
    if cfg.get("use_dora") or cfg.get("use_rslora"):
        raise AdapterExportError(f"{adapter_dir.name}: DoRA/rsLoRA adapters are not exported; "
                                 f"set them off to serve the adapter with llama.cpp.")
    if cfg.get("modules_to_save"):
        raise AdapterExportError(f"{adapter_dir.name}: modules_to_save={cfg['modules_to_save']} "
                                 f"cannot be expressed as a GGUF LoRA adapter.")
    meta = base_metadata(Path(base_gguf))
    tensors = gguf_tensors(adapter_dir, meta)
    tmp = out.with_name(f".{out.name}.tmp")
    writer = GGUFWriter(str(tmp), str(meta["arch"]))
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(cfg["lora_alpha"]))
    for name, array in tensors.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)
    return out


def adapter_gguf(adapter_dir: str | Path, base_gguf: str | Path, cache_dir: str | Path) -> Path:
    """The adapter as GGUF: the fine-tuning stage's own export, else one cached by content hash.

    A stage never writes into another stage's DVC output, so an adapter trained before the
    export existed is exported once into ``cache_dir`` under the hash of its weights and base.
    """
    adapter_dir = Path(adapter_dir)
    source = adapter_dir / "adapter_model.safetensors"
    if not source.exists():
        raise AdapterExportError(f"{adapter_dir} has no adapter_model.safetensors: is it a PEFT "
                                 f"adapter folder? Rerun the fine-tuning stage that writes it.")
    own = adapter_dir / "adapter.gguf"
    if own.exists() and own.stat().st_mtime >= source.stat().st_mtime:
        return own
    digest = hashlib.sha256(source.read_bytes()
                            + (adapter_dir / "adapter_config.json").read_bytes()
                            + Path(base_gguf).name.encode()).hexdigest()[:16]
    cached = Path(cache_dir) / f"{adapter_dir.name}-{digest}.gguf"
    if not cached.exists():
        cached.parent.mkdir(parents=True, exist_ok=True)
        export_lora(adapter_dir, base_gguf, cached)
    return cached


def rewrite_gguf(src: str | Path, dst: str | Path, file_type: int,
                 convert: Callable[[Any], tuple[np.ndarray, Any]]) -> Path:
    """A copy of a GGUF (metadata as it is) whose tensors ``convert`` rewrites; written atomically.

    ``convert(tensor)`` gets each reader tensor and returns its new data and GGML type (None:
    the numpy dtype says it); ``file_type`` is the new ``general.file_type``."""
    reader = GGUFReader(str(src))
    arch = str(reader.fields["general.architecture"].contents())
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp")
    writer = GGUFWriter(str(tmp), arch)
    for key, fld in reader.fields.items():
        if key.startswith("GGUF.") or key in ("general.architecture", "general.file_type"):
            continue
        vtype = fld.types[0]
        sub = fld.types[1] if vtype == GGUFValueType.ARRAY and len(fld.types) > 1 else None
        writer.add_key_value(key, fld.contents(), vtype, sub)
    writer.add_uint32("general.file_type", file_type)
    for tensor in reader.tensors:
        data, raw_dtype = convert(tensor)
        writer.add_tensor(tensor.name, data, raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(dst)
    return dst


def _rows_first(tensor: Any) -> tuple[int, ...]:
    """A reader tensor's shape as numpy holds it (GGUF lists the fastest dimension first)."""
    return tuple(int(d) for d in reversed(tensor.shape))


def dequantize_gguf(src: str | Path, dst: str | Path) -> Path:
    """An F32 copy of a quantized GGUF: the same weights the fp32 Hugging Face checkpoint holds.

    Comparing llama.cpp with Hugging Face on the quantized file mixes two effects (quantized
    kernels and engine); on this copy only the engine differs, which is what the
    token-equality test checks.
    """
    def to_f32(tensor: Any) -> tuple[np.ndarray, None]:
        array = dequantize(tensor.data, GGMLQuantizationType(tensor.tensor_type)).astype(np.float32)
        return array.reshape(_rows_first(tensor)), None

    return rewrite_gguf(src, dst, 0, to_f32)  # file type 0: all F32


# 4- and 5-bit block types whose tensors are rewritten as Q4_0; wider ones (Q6_K, Q8_0, F16, F32:
# the shipped files' choice for embeddings, outputs and norms) are kept as they are.
REQUANT_FROM = frozenset({"Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K"})


def requantize_gguf(src: str | Path, dst: str | Path) -> tuple[Path, dict[str, int]]:
    """A Q4_0 copy of a GGUF, for llama.cpp's repacked AVX2 Q4_0 kernels (this wheel has no
    AVX-512). On 2 cores it sped up a 1,500-token prefill 1.78x (SmolLM2-135M) to 1.12x
    (Qwen-1.5B) and left decode as it was (0.94-1.11x): results/bench/quant.json. A second lossy
    rounding: the same bench counts what it changes on the probe. Returns the path and the count
    of tensors per outcome."""
    q4_0 = GGMLQuantizationType.Q4_0
    counts = {"requantized": 0, "kept": 0}

    def to_q4_0(tensor: Any) -> tuple[np.ndarray, Any]:
        qtype = GGMLQuantizationType(tensor.tensor_type)
        shape = _rows_first(tensor)
        if qtype.name in REQUANT_FROM and shape[-1] % 32 == 0:
            counts["requantized"] += 1
            weights = dequantize(tensor.data, qtype).astype(np.float32).reshape(shape)
            return quantize(weights, q4_0), q4_0  # uint8 rows of blocks
        counts["kept"] += 1
        return np.asarray(tensor.data), qtype

    return rewrite_gguf(src, dst, 2, to_q4_0), counts  # file type 2: mostly Q4_0


def q4_0_gguf(gguf: str | Path, cache_dir: str | Path, sha256: str = "") -> Path:
    """The Q4_0 copy of a GGUF, written once into ``cache_dir``. It is named by the source's
    ``sha256`` where the caller knows it (a provisioned model: the models stage rewrites the file
    on every rerun, so its mtime would requantize each time), else by its path, size and mtime;
    copies of other versions of the same source are removed."""
    gguf = Path(gguf)
    if sha256:
        digest = sha256[:16]
    else:
        st = gguf.stat()
        digest = hashlib.sha256(f"{gguf.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
    prefix = f"{gguf.parent.name}-{gguf.stem}-q4_0-"
    cached = Path(cache_dir) / f"{prefix}{digest}.gguf"
    if not cached.exists():
        for old in Path(cache_dir).glob(f"{prefix}*.gguf"):
            old.unlink()
        requantize_gguf(gguf, cached)
    return cached
