"""BRIT's unified image-text graph: disjoint textual graphs plus image nodes linked into them.

Text nodes are entities (keyed by their normalised name, so the same entity on two pages is
one node), text edges carry the triplets that relate two entities, image nodes carry CLIP
embeddings and link edges carry the linkers that made them. The textual graph falls apart
into connected components, the paper's disjoint graphs G_d, which retrieval filters by a
similarity threshold before running PCST inside each survivor.

Everything a document contributes is held in a :class:`DocEntry` (its triplets, caption
entities, images and links), and the graph is the reference-counted sum of the entries. Adding
a document applies its entry; deleting it subtracts the same entry — so incremental updates
are exact (a test compares them with a full rebuild) and no other document is re-read.
Embeddings are cached by text, so an update encodes only names and edges it has never seen.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

import networkx as nx
import numpy as np

from mmrag.brit import linking
from mmrag.brit.triplets import Triplet, extract_document, normalize

TEXT, IMAGE = "text", "image"


class ClipLike(Protocol):
    def encode_images(self, images: list[Any]) -> np.ndarray: ...

    def encode_texts(self, texts: list[str]) -> np.ndarray: ...


@dataclass
class Encoders:
    """What the graph embeds with: a text encoder (nodes, edges), CLIP (images), the corpus root."""

    text: Callable[[list[str]], np.ndarray]
    clip: ClipLike
    root: Path = Path(".")


def sentence_transformer_fn(model: Any, batch_size: int = 64) -> Callable[[list[str]], np.ndarray]:
    """A sentence-transformers model as a normalised float32 encode function."""
    def encode(texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, model.get_sentence_embedding_dimension()), np.float32)
        return np.asarray(model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                       convert_to_numpy=True, show_progress_bar=False), np.float32)
    return encode


@dataclass
class DocEntry:
    """Everything one document contributes to the graph (serialisable, replayable)."""

    doc_id: str
    triplets: list[Triplet]
    caption_entities: dict[str, list[str]]  # image id -> entity names in its caption
    images: list[dict[str, Any]]  # id, path, caption, section_id, page
    links: list[tuple[str, str, str]]  # (image id, node key, linker)

    def to_dict(self) -> dict[str, Any]:
        return {"doc_id": self.doc_id, "triplets": [t.to_dict() for t in self.triplets],
                "caption_entities": self.caption_entities, "images": self.images,
                "links": [list(x) for x in self.links]}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "DocEntry":
        return cls(raw["doc_id"], [Triplet(**t) for t in raw["triplets"]],
                   {k: list(v) for k, v in raw["caption_entities"].items()}, raw["images"],
                   [tuple(x) for x in raw["links"]])  # type: ignore[misc]


def edge_key(u: str, v: str) -> tuple[str, str]:
    """Undirected edge identity."""
    return (u, v) if u <= v else (v, u)


def triplet_text(t: Triplet) -> str:
    """The text an edge's triplet is embedded as (normalised names: order-independent)."""
    return f"{normalize(t.subject)} {t.relation} {normalize(t.object)}"


