"""Official HotpotQA/MuSiQue files in a folder's questions/: ids, gold evidence and decompositions kept."""

from __future__ import annotations

import json

import pytest

from mmrag.corpora import ingest, multihop
from mmrag.schema import load_documents, load_questions

HOTPOT = [
    {"_id": "5a8b57f25542995d1e6f1371", "question": "Which city hosts the museum founded by Ada Vale?",
     "answer": "Lund", "type": "bridge", "level": "medium",
     "context": [["Ada Vale", ["Ada Vale was a painter.", " She founded the Vale Museum."]],
                 ["Vale Museum", ["The Vale Museum is an art museum.", " It is located in Lund."]]],
     "supporting_facts": [["Ada Vale", 1], ["Vale Museum", 1]]},
    {"_id": "5a8c7595554299585d9e36b6", "question": "Is the Vale Museum older than the Lund Gallery?",
     "answer": "yes", "type": "comparison", "level": "hard",
     "context": [["Vale Museum", ["The Vale Museum is an art museum.", " It is located in Lund."]],
                 ["Lund Gallery", ["The Lund Gallery opened in 1990."]]],
     "supporting_facts": [["Vale Museum", 0], ["Lund Gallery", 0], ["Lund Gallery", 7]]},
]

MUSIQUE = [
    {"id": "2hop__1234_5678", "question": "Who founded the museum located in Lund?", "answer": "Ada Vale",
     "answer_aliases": ["A. Vale"], "answerable": True,
     "paragraphs": [{"idx": 0, "title": "Vale Museum", "is_supporting": True,
                     "paragraph_text": "The Vale Museum is an art museum. It is located in Lund."},
                    {"idx": 1, "title": "Noise", "is_supporting": False, "paragraph_text": "Unrelated text."},
                    {"idx": 2, "title": "Ada Vale", "is_supporting": True,
                     "paragraph_text": "Ada Vale founded the Vale Museum in 1901."}],
     "question_decomposition": [
         {"id": 1234, "question": "Which museum is located in Lund?", "answer": "Vale Museum",
          "paragraph_support_idx": 0},
         {"id": 5678, "question": "Who founded #1?", "answer": "Ada Vale", "paragraph_support_idx": 2}]},
    {"id": "3hop1__9_8_7", "question": "Who painted the moon?", "answer": "Nobody", "answer_aliases": [],
     "answerable": False,
     "paragraphs": [{"idx": 0, "title": "Moon", "is_supporting": False, "paragraph_text": "The Moon orbits."}],
     "question_decomposition": []},
]


def _folder(tmp_path):
    src = tmp_path / "src"
    (src / "questions").mkdir(parents=True)
    (src / "questions" / "hotpot_dev.json").write_text(json.dumps(HOTPOT), encoding="utf-8")
    (src / "questions" / "musique_dev.jsonl").write_text("\n".join(map(json.dumps, MUSIQUE)) + "\n")
    (src / "questions" / "broken.json").write_text("{not json", encoding="utf-8")
    (src / "questions" / "wrong.json").write_text(json.dumps([{"foo": 1}]), encoding="utf-8")
    (src / "questions" / "mine.jsonl").write_text(json.dumps({"question": "Q?", "answer": "A"}) + "\n")
    # a page of the user's own whose id ("ada_vale") a HotpotQA title also maps to
    (src / "ada_vale.md").write_text("# Ada Vale\n\nAda Vale was a painter. She founded the Vale Museum.\n")
    return src


def _ingest(tmp_path):
    options = ingest.IngestOptions(page_chars=3000, min_image_side=16, max_image_side=1024,
                                   max_image_pixels=64_000_000, max_zim_articles=0,
                                   max_image_repeats=3)
    return ingest.ingest_folder(_folder(tmp_path), tmp_path / "out", options)


@pytest.fixture
def ingested(tmp_path):
    docs, questions, rep = _ingest(tmp_path)
    return docs, questions, rep, tmp_path / "out"


def _sections(docs):
    return {s.id: s for d in docs for s in d.sections}


