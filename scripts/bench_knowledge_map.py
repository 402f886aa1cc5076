"""KnowledgeMap cost on this machine: embedding throughput and one HDBSCAN run per grid point.

    bin/py scripts/bench_knowledge_map.py [n_docs]

Uses the real Wikipedia summaries (data/wiki), sampled and chunked as the `knowledge_map` stage
does with params.yaml's knowledge_map section; prints passages/s for its text encoder and the
seconds of PCA + HDBSCAN per configuration of its grid, which is what sizes
knowledge_map.max_docs and the search grid in the profiles.
"""

from __future__ import annotations

import sys
import time

from mmrag import config
from mmrag.corpora.passages import to_passages
from mmrag.io import DATA
from mmrag.mmr2 import knowledge_map as kmaps
from mmrag.models import registry
from mmrag.schema import load_documents
from mmrag.stages import knowledge_map as stage


def main(n_docs: int = 1000) -> None:
    params = config.load()
    cfg, seed = params.knowledge_map, params.base.seed
    docs = stage.sample_pages(load_documents(DATA / "wiki"), n_docs, seed)
    passages = to_passages(docs, cfg.max_chars, cfg.chunk_chars, cfg.overlap)
    enc = registry.load_text_encoder(params.models.text_encoder, allow_network=params.base.allow_network,
                                     device=params.base.device)
    t0 = time.time()
    X = kmaps.embed_texts(enc, [kmaps.passage_text(p) for p in passages])
    dt = time.time() - t0
    print(f"embed: {len(passages)} passages in {dt:.1f}s = {len(passages) / dt:.1f} passages/s")
    sizes = sorted({max(5, round(f * len(X))) for f in cfg.min_cluster_frac})
    for dims in cfg.dims:
        t0 = time.time()
        reduced = kmaps.reduce(X, dims, seed)
        t_pca = time.time() - t0
        for sel in cfg.selection:
            for ms in cfg.min_samples:
                cfg_point = kmaps.ClusterConfig(dims, sizes[0], ms, sel)
                t0 = time.time()
                labels = kmaps.hdbscan_labels(reduced, cfg_point)
                print(f"{cfg_point.name}: pca {t_pca:.2f}s, hdbscan {time.time() - t0:.2f}s, "
                      f"{len(set(labels.tolist()) - {-1})} units, coverage {kmaps.coverage(labels):.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
