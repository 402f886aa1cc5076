"""params.yaml -> typed, frozen, validated configuration. The only module that reads params.yaml.

Every stage has one section (a frozen dataclass below) plus the shared ``base`` section.
Validation is strict on purpose: an ablation with a misspelt key silently running the
default is the most expensive bug a research repo can have.

To add a stage: write its dataclass, add a field of that type to :class:`Params`, add the
section to ``params.yaml``. Range checks go in field metadata (``ge``, ``gt``, ``le``, ``lt``).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import yaml

ROOT = Path(__file__).resolve().parents[2]
PARAMS_FILE = ROOT / "params.yaml"
PROFILES_DIR = ROOT / "profiles"
PROFILES = ("smoke", "default", "paper")


class ConfigError(ValueError):
    """A params value that cannot be used; the message names the key path and the fix."""


def rng(ge: float | None = None, gt: float | None = None, le: float | None = None,
        lt: float | None = None) -> dict[str, float]:
    """Field metadata for a numeric range check."""
    return {k: v for k, v in dict(ge=ge, gt=gt, le=le, lt=lt).items() if v is not None}


# --------------------------------------------------------------------------- sections
@dataclass(frozen=True)
class Base:
    """Shared by every stage."""

    seed: int = field(metadata=rng(ge=0))
    profile: Literal["smoke", "default", "paper"]
    # Hub ids (Hugging Face, OpenAI-compatible endpoints) are refused unless this is true.
    allow_network: bool
    device: Literal["cpu", "cuda", "auto"]


@dataclass(frozen=True)
class Models:
    """Which models the `models` stage provisions, and which every later stage loads by name."""

    llm: str
    # Extra causal LMs to provision for size sweeps; a name whose package is absent is
    # reported and skipped (the stage still runs).
    extra_llms: tuple[str, ...]
    text_encoder: str
    spacy: str
    # the vision-language encoder: the clip stage's folder (trained here, or a pointer to clip.pretrained)
    clip: str
    sample_prompt: str
    sample_max_new_tokens: int = field(metadata=rng(ge=1, le=512))
    # The model ladder: LLMs provisioned as GGUF for the llama.cpp engine (HF weights only for
    # llm and extra_llms, the training bases) and measured on the models stage's probe.
    ladder: tuple[str, ...]
    engine: Literal["llamacpp", "hf", "openai"]  # engine of the sample generations and the probe


@dataclass(frozen=True)
class Inference:
    """How the generation service runs models (src/mmrag/models/generation.py)."""

    threads: int = field(metadata=rng(ge=1))  # llama.cpp CPU threads
    slots: int = field(metadata=rng(ge=1, le=64))  # concurrent sequences (continuous batching)
    ctx_per_slot: int = field(metadata=rng(ge=256))  # tokens each slot holds (prompt + reply)
    hf_batch_size: int = field(metadata=rng(ge=1))  # engine hf: generate() batch
    cache_dir: str  # LoRA adapters exported to GGUF on demand (and Q4_0 copies)
    weights: Literal["shipped", "q4_0"]  # llama.cpp's weights: the provisioned GGUF or a Q4_0 copy


@dataclass(frozen=True)
class World:
    """The generated enterprise wiki (stage `world`): its size, pages, images and question sets."""

    domains: int = field(metadata=rng(ge=2, le=12))
    products_per_domain: int = field(metadata=rng(ge=2, le=8))
    people_per_domain: int = field(metadata=rng(ge=2, le=8))
    places_per_domain: int = field(metadata=rng(ge=1, le=4))
    events_per_domain: int = field(metadata=rng(ge=1, le=4))
    # one value is drawn per page (BRIT's test pages: 5.61 images, 8.83 sections on average)
    images_per_page: tuple[int, ...]
    sections_per_page: tuple[int, ...]
    heldout_images: int = field(metadata=rng(ge=1, le=10))  # per visual entity
    image_size: int = field(metadata=rng(ge=32, le=512))
    triplets_per_page: int = field(metadata=rng(ge=1))  # layout pages
    descriptive_caption_share: float = field(metadata=rng(ge=0, le=1))
    caption_attribute_drop: float = field(metadata=rng(ge=0, le=1))
    brit_questions: int = field(metadata=rng(ge=5))
    brit_nea_pairs: int = field(metadata=rng(ge=0))
    mmqa_questions: int = field(metadata=rng(ge=13))
    mmcoqa_conversations: int = field(metadata=rng(ge=3))
    infoseek_questions: int = field(metadata=rng(ge=10))
    infoseek_unseen_entity_share: float = field(metadata=rng(gt=0, lt=1))
    dev_share: float = field(metadata=rng(ge=0, lt=1))
    test_share: float = field(metadata=rng(gt=0, lt=1))
    # BRIT validation: a question whose cosine similarity to its source text exceeds this is
    # rejected (the evidence must not be findable from the question wording alone)
    validation_threshold: float = field(metadata=rng(gt=0, le=1))
    samples: int = field(metadata=rng(ge=1))  # pages shown in the notebook grid


@dataclass(frozen=True)
class Clip:
    """The vision-language encoder (stage `clip`): a small open_clip trained on attribute captions."""

    corpus: str  # folder under data/ with images.jsonl (train + heldout splits)
    # paper profile: an OpenCLIP ARCH/TAG (e.g. ViT-H-14/laion2b_s32b_b79k) evaluated instead of
    # training; needs base.allow_network
    pretrained: str
    image_size: int = field(metadata=rng(ge=32, le=512))
    embed_dim: int = field(metadata=rng(ge=8))
    vision_width: int = field(metadata=rng(ge=8))  # ModifiedResNet base width
    vision_layers: tuple[int, ...]
    text_width: int = field(metadata=rng(ge=16))
    text_layers: int = field(metadata=rng(ge=1))
    text_heads: int = field(metadata=rng(ge=1))
    context_length: int = field(metadata=rng(ge=8, le=77))
    # extra pictures of random attribute combinations (captions are generic, so this is honest)
    extra_images: int = field(metadata=rng(ge=0))
    render_size: int = field(metadata=rng(ge=32, le=512))
    steps: int = field(metadata=rng(ge=1))
    batch_size: int = field(metadata=rng(ge=2))
    lr: float = field(metadata=rng(gt=0))
    weight_decay: float = field(metadata=rng(ge=0))
    warmup_steps: int = field(metadata=rng(ge=0))
    caption_drop: float = field(metadata=rng(ge=0, le=1))  # share of partial captions
    kind_batches: float = field(metadata=rng(ge=0, le=1))  # one-kind batch share
    # weight of the per-attribute cross-entropy over value captions ("a product with a logo at
    # the top left"); 0 = captions only, which never learn the small logo or the pattern
    attribute_weight: float = field(metadata=rng(ge=0))
    log_every: int = field(metadata=rng(ge=1))
    eval_every: int = field(metadata=rng(ge=1))
    threads: int = field(metadata=rng(ge=1))
    checkpoint_every: int = field(metadata=rng(ge=0))  # steps between resumable checkpoints; 0: none
    examples: int = field(metadata=rng(ge=1))  # retrieval examples in the notebook


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


@dataclass(frozen=True)
class KnowledgeMap:
    """MM-R2 KnowledgeMap: passages, HDBSCAN configuration search, metadata, quality check."""

    corpora: tuple[str, ...]  # folders under data/
    max_docs: int = field(metadata=rng(ge=0))  # per corpus, seeded; 0 = all
    max_chars: int = field(metadata=rng(gt=0))
    chunk_chars: int = field(metadata=rng(gt=0))
    overlap: int = field(metadata=rng(ge=0))
    # the search grid: PCA dims (0 = none), min cluster size as a share of passages, ...
    dims: tuple[int, ...]
    min_cluster_frac: tuple[float, ...]
    min_samples: tuple[int, ...]
    selection: tuple[Literal["eom", "leaf"], ...]
    min_units: int = field(metadata=rng(ge=2))
    max_units: int = field(metadata=rng(ge=2))
    w_coherence: float = field(metadata=rng(ge=0))
    w_balance: float = field(metadata=rng(ge=0))
    w_coverage: float = field(metadata=rng(ge=0))
    w_utility: float = field(metadata=rng(ge=0))
    dev_queries: int = field(metadata=rng(ge=1))
    k: int = field(metadata=rng(ge=1))
    # quality check
    qc_min_size_frac: float = field(metadata=rng(ge=0, lt=1))
    qc_max_share: float = field(metadata=rng(gt=0, le=1))
    qc_min_coherence: float = field(metadata=rng(ge=0, le=1))
    writer: str  # keywords (c-TF-IDF) | an LLM name (registry) for titles/descriptions
    engine: Literal["llamacpp", "hf", "openai"]  # the LLM writer's engine
    top_keywords: int = field(metadata=rng(ge=1))
    representatives: int = field(metadata=rng(ge=1))
    card_titles: int = field(metadata=rng(ge=0))  # page titles on each unit's card


@dataclass(frozen=True)
class Mmr2Traj:
    """MM-R2-Traj synthesis: executed teacher trajectories, filters, statistics."""

    corpus: str  # its KnowledgeMap must be among knowledge_map.corpora
    question_set: str
    max_questions: int = field(metadata=rng(ge=1))  # training questions used
    # share routed wrong first, then recovering; only where no unit card lists the referent
    wrong_route_frac: float = field(metadata=rng(ge=0, le=1))
    k: int = field(metadata=rng(ge=1))
    budget: int = field(metadata=rng(ge=1))
    val_frac: float = field(metadata=rng(ge=0, lt=1))
    # what the agent reads (the trained policy is evaluated with it): each passage cut to this
    # many characters, the query's sentences first (paper: whole 800-character chunks) ...
    passage_chars: int = field(metadata=rng(ge=40))
    unit_descriptions: bool  # ... and unit cards with their keyword descriptions (paper: yes)
    oracle_referent: bool  # true: the teacher binds each image to its gold entity
    # programmatic | an LLM (registry name, path, or a model served at teacher_base_url) that
    # rewrites the programmatic thoughts in its own words before the filters
    teacher: str
    teacher_base_url: str | None  # OpenAI-compatible endpoint for the teacher
    engine: Literal["llamacpp", "hf", "openai"]  # local teacher and zero-shot agent
    zero_shot_questions: int = field(metadata=rng(ge=0))  # the untrained policy's rollouts (demo)


@dataclass(frozen=True)
class ToolagentData:
    """Each strategy's teacher dialogues (stage toolagent_data)."""

    corpus: str
    question_sets: tuple[str, ...]
    # programmatic: the strategies' own programmatic teachers; llm: an LLM writes the dialogues
    # of teacher_questions train questions (kept when they pass the gold check) and the
    # programmatic ones fill in the rest; both: the LLM's kept dialogues are added to them
    teacher: Literal["programmatic", "llm", "both"]
    observations: Literal["gold", "tools"]  # the programmatic teachers' observations
    teacher_model: str  # the LLM teacher: a ladder name (engine llamacpp/hf) or a served model (openai)
    engine: Literal["llamacpp", "hf", "openai"]  # the LLM teacher's engine
    teacher_base_url: str  # engine openai: an OpenAI-compatible server; the key comes from the env
    teacher_questions: int = field(metadata=rng(ge=0))  # train questions the LLM teacher attempts
    teacher_shots: int = field(metadata=rng(ge=0, le=32))
    teacher_max_new_tokens: int = field(metadata=rng(ge=8, le=512))
    max_tool_calls: int = field(metadata=rng(ge=1, le=50))
    examples_shown: int = field(metadata=rng(ge=0, le=20))