class UnifiedGraph:
    """The unified graph with add/delete of documents (see the module docstring)."""

    def __init__(self, encoders: Encoders, extractor: Any, si_top: int):
        self.enc, self.extractor, self.si_top = encoders, extractor, si_top
        self.g = nx.Graph()
        self.docs: dict[str, DocEntry] = {}
        self.text_cache: dict[str, np.ndarray] = {}  # text-encoder embeddings by text
        self.clip_text_cache: dict[str, np.ndarray] = {}  # CLIP text embeddings by text
        self.image_emb: dict[str, np.ndarray] = {}  # CLIP image embeddings by image id
        self._deferred = False  # True while replaying a saved graph (caches already filled)

    # ------------------------------------------------------------------ embedding caches
    def _text(self, texts: Iterable[str]) -> None:
        new = sorted(set(texts) - set(self.text_cache))
        if new:
            for t, v in zip(new, self.enc.text(new)):
                self.text_cache[t] = np.asarray(v, np.float32)

    def _clip_text(self, texts: Iterable[str]) -> None:
        new = sorted(set(texts) - set(self.clip_text_cache))
        if new:
            for t, v in zip(new, self.enc.clip.encode_texts(new)):
                self.clip_text_cache[t] = np.asarray(v, np.float32)

    # ------------------------------------------------------------------ building entries
    def _embed_images(self, docs: list[Any]) -> None:
        """CLIP-embed the images of many pages in one batched call."""
        todo = [im for d in docs for im in d.images if im.id not in self.image_emb]
        missing = [im.path for im in todo if not (self.enc.root / im.path).exists()]
        if missing:
            raise FileNotFoundError(f"{len(missing)} image file(s) missing under {self.enc.root} "
                                    f"(first: {missing[0]}); check the corpus folder passed as "
                                    f"Encoders.root")
        if todo:
            embs = self.enc.clip.encode_images([self.enc.root / im.path for im in todo])
            for im, v in zip(todo, embs):
                self.image_emb[im.id] = np.asarray(v, np.float32)

    def entry_for(self, doc: Any, triplets: list[Triplet] | None = None) -> DocEntry:
        """Extract, embed and link one schema.Document (touches no other document)."""
        if triplets is None:
            triplets = extract_document(self.extractor, doc)
        caption_entities = {im.id: self.extractor.entities(im.caption) if im.caption else []
                            for im in doc.images}
        images = [{"id": im.id, "path": im.path, "caption": im.caption,
                   "section_id": im.section_id, "page": im.page} for im in doc.images]
        self._embed_images([doc])
        return DocEntry(doc.id, triplets, caption_entities, images, self._links(triplets, caption_entities, images))

    def _links(self, triplets: list[Triplet], caption_entities: dict[str, list[str]],
               images: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
        by_page: dict[object, list[str]] = {}
        by_section: dict[object, list[str]] = {}
        for t in triplets:
            for name in (t.subject, t.object):
                by_page.setdefault(t.page, []).append(normalize(name))
                by_section.setdefault(t.section_id, []).append(normalize(name))
        doc_nodes = sorted({normalize(n) for t in triplets for n in (t.subject, t.object)})
        links: list[tuple[str, str, str]] = []
        for im in images:
            links += linking.caption_links(im["id"], [normalize(n) for n in caption_entities[im["id"]]])
            links += linking.layout_links(im["id"], by_page, im["page"], "LP")
            links += linking.layout_links(im["id"], by_section, im["section_id"], "LS")
        if images and doc_nodes:
            self._clip_text(doc_nodes)
            ids = [im["id"] for im in images]
            links += linking.similarity_links(
                ids, np.stack([self.image_emb[i] for i in ids]), doc_nodes,
                np.stack([self.clip_text_cache[n] for n in doc_nodes]), self.si_top)
        return links

    # ------------------------------------------------------------------ applying entries
    def _node(self, key: str, name: str, ref: tuple[str, str], sign: int) -> None:
        if sign > 0:
            if key not in self.g:
                self.g.add_node(key, kind=TEXT, names=Counter(), refs=Counter())
            d = self.g.nodes[key]
            d["names"][name] += 1
            d["refs"][ref] += 1
        else:
            d = self.g.nodes[key]
            d["names"][name] -= 1
            d["refs"][ref] -= 1
            d["names"] = +d["names"]
            d["refs"] = +d["refs"]

    def _apply(self, e: DocEntry, sign: int) -> None:
        touched_nodes: set[str] = set()
        touched_edges: set[tuple[str, str]] = set()
        old_texts: set[str] = set()
        for t in e.triplets:
            k = edge_key(normalize(t.subject), normalize(t.object))
            if k not in touched_edges and self.g.has_edge(*k):
                old_texts.add(self.edge_text(*k))
            touched_edges.add(k)
        for t in e.triplets:
            s, o = normalize(t.subject), normalize(t.object)
            self._node(s, t.subject, (e.doc_id, "section"), sign)
            self._node(o, t.object, (e.doc_id, "section"), sign)
            touched_nodes |= {s, o}
            k = edge_key(s, o)
            if sign > 0:
                if not self.g.has_edge(*k):
                    self.g.add_edge(*k, kind="rel", triplets=Counter())
                self.g.edges[k]["triplets"][t] += 1
            else:
                c = self.g.edges[k]["triplets"]
                c[t] -= 1
                self.g.edges[k]["triplets"] = +c
                if not self.g.edges[k]["triplets"]:
                    self.g.remove_edge(*k)
        for img, names in e.caption_entities.items():
            for n in names:
                self._node(normalize(n), n, (e.doc_id, "caption"), sign)
                touched_nodes.add(normalize(n))
        for im in e.images:
            if sign > 0:
                self.g.add_node(f"img:{im['id']}", kind=IMAGE, doc_id=e.doc_id, **im)
        for img, node, linker in e.links:
            k = edge_key(f"img:{img}", node)
            if sign > 0:
                if not self.g.has_edge(*k):
                    self.g.add_edge(*k, kind="link", links=Counter())
                self.g.edges[k]["links"][(linker, e.doc_id)] += 1
        if sign < 0:
            for im in e.images:
                self.g.remove_node(f"img:{im['id']}")  # drops its link edges too
                self.image_emb.pop(im["id"], None)
            for n in touched_nodes:
                if n in self.g and not self.g.nodes[n]["refs"]:
                    self.g.remove_node(n)
        self._refresh(touched_nodes, touched_edges, old_texts, e, sign)

    def _refresh(self, nodes: set[str], edges: set[tuple[str, str]], old_texts: set[str],
                 e: DocEntry, sign: int) -> None:
        """Encode what the update made new; forget what it made dead (only touched items)."""
        if self._deferred:
            return
        live_nodes = {n for n in nodes if n in self.g}
        new_texts = {self.edge_text(*k) for k in edges if self.g.has_edge(*k)}
        self._text(sorted(live_nodes | new_texts))
        for t in (old_texts - new_texts) | (nodes - live_nodes):
            self.text_cache.pop(t, None)
        if sign < 0 and e.images:  # CLIP name embeddings live while a page with images uses them
            still = {n for d in self.docs.values() if d.images for t in d.triplets
                     for n in (normalize(t.subject), normalize(t.object))}
            for n in {normalize(x) for t in e.triplets for x in (t.subject, t.object)} - still:
                self.clip_text_cache.pop(n, None)

    # ------------------------------------------------------------------ public API
    def add_documents(self, docs: Iterable[Any]) -> list[str]:
        """Add (or replace) documents; returns their ids. Encoders run batched over all of them."""
        docs = list(docs)
        for doc in docs:
            if doc.id in self.docs:
                self.delete_document(doc.id)
        triplets = {d.id: extract_document(self.extractor, d) for d in docs}
        self._embed_images(docs)
        self._clip_text(normalize(n) for d in docs if d.images for t in triplets[d.id]
                        for n in (t.subject, t.object))
        self._deferred = True
        try:
            for doc in docs:
                self.add_entry(self.entry_for(doc, triplets[doc.id]))
        finally:
            self._deferred = False
        self.refresh_all()
        return [d.id for d in docs]

    def refresh_all(self) -> None:
        """Bring the text index in line with the whole graph (one batched encoder call)."""
        nodes = [n for n, d in self.g.nodes(data=True) if d["kind"] == TEXT]
        edges = [self.edge_text(u, v) for u, v, d in self.g.edges(data=True) if d["kind"] == "rel"]
        live = set(nodes) | set(edges)
        self._text(live)
        for t in [t for t in self.text_cache if t not in live]:
            del self.text_cache[t]

    def add_entry(self, entry: DocEntry) -> None:
        """Apply a precomputed entry (used when loading a saved graph)."""
        if entry.doc_id in self.docs:
            raise ValueError(f"document {entry.doc_id} is already in the graph; delete it first")
        self.docs[entry.doc_id] = entry
        self._apply(entry, +1)

    def delete_document(self, doc_id: str) -> None:
        """Remove a document's nodes, edges, images and links (shared entities stay)."""
        if doc_id not in self.docs:
            raise KeyError(f"document {doc_id} is not in the graph")
        self._apply(self.docs.pop(doc_id), -1)

    def edge_text(self, u: str, v: str) -> str:
        """An edge's text: its distinct triplets as sentences, sorted (order-independent)."""
        return "; ".join(sorted({triplet_text(t) for t in self.g.edges[u, v]["triplets"]}))

    def name(self, key: str) -> str:
        """Display name of a text node: its most frequent surface form (ties: alphabetical)."""
        names = self.g.nodes[key]["names"]
        return sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]

    def snapshot(self) -> dict[str, Any]:
        """Canonical contents (nodes, edges, links, index keys) for comparing two graphs."""
        nodes = {n: (d["kind"], sorted(d.get("refs", Counter()).items()), sorted(d.get("names", Counter()).items()))
                 for n, d in self.g.nodes(data=True)}
        edges = {edge_key(u, v): (d["kind"], sorted((t.to_dict().items() for t in d["triplets"].elements()), key=str)
                                  if d["kind"] == "rel" else sorted(d["links"].items()))
                 for u, v, d in self.g.edges(data=True)}
        return {"nodes": nodes, "edges": edges, "text_index": sorted(self.text_cache),
                "clip_text_index": sorted(self.clip_text_cache), "images": sorted(self.image_emb)}

    def stats(self, linkers: Iterable[str] = linking.LINKERS) -> dict[str, Any]:
        """Graph statistics of the view a linker set gives."""
        v = self.view(linkers)
        n_comp = len(set(v.component.tolist())) if len(v.component) else 0
        linked = sum(1 for i in v.image_nodes if v.image_nodes[i])
        return {"text_nodes": len(v.nodes), "text_edges": len(v.edges), "components": n_comp,
                "images": len(v.images), "images_linked": linked,
                "links": sum(len(x) for x in v.image_nodes.values()),
                "mean_links_per_image": round(sum(len(x) for x in v.image_nodes.values()) / max(len(v.images), 1), 3)}

    def view(self, linkers: Iterable[str]) -> "GraphView":
        """The graph as retrieval sees it under a linker combination (arrays + adjacency)."""
        return GraphView.build(self, linking.check_linkers(linkers))

    # ------------------------------------------------------------------ persistence
    def save(self, folder: str | Path) -> None:
        """Entries as JSON lines plus the embedding caches (npz); ``load`` replays them."""
        from mmrag.io import atomic_path, write_jsonl

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        write_jsonl(folder / "entries.jsonl", [self.docs[d].to_dict() for d in sorted(self.docs)])
        for name, cache in (("text", self.text_cache), ("clip_text", self.clip_text_cache),
                            ("image", self.image_emb)):
            keys = sorted(cache)
            with atomic_path(folder / f"{name}_emb.npz") as tmp:
                with open(tmp, "wb") as fh:
                    np.savez(fh, keys=np.array(keys, dtype=object).astype(str),
                             emb=np.stack([cache[k] for k in keys]) if keys else np.zeros((0, 1), np.float32))

    @classmethod
    def load(cls, folder: str | Path, encoders: Encoders, extractor: Any, si_top: int) -> "UnifiedGraph":
        from mmrag.io import read_jsonl

        folder = Path(folder)
        graph = cls(encoders, extractor, si_top)
        for name, attr in (("text", "text_cache"), ("clip_text", "clip_text_cache"), ("image", "image_emb")):
            z = np.load(folder / f"{name}_emb.npz")
            getattr(graph, attr).update({str(k): v for k, v in zip(z["keys"], z["emb"])})
        graph._deferred = True
        for raw in read_jsonl(folder / "entries.jsonl"):
            graph.add_entry(DocEntry.from_dict(raw))
        graph._deferred = False
        return graph


