"""Documents added live: ``bin/py -m mmrag add FILE…`` puts pages in front of ``bin/ask`` without a rebuild.

The pipeline's artifacts are DVC outputs (``data/<corpus>``, ``data/brit_graph/<corpus>``,
``data/knowledge_map/<corpus>``): writing into them would change a stage's outputs under its feet,
and the next ``dvc repro`` would overwrite them anyway. So ``add`` writes a *live overlay* beside
them, ``data/live/<corpus>/``, which no stage reads or writes, and ``ask`` lays it over the stage's
artifacts when it loads a system:

- ``documents.jsonl``, ``images/``, ``corpus.json``: the added pages in the corpus layout, read by
  the ``corpora`` stage's own ingestion code (HTML, Markdown, PDF, ZIM; every problem counted and
  a bad file skipped with its reason); BM25 and the answers' evidence read them with the corpus's;
- ``brit/``: each page's graph entry (:class:`~mmrag.brit.graph.DocEntry`: triplets, captions,
  image links) and the embeddings the update computed; ``ask`` replays the entries over the
  stage's graph, which gives exactly the graph built from every page (``UnifiedGraph.add_documents``
  is checked equal to a rebuild by the ``brit_graph`` stage, and the tests check the replay);
- ``knowledge_map/``: the pages' passages (the ``knowledge_map`` stage's chunking), their vectors
  and the unit :meth:`~mmrag.mmr2.knowledge_map.KnowledgeMap.assign` put each in (nearest unit
  centroid, no reclustering);
- ``manifest.json``: which file gave which documents (its path and content hash) and what the
  graph and map parts were computed with.

The overlay holds additions only, so it survives a rerun of the stages: a replay always starts from
the stage's current graph and map (a page that the corpus has since gained under the same id is
replaced by the live one). A part computed with other models than params now name is left out by
``ask`` (with a note) and recomputed by the next ``add``. Adding a file again replaces its pages
(unchanged bytes: nothing to do); ``add --reset`` removes the overlay. Every write goes through
:func:`mmrag.io.atomic_dir`: the overlay is replaced whole or not at all.

    bin/py -m mmrag add notes.md report.pdf --corpus world
    bin/py -m mmrag add --reset --corpus world
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import io as _bytes
import json
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mmrag import ask, io
from mmrag.corpora import ingest
from mmrag.corpora.layout import slug, write_corpus
from mmrag.corpora.passages import Chunking, to_passages
from mmrag.corpora.report import PROBLEMS, IngestReport
from mmrag.schema import Document, Passage, load_documents

LIVE = "live"  # data/live/<corpus>
READABLE = ingest.HTML_EXT | ingest.MD_EXT | {".pdf", ".zim"}


def live_dir(data: Path, corpus: str) -> Path:
    """Where a corpus's live overlay lives: outside every stage's outputs."""
    return Path(data) / LIVE / corpus


# --------------------------------------------------------------------------- the overlay on disk
@dataclass
class GraphPart:
    """BRIT's share of the overlay: the pages' graph entries and the embeddings they brought."""

    recipe: dict[str, Any]  # the models and knobs the entries were computed with
    entries: list[Any]  # DocEntry per live page
    text: dict[str, np.ndarray] = field(default_factory=dict)  # text-encoder embeddings by text
    clip_text: dict[str, np.ndarray] = field(default_factory=dict)  # CLIP text embeddings by text
    image: dict[str, np.ndarray] = field(default_factory=dict)  # CLIP image embeddings by image id


@dataclass
class MapPart:
    """The KnowledgeMap's share: the pages' passages, their vectors and the units they were given."""

    recipe: dict[str, Any]
    passages: list[Passage]
    X: np.ndarray
    units: list[str]


@dataclass
class Overlay:
    """A corpus's live overlay, image paths absolute (so they resolve from any corpus root)."""

    folder: Path
    documents: list[Document]
    sources: dict[str, dict[str, Any]]  # resolved file path -> {sha1, where, documents}
    graph: GraphPart | None = None
    map: MapPart | None = None

    @property
    def ids(self) -> set[str]:
        return {d.id for d in self.documents}


def _with_image_paths(doc: Document, path: Callable[[str], str]) -> Document:
    copy = Document.from_dict(doc.to_dict())
    for im in copy.images:
        im.path = path(im.path)
    return copy


