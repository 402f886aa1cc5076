"""Question sets over the generated world, each question with complete gold.

Five sets, in the formats of the papers' benchmarks:

- ``mmqa`` — MultiModalQA-style multi-hop questions over text, tables and images, with a gold
  decomposition into single-hop sub-questions (tool, intermediate answer, evidence);
- ``mmcoqa`` — conversations whose later turns refer back ("When was it released?");
- ``infoseek`` — (image, question) pairs answered by a passage about the pictured entity,
  with unseen-entity and unseen-question test splits;
- ``brit`` / ``brit_nea`` — BRIT's multiple-choice Text-Image, Image-Text and Image-Image
  questions, validated against their source text, and Named Entity Anonymization pairs.

Besides the human-readable decomposition every question carries ``meta['path']``: the same
hops as operations on the corpus (read a table cell, read an image's attributes, select the
images that show a value, find a sentence) that :mod:`mmrag.world.oracle` executes to prove
that the gold evidence leads to the gold answer.

One module per set (``mmqa_set``, ``mmcoqa_set``, ``infoseek_set``, ``brit_set``) over the
shared gold helpers of ``common``; this package re-exports what callers use.
"""

from mmrag.world.questions.brit_set import (
    NEA_BRIDGES,
    REVERSE,
    Similarity,
    brit,
    brit_candidates,
    validate,
)
from mmrag.world.questions.common import Gold, Hop
from mmrag.world.questions.infoseek_set import INFOSEEK_RELATIONS, infoseek
from mmrag.world.questions.mmcoqa_set import mmcoqa
from mmrag.world.questions.mmqa_set import mmqa

__all__ = ["INFOSEEK_RELATIONS", "NEA_BRIDGES", "REVERSE", "Gold", "Hop", "Similarity", "brit",
           "brit_candidates", "infoseek", "mmcoqa", "mmqa", "validate"]
