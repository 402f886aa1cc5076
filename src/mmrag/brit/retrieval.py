"""BRIT's bidirectional retrieval over the unified graph (paper §3.2).

1. Query entities: spaCy entities and proper-noun chunks of the question (the paper prompts an
   LLM one-shot; any ``entities(text)`` callable can be passed).
2. Graph filter: a disjoint graph G_d survives when its best node-query similarity reaches the
   threshold (0.75 in the paper, calibrated for its encoder; ours is calibrated on a dev split).
3. PCST: inside each survivor, the top-k nodes and top-k edges (by similarity to the query)
   get prizes k..1, every edge costs ``edge_cost``; an edge whose prize exceeds its cost becomes
   a virtual node carrying the surplus, joined to its endpoints at zero cost (G-Retriever's
   construction), and ``pcst_fast`` returns the tree.
4. Linked context: text->image takes the image linked to the retrieved node most similar to the
   query; image->text takes the top-1 image by query-image similarity, then its linked nodes and
   their triplets.

Images always travel with their captions (as in every system compared here).

What the reader is handed for a retrieved triplet (``text_form``): ``surface``, the fact as the
extractor took it from the page (inflected verb, names as written: the paper feeds the triplets
GPT-4o wrote, in surface form); ``lemma``, the graph's matching form (lemmatised relation; what this
repository fed before, kept as the "before" row); ``sentences``, the sentence of the page the triplet
came from (a stated diagnostic variant, not the paper's BRIT: it hands the reader more than a triplet).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mmrag.brit.graph import GraphView
from mmrag.brit.triplets import Triplet, clean, sentences
from mmrag.schema import Evidence, Step, Trace

TEXT_FORMS = ("surface", "lemma", "sentences")


def source_sentence(t: Triplet, section_text: str) -> str:
    """The sentence of the triplet's section that states it: the first naming both arguments, else
    the first naming the object, else the subject; the triplet's own sentence when none does."""
    sents = sentences(section_text)
    names = [clean(t.subject).lower(), clean(t.object).lower()]
    for need in (names, names[1:], names[:1]):
        for s in sents:
            if all(n and n in s.lower() for n in need):
                return s
    return t.sentence()


def triplet_text(t: Triplet, form: str, section_texts: dict[str, str] | None = None) -> str:
    """What the reader sees of one retrieved triplet under ``form`` (see the module docstring)."""
    if form == "surface":
        return t.sentence()
    if form == "lemma":
        return t.lemma_sentence()
    if form == "sentences":
        return source_sentence(t, (section_texts or {}).get(str(t.section_id), ""))
    raise ValueError(f"text_form {form!r}: choose one of {', '.join(TEXT_FORMS)}")


@dataclass
class Retrieved:
    """What one query retrieved, with provenance for recall and the reader's context."""

    nodes: list[int] = field(default_factory=list)
    edges: list[int] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # triplet sentences and node names
    text_sources: list[str] = field(default_factory=list)  # section id per text ('' if none)
    linked_nodes: list[int] = field(default_factory=list)
    kept_components: int = 0
    query_entities: list[str] = field(default_factory=list)
    pcst_seconds: float = 0.0

    def evidence_ids(self) -> set[str]:
        """Section ids of retrieved triplets plus retrieved image ids."""
        return {s for s in self.text_sources if s} | set(self.images)

    def words(self, captions: dict[str, str]) -> int:
        """Words the reader receives: texts plus the captions of the retrieved images."""
        return sum(len(t.split()) for t in self.texts) + sum(
            len(captions.get(i, "").split()) for i in self.images)


_PCST_OK: bool | None = None


def check_pcst() -> None:
    """Fail loudly if the installed pcst_fast returns corrupted indices (1.0.10 under numpy 2)."""
    global _PCST_OK
    if _PCST_OK is None:
        from pcst_fast import pcst_fast

        verts, _ = pcst_fast(np.array([[0, 1], [1, 2]], np.int64), np.array([2.0, 0.0, 2.0]),
                             np.array([0.5, 0.5]), -1, 1, "gw", 0)
        _PCST_OK = sorted(verts.tolist()) == [0, 1, 2]
    if not _PCST_OK:
        raise RuntimeError("pcst_fast returns wrong vertex indices (pcst_fast 1.0.10 with numpy>=2, "
                           "fraenkel-lab/pcst_fast#16): `pip uninstall pcst_fast && pip install "
                           "pcst-fast2==1.1.0` (same module name), see requirements/base.txt")


