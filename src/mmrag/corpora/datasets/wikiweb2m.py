"""WikiWeb2M (Burns et al. 2023): Wikipedia pages as tf.train.SequenceExample TFRecords.

Context features: ``page_title``, ``page_url``, ``clean_page_description``, ``split``, ...;
per-section feature lists: ``section_title``, ``section_text``, ``section_index``,
``section_depth``, and images grouped by section: ``section_image_url``,
``section_image_clean_ref_desc``, ``section_image_alt_text``, ``section_image_captions``.
Images are URLs in the dataset: each Image gets ``images/<hash of url>.<ext>`` as its path and
the URL in ``Document.meta["image_urls"]``, so a downloader can fill the folder.
"""

from __future__ import annotations

from pathlib import Path

from mmrag.corpora.datasets.common import find, short_hash
from mmrag.corpora.datasets.tfrecord import decode_sequence_example, read_records
from mmrag.corpora.layout import slug
from mmrag.schema import Document, Image, Section


def _s(values: list) -> str:
    return values[0].decode("utf-8", "replace") if values else ""


def page_to_document(record: bytes) -> Document:
    """One SequenceExample -> one Document (sections and captioned images in order)."""
    ctx, lists = decode_sequence_example(record)
    title = _s(ctx.get("page_title", []))
    url = _s(ctx.get("page_url", []))
    doc_id = f"{slug(title, 60)}_{short_hash(url or title)[:6]}"
    doc = Document(id=doc_id, title=title, summary=_s(ctx.get("clean_page_description", [])),
                   source="wikiweb2m", meta={"url": url, "split": _s(ctx.get("split", [])),
                                             "image_urls": {}})
    titles = lists.get("section_title", [])
    texts = lists.get("section_text", [])
    urls = lists.get("section_image_url", [])
    refs = lists.get("section_image_clean_ref_desc", [])
    alts = lists.get("section_image_alt_text", [])
    caps = lists.get("section_image_captions", [])
    for i in range(max(len(titles), len(texts))):
        sec = Section(id=f"{doc_id}#s{i}", doc_id=doc_id,
                      title=_s(titles[i]) if i < len(titles) else "",
                      text=_s(texts[i]) if i < len(texts) else "")
        for j, raw_url in enumerate(urls[i] if i < len(urls) else []):
            img_url = raw_url.decode("utf-8", "replace")
            caption = next((c[j].decode("utf-8", "replace") for c in
                            (refs[i] if i < len(refs) else [], caps[i] if i < len(caps) else [],
                             alts[i] if i < len(alts) else []) if j < len(c) and c[j]), "")
            ext = Path(img_url.split("?")[0]).suffix.lower() or ".jpg"
            img = Image(id=f"{doc_id}#img{len(doc.images)}", doc_id=doc_id,
                        path=f"images/{short_hash(img_url)}{ext}", caption=caption,
                        section_id=sec.id, entity_id=None)
            doc.images.append(img)
            sec.image_ids.append(img.id)
            doc.meta["image_urls"][img.id] = img_url
        doc.sections.append(sec)
    return doc


def load(root: str | Path, *, limit: int) -> tuple[list[Document], dict]:
    """Every page of the *.tfrecord(.gz) files under root (``limit`` pages if > 0)."""
    docs: list[Document] = []
    for path in find(Path(root), "*.tfrecord", "*.tfrecord.gz", "*.tfrecord.gz-*"):
        for rec in read_records(path):
            docs.append(page_to_document(rec))
            if limit and len(docs) >= limit:
                return docs, {}
    return docs, {}
