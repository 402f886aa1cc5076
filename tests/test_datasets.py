"""Loaders for the papers' datasets, each on a fixture written here in the authors' format."""

from __future__ import annotations

import csv
import gzip
import json
import struct

import pytest

from mmrag.corpora import datasets
from mmrag.corpora.datasets import tfrecord


# --------------------------------------------------------------------------- protobuf writer
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _ld(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def feature(values) -> bytes:
    if values and isinstance(values[0], bytes):
        return _ld(1, b"".join(_ld(1, v) for v in values))
    if values and isinstance(values[0], float):
        return _ld(2, _ld(1, struct.pack(f"<{len(values)}f", *values)))
    return _ld(3, _ld(1, b"".join(_varint(v) for v in values)))


def features(d: dict) -> bytes:
    return b"".join(_ld(1, _ld(1, k.encode()) + _ld(2, feature(v))) for k, v in d.items())


def sequence_example(context: dict, lists: dict) -> bytes:
    fl = b"".join(_ld(1, _ld(1, k.encode()) + _ld(2, b"".join(_ld(1, feature(f)) for f in v)))
                  for k, v in lists.items())
    return _ld(1, features(context)) + _ld(2, fl)


def test_crc32c_known_vector_and_framing_roundtrip(tmp_path):
    assert tfrecord.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    recs = [b"hello", b"", b"x" * 300]
    path = tmp_path / "a.tfrecord.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(b"".join(tfrecord.frame(r) for r in recs))
    assert list(tfrecord.read_records(path, check_data_crc=True)) == recs
    bad = tmp_path / "b.tfrecord"
    bad.write_bytes(b"not a tfrecord file at all")
    with pytest.raises(tfrecord.RecordError, match="checksum"):
        list(tfrecord.read_records(bad))


def test_sequence_example_decoding_handles_every_feature_kind():
    raw = sequence_example({"t": [b"a"], "f": [1.5, -2.0], "i": [3, -4]}, {"s": [[b"x", b"y"], []]})
    ctx, lists = tfrecord.decode_sequence_example(raw)
    assert ctx == {"t": [b"a"], "f": [1.5, -2.0], "i": [3, -4]}
    assert lists == {"s": [[b"x", b"y"], []]}


def test_wikiweb2m_pages(tmp_path):
    page = sequence_example(
        {"page_title": [b"Tulip"], "page_url": [b"https://en.wikipedia.org/wiki/Tulip"],
         "clean_page_description": [b"A flower."], "split": [b"val"]},
        {"section_title": [[b"Tulip"], [b"History"]],
         "section_text": [[b"Tulips are flowers."], [b"Grown since 1000 AD."]],
         "section_image_url": [[], [b"https://upload.wikimedia.org/t.jpg", b"https://u/x.png"]],
         "section_image_clean_ref_desc": [[], [b"A red tulip", b""]],
         "section_image_alt_text": [[], [b"alt1", b"alt2"]]})
    (tmp_path / "wikiweb2m-val.tfrecord").write_bytes(tfrecord.frame(page))
    docs, _ = datasets.load("wikiweb2m", tmp_path, limit=0)
    (doc,) = docs
    assert doc.title == "Tulip" and doc.summary == "A flower." and doc.meta["split"] == "val"
    assert [s.title for s in doc.sections] == ["Tulip", "History"]
    assert [(i.caption, i.section_id) for i in doc.images] == [
        ("A red tulip", doc.sections[1].id), ("alt2", doc.sections[1].id)]
    assert doc.meta["image_urls"][doc.images[0].id].endswith("t.jpg")


def test_brit_mm_rag_test_set(tmp_path):
    data = {"text-image": [{"question": "Which colour is the car?", "options": "A. red B. blue",
                            "relevant_image": ["img/1.jpg"], "relevant_text": ["caption"],
                            "ground_truth": "A"}],
            "image-text": [{"question": "Who?", "options": "(A) Ann (B) Bob (C) Cy",
                            "relevant_image": "img/2.jpg", "relevant_text": "t", "ground_truth": "B"}],
            "image-image": []}
    (tmp_path / "mm_rag_test.json").write_text(json.dumps(data))
    _, sets = datasets.load("brit", tmp_path, limit=0)
    qs = sets["brit"]
    assert [q.kind for q in qs] == ["Text-Image", "Image-Text"]
    assert qs[0].choices == ["red", "blue"] and qs[1].choices == ["Ann", "Bob", "Cy"]
    assert qs[1].gold_evidence == ["img/2.jpg"] and qs[0].answer == "A"


def _mmqa_contexts(root, prefix="MMQA_"):
    rows = {"texts": [{"title": "Taipei", "url": "u/Taipei", "id": "t1", "text": "Taipei is a city."}],
            "tables": [{"title": "Taipei", "url": "u/Taipei", "id": "tab1", "table": {
                "table_rows": [[{"text": "1994", "links": []}, {"text": "Won", "links": []}]],
                "table_name": "Elections", "header": [{"column_name": "Year", "metadata": {}},
                                                      {"column_name": "Result", "metadata": {}}]}}],
            "images": [{"title": "Taipei", "url": "u/Taipei", "id": "im1", "path": "Taipei.jpg"}]}
    for name, rs in rows.items():
        with gzip.open(root / f"{prefix}{name}.jsonl.gz", "wt") as fh:
            fh.write("\n".join(json.dumps(r) for r in rs) + "\n")


def test_mmqa_questions_and_contexts(tmp_path):
    _mmqa_contexts(tmp_path)
    q = {"qid": "q1", "question": "What year?", "answers": [
        {"answer": "1994", "type": "string", "modality": "table", "text_instances": [],
         "table_indices": [[0, 0]], "image_instances": []}],
         "metadata": {"type": "Compose(TableQ,ImageQ)", "modalities": ["table", "image"],
                      "image_doc_ids": ["im1"], "text_doc_ids": ["t1"], "table_id": "tab1",
                      "intermediate_answers": ["x"]},
         "supporting_context": [{"doc_id": "tab1", "doc_part": "table"},
                                {"doc_id": "im1", "doc_part": "image"}]}
    (tmp_path / "MMQA_dev.jsonl").write_text(json.dumps(q) + "\n")
    (tmp_path / "MMQA_test.jsonl").write_text(json.dumps({"qid": "q2", "question": "?",
                                                          "metadata": {"type": "TextQ"}}) + "\n")
    docs, sets = datasets.load("mmqa", tmp_path, limit=0)
    (doc,) = docs
    assert [s.id for s in doc.sections] == ["t1"] and doc.tables[0].columns == ["Year", "Result"]
    assert doc.tables[0].rows == [["1994", "Won"]] and doc.images[0].path == "images/Taipei.jpg"
    q1, q2 = sets["mmqa"]
    assert (q1.kind, q1.split, q1.answer, q1.gold_evidence) == (
        "Compose(TableQ,ImageQ)", "dev", "1994", ["tab1", "im1"])
    assert q2.split == "test" and q2.answer == ""



def test_mmqa_list_answer_is_one_answer_scored_as_a_list(tmp_path):
    from mmrag.evaluate.metrics import exact_match

    _mmqa_contexts(tmp_path)
    q = {"qid": "q1", "question": "Which films?", "metadata": {"type": "TextQ"},
         "answers": [{"answer": a, "type": "string", "modality": "text"} for a in ("Up", "Cars", "Coco")],
         "supporting_context": [{"doc_id": "t1", "doc_part": "text"}]}
    (tmp_path / "MMQA_dev.jsonl").write_text(json.dumps(q) + "\n")
    (q1,) = datasets.load("mmqa", tmp_path, limit=0)[1]["mmqa"]
    assert (q1.answer, q1.answer_aliases) == ("Up, Cars, Coco", [])
    gold = [q1.answer, *q1.answer_aliases]
    assert exact_match("Cars", gold) == 0.0  # one item is not the answer
    assert exact_match("Coco, Up, Cars", gold) == 1.0  # the list, in any order


def test_mmqa_keeps_questions_whose_context_files_are_missing(tmp_path, capsys):
    _mmqa_contexts(tmp_path)
    (tmp_path / "MMQA_tables.jsonl.gz").unlink()
    (tmp_path / "MMQA_images.jsonl.gz").unlink()
    q = {"qid": "q1", "question": "What year?", "metadata": {"type": "Compose(TableQ,TextQ)"},
         "answers": [{"answer": "1994", "type": "string", "modality": "table"}],
         "supporting_context": [{"doc_id": "tab1", "doc_part": "table"},
                                {"doc_id": "t1", "doc_part": "text"},
                                {"doc_id": "im1", "doc_part": "image"}]}
    (tmp_path / "MMQA_dev.jsonl").write_text(json.dumps(q) + "\n")
    docs, sets = datasets.load("mmqa", tmp_path, limit=0)
    (doc,) = docs
    assert [s.id for s in doc.sections] == ["t1"] and not doc.tables and not doc.images
    (q1,) = sets["mmqa"]
    assert q1.gold_evidence == ["t1"] and q1.meta["missing_evidence"] == ["tab1", "im1"]
    assert "1 of 1 questions" in capsys.readouterr().out

def test_mmcoqa_conversation_turns(tmp_path):
    _mmqa_contexts(tmp_path, "multimodalqa_final_dataset_pipeline_camera_ready_MMQA_")
    row = {"qid": "C_7_2", "question": "And when?", "gold_question": "When did Taipei win?",
           "history": [{"question": "Which city?", "answer": [{"answer": "Taipei"}]}],
           "answer": [{"answer": "1994", "text_instances": [{"doc_id": "t1"}], "image_instances": []}],
           "question_type": "text", "table_id": "tab1"}
    (tmp_path / "MMCoQA_dev.txt").write_text(json.dumps(row) + "\n")
    docs, sets = datasets.load("mmcoqa", tmp_path, limit=0)
    (q,) = sets["mmcoqa"]
    assert q.history[0].answer == "Taipei" and q.meta["turn"] == 2
    assert q.meta["conversation_id"] == "C_7" and q.gold_evidence == ["t1"] and docs


def test_infoseek_questions_and_kb(tmp_path):
    rows = [{"data_id": "val_1", "image_id": "oven_1", "question": "Which year was it built?",
             "answer": ["1889"], "answer_eval": [{"wikidata": 1889, "range": [1888, 1890]}],
             "data_split": "val_unseen_entity"}]
    (tmp_path / "infoseek_val.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    (tmp_path / "infoseek_val_withkb.jsonl").write_text(json.dumps(
        {"data_id": "val_1", "entity_id": "Q243"}))
    (tmp_path / "Wiki6M_ver_1_0.jsonl").write_text(json.dumps(
        {"wikidata_id": "Q243", "wikipedia_title": "Eiffel Tower",
         "wikipedia_content": "The Eiffel Tower was built in 1889."}))
    docs, sets = datasets.load("infoseek", tmp_path, limit=0)
    (q,) = sets["infoseek"]
    assert (q.split, q.gold_entity, q.answer, q.image_path) == (
        "test_unseen_entity", "Q243", "1889", "images/oven_1.jpg")
    assert docs[0].id == "Q243" and "1889" in docs[0].sections[0].text


