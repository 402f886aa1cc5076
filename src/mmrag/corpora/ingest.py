"""Your own documents -> a corpus folder: HTML, Markdown, PDF and Kiwix ZIM archives.

Every format is first read into a flat list of *blocks* (heading, text, image, table) and then
assembled the same way: sections start at headings; images get a caption from
``<figcaption>``, a "Figure N:" line, their title or their alt text (in that order); pages come
from the PDF itself and, elsewhere, from a configurable split every ``page_chars`` characters
(what BRIT's page-based layout links need). Questions come from JSONL files.

Bad input never crashes ingestion and is never silent: each problem is counted in an
:class:`~mmrag.corpora.report.IngestReport` and skipped only where skipping is right.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import io
import json
import os
import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from PIL import Image as PILImage

from mmrag.corpora import multihop
from mmrag.corpora.layout import slug, write_corpus
from mmrag.corpora.report import IngestReport
from mmrag.schema import Document, Image, Question, Section, Table

HTML_EXT = {".html", ".htm", ".xhtml"}
MD_EXT = {".md", ".markdown"}
IMAGE_EXT = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff", ".svg"}
FIGURE_LINE = re.compile(r"^\s*(fig\.?|figure)\s*\d+[a-z]?\s*[:.\-–]\s*\S", re.IGNORECASE)


@dataclass(frozen=True)
class IngestOptions:
    """Knobs of ingestion (from params `corpora.folder`)."""

    page_chars: int  # page split for formats without pages (html, markdown, zim)
    min_image_side: int  # smaller images are icons or spacers: skipped
    max_image_side: int  # larger images are downscaled to this side
    max_image_pixels: int  # larger images are skipped (decompression bombs)
    max_zim_articles: int  # 0 = all articles of each ZIM archive
    max_image_repeats: int  # the same image on more documents is decorative: dropped


# --------------------------------------------------------------------------- blocks
@dataclass
class Block:
    """One piece of a page in reading order."""

    kind: str  # heading | text | image | table
    text: str = ""
    level: int = 0
    src: str = ""  # image source as written in the page
    alt: str = ""
    title: str = ""
    figcaption: str = ""
    rows: list[list[str]] = field(default_factory=list)
    header: bool = False  # first table row is a header
    page: int | None = None  # explicit page (PDF)
    data: bytes | None = None  # image bytes already at hand (PDF)


@dataclass
class RawPage:
    """A page read from some format, before assembly into a Document."""

    title: str
    blocks: list[Block]
    where: str  # path relative to the folder (for the report)
    resolve: Callable[[str], bytes | str]  # image src -> bytes, or a problem kind


# --------------------------------------------------------------------------- text decoding
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),  # before UTF-16:
          (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),  # FF FE starts both
          (codecs.BOM_UTF16_BE, "utf-16-be"))


def wide_encoding(data: bytes) -> str | None:
    """UTF-32 or UTF-16 (LE or BE) written without a byte-order mark, told by where its NUL bytes sit
    (Latin text in UTF-16 is every other byte NUL), or None. Such text also decodes as UTF-8 or
    cp1252, into a string full of NULs, so it must be caught before those are tried."""
    head = data[:4096]
    if len(head) < 4 or head.count(0) < len(head) // 4:
        return None
    share = [head[i::4].count(0) / max(1, len(head[i::4])) for i in range(4)]
    if share[1] > 0.9 and share[2] > 0.9 and share[3] > 0.9:
        return "utf-32-le"
    if share[0] > 0.9 and share[1] > 0.9 and share[2] > 0.9:
        return "utf-32-be"
    odd, even = (share[1] + share[3]) / 2, (share[0] + share[2]) / 2
    if odd > 0.7 and even < 0.3:
        return "utf-16-le"
    if even > 0.7 and odd < 0.3:
        return "utf-16-be"
    return None


def decode_text(data: bytes, where: str, report: IngestReport) -> str:
    """A byte-order mark (UTF-8, UTF-16 LE/BE, UTF-32 LE/BE) first, then UTF-16/32 without one (told
    by its NUL bytes), else UTF-8, else the page's declared charset, else cp1252; a page neither
    UTF-8 nor marked by a BOM is counted. No NUL character reaches the corpus."""
    for bom, enc in _BOMS:
        if data.startswith(bom):
            return data[len(bom):].decode(enc, errors="replace").replace("\x00", "")
    wide = wide_encoding(data)
    if wide:
        report.add("non_utf8_text", where, f"{wide} without a byte-order mark, decoded as {wide}")
        return data[: len(data) - len(data) % (4 if "32" in wide else 2)].decode(wide, errors="replace") \
            .replace("\x00", "")
    try:
        return data.decode("utf-8").replace("\x00", "")
    except UnicodeDecodeError:
        pass
    m = re.search(rb"charset=[\"']?([A-Za-z0-9_\-]+)", data[:4096])
    enc = m.group(1).decode("ascii", "ignore") if m else "cp1252"
    try:
        text = data.decode(enc, errors="replace")
    except LookupError:
        enc, text = "cp1252", data.decode("cp1252", errors="replace")
    report.add("non_utf8_text", where, f"decoded as {enc}")
    return text.replace("\x00", "")


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


# --------------------------------------------------------------------------- HTML
_SKIP_TAGS = {"script", "style", "noscript", "nav", "header", "footer", "template", "svg",
              "button", "form", "head", "math"}
_BLOCK_TAGS = {"p", "div", "section", "article", "main", "li", "ul", "ol", "dl", "dt", "dd",
               "blockquote", "pre", "br", "hr", "details", "summary", "aside", "body", "caption",
               "tr", "td", "th", "figcaption", "center"}


_THUMB_CLASSES = {"thumb", "thumbinner", "gallerybox"}  # MediaWiki/Kiwix image frames
_CAPTION_CLASSES = {"thumbcaption", "gallerytext"}


def _is_caption(tag) -> bool:
    return tag.name == "div" and bool(_CAPTION_CLASSES & set(tag.get("class") or ()))


def _is_infobox(table) -> bool:
    return any(c == "infobox" or c.startswith("infobox") for c in table.get("class") or ())


def _infobox_captions(table) -> dict[int, str]:
    """id(img) -> caption for the pictures of a MediaWiki infobox: the text of the picture's own
    cell, else of the same column of the next row (a caption row: td cells without images, the
    same number of cells). The caption text is cut out of the table so it is not said twice."""
    captions: dict[int, str] = {}
    sources: dict[int, object] = {}
    for img in table.find_all("img"):
        cell = img.find_parent(["td", "th"])
        row = cell.find_parent("tr") if cell is not None else None
        if row is None:
            continue
        source = cell if _clean(cell.get_text(" ")) else None
        if source is None:
            nxt = row.find_next_sibling("tr")
            cells = row.find_all(["td", "th"], recursive=False)
            below = nxt.find_all(["td", "th"], recursive=False) if nxt is not None else []
            if cell in cells and len(below) == len(cells) and not nxt.find("img"):
                cand = below[cells.index(cell)]
                if cand.name == "td" or any("caption" in c for c in cand.get("class") or ()):
                    source = cand
        if source is not None and _clean(source.get_text(" ")):
            captions[id(img)] = _clean(source.get_text(" "))
            sources[id(source)] = source
    for source in sources.values():  # after all captions are read: a cell may caption two images
        for text in source.find_all(string=True):
            text.extract()
    return captions


def html_blocks(html: str) -> tuple[str, list[Block]]:
    """(title, blocks) of an HTML page, with figures, tables and headings in reading order."""
    from bs4 import BeautifulSoup, NavigableString, Tag  # not pinned (comes with nbconvert); only HTML needs it

    soup = BeautifulSoup(html, "html.parser")
    for bad in soup.select("sup.reference, .mw-editsection, .noprint"):
        bad.decompose()
    title_tag = soup.find("title")
    title = _clean(title_tag.get_text(" ")) if title_tag else ""
    blocks: list[Block] = []
    buf: list[str] = []

    def flush() -> None:
        text = _clean(" ".join(buf))
        buf.clear()
        if text:
            blocks.append(Block("text", text=text))

    def image(tag: Tag, caption: str = "") -> Block:
        return Block("image", src=str(tag.get("src") or tag.get("data-src") or ""),
                     alt=_clean(str(tag.get("alt") or "")), title=_clean(str(tag.get("title") or "")),
                     figcaption=caption)

    def visit(node) -> None:
        if isinstance(node, NavigableString):
            if type(node).__name__ in ("Comment", "Doctype", "Declaration", "ProcessingInstruction"):
                return
            buf.append(str(node))
            return
        if not isinstance(node, Tag):
            return
        name = node.name.lower()
        if name in _SKIP_TAGS:
            return
        if re.fullmatch(r"h[1-6]", name):
            flush()
            text = _clean(node.get_text(" "))
            if text:
                blocks.append(Block("heading", text=text, level=int(name[1])))
            return
        if name == "img":
            flush()
            blocks.append(image(node))
            return
        if name == "figure":
            flush()
            cap = node.find("figcaption")
            caption = _clean(cap.get_text(" ")) if cap else ""
            for img in node.find_all("img"):
                blocks.append(image(img, caption))
            return
        if name in ("div", "li") and _THUMB_CLASSES & set(node.get("class") or ()):
            imgs = [i for i in node.find_all("img") if not i.find_parent(_is_caption)]
            if imgs:  # a MediaWiki/Kiwix thumb or gallery box: its caption belongs to its images
                flush()
                cap = node.find(_is_caption)
                caption = _clean(cap.get_text(" ")) if cap else ""
                for img in imgs:
                    blocks.append(image(img, caption))
                return
        if name == "table":
            flush()
            infobox = _infobox_captions(node) if _is_infobox(node) else {}
            rows, header = [], False
            for i, tr in enumerate(node.find_all("tr")):
                cells = tr.find_all(["td", "th"])
                if i == 0 and cells and all(c.name == "th" for c in cells):
                    header = True
                rows.append([_clean(c.get_text(" ")) for c in cells])
            cap = node.find("caption")
            rows = [r for r in rows if any(r)]
            if rows:
                blocks.append(Block("table", rows=rows, header=header,
                                    text=_clean(cap.get_text(" ")) if cap else ""))
            for img in node.find_all("img"):  # infobox pictures
                blocks.append(image(img, infobox.get(id(img), "")))
            return
        block = name in _BLOCK_TAGS
        if block:
            flush()
        for child in node.children:
            visit(child)
        if block:
            flush()

    visit(soup.body or soup)
    flush()
    first_h1 = next((b for b in blocks if b.kind == "heading" and b.level == 1), None)
    if first_h1 is not None:
        title = title or first_h1.text
        if first_h1.text == title:
            blocks.remove(first_h1)
    return title, blocks


# --------------------------------------------------------------------------- Markdown
_MD_IMAGE = re.compile(r"!\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'(]([^\"')]*)[\"')])?\s*\)")
_MD_HTML_IMG = re.compile(r"<img\b[^>]*>", re.IGNORECASE)
_MD_ATTR = re.compile(r"(\w+)\s*=\s*[\"']([^\"']*)[\"']")
_MD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_MD_ATX = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _md_inline(text: str) -> str:
    text = _MD_LINK.sub(r"\1", text)
    text = re.sub(r"(\*\*|__|`)", "", text)
    text = re.sub(r"(?<!\w)[*_](\S.*?)[*_](?!\w)", r"\1", text)
    text = re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", text)
    return re.sub(r"^>\s?", "", text)


def markdown_blocks(md: str) -> tuple[str, list[Block]]:
    """(title, blocks) of a Markdown page: ATX/setext headings, images, 'Figure N:' lines."""
    lines = md.splitlines()
    title = ""
    if lines and lines[0].strip() == "---":  # YAML front matter
        for j in range(1, len(lines)):
            if lines[j].strip() in ("---", "..."):
                for fm in lines[1:j]:
                    m = re.match(r"^title:\s*[\"']?(.*?)[\"']?\s*$", fm)
                    if m:
                        title = m.group(1)
                lines = lines[j + 1:]
                break
    blocks: list[Block] = []
    para: list[str] = []
    fenced = False

    def flush() -> None:
        text = _clean(" ".join(para))
        para.clear()
        if text:
            blocks.append(Block("text", text=text))

    for i, line in enumerate(lines):
        if line.strip().startswith(("```", "~~~")):
            fenced = not fenced
            flush()
            continue
        if fenced:
            para.append(line)
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        m = _MD_ATX.match(line)
        if m:
            flush()
            blocks.append(Block("heading", text=_clean(_md_inline(m.group(2))), level=len(m.group(1))))
            continue
        if line.strip() and re.fullmatch(r"\s*(=+|-+)\s*", nxt) and not para:
            flush()
            blocks.append(Block("heading", text=_clean(_md_inline(line)),
                                level=1 if nxt.strip().startswith("=") else 2))
            continue
        if re.fullmatch(r"\s*(=+|-+)\s*", line) and blocks and blocks[-1].kind == "heading":
            continue  # the underline of a setext heading
        if not line.strip():
            flush()
            continue
        pos = 0
        found = sorted([(m.start(), m.end(), "md", m) for m in _MD_IMAGE.finditer(line)]
                       + [(m.start(), m.end(), "html", m) for m in _MD_HTML_IMG.finditer(line)],
                       key=lambda t: t[0])
        if not found:
            if FIGURE_LINE.match(_md_inline(line)):
                flush()
                blocks.append(Block("text", text=_clean(_md_inline(line))))
                continue
            para.append(_md_inline(line))
            continue
        for start, end, kind, m in found:
            if line[pos:start].strip():
                para.append(_md_inline(line[pos:start]))
            flush()
            if kind == "md":
                blocks.append(Block("image", src=m.group(2), alt=_clean(m.group(1)),
                                    title=_clean(m.group(3) or "")))
            else:
                attrs = {k.lower(): v for k, v in _MD_ATTR.findall(m.group(0))}
                blocks.append(Block("image", src=attrs.get("src", ""), alt=attrs.get("alt", ""),
                                    title=attrs.get("title", "")))
            pos = end
        if line[pos:].strip():
            para.append(_md_inline(line[pos:]))
    flush()
    first_h1 = next((b for b in blocks if b.kind == "heading" and b.level == 1), None)
    if first_h1 is not None and (not title or first_h1.text == title):
        title = title or first_h1.text
        blocks.remove(first_h1)
    return title, blocks


# --------------------------------------------------------------------------- PDF
def _drawn_names(page) -> set[str] | None:
    """XObject names a page's content stream draws (`Do`); None if it cannot be parsed."""
    try:
        from pypdf.generic import ContentStream  # heavy: pypdf imports in ~0.1 s; only PDFs need it

        contents = page.get_contents()
        if contents is None:
            return set()
        ops = ContentStream(contents, page.pdf).operations
        return {str(operands[0]).lstrip("/") for operands, op in ops if op == b"Do" and operands}
    except Exception:  # noqa: BLE001 - an unparseable stream falls back to all images
        return None