@dataclass(frozen=True)
class ToolagentFinetune:
    """One LoRA adapter per divider LLM and strategy, each on its own strategy's teacher
    dialogues at the same token budget (toolagent_finetune)."""

    llms: tuple[str, ...]  # trained; evaluated zero-shot too on the held-out dialogues
    zero_shot_llms: tuple[str, ...]  # held-out check only, untrained (e.g. a bigger ladder model)
    strategies: tuple[str, ...]
    train_tokens: int = field(metadata=rng(ge=1))  # per adapter: the same budget for every strategy
    # share of multi-hop dialogues in each training sample; null: the test split's share of the
    # multi-hop question set (toolagent_data's summary.json)
    multi_hop_share: float | None = field(metadata=rng(ge=0, le=1))
    epochs: float = field(metadata=rng(gt=0))
    max_steps: int  # > 0 caps the run (smoke)
    batch_size: int = field(metadata=rng(ge=1))
    learning_rate: float = field(metadata=rng(gt=0))
    max_length: int = field(metadata=rng(ge=64))
    lora_r: int = field(metadata=rng(ge=1))
    lora_alpha: int = field(metadata=rng(ge=1))
    lora_dropout: float = field(metadata=rng(ge=0, lt=1))
    target_modules: tuple[str, ...]  # the Linear layers that get a LoRA adapter
    grad_accum: int = field(metadata=rng(ge=1))
    warmup_ratio: float = field(metadata=rng(ge=0, lt=1))  # learning-rate warm-up, a share of the steps
    quantize_4bit: bool  # QLoRA (bitsandbytes NF4), as in the paper, for every adapter
    # one LLM whose DnC adapter is trained a second time with the other setting (QLoRA vs
    # LoRA): loss, held-out EM, time and memory side by side; "" = no comparison
    qlora_compare: str
    gradient_checkpointing: bool  # off is ~20% faster on CPU for these sizes
    save_steps: int = field(metadata=rng(ge=1))
    keep_checkpoints: bool  # after a finished run only the adapter is needed
    heldout_dialogues: int = field(metadata=rng(ge=0))  # dev dialogues per strategy, teacher-forced check
    engine: Literal["llamacpp", "hf", "openai"]  # the held-out check's engine (+ exported LoRA)