def test_encyclopedic_vqa_csv_and_kb(tmp_path):
    url = "https://en.wikipedia.org/wiki/Common_poppy"
    cols = ["question", "answer", "dataset_image_ids", "dataset_name", "dataset_category_id",
            "question_type", "wikipedia_url", "wikipedia_title", "evidence", "evidence_section_id",
            "evidence_section_title", "encyclopedic_vqa_split", "question_original",
            "wikipedia_url_used_in_train"]
    with (tmp_path / "val.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerow({"question": "How tall can this plant grow?", "answer": "70 cm|0.7 m",
                    "dataset_image_ids": "a1|a2", "dataset_name": "inaturalist",
                    "question_type": "templated", "wikipedia_url": url,
                    "wikipedia_title": "Common poppy", "evidence_section_id": "1",
                    "encyclopedic_vqa_split": "val"})
    kb = {url: {"title": "Common poppy", "section_titles": ["Common poppy", "Description"],
                "section_texts": ["A flower.", "It grows to 70 cm."], "image_urls": ["http://i/p.jpg"],
                "image_reference_descriptions": ["A poppy"], "image_section_indices": [1], "url": url}}
    (tmp_path / "encyclopedic_kb_wiki.json").write_text(json.dumps(kb))
    docs, sets = datasets.load("evqa", tmp_path, limit=0)
    (q,) = sets["evqa"]
    (doc,) = docs
    assert q.answer == "70 cm" and q.answer_aliases == ["0.7 m"] and q.image_id == "a1"
    assert q.gold_entity == doc.id and q.gold_evidence == [f"{doc.id}#s1"] and q.split == "val"
    assert doc.images[0].section_id == f"{doc.id}#s1" and doc.images[0].caption == "A poppy"


def test_unknown_or_missing_dataset_names_the_fix(tmp_path):
    with pytest.raises(datasets.DatasetError, match="known"):
        datasets.load("nope", tmp_path, limit=0)
    with pytest.raises(datasets.DatasetError, match="does not exist"):
        datasets.load("mmqa", tmp_path / "absent", limit=0)
    with pytest.raises(datasets.DatasetError, match="no file matching"):
        datasets.load("brit", tmp_path, limit=0)
