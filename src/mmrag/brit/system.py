"""BRIT as a :class:`mmrag.systems.System`: retrieve over the unified graph, read, trace.

A :class:`BritSystem` is a retriever (BRIT's :class:`~mmrag.brit.retrieval.BritRetriever` under
one linker set, or one of the flat baselines it is compared with, which return the same
``Retrieved``), an optional reader and the corpus's captions and section ids. ``answer`` gives the
shared traces; ``run`` also gives the per-question score rows the ``brit_linking`` stage tabulates
(both are :func:`mmrag.brit.experiment.run`, so the stage's traces are this System's).

    system = BritSystem.load(params)            # the saved graph, params' linkers and reader
    traces = system.answer(questions)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mmrag.brit import experiment
from mmrag.schema import Question, Trace


@dataclass
class BritSystem:
    """One retriever (and reader) over one corpus's graph, answering questions with traces."""

    retriever: Any  # anything with retrieve(text, image_path) -> Retrieved
    reader: Any | None  # None: retrieve only (traces without answers)
    captions: dict[str, str]  # image id -> caption (images travel with their captions)
    sections: set[str]  # section ids: what recall counts as text evidence
    name: str = "brit"

    @classmethod
    def graph(cls, systems: experiment.Systems, linkers: Iterable[str], name: str,
              reader: Any | None = None, threshold: float | None = None) -> BritSystem:
        """BRIT under a linker set (``threshold``: the graph filter's, default the systems')."""
        return cls(systems.brit(linkers, threshold=threshold), reader, systems.captions,
                   set(systems.sections), name)

    @classmethod
    def flat(cls, systems: experiment.Systems, mode: str, name: str, reader: Any | None = None) -> BritSystem:
        """A flat top-k baseline over the same corpus (``mode``: clip | dual)."""
        return cls(systems.baseline(mode), reader, systems.captions, set(systems.sections), name)

    @classmethod
    def load(cls, params: Any, linkers: Iterable[str] | None = None, name: str = "brit") -> BritSystem:
        """BRIT over the graph ``brit_graph`` saved, with the linkers (default: params'
        ``brit_linking.linking``) and reader params ask for; loads the encoders."""
        from mmrag.io import DATA

        systems, _ = experiment.open_systems(params.brit_graph, params.models, params.brit_linking,
                                             params.base.allow_network, DATA)
        reader = experiment.make_reader(params.brit_linking, systems, DATA / params.brit_graph.corpus,
                                        params.base.allow_network, params.inference, params.base.device)
        return cls.graph(systems, params.brit_linking.linking if linkers is None else linkers, name, reader)

    def run(self, questions: Sequence[Question]) -> tuple[list[dict[str, Any]], list[Trace]]:
        """(score row, trace) per question: recall, words, correctness, latency; the shared Trace."""
        return experiment.run(self.retriever, list(questions), self.captions, self.name,
                              reader=self.reader, sections=self.sections)

    def answer(self, questions: Sequence[Question]) -> list[Trace]:
        """One trace per question, in order (empty answer without a reader)."""
        return self.run(questions)[1]
