"""KnowledgeMap cost on this machine: embedding throughput and one HDBSCAN run per grid point.

    bin/py scripts/bench_knowledge_map.py [n_docs]

Uses the real Wikipedia summaries (data/wiki); prints passages/s for the text encoder and the
seconds of PCA + HDBSCAN per configuration, which is what sizes knowledge_map.max_docs and the
search grid in the profiles.
"""

from __future__ import annotations

import sys
import time

from mmrag.corpora.passages import to_passages
from mmrag.io import DATA
from mmrag.mmr2 import knowledge_map as km
from mmrag.models import registry
from mmrag.schema import load_documents


def main(n_docs: int = 1000) -> None:
    docs = load_documents(DATA / "wiki")[:n_docs]
    passages = to_passages(docs)
    enc = registry.load_text_encoder("all-minilm-l6-v2")
    t0 = time.time()
    X = km.embed_texts(enc, [km.passage_text(p) for p in passages])
    dt = time.time() - t0
    print(f"embed: {len(passages)} passages in {dt:.1f}s = {len(passages) / dt:.1f} passages/s")
    for dims in (10, 25, 50):
        t0 = time.time()
        Z = km.reduce(X, dims)
        t_pca = time.time() - t0
        for sel in ("eom", "leaf"):
            cfg = km.ClusterConfig(dims, max(5, len(X) // 100), 5, sel)
            t0 = time.time()
            labels = km.hdbscan_labels(Z, cfg)
            print(f"{cfg.name}: pca {t_pca:.2f}s, hdbscan {time.time() - t0:.2f}s, "
                  f"{len(set(labels.tolist()) - {-1})} units, coverage {km.coverage(labels):.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
