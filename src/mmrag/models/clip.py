"""The vision-language encoder: a small open_clip model trained here, or a pretrained OpenCLIP.

No CLIP weights are reachable offline, so the default profile trains one: a ModifiedResNet
(ResNet-style) vision tower at 64 px and a small text transformer, on rendered images paired
with *generic attribute captions only* (``render.caption``) — the encoder never sees an entity
name, which is what makes invented names unknown to it (BRIT's enterprise / NEA setting).
How it is trained (data, losses, evaluation) lives in :mod:`mmrag.train.clip`; this module is
the model alone and knows nothing of the world generator.

The checkpoint folder (``data/clip``) holds the open_clip model config as ``<name>.json``
(registered with ``open_clip.add_model_config``), the weights, and ``open_clip_config.json``,
so ``open_clip.create_model_and_transforms(name, pretrained=weights)`` and
``local-dir:data/clip`` both load it. The paper profile names an OpenCLIP pretrained tag such
as ``ViT-H-14/laion2b_s32b_b79k`` instead; that needs the network and is refused offline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from safetensors.torch import save_file

from mmrag import io
from mmrag.models.registry import ModelError

DEFAULT_DIR = io.DATA / "clip"
MODEL_NAME = "mmrag-clip-rn64"
WEIGHTS_FILE = "open_clip_model.safetensors"
PRETRAINED_FILE = "pretrained.json"  # a folder that points at an OpenCLIP tag (paper profile)
OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


# --------------------------------------------------------------------------- model config
def model_config(*, embed_dim: int, image_size: int, vision_layers: Sequence[int],
                 vision_width: int, text_width: int, text_layers: int, text_heads: int,
                 context_length: int) -> dict[str, Any]:
    """An open_clip config: a ModifiedResNet vision tower (``patch_size: null``) and a text one."""
    if len(vision_layers) != 4:
        raise ValueError(f"vision_layers needs 4 stage depths (ModifiedResNet), got {vision_layers}")
    if image_size % 32:
        raise ValueError(f"image_size {image_size} must be a multiple of 32 (ResNet stride)")
    return {"embed_dim": embed_dim,
            "vision_cfg": {"image_size": image_size, "layers": list(vision_layers),
                           "width": vision_width, "patch_size": None},
            "text_cfg": {"context_length": context_length, "vocab_size": 49408,
                         "width": text_width, "heads": text_heads, "layers": text_layers}}


def register(folder: str | Path, name: str = MODEL_NAME) -> str:
    """Make ``name`` known to open_clip from ``folder/<name>.json``; returns the name."""
    import open_clip  # heavy: open_clip adds ~4 s to torch's import

    cfg = Path(folder) / f"{name}.json"
    if not cfg.exists():
        raise ModelError(f"{cfg} is missing: {folder} is not a trained CLIP checkpoint. "
                         f"Run `dvc repro clip` (or `bin/py -m mmrag.stage clip`).")
    if open_clip.get_model_config(name) != io.read_json(cfg):  # new, or another folder's
        open_clip.add_model_config(cfg)
    return name


def create_model(cfg: Mapping[str, Any], seed: int) -> torch.nn.Module:
    """A freshly initialised open_clip model from a config dict (seeded)."""
    from open_clip.model import CLIP  # heavy: open_clip adds ~4 s to torch's import

    torch.manual_seed(seed)
    return CLIP(**dict(cfg))


def tokenizer_for(cfg: Mapping[str, Any]) -> Callable[[list[str]], torch.Tensor]:
    """The tokenizer open_clip.get_tokenizer gives this config (BPE, padded to its context)."""
    from open_clip.tokenizer import SimpleTokenizer  # heavy: open_clip adds ~4 s to torch's import

    return SimpleTokenizer(context_length=cfg["text_cfg"]["context_length"])


def save_checkpoint(model: torch.nn.Module, cfg: Mapping[str, Any], folder: str | Path,
                    name: str = MODEL_NAME, meta: Mapping[str, Any] | None = None) -> Path:
    """Write ``<name>.json``, the weights and ``open_clip_config.json`` into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    io.write_json(folder / f"{name}.json", dict(cfg))
    io.write_json(folder / "open_clip_config.json", {
        "model_cfg": dict(cfg),
        "preprocess_cfg": {"mean": list(OPENAI_MEAN), "std": list(OPENAI_STD),
                           "interpolation": "bicubic", "resize_mode": "shortest"}})
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    with io.atomic_path(folder / WEIGHTS_FILE) as tmp:
        save_file(state, str(tmp), metadata={"model_name": name})
    io.write_json(folder / "meta.json", {"model_name": name, "weights": WEIGHTS_FILE,
                                         **dict(meta or {})})
    return folder


