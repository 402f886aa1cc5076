"""Stage ``brit_seeds``: do BRIT's verdicts hold when CLIP is retrained under another seed?

CLIP is the training under BRIT cheap enough to repeat (~9 min on 2 cores), and every graph, flat
baseline and linker reads its embeddings. The main run is base.seed's (stages ``clip``,
``brit_graph``, ``brit_linking``). For each further seed k of ``brit_seeds.seeds`` this stage trains
CLIP as ``clip`` does (only the initialisation and batch-order seed differ: the same pictures and
rendered extras), rebuilds BRIT's graph and its NEA twin as ``brit_graph`` does, reruns
``brit_linking``'s retrieval-only runs (Table 2, its sensitivity runs, Table 3) and Table 1's claim
pair read by the stage's reader on its claim sample (the same test split and questions: base.seed
draws them), and writes the traces the claims read as
``data/brit_seeds/traces/<system>@seed<k>__<set>.jsonl``. The claims registry counts them in each
BRIT claim's ``holds`` (claims.yaml rules.seed_sources: clip names this stage).

Each seed works in ``data/.checkpoints/brit_seeds/seed_<k>`` (the corpus and the models linked,
never written), outside the stage's outputs, so a rerun finds it: a finished seed whose inputs,
settings and code are unchanged is read back, and a CLIP whose training inputs are unchanged is
reused when the rest reruns. Writes ``data/brit_seeds`` (traces, ``seeds.json``),
``results/brit_seeds/metrics.json``, ``timings.json`` (wall time, kept out of the metrics) and
``seeds.png``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from mmrag import io
from mmrag.brit.graph import build_graph
from mmrag.brit.params import BritGraph, BritLinking, BritSeeds
from mmrag.brit.system import make_reader, open_systems
from mmrag.evaluate import claims
from mmrag.evaluate.params import Report
from mmrag.models.params import Inference, Models
from mmrag.params import Base, Sections, as_dict
from mmrag.schema import question_path
from mmrag.stages import StageResult, new_figure
from mmrag.stages import brit_graph as graph_stage
from mmrag.stages import brit_linking as bl
from mmrag.stages import clip as clip_stage
from mmrag.train.checkpoints import checkpoint_dir, fingerprint, package_files
from mmrag.train.params import Clip

STAGE = "brit_seeds"
SEEDS_FILE = "seeds.json"  # data/brit_seeds: each seed's CLIP figures, graph components and test questions
FINISHED = "finished.json"  # a seed's workspace: written once its traces are, with their fingerprint
CLIP_DONE = "clip.json"  # a seed's workspace: the fingerprint its CLIP was trained under
# the code a seed's CLIP depends on, and (with it) the code its traces depend on: a change retrains / reruns
CLIP_CODE = ("train/clip.py", "models/clip.py", "stages/clip.py", "world/render.py")
RUN_CODE = ("brit", "baselines", "models", "stages/brit_graph.py", "stages/brit_linking.py", "schema.py",
            "sampling.py")
MARKERS = "sD^vPX*"  # one per further seed in the figure (the main run: a circle)


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    inference: Inference
    models: Models
    clip: Clip
    brit_graph: BritGraph
    brit_linking: BritLinking
    report: Report
    brit_seeds: BritSeeds

    def problems(self) -> list[str]:
        """base.seed's CLIP is the main run's (stage clip): listing it again would count one run twice."""
        if self.base.seed in self.brit_seeds.seeds:
            return [f"brit_seeds.seeds = {list(self.brit_seeds.seeds)} holds base.seed {self.base.seed}, the main "
                    f"run's own (stage clip): list only further seeds"]
        return []


@dataclass
class BritSeedsResult(StageResult):
    """The stage's result, plus each seed's summary and the BRIT claims decided with their seed reruns."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)


# --------------------------------------------------------------------------- one seed
def link_inputs(work: Path, data: Path, names: Iterable[str]) -> None:
    """The seed's data folder: ``names`` of ``data`` (the corpus, the provisioned models) linked
    read-only, so every BRIT function finds them where it looks."""
    work.mkdir(parents=True, exist_ok=True)
    for name in names:
        target = (data / name).resolve()
        if not target.exists():
            raise FileNotFoundError(f"data/{name} is missing: run `dvc repro models world` (or the stage that "
                                    f"writes data/{name}) first")
        link = work / name
        if link.is_symlink() and link.resolve() != target:
            link.unlink()
        if not link.exists():
            link.symlink_to(target, target_is_directory=True)