def pdf_pages(path: Path, where: str, report: IngestReport) -> RawPage | None:
    """One RawPage for a PDF: text lines and embedded images, each tagged with its page."""
    try:
        from pypdf import PdfReader  # heavy: pypdf imports in ~0.1 s; only PDFs need it
    except ImportError as e:  # pragma: no cover - pinned in requirements/base.txt
        raise RuntimeError("PDF ingestion needs pypdf: `bin/py -m pip install pypdf==7.1.0`") from e
    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            report.add("corrupt_pdf", where, "encrypted")
            return None
        pages = list(reader.pages)
    except Exception as e:  # noqa: BLE001 - any parser failure is a corrupt PDF
        report.add("corrupt_pdf", where, type(e).__name__)
        return None
    meta_title = ""
    try:
        meta_title = _clean((reader.metadata or {}).get("/Title", "") or "")
    except Exception:  # noqa: BLE001
        pass
    blocks: list[Block] = []
    textless = 0
    for no, page in enumerate(pages, 1):
        try:
            text = page.extract_text() or ""
        except Exception:  # noqa: BLE001
            text = ""
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        if not lines:
            textless += 1
        blocks.append(Block("heading", text=f"Page {no}", level=2, page=no))
        para: list[str] = []
        for ln in lines:
            if FIGURE_LINE.match(ln):
                if para:
                    blocks.append(Block("text", text=_clean(" ".join(para)), page=no))
                    para = []
                blocks.append(Block("text", text=ln, page=no))
            else:
                para.append(ln)
        if para:
            blocks.append(Block("text", text=_clean(" ".join(para)), page=no))
        try:
            drawn = _drawn_names(page)
            for im in page.images:
                stem = im.name.rsplit(".", 1)[0].lstrip("/")
                if drawn is not None and stem.split("/")[0] not in drawn:
                    continue  # shared resource that this page does not draw
                blocks.append(Block("image", src=f"{where}#page{no}/{im.name}", data=im.data,
                                    page=no))
        except Exception as e:  # noqa: BLE001
            report.add("corrupt_image", f"{where}#page{no}", type(e).__name__)
    if textless:
        report.add("pdf_without_text", where, f"{textless} of {len(pages)} pages")
    first = next((b.text for b in blocks if b.kind == "text"), "")
    title = meta_title or (first if 0 < len(first) <= 100 else "") or path.stem
    return RawPage(title=title, blocks=blocks, where=where, resolve=lambda s: "missing_image")