@dataclass
class GraphView:
    """Arrays for retrieval under one linker set (text nodes, text edges, images, links)."""

    linkers: tuple[str, ...]
    nodes: list[str]
    names: list[str]
    node_emb: np.ndarray
    component: np.ndarray  # component id per node
    edges: list[tuple[int, int]]
    edge_emb: np.ndarray
    edge_triplets: list[list[Triplet]]
    images: list[str]
    image_emb: np.ndarray
    image_doc: list[str]
    image_nodes: dict[str, list[int]]  # image id -> linked node indices
    node_images: dict[int, list[str]] = field(default_factory=dict)
    node_sections: dict[int, set[str]] = field(default_factory=dict)  # provenance per node

    @classmethod
    def build(cls, graph: UnifiedGraph, linkers: tuple[str, ...]) -> "GraphView":
        g = graph.g
        keep = []
        for n, d in g.nodes(data=True):
            if d["kind"] != TEXT:
                continue
            sources = {src for (_, src) in d["refs"]}
            if "section" in sources or ("CA" in linkers and "caption" in sources):
                keep.append(n)
        keep.sort()
        index = {n: i for i, n in enumerate(keep)}
        dim = next(iter(graph.text_cache.values())).shape[0] if graph.text_cache else 1
        node_emb = np.stack([graph.text_cache[n] for n in keep]) if keep else np.zeros((0, dim), np.float32)
        rel = sorted(edge_key(u, v) for u, v, d in g.edges(data=True) if d["kind"] == "rel")
        edges = [(index[u], index[v]) for u, v in rel]
        edge_emb = (np.stack([graph.text_cache[graph.edge_text(u, v)] for u, v in rel])
                    if rel else np.zeros((0, dim), np.float32))
        edge_triplets = [sorted(set(g.edges[u, v]["triplets"]),
                                key=lambda t: (t.sentence(), t.doc_id, str(t.section_id)))
                         for u, v in rel]
        sub = nx.Graph()
        sub.add_nodes_from(range(len(keep)))
        sub.add_edges_from(edges)
        component = np.zeros(len(keep), dtype=np.int64)
        for cid, comp in enumerate(sorted(nx.connected_components(sub), key=min)):
            component[list(comp)] = cid
        images = sorted(n[4:] for n, d in g.nodes(data=True) if d["kind"] == IMAGE)
        cdim = next(iter(graph.image_emb.values())).shape[0] if graph.image_emb else 1
        image_emb = np.stack([graph.image_emb[i] for i in images]) if images else np.zeros((0, cdim), np.float32)
        image_nodes: dict[str, list[int]] = {i: [] for i in images}
        node_images: dict[int, list[str]] = {}
        for i in images:
            for nb in sorted(g.neighbors(f"img:{i}")):
                linkers_here = {lk for (lk, _) in g.edges[f"img:{i}", nb]["links"]}
                if nb in index and linkers_here & set(linkers):
                    image_nodes[i].append(index[nb])
                    node_images.setdefault(index[nb], []).append(i)
        node_sections: dict[int, set[str]] = {}
        for (a, b), ts in zip(edges, edge_triplets):
            for t in ts:
                for x in (a, b):
                    node_sections.setdefault(x, set()).add(str(t.section_id))
        return cls(linkers, keep, [graph.name(n) for n in keep], node_emb, component, edges,
                   edge_emb, edge_triplets, images, image_emb,
                   [g.nodes[f"img:{i}"]["doc_id"] for i in images], image_nodes, node_images,
                   node_sections)