def _entry_with_image_paths(entry: Any, path: Callable[[str], str]) -> Any:
    from mmrag.brit.graph import DocEntry  # networkx: only where a graph part is read or written

    raw = entry.to_dict()
    for im in raw["images"]:
        im["path"] = path(im["path"])
    return DocEntry.from_dict(raw)


def _stored(path: str) -> str:
    """An image path as the overlay stores it: images are content-addressed files in its images/."""
    return f"images/{Path(path).name}"


def _save_vectors(path: Path, cache: dict[str, np.ndarray]) -> None:
    """Embeddings by key, in the npz layout ``UnifiedGraph.save`` uses (keys, emb)."""
    keys = sorted(cache)
    buf = _bytes.BytesIO()
    np.savez(buf, keys=np.array(keys, dtype=str),
             emb=np.stack([cache[k] for k in keys]) if keys else np.zeros((0, 1), np.float32))
    io.write_bytes(path, buf.getvalue())


def _load_vectors(path: Path) -> dict[str, np.ndarray]:
    z = np.load(path)
    return {str(k): np.asarray(v, np.float32) for k, v in zip(z["keys"], z["emb"])}


def read_overlay(folder: Path) -> Overlay | None:
    """The overlay in ``folder`` (None when there is none)."""
    folder = Path(folder)
    manifest_file = folder / "manifest.json"
    if not manifest_file.exists():
        return None
    manifest = io.read_json(manifest_file)
    absolute = lambda p: str(folder / p)  # noqa: E731 - the one rebasing rule of this folder
    docs = [_with_image_paths(d, absolute) for d in load_documents(folder)]
    overlay = Overlay(folder, docs, manifest["sources"])
    if manifest.get("brit"):
        b = folder / "brit"
        from mmrag.brit.graph import DocEntry

        entries = [_entry_with_image_paths(DocEntry.from_dict(r), absolute) for r in io.read_jsonl(b / "entries.jsonl")]
        overlay.graph = GraphPart(manifest["brit"], entries, _load_vectors(b / "text_emb.npz"),
                                  _load_vectors(b / "clip_text_emb.npz"), _load_vectors(b / "image_emb.npz"))
    if manifest.get("knowledge_map"):
        k = folder / "knowledge_map"
        rows = io.read_jsonl(k / "passages.jsonl")
        units = [r.pop("unit") for r in rows]
        overlay.map = MapPart(manifest["knowledge_map"], [Passage.from_dict(r) for r in rows],
                              np.load(k / "vectors.npy"), units)
    return overlay


def write_overlay(folder: Path, overlay: Overlay) -> None:
    """The overlay's files into ``folder`` (a fresh folder that already holds its images/)."""
    docs = [_with_image_paths(d, _stored) for d in overlay.documents]
    write_corpus(folder, docs, {}, meta={"source": LIVE})
    manifest = {"sources": overlay.sources, "brit": overlay.graph.recipe if overlay.graph else None,
                "knowledge_map": overlay.map.recipe if overlay.map else None}
    if overlay.graph:
        b = folder / "brit"
        io.write_jsonl(b / "entries.jsonl", [_entry_with_image_paths(e, _stored).to_dict()
                                             for e in sorted(overlay.graph.entries, key=lambda e: e.doc_id)])
        for name, cache in (("text", overlay.graph.text), ("clip_text", overlay.graph.clip_text),
                            ("image", overlay.graph.image)):
            _save_vectors(b / f"{name}_emb.npz", cache)
    if overlay.map:
        k = folder / "knowledge_map"
        io.write_jsonl(k / "passages.jsonl", [{**p.to_dict(), "unit": u}
                                              for p, u in zip(overlay.map.passages, overlay.map.units)])
        buf = _bytes.BytesIO()
        np.save(buf, np.ascontiguousarray(overlay.map.X, np.float32), allow_pickle=False)
        io.write_bytes(k / "vectors.npy", buf.getvalue())
    io.write_json(folder / "manifest.json", manifest)  # last: a folder without it is no overlay


