"""The nouns every stage shares: documents, their parts, questions with gold, and traces.

Every corpus (the generated world, real Wikipedia, a paper's dataset, your own folder)
maps into ``Document``/``Passage``/``Question``; every system (BRIT, DnC, MM-R2, a baseline,
yours) answers a ``Question`` with a ``Trace``. The evaluator reads only traces, which is
what lets one table compare all of them.

On disk a corpus is a folder::

    documents.jsonl        one Document per line (sections, images, tables nested)
    images/                image files; Image.path is relative to the corpus folder
    questions/<set>.jsonl  one Question per line
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mmrag.io import read_jsonl

T = TypeVar("T")


class _Record:
    """to_dict/from_dict for nested dataclasses, tolerant of absent optional keys."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[T], raw: dict[str, Any]) -> T:
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = set(raw) - names
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown fields {sorted(unknown)}")
        kwargs = dict(raw)
        for name, sub in _NESTED.get(cls.__name__, {}).items():
            if name in kwargs and kwargs[name] is not None:
                kind = _CLASSES[sub]
                kwargs[name] = [kind.from_dict(x) for x in kwargs[name]]  # type: ignore[attr-defined]
        return cls(**kwargs)


@dataclass
class Image(_Record):
    id: str
    doc_id: str
    path: str  # relative to the corpus folder
    caption: str = ""
    section_id: str | None = None
    page: int | None = None  # layout page (for page-based linking)
    entity_id: str | None = None  # gold: what the image depicts (generated corpora)
    attributes: dict[str, str] = field(default_factory=dict)  # gold visual attributes


@dataclass
class Table(_Record):
    id: str
    doc_id: str
    columns: list[str]
    rows: list[list[str]]
    title: str = ""
    section_id: str | None = None


@dataclass
class Section(_Record):
    id: str
    doc_id: str
    title: str
    text: str
    page: int | None = None
    image_ids: list[str] = field(default_factory=list)
    table_ids: list[str] = field(default_factory=list)


@dataclass
class Document(_Record):
    id: str
    title: str
    sections: list[Section] = field(default_factory=list)
    images: list[Image] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    summary: str = ""
    domain: str | None = None  # gold knowledge domain (topic), when known
    entity_id: str | None = None  # the entity the page is about, when known
    source: str = ""  # world | wiki | folder | mmqa | ...
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Passage(_Record):
    """A retrievable chunk of text (MM-R2 passages, DnC TextQA, flat baselines)."""

    id: str
    doc_id: str
    title: str
    text: str
    section_id: str | None = None
    domain: str | None = None
    entity_id: str | None = None


@dataclass
class SubQuestion(_Record):
    """One unimodal single-hop step of a gold decomposition."""

    text: str
    tool: str  # TextQA | TableQA | ImageQA | WebSearch
    answer: str
    evidence_ids: list[str] = field(default_factory=list)


@dataclass
class Turn(_Record):
    """An earlier turn of a conversation (MMCoQA-style)."""

    question: str
    answer: str


@dataclass
class Question(_Record):
    id: str
    text: str
    answer: str
    dataset: str  # brit | mmqa | mmcoqa | infoseek | wiki | folder | ...
    kind: str = ""  # question type, e.g. Text-Image, Compose(TableQ,ImageQ)
    split: str = "test"
    choices: list[str] = field(default_factory=list)  # multiple choice, when any
    image_id: str | None = None  # the query image, when the question has one
    image_path: str | None = None  # relative to the corpus folder
    answer_aliases: list[str] = field(default_factory=list)
    gold_evidence: list[str] = field(default_factory=list)  # ids of Section/Image/Table/Passage
    gold_entity: str | None = None
    gold_passages: list[str] = field(default_factory=list)
    gold_domain: str | None = None
    decomposition: list[SubQuestion] = field(default_factory=list)
    history: list[Turn] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Evidence(_Record):
    """One retrieved item, as a system saw it."""

    id: str
    kind: str  # text | image | table | triplet | passage | unit
    content: str = ""
    score: float | None = None
    doc_id: str | None = None
    unit: str | None = None


@dataclass
class Step(_Record):
    """One step of a trace: where it looked, what it asked, what came back, what it kept."""

    action: str  # search | route | tool | think | answer | retrieve
    target: str | None = None  # unit id, tool name or index searched
    query: str | None = None
    evidence: list[Evidence] = field(default_factory=list)
    summary: str | None = None  # what the system exposed as its reading of the evidence
    text: str | None = None  # raw model output of the step, when there is one
    format_error: str | None = None


@dataclass
class Trace(_Record):
    """A system's whole answer to one question: the only thing the evaluator reads."""

    question_id: str
    system: str
    answer: str
    steps: list[Step] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    tool_calls: int = 0
    seconds: float = 0.0
    format_errors: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    def evidence(self) -> list[Evidence]:
        """Every retrieved item, in the order the system saw it."""
        return [e for s in self.steps for e in s.evidence]


_CLASSES: dict[str, type] = {c.__name__: c for c in (
    Image, Table, Section, Document, Passage, SubQuestion, Turn, Question, Evidence, Step, Trace)}
_NESTED: dict[str, dict[str, str]] = {
    "Document": {"sections": "Section", "images": "Image", "tables": "Table"},
    "Question": {"decomposition": "SubQuestion", "history": "Turn"},
    "Step": {"evidence": "Evidence"},
    "Trace": {"steps": "Step"},
}


def load_documents(corpus_dir: str | Path) -> list[Document]:
    return [Document.from_dict(r) for r in read_jsonl(Path(corpus_dir) / "documents.jsonl")]


def load_questions(path: str | Path) -> list[Question]:
    return [Question.from_dict(r) for r in read_jsonl(path)]


def question_path(corpus_dir: str | Path, name: str) -> Path:
    """data/<corpus>/questions/<name>.jsonl: where every corpus keeps its question sets."""
    return Path(corpus_dir) / "questions" / f"{name}.jsonl"


def load_question_set(corpus_dir: str | Path, name: str, key: str) -> list[Question]:
    """A corpus's question set; a missing one is an error naming the params ``key`` to change,
    the sets the corpus does have, and the stage that builds it."""
    path = question_path(corpus_dir, name)
    if not path.exists():
        have = sorted(p.stem for p in path.parent.glob("*.jsonl"))
        raise FileNotFoundError(f"{key} = '{name}': data/{Path(corpus_dir).name} has no question set '{name}' "
                                f"(it has {have or 'none'}); run the stage that builds data/{Path(corpus_dir).name} "
                                f"first (world, corpora) or set {key} to one of those")
    return load_questions(path)


def load_traces(path: str | Path) -> list[Trace]:
    return [Trace.from_dict(r) for r in read_jsonl(path)]