def graphs_equal(a: UnifiedGraph, b: UnifiedGraph) -> list[str]:
    """Differences between two graphs' contents and indexes (empty list: equal)."""
    sa, sb = a.snapshot(), b.snapshot()
    diffs = [k for k in sa if sa[k] != sb[k]]
    for cache in ("text_cache", "clip_text_cache", "image_emb"):
        ca, cb = getattr(a, cache), getattr(b, cache)
        if set(ca) == set(cb) and any(not np.allclose(ca[k], cb[k], atol=1e-5) for k in ca):
            diffs.append(cache)
    return diffs


def replace(entry: DocEntry, **kw: Any) -> DocEntry:
    """A copy of an entry with some fields changed (tests, what-if analyses)."""
    return dataclasses.replace(entry, **kw)


def build_graph(documents: list[Any], enc: Encoders, extractor: Any, si_top: int) -> UnifiedGraph:
    """A full build of schema.Documents (every page added in order)."""
    g = UnifiedGraph(enc, extractor, si_top=si_top)
    if hasattr(extractor, "prefetch"):
        extractor.prefetch([s.text for d in documents for s in d.sections])
    g.add_documents(documents)
    return g


def load_graph(folder: Path, enc: Encoders, extractor: Any, si_top: int) -> UnifiedGraph:
    """A graph ``brit_graph`` saved (its entries replayed over its embedding caches)."""
    folder = Path(folder)
    if not (folder / "entries.jsonl").exists():
        raise FileNotFoundError(f"{folder} has no saved graph: run `dvc repro brit_graph`")
    return UnifiedGraph.load(folder, enc, extractor, si_top)
