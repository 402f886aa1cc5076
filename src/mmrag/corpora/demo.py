"""A small folder of "your own documents", built from the wiki corpus and its real photos.

The default profile has nothing of yours to ingest, so the stage writes this folder to show
ingestion working on every format it reads (HTML, Markdown, a PDF brochure, a Kiwix ZIM
archive, a questions file) and on the bad inputs it must survive (a corrupt, a missing, a
tiny, a huge and a remote image; a non-UTF-8 page; an empty section; a duplicate id; a copied
page; a scanned PDF without text; a broken question line). The bad inputs are labelled as such.
"""

from __future__ import annotations

import html
import io
import json
import struct
import textwrap
import zlib
from pathlib import Path

from PIL import Image as PILImage

from mmrag.corpora.wiki import sentences
from mmrag.schema import Document


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def page_html(doc: Document, img: str | None, caption: str) -> str:
    """An article as a small HTML page: title, lead, a captioned figure, sections, a fact table."""
    sents = sentences(doc.sections[0].text) if doc.sections else []
    lead, rest = " ".join(sents[:2]), " ".join(sents[2:])
    fig = (f'<figure><img src="{_esc(img)}" alt="{_esc(doc.title)}">'
           f"<figcaption>{_esc(caption)}</figcaption></figure>") if img else ""
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{_esc(doc.title)}</title>"
            f"</head><body><nav>Home | Index</nav><h1>{_esc(doc.title)}</h1>"
            f"<p>{_esc(lead)}</p>{fig}<h2>Details</h2><p>{_esc(rest or doc.summary)}</p>"
            f"<table><caption>Facts</caption><tr><th>Field</th><th>Value</th></tr>"
            f"<tr><td>Description</td><td>{_esc(doc.summary)}</td></tr>"
            f"<tr><td>Topic</td><td>{_esc(doc.domain or '')}</td></tr></table>"
            f"<footer>Text: Wikipedia, CC BY-SA</footer></body></html>")


def page_markdown(doc: Document, img: str | None, caption: str, n: int) -> str:
    """An article as Markdown with an image, a title attribute and a 'Figure N:' caption line."""
    sents = sentences(doc.sections[0].text) if doc.sections else []
    out = [f"# {doc.title}", "", f"*{doc.summary}*", "", " ".join(sents[:2]), ""]
    if img:
        out += [f'![{doc.title}]({img} "{doc.title}")', "", f"Figure {n}: {caption}", ""]
    out += ["## Details", "", " ".join(sents[2:]) or doc.summary, ""]
    return "\n".join(out)


def pdf_brochure(docs: list[Document], photos: dict[str, Path], captions: dict[str, str]) -> bytes:
    """A multi-page PDF (one article per page, photo + 'Figure N:' caption) via matplotlib."""
    # heavy, only for this one file: matplotlib (a figure per page) and pypdf (joining the pages)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    with plt.rc_context({"pdf.fonttype": 42}):
        for n, doc in enumerate(docs, 1):
            fig = plt.figure(figsize=(8.27, 11.69))
            fig.text(0.08, 0.94, doc.title, fontsize=18, weight="bold")
            body = textwrap.fill(doc.sections[0].text[:900], 95)
            fig.text(0.08, 0.90, body, fontsize=8.5, va="top")
            if doc.id in photos:
                ax = fig.add_axes([0.15, 0.18, 0.7, 0.38])
                ax.imshow(PILImage.open(photos[doc.id]).convert("RGB"))
                ax.axis("off")
                fig.text(0.08, 0.14, f"Figure {n}: {captions[doc.id]}", fontsize=9)
            buf = io.BytesIO()
            fig.savefig(buf, format="pdf", metadata={"Title": doc.title, "CreationDate": None})
            plt.close(fig)
            writer.append(PdfReader(io.BytesIO(buf.getvalue())))  # one page, its own resources
    writer.add_metadata({"/Title": "Brochure: " + ", ".join(d.title for d in docs)})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def scanned_pdf(photo: Path) -> bytes:
    """A PDF that is only a picture (a scanned page): no extractable text."""
    buf = io.BytesIO()
    PILImage.open(photo).convert("RGB").save(buf, format="PDF")
    return buf.getvalue()


def write_zim(path: Path, docs: list[Document], photos: dict[str, Path],
              captions: dict[str, str]) -> None:
    """A Kiwix ZIM archive of article pages (+ their images) written with libzim's writer."""
    # native libzim, needed only for the ZIM sample
    from libzim.writer import Creator, Hint, Item, StringProvider

    class _Item(Item):
        def __init__(self, path: str, title: str, mimetype: str, content: bytes, front: bool):
            super().__init__()
            self._p, self._t, self._m, self._c, self._f = path, title, mimetype, content, front

        def get_path(self) -> str:
            return self._p

        def get_title(self) -> str:
            return self._t

        def get_mimetype(self) -> str:
            return self._m

        def get_contentprovider(self):
            return StringProvider(self._c)

        def get_hints(self):
            return {Hint.FRONT_ARTICLE: self._f, Hint.COMPRESS: self._m.startswith("text/")}

    with Creator(str(path)).config_indexing(False, "eng") as zim:
        zim.set_mainpath("index")
        links = "".join(f'<li><a href="A/{d.id}">{_esc(d.title)}</a></li>' for d in docs)
        zim.add_item(_Item("index", "Main page", "text/html",
                           f"<html><body><ul>{links}</ul></body></html>".encode(), True))
        for doc in docs:
            img = None
            if doc.id in photos:
                img = f"../I/{photos[doc.id].name}"
                zim.add_item(_Item(f"I/{photos[doc.id].name}", "", "image/" + (
                    "png" if photos[doc.id].suffix == ".png" else "jpeg"),
                    photos[doc.id].read_bytes(), False))
            zim.add_item(_Item(f"A/{doc.id}", doc.title, "text/html",
                               page_html(doc, img, captions.get(doc.id, "")).encode(), True))
        for key, value in (("Title", "mmrag demo"), ("Language", "eng"),
                           ("Description", "Wikipedia summaries and sample photos"),
                           ("Creator", "mmrag"), ("Publisher", "mmrag"), ("Date", "2025-01-01")):
            zim.add_metadata(key, value)


