"""to_passages: truncation, chunk sizes and overlap, section attribution, gold copied over."""

from __future__ import annotations

import re

import pytest

from mmrag.corpora.passages import Chunking, to_passages
from mmrag.schema import Document, Section


def _doc(n_words: int = 400) -> Document:
    words = " ".join(f"w{i:03d}" for i in range(n_words))  # 5 chars per word incl. space
    return Document(id="d1", title="Vantor X2", summary="A robot vacuum.", domain="products",
                    entity_id="e7", sections=[Section(id="s1", doc_id="d1", title="History",
                                                      text=words)])


PAPER = dict(max_chars=1600, chunk_chars=800, overlap=100)  # MM-R2's chunking, stated by each test


def test_truncation_chunking_and_overlap():
    ps = to_passages([_doc()], **PAPER)
    assert [p.id for p in ps] == ["d1#p0", "d1#p1", "d1#p2"]
    assert all(len(p.text) <= 800 for p in ps)
    assert ps[0].text.startswith("Vantor X2\nA robot vacuum.")
    # consecutive chunks share about `overlap` characters
    tail = ps[0].text[-60:]
    assert tail in ps[1].text
    # nothing past max_chars: w319 sits beyond 1600 characters
    joined = " ".join(p.text for p in ps)
    assert "w250" in joined and "w319" not in joined
    # words are never cut in half
    head = {"Vantor", "X2", "A", "robot", "vacuum.", "History"}
    assert all(re.fullmatch(r"w\d{3}", t) or t in head for p in ps for t in p.text.split())


def test_gold_and_section_copied():
    ps = to_passages([_doc()], **PAPER)
    assert {p.domain for p in ps} == {"products"} and {p.entity_id for p in ps} == {"e7"}
    assert ps[0].section_id is None  # starts in the title/summary head
    assert ps[1].section_id == "s1"


def test_short_document_is_one_passage_and_empty_is_skipped():
    short = Document(id="d2", title="Tiny", summary="Short page.")
    assert [p.text for p in to_passages([short], **PAPER)] == ["Tiny\nShort page."]
    assert to_passages([Document(id="d3", title="")], **PAPER) == []


@pytest.mark.parametrize("kw", [dict(overlap=800), dict(chunk_chars=0), dict(overlap=-1)])
def test_bad_chunking_is_refused(kw):
    with pytest.raises(ValueError):
        to_passages([_doc()], **{**PAPER, **kw})


def test_chunking_carries_a_params_section_in_signature_order():
    class Section:
        max_chars, chunk_chars, overlap, dims = 1600, 800, 100, [10]

    chunking = Chunking.of(Section())
    assert chunking == Chunking(**PAPER)
    assert to_passages([_doc()], *chunking) == to_passages([_doc()], **PAPER)
    assert [p.id for p in to_passages([_doc()], *Chunking(1600, 400, 50))][-1] == "d1#p4"


def test_no_chunking_default():
    with pytest.raises(TypeError):
        to_passages([_doc()])  # type: ignore[call-arg]
