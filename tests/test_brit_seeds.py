"""Stage `brit_seeds`: further CLIP seeds' traces are found and counted by the claims' `holds`, a
finished seed is read back instead of rerun, and only the traces a claim reads are published."""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from pathlib import Path

import pytest
import yaml
from conftest import redirect_io
from test_claims import infoseek, spec, traces, world

from mmrag import config, io
from mmrag.corpora.passages import Chunking
from mmrag.evaluate import claims, evidence
from mmrag.params import ConfigError
from mmrag.schema import Trace
from mmrag.stages import brit_seeds
from mmrag.stages import clip as clip_stage
from mmrag.world.files import lexical_similarity, write_world

ROOT = Path(__file__).resolve().parents[1]
WHY = "CLIP's further seeds, retrained in stage brit_seeds"


def stage_params(*overrides: str) -> brit_seeds.Params:
    return brit_seeds.Params.from_raw(config.apply_overrides(config.read_raw(), list(overrides)))


def clip_prereg(tmp_path: Path, *entries: dict) -> claims.Prereg:
    """claims.yaml's rules with the clip seed source kept in brit_seeds, and ``entries`` as its claims."""
    rules = copy.deepcopy(claims.load_prereg().raw["rules"])
    rules["seed_sources"]["clip"] = {"stage": "brit_seeds", "why": WHY}
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"rules": rules, "claims": list(entries), "diagnostics": []}, sort_keys=False))
    return claims.load_prereg(path)


# --------------------------------------------------------------------------- the registry finds the seeds
def test_a_clip_seed_rerun_is_read_from_the_stage_its_source_names(tmp_path):
    # main run: SFT right on 50 of 100, the base on 8 (reproduced); seed 1 keeps it, seed 2 loses the effect
    qs = infoseek(100)
    world(tmp_path, qs, {"mmr2_sft": [1] * 50 + [0] * 50, "mmr2_base": [1] * 8 + [0] * 92})
    io.write_traces("brit_seeds", "mmr2_sft@seed1", "infoseek", traces(qs, "s", [1] * 48 + [0] * 52), tmp_path)
    io.write_traces("brit_seeds", "mmr2_sft@seed2", "infoseek", traces(qs, "s", [1] * 8 + [0] * 92), tmp_path)
    # a seed file in the claim's own stage folder is not this source's: not counted
    io.write_traces("two_axis_eval", "mmr2_sft@seed3", "infoseek", traces(qs, "s", [0] * 100), tmp_path)
    pre = clip_prereg(tmp_path, spec(seeds="clip"))
    got = claims.evaluate(tmp_path, 0.05, 0.8, 500, 1, [], prereg=pre)["claims"][0]
    assert got["verdict"] == "reproduced" and got["seeds"] == {"1": "reproduced", "2": "contradicted"}
    assert got["holds"] == "2/3" and "data/brit_seeds/traces" in got["holds_reason"]
    runs = got["extra"]["seed_runs"]
    assert runs["1"]["estimate"] == pytest.approx(0.40) and runs["2"]["estimate"] == pytest.approx(0.0)
    assert runs["2"]["verdict"] == "contradicted" and runs["2"]["n"] == 100


def test_a_claim_without_a_seed_rerun_says_why_from_its_source(tmp_path):
    qs = infoseek(40)
    world(tmp_path, qs, {"mmr2_sft": [1] * 20 + [0] * 20, "mmr2_base": [0] * 40})
    got = claims.evaluate(tmp_path, 0.05, 0.8, 300, 1, [], prereg=clip_prereg(tmp_path, spec(seeds="clip")))
    only = got["claims"][0]
    assert only["holds"] == "1 seed" and only["holds_reason"] == WHY and "seed_runs" not in only["extra"]


def test_the_repositorys_clip_seeds_live_in_this_stage():
    pre = claims.load_prereg()
    assert pre.seed_stage("clip", "brit_linking") == brit_seeds.STAGE
    assert pre.seed_stage("policy", "two_axis_eval") == "two_axis_eval"  # no stage named: the claim's own
    assert "trained once" in pre.seed_reason("policy")