# --------------------------------------------------------------------------- ZIM
def zim_pages(path: Path, where: str, report: IngestReport, max_articles: int
              ) -> Iterator[RawPage]:
    """HTML articles of a Kiwix ZIM archive (redirects and the main page skipped); an archive
    whose checksum does not verify is ``corrupt_zim`` and skipped whole."""
    try:
        from libzim.reader import Archive  # native libzim, needed only for ZIM archives

        zim = Archive(str(path))
        # libzim's checksum covers the whole file: damage past the entries read is caught too
        intact = zim.check() if zim.has_checksum else True
        main = zim.main_entry.get_item().path if zim.has_main_entry else None
    except Exception as e:  # noqa: BLE001
        report.add("corrupt_zim", where, f"{type(e).__name__}: {e}"[:120])
        return
    if not intact:
        report.add("corrupt_zim", where, f"{path.name}: checksum does not verify (damaged or "
                                         f"truncated archive); skipped")
        return
    taken = 0
    for i in range(zim.all_entry_count):
        try:
            entry = zim._get_entry_by_id(i)
            if entry.is_redirect:
                continue
            item = entry.get_item()
            if not item.mimetype.startswith("text/html") or item.path == main:
                continue
            if max_articles and taken >= max_articles:
                report.add("zim_limit", where, f"limit {max_articles}")
                continue
            html = decode_text(bytes(item.content), f"{where}::{item.path}", report)
        except Exception as e:  # noqa: BLE001
            report.add("corrupt_zim", f"{where}#{i}", type(e).__name__)
            continue
        taken += 1
        title, blocks = html_blocks(html)
        yield RawPage(title=entry.title or title or item.path, blocks=blocks,
                      where=f"{where}::{item.path}", resolve=_zim_resolver(zim, item.path))