@dataclass(frozen=True)
class ToolagentEval:
    """The paper's Tables 3 and 4: strategies x LLMs on the test splits (toolagent_eval)."""

    corpus: str
    llms: tuple[str, ...]
    size_llms: tuple[str, ...]  # other sizes for the size claim only: their fine-tuned DnC on question_set
    text_encoder: str  # TextQA's retriever (DnC's paper: instructor-large); the rest use models.text_encoder
    question_set: str  # data/<corpus>/questions/<set>.jsonl: the multi-hop set (Table 3)
    conv_set: str  # the conversational set (Table 4); "" = none
    n_mmqa: int = field(metadata=rng(ge=1))  # questions of question_set
    n_mmcoqa: int = field(metadata=rng(ge=0))  # turns of conv_set
    split: str
    # agents that also run on the base model (no adapter): dnc is the fine-tuning claim's control;
    # react base decides no claim of the paper
    base_strategies: tuple[Literal["react", "dnc"], ...]
    max_tool_calls: int = field(metadata=rng(ge=1, le=50))
    max_new_tokens: int = field(metadata=rng(ge=8, le=512))
    engine: Literal["llamacpp", "hf", "openai"]  # the dialogues' LLM
    ceiling_subquestions: int = field(metadata=rng(ge=1))


@dataclass(frozen=True)
class BritGraph:
    """BRIT's unified image-text graph (stage `brit_graph`)."""

    corpus: str  # folder under data/
    # the NEA variant of the corpus's pages (a file in the corpus folder, same images);
    # empty: no NEA graph is built
    nea_documents: str
    extractor: Literal["spacy", "llm"]  # llm: the paper's LLM triplet extractor
    extractor_llm: str  # the LLM extractor's ladder model (extractor: llm, and the comparison)
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
    reader_llm: str  # reader: llm (a models ladder name)
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