def test_hotpotqa_ids_kinds_and_gold_sentences(ingested):
    docs, questions, rep, out = ingested
    qs = {q.id: q for q in questions["hotpot_dev"]}
    assert list(qs) == [r["_id"] for r in HOTPOT]
    bridge, comparison = qs[HOTPOT[0]["_id"]], qs[HOTPOT[1]["_id"]]
    assert (bridge.kind, comparison.kind) == ("bridge", "comparison")
    assert bridge.dataset == "hotpotqa" and bridge.meta["level"] == "medium"
    sections = _sections(docs)
    for q, row in ((bridge, HOTPOT[0]), (comparison, HOTPOT[1])):
        assert q.gold_evidence and all(g in sections for g in q.gold_evidence)
        for fact in q.meta["supporting_facts"]:
            assert fact["section_id"] in q.gold_evidence
            assert fact["sentence"] in sections[fact["section_id"]].text
    # the out-of-range supporting fact is counted and dropped, the question kept
    assert rep.problems["bad_supporting_fact"] == 1
    assert [f["sent_idx"] for f in comparison.meta["supporting_facts"]] == [0, 0]
    # written and read back unchanged
    assert [q.to_dict() for q in load_questions(out / "questions" / "hotpot_dev.jsonl")] == \
        [q.to_dict() for q in questions["hotpot_dev"]]


def test_documents_are_deduplicated_by_title_and_against_the_folder(ingested):
    docs, _, rep, out = ingested
    ids = [d.id for d in docs]
    assert len(ids) == len(set(ids))
    by_id = {d.id: d for d in docs}
    # "Vale Museum" appears in both HotpotQA questions and in MuSiQue: one document
    museum = by_id["vale_museum"]
    assert museum.source == "hotpotqa" and museum.meta["path"] == "questions/hotpot_dev.json"
    assert museum.meta["paths"] == ["questions/hotpot_dev.json", "questions/musique_dev.jsonl"]
    assert [s.id for s in museum.sections] == ["vale_museum#s0"]  # same text in MuSiQue: same section
    # "Ada Vale" is the folder's own page: its lead section is reused, MuSiQue's new paragraph appended
    ada = by_id["ada_vale"]
    assert ada.source == "folder" and ada.meta["path"] == "ada_vale.md"
    assert [s.id for s in ada.sections] == ["ada_vale#s0", "ada_vale#s1"]
    assert ada.sections[-1].text == "Ada Vale founded the Vale Museum in 1901."
    assert rep.problems["conflicting_paragraph"] == 0
    assert rep.ingested["documents"] == len(docs) and rep.ingested["sections"] == len(_sections(docs))
    assert [d.to_dict() for d in load_documents(out)] == [d.to_dict() for d in docs]


def test_musique_decomposition_substituted_and_unanswerable_counted(ingested):
    docs, questions, rep, _ = ingested
    (q,) = questions["musique_dev"]
    assert (q.id, q.kind, q.dataset, q.answer_aliases) == ("2hop__1234_5678", "2hop", "musique", ["A. Vale"])
    sections = _sections(docs)
    assert q.gold_evidence == ["vale_museum#s0", "ada_vale#s1"]
    assert all(g in sections for g in q.gold_evidence)
    assert [s.text for s in q.decomposition] == ["Which museum is located in Lund?", "Who founded Vale Museum?"]
    assert [(s.tool, s.answer) for s in q.decomposition] == [("TextQA", "Vale Museum"), ("TextQA", "Ada Vale")]
    assert [s.evidence_ids for s in q.decomposition] == [["vale_museum#s0"], ["ada_vale#s1"]]
    assert q.meta["raw_decomposition"][1]["question"] == "Who founded #1?"
    assert rep.problems["unanswerable_question"] == 1
    assert "moon" not in {d.id for d in docs}  # an unanswerable item's paragraphs are not ingested


def test_malformed_files_are_counted_not_raised_and_plain_questions_still_read(ingested):
    _, questions, rep, _ = ingested
    assert rep.problems["bad_questions_file"] == 2
    examples = " | ".join(rep.examples["bad_questions_file"])
    assert "questions/broken.json: not JSON" in examples and "questions/wrong.json" in examples
    assert "expected a JSON array" in examples
    assert "broken" not in questions and "wrong" not in questions
    assert [q.text for q in questions["mine"]] == ["Q?"]
    assert rep.files["questions"] == 5
    assert rep.ingested["questions"] == 2 + 1 + 1


def test_substitute_and_detect_format():
    assert multihop.substitute("Who founded #1 in #2 and #3?", ["A", "B"]) == "Who founded A in B and #3?"
    assert multihop.detect_format(HOTPOT[0]) == "hotpotqa"
    assert multihop.detect_format(MUSIQUE[0]) == "musique"
    assert multihop.detect_format({"question": "Q?", "answer": "A"}) is None