def _zim_resolver(zim, base: str) -> Callable[[str], bytes | str]:
    def resolve(src: str) -> bytes | str:
        if src.startswith(("http://", "https://", "//")):
            return "remote_image"
        p = posixpath.normpath(posixpath.join(posixpath.dirname(base), unquote(src.split("#")[0])))
        p = p.lstrip("/")
        for cand in (p, p.split("?")[0]):
            try:
                return bytes(zim.get_entry_by_path(cand).get_item().content)
            except KeyError:
                continue
        return "missing_image"
    return resolve


def _file_resolver(doc_path: Path, root: Path) -> Callable[[str], bytes | str]:
    def resolve(src: str) -> bytes | str:
        if src.startswith("data:"):
            try:
                return base64.b64decode(src.split(",", 1)[1], validate=False)
            except (IndexError, binascii.Error):
                return "corrupt_image"
        if re.match(r"^[a-z][a-z0-9+.\-]*://", src, re.IGNORECASE) or src.startswith("//"):
            return "remote_image"
        rel = unquote(src.split("#")[0].split("?")[0])
        cand = (root / rel.lstrip("/")) if rel.startswith("/") else (doc_path.parent / rel)
        try:
            return cand.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return "missing_image"
        except OSError:
            return "unreadable_file"
    return resolve


