"""The conquerors: unimodal single-hop question answerers, and the handler that dispatches calls.

Each tool answers one question with a short answer (not a page of text) and the evidence it
used. They are deterministic components, not LLMs, so each has a measurable ceiling: its
accuracy on the world's gold single-hop sub-questions.

- TextQA: dense retrieval over sentences (page title prepended, so "It was designed by ..."
  keeps its subject) with the text encoder, then extraction of the span of the asked type
  (a known entity of the right kind, a year, a number, a colour, a capitalised name).
- TableQA: tables become records (entity -> attribute -> value); the question picks rows by
  entity name, the column by attribute words, and counting, min/max or comparison when asked.
- ImageQA: the trained CLIP scores every candidate value of the asked visual attribute against
  the named entity's images (or every candidate entity for "which of ... has ...").
- WebSearch: the offline fallback, TextQA over everything (sentences, table rows as sentences,
  image captions).

One module per tool (``text``, ``table``, ``image``, ``web``), the shared helpers in ``common``,
the dispatcher and :func:`build_tools` in ``handler``; this package re-exports what callers use.
"""

from mmrag.toolagent.tools.common import (
    NO_ANSWER,
    TOOLS,
    Encoder,
    ImageEncoder,
    ToolAnswer,
    content_words,
    encode,
    mentions,
    question_type,
    sentences,
    words,
)
from mmrag.toolagent.tools.handler import ToolCall, ToolHandler, build_tools, world_maps
from mmrag.toolagent.tools.image import ImageQA
from mmrag.toolagent.tools.table import Record, TableQA, as_number, table_records
from mmrag.toolagent.tools.text import COLOURS, Extractor, SentenceIndex, TextQA, Unit, text_units
from mmrag.toolagent.tools.web import WebSearch, extra_units

__all__ = ["COLOURS", "NO_ANSWER", "TOOLS", "Encoder", "Extractor", "ImageEncoder",
           "ImageQA", "Record", "SentenceIndex", "TableQA", "TextQA", "ToolAnswer", "ToolCall",
           "ToolHandler", "Unit", "WebSearch", "as_number", "build_tools", "content_words", "encode",
           "extra_units", "mentions", "question_type", "sentences", "table_records", "text_units",
           "words", "world_maps"]
