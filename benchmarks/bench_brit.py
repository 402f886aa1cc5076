"""BRIT speed and memory: graph build time and memory, retrieval latency and PCST time per query,
at the default scale and at k times the pages.

    bin/py benchmarks/bench_brit.py                 # scales 1 and 10, 100 queries
    bin/py benchmarks/bench_brit.py --scales 1 3 --queries 50 [--out results/bench/brit.json]

A k-times corpus is the world's pages copied k times; copy j > 0 renames every entity (the
first word of each name gets a suffix), so its triplets form new nodes instead of merging with
the originals, and its image ids are new (the files are shared but embedded again: the build
encoder has no cache). Queries are the world's BRIT questions, answered against the copy that
keeps the original names. Build memory is the peak of Python allocations (tracemalloc, which
sees numpy and networkx, not torch's own allocator) and the process's peak RSS. One row per scale
is printed and written to ``--out`` with the machine's load beside them; time it with nothing
else running.
"""

from __future__ import annotations

import argparse
import copy
import re
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402
from machine import snapshot, with_load_after  # noqa: E402

from mmrag import config  # noqa: E402
from mmrag.brit.encoders import MemoClip, load_model_parts, memo_texts  # noqa: E402
from mmrag.brit.evaluation import read_gold  # noqa: E402
from mmrag.brit.graph import Encoders, sentence_transformer_fn  # noqa: E402
from mmrag.brit.system import systems_for  # noqa: E402
from mmrag.brit.triplets import make_extractor  # noqa: E402
from mmrag.schema import load_documents, load_questions  # noqa: E402
from mmrag.stages.brit_graph import timed_build  # noqa: E402

SUFFIX = "bcdfghklmnprstvz"


def renamed_copy(docs: list, names: list[str], j: int) -> list:
    """Copy j of the pages with every entity renamed and every id made unique."""
    if j == 0:
        return docs
    tag = SUFFIX[j % len(SUFFIX)] + SUFFIX[(j // len(SUFFIX)) % len(SUFFIX)]
    mapping = {n: n.split(" ", 1)[0] + tag + (" " + n.split(" ", 1)[1] if " " in n else "") for n in names}
    pattern = re.compile("|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)))

    def sub(text: str) -> str:
        return pattern.sub(lambda m: mapping[m.group(0)], text)

    out = []
    for d in docs:
        c = copy.deepcopy(d)
        c.id = f"{d.id}~{j}"
        c.title = sub(d.title)
        for s in c.sections:
            s.id, s.doc_id, s.text = f"{s.id}~{j}", c.id, sub(s.text)
        for im in c.images:
            im.id, im.doc_id, im.caption = f"{im.id}~{j}", c.id, sub(im.caption)
            im.section_id = f"{im.section_id}~{j}" if im.section_id else None
        out.append(c)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=None, help="default: data/<params brit_graph.corpus>")
    ap.add_argument("--clip", default=None, help="default: params models.clip")
    ap.add_argument("--scales", type=int, nargs="+", default=[1, 10])
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--linking", nargs="*", default=None, help="default: params brit_linking.linking")
    ap.add_argument("--threshold", type=float, default=None, help="default: params brit_linking.threshold")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "brit.json"))
    args = ap.parse_args()

    params = config.load()
    graph_cfg, cfg = params.brit_graph, params.brit_linking
    th = cfg.threshold if args.threshold is None else args.threshold
    linkers = tuple(cfg.linking if args.linking is None else args.linking)
    corpus = ROOT / (args.corpus or f"data/{graph_cfg.corpus}")
    docs = load_documents(corpus)
    entities, _ = read_gold(corpus)
    names = [e["name"] for e in entities or []]
    questions = load_questions(corpus / "questions" / f"{cfg.question_set}.jsonl")
    questions = questions[:: max(1, 500 // args.queries)][: args.queries]
    clip_name = args.clip or params.models.clip  # a checkpoint folder (relative to the repo) or an OpenCLIP tag
    if (ROOT / clip_name).is_dir():
        clip_name = str(ROOT / clip_name)
    nlp, text_model, clip = load_model_parts(params.models.spacy, params.models.text_encoder, clip_name,
                                             params.base.allow_network)
    text = sentence_transformer_fn(text_model)
    print(f"corpus {corpus}: {len(docs)} pages; {len(questions)} queries; linking {list(linkers)}; "
          f"threshold {th}")
    print(f"{'scale':>5} {'pages':>6} {'nodes':>7} {'edges':>7} {'images':>7} {'build s':>8} "
          f"{'py peak MiB':>11} {'RSS MiB':>8} {'median ms':>9} {'p95 ms':>7} {'PCST ms':>8}")
    before, rows = snapshot(), []
    for k in args.scales:
        pages = [d for j in range(k) for d in renamed_copy(docs, names, j)]
        extractor = make_extractor("spacy", nlp, graph_cfg.arguments)  # fresh: no parse cache
        enc = Encoders(text, clip, corpus)  # no memo: every image and text is encoded
        g, build, peak = timed_build(pages, enc, extractor, graph_cfg.si_top)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        r = systems_for(g, pages, extractor, cfg).brit(linkers, threshold=th)
        r.retrieve(questions[0].text, questions[0].image_path)  # warm-up
        lat, pcst = [], []
        for q in questions:
            # query encodings are part of the latency: a fresh memo per query
            r.text_encode = memo_texts(text)
            r.clip = MemoClip(clip)
            t0 = time.perf_counter()
            out = r.retrieve(q.text, q.image_path)
            lat.append(time.perf_counter() - t0)
            pcst.append(out.pcst_seconds)
        st = g.stats(linkers)
        rows.append({"scale": k, "pages": len(pages), "text_nodes": int(st["text_nodes"]),
                     "text_edges": int(st["text_edges"]), "images": int(st["images"]),
                     "build_seconds": round(float(build), 2), "python_peak_mib": round(float(peak), 1),
                     "peak_rss_mib": round(rss, 1), "median_ms": round(1000 * statistics.median(lat), 2),
                     "p95_ms": round(1000 * float(np.percentile(lat, 95)), 2),
                     "pcst_mean_ms": round(1000 * statistics.mean(pcst), 3)})
        print(f"{k:>5} {len(pages):>6} {st['text_nodes']:>7} {st['text_edges']:>7} {st['images']:>7} "
              f"{build:>8.1f} {peak:>11.0f} {rss:>8.0f} {1000 * statistics.median(lat):>9.1f} "
              f"{1000 * float(np.percentile(lat, 95)):>7.1f} {1000 * statistics.mean(pcst):>8.2f}",
              flush=True)
    from mmrag.io import write_json

    write_json(Path(args.out), {"machine": with_load_after(before), "corpus": str(corpus.relative_to(ROOT))
                                if corpus.is_relative_to(ROOT) else str(corpus), "queries": len(questions),
                                "linking": list(linkers), "threshold": th, "rows": rows,
                                "command": "bin/py benchmarks/bench_brit.py " + " ".join(sys.argv[1:])})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