# --------------------------------------------------------------------------- laying it over the stages'
def apply_graph(graph: Any, part: GraphPart) -> list[str]:
    """Replay the live entries over a stage's graph (in place); returns the ids of the corpus pages
    they replaced (a page the corpus gained, since, under a live page's id). The result equals the
    graph built from every page: entries are per page, and the text index is refreshed whole."""
    replaced = [e.doc_id for e in part.entries if e.doc_id in graph.docs]
    for doc_id in replaced:
        graph.delete_document(doc_id)
    graph.text_cache.update(part.text)
    graph.clip_text_cache.update(part.clip_text)
    graph.image_emb.update(part.image)
    for entry in part.entries:
        graph.add_entry(entry)
    graph.refresh_all()  # encodes what the stage's graph now lacks (a rerun merged other edges)
    return replaced


def extend_map(kmap: Any, part: MapPart, card_titles: int) -> Any:
    """A KnowledgeMap with the live passages in the units nearest to them (the stage's centroids,
    no reclustering); the units' sizes and index cards count them. A corpus passage of a page the
    live overlay replaces is left out."""
    from mmrag.mmr2 import knowledge_map as kmaps  # faiss: only when a map is extended

    live_docs = {p.doc_id for p in part.passages}
    keep = [i for i, p in enumerate(kmap.passages) if p.doc_id not in live_docs]
    index = {u: i for i, u in enumerate(kmap.unit_ids)}
    passages = [kmap.passages[i] for i in keep] + list(part.passages)
    X = np.vstack([kmap.X[keep], part.X.astype(np.float32)]) if len(part.passages) else kmap.X[keep]
    primary = np.concatenate([kmap.primary[keep],
                              np.asarray([index[u] for u in kmap.assign(part.X)] if len(part.X) else [],
                                         dtype=np.int64)])
    cards = kmaps.card_titles([p.title for p in passages], primary, card_titles)
    units = [dataclasses.replace(u, size=int((primary == i).sum()), pages=cards.get(i, []))
             for i, u in enumerate(kmap.units)]
    return kmaps.KnowledgeMap(passages, np.ascontiguousarray(X), primary, units)


def merged_documents(base: Sequence[Document], overlay: Overlay | None) -> list[Document]:
    """The corpus's pages and the live ones (a live page replaces a corpus page of its id)."""
    if overlay is None:
        return list(base)
    ids = overlay.ids
    return [d for d in base if d.id not in ids] + list(overlay.documents)


# --------------------------------------------------------------------------- reading the files
@dataclass
class FileResult:
    """What became of one file: its documents, or why it gave none."""

    where: str  # as named on the command line
    source: str  # resolved path (the overlay's key)
    sha1: str = ""
    status: str = "added"  # added | replaced | unchanged | skipped
    before: list[str] = field(default_factory=list)  # the ids its earlier add gave (a re-add reuses them)
    documents: list[Document] = field(default_factory=list)
    report: IngestReport = field(default_factory=IngestReport)

    def reasons(self) -> list[str]:
        """The file's problems as one-liners: kind (what was wrong -> what ingestion did; details)."""
        out = []
        for k in sorted(self.report.problems):
            details = [e.removeprefix(self.where).removeprefix(": ").strip() for e in self.report.examples.get(k, [])]
            details = [d for d in details if d][:2]
            out.append(f"{k} ({PROBLEMS[k][0]} -> {PROBLEMS[k][1]}" + (f"; {'; '.join(details)}" if details else "")
                       + ")")
        return out


def expand(paths: Sequence[str | Path]) -> list[tuple[str, Path]]:
    """(as named, path) per file; a folder stands for the pages under it (.html/.md/.pdf/.zim; its
    images are read through the pages that show them), hidden files aside."""
    out: list[tuple[str, Path]] = []
    for name in paths:
        p = Path(name).expanduser()
        if p.is_dir():
            out += [(str(f), f) for f in sorted(p.rglob("*"))
                    if f.is_file() and f.suffix.lower() in READABLE
                    and not any(part.startswith(".") for part in f.relative_to(p).parts)]
        else:
            out.append((str(name), p))
    return out


