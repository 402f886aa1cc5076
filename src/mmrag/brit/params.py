"""BRIT's sections: the unified image-text graph (`brit_graph`) and retrieval, linking ablations
and readers (`brit_linking`).

Each field's comment is the key's only documentation (params.yaml says which value is used)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mmrag.params import model, rng


@dataclass(frozen=True)
class BritGraph:
    """BRIT's unified image-text graph (stage `brit_graph`)."""

    corpus: str  # folder under data/
    # the NEA variant of the corpus's pages (a file in the corpus folder, same images);
    # empty: no NEA graph is built
    nea_documents: str
    extractor: Literal["spacy", "llm"]  # llm: the paper's LLM triplet extractor
    # the LLM extractor's ladder model (extractor: llm, and the comparison)
    extractor_llm: str = field(metadata=model(
        "llm", when=lambda s: (s.extractor == "llm" or s.llm_sample_pages > 0) and s.engine != "openai"))
    engine: Literal["llamacpp", "hf", "openai"]  # its engine (the generation service)
    # spaCy and the LLM extractor on this many sample pages, scored against the gold facts with
    # their cost per page (0: no comparison)
    llm_sample_pages: int = field(metadata=rng(ge=0))
    arguments: Literal["entities", "noun_chunks"]  # what may be a triplet argument
    si_top: int = field(metadata=rng(ge=1))  # SI: each image to its top-k nodes
    max_docs: int | None = field(metadata=rng(ge=2))  # null: every page
    example_page: int = field(metadata=rng(ge=0))  # page drawn in the notebook



@dataclass(frozen=True)
class BritLinking:
    """BRIT retrieval, linking ablations, readers and the paper's three tables (stage `brit_linking`)."""

    linking: tuple[str, ...]  # the main experiment's linkers (CA LP LS SI)
    # disjoint-graph threshold on the best node-query similarity; the paper's 0.75 is for its
    # encoder; ours is calibrated on the dev split (the notebook shows the sweep)
    threshold: float = field(metadata=rng(ge=-1, le=1.01))
    calibration_grid: tuple[float, ...]
    top_k: int = field(metadata=rng(ge=1))  # PCST: prized nodes and edges
    edge_cost: float = field(metadata=rng(ge=0))
    # the knob sweep (dev recall and words per value, one knob at a time; the threshold's values
    # are calibration_grid's)
    sweep_top_k: tuple[int, ...]
    sweep_edge_cost: tuple[float, ...]
    max_linked_triplets: int = field(metadata=rng(ge=0))  # image->text context
    # flat baselines (paper Table 2: 206 words, 2.00 images per question): at most baseline_k
    # text chunks within baseline_words text words (null: no budget), plus baseline_images images
    baseline_k: int = field(metadata=rng(ge=1))
    baseline_images: int = field(metadata=rng(ge=0))
    baseline_words: int | None = field(metadata=rng(ge=1))
    question_set: str
    nea_set: str
    # the world's BRIT set is all test: a seeded share is carved out for threshold calibration
    dev_share: float = field(metadata=rng(ge=0, lt=1))
    # llm: a ladder model reads a multiple-choice prompt (triplets/texts, image captions) through
    # the generation service; similarity: the cheap offline scorer (also always run as a named
    # baseline row); lmm: an OpenAI-compatible LMM that sees the pictures (paper profile)
    reader: Literal["similarity", "llm", "lmm"]
    # reader: llm (a models ladder name)
    reader_llm: str = field(metadata=model("llm", when=lambda s: s.reader == "llm"))
    # Table 1's questions (and the traces'): a seeded subset of the test questions balanced by
    # kind (null: all); an LLM reads each once per system, so this sizes the stage's cost
    qa_questions: int | None = field(metadata=rng(ge=1))
    # Table 1's claim pair (BRIT full, text enc.+CLIP top-k) reads up to this many complex test questions
    # (Table 1's own, then seeded others): the claim powered without every system reading them (null: Table 1's)
    claim_questions: int | None = field(metadata=rng(ge=1))
    engine: Literal["llamacpp", "hf", "openai"]  # the reader LLM's engine (openai: lmm_base_url)
    reader_w_text: float = field(metadata=rng(ge=0))
    reader_w_image: float = field(metadata=rng(ge=0))
    lmm_base_url: str  # OpenAI-compatible server for reader: lmm (paper profile)
    lmm_model: str
    max_questions: int | None = field(metadata=rng(ge=1))  # null: all
    example_question: int = field(metadata=rng(ge=0))