# --------------------------------------------------------------------------- images
class ImageStore:
    """Validates image bytes and writes each distinct image once into <corpus>/images/."""

    def __init__(self, out_dir: Path, options: IngestOptions, report: IngestReport):
        self.dir = out_dir / "images"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.options, self.report = options, report
        self.saved: dict[str, str | None] = {}

    def put(self, data: bytes, where: str) -> str | None:
        """Relative path of the stored image, or None (problem counted) when unusable."""
        key = hashlib.sha1(data).hexdigest()[:16]
        if key in self.saved:
            return self.saved[key]
        rel = None
        if data.lstrip()[:5] in (b"<?xml", b"<svg ") or b"<svg" in data[:256]:
            self.report.add("unsupported_image", where, "SVG")
        else:
            rel = self._decode_and_save(data, key, where)
        self.saved[key] = rel
        return rel

    def _decode_and_save(self, data: bytes, key: str, where: str) -> str | None:
        opt = self.options
        try:
            with PILImage.open(io.BytesIO(data)) as probe:
                w, h = probe.size
                fmt = probe.format
        except PILImage.DecompressionBombError:
            self.report.add("huge_image", where, "decompression bomb")
            return None
        except Exception as e:  # noqa: BLE001 - any decoder failure means corrupt
            self.report.add("corrupt_image", where, type(e).__name__)
            return None
        if w * h > opt.max_image_pixels:
            self.report.add("huge_image", where, f"{w}x{h}")
            return None
        if min(w, h) < opt.min_image_side:
            self.report.add("tiny_image", where, f"{w}x{h}")
            return None
        try:
            with PILImage.open(io.BytesIO(data)) as img:
                img.load()
                if max(w, h) > opt.max_image_side:
                    self.report.add("downscaled_image", where, f"{w}x{h}")
                    img = img.convert("RGBA" if img.mode in ("RGBA", "LA", "P") else "RGB")
                    img.thumbnail((opt.max_image_side, opt.max_image_side))
                    rel = f"images/{key}.png"
                    img.save(self.dir / f"{key}.png", format="PNG")
                    return rel
                if fmt in ("PNG", "JPEG", "GIF", "WEBP"):
                    ext = {"JPEG": "jpg"}.get(fmt, fmt.lower())
                    (self.dir / f"{key}.{ext}").write_bytes(data)
                    return f"images/{key}.{ext}"
                img = img.convert("RGBA" if "A" in img.getbands() else "RGB")
                img.save(self.dir / f"{key}.png", format="PNG")
                return f"images/{key}.png"
        except Exception as e:  # noqa: BLE001 - truncated or broken pixel data
            self.report.add("corrupt_image", where, type(e).__name__)
            return None