@dataclass(frozen=True)
class Mmr2Train:
    """MM-R2 training: LoRA SFT on MM-R2-Traj, then GRPO with the retrieval tool in the loop."""

    corpus: str  # its KnowledgeMap and trajectories must exist
    question_set: str  # GRPO prompts: its train split
    # the policy LLM (a provisioned ladder name, a path, or a hub id in the paper profile): its own key,
    # so choosing the policy size reruns MM-R2's stages only, not `models` and everything after it
    policy: str
    max_trajectories: int = field(metadata=rng(ge=0))  # 0: all of data/mmr2_traj
    # SFT (paper: 5,000 steps, batch 8, lr 5e-6 in the paper profile; sized for 2 CPU cores here)
    sft_max_steps: int = field(metadata=rng(ge=0))  # 0: sft_epochs decide
    sft_batch_size: int = field(metadata=rng(ge=1))
    sft_lr: float = field(metadata=rng(gt=0))
    sft_max_length: int = field(metadata=rng(ge=64))
    sft_epochs: float = field(metadata=rng(gt=0))  # sft_max_steps caps the run first
    sft_grad_accum: int = field(metadata=rng(ge=1))
    sft_warmup_ratio: float = field(metadata=rng(ge=0))
    sft_lora_dropout: float = field(metadata=rng(ge=0, lt=1))
    sft_quantize_4bit: bool  # QLoRA: 4-bit NF4 base weights (bitsandbytes)
    sft_gradient_checkpointing: bool
    sft_keep_checkpoints: bool  # after a finished run only the adapter is needed
    lora_r: int = field(metadata=rng(ge=1))  # SFT's LoRA; GRPO's only when it starts without one
    lora_alpha: int = field(metadata=rng(ge=1))
    target_modules: tuple[str, ...]  # LoRA target modules (SFT, and a GRPO LoRA started fresh)
    # GRPO (paper: 90 steps, batch 16, lr 5e-7)
    grpo_steps: int = field(metadata=rng(ge=1))
    grpo_prompts_per_step: int = field(metadata=rng(ge=1))
    group_size: int = field(metadata=rng(ge=2))
    temperature: float = field(metadata=rng(gt=0))
    top_p: float = field(metadata=rng(gt=0, le=1))
    grpo_lr: float = field(metadata=rng(gt=0))
    beta: float = field(metadata=rng(ge=0))
    grpo_loss_type: str  # TRL GRPOConfig.loss_type
    grpo_lora_dropout: float = field(metadata=rng(ge=0, lt=1))  # a GRPO LoRA started fresh
    route_weight: float = field(metadata=rng(ge=0))
    answer_weight: float = field(metadata=rng(ge=0))
    k: int = field(metadata=rng(ge=1))  # passages per search (retrieval budget)
    budget: int = field(metadata=rng(ge=1))  # searches per episode
    max_turns: int = field(metadata=rng(ge=1))
    turn_tokens: int = field(metadata=rng(ge=8))
    max_completion_tokens: int = field(metadata=rng(ge=32))
    grpo_micro_batch: int = field(metadata=rng(ge=1))  # episodes per backward (memory)
    save_steps: int = field(metadata=rng(ge=1))
    # python: in-process; accelerate: `accelerate launch --config_file <accelerate_config>`
    launcher: Literal["python", "accelerate"]
    accelerate_config: str