# --------------------------------------------------------------------------- what a seed publishes
def test_only_the_traces_a_seed_claim_reads_are_published_under_seed_names(tmp_path):
    work, data = tmp_path / "work", tmp_path / "data"
    for system, qset in (("brit__ca_ls_si", "brit_retrieval"), ("text_enc__clip_top_k", "brit_claim"),
                         ("text_enc__clip_top_k", "brit_nea_orig"), ("bm25_top_k", "brit_retrieval")):
        io.write_traces("brit_linking", system, qset, [Trace("q1", system, "a")], work)
    wanted = brit_seeds.claim_files(claims.WORLD_SETS)
    assert {("brit__ca_ls_si", "brit_retrieval"), ("text_enc__clip_top_k", "brit_nea_orig"),
            ("w_o_ca", "brit")} <= wanted
    assert not any(s.startswith(("dnc__", "mmr2_")) for s, _ in wanted), "only claims whose seeds live here"
    written = brit_seeds.publish(work, 2, wanted, data)
    assert sorted(p.name for p in written) == ["brit__ca_ls_si@seed2__brit_retrieval.jsonl",
                                               "text_enc__clip_top_k@seed2__brit_claim.jsonl",
                                               "text_enc__clip_top_k@seed2__brit_nea_orig.jsonl"]
    assert all(p.parent == data / "brit_seeds" / "traces" for p in written)


def test_the_evidence_pack_carries_the_seed_traces_so_a_clone_recounts_holds(tmp_path):
    data = tmp_path / "data"
    io.write_traces("brit_linking", "brit__ca_ls_si", "brit_retrieval", [Trace("q1", "s", "a")], data)
    io.write_traces("brit_seeds", "brit__ca_ls_si@seed1", "brit_retrieval", [Trace("q1", "s", "b")], data)
    manifest = evidence.pack(data, tmp_path / "ev", [])
    assert "brit_seeds/traces/brit__ca_ls_si@seed1__brit_retrieval.jsonl" in manifest
    with evidence.unpacked(tmp_path / "ev") as restored:
        assert claims.seed_runs("brit_seeds", ["brit__ca_ls_si"], ["brit_retrieval"], restored) == [1]


def test_base_seed_and_repeated_seeds_are_refused_with_the_fix():
    with pytest.raises(ConfigError, match="holds base.seed 0, the main run's own"):
        stage_params("base.seed=0", "brit_seeds.seeds=[0, 1]")
    with pytest.raises(ConfigError, match="lists a seed twice"):
        stage_params("brit_seeds.seeds=[1, 1]")
    assert stage_params("brit_seeds.seeds=[]").brit_seeds.seeds == ()


# --------------------------------------------------------------------------- resuming per seed
@pytest.fixture()
def counted(tmp_path, monkeypatch):
    """A data folder with a corpus and models, and seed_run's three steps replaced by counters."""
    data = tmp_path / "data"
    (data / "world" / "questions").mkdir(parents=True)
    (data / "world" / "documents.jsonl").write_text('{"id": "d1"}\n')
    (data / "models" / "enc").mkdir(parents=True)
    (data / "models" / "enc" / "READY").write_text("ok")
    monkeypatch.setattr(io, "DATA", data)
    calls: Counter = Counter()

    def train(params, seed, clip_dir):
        calls["clip"] += 1
        return {"zero_shot_mean": 0.9, "zero_shot_min": 0.8, "trained": True, "seconds": 1.0}

    def graphs(params, work):
        calls["graphs"] += 1
        return {"components": 1}

    def retrieval(params, work, table1=True):
        calls["traces"] += 1
        io.write_traces("brit_linking", "brit__ca_ls_si", "brit_retrieval", [Trace("q1", "s", "a")], work)
        return 7

    monkeypatch.setattr(brit_seeds, "train_clip", train)
    monkeypatch.setattr(brit_seeds, "build_graphs", graphs)
    monkeypatch.setattr(brit_seeds, "retrieval_traces", retrieval)
    return data, calls


