"""The KnowledgeMap: a corpus pre-structured into a few named units, each with its own index.

MM-R2 routes before it retrieves, so the corpus must first be cut into *knowledge units*:

1. passages are embedded (normalised) and reduced (PCA) — HDBSCAN on raw 384-d vectors is slow;
2. a configuration search over HDBSCAN (reduction dims, min cluster size, min samples,
   selection method) scores each clustering by semantic coherence, balance, coverage and
   retrieval utility on a dev split, and keeps the best;
3. every passage gets one primary unit (noise goes to the nearest unit centroid), and a new
   passage is assigned later the same way, without reclustering;
4. each unit gets a title and a description (class-based TF-IDF keywords plus representative
   passages by default; an LLM writer optionally), then a quality check merges tiny units and
   splits oversized or incoherent ones, reporting each change;
5. one FAISS ``IndexFlatIP`` per unit, plus one flat index over everything (the baseline).
"""

from __future__ import annotations

import io
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mmrag.io import read_json, read_jsonl, write_bytes, write_json, write_jsonl
from mmrag.models.registry import load_text_encoder
from mmrag.schema import Passage


# --------------------------------------------------------------------------- embedding
def embed_texts(encoder: Any, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """Normalised float32 embeddings (the contract for every text index here)."""
    emb = encoder.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                         convert_to_numpy=True, show_progress_bar=False)
    return np.ascontiguousarray(emb, dtype=np.float32)


def passage_text(p: Passage) -> str:
    """What gets embedded: the chunk (it already starts with the page title when it is the head)."""
    return p.text if p.text.startswith(p.title) else f"{p.title}. {p.text}"


# --------------------------------------------------------------------------- clustering
@dataclass(frozen=True)
class ClusterConfig:
    """One point of the HDBSCAN configuration search."""

    dims: int  # PCA components (0 = no reduction)
    min_cluster_size: int
    min_samples: int
    selection: str  # eom | leaf

    @property
    def name(self) -> str:
        return f"pca{self.dims}-mcs{self.min_cluster_size}-ms{self.min_samples}-{self.selection}"


def reduce(X: np.ndarray, dims: int, seed: int) -> np.ndarray:
    """PCA to ``dims`` components as float64 (what HDBSCAN wants); dims=0 keeps X."""
    if dims <= 0 or dims >= X.shape[1]:
        return X.astype(np.float64)
    from sklearn.decomposition import PCA  # heavy: scikit-learn imports in ~1 s

    return PCA(n_components=dims, svd_solver="full", random_state=seed).fit_transform(
        X.astype(np.float64))


def hdbscan_labels(Z: np.ndarray, cfg: ClusterConfig) -> np.ndarray:
    """HDBSCAN labels (-1 = noise) for reduced vectors Z."""
    import hdbscan  # heavy: hdbscan imports scikit-learn (~1 s)

    model = hdbscan.HDBSCAN(min_cluster_size=cfg.min_cluster_size, min_samples=cfg.min_samples,
                            cluster_selection_method=cfg.selection, core_dist_n_jobs=1)
    return model.fit_predict(Z).astype(np.int64)


def centroids(X: np.ndarray, labels: np.ndarray) -> tuple[list[int], np.ndarray]:
    """(cluster ids, normalised mean vectors) for every non-noise label."""
    ids = sorted(int(c) for c in set(labels.tolist()) if c >= 0)
    if not ids:
        return [], np.zeros((0, X.shape[1]), dtype=np.float32)
    C = np.stack([X[labels == c].mean(0) for c in ids]).astype(np.float32)
    C /= np.linalg.norm(C, axis=1, keepdims=True) + 1e-12
    return ids, C