def file_sha1(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha1").hexdigest()


def raw_pages(path: Path, where: str, options: ingest.IngestOptions, report: IngestReport) -> list[Any]:
    """The pages of one file as the ``corpora`` stage reads them (problems counted in ``report``)."""
    ext = path.suffix.lower()
    if not path.is_file():
        report.add("unreadable_file", where, "no such file")
        return []
    if ext not in READABLE:
        report.files["other"] += 1
        report.add("unsupported_file", where, f"{ext or 'no extension'}: add .html, .md, .pdf or .zim")
        return []
    try:
        if ext == ".zim":
            report.files["zim"] += 1
            return list(ingest.zim_pages(path, where, report, options.max_zim_articles))
        if ext == ".pdf":
            report.files["pdf"] += 1
            raw = ingest.pdf_pages(path, where, report)
            return [raw] if raw is not None else []
        data = path.read_bytes()
    except OSError as e:
        report.add("unreadable_file", where, type(e).__name__)
        return []
    text = ingest.decode_text(data, where, report)
    report.files["html" if ext in ingest.HTML_EXT else "markdown"] += 1
    title, blocks = (ingest.html_blocks if ext in ingest.HTML_EXT else ingest.markdown_blocks)(text)
    # the folder reader's image resolver: a page's images relative to the page, "/x" to its folder
    return [ingest.RawPage(title=title or path.stem, blocks=blocks, where=where,
                           resolve=ingest._file_resolver(path, path.parent))]


def fingerprint(doc: Document) -> str:
    """A page's content key, as the folder reader's duplicate check computes it (title, section
    texts, image files): the same page under another name is a duplicate."""
    return hashlib.sha1(json.dumps([doc.title, [s.text for s in doc.sections], [i.path for i in doc.images]]
                                   ).encode()).hexdigest()


def ingest_files(files: Sequence[FileResult], paths: dict[str, Path], out_dir: Path,
                 options: ingest.IngestOptions, taken: set[str], seen: dict[str, str]) -> IngestReport:
    """Read each file into documents (``FileResult.documents``; images into ``out_dir/images``), ids
    made from the file name as the folder reader makes them and unique against ``taken`` (a re-added
    file may reuse its own earlier ids), a page whose content ``seen`` already holds skipped as a
    duplicate. Returns the report of the whole batch (decorative images, counted across the files)."""
    batch = IngestReport()
    store = ingest.ImageStore(out_dir, options, batch)
    fresh: set[str] = set()
    for f in files:
        store.report = f.report  # an image's problem is its page's file's
        path = paths[f.source]
        base = slug(path.stem)
        for raw in raw_pages(path, f.where, options, f.report):
            base_id = f"{base}__{slug(raw.where.split('::', 1)[1])}" if "::" in raw.where else base
            doc_id, k = base_id, 2
            while doc_id in fresh or (doc_id in taken and doc_id not in f.before):
                doc_id, k = f"{base_id}_{k}", k + 1
            if doc_id != base_id:
                f.report.add("duplicate_id", raw.where, f"{base_id} -> {doc_id}")
            doc = ingest.assemble(raw, doc_id, store, options, f.report, source=LIVE)
            if doc is None:
                continue
            key = fingerprint(doc)
            if key in seen:
                f.report.add("duplicate_document", raw.where, f"same as {seen[key]}")
                continue
            seen[key] = raw.where
            fresh.add(doc_id)
            f.documents.append(doc)
    store.report = batch
    kept = ingest.drop_decorative([d for f in files for d in f.documents], {}, store, options.max_image_repeats,
                                  batch)
    kept_ids = {d.id for d in kept}
    for f in files:
        f.documents = [d for d in f.documents if d.id in kept_ids]
        if not f.documents:
            f.status = "skipped"
    return batch


# --------------------------------------------------------------------------- what add computes with
@dataclass
class Builders:
    """The stage artifacts ``add`` extends and the models it computes with (opened only when a file
    gave a page). A part whose artifact is absent is None, with the line that says why in ``absent``."""

    options: ingest.IngestOptions
    chunking: Chunking
    card_titles: int
    linkers: tuple[str, ...]
    graph_dir: Path | None = None
    open_graph: Callable[[Path], Any] | None = None  # the saved graph with the encoders it was built with
    graph_recipe: dict[str, Any] = field(default_factory=dict)
    map_dir: Path | None = None
    open_map: Callable[[Path], tuple[Any, Any]] | None = None  # (KnowledgeMap, its text encoder)
    map_recipe: dict[str, Any] = field(default_factory=dict)
    absent: list[str] = field(default_factory=list)


@dataclass
class Added:
    """What one ``add`` did, for the printout."""

    files: list[FileResult]
    batch: IngestReport
    live: int = 0  # live documents after it
    graph: dict[str, int] | None = None  # what the new pages added to the graph (stats deltas)
    units: Counter | None = None  # the new pages' passages per unit
    replaced: list[str] = field(default_factory=list)  # corpus pages a live page replaces

    @property
    def documents(self) -> list[Document]:
        return [d for f in self.files for d in f.documents]


def _graph_part(b: Builders, old: GraphPart | None, kept: list[Document], new: list[Document]
                ) -> tuple[GraphPart, dict[str, int], list[str]]:
    """The graph part of the overlay after this add, what the new pages added, corpus pages replaced."""
    from mmrag.brit.triplets import normalize  # spaCy's helpers: only where a graph is updated

    graph = b.open_graph(b.graph_dir)
    base = (set(graph.text_cache), set(graph.clip_text_cache))
    reuse = old if old is not None and old.recipe == b.graph_recipe else None
    kept_ids = {d.id for d in kept}
    stored = {e.doc_id: e for e in reuse.entries if e.doc_id in kept_ids} if reuse else {}
    replaced = apply_graph(graph, GraphPart(b.graph_recipe, list(stored.values()),
                                            *((reuse.text, reuse.clip_text, reuse.image) if reuse else ())))
    before = graph.stats(b.linkers)
    todo = [d for d in kept if d.id not in stored] + new
    if hasattr(graph.extractor, "prefetch"):  # the LLM extractor reads its sections in one batch
        graph.extractor.prefetch([s.text for d in todo for s in d.sections])
    replaced += [d.id for d in todo if d.id in graph.docs]  # a corpus page (a live one is not applied yet)
    graph.add_documents(todo)
    after = graph.stats(b.linkers)
    delta = {k: after[k] - before[k] for k in ("text_nodes", "text_edges", "components", "images", "links")}
    entries = [graph.docs[i] for i in sorted(kept_ids | {d.id for d in new})]
    images = {im["id"] for e in entries for im in e.images}
    # CLIP name embeddings live while a page with images names them (a replaced page's may not)
    names = {normalize(x) for e in entries if e.images for t in e.triplets for x in (t.subject, t.object)}
    part = GraphPart(b.graph_recipe, entries,
                     {k: v for k, v in graph.text_cache.items() if k not in base[0]},
                     {k: v for k, v in graph.clip_text_cache.items() if k not in base[1] and k in names},
                     {k: v for k, v in graph.image_emb.items() if k in images})
    llm = getattr(graph.extractor, "llm", None)
    if hasattr(llm, "close"):
        llm.close()
    return part, delta, replaced


def _map_part(b: Builders, old: MapPart | None, kept: list[Document], new: list[Document]
              ) -> tuple[MapPart, Counter]:
    """The map part after this add (every live passage assigned to the stage's units) and the new
    pages' passages per unit."""
    from mmrag.mmr2 import knowledge_map as kmaps

    kmap, encoder = b.open_map(b.map_dir)
    kept_ids = {d.id for d in kept}
    reuse = old if old is not None and old.recipe == b.map_recipe else None
    rows = [i for i, p in enumerate(reuse.passages) if p.doc_id in kept_ids] if reuse else []
    reused = {reuse.passages[i].doc_id for i in rows} if reuse else set()
    todo = [d for d in kept if d.id not in reused] + new
    fresh = to_passages(todo, *b.chunking)
    X_new = (kmaps.embed_texts(encoder, [kmaps.passage_text(p) for p in fresh]) if fresh
             else np.zeros((0, kmap.X.shape[1]), np.float32))
    passages = ([reuse.passages[i] for i in rows] if reuse else []) + fresh
    X = np.vstack([reuse.X[rows], X_new]) if reuse else X_new
    units = kmap.assign(X) if len(X) else []
    new_ids = {d.id for d in new}
    counts = Counter(u for p, u in zip(passages, units) if p.doc_id in new_ids)
    return MapPart(b.map_recipe, passages, X, list(units)), counts


def _copy_images(docs: Sequence[Document], into: Path) -> None:
    """The kept pages' image files into the new overlay (hard links where the disk allows)."""
    (into / "images").mkdir(parents=True, exist_ok=True)
    for im in (im for d in docs for im in d.images):
        dst = into / _stored(im.path)
        if not dst.exists():
            try:
                dst.hardlink_to(im.path)
            except OSError:
                shutil.copy2(im.path, dst)


def stale(old: Overlay | None, b: Builders) -> bool:
    """Whether the overlay lacks a part the stages now have, or computed one with other models or
    knobs than params now name: the next ``add`` recomputes it, even with nothing new."""
    if old is None or not old.documents:
        return False
    graph = b.graph_dir is not None and (old.graph is None or old.graph.recipe != b.graph_recipe)
    kmap = b.map_dir is not None and (old.map is None or old.map.recipe != b.map_recipe)
    return graph or kmap


def plan(paths: Sequence[str | Path], old: Overlay | None) -> tuple[list[FileResult], dict[str, Path]]:
    """One result per distinct file named (by resolved path): new, a re-add with other bytes
    (``replaced``), or ``unchanged``; and the path each was named by."""
    sources = old.sources if old else {}
    results: dict[str, FileResult] = {}
    paths_of: dict[str, Path] = {}
    for where, path in expand(paths):
        source = str(path.resolve())
        if source in results:
            continue
        paths_of[source] = path
        f = results[source] = FileResult(where, source, before=list(sources.get(source, {}).get("documents", [])))
        if path.is_file():
            f.sha1 = file_sha1(path)
            if source in sources:
                f.status = "unchanged" if sources[source]["sha1"] == f.sha1 else "replaced"
    return list(results.values()), paths_of


def add(paths: Sequence[str | Path], folder: Path, corpus_dir: Path, b: Builders) -> Added:
    """Add files to the live overlay in ``folder`` over the corpus in ``corpus_dir`` (see the module
    docstring). The overlay is rewritten whole, and only when a page was added or replaced (or a
    part is :func:`stale`); a re-added file that now gives no page keeps the pages it gave before."""
    old = read_overlay(folder)
    files, paths_of = plan(paths, old)
    added = Added(files, IngestReport(), live=len(old.documents) if old else 0)
    todo = [f for f in files if f.status != "unchanged"]
    if not todo and not stale(old, b):
        return added
    old_docs = old.documents if old else []
    base_docs = load_documents(corpus_dir)
    own = {i for f in todo for i in f.before}
    seen = {fingerprint(d): d.id for d in base_docs}
    seen.update({fingerprint(_with_image_paths(d, _stored)): d.id for d in old_docs if d.id not in own})
    taken = {d.id for d in base_docs} | {d.id for d in old_docs}
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{folder.name}.", dir=folder.parent) as scratch:
        added.batch = ingest_files(todo, paths_of, Path(scratch), b.options, taken, seen)
        new = [d for f in todo for d in f.documents]
        if not new and not stale(old, b):
            return added  # nothing read: the overlay stays as it was
        gone = {i for f in todo if f.documents for i in f.before}
        kept = [d for d in old_docs if d.id not in gone]
        with io.atomic_dir(folder) as tmp:
            shutil.copytree(Path(scratch) / "images", tmp / "images", dirs_exist_ok=True)
            _copy_images(kept, tmp)
            new_abs = [_with_image_paths(d, lambda p: str(tmp / p)) for d in new]
            kept_abs = [_with_image_paths(d, lambda p: str(tmp / _stored(p))) for d in kept]
            sources = {s: v for s, v in (old.sources if old else {}).items()
                       if not (set(v["documents"]) & gone)}
            sources.update({f.source: {"sha1": f.sha1, "where": f.where, "documents": [d.id for d in f.documents]}
                            for f in todo if f.documents})
            overlay = Overlay(tmp, kept_abs + new_abs, dict(sorted(sources.items())))
            if b.graph_dir is not None:
                overlay.graph, added.graph, added.replaced = _graph_part(
                    b, old.graph if old else None, kept_abs, new_abs)
            if b.map_dir is not None:
                overlay.map, added.units = _map_part(b, old.map if old else None, kept_abs, new_abs)
            write_overlay(tmp, overlay)
    added.live = len(overlay.documents)
    return added


def reset(folder: Path) -> int:
    """Remove the overlay (one rename, then the files); the number of live documents it held."""
    old = read_overlay(folder)
    if not folder.exists():
        return 0
    gone = folder.with_name(f".{folder.name}.removed")
    if gone.exists():
        shutil.rmtree(gone)
    folder.rename(gone)
    shutil.rmtree(gone)
    return len(old.documents) if old else 0


# --------------------------------------------------------------------------- the printout
def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary(added: Added, corpus: str, folder: str, b: Builders) -> list[str]:
    """What ``add`` prints: each file's pages (sections, images) or why it was skipped, what the
    graph and the map gained, and where the overlay is."""
    if not added.files:
        return ["nothing to add: no .html, .md, .pdf or .zim file among the files named"]
    lines = []
    for f in added.files:
        if f.status == "unchanged":
            lines.append(f"= {f.where}: unchanged since it was added (same bytes): nothing to do")
        elif f.status == "skipped":
            lines.append(f"- {f.where}: skipped: " + ("; ".join(f.reasons()) or "no page with text or an image")
                         + (f" (the {_plural(len(f.before), 'page')} it gave before stay)" if f.before else ""))
        else:
            verb = "replaced" if f.status == "replaced" else "added"
            for d in f.documents:
                lines.append(f"+ {f.where}: {verb} {d.id} ({d.title!r}): {_plural(len(d.sections), 'section')}, "
                             f"{_plural(len(d.images), 'image')}, {_plural(len(d.tables), 'table')}")
            if f.reasons():
                lines.append(f"  {f.where}: " + "; ".join(f.reasons()))
    for line in added.batch.summary()[1:]:
        lines.append(line)
    if added.graph is None and added.units is None:  # the overlay was not rewritten
        return lines
    if added.graph is not None:
        g = added.graph
        lines.append(f"BRIT graph ({'+'.join(b.linkers)}): " + ", ".join(
            f"{g[k]:+d} {word}{'' if abs(g[k]) == 1 else 's'}" for k, word in (
                ("text_nodes", "node"), ("text_edges", "edge"), ("images", "image"), ("links", "image link"),
                ("components", "disjoint graph"))))
    if added.units is not None:
        per = ", ".join(f"{u} x{n}" for u, n in sorted(added.units.items()))
        lines.append(f"KnowledgeMap: {_plural(sum(added.units.values()), 'chunk')} -> {per or 'none'}")
    if added.replaced:
        lines.append(f"the corpus's {', '.join(added.replaced)} replaced by the live page of that id")
    lines += [f"not updated: {why}" for why in b.absent]
    lines.append(f"live overlay {folder}: {_plural(added.live, 'document')}; `bin/ask --corpus {corpus}` "
                 f"answers over them, `bin/py -m mmrag add --reset --corpus {corpus}` removes them")
    return lines


# --------------------------------------------------------------------------- the command line
def graph_recipe(graph_cfg: Any, models: Any) -> dict[str, Any]:
    """What a graph part depends on besides the pages: extractor, its knobs, the encoders."""
    return {"extractor": graph_cfg.extractor, "arguments": graph_cfg.arguments, "si_top": graph_cfg.si_top,
            "extractor_llm": graph_cfg.extractor_llm if graph_cfg.extractor == "llm" else None,
            "spacy": models.spacy, "text_encoder": models.text_encoder, "clip": Path(models.clip).name}


def map_recipe(map_dir: Path, chunking: Chunking) -> dict[str, Any]:
    """What a map part depends on: the map's text encoder (its meta.json) and the chunking."""
    return {"text_encoder": io.read_json(map_dir / "meta.json")["text_encoder"], "chunking": list(chunking)}


def builders(ctx: ask.Context, corpus: str) -> Builders:
    """The stages' artifacts of a corpus and the models they were built with, as params name them.
    Raises :class:`~mmrag.ask.MissingArtifact` when the corpus, or both the graph and the map, are
    absent (the message names the stages to run)."""
    from mmrag.stages.corpora import ingest_options  # the corpora stage's knobs, as it reads them

    p = ctx.params
    corpus_dir = ctx.corpus_dir(corpus)
    chunking = Chunking.of(p.knowledge_map)
    b = Builders(ingest_options(p.corpora.folder), chunking, p.knowledge_map.card_titles,
                 tuple(p.brit_linking.linking))
    try:
        b.graph_dir = ask.brit_graph_dir(ctx, corpus)
        ctx.need_clip()
    except ask.MissingArtifact as e:
        b.graph_dir, b.absent = None, [f"BRIT: {e}"]
    try:
        b.map_dir = ask.knowledge_map_dir(ctx, corpus)
    except ask.MissingArtifact as e:
        b.absent.append(f"MM-R2: {e}")
    if b.graph_dir is None and b.map_dir is None:
        raise ask.MissingArtifact("; ".join(b.absent))
    graph_cfg = dataclasses.replace(p.brit_graph, corpus=corpus)
    b.graph_recipe = graph_recipe(graph_cfg, p.models)

    def open_graph(folder: Path) -> Any:
        ctx.ready()
        from mmrag.brit.graph import load_graph
        from mmrag.stages.brit_graph import load_builders  # the models brit_graph builds with

        with contextlib.redirect_stdout(sys.stderr):
            extractor, enc, _ = load_builders(graph_cfg, p.models, p.base, corpus_dir, p.inference)
            return load_graph(folder, enc, extractor, graph_cfg.si_top)

    def open_map(folder: Path) -> tuple[Any, Any]:
        ctx.ready()
        from mmrag.mmr2.knowledge_map import KnowledgeMap

        return KnowledgeMap.open(folder, allow_network=p.base.allow_network, device=p.base.device)

    b.open_graph = open_graph
    if b.map_dir is not None:
        b.map_recipe, b.open_map = map_recipe(b.map_dir, chunking), open_map
    return b


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """One ``add`` at a time per corpus (a second would overwrite the first's pages)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ask.AskError(f"another `add` is updating {folder}: wait for it, then run this again") from None
        yield


def parser() -> argparse.ArgumentParser:
    ap = ask.OneLineParser(prog="bin/py -m mmrag add",
                     description="Add documents to what bin/ask answers over, without a rebuild (a live overlay "
                                 "in data/live/<corpus>; the stages' outputs stay as they are).")
    ap.add_argument("files", nargs="*", help=".html, .md, .pdf or .zim files, or folders of them")
    ap.add_argument("--corpus", default="world", help="world | wiki | folder")
    ap.add_argument("--reset", action="store_true", help="remove the corpus's live overlay")
    ap.add_argument("--data", help="the data folder (default: data/)")
    ap.add_argument("--params", help="params file (default: the one beside the data folder, else params.yaml)")
    ap.add_argument("-S", "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a params key, as bin/exp -S; repeatable")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 when a file named was added (or already was), 1 when none was, a stage's artifact is
    missing or the models fail to load (the overlay then stays as it was), 2 on bad input."""
    try:
        args = parser().parse_args(argv)
        ask.check_names("brit", args.corpus)
        if args.reset == bool(args.files):
            raise ask.AskError("name the files to add, or --reset (not both)")
        ctx = ask.context(args.data, args.params, args.overrides)
        folder = live_dir(ctx.data, args.corpus)
        with locked(folder):
            if args.reset:
                where = ctx.rel(LIVE, args.corpus)
                existed = folder.exists()
                n = reset(folder)
                print(f"removed the live overlay {where} ({_plural(n, 'document')}): bin/ask answers over the "
                      f"stages' artifacts again" if existed else f"no live overlay in {where}: nothing to remove")
                return 0
            b = builders(ctx, args.corpus)
            done = add(args.files, folder, ctx.corpus_dir(args.corpus), b)
    except ask.AskError as e:
        ask.err(f"error: {e}")
        return 2
    except ask.MissingArtifact as e:
        ask.err(f"error: {e}")
        return 1
    except Exception as e:  # noqa: BLE001 - a model that cannot load: one line, and the overlay is untouched
        ask.err(f"error: add failed, nothing changed: {ask.one_line(e)}")
        return 1
    print("\n".join(summary(done, args.corpus, ctx.rel(LIVE, args.corpus), b)), flush=True)
    return 0 if any(f.status != "skipped" for f in done.files) else 1
