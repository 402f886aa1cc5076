"""Folder ingestion: every format parses; every bad input is counted, nothing valid is dropped."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from PIL import Image as PILImage

from mmrag.corpora import ingest
from mmrag.schema import load_documents, load_questions


def _png(path, size=(64, 48), color="red"):
    PILImage.new("RGB", size, color).save(path)


def tiny_options(**changes):
    """Ingestion knobs for these tests (the values of params `corpora.folder`), with changes."""
    knobs = dict(page_chars=3000, min_image_side=16, max_image_side=1024, max_image_pixels=64_000_000,
                 max_zim_articles=0, max_image_repeats=3)
    return ingest.IngestOptions(**{**knobs, **changes})


def _by_title(docs):
    return {d.title: d for d in docs}


def test_html_sections_figcaption_tables_and_bad_images(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    _png(src / "ok.png")
    _png(src / "dot.png", (3, 3))
    (src / "broken.jpg").write_bytes(b"\xff\xd8\xff garbage")
    (src / "page.html").write_text(
        "<html><head><title>Widget</title></head><body><script>x=1</script><h1>Widget</h1>"
        "<p>Lead text.</p><figure><img src='ok.png' alt='alt text'><figcaption>The widget, front"
        "</figcaption></figure><h2>Specs</h2><table><tr><th>k</th><th>v</th></tr><tr><td>mass</td>"
        "<td>3 kg</td></tr></table><h2>Empty</h2><h2>Gallery</h2><img src='dot.png'>"
        "<img src='broken.jpg'><img src='nope.png'><img src='http://x.org/a.png' title='remote'>"
        "<p>Some more.</p></body></html>", encoding="utf-8")
    docs, _, rep = ingest.ingest_folder(src, out, tiny_options())
    (doc,) = docs
    assert doc.title == "Widget"
    assert [s.title for s in doc.sections] == ["", "Specs", "Gallery"]
    assert doc.images[0].caption == "The widget, front" and (out / doc.images[0].path).exists()
    assert doc.tables[0].columns == ["k", "v"] and doc.tables[0].rows == [["mass", "3 kg"]]
    assert "x=1" not in " ".join(s.text for s in doc.sections)
    for kind in ("tiny_image", "corrupt_image", "missing_image", "remote_image", "empty_section"):
        assert rep.problems[kind] == 1, kind
    assert load_documents(out)[0].to_dict() == doc.to_dict()


def test_markdown_headings_image_title_and_figure_lines(tmp_path):
    src = tmp_path / "src"
    (src / "img").mkdir(parents=True)
    _png(src / "img" / "a.png")
    _png(src / "img" / "b.png", color="blue")
    (src / "note.md").write_text(
        "---\ntitle: Field notes\n---\nIntro with a [link](http://x).\n\nSetext\n======\n\n"
        '![alpha](img/a.png "Title of a")\n\nFigure 1: The first figure.\n\n## Second\n\n'
        "![beta](img/b.png)\n\n### Empty\n", encoding="utf-8")
    docs, _, rep = ingest.ingest_folder(src, tmp_path / "out", tiny_options())
    (doc,) = docs
    assert doc.title == "Field notes"
    assert [s.title for s in doc.sections] == ["", "Setext", "Second"]
    assert "link" in doc.sections[0].text and "http" not in doc.sections[0].text
    assert [i.caption for i in doc.images] == ["Figure 1: The first figure.", "beta"]
    assert rep.problems["empty_section"] == 1


def test_page_split_is_configurable(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    body = "".join(f"<h2>S{i}</h2><p>{'word ' * 100}</p>" for i in range(6))
    (src / "long.html").write_text(f"<html><body>{body}</body></html>")
    docs, _, _ = ingest.ingest_folder(src, tmp_path / "o", tiny_options(page_chars=1000))
    assert [s.page for s in docs[0].sections] == [1, 1, 2, 2, 3, 3]


def test_non_utf8_duplicates_empty_and_unsupported_are_counted(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "latin.html").write_bytes("<html><body><p>Caf\u00e9 cr\u00e8me</p></body></html>"
                                     .encode("cp1252"))
    (src / "a.md").write_text("# A\n\nFirst text.")
    (src / "a.markdown").write_text("# A\n\nSecond, different text.")
    (src / "copy.md").write_text("# A\n\nFirst text.")
    (src / "blank.html").write_text("<html><body><nav>menu</nav></body></html>")
    (src / "x.docx").write_bytes(b"PK")
    docs, _, rep = ingest.ingest_folder(src, tmp_path / "o", tiny_options())
    assert "Café crème" in docs[[d.id for d in docs].index("latin")].sections[0].text
    assert {d.id for d in docs} == {"latin", "a", "a_2"}
    for kind in ("non_utf8_text", "duplicate_id", "duplicate_document", "empty_document",
                 "unsupported_file"):
        assert rep.problems[kind] == 1, kind


def test_huge_image_header_is_skipped_and_large_is_downscaled(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    ihdr = struct.pack(">IIBBBBB", 30000, 30000, 8, 2, 0, 0, 0)

    def chunk(k: bytes, d: bytes) -> bytes:
        return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d))

    (src / "bomb.png").write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b""))
    _png(src / "big.png", (900, 300))
    (src / "p.md").write_text("# P\n\ntext\n\n![b](bomb.png)\n\n![g](big.png)\n")
    docs, _, rep = ingest.ingest_folder(src, tmp_path / "o", tiny_options(max_image_side=300))
    assert rep.problems["huge_image"] == 1 and rep.problems["downscaled_image"] == 1
    (img,) = docs[0].images
    assert max(PILImage.open(tmp_path / "o" / img.path).size) == 300


def test_pdf_pages_images_figure_captions_and_a_scanned_pdf(tmp_path):
    from mmrag.corpora.demo import scanned_pdf
    from mmrag.schema import Document, Image, Section

    src = tmp_path / "src"
    src.mkdir()
    photo = tmp_path / "p.png"
    _png(photo, (120, 80))
    docs = [Document(id=f"d{i}", title=f"Title {i}", sections=[Section(
        id=f"d{i}#s0", doc_id=f"d{i}", title="", text=f"Body text number {i}.")],
        images=[Image(id=f"d{i}#img0", doc_id=f"d{i}", path="p.png", caption=f"cap {i}")])
        for i in range(2)]
    from mmrag.corpora.demo import pdf_brochure

    (src / "b.pdf").write_bytes(pdf_brochure(docs, {d.id: photo for d in docs},
                                             {d.id: f"cap {i}" for i, d in enumerate(docs)}))
    (src / "scan.pdf").write_bytes(scanned_pdf(photo))
    (src / "junk.pdf").write_bytes(b"%PDF-1.4 not really")
    out_docs, _, rep = ingest.ingest_folder(src, tmp_path / "o", tiny_options())
    pdf = next(d for d in out_docs if d.id == "b")
    assert [s.page for s in pdf.sections] == [1, 2]
    assert "Body text number 1" in pdf.sections[1].text
    assert [(i.page, i.caption) for i in pdf.images] == [(1, "Figure 1: cap 0"), (2, "Figure 2: cap 1")]
    scan = next(d for d in out_docs if d.id == "scan")
    assert len(scan.images) == 1  # kept: it has an image, though no text
    assert rep.problems["pdf_without_text"] == 1 and rep.problems["corrupt_pdf"] == 1


def test_zim_articles_and_their_images(tmp_path):
    from mmrag.corpora.demo import write_zim
    from mmrag.schema import Document, Image, Section

    photo = tmp_path / "cat.png"
    _png(photo)
    docs = [Document(id=n, title=n.title(), summary="s", sections=[Section(
        id=f"{n}#s0", doc_id=n, title="", text=f"{n} text. Second sentence here. Third one.")],
        images=[Image(id=f"{n}#img0", doc_id=n, path="x", caption="c")]) for n in ("cat", "dog")]
    (tmp_path / "src").mkdir()
    write_zim(tmp_path / "src" / "w.zim", docs, {"cat": photo}, {"cat": "A cat."})
    (tmp_path / "src" / "bad.zim").write_bytes(b"ZIM? no")
    out, _, rep = ingest.ingest_folder(tmp_path / "src", tmp_path / "o", tiny_options())
    titles = _by_title(out)
    assert set(titles) == {"Cat", "Dog"}  # the main page is skipped
    assert titles["Cat"].images[0].caption == "A cat." and not titles["Dog"].images
    assert rep.problems["corrupt_zim"] == 1
    out2, _, rep2 = ingest.ingest_folder(tmp_path / "src", tmp_path / "o2",
                                         tiny_options(max_zim_articles=1))
    assert len(out2) == 1 and rep2.problems["zim_limit"] == 1


def test_user_questions_jsonl(tmp_path):
    src = tmp_path / "src"
    (src / "questions").mkdir(parents=True)
    _png(src / "q.png")
    (src / "d.md").write_text("# D\n\ntext")
    rows = [{"id": "q1", "question": "What?", "answer": "That", "choices": ["That", "This"]},
            {"id": "q1", "question": "Again?", "answer": ["Yes", "Y"]},
            {"question": "Pic?", "answer": "red", "image": "../q.png"},
            {"question": "No answer"},
            {"question": "Bad pic", "answer": "x", "image": "missing.png"}]
    text = "\n".join(json.dumps(r) for r in rows) + "\n{broken\n"
    (src / "questions" / "mine.jsonl").write_text(text)
    _, qsets, rep = ingest.ingest_folder(src, tmp_path / "o", tiny_options())
    qs = qsets["mine"]
    assert [q.id for q in qs] == ["q1", "q1_2", "mine-3"]
    assert qs[0].choices == ["That", "This"] and qs[1].answer == "Yes"
    assert qs[2].image_path and (tmp_path / "o" / qs[2].image_path).exists()
    assert load_questions(tmp_path / "o" / "questions" / "mine.jsonl")[2].image_path == qs[2].image_path
    for kind in ("invalid_question", "missing_question_image", "bad_question_line",
                 "duplicate_question_id"):
        assert rep.problems[kind] == 1, kind


def test_missing_folder_names_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="corpora.folder.path"):
        ingest.ingest_folder(tmp_path / "nope", tmp_path / "o", tiny_options())


def test_report_summary_prints_counts_and_first_files():
    from mmrag.corpora.report import IngestReport

    rep = IngestReport()
    rep.files["html"] += 3
    rep.ingested["documents"] += 2
    for i in range(5):
        rep.add("tiny_image", f"page{i}.html", "16x16 icon")
    lines = rep.summary(examples=2)
    assert lines[0] == "ingested 2 documents from 3 html"
    assert lines[1].startswith("  5 x tiny_image: image smaller than min_image_side")
    assert "page0.html: 16x16 icon; page1.html: 16x16 icon)" in lines[1] and "page2" not in lines[1]


def test_a_folder_without_documents_or_questions_is_an_error(tmp_path):
    from mmrag.schema import Document, Question
    from mmrag.stages.corpora import check_usable

    doc, q = Document(id="a", title="A"), Question(id="q", text="Who?", answer="A", dataset="folder")
    with pytest.raises(ValueError, match="no usable document"):
        check_usable([], {"set": [q]}, tmp_path)
    with pytest.raises(ValueError, match=r"no usable question.*questions/<set>\.jsonl"):
        check_usable([doc], {"set": []}, tmp_path)
    check_usable([doc], {"set": [q]}, tmp_path)


def test_utf16_with_bom_page_and_questions_ingest_with_the_right_text(tmp_path):
    src = tmp_path / "src"
    (src / "questions").mkdir(parents=True)
    (src / "cafe.md").write_bytes("# Café\n\nThe café serves crème brûlée.\n".encode("utf-16"))
    (src / "be.md").write_bytes(b"\xfe\xff" + "# Über\n\nNaïve text.\n".encode("utf-16-be"))
    row = {"id": "q", "question": "What does the café serve?", "answer": "crème brûlée"}
    (src / "questions" / "mine.jsonl").write_bytes((json.dumps(row, ensure_ascii=False) + "\n")
                                                   .encode("utf-16"))
    docs, qsets, rep = ingest.ingest_folder(src, tmp_path / "o", tiny_options())
    titles = _by_title(docs)
    assert set(titles) == {"Café", "Über"}
    assert "crème brûlée" in titles["Café"].sections[0].text
    assert "Naïve" in titles["Über"].sections[0].text
    (q,) = qsets["mine"]
    assert (q.text, q.answer) == ("What does the café serve?", "crème brûlée")
    assert rep.problems["non_utf8_text"] == 0  # a BOM says the encoding: nothing guessed
    for enc, bom in (("utf-32-le", b"\xff\xfe\x00\x00"), ("utf-32-be", b"\x00\x00\xfe\xff"),
                     ("utf-8", b"\xef\xbb\xbf")):
        assert ingest.decode_text(bom + "né".encode(enc), "x", rep) == "né"


def test_zim_damaged_at_its_end_is_counted_and_skipped(tmp_path):
    from mmrag.corpora.demo import write_zim
    from mmrag.schema import Document, Section

    docs = [Document(id=n, title=n.title(), summary="s", sections=[Section(
        id=f"{n}#s0", doc_id=n, title="", text=f"{n} text. Second sentence here.")])
        for n in ("cat", "dog")]
    src = tmp_path / "src"
    src.mkdir()
    write_zim(tmp_path / "good.zim", docs, {}, {})
    data = (tmp_path / "good.zim").read_bytes()
    (src / "flipped.zim").write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))  # checksum fails
    (src / "truncated.zim").write_bytes(data[:-100])  # libzim refuses to open it
    out, _, rep = ingest.ingest_folder(src, tmp_path / "o", tiny_options())
    assert rep.problems["corrupt_zim"] == 2
    assert not [d for d in out if d.meta.get("path", "").startswith("flipped.zim")]
    assert any("flipped.zim" in ex and "checksum" in ex for ex in rep.examples["corrupt_zim"])


def test_question_image_next_to_the_questions_file_or_at_the_folder_root(tmp_path):
    src = tmp_path / "src"
    (src / "questions").mkdir(parents=True)
    _png(src / "questions" / "near.png", color="blue")
    _png(src / "root.png", color="green")
    (src / "d.md").write_text("# D\n\ntext")
    rows = [{"id": "near", "question": "Near?", "answer": "blue", "image": "near.png"},
            {"id": "root", "question": "Root?", "answer": "green", "image": "root.png"},
            {"id": "gone", "question": "Gone?", "answer": "x", "image": "pics/gone.png"}]
    (src / "questions" / "mine.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    _, qsets, rep = ingest.ingest_folder(src, tmp_path / "o", tiny_options())
    qs = {q.id: q for q in qsets["mine"]}
    assert set(qs) == {"near", "root"} and qs["near"].image_path != qs["root"].image_path
    for q in qs.values():
        assert (tmp_path / "o" / q.image_path).exists()
    assert rep.problems["missing_question_image"] == 1
    (ex,) = rep.examples["missing_question_image"]
    assert "questions/pics/gone.png" in ex and "and pics/gone.png" in ex


@pytest.mark.parametrize("enc", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_wide_text_without_a_byte_order_mark_is_decoded_not_kept_full_of_nuls(tmp_path, enc):
    text = "# Café report\n\nThe café on Main Street serves crème brûlée and strong coffee every day.\n"
    rep = ingest.IngestReport()
    decoded = ingest.decode_text(text.encode(enc), "cafe.md", rep)
    assert decoded == text and "\x00" not in decoded
    assert rep.problems["non_utf8_text"] == 1 and "without a byte-order mark" in str(rep.to_dict())
    src = tmp_path / "src"
    src.mkdir()
    (src / "cafe.md").write_bytes(text.encode(enc))
    docs, _, _ = ingest.ingest_folder(src, tmp_path / "o", tiny_options())
    assert "crème brûlée" in docs[0].sections[0].text


def test_ordinary_utf8_with_a_stray_nul_is_not_taken_for_utf16():
    rep = ingest.IngestReport()
    assert ingest.wide_encoding("plain text\x00 with one NUL".encode()) is None
    assert ingest.decode_text(b"plain text\x00 here", "x", rep) == "plain text here"
