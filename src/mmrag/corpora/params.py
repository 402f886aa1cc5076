"""The `corpora` section: real corpora, your own folder of documents, the papers' datasets.

Each key's meaning is documented in params.yaml, the only place (here: types, ranges and model metadata)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mmrag.corpora.multihop import is_multihop_file
from mmrag.params import rng

DOCUMENT_SUFFIXES = (".html", ".htm", ".xhtml", ".md", ".markdown", ".pdf", ".zim")  # = corpora.ingest's


@dataclass(frozen=True)
class Folder:
    """Your own documents (stage `corpora`): a folder of html/md/pdf/zim + questions/*.jsonl."""

    path: str | None
    page_chars: int = field(metadata=rng(ge=200))
    min_image_side: int = field(metadata=rng(ge=1))
    max_image_side: int = field(metadata=rng(ge=32))
    max_image_pixels: int = field(metadata=rng(ge=1))
    max_zim_articles: int = field(metadata=rng(ge=0))
    max_image_repeats: int = field(metadata=rng(ge=1))



@dataclass(frozen=True)
class Corpora:
    """Real corpora (stage `corpora`): Wikipedia summaries, your folder, the papers' datasets."""

    wiki_max_docs: int = field(metadata=rng(ge=0))
    wiki_questions_per_kind: int = field(metadata=rng(ge=0))
    dev_share: float = field(metadata=rng(ge=0, lt=1))
    test_share: float = field(metadata=rng(gt=0, lt=1))
    folder: Folder
    datasets: dict[str, str]
    max_dataset_questions: int = field(metadata=rng(ge=0))
    examples: int = field(metadata=rng(ge=1))

    def problems(self) -> list[str]:
        """The paths a user gives, checked in seconds so that a stage never fails on them late."""
        found = []
        folder = self.folder.path
        if folder is not None:
            root = Path(folder).expanduser()
            kinds = "/".join(DOCUMENT_SUFFIXES)
            if not root.is_dir():
                found.append(f"corpora.folder.path: '{folder}' is not a folder; point it at a folder of "
                             f"{kinds} files (and questions/*.jsonl), or set it to null")
            elif not any(p.suffix.lower() in DOCUMENT_SUFFIXES or is_multihop_file(p, p.relative_to(root))
                         for p in root.rglob("*") if p.is_file()):
                found.append(f"corpora.folder.path: '{folder}' holds no {kinds} file and no official question "
                             f"file with its own contexts (HotpotQA, MuSiQue); put your documents there "
                             f"(questions go in its questions/ folder)")
        for name, path in self.datasets.items():
            if not Path(path).expanduser().exists():
                found.append(f"corpora.datasets.{name}: '{path}' does not exist; point it at the downloaded "
                             f"files of {name} or remove the entry")
        return found