def nearest_centroid(X: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Index of the most similar centroid for each row (cosine; rows and centroids normalised)."""
    return np.argmax(X @ C.T, axis=1)


def fill_noise(X: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Every passage gets one primary unit: noise goes to its nearest cluster centroid."""
    ids, C = centroids(X, labels)
    if not ids:
        return np.zeros(len(labels), dtype=np.int64)
    out = labels.copy()
    noise = labels < 0
    if noise.any():
        out[noise] = np.asarray(ids)[nearest_centroid(X[noise], C)]
    return out


def relabel(labels: np.ndarray) -> np.ndarray:
    """Labels 0..K-1 ordered by decreasing size (ties by old id), so unit ids are stable."""
    sizes = {c: int((labels == c).sum()) for c in set(labels.tolist())}
    order = sorted(sizes, key=lambda c: (-sizes[c], c))
    mapping = {c: i for i, c in enumerate(order)}
    return np.asarray([mapping[c] for c in labels.tolist()], dtype=np.int64)


# --------------------------------------------------------------------------- scoring
def coherence(X: np.ndarray, labels: np.ndarray) -> float:
    """Mean cosine of members to their unit centroid (noise excluded): how on-topic a unit is."""
    ids, C = centroids(X, labels)
    if not ids:
        return 0.0
    sims = [float((X[labels == c] @ C[i]).mean()) for i, c in enumerate(ids)]
    sizes = [int((labels == c).sum()) for c in ids]
    return float(np.average(sims, weights=sizes))


def balance(labels: np.ndarray) -> float:
    """Normalised entropy of unit sizes (1 = equal sizes; 0 = one unit or none)."""
    sizes = np.bincount(labels[labels >= 0]) if (labels >= 0).any() else np.zeros(0)
    sizes = sizes[sizes > 0]
    if len(sizes) < 2:
        return 0.0
    p = sizes / sizes.sum()
    return float(-(p * np.log(p)).sum() / math.log(len(sizes)))


def coverage(labels: np.ndarray) -> float:
    """Share of passages HDBSCAN placed in a cluster (not noise)."""
    return float((labels >= 0).mean()) if len(labels) else 0.0


@dataclass
class DevQueries:
    """A dev split for retrieval utility: query vectors and the passage indices that answer them."""

    vectors: np.ndarray
    gold: list[list[int]]


def routed_recall(X: np.ndarray, primary: np.ndarray, dev: DevQueries, k: int,
                  n_units: int = 1) -> float | None:
    """Hit@k when each query searches only its top-``n_units`` units by centroid similarity
    (None without dev questions: a user's folder has no gold passages to hit)."""
    if not len(dev.gold):
        return None
    ids, C = centroids(X, primary)
    route = np.argsort(-(dev.vectors @ C.T), axis=1)[:, :n_units]
    sims = dev.vectors @ X.T
    hits = 0
    for q, gold in enumerate(dev.gold):
        allowed = np.isin(primary, np.asarray(ids)[route[q]])
        s = np.where(allowed, sims[q], -np.inf)
        top = np.argsort(-s, kind="stable")[:k]
        hits += bool(set(top.tolist()) & set(gold))
    return hits / len(dev.gold)


def flat_recall(X: np.ndarray, dev: DevQueries, k: int) -> float | None:
    """Hit@k over the whole corpus: the ceiling routing can at best keep (None without dev)."""
    if not len(dev.gold):
        return None
    top = np.argsort(-(dev.vectors @ X.T), axis=1, kind="stable")[:, :k]
    return float(np.mean([bool(set(t.tolist()) & set(g)) for t, g in zip(top, dev.gold)]))


@dataclass(frozen=True)
class SearchWeights:
    """Weights of the four criteria in a configuration's score (params ``knowledge_map.w_*``)."""

    coherence: float
    balance: float
    coverage: float
    utility: float


def search_configs(X: np.ndarray, dev: DevQueries, dims: Sequence[int],
                   min_cluster_sizes: Sequence[int], min_samples: Sequence[int],
                   selections: Sequence[str], *, weights: SearchWeights, min_units: int,
                   max_units: int, k: int, seed: int,
                   progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Score every HDBSCAN configuration; rows sorted best first (the chosen one is rows[0]).

    Coherence is measured on the units as they will be used (noise joined to its nearest
    unit, so a clustering that calls most passages noise pays for it) and rescaled to [0, 1]
    over the grid (raw cosines sit in a narrow band); balance and coverage on HDBSCAN's labels;
    configurations with fewer than ``min_units`` or more than ``max_units`` units are kept
    in the table but marked invalid and ranked last. Without dev questions (a corpus with no
    gold passages) utility is None and the score averages the other three criteria.
    """
    reduced = {d: reduce(X, d, seed) for d in sorted(set(dims))}
    has_dev = len(dev.gold) > 0
    w_utility = weights.utility if has_dev else 0.0
    rows = []
    for d, mcs, ms, sel in itertools.product(sorted(set(dims)), min_cluster_sizes, min_samples,
                                             selections):
        cfg = ClusterConfig(d, int(mcs), int(ms), sel)
        labels = hdbscan_labels(reduced[d], cfg)
        n_units = int(len(set(labels.tolist()) - {-1}))
        primary = fill_noise(X, labels)
        row = {"config": cfg.name, "dims": d, "min_cluster_size": cfg.min_cluster_size,
               "min_samples": cfg.min_samples, "selection": sel, "units": n_units,
               "coherence": coherence(X, primary), "balance": balance(labels),
               "coverage": coverage(labels),
               "utility": (routed_recall(X, primary, dev, k=k) if n_units else 0.0) if has_dev
               else None,
               "valid": min_units <= n_units <= max_units, "_labels": labels}
        rows.append(row)
        if progress:
            progress(f"{cfg.name}: {n_units} units, coverage {row['coverage']:.2f}")
    coh = np.asarray([r["coherence"] for r in rows])
    lo, hi = float(coh.min()), float(coh.max())
    for r in rows:
        r["coherence_scaled"] = (r["coherence"] - lo) / (hi - lo) if hi > lo else 1.0
        total = (weights.coherence * r["coherence_scaled"] + weights.balance * r["balance"]
                 + weights.coverage * r["coverage"] + w_utility * (r["utility"] or 0.0))
        r["score"] = total / (weights.coherence + weights.balance + weights.coverage + w_utility)
    rows.sort(key=lambda r: (not r["valid"], -round(r["score"], 9), r["config"]))
    for i, r in enumerate(rows):
        r["rank"] = i + 1
    return rows


# --------------------------------------------------------------------------- metadata
_TOKEN = re.compile(r"(?u)\b[a-zA-Z][a-zA-Z\-]{2,}\b")


def ctfidf_keywords(texts: Sequence[str], labels: np.ndarray, top_n: int,
                    ) -> dict[int, list[str]]:
    """Class-based TF-IDF: the words frequent in one unit and rare across units (BERTopic's idea)."""
    from sklearn.feature_extraction.text import CountVectorizer  # heavy: scikit-learn imports in ~1 s

    ids = sorted(set(labels.tolist()))
    joined = [" ".join(t for t, label in zip(texts, labels) if label == c) for c in ids]
    vec = CountVectorizer(stop_words="english", token_pattern=_TOKEN.pattern, lowercase=True,
                          min_df=1)
    tf = vec.fit_transform(joined).astype(np.float64).toarray()
    vocab = np.asarray(vec.get_feature_names_out())
    if len(ids) >= 3:  # a word in every unit (a section heading, say) names none of them
        spread = (tf > 0).all(axis=0)
        tf, vocab = tf[:, ~spread], vocab[~spread]
    tf_norm = tf / (tf.sum(1, keepdims=True) + 1e-12)
    avg_words = tf.sum() / max(len(ids), 1)
    idf = np.log(1.0 + avg_words / (tf.sum(0) + 1e-12))
    w = tf_norm * idf
    out = {}
    for row, c in enumerate(ids):
        order = np.lexsort((vocab, -w[row]))[:top_n]
        out[c] = [str(vocab[i]) for i in order if w[row, i] > 0]
    return out


def representatives(X: np.ndarray, labels: np.ndarray, n: int) -> dict[int, list[int]]:
    """Indices of the passages closest to each unit's centroid."""
    ids, C = centroids(X, labels)
    out = {}
    for i, c in enumerate(ids):
        members = np.flatnonzero(labels == c)
        sims = X[members] @ C[i]
        out[c] = members[np.argsort(-sims, kind="stable")[:n]].tolist()
    return out


def keyword_metadata(keywords: list[str]) -> tuple[str, str]:
    """(title, description) written from c-TF-IDF keywords."""
    title = " / ".join(k.capitalize() for k in keywords[:3]) or "Miscellaneous"
    return title, f"Passages about {', '.join(keywords[:8])}."


def card_titles(titles: Sequence[str], labels: np.ndarray, n: int) -> dict[int, list[str]]:
    """Up to ``n`` page titles per unit, most passages first: the unit's index card, so that an
    agent who knows the entity's name can route by it instead of guessing from keywords."""
    out: dict[int, list[str]] = {}
    for c in sorted(set(labels.tolist())):
        counts = Counter(t for t, label in zip(titles, labels.tolist()) if label == c and t)
        out[c] = [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]
    return out


def llm_metadata(llm: Any, keywords: list[str], rep_texts: list[str],
                 max_new_tokens: int = 64) -> tuple[str, str] | None:
    """(title, description) by an LLM, or None when its reply does not parse (caller falls back)."""
    prompt = ("You name a cluster of encyclopedia passages.\nKeywords: " + ", ".join(keywords)
              + "\nExamples:\n" + "\n".join(f"- {t[:200]}" for t in rep_texts)
              + "\nReply exactly as two lines:\nTitle: <3-6 words>\nDescription: <one sentence>")
    text = llm.generate([[{"role": "user", "content": prompt}]], max_new_tokens=max_new_tokens)[0].text
    t = re.search(r"Title:\s*(.+)", text)
    d = re.search(r"Description:\s*(.+)", text)
    if not t or not d or not t.group(1).strip() or not d.group(1).strip():
        return None
    return t.group(1).strip()[:80], d.group(1).strip()[:300]


# --------------------------------------------------------------------------- quality check
def quality_check(X: np.ndarray, labels: np.ndarray, min_size: int, max_share: float,
                  min_coherence: float, seed: int, rounds: int = 3,
                  ) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Merge units below ``min_size`` into their nearest unit; split (2-means) units above
    ``max_share`` of the corpus or below ``min_coherence``, for up to ``rounds`` passes.
    Returns new labels and the changes."""
    from sklearn.cluster import KMeans  # heavy: scikit-learn imports in ~1 s

    labels = labels.copy()
    changes: list[dict[str, Any]] = []
    # merge tiny units, smallest first, into the unit with the most similar centroid
    while True:
        ids, C = centroids(X, labels)
        sizes = {c: int((labels == c).sum()) for c in ids}
        tiny = sorted((c for c in ids if sizes[c] < min_size), key=lambda c: (sizes[c], c))
        if not tiny or len(ids) < 3:
            break
        c = tiny[0]
        i = ids.index(c)
        sims = C @ C[i]
        sims[i] = -np.inf
        into = ids[int(np.argmax(sims))]
        labels[labels == c] = into
        changes.append({"change": "merge", "unit": c, "into": into, "size": sizes[c],
                        "reason": f"size {sizes[c]} < {min_size}"})
    # split oversized or incoherent units, a few passes (a half can still be oversized)
    next_id = int(labels.max()) + 1
    kept: set[int] = set()
    for _ in range(rounds):
        split_any = False
        for c in sorted(set(labels.tolist()) - kept):
            members = np.flatnonzero(labels == c)
            if len(members) < 2 * max(min_size, 2):
                continue
            _, Cc = centroids(X[members], np.zeros(len(members), dtype=np.int64))
            coh = float((X[members] @ Cc[0]).mean())
            share = len(members) / len(labels)
            reason = (f"share {share:.2f} > {max_share}" if share > max_share else
                      f"coherence {coh:.3f} < {min_coherence}" if coh < min_coherence else None)
            if reason is None:
                continue
            part = KMeans(n_clusters=2, n_init=4, random_state=seed).fit(X[members]).labels_
            if min(int((part == 0).sum()), int((part == 1).sum())) < min_size:
                changes.append({"change": "keep", "unit": c, "into": None, "size": len(members),
                                "reason": reason + "; a split would leave a part below min size"})
                kept.add(c)
                continue
            labels[members[part == 1]] = next_id
            changes.append({"change": "split", "unit": c, "into": next_id, "size": len(members),
                            "reason": reason})
            next_id += 1
            split_any = True
        if not split_any:
            break
    return labels, changes


# --------------------------------------------------------------------------- the map
@dataclass
class Unit:
    id: str
    title: str
    description: str
    keywords: list[str] = field(default_factory=list)
    size: int = 0
    representatives: list[str] = field(default_factory=list)  # passage ids
    pages: list[str] = field(default_factory=list)  # the index card: titles of member pages

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def unit_id(i: int) -> str:
    """Unit ids as the agent sees them: U01, U02, ..."""
    return f"U{i + 1:02d}"


@dataclass
class Hit:
    passage: Passage
    score: float
    unit: str


class KnowledgeMap:
    """Units + one FAISS inner-product index per unit + a flat index; routes and searches."""

    def __init__(self, passages: list[Passage], X: np.ndarray, primary: np.ndarray,
                 units: list[Unit]):
        import faiss  # heavy: faiss's native build; only the map's indexes need it

        if len(passages) != len(X) or len(X) != len(primary):
            raise ValueError(f"KnowledgeMap: {len(passages)} passages, {len(X)} vectors and "
                             f"{len(primary)} labels must match")
        self.passages, self.X, self.primary, self.units = passages, X, primary, units
        self.unit_ids = [u.id for u in units]
        self.by_id = {u.id: u for u in units}
        self.pid_index = {p.id: i for i, p in enumerate(passages)}
        _, self.C = centroids(X, primary)
        self.members: dict[str, np.ndarray] = {}
        self.indexes: dict[str, Any] = {}
        for i, u in enumerate(units):
            rows = np.flatnonzero(primary == i)
            self.members[u.id] = rows
            idx = faiss.IndexFlatIP(X.shape[1])
            idx.add(np.ascontiguousarray(X[rows]))
            self.indexes[u.id] = idx
        self.flat = faiss.IndexFlatIP(X.shape[1])
        self.flat.add(np.ascontiguousarray(X))

    # ---- building
    @classmethod
    def build(cls, passages: list[Passage], X: np.ndarray, labels: np.ndarray,
              *, top_keywords: int, n_representatives: int, n_card_titles: int,
              writer: Callable[[list[str], list[str]], tuple[str, str] | None] | None = None,
              ) -> "KnowledgeMap":
        """From final labels (no noise): relabel by size, write metadata, index every unit."""
        primary = relabel(fill_noise(X, labels) if (labels < 0).any() else labels)
        kw = ctfidf_keywords([passage_text(p) for p in passages], primary, top_keywords)
        reps = representatives(X, primary, n_representatives)
        cards = card_titles([p.title for p in passages], primary, n_card_titles)
        units = []
        for c in sorted(set(primary.tolist())):
            written = writer(kw[c], [passages[i].text for i in reps[c]]) if writer else None
            title, desc = written or keyword_metadata(kw[c])
            units.append(Unit(unit_id(c), title, desc, kw[c], int((primary == c).sum()),
                              [passages[i].id for i in reps[c]], cards[c]))
        return cls(passages, X, primary, units)

    # ---- routing and search
    def unit_of(self, passage_id: str) -> str:
        return self.unit_ids[int(self.primary[self.pid_index[passage_id]])]

    def unit_map(self) -> dict[str, str]:
        """passage id -> unit id for every passage: what the evaluator needs for Route Recall."""
        return {p.id: self.unit_of(p.id) for p in self.passages}

    def assign(self, X_new: np.ndarray) -> list[str]:
        """Primary unit for new passages, without reclustering (nearest unit centroid)."""
        return [self.unit_ids[int(i)] for i in nearest_centroid(X_new, self.C)]

    def route(self, q: np.ndarray, k: int = 1) -> list[str]:
        """The ``k`` units whose centroids are most similar to the query vector."""
        order = np.argsort(-(self.C @ q.reshape(-1)), kind="stable")[:k]
        return [self.unit_ids[int(i)] for i in order]

    def search(self, unit: str, q: np.ndarray, k: int) -> list[Hit]:
        """Top-k passages inside one unit (KeyError names the valid ids if the unit is unknown)."""
        if unit not in self.indexes:
            raise KeyError(f"unknown retrieval unit '{unit}'; valid ids: {', '.join(self.unit_ids)}")
        rows = self.members[unit]
        if not len(rows):
            return []
        scores, ids = self.indexes[unit].search(q.reshape(1, -1).astype(np.float32), min(k, len(rows)))
        return [Hit(self.passages[int(rows[j])], float(d), unit) for d, j in zip(scores[0], ids[0])
                if j >= 0]

    def search_flat(self, q: np.ndarray, k: int) -> list[Hit]:
        """Top-k over the whole corpus (the flat-retrieval baseline)."""
        scores, ids = self.flat.search(q.reshape(1, -1).astype(np.float32), min(k, len(self.passages)))
        return [Hit(self.passages[int(j)], float(d), self.unit_ids[int(self.primary[j])])
                for d, j in zip(scores[0], ids[0]) if j >= 0]

    def compact(self, descriptions: bool = True) -> str:
        """The map as the agent's prompt shows it: one line per unit (its keyword description
        left out when ``descriptions`` is false: the title already holds its top keywords)."""
        return "\n".join(f"- id: {u.id} | {u.title}" + (f" | {u.description}" if descriptions else "")
                         + (f" Pages: {'; '.join(u.pages)}." if u.pages else "")
                         for u in self.units)

    def card_unit(self, name: str) -> str | None:
        """The unit whose index card lists ``name`` (case-insensitive), if exactly one does."""
        hits = [u.id for u in self.units if name and name.lower() in (t.lower() for t in u.pages)]
        return hits[0] if len(hits) == 1 else None

    # ---- persistence
    def save(self, folder: str | Path) -> Path:
        """units.json, passages.jsonl (with unit), vectors.npy, index/<unit>.faiss, index/flat.faiss."""
        import faiss  # heavy: faiss's native build; only the map's indexes need it

        folder = Path(folder)
        (folder / "index").mkdir(parents=True, exist_ok=True)
        write_json(folder / "units.json", [u.to_dict() for u in self.units])
        write_jsonl(folder / "passages.jsonl",
                    [{**p.to_dict(), "unit": self.unit_ids[int(c)]}
                     for p, c in zip(self.passages, self.primary)])
        buf = _npy_bytes(self.X)
        write_bytes(folder / "vectors.npy", buf)
        for uid, idx in self.indexes.items():
            write_bytes(folder / "index" / f"{uid}.faiss", faiss.serialize_index(idx).tobytes())
        write_bytes(folder / "index" / "flat.faiss", faiss.serialize_index(self.flat).tobytes())
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "KnowledgeMap":
        """Read a saved map; the FAISS files are checked against the stored vectors."""
        import faiss  # heavy: faiss's native build; only the map's indexes need it

        folder = Path(folder)
        if not (folder / "units.json").exists():
            raise FileNotFoundError(f"no KnowledgeMap in {folder}: run `bin/py -m mmrag.stage "
                                    f"knowledge_map` first")
        units = [Unit(**u) for u in read_json(folder / "units.json")]
        rows = read_jsonl(folder / "passages.jsonl")
        uid = {u.id: i for i, u in enumerate(units)}
        primary = np.asarray([uid[r.pop("unit")] for r in rows], dtype=np.int64)
        passages = [Passage.from_dict(r) for r in rows]
        X = np.load(folder / "vectors.npy")
        km = cls(passages, X, primary, units)
        for u in units:
            stored = faiss.deserialize_index(np.fromfile(folder / "index" / f"{u.id}.faiss",
                                                         dtype=np.uint8))
            if stored.ntotal != len(km.members[u.id]):
                raise ValueError(f"{folder}/index/{u.id}.faiss holds {stored.ntotal} vectors, "
                                 f"passages.jsonl assigns {len(km.members[u.id])}: rebuild the map")
            km.indexes[u.id] = stored
        km.flat = faiss.deserialize_index(np.fromfile(folder / "index" / "flat.faiss",
                                                      dtype=np.uint8))
        return km

    @classmethod
    def open(cls, folder: str | Path, *, allow_network: bool, device: str) -> tuple["KnowledgeMap", Any]:
        """(map, text encoder): the saved map and the encoder its meta.json names, so that queries
        are embedded in the same space as the indexed passages."""
        folder = Path(folder)
        kmap = cls.load(folder)
        encoder = load_text_encoder(read_json(folder / "meta.json")["text_encoder"],
                                    allow_network=allow_network, device=device)
        return kmap, encoder


def _npy_bytes(X: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, X, allow_pickle=False)
    return buf.getvalue()


# --------------------------------------------------------------------------- agreement
def agreement(pred: Sequence[Any], gold: Sequence[Any]) -> dict[str, float | None]:
    """NMI, ARI and purity of units against gold topics/domains; all None when the gold has
    fewer than two topics (a user's folder without domains): agreement is then not applicable."""
    # heavy: scikit-learn imports in ~1 s; only the agreement with gold topics needs it
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    pred, gold = list(pred), list(gold)
    if len(set(gold)) < 2:
        return {"nmi": None, "ari": None, "purity": None}
    counts: dict[Any, dict[Any, int]] = {}
    for p, g in zip(pred, gold):
        counts.setdefault(p, {}).setdefault(g, 0)
        counts[p][g] += 1
    purity = sum(max(v.values()) for v in counts.values()) / max(len(pred), 1)
    return {"nmi": float(normalized_mutual_info_score(gold, pred)),
            "ari": float(adjusted_rand_score(gold, pred)), "purity": float(purity)}
