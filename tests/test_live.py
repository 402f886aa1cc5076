"""``bin/py -m mmrag add``: pages added live reach BRIT's graph, the KnowledgeMap's units and BM25 without a
rebuild; the replayed graph equals the graph built from every page; re-adding is idempotent, --reset
restores, a bad file is skipped with its reason, and no stage's output (or import graph) is touched.

The stages' artifacts are built here from test_brit's pages with its test doubles (hashing encoders,
the line-format extractor, colour CLIP), so every figure has a known answer and nothing loads a model.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from PIL import Image as PILImage
from test_brit import COLOURS, FakeClip, LineExtractor, build, hash_encode, retriever, three_pages
from test_ingest import tiny_options

from mmrag import ask, deps, io, live
from mmrag.__main__ import main as mmrag_main
from mmrag.brit.graph import Encoders, UnifiedGraph, graphs_equal
from mmrag.corpora.layout import write_corpus
from mmrag.corpora.passages import Chunking, to_passages
from mmrag.mmr2 import knowledge_map as kmaps
from mmrag.schema import Trace

ROOT = io.ROOT
CHUNKING = Chunking(1600, 800, 100)
KORRO = ("<html><head><title>Korro</title></head><body><h1>Korro</h1><p>Korro | located in | {place}</p>"
         "<p>Korro | built by | Tamsin Vey</p><img src='korro.png' alt='[Korro] tower at night'></body></html>")


class HashEncoder:
    """The sentence-transformers interface over test_brit's hashing encoder (the map's text encoder)."""

    def encode(self, texts, **_):
        return hash_encode(list(texts))


@pytest.fixture()
def stages(tmp_path):
    """A data folder as the stages leave it: corpus ``world`` (test_brit's pages 0 and 1), BRIT's graph
    of it and a KnowledgeMap with one unit per page; returns (data folder, corpus folder, builders)."""
    data = tmp_path / "data"
    corpus_dir = data / "world"
    _, docs = three_pages(corpus_dir)
    base = docs[:2]
    write_corpus(corpus_dir, base, {})
    build(corpus_dir, base).save(data / "brit_graph" / "world")
    passages = to_passages(base, *CHUNKING)
    X = HashEncoder().encode([kmaps.passage_text(p) for p in passages])
    labels = np.asarray([int(p.doc_id[1:]) for p in passages])
    kmap = kmaps.KnowledgeMap.build(passages, X, labels, top_keywords=4, n_representatives=1, n_card_titles=16)
    kmap.save(data / "knowledge_map" / "world")
    io.write_json(data / "knowledge_map" / "world" / "meta.json", {"text_encoder": "hash"})
    b = live.Builders(tiny_options(), CHUNKING, 16, ("CA", "LS", "SI"),
                      graph_dir=data / "brit_graph" / "world", open_graph=lambda f: open_graph(f, corpus_dir),
                      graph_recipe={"encoders": "hash"},
                      map_dir=data / "knowledge_map" / "world",
                      open_map=lambda f: (kmaps.KnowledgeMap.load(f), HashEncoder()),
                      map_recipe={"text_encoder": "hash"})
    return data, corpus_dir, b


def open_graph(folder, corpus_dir) -> UnifiedGraph:
    return UnifiedGraph.load(folder, Encoders(hash_encode, FakeClip(), corpus_dir), LineExtractor(), si_top=2)


def korro_page(folder, place: str = "Dunvale"):
    """An HTML page (with its picture beside it) that states where Korro is."""
    folder.mkdir(parents=True, exist_ok=True)
    PILImage.new("RGB", (32, 32), COLOURS["green"]).save(folder / "korro.png")
    page = folder / "korro.html"
    page.write_text(KORRO.format(place=place))
    return page


def laid_over(data, corpus_dir, b):
    """(the stage's graph with the overlay replayed, the map extended by it, the overlay), as ask lays them."""
    overlay = live.read_overlay(live.live_dir(data, "world"))
    graph = open_graph(b.graph_dir, corpus_dir)
    live.apply_graph(graph, overlay.graph)
    kmap = live.extend_map(kmaps.KnowledgeMap.load(b.map_dir), overlay.map, 16)
    return graph, kmap, overlay


def test_an_added_page_is_found_by_brit_bm25_and_the_knowledge_map(stages, tmp_path):
    data, corpus_dir, b = stages
    folder = live.live_dir(data, "world")
    done = live.add([korro_page(tmp_path / "pages")], folder, corpus_dir, b)
    assert [(f.status, [d.id for d in f.documents]) for f in done.files] == [("added", ["korro"])]
    # the new page's one component: 3 entities (Korro, Dunvale, Tamsin Vey), 2 relations, its picture
    assert done.graph == {"text_nodes": 3, "text_edges": 2, "components": 1, "images": 1,
                          "links": done.graph["links"]} and done.graph["links"] > 0
    graph, kmap, overlay = laid_over(data, corpus_dir, b)
    r = retriever(graph, corpus_dir).retrieve("Where is [Korro] located?")
    assert r.texts[0] == "Korro located in Dunvale" and r.images[0] == "korro#img0"
    # BM25 over the corpus and the live page, as ask builds it
    ctx = ask.context(data)
    assert [d.id for d in ctx.documents("world")] == ["d0", "d1", "korro"]
    passages, ranker = ask.bm25_index(ctx, "world")
    assert passages[ranker.top("Where is Korro located?", 1)[0]].doc_id == "korro"
    # the KnowledgeMap: the page's one chunk sits in a unit and its search finds it there
    (unit,) = overlay.map.units
    assert done.units == {unit: 1} and kmap.unit_of("korro#p0") == unit
    assert kmap.units[kmap.unit_ids.index(unit)].size == 1 + sum(p.doc_id != "korro" and kmap.unit_of(p.id) == unit
                                                                 for p in kmap.passages)
    v = HashEncoder().encode(["Korro located in Dunvale"])[0]
    assert kmap.search(unit, v, 1)[0].passage.doc_id == "korro"
    lines = live.summary(done, "world", "data/live/world", b)
    assert lines[0] == f"+ {tmp_path / 'pages' / 'korro.html'}: added korro ('Korro'): 1 section, 1 image, 0 tables"
    assert f"KnowledgeMap: 1 chunk -> {unit} x1" in lines
    assert any(ln.startswith("BRIT graph (CA+LS+SI): +3 nodes, +2 edges, +1 image, +") and ln.endswith(
        "image links, +1 disjoint graph") for ln in lines), lines


def test_a_page_that_joins_the_corpus_lands_in_its_unit(stages, tmp_path):
    data, corpus_dir, b = stages
    page = tmp_path / "vantor.md"
    page.write_text("# Vantor sales\n\nVantor | sold in | Kelmar\n\nVantor | shown at | Orlith Expo\n")
    done = live.add([page], live.live_dir(data, "world"), corpus_dir, b)
    kmap = kmaps.KnowledgeMap.load(b.map_dir)
    assert done.units == {kmap.unit_of("d0#p0"): 1}  # page 0 is the one about the Vantor
    assert done.graph["components"] == 0  # it joins page 0's graph through the Vantor
    graph, _, _ = laid_over(data, corpus_dir, b)
    r = retriever(graph, corpus_dir).retrieve("Where was [Vantor] sold?")
    assert "Vantor sold in Kelmar" in r.texts and "Vantor designed by Ada Quill" in r.texts


def test_the_replayed_graph_equals_the_graph_built_from_every_page(stages, tmp_path):
    data, corpus_dir, b = stages
    vantor = tmp_path / "pages" / "vantor.md"
    vantor.parent.mkdir()
    vantor.write_text("# Vantor sales\n\nVantor | sold in | Kelmar\n")
    live.add([korro_page(tmp_path / "pages"), vantor], live.live_dir(data, "world"), corpus_dir, b)
    graph, _, overlay = laid_over(data, corpus_dir, b)
    base = three_pages(tmp_path / "again")[1][:2]
    every = build(corpus_dir, [*overlay.documents, *base])
    assert graphs_equal(graph, every) == []
    assert set(graph.docs) == {"d0", "d1", "korro", "vantor"}


def overlay_files(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_adding_again_is_idempotent_and_a_changed_file_replaces_its_page(stages, tmp_path):
    data, corpus_dir, b = stages
    folder = live.live_dir(data, "world")
    page = korro_page(tmp_path / "pages")
    live.add([page], folder, corpus_dir, b)
    first = overlay_files(folder)
    again = live.add([page, tmp_path / "pages" / ".." / "pages" / "korro.html"], folder, corpus_dir, b)
    assert [f.status for f in again.files] == ["unchanged"] and again.live == 1
    assert overlay_files(folder) == first
    assert live.summary(again, "world", "data/live/world", b)[0].endswith("unchanged since it was added (same bytes): "
                                                                        "nothing to do")
    korro_page(tmp_path / "pages", place="Brennmoor")
    changed = live.add([page], folder, corpus_dir, b)
    assert [(f.status, [d.id for d in f.documents]) for f in changed.files] == [("replaced", ["korro"])]
    graph, kmap, overlay = laid_over(data, corpus_dir, b)
    assert [d.id for d in overlay.documents] == ["korro"] and len(overlay.map.passages) == 1
    facts = [t.object for e in overlay.graph.entries for t in e.triplets]
    assert "Brennmoor" in facts and "Dunvale" not in facts and "dunvale" not in graph.g
    assert sum(p.doc_id == "korro" for p in kmap.passages) == 1
    assert graphs_equal(graph, build(corpus_dir, [*three_pages(tmp_path / "again")[1][:2], *overlay.documents])) == []


def test_reset_removes_the_overlay_and_ask_reads_the_stages_artifacts_again(stages, tmp_path):
    data, corpus_dir, b = stages
    folder = live.live_dir(data, "world")
    before = overlay_files(data)
    live.add([korro_page(tmp_path / "pages")], folder, corpus_dir, b)
    assert live.reset(folder) == 1 and not folder.exists()
    assert overlay_files(data) == {k: v for k, v in before.items()}  # the stages' outputs never changed
    assert live.read_overlay(folder) is None and live.reset(folder) == 0
    assert [d.id for d in ask.context(data).documents("world")] == ["d0", "d1"]


def test_a_bad_file_is_skipped_with_its_reason_and_the_good_ones_are_added(stages, tmp_path):
    data, corpus_dir, b = stages
    folder = live.live_dir(data, "world")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    (tmp_path / "empty.html").write_text("<html><body><p>   </p></body></html>")
    (tmp_path / "notes.txt").write_text("Korro | located in | Dunvale")
    files = [tmp_path / "broken.pdf", tmp_path / "empty.html", tmp_path / "notes.txt", tmp_path / "gone.md",
             korro_page(tmp_path / "pages")]
    done = live.add(files, folder, corpus_dir, b)
    assert [f.status for f in done.files] == ["skipped"] * 4 + ["added"]
    lines = live.summary(done, "world", "data/live/world", b)
    skipped = [ln for ln in lines if ln.startswith("- ")]
    assert [ln.split(": skipped: ")[1].split(" (")[0] for ln in skipped] == [
        "corrupt_pdf", "empty_document", "unsupported_file", "unreadable_file"]
    assert "no such file" in skipped[3] and "add .html, .md, .pdf or .zim" in skipped[2]
    assert live.read_overlay(folder).ids == {"korro"}
    # only bad files: nothing is written, and the old overlay stays
    again = live.add([tmp_path / "broken.pdf"], folder, corpus_dir, b)
    assert again.graph is None and live.read_overlay(folder).ids == {"korro"}


def test_a_page_the_corpus_already_has_is_a_duplicate_and_a_name_taken_gets_a_suffix(stages, tmp_path):
    data, corpus_dir, b = stages
    (tmp_path / "d0.md").write_text("# Kelmar\n\nKelmar | lies in | Dunvale\n")
    copy = tmp_path / "copy" / "korro.html"
    korro_page(copy.parent)
    done = live.add([tmp_path / "d0.md", korro_page(tmp_path / "pages"), copy], live.live_dir(data, "world"),
                    corpus_dir, b)
    assert [[d.id for d in f.documents] for f in done.files] == [["d0_2"], ["korro"], []]
    assert "duplicate_document" in done.files[2].reasons()[0] and "duplicate_id" in done.files[0].reasons()[0]


def test_ask_leaves_out_a_part_computed_with_other_models_and_says_why(stages, tmp_path):
    data, corpus_dir, b = stages
    live.add([korro_page(tmp_path / "pages")], live.live_dir(data, "world"), corpus_dir, b)
    ctx = ask.context(data)
    got, notes = ask.live_part(ctx, "world", "map", {"text_encoder": "another"}, "the KnowledgeMap world")
    assert got is None and "other text_encoder than params name now" in notes[0]
    got, notes = ask.live_part(ctx, "world", "map", {"text_encoder": "hash"}, "the KnowledgeMap world")
    assert got is not None and notes == []
    b.map_recipe = {"text_encoder": "another"}  # the next add recomputes the stale part, nothing new needed
    assert live.stale(live.read_overlay(live.live_dir(data, "world")), b)
    redone = live.add([tmp_path / "pages" / "korro.html"], live.live_dir(data, "world"), corpus_dir, b)
    assert redone.units is not None and live.read_overlay(live.live_dir(data, "world")).map.recipe == b.map_recipe


def test_the_answer_header_counts_the_live_documents():
    t = Trace("q1", "brit", "Dunvale", meta={"wall_seconds": 0.5, "live_documents": 2})
    assert ask.header("brit", t).endswith(" · +2 documents added live")
    assert "added live" not in ask.header("brit", Trace("q1", "brit", "x", meta={"wall_seconds": 0.5}))


def test_add_without_the_stages_artifacts_is_one_line_naming_the_stage(tmp_path, capsys):
    page = korro_page(tmp_path / "pages")
    (tmp_path / "data").mkdir()
    assert mmrag_main(["add", str(page), "--data", str(tmp_path / "data")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: no corpus in {tmp_path / 'data' / 'world'} — run `bin/py -m dvc repro world`"]
    write_corpus(tmp_path / "data" / "world", [], {})
    assert mmrag_main(["add", str(page), "--data", str(tmp_path / "data")]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "`bin/py -m dvc repro brit_graph`" in line and "`bin/py -m dvc repro knowledge_map`" in line
    assert not (tmp_path / "data" / "live" / "world").exists()


@pytest.mark.parametrize("args, says", [
    ([], "name the files to add, or --reset"),
    (["x.md", "--reset"], "name the files to add, or --reset"),
    (["x.md", "--corpus", "mmqa"], "unknown corpus 'mmqa'"),
], ids=["nothing", "both", "corpus"])
def test_bad_add_input_is_one_line_and_exit_2(args, says, capsys):
    assert mmrag_main(["add", *args]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and says in line


def test_reset_from_the_command_line(stages, tmp_path, capsys):
    data, corpus_dir, b = stages
    live.add([korro_page(tmp_path / "pages")], live.live_dir(data, "world"), corpus_dir, b)
    assert mmrag_main(["add", "--reset", "--data", str(data)]) == 0
    assert "removed the live overlay" in capsys.readouterr().out and not live.live_dir(data, "world").exists()
    assert mmrag_main(["add", "--reset", "--data", str(data)]) == 0
    assert "nothing to remove" in capsys.readouterr().out


def test_the_overlay_is_no_stages_business():
    """No stage imports the overlay or the commands (an edit to them reruns nothing), and no DVC output
    covers data/live."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    every = deps.closure([f"mmrag.stages.{s}" for s in stages if deps.module_file(f"mmrag.stages.{s}")],
                         [deps.notebook_code(p) for p in notebooks])  # what any stage runs, in one pass
    assert not {ROOT / "src" / "mmrag" / f for f in ("live.py", "ask.py", "__main__.py")} & every
    outs = [next(iter(o)) if isinstance(o, dict) else o for s in stages.values() for o in s.get("outs", [])]
    assert not [o for o in outs if o.rstrip("/") in ("data", "data/live") or o.startswith("data/live")]


# --------------------------------------------------------------------------- with the stages' own models
KORRO_TOWER = ("<html><head><title>Korro Tower</title></head><body><h1>Korro Tower</h1><p>Korro Tower is located in "
               "Dunvale. Korro Tower was built by Tamsin Vey.</p><figure><img src='korro.png'>"
               "<figcaption>Korro Tower at night</figcaption></figure></body></html>")


@pytest.fixture()
def folder_stages(tmp_path, monkeypatch):
    """A folder corpus with the graph and the map the stages would build (spaCy, MiniLM, a tiny CLIP);
    returns (data folder, the -S overrides that name them)."""
    import dataclasses

    from test_text_only import tiny_clip

    from mmrag.brit.graph import build_graph
    from mmrag.corpora import ingest
    from mmrag.models import generation, registry
    from mmrag.stages.brit_graph import load_builders

    data = tmp_path / "data"
    data.mkdir()
    (data / "models").symlink_to(ROOT / "data" / "models")  # ask resolves models under its data folder
    for module, name in ((registry, "MODELS_DIR"), (generation, "MODELS_DIR"), (io, "DATA")):
        monkeypatch.setattr(module, name, getattr(module, name))  # restored after ask points them at data
    monkeypatch.setattr(registry.resolve, "__defaults__", registry.resolve.__defaults__)
    src = tmp_path / "pages"
    src.mkdir()
    (src / "vantor.html").write_text("<html><body><h1>Vantor X2</h1><p>The Vantor X2 was designed by Ada Quill, "
                                     "who works for Helix Labs.</p></body></html>")
    (src / "zeph.md").write_text("# Zeph Q4\n\nThe Zeph Q4 was designed by Ada Quill. It is made in Brennmoor.\n")
    docs, _, _ = ingest.ingest_folder(src, data / "folder", tiny_options())
    overrides = [f"models.clip={tiny_clip(tmp_path / 'clip')}", "knowledge_map.corpora=[folder]",
                 "brit_linking.reader=similarity"]
    ctx = ask.context(data, None, overrides)
    ctx.ready()
    p = ctx.params
    cfg = dataclasses.replace(p.brit_graph, corpus="folder")
    extractor, enc, _ = load_builders(cfg, p.models, p.base, data / "folder", p.inference)
    build_graph(docs, enc, extractor, cfg.si_top).save(data / "brit_graph" / "folder")
    encoder = registry.load_text_encoder(p.models.text_encoder, allow_network=False, device="cpu")
    passages = to_passages(docs, *Chunking.of(p.knowledge_map))
    X = kmaps.embed_texts(encoder, [kmaps.passage_text(x) for x in passages])
    labels = np.asarray([[d.id for d in docs].index(x.doc_id) for x in passages])
    kmaps.KnowledgeMap.build(passages, X, labels, top_keywords=4, n_representatives=1,
                             n_card_titles=16).save(data / "knowledge_map" / "folder")
    io.write_json(data / "knowledge_map" / "folder" / "meta.json", {"text_encoder": p.models.text_encoder})
    return data, overrides


@pytest.mark.slow
def test_add_then_ask_with_the_stages_models(folder_stages, tmp_path, capsys):
    """The command line end to end: add a page (and a broken one), then BRIT, BM25 and MM-R2's map find it."""
    data, overrides = folder_stages
    page = korro_page(tmp_path / "new")
    page.write_text(KORRO_TOWER)
    (tmp_path / "new" / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    sets = [x for o in overrides for x in ("-S", o)]
    assert mmrag_main(["add", str(page), str(tmp_path / "new" / "broken.pdf"), "--corpus", "folder",
                       "--data", str(data), *sets]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("added korro ('Korro Tower'): 1 section, 1 image, 0 tables")
    assert out[1].endswith("skipped: corrupt_pdf (PDF cannot be parsed or is encrypted -> file skipped; "
                           "PdfStreamError)")
    assert out[2].startswith("BRIT graph (CA+LS+SI): +") and out[3].startswith("KnowledgeMap: 1 chunk -> U0")
    systems = ask.load_systems(["brit"], "folder", data, overrides=overrides, log=pytest.fail)
    trace = ask.ask("Where is Korro Tower located?", systems=systems)["brit"]
    assert trace.meta["live_documents"] == 1 and "korro" in trace.meta["evidence"]["pages"]
    assert ["Korro Tower", "is located in", "Dunvale", "korro#s0"] in trace.meta["subgraph"]["triplets"]
    ctx = systems["brit"].ctx
    passages, ranker = ask.bm25_index(ctx, "folder")
    assert passages[ranker.top("Where is Korro Tower located?", 1)[0]].doc_id == "korro"
    map_dir = ask.knowledge_map_dir(ctx, "folder")
    part, notes = ask.live_part(ctx, "folder", "map", live.map_recipe(map_dir, Chunking.of(ctx.params.knowledge_map)),
                                "the KnowledgeMap folder")
    kmap, encoder = kmaps.KnowledgeMap.open(map_dir, allow_network=False, device="cpu")
    kmap = live.extend_map(kmap, part, 16)
    q = kmaps.embed_texts(encoder, ["Where is Korro Tower located?"])[0]
    assert notes == [] and kmap.search(kmap.route(q, 1)[0], q, 1)[0].passage.id == "korro#p0"