@contextlib.contextmanager
def data_folder(folder: Path) -> Iterator[Path]:
    """io.DATA pointed at ``folder`` while the block runs: brit_linking's trace writers follow it,
    so a seed's runs land in its workspace, never beside the main run's."""
    before = io.DATA
    io.DATA = folder
    try:
        yield folder
    finally:
        io.DATA = before


def clip_stamp(params: Params, seed: int, data: Path) -> str:
    """What a seed's CLIP depends on: the seed, the clip settings and base.seed (its rendered
    extras), the pictures' index and the code that trains it."""
    settings = {"seed": seed, "data_seed": params.base.seed, "device": params.base.device,
                "clip": as_dict(params.clip)}
    return fingerprint(settings, package_files(*CLIP_CODE), [data / params.clip.corpus / "images.jsonl"])


def train_clip(params: Params, seed: int, clip_dir: Path) -> dict[str, Any]:
    """CLIP trained as the clip stage trains it, ``seed`` drawing its initialisation and batch order
    (the pictures and rendered extras stay base.seed's), saved to ``clip_dir``; a CLIP trained there
    under the same fingerprint is reused. Its held-out zero-shot figures, recomputed from the saved
    checkpoint, whether it was trained here, and the seconds it took."""
    from mmrag.models.clip import load_clip
    from mmrag.train import clip as clip_train

    main = clip_stage.Params(base=params.base, clip=params.clip)
    corpus_dir = io.DATA / params.clip.corpus
    heldout, _ = clip_train.world_examples(corpus_dir, "heldout")
    stamp, done = clip_stamp(params, seed, io.DATA), clip_dir.parent / CLIP_DONE
    t0 = time.perf_counter()
    saved = io.read_json(done) if done.exists() and (clip_dir / "meta.json").exists() else {}
    trained = saved.get("fingerprint") != stamp
    if trained:
        done.unlink(missing_ok=True)
        data = clip_stage.load_data(main)
        clip_stage.require_heldout(data, corpus_dir)
        seeded = clip_stage.Params(base=dataclasses.replace(params.base, seed=seed), clip=params.clip)
        print(f"seed {seed}: training CLIP ({params.clip.steps} steps; the default's 700 take ~9 min on 2 cores)",
              flush=True)
        training = clip_stage.train_encoder(seeded, data.train_set, data.heldout, evaluate_heldout=False)
        clip_stage.save_trained(training, seeded, len(data.train_set), clip_dir)
        io.write_json(done, {"fingerprint": stamp, "seed": seed})
    encoder = load_clip(clip_dir, allow_network=False, device="cpu")
    res = clip_train.evaluate(encoder.encode_images([ex.path for ex in heldout]), heldout, encoder.encode_texts)
    return {"zero_shot_mean": round(res["zero_shot_mean"], 4), "zero_shot_min": round(res["zero_shot_min"], 4),
            "trained": trained, "seconds": round(time.perf_counter() - t0, 1)}


def build_graphs(params: Params, work: Path) -> dict[str, Any]:
    """BRIT's graph and its NEA twin of the corpus in ``work``, built as brit_graph builds them, over
    the CLIP ``params.models.clip`` names; the graph's disjoint components (metrics)."""
    cfg = params.brit_graph
    corpus_dir = work / cfg.corpus
    docs = graph_stage.load_corpus(corpus_dir, cfg.max_docs)
    extractor, enc, _ = graph_stage.load_builders(cfg, params.models, params.base, corpus_dir, params.inference)
    graph = build_graph(docs, enc, extractor, cfg.si_top)
    graph.save(work / graph_stage.STAGE / cfg.corpus)
    graph_stage.nea_graph(docs, cfg, corpus_dir, work / graph_stage.STAGE, enc, extractor)
    if hasattr(getattr(extractor, "llm", None), "close"):
        extractor.llm.close()
    return graph_stage.component_summary(graph_stage.component_sizes(graph))


