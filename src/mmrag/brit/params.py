"""BRIT's sections: the unified image-text graph (`brit_graph`) and retrieval, linking ablations
and readers (`brit_linking`).

Each key's meaning is documented in params.yaml, the only place (here: types, ranges and model metadata)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mmrag.params import model, rng


@dataclass(frozen=True)
class BritGraph:
    """BRIT's unified image-text graph (stage `brit_graph`)."""

    corpus: str
    nea_documents: str
    extractor: Literal["spacy", "llm"]
    extractor_llm: str = field(metadata=model(
        "llm", when=lambda s: (s.extractor == "llm" or s.llm_sample_pages > 0) and s.engine != "openai"))
    engine: Literal["llamacpp", "hf", "openai"]
    llm_sample_pages: int = field(metadata=rng(ge=0))
    arguments: Literal["entities", "noun_chunks"]
    si_top: int = field(metadata=rng(ge=1))
    max_docs: int | None = field(metadata=rng(ge=2))
    example_page: int = field(metadata=rng(ge=0))



@dataclass(frozen=True)
class BritLinking:
    """BRIT retrieval, linking ablations, readers and the paper's three tables (stage `brit_linking`)."""

    linking: tuple[str, ...]
    threshold: float = field(metadata=rng(ge=-1, le=1.01))
    calibration_grid: tuple[float, ...]
    diagnostics: tuple[Literal["calibrated", "sentences", "lemmas", "before"], ...]
    top_k: int = field(metadata=rng(ge=1))
    edge_cost: float = field(metadata=rng(ge=0))
    sweep_top_k: tuple[int, ...]
    sweep_edge_cost: tuple[float, ...]
    max_linked_triplets: int = field(metadata=rng(ge=0))
    baseline_k: int = field(metadata=rng(ge=1))
    baseline_images: int = field(metadata=rng(ge=0))
    baseline_words: int | None = field(metadata=rng(ge=1))
    question_set: str
    nea_set: str
    dev_share: float = field(metadata=rng(ge=0, lt=1))
    reader: Literal["similarity", "llm", "lmm"]
    reader_llm: str = field(metadata=model("llm", when=lambda s: s.reader == "llm"))
    qa_questions: int | None = field(metadata=rng(ge=1))
    claim_questions: int | None = field(metadata=rng(ge=1))
    engine: Literal["llamacpp", "hf", "openai"]
    reader_w_text: float = field(metadata=rng(ge=0))
    reader_w_image: float = field(metadata=rng(ge=0))
    lmm_base_url: str
    lmm_model: str
    max_questions: int | None = field(metadata=rng(ge=1))
    example_question: int = field(metadata=rng(ge=0))


@dataclass(frozen=True)
class BritSeeds:
    """BRIT's claim runs under further CLIP training seeds (stage `brit_seeds`)."""

    seeds: tuple[int, ...]

    def problems(self) -> list[str]:
        """Seeds a training can take, each once (a repeated seed would count one rerun twice in `holds`)."""
        found = []
        if any(k < 0 for k in self.seeds):
            found.append(f"brit_seeds.seeds = {list(self.seeds)} holds a negative seed: list seeds >= 0")
        if len(set(self.seeds)) != len(self.seeds):
            found.append(f"brit_seeds.seeds = {list(self.seeds)} lists a seed twice: list each seed once")
        return found
