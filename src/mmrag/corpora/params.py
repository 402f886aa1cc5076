"""The `corpora` section: real corpora, your own folder of documents, the papers' datasets.

Each field's comment is the key's only documentation (params.yaml says which value is used)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mmrag.params import rng

DOCUMENT_SUFFIXES = (".html", ".htm", ".xhtml", ".md", ".markdown", ".pdf", ".zim")  # = corpora.ingest's


@dataclass(frozen=True)
class Folder:
    """Your own documents (stage `corpora`): a folder of html/md/pdf/zim + questions/*.jsonl."""

    # null: nothing of yours to ingest; the stage ingests its demo folder into data/folder
    path: str | None
    page_chars: int = field(metadata=rng(ge=200))  # page split (non-PDF)
    min_image_side: int = field(metadata=rng(ge=1))  # smaller: skipped as icons
    max_image_side: int = field(metadata=rng(ge=32))  # larger: downscaled
    max_image_pixels: int = field(metadata=rng(ge=1))  # larger: skipped
    max_zim_articles: int = field(metadata=rng(ge=0))  # per ZIM archive; 0 = all
    max_image_repeats: int = field(metadata=rng(ge=1))  # on more documents: decorative, dropped



@dataclass(frozen=True)
class Corpora:
    """Real corpora (stage `corpora`): Wikipedia summaries, your folder, the papers' datasets."""

    wiki_max_docs: int = field(metadata=rng(ge=0))  # 0 = all 10,033 articles
    wiki_questions_per_kind: int = field(metadata=rng(ge=0))  # 0 = all
    dev_share: float = field(metadata=rng(ge=0, lt=1))
    test_share: float = field(metadata=rng(gt=0, lt=1))
    folder: Folder
    # paper datasets to convert: loader name (wikiweb2m, brit, mmqa, mmcoqa, infoseek, evqa)
    # -> path of the downloaded files; each becomes data/datasets/<name>/
    datasets: dict[str, str]
    max_dataset_questions: int = field(metadata=rng(ge=0))  # per set; 0 = all
    examples: int = field(metadata=rng(ge=1))  # rows shown per notebook table

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
            elif not any(p.suffix.lower() in DOCUMENT_SUFFIXES for p in root.rglob("*") if p.is_file()):
                found.append(f"corpora.folder.path: '{folder}' holds no {kinds} file; "
                             f"put your documents there (questions go in its questions/ folder)")
        for name, path in self.datasets.items():
            if not Path(path).expanduser().exists():
                found.append(f"corpora.datasets.{name}: '{path}' does not exist; point it at the downloaded "
                             f"files of {name} or remove the entry")
        return found