# --------------------------------------------------------------------------- assembly
def assemble(raw: RawPage, doc_id: str, store: ImageStore, options: IngestOptions,
             report: IngestReport, source: str = "folder") -> Document | None:
    """Blocks -> Document: sections from headings, captions, pages, tables; None if empty."""
    doc = Document(id=doc_id, title=raw.title or doc_id, source=source,
                   meta={"path": raw.where})
    offset = 0  # characters of text so far (for the page split)

    def page_at(block: Block) -> int:
        return block.page if block.page is not None else 1 + offset // options.page_chars

    sec = Section(id=f"{doc_id}#s0", doc_id=doc_id, title="", text="", page=1)
    sections = [sec]
    pending_caption: list[Image] = []  # images still waiting for a "Figure N:" line
    pending_lines: list[str] = []  # "Figure N:" lines still waiting for an image
    for block in raw.blocks:
        if block.kind == "heading":
            sec = Section(id=f"{doc_id}#s{len(sections)}", doc_id=doc_id, title=block.text,
                          text="", page=page_at(block))
            sections.append(sec)
            pending_caption, pending_lines = [], []
        elif block.kind == "text":
            if FIGURE_LINE.match(block.text):
                if pending_caption:
                    pending_caption.pop(0).caption = block.text
                else:  # the caption line came first (PDF text precedes its images)
                    pending_lines.append(block.text)
            sec.text = f"{sec.text}\n{block.text}" if sec.text else block.text
            offset += len(block.text) + 1
        elif block.kind == "table":
            header = block.rows[0] if block.header else [f"col{j + 1}" for j in
                                                         range(max(map(len, block.rows)))]
            body = block.rows[1:] if block.header else block.rows
            tab = Table(id=f"{doc_id}#t{len(doc.tables)}", doc_id=doc_id, columns=header,
                        rows=body, title=block.text or sec.title, section_id=sec.id)
            doc.tables.append(tab)
            sec.table_ids.append(tab.id)
        elif block.kind == "image":
            where = f"{raw.where} [{block.src[:80]}]" if block.src else raw.where
            data = block.data if block.data is not None else raw.resolve(block.src)
            if isinstance(data, str):
                report.add(data, where)
                continue
            rel = store.put(data, where)
            if rel is None:
                continue
            caption = block.figcaption or block.title or block.alt
            img = Image(id=f"{doc_id}#img{len(doc.images)}", doc_id=doc_id, path=rel,
                        caption=caption, section_id=sec.id, page=page_at(block))
            doc.images.append(img)
            sec.image_ids.append(img.id)
            if not block.figcaption:
                if pending_lines:
                    img.caption = pending_lines.pop(0)
                else:
                    pending_caption.append(img)
    kept = []
    for i, s in enumerate(sections):
        if s.text.strip() or s.image_ids or s.table_ids:
            kept.append(s)
        elif i > 0:  # the implicit lead section is empty whenever a page opens with a heading
            report.add("empty_section", raw.where, s.title or "(untitled)")
    doc.sections = kept  # ids stay stable when an empty section is dropped
    if not kept:
        report.add("empty_document", raw.where)
        return None
    return doc


# --------------------------------------------------------------------------- questions
_Q_FIELDS = {"id", "text", "answer", "kind", "split", "choices", "answer_aliases",
             "gold_evidence", "gold_entity", "gold_passages", "gold_domain", "meta"}