def retrieval_traces(params: Params, work: Path, table1: bool = True) -> int:
    """brit_linking's retrieval-only runs (Table 2, its sensitivity runs, Table 3) over the graph in
    ``work``, written as its traces there (io.DATA must point at ``work``: :func:`data_folder`), and
    with ``table1`` its claim pair read by its reader on its claim sample (the same seeded questions
    as the stage's); the number of test questions."""
    graph_cfg, cfg = params.brit_graph, params.brit_linking
    corpus_dir = work / graph_cfg.corpus
    main = tuple(cfg.linking)
    systems, extractor = open_systems(graph_cfg, params.models, cfg, params.base.allow_network, work)
    split = bl.split_question_set(question_path(corpus_dir, cfg.question_set), systems, cfg.dev_share,
                                  params.base.seed, cfg.max_questions)
    systems.prime(split.dev + split.test)
    runs = bl.recall_runs(systems, main, split.test, bl.text_baselines(systems))
    sens_runs, settings = bl.sensitivity_runs(systems, main, split.test, cfg)
    bl.nea_table(systems, extractor, params, corpus_dir, work / graph_stage.STAGE, runs)
    bl.write_all_traces({}, runs, cfg.question_set, cfg.nea_set)
    for setting, (_, traces) in zip(settings, sens_runs.values()):
        io.write_traces(bl.STAGE, setting["system"], bl.RETRIEVAL_SET.format(cfg.question_set), traces, work)
    io.write_json(work / bl.STAGE / bl.SENSITIVITY, settings)
    if table1:
        reader = make_reader(cfg, systems, corpus_dir, params.base.allow_network, params.inference,
                                params.base.device)
        qa_test = bl.balanced_subset(split.test, cfg.qa_questions, params.base.seed)
        sample = bl.claim_sample(split.test, qa_test, cfg.claim_questions, params.base.seed)
        pair = {name: system for name, system in bl.qa_systems(systems, main, reader).items()
                if name in bl.claim_pair()}
        for name, (_, traces) in bl.claim_runs({n: ([], []) for n in pair}, pair, sample).items():
            io.write_traces(bl.STAGE, bl.trace_system(name), bl.CLAIM_SET.format(cfg.question_set), traces, work)
        if hasattr(getattr(reader, "llm", None), "close"):
            reader.llm.close()
    return len(split.test)


def seed_stamp(params: Params, seed: int, clip: str, data: Path, table1: bool) -> str:
    """What a seed's traces depend on: its CLIP's fingerprint, BRIT's settings and base.seed (the
    split), the corpus, its question sets, the provisioned models and BRIT's code."""
    cfg = params.brit_graph
    corpus = data / cfg.corpus
    files = [corpus / "documents.jsonl", corpus / "images.jsonl",
             *([corpus / cfg.nea_documents] if cfg.nea_documents else []),
             question_path(corpus, params.brit_linking.question_set),
             question_path(corpus, params.brit_linking.nea_set), *sorted((data / "models").glob("*/READY"))]
    settings = {"seed": seed, "clip": clip, "table1": table1, "base": as_dict(params.base),
                "inference": as_dict(params.inference),
                "models": {"spacy": params.models.spacy, "text_encoder": params.models.text_encoder},
                "brit_graph": as_dict(cfg), "brit_linking": as_dict(params.brit_linking)}
    return fingerprint(settings, package_files(*RUN_CODE, *CLIP_CODE), files)


def seed_run(params: Params, seed: int, work: Path, table1: bool = True) -> dict[str, Any]:
    """One further CLIP seed, end to end in ``work``: CLIP, the graphs, the traces (under
    ``work``/brit_linking/traces, named as the main run's). A seed finished there under the same
    fingerprint is read back instead. Its summary (``seed``, ``clip``'s held-out figures,
    ``components``, ``test_questions``) with how it was obtained (``reused``, ``clip_trained``,
    ``seconds``)."""
    data = io.DATA
    link_inputs(work, data, dict.fromkeys([params.brit_graph.corpus, "models"]))
    stamp = seed_stamp(params, seed, clip_stamp(params, seed, data), data, table1)
    done = work / FINISHED
    if done.exists() and io.read_json(done).get("fingerprint") == stamp:
        print(f"seed {seed}: finished earlier under the same inputs, settings and code: read back from {work}")
        return {**io.read_json(done)["summary"], "reused": True, "clip_trained": False, "seconds": 0.0}
    done.unlink(missing_ok=True)
    for earlier in (bl.STAGE, graph_stage.STAGE):  # no trace or graph of an earlier run may pass for this one's
        shutil.rmtree(work / earlier, ignore_errors=True)
    t0 = time.perf_counter()
    seeded = dataclasses.replace(params, models=dataclasses.replace(params.models, clip=str(work / "clip")))
    clip = train_clip(seeded, seed, work / "clip")
    print(f"seed {seed}: CLIP's held-out zero-shot mean {clip['zero_shot_mean']}, min {clip['zero_shot_min']}",
          flush=True)
    with data_folder(work):
        components = build_graphs(seeded, work)
        n_test = retrieval_traces(seeded, work, table1)
    summary = {"seed": seed, "clip": {k: clip[k] for k in ("zero_shot_mean", "zero_shot_min")},
               "components": components, "test_questions": n_test}
    io.write_json(done, {"fingerprint": stamp, "summary": summary})
    return {**summary, "reused": False, "clip_trained": clip["trained"],
            "seconds": round(time.perf_counter() - t0, 1)}