def test_a_finished_seed_is_read_back_and_a_changed_setting_reruns_it_afresh(counted, tmp_path):
    data, calls = counted
    params, work = stage_params(), tmp_path / "work"
    first = brit_seeds.seed_run(params, 1, work)
    assert calls == {"clip": 1, "graphs": 1, "traces": 1} and first["reused"] is False
    assert (work / "world").resolve() == (data / "world").resolve(), "the corpus is linked, not copied"
    again = brit_seeds.seed_run(params, 1, work)
    assert calls == {"clip": 1, "graphs": 1, "traces": 1} and again["reused"] is True
    assert {k: again[k] for k in ("seed", "clip", "components", "test_questions")} == \
           {k: first[k] for k in ("seed", "clip", "components", "test_questions")}
    stale = io.write_traces("brit_linking", "gone", "brit_retrieval", [Trace("q1", "s", "a")], work)
    moved = dataclasses.replace(params, brit_linking=dataclasses.replace(params.brit_linking, top_k=3))
    assert brit_seeds.seed_run(moved, 1, work)["reused"] is False and calls["traces"] == 2
    assert not stale.exists(), "an earlier run's trace is never published as this one's"
    (data / "world" / "documents.jsonl").write_text('{"id": "d2"}\n')  # the corpus changed
    assert brit_seeds.seed_run(moved, 1, work)["reused"] is False and calls["traces"] == 3


def test_what_we_see_names_the_claims_that_move_with_the_seed():
    run = {"estimate": 0.2, "ci_low": 0.1, "ci_high": 0.3, "n": 100, "verdict": "reproduced"}
    flat = {**run, "estimate": 0.02, "ci_low": -0.05, "ci_high": 0.09, "verdict": "inconclusive"}
    rows = [{"id": "brit.a", "claim": "a", "main": run, "seeds": {"1": run, "2": run}, "holds": "3/3"},
            {"id": "brit.b", "claim": "b", "main": run, "seeds": {"1": flat, "2": run}, "holds": "2/3"},
            {"id": "brit.c", "claim": "c", "main": run, "seeds": {}, "holds": "1 seed"}]
    runs = [{"seed": k, "clip": {"zero_shot_mean": 0.99, "zero_shot_min": 0.9}, "components": {},
             "test_questions": 100} for k in (1, 2)]
    metrics = brit_seeds.seeds_metrics(runs, rows, {"zero_shot_mean": 0.98, "zero_shot_min": 0.85},
                                       stage_params(), [1, 2])
    assert metrics["steady"] == ["brit.a"] and metrics["moved"] == ["brit.b"]
    assert metrics["no_seed_rerun"] == ["brit.c"]
    text = brit_seeds.what_we_see(metrics)
    assert "brit.a (reproduced, 3/3)" in text and "Moves with the seed: brit.b** (holds 2/3)" in text
    assert "seed 1 +0.020 [-0.050, +0.090] inconclusive" in text and "0.980 / 0.850" in text
    table = brit_seeds.claims_table(rows, [1, 2], 0)
    assert list(table.columns) == ["main (seed 0)", "seed 1", "seed 2", "holds"]
    assert table.loc["brit.c", "seed 1"] == "–"


# --------------------------------------------------------------------------- the stage on a tiny world
TINY_WORLD = dict(domains=2, products_per_domain=3, people_per_domain=2, places_per_domain=1, events_per_domain=1,
                  image_size=32, brit_questions=40, brit_nea_pairs=6, mmqa_questions=20, mmcoqa_conversations=4,
                  infoseek_questions=20, validation_threshold=0.9)