@dataclass(frozen=True)
class TwoAxisEval:
    """Both evaluation axes for every system's traces; the MM-R2 tables and the cross-system table."""

    corpus: str
    question_set: str  # MM-R2's set (its test_unseen_entity/question splits)
    splits: tuple[str, ...]
    per_split: int = field(metadata=rng(ge=1))  # questions per split, seeded
    descriptive_per_split: int = field(metadata=rng(ge=1))  # reader ceilings and budget sweep
    # the agentic-loop claim's pair (full MM-R2, single-shot intent + KM routing) reads this many per
    # split (per_split's questions first); below per_split: per_split
    claim_per_split: int = field(metadata=rng(ge=1))
    k: int = field(metadata=rng(ge=1))  # passages per search (as in training)
    budgets: tuple[int, ...]  # passages per search for the budget table
    max_turns: int = field(metadata=rng(ge=1))
    max_new_tokens: int = field(metadata=rng(ge=8))
    engine: Literal["llamacpp", "hf", "openai"]  # the policies' and the LLM judge's engine
    recall_k: tuple[int, ...]
    # other systems' traces: data/<stage>/traces/<system>__<set>.jsonl
    trace_stages: tuple[str, ...]
    cross_per_set: int = field(metadata=rng(ge=1))  # flat baseline questions per set
    # the text-only part on the real Wikipedia corpus (its own KnowledgeMap); 0 questions: skip
    text_corpus: str
    text_question_set: str
    text_questions: int = field(metadata=rng(ge=0))
    judge: Literal["proxy", "llm"]  # llm: a ladder model through the generation service (or judge_base_url)
    judge_base_url: str
    judge_model: str
    judge_questions: int = field(metadata=rng(ge=1))  # the LLM judge scores this many of the sample (seeded)
    judge_check_questions: int = field(metadata=rng(ge=0))  # dev questions x 3 labelled traces: agreement
    fidelity: bool
    # below this many correct full answers Acc(summary)/Acc(full) is undefined (None), not 1/1
    fidelity_min_correct: int = field(metadata=rng(ge=1))