def _huge_png_header(side: int = 20000) -> bytes:
    """A PNG whose header claims side x side pixels (a decompression-bomb shape), no pixels."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


def build_demo_folder(docs: list[Document], corpus_dir: Path, dest: Path) -> dict[str, list[str]]:
    """Write the demo folder; returns {format: [article titles]} for the notebook."""
    dest.mkdir(parents=True, exist_ok=True)
    with_photo = [d for d in docs if d.images]
    pool = [d for d in docs if not d.images and d.summary and d.sections
            and len(d.sections[0].text) > 400]
    text_only = pool[:: max(1, len(pool) // 6)][:6]
    photos = {d.id: corpus_dir / d.images[0].path for d in with_photo}
    captions = {d.id: d.images[0].caption for d in with_photo}
    (dest / "images").mkdir(exist_ok=True)
    for d in with_photo:
        (dest / "images" / photos[d.id].name).write_bytes(photos[d.id].read_bytes())
    groups = {"html": with_photo[0:5], "markdown": with_photo[5:10],
              "pdf": with_photo[10:13], "zim": with_photo[13:] + text_only[:3]}
    for name in ("html", "markdown", "pdf", "zim"):
        (dest / name).mkdir(exist_ok=True)
    for d in groups["html"]:
        (dest / "html" / f"{d.id}.html").write_text(
            page_html(d, f"../images/{photos[d.id].name}", captions[d.id]), encoding="utf-8")
    for n, d in enumerate(groups["markdown"], 1):
        (dest / "markdown" / f"{d.id}.md").write_text(
            page_markdown(d, f"../images/{photos[d.id].name}", captions[d.id], n),
            encoding="utf-8")
    if groups["pdf"]:
        (dest / "pdf" / "brochure.pdf").write_bytes(pdf_brochure(groups["pdf"], photos, captions))
    write_zim(dest / "zim" / "wiki_sample.zim", groups["zim"], photos, captions)

    # -- deliberately bad inputs: each must be counted in the ingestion report
    bad = dest / "problems"  # sorts after html/, markdown/, pdf/: the originals come first
    bad.mkdir(exist_ok=True)
    (bad / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\nthis is not a png")
    PILImage.new("RGB", (4, 4), "white").save(bad / "spacer.png")
    (bad / "bomb.png").write_bytes(_huge_png_header())
    host = text_only[3] if len(text_only) > 3 else docs[0]
    (bad / "broken_images.html").write_text(
        f"<html><head><title>{_esc(host.title)}</title></head><body><p>{_esc(host.sections[0].text)}"
        "</p><img src='corrupt.png' alt='corrupt'><img src='missing.png' alt='missing'>"
        "<img src='spacer.png' alt=''><img src='bomb.png' alt='bomb'>"
        "<img src='https://example.org/remote.png' alt='remote'>"
        "<h2>Empty heading</h2><h2>Notes</h2><p>A section that survives.</p></body></html>",
        encoding="utf-8")
    latin = text_only[4] if len(text_only) > 4 else docs[1]
    (bad / "latin1_page.html").write_bytes(
        ("<html><head><meta charset='windows-1252'><title>Caf\u00e9 notes</title></head><body>"
         f"<h1>Caf\u00e9 notes</h1><p>{_esc(latin.sections[0].text)} Na\u00efve r\u00e9sum\u00e9."
         "</p></body></html>").encode("cp1252", errors="replace"))
    (bad / "same_name.md").write_text(page_markdown(text_only[0], None, "", 1), encoding="utf-8")
    (bad / "same_name.markdown").write_text(page_markdown(text_only[1], None, "", 1),
                                            encoding="utf-8")
    if groups["html"]:
        d = groups["html"][0]
        (bad / "copy_of_page.html").write_text(
            page_html(d, f"../images/{photos[d.id].name}", captions[d.id]), encoding="utf-8")
    (bad / "blank.html").write_text("<html><body><nav>menu only</nav></body></html>",
                                    encoding="utf-8")
    if with_photo:
        (bad / "scanned.pdf").write_bytes(scanned_pdf(photos[with_photo[-1].id]))
    (bad / "notes.docx").write_bytes(b"PK\x03\x04 not ingested")

    # -- your questions: JSONL (question, answer, optional choices and image)
    (dest / "questions").mkdir(exist_ok=True)
    rows = []
    for d in [*groups["html"], *groups["markdown"], *groups["pdf"], *groups["zim"]]:
        rows.append({"id": f"demo-{d.id}", "question": f"Which article is described as "
                     f"'{d.summary}'?", "answer": d.title, "gold_domain": d.domain})
    for d in with_photo[:3]:
        others = [o.title for o in with_photo if o.id != d.id][:3]
        rows.append({"id": f"demo-photo-{d.id}", "question": "What does this photo show?",
                     "choices": sorted([d.title, *others]), "answer": d.title,
                     "image": f"../images/{photos[d.id].name}"})
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    lines.insert(2, "{this line is not json")
    lines.append(json.dumps({"id": "demo-noanswer", "question": "An unanswered question?"}))
    lines.append(json.dumps({"id": "demo-badimage", "question": "What is this?", "answer": "x",
                             "image": "../images/does_not_exist.png"}))
    (dest / "questions" / "demo.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {k: [d.title for d in v] for k, v in groups.items()}