# --------------------------------------------------------------------------- the traces the claims read
def claim_sets(params: Params) -> claims.ClaimSets:
    """The question sets BRIT's claims are decided on: brit_linking's (the others stay the world's)."""
    return dataclasses.replace(claims.WORLD_SETS, brit=params.brit_linking.question_set,
                               nea=params.brit_linking.nea_set)


def claim_files(sets: claims.ClaimSets, prereg: claims.Prereg | None = None) -> set[tuple[str, str]]:
    """(system, question set) of every trace read by a claim whose seed reruns live in this stage
    (claims.yaml rules.seed_sources): what a seed publishes, no more."""
    pre = prereg or claims.load_prereg()
    out = set()
    for c in claims.registry(sets=sets, prereg=pre):
        if c.untestable or pre.seed_stage(c.seeds, c.stage) != STAGE:
            continue
        for system, qset in ((c.a, c.question_set), (c.b, c.b_set or c.question_set), (c.a, c.twin_set),
                             (c.b, c.twin_set)):
            if system and qset:
                out.add((system, qset))
    return out


def publish(work: Path, seed: int, wanted: Iterable[tuple[str, str]], data: Path | None = None) -> list[Path]:
    """Copy the seed's traces that a claim reads from its workspace to
    data/brit_seeds/traces/<system>@seed<k>__<set>.jsonl, where the claims registry looks; the
    files written (a pair the seed did not run, e.g. Table 1's own run, is skipped)."""
    written = []
    for system, qset in sorted(wanted):
        source = io.trace_path(bl.STAGE, system, qset, work)
        if source.exists():
            target = io.trace_path(STAGE, claims.SEED.format(system, seed), qset, data)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            written.append(target)
    return written


# --------------------------------------------------------------------------- what the seeds show
def run_cell(run: Mapping[str, Any] | None) -> str:
    """One run of a claim as "estimate [low, high] verdict" ("–" when it has none)."""
    if not run:
        return "–"
    if run.get("estimate") is None:
        return str(run.get("verdict") or "–")
    ci = "" if run.get("ci_low") is None else f" [{run['ci_low']:+.3f}, {run['ci_high']:+.3f}]"
    return f"{run['estimate']:+.3f}{ci} {run['verdict']}"