def pcst_tree(n_nodes: int, edges: list[tuple[int, int]], node_prize: np.ndarray,
              edge_prize: np.ndarray, edge_cost: float) -> tuple[list[int], list[int]]:
    """PCST on one graph with edge prizes (virtual nodes for prize > cost); (nodes, edge ids)."""
    from pcst_fast import pcst_fast

    check_pcst()
    prizes = list(map(float, node_prize))
    p_edges, costs, origin = [], [], []  # origin: original edge id per pcst edge
    virtual_of: dict[int, int] = {}
    for i, (u, v) in enumerate(edges):
        if edge_prize[i] > edge_cost:
            vid = len(prizes)
            prizes.append(float(edge_prize[i] - edge_cost))
            virtual_of[vid] = i
            p_edges += [(u, vid), (vid, v)]
            costs += [0.0, 0.0]
            origin += [i, i]
        else:
            p_edges.append((u, v))
            costs.append(float(edge_cost - edge_prize[i]))
            origin.append(i)
    if not p_edges:
        best = int(np.argmax(node_prize)) if n_nodes else -1
        return ([best] if best >= 0 and node_prize[best] > 0 else []), []
    verts, chosen = pcst_fast(np.asarray(p_edges, np.int64), np.asarray(prizes, np.float64),
                              np.asarray(costs, np.float64), -1, 1, "gw", 0)
    edge_ids = sorted({origin[j] for j in chosen} | {virtual_of[v] for v in verts if v in virtual_of})
    nodes = {int(v) for v in verts if v < n_nodes}
    for e in edge_ids:
        nodes |= set(edges[e])
    return sorted(nodes), edge_ids


