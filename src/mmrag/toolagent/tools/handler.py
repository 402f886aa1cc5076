"""The handler that dispatches `(Tool=X)` calls, and the four tools built over one corpus."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mmrag.schema import Document
from mmrag.toolagent.tools.common import NO_ANSWER, Encoder, ImageEncoder, ToolAnswer
from mmrag.toolagent.tools.image import ImageQA
from mmrag.toolagent.tools.table import TableQA, table_records
from mmrag.toolagent.tools.text import Extractor, SentenceIndex, TextQA, text_units
from mmrag.toolagent.tools.web import WebSearch, extra_units


@dataclass
class ToolCall:
    tool: str
    query: str
    answer: ToolAnswer


class ToolHandler:
    """Dispatches `(Tool=X)` calls to the tools and enforces the per-question cap."""

    def __init__(self, tools: dict[str, Callable[[str], ToolAnswer]],
                 *, max_calls: int, fallback: str | None = "WebSearch"):
        self.tools, self.max_calls, self.fallback = tools, max_calls, fallback
        self.calls: list[ToolCall] = []

    @property
    def exhausted(self) -> bool:
        return len(self.calls) >= self.max_calls

    def reset(self) -> None:
        self.calls = []

    def call(self, tool: str, query: str) -> ToolAnswer:
        """Run one tool; an unknown tool name or an exhausted budget is answered, not raised."""
        if self.exhausted:
            return ToolAnswer(tool, NO_ANSWER, note=f"tool-call cap of {self.max_calls} reached")
        name = next((t for t in self.tools if t.lower() == tool.strip().lower()), None)
        if name is None:
            ans = ToolAnswer(tool, NO_ANSWER, note=f"unknown tool {tool!r}; use one of {list(self.tools)}")
        else:
            ans = self.tools[name](query)
            if not ans.informative and self.fallback and name != self.fallback \
                    and self.fallback in self.tools and len(self.calls) + 1 < self.max_calls:
                # The paper's fallback: WebSearch when a tool has nothing informative.
                self.calls.append(ToolCall(name, query, ans))
                fb = self.tools[self.fallback](query)
                ans = ToolAnswer(fb.tool, fb.answer, fb.evidence, note=f"fallback after {name}")
                name = self.fallback
        self.calls.append(ToolCall(name or tool, query, ans))
        return ans


def world_maps(entities: Sequence[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str],
                                                              dict[str, list[str]]]:
    """(name -> type, id -> name, owner name -> member names) from entities.jsonl rows."""
    types = {e["name"]: e["type"] for e in entities}
    names = {e["id"]: e["name"] for e in entities}
    groups: dict[str, list[str]] = {}
    for e in entities:
        for r in e.get("relations", []):
            if r["relation"] in ("developed_by", "works_for") and r["object_id"] in names:
                groups.setdefault(names[r["object_id"]], []).append(e["name"])
    return types, names, groups


def build_tools(documents: Sequence[Document], encoder: Encoder, entity_types: dict[str, str],
                clip: ImageEncoder | None = None, load_image: Callable[[str], Any] | None = None,
                attributes: dict[str, dict[str, tuple[str, ...]]] | None = None,
                prompts: Callable[[str, str, str], list[str]] | None = None,
                entity_names: dict[str, str] | None = None,
                groups: dict[str, list[str]] | None = None, k: int = 8) -> dict[str, Callable[[str], ToolAnswer]]:
    """The four tools over one corpus (ImageQA only when a CLIP is given)."""
    extractor = Extractor(entity_types)
    records = table_records(documents)
    text_index = SentenceIndex(text_units(documents), encoder)
    web_index = SentenceIndex(text_index.units + extra_units(documents, records), encoder,
                              reuse=text_index)
    tools: dict[str, Callable[[str], ToolAnswer]] = {
        "TextQA": TextQA(text_index, extractor, k), "TableQA": TableQA(records, encoder)}
    if clip is not None and load_image is not None and attributes and prompts:
        tools["ImageQA"] = ImageQA(documents, clip, entity_types, attributes, prompts, load_image,
                                   entity_names, groups)
    tools["WebSearch"] = WebSearch(web_index, extractor, k)
    return tools