def read_questions(path: Path, root: Path, set_name: str, store: ImageStore,
                   report: IngestReport) -> list[Question]:
    """Your questions: JSONL with question (or text), answer, optional choices and image path.

    A relative ``image`` is looked up in the questions file's folder first, then in the corpus
    folder ``root``; when neither holds it, ``missing_question_image`` names both paths tried."""
    where = str(path.relative_to(root))
    out: list[Question] = []
    try:
        lines = decode_text(path.read_bytes(), where, report).splitlines()
    except OSError as e:
        report.add("unreadable_file", where, type(e).__name__)
        return out
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not an object")
        except ValueError as e:
            report.add("bad_question_line", f"{where}:{n}", str(e)[:60])
            continue
        text = str(row.get("question") or row.get("text") or "").strip()
        answer = row.get("answer")
        if isinstance(answer, list):
            answer = answer[0] if answer else ""
        if not text or answer is None or str(answer).strip() == "":
            report.add("invalid_question", f"{where}:{n}")
            continue
        kwargs = {k: row[k] for k in _Q_FIELDS & row.keys() if k not in ("text", "answer")}
        kwargs["meta"] = {**dict(kwargs.get("meta") or {}),
                          **{k: v for k, v in row.items()
                             if k not in _Q_FIELDS | {"question", "image", "image_path"}}}
        q = Question(id=str(row.get("id") or f"{set_name}-{n}"), text=text, answer=str(answer),
                     dataset="folder", **{k: v for k, v in kwargs.items() if k != "id"})
        if q.choices and not isinstance(q.choices, list):
            q.choices = [str(c) for c in q.choices] if isinstance(q.choices, (tuple,)) \
                else [str(q.choices)]
        img_src = row.get("image") or row.get("image_path")
        if img_src:
            src = str(img_src)
            data = _file_resolver(path, root)(src)
            tried = [src.lstrip("/") if src.startswith("/") else
                     os.path.normpath(os.path.relpath(path.parent / src, root))]
            if data == "missing_image" and not src.startswith("/"):
                # not next to the questions file: relative to the corpus folder root
                data = _file_resolver(root / "_", root)(src)
                tried.append(os.path.normpath(src))
            rel = None if isinstance(data, str) else store.put(data, f"{where}:{n}")
            if rel is None:
                report.add("missing_question_image", f"{where}:{n}",
                           f"{src[:80]} (tried {' and '.join(tried)})"
                           if data == "missing_image" else src[:80])
                continue
            q.image_path, q.image_id = rel, f"qimg-{Path(rel).stem}"
        out.append(q)
    return out


# --------------------------------------------------------------------------- decorative images
def drop_decorative(docs: list[Document], questions: dict[str, list[Question]], store: ImageStore,
                    max_repeats: int, report: IngestReport) -> list[Document]:
    """Drop images that appear on more than ``max_repeats`` documents (site logos, icons) from
    every document, counted as ``decorative_image``; sections and documents left empty go too."""
    on_docs: dict[str, list[Document]] = {}
    for doc in docs:
        for path in dict.fromkeys(i.path for i in doc.images):
            on_docs.setdefault(path, []).append(doc)
    decorative = {p for p, ds in on_docs.items() if len(ds) > max_repeats}
    if not decorative:
        return docs
    for path in sorted(decorative, key=lambda p: on_docs[p][0].meta.get("path", "")):
        n = sum(1 for d in on_docs[path] for i in d.images if i.path == path)
        report.add("decorative_image", on_docs[path][0].meta.get("path", ""),
                   f"{path} on {len(on_docs[path])} documents", n=n)
    asked = {q.image_path for qs in questions.values() for q in qs if q.image_path}
    for path in decorative - asked:
        (store.dir.parent / path).unlink(missing_ok=True)
    kept_docs = []
    for doc in docs:
        if not any(i.path in decorative for i in doc.images):
            kept_docs.append(doc)
            continue
        gone = {i.id for i in doc.images if i.path in decorative}
        doc.images = [i for i in doc.images if i.id not in gone]
        sections = []
        for s in doc.sections:
            s.image_ids = [i for i in s.image_ids if i not in gone]
            if s.text.strip() or s.image_ids or s.table_ids:
                sections.append(s)
            else:
                report.add("empty_section", doc.meta.get("path", doc.id), s.title or "(untitled)")
        doc.sections = sections
        if sections:
            kept_docs.append(doc)
        else:
            report.add("empty_document", doc.meta.get("path", doc.id))
    return kept_docs