@dataclass
class BritRetriever:
    """Retrieval over one GraphView; encoders are callables returning normalised float32."""

    view: GraphView
    text_encode: Callable[[list[str]], np.ndarray]
    clip: Any
    root: Path
    entities: Callable[[str], list[str]]
    threshold: float
    top_k: int
    edge_cost: float
    max_linked_triplets: int
    directions: tuple[str, ...] = ("t2i", "i2t")
    text_form: str = "surface"  # surface | lemma | sentences: what the reader gets of a triplet
    section_texts: dict[str, str] | None = None  # section id -> text (text_form sentences)
    _image_cache: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def query_vectors(self, question: str, image_path: str | None) -> dict[str, Any]:
        """Text-encoder vectors of the question and its entities; the CLIP query vector."""
        ents = self.entities(question)
        tv = self.text_encode([question] + ents)
        if image_path:
            if image_path not in self._image_cache:
                self._image_cache[image_path] = self.clip.encode_images([self.root / image_path])[0]
            cq = self._image_cache[image_path]
        else:
            cq = self.clip.encode_texts([question])[0]
        return {"entities": ents, "q": tv[0], "ents": tv, "clip": cq}

    def node_scores(self, qv: dict[str, Any]) -> np.ndarray:
        """Best similarity of each node to the question or any of its entities."""
        if not len(self.view.nodes):
            return np.zeros(0, np.float32)
        return (self.view.node_emb @ qv["ents"].T).max(axis=1)

    def retrieve(self, question: str, image_path: str | None = None) -> Retrieved:
        v = self.view
        qv = self.query_vectors(question, image_path)
        out = Retrieved(query_entities=qv["entities"])
        ns = self.node_scores(qv)
        if len(ns):
            best = np.full(int(v.component.max()) + 1, -np.inf)
            np.maximum.at(best, v.component, ns)
            kept = best >= self.threshold
            node_ok = kept[v.component]
            out.kept_components = int(kept.sum())
            self._pcst(out, ns, node_ok, qv)
        if "t2i" in self.directions:
            self._text_to_image(out, ns, qv)
        if "i2t" in self.directions:
            self._image_to_text(out, qv)
        return out

    def _pcst(self, out: Retrieved, ns: np.ndarray, node_ok: np.ndarray, qv: dict[str, Any]) -> None:
        v = self.view
        idx = np.flatnonzero(node_ok)
        if not len(idx):
            return
        prize = np.zeros(len(v.nodes))
        top = idx[np.lexsort((idx, -ns[idx]))][: self.top_k]
        prize[top] = np.arange(len(top), 0, -1)
        e_ok = [i for i, (a, b) in enumerate(v.edges) if node_ok[a]]
        e_prize = np.zeros(len(v.edges))
        if e_ok:
            es = v.edge_emb[e_ok] @ qv["q"]
            order = sorted(range(len(e_ok)), key=lambda j: (-es[j], e_ok[j]))[: self.top_k]
            for rank, j in enumerate(order):
                e_prize[e_ok[j]] = self.top_k - rank
        comps = sorted({int(v.component[i]) for i in np.flatnonzero(prize > 0)} |
                       {int(v.component[v.edges[i][0]]) for i in np.flatnonzero(e_prize > 0)})
        t0 = time.perf_counter()
        for c in comps:
            members = np.flatnonzero(v.component == c)
            local = {int(n): j for j, n in enumerate(members)}
            ce = [i for i, (a, b) in enumerate(v.edges) if a in local]
            nodes, chosen = pcst_tree(len(members), [(local[v.edges[i][0]], local[v.edges[i][1]]) for i in ce],
                                      prize[members], e_prize[ce], self.edge_cost)
            out.nodes += [int(members[j]) for j in nodes]
            out.edges += [ce[j] for j in chosen]
        out.pcst_seconds = time.perf_counter() - t0
        for e in out.edges:
            for t in v.edge_triplets[e]:
                self._add_triplet(out, t)
        edge_nodes = {n for e in out.edges for n in v.edges[e]}
        for n in out.nodes:
            if n not in edge_nodes:
                out.texts.append(v.names[n])
                out.text_sources.append("")

    def _add_triplet(self, out: Retrieved, t: Triplet) -> None:
        """A retrieved triplet into the reader's context, in ``text_form`` (a source sentence that is
        already there is not repeated)."""
        text = triplet_text(t, self.text_form, self.section_texts)
        if self.text_form == "sentences" and text in out.texts:
            return
        out.texts.append(text)
        out.text_sources.append(str(t.section_id))

    def _image_scores(self, qv: dict[str, Any], ids: list[str]) -> np.ndarray:
        pos = {i: k for k, i in enumerate(self.view.images)}
        return self.view.image_emb[[pos[i] for i in ids]] @ qv["clip"]

    def _text_to_image(self, out: Retrieved, ns: np.ndarray, qv: dict[str, Any]) -> None:
        for n in sorted(out.nodes, key=lambda n: (-ns[n], n)):
            imgs = self.view.node_images.get(n, [])
            if imgs:
                s = self._image_scores(qv, imgs)
                pick = imgs[int(np.argmax(s))]
                if pick not in out.images:
                    out.images.append(pick)
                return

    def _image_to_text(self, out: Retrieved, qv: dict[str, Any]) -> None:
        v = self.view
        if not v.images:
            return
        s = v.image_emb @ qv["clip"]
        img = v.images[int(np.argmax(s))]
        if img not in out.images:
            out.images.append(img)
        linked = v.image_nodes.get(img, [])
        out.linked_nodes = list(linked)
        have = set(out.edges)
        inc = [i for i, (a, b) in enumerate(v.edges) if (a in linked or b in linked) and i not in have]
        if inc:
            es = v.edge_emb[inc] @ qv["q"]
            inc = [inc[j] for j in sorted(range(len(inc)), key=lambda j: (-es[j], inc[j]))]
            for e in inc[: self.max_linked_triplets]:
                out.edges.append(e)
                for t in v.edge_triplets[e]:
                    self._add_triplet(out, t)
        covered = {n for e in out.edges for n in v.edges[e]} | set(out.nodes)
        for n in linked:
            if n not in covered:
                out.texts.append(v.names[n])
                out.text_sources.append("")


def to_trace(question_id: str, system: str, query: str, r: Retrieved, captions: dict[str, str],
             answer: str = "", seconds: float = 0.0, meta: dict[str, Any] | None = None) -> Trace:
    """A retrieval (and its answer) as the shared schema.Trace."""
    ev = [Evidence(id=src or "graph-node", kind="triplet", content=t)
          for t, src in zip(r.texts, r.text_sources)]
    ev += [Evidence(id=i, kind="image", content=captions.get(i, "")) for i in r.images]
    steps = [Step(action="retrieve", target="brit-graph", query=query, evidence=ev,
                  summary=f"entities={r.query_entities}; kept graphs={r.kept_components}")]
    if answer:
        steps.append(Step(action="answer", text=answer))
    return Trace(question_id=question_id, system=system, answer=answer, steps=steps,
                 seconds=round(seconds, 4), meta=meta or {})
