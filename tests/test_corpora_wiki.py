"""The real Wikipedia corpus: the package's summaries map to documents, photos, gold questions."""

from __future__ import annotations

from mmrag.corpora import wiki
from mmrag.corpora.passages import Chunking, to_passages
from mmrag.schema import Document, Section

PAPER = Chunking(max_chars=1600, chunk_chars=800, overlap=100)


def _doc(title: str, extract: str, desc: str = "", topic: str = "Arts") -> Document:
    rows = [{"title": title, "extract": extract, "description": desc, "topic": topic}]
    return wiki.build_documents(rows)[0]


def test_package_corpus_has_10033_articles_in_12_topics():
    docs = wiki.build_documents(wiki.load_summaries())
    assert len(docs) == 10033
    assert len({d.domain for d in docs}) == 12
    assert len({d.id for d in docs}) == len(docs)
    assert all(d.source == "wiki" and d.sections[0].text for d in docs)


def test_mask_title_hides_the_name_including_parenthetical_titles():
    out = wiki.mask_title("Cell is the basic unit of life; every cell divides.", "Cell (biology)")
    assert out == "This subject is the basic unit of life; every this subject divides."
    assert wiki.mask_title("Nothing here.", "Moon") is None


def test_questions_have_one_gold_article_its_topic_and_its_passage():
    docs = [_doc("Alpha Centauri", "Alpha Centauri is a star system in the southern sky. "
                 "It lies about 4.37 light-years from the Sun in the constellation Centaurus.",
                 "Star system", "Physical sciences"),
            _doc("Beta Pictoris", "Beta Pictoris is a young star with a debris disk around it. "
                 "The disk was the first one around another star to be imaged directly by astronomers.",
                 "Star in the constellation Pictor", "Physical sciences")]
    qs = wiki.make_questions(docs, seed=0, dev=0.1, test=0.1, per_kind=0, chunking=PAPER)
    kinds = {(q.kind, q.answer) for q in qs}
    assert ("description", "Alpha Centauri") in kinds and ("fact", "Beta Pictoris") in kinds
    for q in qs:
        doc = next(d for d in docs if d.title == q.answer)
        assert q.gold_entity == doc.id and q.gold_domain == "Physical sciences"
        assert q.gold_passages and all(p.startswith(doc.id + "#p") for p in q.gold_passages)
        assert doc.title.lower() not in q.text.lower() or q.kind == "description"


def test_shared_descriptions_make_no_question_and_splits_follow_the_document():
    a, b = _doc("Cat", "The cat is a small animal kept as a pet by many people.", "Animal"), \
        _doc("Horse", "The horse is a large animal used for riding and work.", "Animal")
    qs = wiki.make_questions([a, b], seed=3, dev=0.1, test=0.1, per_kind=0, chunking=PAPER)
    assert not [q for q in qs if q.kind == "description"]  # "Animal" names two articles
    for q in qs:
        assert q.split == wiki.split_of(q.gold_entity, 3, 0.1, 0.1)


def test_gold_passage_ids_follow_the_chunking_passed():
    lead = "Gamma Draconis is a bright giant star that shines in the northern constellation Draco."
    later = "Its aberration of light was measured by James Bradley in 1728, showing that the Earth moves."
    docs = [_doc("Gamma Draconis", f"{lead} {later}", "Star", "Physical sciences")]
    gold = {}
    for chunking in (PAPER, Chunking(max_chars=1600, chunk_chars=150, overlap=100)):
        passages = {p.id: p.text for p in to_passages(docs, *chunking)}
        qs = wiki.make_questions(docs, seed=0, dev=0.1, test=0.1, per_kind=0, chunking=chunking)
        fact = next(q for q in qs if q.kind == "fact")
        assert fact.gold_passages and all(later in passages[p] for p in fact.gold_passages)
        gold[chunking.chunk_chars] = fact.gold_passages
    assert gold == {800: ["gamma_draconis#p0"], 150: ["gamma_draconis#p2"]}


def test_photos_link_only_to_articles_present(tmp_path):
    docs = [_doc("Moon", "The Moon is Earth's only natural satellite."), _doc("Other", "Text.")]
    linked, skipped = wiki.attach_photos(docs, tmp_path / "images")
    assert [r["article"] for r in linked] == ["Moon"]
    img = docs[0].images[0]
    assert (tmp_path / img.path).exists() and img.caption and img.entity_id == docs[0].id
    assert docs[0].sections[0].image_ids == [img.id]
    assert any(s["reason"] == "no such article in the corpus" for s in skipped)


def test_subsample_is_stratified_and_keeps_photo_articles():
    docs = [Document(id=f"d{i}", title=f"T{i}", domain=f"topic{i % 3}",
                     sections=[Section(id=f"d{i}#s0", doc_id=f"d{i}", title="", text="x")])
            for i in range(90)]
    sub = wiki.subsample(docs, 9, seed=0, keep_titles={"T1"})
    assert "T1" in {d.title for d in sub}
    assert {d.domain for d in sub} == {"topic0", "topic1", "topic2"}
    assert wiki.subsample(docs, 9, seed=0, keep_titles={"T1"}) == sub