# --------------------------------------------------------------------------- encoder
@dataclass
class ClipEncoder:
    """Image and text embeddings (L2-normalised float32) from one open_clip model."""

    model: Any
    preprocess: Callable[[Image.Image], torch.Tensor]
    tokenizer: Callable[[list[str]], torch.Tensor]
    name: str
    device: str
    batch_size: int = 64

    def _image(self, item: Image.Image | str | Path) -> Image.Image:
        if isinstance(item, Image.Image):
            return item.convert("RGB")
        path = Path(item)
        if not path.exists():
            raise FileNotFoundError(f"ClipEncoder: image {path} does not exist")
        with Image.open(path) as im:
            return im.convert("RGB")

    @torch.no_grad()
    def encode_images(self, images: Sequence[Image.Image | str | Path]) -> np.ndarray:
        """(n, d) unit vectors for PIL images or image paths."""
        self.model.eval()
        out = []
        for i in range(0, len(images), self.batch_size):
            batch = torch.stack([self.preprocess(self._image(x)) for x in images[i:i + self.batch_size]])
            out.append(F.normalize(self.model.encode_image(batch.to(self.device)).float(), dim=-1))
        return _to_numpy(out, self.dim)

    @torch.no_grad()
    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """(n, d) unit vectors for texts (truncated to the model's context length)."""
        self.model.eval()
        out = []
        for i in range(0, len(texts), self.batch_size):
            tokens = self.tokenizer(list(texts[i:i + self.batch_size])).to(self.device)
            out.append(F.normalize(self.model.encode_text(tokens).float(), dim=-1))
        return _to_numpy(out, self.dim)

    @property
    def dim(self) -> int:
        """Embedding width."""
        proj = getattr(self.model, "text_projection", None)
        if isinstance(proj, torch.Tensor):
            return int(proj.shape[-1])
        return int(self.model.encode_text(self.tokenizer(["a"]).to(self.device)).shape[-1])


def _to_numpy(chunks: list[torch.Tensor], dim: int) -> np.ndarray:
    if not chunks:
        return np.zeros((0, dim), dtype=np.float32)
    return torch.cat(chunks).cpu().numpy().astype(np.float32)


def is_pretrained_tag(name: str) -> bool:
    """``ARCH/TAG`` that open_clip lists as a pretrained release (e.g. ViT-H-14/laion2b_s32b_b79k)."""
    import open_clip  # heavy: open_clip adds ~4 s to torch's import

    if name.count("/") != 1 or Path(name).exists():
        return False
    arch, tag = name.split("/")
    return tag in open_clip.list_pretrained_tags_by_model(arch)


def load_clip(name: str | Path, allow_network: bool, device: str = "cpu") -> ClipEncoder:
    """A trained checkpoint folder (such as params ``models.clip``, data/clip) or an OpenCLIP
    ``ARCH/TAG`` as an encoder."""
    import open_clip  # heavy: open_clip adds ~4 s to torch's import

    name = str(name)
    folder = Path(name)
    if folder.is_dir() and (folder / PRETRAINED_FILE).exists():
        name = io.read_json(folder / PRETRAINED_FILE)["name"]
    elif folder.is_dir():
        meta = io.read_json(folder / "meta.json") if (folder / "meta.json").exists() else {}
        model_name = register(folder, meta.get("model_name", MODEL_NAME))
        weights = folder / meta.get("weights", WEIGHTS_FILE)
        if not weights.exists():
            raise ModelError(f"{weights} is missing; rerun `dvc repro clip`.")
        model, _, preprocess = open_clip.create_model_and_transforms(
            model_name, pretrained=str(weights), device=device)
        return ClipEncoder(model.eval(), preprocess, open_clip.get_tokenizer(model_name),
                           model_name, device)
    if is_pretrained_tag(name):
        if not allow_network:
            raise ModelError(
                f"CLIP '{name}' is an OpenCLIP pretrained release whose weights download from "
                f"the hub, but this profile runs offline (base.allow_network: false). Use the "
                f"trained encoder (clip.pretrained: '' and `dvc repro clip`, giving data/clip) "
                f"or set base.profile: paper and base.allow_network: true.")
        arch, tag = name.split("/")
        model, _, preprocess = open_clip.create_model_and_transforms(arch, pretrained=tag,
                                                                     device=device)
        return ClipEncoder(model.eval(), preprocess, open_clip.get_tokenizer(arch), name, device)
    if not folder.exists() and name in (str(DEFAULT_DIR), "data/clip"):
        raise ModelError(f"no trained CLIP at {name}: run `dvc repro clip` first.")
    raise ModelError(f"CLIP '{name}' is neither a checkpoint folder (with {MODEL_NAME}.json) nor "
                     f"an OpenCLIP pretrained ARCH/TAG such as ViT-H-14/laion2b_s32b_b79k.")