@dataclass(frozen=True)
class Report:
    """The repository's own paper: every headline table from the stages' metrics."""

    headline_digits: int = field(metadata=rng(ge=1, le=6))
    # the claims table (mmrag.evaluate.claims): two-sided level, power for n-needed, resamples
    alpha: float = field(metadata=rng(gt=0, lt=0.5))
    power: float = field(metadata=rng(gt=0.5, lt=1))
    bootstrap: int = field(metadata=rng(ge=100))
    # a stability claim (BRIT's knob sensitivity) is reproduced when its 95 % CI lies within +-margin
    stability_margin: float = field(metadata=rng(gt=0, lt=1))
    # a strategy contrast (DnC vs ToolsAnswer / mm-ReAct) is untestable here when an agent breaks the
    # dialogue format on at least this share of the questions: the verdict would read the format
    max_format_errors: float = field(metadata=rng(gt=0, le=1))


@dataclass(frozen=True)
class Params:
    """The whole params.yaml."""

    base: Base
    models: Models
    inference: Inference
    world: World
    toolagent_data: ToolagentData
    toolagent_finetune: ToolagentFinetune
    toolagent_eval: ToolagentEval
    clip: Clip
    corpora: Corpora
    knowledge_map: KnowledgeMap
    mmr2_traj: Mmr2Traj
    brit_graph: BritGraph
    brit_linking: BritLinking
    mmr2_train: Mmr2Train
    two_axis_eval: TwoAxisEval
    report: Report


# --------------------------------------------------------------------------- validation
def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin in (list, tuple):
        return f"a list of {_type_name(typing.get_args(tp)[0])}"
    if origin is dict:
        return f"a mapping to {_type_name(typing.get_args(tp)[1])}"
    if dataclasses.is_dataclass(tp):
        return f"a mapping ({tp.__name__} section)"
    if tp is type(None):
        return "null"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(
        tp, getattr(tp, "__name__", str(tp)))


def _fail(path: str, value: Any, expected: str) -> typing.NoReturn:
    raise ConfigError(f"params: {path} = {value!r} is invalid: expected {expected}.")