def claim_runs(decisions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per BRIT claim: the main run's estimate, CI and verdict, each seed rerun's beside it (from the
    registry's ``extra['seed_runs']``), its ``holds`` and why."""
    keep = ("estimate", "ci_low", "ci_high", "n", "verdict")
    return [{"id": d["id"], "claim": d["claim"], "main": {k: d[k] for k in keep},
             "seeds": dict((d.get("extra") or {}).get("seed_runs") or {}), "holds": d.get("holds"),
             "holds_reason": d.get("holds_reason", "")} for d in decisions if d["paper"] == "BRIT"]


def claims_table(rows: Sequence[Mapping[str, Any]], seeds: Sequence[int], base_seed: int) -> pd.DataFrame:
    """The claims' table: the main run (base.seed) beside each further seed, and ``holds``."""
    out = [{"claim": r["id"], f"main (seed {base_seed})": run_cell(r["main"]),
            **{f"seed {k}": run_cell(r["seeds"].get(str(k))) for k in seeds}, "holds": r["holds"] or "–"}
           for r in rows]
    return pd.DataFrame(out).set_index("claim") if out else pd.DataFrame()


def clip_table(runs: Sequence[Mapping[str, Any]], main: Mapping[str, Any] | None, base_seed: int) -> pd.DataFrame:
    """CLIP's held-out zero-shot accuracy (mean and min over attributes) per seed, the main run's first."""
    rows = [{"seed": f"{base_seed} (main run)", "zero_shot_mean": (main or {}).get("zero_shot_mean"),
             "zero_shot_min": (main or {}).get("zero_shot_min")}]
    rows += [{"seed": str(r["seed"]), **r["clip"]} for r in runs]
    return pd.DataFrame(rows).set_index("seed")


def seeds_figure(rows: Sequence[Mapping[str, Any]], seeds: Sequence[int], base_seed: int) -> Any:
    """Each claim with seed reruns: the main run's estimate and 95 % CI and each seed's beside it,
    coloured by verdict (claims.COLOURS)."""
    from matplotlib.lines import Line2D

    shown = [r for r in rows if r["seeds"] and r["main"]["estimate"] is not None]
    fig, ax = new_figure(figsize=(9, 0.45 * max(len(shown), 3) + 1.5))
    if not shown:
        ax.axis("off")
        ax.text(0.5, 0.5, "no BRIT claim has a seed rerun here", ha="center", va="center")
        return fig
    runs = [("main", "o")] + [(str(k), MARKERS[i % len(MARKERS)]) for i, k in enumerate(seeds)]
    step = 0.6 / max(len(runs) - 1, 1)
    for y, r in enumerate(shown):
        for j, (key, marker) in enumerate(runs):
            run = r["main"] if key == "main" else r["seeds"].get(key)
            if not run or run.get("estimate") is None:
                continue
            yy = y - 0.3 + j * step
            colour = claims.COLOURS.get(run["verdict"], "#999999")
            if run.get("ci_low") is not None:
                ax.plot([run["ci_low"], run["ci_high"]], [yy, yy], color=colour, lw=1.8)
            ax.plot(run["estimate"], yy, marker, color=colour, markeredgecolor="k", markeredgewidth=0.4)
    ax.axvline(0, color="grey", lw=0.8, ls=":")
    ax.set_yticks(range(len(shown)), [f"{r['id']} ({r['holds']})" for r in shown], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("estimate and 95 % CI (colour: verdict)")
    handles = [Line2D([], [], ls="", marker=m, color="k", label=f"seed {base_seed} (main)" if k == "main"
                      else f"seed {k}") for k, m in runs]
    handles += [Line2D([], [], color=c, lw=2, label=v) for v, c in claims.COLOURS.items()
                if any(run and run.get("verdict") == v for r in shown for run in (r["main"], *r["seeds"].values()))]
    ax.legend(handles=handles, fontsize=7, loc="best")
    ax.set_title(f"BRIT's claims under CLIP training seeds {', '.join(map(str, [base_seed, *seeds]))}")
    fig.tight_layout()
    return fig


def seeds_metrics(runs: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]],
                  main_clip: Mapping[str, Any] | None, params: Params, seeds: Sequence[int]) -> dict[str, Any]:
    """The deterministic figures (no timings: metrics.json must rerun byte-identical)."""
    steady = [r["id"] for r in rows if r["seeds"] and r["holds"] == f"{len(r['seeds']) + 1}/{len(r['seeds']) + 1}"]
    return {
        "base_seed": params.base.seed, "seeds": list(seeds),
        "clip": {"main": {k: (main_clip or {}).get(k) for k in ("zero_shot_mean", "zero_shot_min")},
                 **{str(r["seed"]): r["clip"] for r in runs}},
        "components": {str(r["seed"]): r["components"] for r in runs},
        "test_questions": {str(r["seed"]): r["test_questions"] for r in runs},
        "claims": list(rows),
        "steady": steady,
        "moved": [r["id"] for r in rows if r["seeds"] and r["id"] not in steady],
        "no_seed_rerun": [r["id"] for r in rows if not r["seeds"]],
    }


def what_we_see(metrics: Mapping[str, Any]) -> str:
    """"What we see" (Markdown), written from this run's metrics: CLIP per seed, which BRIT verdicts
    keep the main run's under every seed and which move."""
    seeds, base = metrics["seeds"], metrics["base_seed"]
    if not seeds:
        return ("No further CLIP seed ran (`brit_seeds.seeds` is empty, or `clip.pretrained` evaluates a released "
                "CLIP that nothing here trains): every BRIT claim's `holds` reads \"1 seed\".")
    clip = metrics["clip"]
    main = clip.get("main") or {}

    def fig(c: Mapping[str, Any]) -> str:
        return ("n/a" if c.get("zero_shot_mean") is None
                else f"{c['zero_shot_mean']:.3f} / {c['zero_shot_min']:.3f}")

    lines = [f"- **CLIP.** Held-out zero-shot accuracy, mean / min over attributes: the main run's (seed {base}) "
             f"{fig(main)}; " + ", ".join(f"seed {k} {fig(clip[str(k)])}" for k in seeds) + "."]
    by_id = {r["id"]: r for r in metrics["claims"]}
    if metrics["steady"]:
        lines.append(f"- **Keep the main run's verdict under every seed** ({len(metrics['steady'])}): "
                     + ", ".join(f"{i} ({by_id[i]['main']['verdict']}, {by_id[i]['holds']})"
                                 for i in metrics["steady"]) + ".")
    for i in metrics["moved"]:
        r = by_id[i]
        per_seed = "; ".join(f"seed {k} {run_cell(r['seeds'][str(k)])}" for k in seeds if str(k) in r["seeds"])
        lines.append(f"- **Moves with the seed: {i}** (holds {r['holds']}): the main run {run_cell(r['main'])}; "
                     f"{per_seed}.")
    if metrics["no_seed_rerun"]:
        lines.append(f"- **No seed rerun** ({len(metrics['no_seed_rerun'])}, Table 1's own run, which no seed "
                     f"reruns): {', '.join(metrics['no_seed_rerun'])}.")
    if not metrics["steady"] and not metrics["moved"]:
        lines.append("- No BRIT claim has a seed rerun: their traces were not written (see the log).")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the stage
def run(params: Params) -> BritSeedsResult:
    """Each further CLIP seed's runs (resumed per seed), their traces published for the claims, and
    BRIT's claims decided with them beside the main run's."""
    data_dir, out_dir = io.stage_dirs(STAGE)
    seeds = list(params.brit_seeds.seeds)
    if params.clip.pretrained and seeds:
        print(f"clip.pretrained = {params.clip.pretrained}: a released CLIP is evaluated, not trained here, so no "
              f"training seed redraws it; brit_seeds.seeds {seeds} skipped")
        seeds = []
    sets = claim_sets(params)
    wanted = claim_files(sets)
    runs, timings = [], {}
    for k in seeds:
        got = seed_run(params, k, checkpoint_dir(STAGE, f"seed_{k}"))
        written = publish(checkpoint_dir(STAGE, f"seed_{k}"), k, wanted, io.DATA)
        how = "read back" if got["reused"] else f"{got['seconds']:.0f} s"
        print(f"seed {k}: {len(written)} trace files in data/{STAGE}/traces ({how})", flush=True)
        timings[str(k)] = {key: got[key] for key in ("seconds", "reused", "clip_trained")}
        runs.append({key: got[key] for key in ("seed", "clip", "components", "test_questions")})
    io.write_json(data_dir / SEEDS_FILE, runs)

    rep = params.report
    decisions = claims.evaluate(io.DATA, rep.alpha, rep.power, rep.bootstrap, params.base.seed, (),
                                papers=("BRIT",), margin=rep.stability_margin, sets=sets,
                                max_format_errors=rep.max_format_errors)["claims"]
    rows = claim_runs(decisions)
    main_file = io.RESULTS / "clip" / "metrics.json"
    main_clip = io.read_json(main_file) if main_file.exists() else None
    tables = {"clip": clip_table(runs, main_clip, params.base.seed),
              "claims": claims_table(rows, seeds, params.base.seed)}
    figures = {"seeds": seeds_figure(rows, seeds, params.base.seed)}
    io.save_figure(figures["seeds"], out_dir / "seeds.png", dpi=110)
    metrics = seeds_metrics(runs, rows, main_clip, params, seeds)
    artifacts = {"traces": data_dir / "traces", "seeds": data_dir / SEEDS_FILE,
                 "metrics": io.write_json(out_dir / "metrics.json", metrics),
                 "timings": io.write_json(out_dir / "timings.json", timings), "figure": out_dir / "seeds.png"}
    return BritSeedsResult(metrics=metrics, tables=tables, figures=figures, artifacts=artifacts, runs=runs,
                           decisions=decisions)
