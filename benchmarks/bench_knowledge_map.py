"""KnowledgeMap cost on this machine: embedding throughput and one HDBSCAN run per grid point.

    bin/py benchmarks/bench_knowledge_map.py [--docs 1000] [--out results/bench/knowledge_map.json]

Uses the real Wikipedia summaries (data/wiki), sampled and chunked as the `knowledge_map` stage
does with params.yaml's knowledge_map section; prints passages/s for its text encoder and the
seconds of PCA + HDBSCAN per configuration of its grid, which is what sizes
knowledge_map.max_docs and the search grid in the profiles. The figures are written to ``--out``
with the machine's load beside them; time it with nothing else running.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from machine import snapshot, with_load_after

from mmrag import config
from mmrag.corpora.passages import to_passages
from mmrag.io import DATA
from mmrag.mmr2 import knowledge_map as kmaps
from mmrag.models import registry
from mmrag.schema import load_documents
from mmrag.stages import knowledge_map as stage

ROOT = Path(__file__).resolve().parents[1]


def main(n_docs: int = 1000, out: Path = ROOT / "results" / "bench" / "knowledge_map.json") -> None:
    """Embedding throughput and one PCA + HDBSCAN run per grid point on ``n_docs`` wiki pages."""
    params = config.load()
    cfg, seed = params.knowledge_map, params.base.seed
    docs = stage.sample_pages(load_documents(DATA / "wiki"), n_docs, seed)
    passages = to_passages(docs, cfg.max_chars, cfg.chunk_chars, cfg.overlap)
    enc = registry.load_text_encoder(params.models.text_encoder, allow_network=params.base.allow_network,
                                     device=params.base.device)
    before, rows = snapshot(), []
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
                t_hdbscan = time.time() - t0
                rows.append({"config": cfg_point.name, "dims": dims, "min_cluster_size": sizes[0], "min_samples": ms,
                             "selection": sel, "pca_seconds": round(t_pca, 2), "hdbscan_seconds": round(t_hdbscan, 2),
                             "units": len(set(labels.tolist()) - {-1}),
                             "coverage": round(float(kmaps.coverage(labels)), 3)})
                print(f"{cfg_point.name}: pca {t_pca:.2f}s, hdbscan {t_hdbscan:.2f}s, "
                      f"{rows[-1]['units']} units, coverage {kmaps.coverage(labels):.2f}")
    from mmrag.io import write_json

    write_json(Path(out), {"machine": with_load_after(before), "docs": len(docs), "passages": len(passages),
                           "text_encoder": params.models.text_encoder, "embed_seconds": round(dt, 1),
                           "passages_per_second": round(len(passages) / dt, 1), "grid": rows,
                           "command": "bin/py benchmarks/bench_knowledge_map.py " + " ".join(sys.argv[1:])})
    print(f"wrote {out}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1000, help="wiki pages sampled as the stage samples them")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "knowledge_map.json"))
    args = ap.parse_args()
    main(args.docs, Path(args.out))