def _coerce(value: Any, tp: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin is Literal:
        if value not in typing.get_args(tp):
            _fail(path, value, _type_name(tp))
        return value
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            try:
                return _coerce(value, arg, path)
            except ConfigError:
                continue
        _fail(path, value, _type_name(tp))
    if origin in (list, tuple):
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            _fail(path, value, _type_name(tp))
        (item_tp, *_) = typing.get_args(tp)
        return tuple(_coerce(v, item_tp, f"{path}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping):
            _fail(path, value, _type_name(tp))
        _, val_tp = typing.get_args(tp)
        return types.MappingProxyType(
            {str(k): _coerce(v, val_tp, f"{path}.{k}") for k, v in value.items()})
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, path)
    if tp is type(None):
        if value is not None:
            _fail(path, value, "null")
        return None
    if tp is bool:
        if not isinstance(value, bool):
            _fail(path, value, "true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(path, value, "an integer")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            _fail(path, value, "a number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            _fail(path, value, "a string")
        return value
    raise TypeError(f"config.py: unsupported field type {tp!r} at {path}")


def _check_range(value: Any, meta: Mapping[str, Any], path: str) -> None:
    checks = {"ge": (lambda v, b: v >= b, ">="), "gt": (lambda v, b: v > b, ">"),
              "le": (lambda v, b: v <= b, "<="), "lt": (lambda v, b: v < b, "<")}
    for key, (ok, sym) in checks.items():
        if key in meta and value is not None and not ok(value, meta[key]):
            _fail(path, value, f"a value {sym} {meta[key]}")


def _build(cls: type, raw: Any, path: str) -> Any:
    if not isinstance(raw, Mapping):
        _fail(path or "<root>", raw, _type_name(cls))
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in raw:
        if key not in fields:
            where = f"{path}.{key}" if path else str(key)
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"params: unknown key '{where}'.{hint} "
                              f"Allowed keys here: {', '.join(fields)}.")
    missing = [name for name in fields if name not in raw]
    if missing:
        where = f"'{path}'" if path else "the top level"
        raise ConfigError(f"params: {where} lacks {', '.join(repr(m) for m in missing)}. "
                          f"params.yaml is the only home of a default: add the key there "
                          f"(see the default profile's params.yaml in git).")
    kwargs = {}
    for name, f in fields.items():
        sub = f"{path}.{name}" if path else name
        value = _coerce(raw[name], hints[name], sub)
        _check_range(value, f.metadata, sub)
        kwargs[name] = value
    return cls(**kwargs)


def from_dict(raw: Mapping[str, Any]) -> Params:
    """Validate a params mapping (as read from YAML) into frozen :class:`Params`."""
    params = _build(Params, raw, "")
    if params.base.profile != "paper" and params.base.allow_network:
        raise ConfigError("params: base.allow_network = True is only allowed with "
                          "base.profile = 'paper' (smoke and default run offline).")
    return params


def load(path: str | Path = PARAMS_FILE) -> Params:
    """Read and validate params.yaml."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"params: {path} not found; run from the repository root.")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"params: {path} is not valid YAML: {e}") from e
    return from_dict(raw)


def section(name: str, **injected: Mapping[str, Any]) -> Params:
    """Params for a notebook: sections injected by papermill win, the rest come from params.yaml.

    Notebooks call ``section("world", base=base, world=world)``; when opened by hand in
    Jupyter the injected dicts are empty and params.yaml fills them in.
    """
    raw = _read_raw(PARAMS_FILE) if PARAMS_FILE.exists() else {}
    for key, value in injected.items():
        if value:  # papermill injects whole sections; a partial one is merged over params.yaml
            raw[key] = _merge(raw.get(key) or {}, value) if isinstance(raw.get(key), Mapping) else dict(value)
    if name not in {f.name for f in dataclasses.fields(Params)}:
        raise ConfigError(f"params: no section '{name}' in config.Params")
    return from_dict(raw)


# --------------------------------------------------------------------------- before a run
DOCUMENT_SUFFIXES = (".html", ".htm", ".xhtml", ".md", ".markdown", ".pdf", ".zim")  # = corpora.ingest


def apply_overrides(raw: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """A params mapping with DVC's ``-S`` overrides applied: ``a.b=value`` (a YAML value),
    ``+a.b=value`` (add) and ``~a.b`` (remove). The input is left untouched."""
    out = copy.deepcopy(dict(raw))
    for item in overrides:
        spec = item.split(":", 1)[1] if ":" in item.split("=", 1)[0] else item  # params.yaml:a.b=1
        if spec.startswith("~"):
            keys, value, remove = spec[1:], None, True
        else:
            if "=" not in spec:
                raise ConfigError(f"override '{item}': expected key=value, +key=value or ~key")
            keys, text = spec.lstrip("+").split("=", 1)
            try:
                value, remove = yaml.safe_load(text), False
            except yaml.YAMLError as e:
                raise ConfigError(f"override '{item}': the value is not valid YAML ({e})") from e
        node = out
        *parents, last = keys.split(".")
        for key in parents:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override '{item}': '{key}' is not a section")
        if remove:
            node.pop(last, None)
        else:
            node[last] = value
    return out


def preflight(params: Params, sections: Sequence[str] | None = None) -> list[str]:
    """Cheap checks of the paths a user gives (seconds), so a stage never fails on them late."""
    problems = []
    wanted = set(sections) if sections is not None else {f.name for f in dataclasses.fields(Params)}
    if "corpora" in wanted:
        folder = params.corpora.folder.path
        if folder is not None:
            root = Path(folder).expanduser()
            if not root.is_dir():
                problems.append(f"corpora.folder.path: '{folder}' is not a folder; point it at a folder of "
                                f"{'/'.join(DOCUMENT_SUFFIXES)} files (and questions/*.jsonl), or set it to null")
            elif not any(p.suffix.lower() in DOCUMENT_SUFFIXES for p in root.rglob("*") if p.is_file()):
                problems.append(f"corpora.folder.path: '{folder}' holds no {'/'.join(DOCUMENT_SUFFIXES)} file; "
                                f"put your documents there (questions go in its questions/ folder)")
        for name, path in params.corpora.datasets.items():
            if not Path(path).expanduser().exists():
                problems.append(f"corpora.datasets.{name}: '{path}' does not exist; point it at the downloaded "
                                f"files of {name} or remove the entry")
    return problems


def as_dict(obj: Any) -> Any:
    """Plain-Python view of a config object (for logging into metrics and notebooks)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: as_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (tuple, list)):
        return [as_dict(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: as_dict(v) for k, v in obj.items()}
    return obj


# --------------------------------------------------------------------------- profiles
def _read_raw(path: Path) -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(Path(path).read_text()) or {})


def _merge(into: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), Mapping):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)
    return into