TINY = ["clip.image_size=32", "clip.render_size=32", "clip.embed_dim=32", "clip.vision_width=8",
        "clip.text_width=32", "clip.text_layers=1", "clip.text_heads=2", "clip.extra_images=32", "clip.steps=2",
        "clip.batch_size=16", "clip.warmup_steps=1", "clip.log_every=1", "clip.eval_every=100",
        "clip.checkpoint_every=0", "brit_graph.llm_sample_pages=0", "brit_linking.reader=similarity",
        "brit_linking.calibration_grid=[0.5]", "brit_linking.qa_questions=6", "brit_linking.claim_questions=8",
        "report.bootstrap=200", "brit_seeds.seeds=[1]"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(params, data, results) of a tiny world, with io.DATA and io.RESULTS redirected there."""
    tmp = tmp_path_factory.mktemp("seeds")
    data, results = tmp / "data", tmp / "results"
    mp = pytest.MonkeyPatch()
    redirect_io(mp, data, results)
    raw = config.read_raw()
    cfg = dataclasses.replace(config.from_dict(raw).world, **TINY_WORLD)
    write_world(cfg, 7, data / "world", lexical_similarity, chunking=Chunking.of(config.from_dict(raw).knowledge_map))
    (data / "models").symlink_to((ROOT / "data" / "models").resolve(), target_is_directory=True)
    yield stage_params(*TINY), data, results
    mp.undo()


@pytest.mark.slow
def test_a_seed_run_writes_traces_the_claims_count_and_a_rerun_reuses_it(tiny, monkeypatch):
    params, data, results = tiny
    first = brit_seeds.run(params)
    published = sorted(p.name for p in (data / "brit_seeds" / "traces").iterdir())
    assert "brit__ca_ls_si@seed1__brit_retrieval.jsonl" in published
    assert "text_enc__clip_top_k@seed1__brit_claim.jsonl" in published
    assert all("@seed1__" in n for n in published) and (results / "brit_seeds" / "seeds.png").exists()
    assert first.metrics["seeds"] == [1] and set(first.metrics["clip"]) == {"main", "1"}

    # the main run's traces as seed 1's own: every claim with a seed rerun must hold 2/2
    for f in (data / "brit_seeds" / "traces").iterdir():
        io.write_bytes(io.trace_path("brit_linking", *io.trace_name(f.name.replace("@seed1", "")), data),
                       f.read_bytes())
    sets = brit_seeds.claim_sets(params)
    decided = {d["id"]: d for d in claims.compute(data, 0.05, 0.8, 300, 0, (), papers=("BRIT",), sets=sets)}
    rerun = [d for d in decided.values() if d["seeds"]]
    assert {"brit.recall_vs_baseline", "brit.table1_accuracy", "brit.nea_brit_improves"} <= {d["id"] for d in rerun}
    assert {d["holds"] for d in rerun} == {"2/2"}
    assert decided["brit.table1_ca"]["holds"] == "1 seed", "Table 1's own run is not rerun by a seed"

    # the evidence pack carries the seed traces: a clone decides the same holds
    evidence.pack(data, data.parent / "evidence", sets.all())
    with evidence.unpacked(data.parent / "evidence") as packed:
        again = {d["id"]: d["holds"] for d in claims.compute(packed, 0.05, 0.8, 300, 0, (), papers=("BRIT",),
                                                              sets=sets)}
    assert again == {i: d["holds"] for i, d in decided.items()}

    # a rerun reads the finished seed back: nothing trained, nothing rebuilt
    def refuse(*args, **kw):
        raise AssertionError("a finished seed was run again")

    monkeypatch.setattr(brit_seeds, "train_clip", refuse)
    monkeypatch.setattr(brit_seeds, "build_graphs", refuse)
    second = brit_seeds.run(params)
    assert second.metrics["moved"] == [] and "brit.recall_vs_baseline" in second.metrics["steady"]
    assert sorted(p.name for p in (data / "brit_seeds" / "traces").iterdir()) == published
    assert io.read_json(results / "brit_seeds" / "timings.json")["1"]["reused"] is True


@pytest.mark.slow
def test_a_changed_brit_setting_reruns_the_seed_on_its_saved_clip(tiny, monkeypatch):
    params, data, _ = tiny
    work = data / ".checkpoints" / "brit_seeds" / "seed_1"
    if not (work / "clip" / "meta.json").exists():
        brit_seeds.seed_run(params, 1, work)

    def refuse(*args, **kw):
        raise AssertionError("CLIP was retrained though nothing it depends on changed")

    monkeypatch.setattr(clip_stage, "train_encoder", refuse)
    moved = dataclasses.replace(params, brit_linking=dataclasses.replace(params.brit_linking, top_k=3))
    got = brit_seeds.seed_run(moved, 1, work)
    assert got["reused"] is False and got["clip_trained"] is False
    assert io.trace_path("brit_linking", "brit__ca_ls_si", "brit_retrieval", work).exists()