# --------------------------------------------------------------------------- folder
def _walk(root: Path) -> list[Path]:
    """Every non-hidden file under root, in a stable order."""
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        files.extend(Path(dirpath) / f for f in sorted(filenames) if not f.startswith("."))
    return files


def ingest_folder(root: str | Path, out_dir: str | Path, options: IngestOptions
                  ) -> tuple[list[Document], dict[str, list[Question]], IngestReport]:
    """A folder of html/md/pdf/zim (+ questions/*.jsonl) -> the corpus layout in out_dir."""
    root, out_dir = Path(root), Path(out_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"corpora.folder.path: '{root}' is not a folder; point it at a "
                                f"folder of .html/.md/.pdf/.zim files (and questions/*.jsonl)")
    report = IngestReport()
    store = ImageStore(out_dir, options, report)
    docs: list[Document] = []
    questions: dict[str, list[Question]] = {}
    ids: set[str] = set()
    seen_content: dict[str, str] = {}
    multihop_files: list[Path] = []  # official HotpotQA/MuSiQue files: read after the folder's documents

    def add(raw: RawPage, base_id: str) -> None:
        doc_id = base_id
        k = 2
        while doc_id in ids:
            doc_id = f"{base_id}_{k}"
            k += 1
        if doc_id != base_id:
            report.add("duplicate_id", raw.where, f"{base_id} -> {doc_id}")
        doc = assemble(raw, doc_id, store, options, report)
        if doc is None:
            return
        fingerprint = hashlib.sha1(json.dumps(
            [doc.title, [s.text for s in doc.sections], [i.path for i in doc.images]]
        ).encode()).hexdigest()
        if fingerprint in seen_content:
            report.add("duplicate_document", raw.where, f"same as {seen_content[fingerprint]}")
            return
        seen_content[fingerprint] = raw.where
        ids.add(doc_id)
        docs.append(doc)

    for path in _walk(root):
        rel = path.relative_to(root)
        where = str(rel)
        ext = path.suffix.lower()
        base_id = slug(str(rel.with_suffix("")))
        if ext in IMAGE_EXT:
            report.files["image"] += 1
            continue
        if multihop.is_multihop_file(path, rel):
            report.files["questions"] += 1
            multihop_files.append(path)
            continue
        if ext == ".jsonl":
            report.files["questions"] += 1
            name = slug(path.stem)
            questions.setdefault(name, []).extend(read_questions(path, root, name, store, report))
            continue
        if ext not in HTML_EXT | MD_EXT | {".pdf", ".zim"}:
            report.files["other"] += 1
            report.add("unsupported_file", where)
            continue
        try:
            if ext == ".zim":
                report.files["zim"] += 1
                for raw in zim_pages(path, where, report, options.max_zim_articles):
                    add(raw, f"{base_id}__{slug(raw.where.split('::', 1)[1])}")
                continue
            if ext == ".pdf":
                report.files["pdf"] += 1
                raw = pdf_pages(path, where, report)
                if raw is not None:
                    add(raw, base_id)
                continue
            data = path.read_bytes()
        except OSError as e:
            report.add("unreadable_file", where, type(e).__name__)
            continue
        text = decode_text(data, where, report)
        if ext in HTML_EXT:
            report.files["html"] += 1
            title, blocks = html_blocks(text)
        else:
            report.files["markdown"] += 1
            title, blocks = markdown_blocks(text)
        add(RawPage(title=title or path.stem, blocks=blocks, where=where,
                    resolve=_file_resolver(path, root)), base_id)
    multihop.ingest_files(multihop_files, root, docs, questions, report)
    docs = drop_decorative(docs, questions, store, options.max_image_repeats, report)
    for doc in docs:
        report.ingested["documents"] += 1
        report.ingested["sections"] += len(doc.sections)
        report.ingested["images"] += len(doc.images)
        report.ingested["captioned_images"] += sum(1 for i in doc.images if i.caption.strip())
        report.ingested["tables"] += len(doc.tables)
    for name, qs in questions.items():
        seen: set[str] = set()
        for q in qs:
            if q.id in seen:
                new = f"{q.id}_{sum(1 for x in seen if x.startswith(q.id))+1}"
                report.add("duplicate_question_id", name, f"{q.id} -> {new}")
                q.id = new
            seen.add(q.id)
        report.ingested["questions"] += len(qs)
    write_corpus(out_dir, docs, questions, meta={"source": "folder"})
    return docs, questions, report