def profile_overrides(profile: str) -> dict[str, Any]:
    """The overlay a profile applies on top of the default params.yaml."""
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile '{profile}': expected one of {', '.join(PROFILES)}")
    if profile == "default":
        return {"base": {"profile": "default"}}
    over = _read_raw(PROFILES_DIR / f"{profile}.yaml")
    over.setdefault("base", {})["profile"] = profile
    return over


def write_profile(profile: str, params_path: str | Path = PARAMS_FILE) -> Params:
    """Rewrite params.yaml in place with a profile's overrides, keeping its comments."""
    from ruamel.yaml import YAML

    params_path = Path(params_path)
    ry = YAML()
    ry.preserve_quotes = True
    doc = ry.load(params_path.read_text())
    _merge(doc, profile_overrides(profile))
    validated = from_dict(yaml.safe_load(_dump(ry, doc)))
    tmp = params_path.with_suffix(".yaml.tmp")
    tmp.write_text(_dump(ry, doc))
    tmp.replace(params_path)
    return validated


def _represent_float(representer: Any, value: float) -> Any:
    """Floats PyYAML reads back as floats: YAML 1.1 needs a dot before an exponent (5.0e-06)."""
    text = repr(float(value))
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return representer.represent_scalar("tag:yaml.org,2002:float", text)


def _dump(ry: Any, doc: Any) -> str:
    import io

    ry.representer.add_representer(float, _represent_float)
    buf = io.StringIO()
    ry.dump(doc, buf)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    """`python -m mmrag.config [check|use PROFILE]`."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m mmrag.config", description=main.__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    chk = sub.add_parser("check", help="validate a params file")
    chk.add_argument("path", nargs="?", default=str(PARAMS_FILE))
    chk.add_argument("-S", "--set-param", dest="overrides", action="append", default=[],
                     help="a dvc-style override to check with the file (repeatable)")
    use = sub.add_parser("use", help="apply a profile's overrides to params.yaml")
    use.add_argument("profile", choices=PROFILES)
    use.add_argument("--params", default=str(PARAMS_FILE))
    args = ap.parse_args(argv)
    try:
        if args.cmd == "check":
            p = from_dict(apply_overrides(_read_raw(Path(args.path)), args.overrides)) if args.overrides \
                else load(args.path)
            found = preflight(p)
            if found:
                raise ConfigError("; ".join(found))
            print(f"ok: {args.path} (profile {p.base.profile}, seed {p.base.seed})")
        else:
            p = write_profile(args.profile, args.params)
            print(f"ok: {args.params} now uses profile {p.base.profile}")
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
