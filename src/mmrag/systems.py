"""What a question-answering system is here, and the registry of the ones this repository has.

A system answers questions and shows its work as traces; the evaluator reads nothing else,
so any system (one of the papers', a baseline, or yours) gets both evaluation axes.

Adding a system is one class with ``name`` and ``answer`` and one line in :data:`SYSTEMS`::

    class MySystem:
        name = "my_system"
        def answer(self, questions: Sequence[Question]) -> list[Trace]: ...

    SYSTEMS["my_system"] = "mypackage.module:MySystem"
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from mmrag.schema import Question, Trace


@runtime_checkable
class System(Protocol):
    """Answers questions, one trace per question, in the order asked."""

    name: str

    def answer(self, questions: Sequence[Question]) -> list[Trace]:
        """One trace per question (same order); a question it cannot answer gets an empty answer."""
        ...


# name -> "module:Class"; imported only when asked for, so listing systems loads no model
SYSTEMS: dict[str, str] = {
    "flat_dense": "mmrag.baselines.single_shot:FlatDense",
    "single_shot": "mmrag.baselines.single_shot:SingleShot",
    "mmr2": "mmrag.mmr2.system:MMR2Agent",
    "tools_answer": "mmrag.toolagent.system:ToolsAnswer",
    "react": "mmrag.toolagent.system:ReAct",
    "dnc": "mmrag.toolagent.system:DnC",
    "brit": "mmrag.brit.system:BritSystem",
}


def system_class(name: str) -> type:
    """The class registered under ``name``; the error lists the registered names."""
    if name not in SYSTEMS:
        raise KeyError(f"no system '{name}'; registered: {', '.join(sorted(SYSTEMS))}")
    module, _, cls = SYSTEMS[name].partition(":")
    return getattr(importlib.import_module(module), cls)
