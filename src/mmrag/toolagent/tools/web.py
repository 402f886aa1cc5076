"""WebSearch: the offline fallback, TextQA over sentences, table rows and image captions."""

from __future__ import annotations

from collections.abc import Sequence

from mmrag.schema import Document
from mmrag.toolagent.tools.common import ToolAnswer
from mmrag.toolagent.tools.table import Record
from mmrag.toolagent.tools.text import Extractor, SentenceIndex, TextQA, Unit


def extra_units(documents: Sequence[Document], records: Sequence[Record]) -> list[Unit]:
    """Table rows and image captions as sentences (what WebSearch adds to TextQA's index)."""
    out = [Unit(f"{r.table_id}#r{r.row}", r.doc_id, r.doc_title,
                f"{r.entity}: " + "; ".join(f"{k} is {v}" for k, v in r.values.items()), "table")
           for r in records]
    for d in documents:
        for im in d.images:
            if im.caption:
                out.append(Unit(im.id, d.id, d.title, im.caption, "caption"))
    return out


class WebSearch:
    """Offline web search: TextQA over the whole corpus (sentences, table rows, captions)."""

    name = "WebSearch"

    def __init__(self, index: SentenceIndex, extractor: Extractor, k: int = 8):
        self.inner = TextQA(index, extractor, k)

    def __call__(self, question: str) -> ToolAnswer:
        a = self.inner(question)
        return ToolAnswer(self.name, a.answer, a.evidence, a.note)
