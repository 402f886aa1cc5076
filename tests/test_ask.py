"""bin/ask: bad input is one line and exit 2, a missing artifact names its stage, and on real
artifacts every system answers with a trace (models loaded once for the REPL's next question)."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import nbformat
import pytest

from mmrag import ask
from mmrag.__main__ import main as mmrag_main
from mmrag.schema import Document, Evidence, Image, Question, Section, Step, SubQuestion, Trace

ROOT = Path(__file__).resolve().parents[1]
ASK = str(ROOT / "bin" / "ask")


def run_ask(*args: str, stdin: str | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([ASK, *args], cwd=ROOT, input=stdin, text=True, capture_output=True, timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


@pytest.mark.parametrize("args, says", [
    (["   "], "empty question"),
    (["Who?", "--systems", "brit,gpt"], "unknown system 'gpt'"),
    (["Who?", "--corpus", "mmqa"], "unknown corpus 'mmqa'"),
    (["Who?", "--image", "/no/such/picture.png"], "cannot read image"),
    (["Who?", "--frobnicate"], "unrecognized arguments"),
    ([" ".join(["word"] * 5000)], "longer than the context window"),
    (["Who?", "-S", "brit_linking.engine=fast"], "brit_linking.engine = 'fast' is invalid"),
], ids=["empty", "system", "corpus", "no-image", "option", "too-long", "override"])
def test_bad_input_is_one_line_and_exit_2(args, says):
    assert says in one_line_error(run_ask(*args))


def test_an_unreadable_image_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "photo.png"
    bad.write_bytes(b"not a picture at all")
    assert "cannot read image" in one_line_error(run_ask("What is shown?", "--image", str(bad)))


def test_missing_artifacts_name_the_stage_to_run(tmp_path):
    (tmp_path / "data").mkdir()
    proc = run_ask("Who?", "--data", str(tmp_path / "data"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    for system, stage in [("brit", "brit_graph"), ("dnc", "toolagent_finetune"), ("mmr2", "mmr2_train"),
                          ("bm25", "world")]:
        line = next(ln for ln in lines if ln.startswith(f"{system}: "))
        assert f"`bin/py -m dvc repro {stage}`" in line, line
    assert "no adapter in" in next(ln for ln in lines if ln.startswith("dnc: "))


def test_another_corpus_names_the_override_that_builds_it(tmp_path):
    logged: list[str] = []
    got = ask.load_systems(["brit", "mmr2"], corpus="wiki", data=tmp_path, log=logged.append)
    assert got == {}
    assert "`bin/exp -S brit_graph.corpus=wiki brit_graph`" in logged[0]
    assert "mmr2_train" in logged[1]


def test_paths_in_params_follow_the_data_folder(tmp_path):
    assert ask.data_path(tmp_path, "data/clip") == tmp_path / "clip"
    assert ask.data_path(tmp_path, "data/mmr2_train/grpo/adapter") == tmp_path / "mmr2_train" / "grpo" / "adapter"
    assert ask.data_path(tmp_path, "configs/x.yaml") == ROOT / "configs" / "x.yaml"
    assert ask.data_path(tmp_path, "/abs/clip") == Path("/abs/clip")


def test_system_names_are_checked():
    assert ask.check_names("brit, BM25,brit", "world") == ["brit", "bm25"]
    with pytest.raises(ask.AskError, match="unknown system"):
        ask.check_names("", "world")


def docs() -> list[Document]:
    return [Document("doc-a", "Alpha", sections=[Section("doc-a-s00", "doc-a", "Intro", "Alpha is made by Beta.")],
                     images=[Image("img-1", "doc-a", "images/img-1.png", caption="a red alpha")]),
            Document("doc-b", "Beta", sections=[Section("doc-b-s00", "doc-b", "Intro", "Beta is a company.")])]


def test_evidence_points_at_pages_sections_images_and_passages():
    trace = Trace("q1", "mixed", "Beta", steps=[Step("retrieve", evidence=[
        Evidence("doc-a-s00", "triplet", "Alpha made by Beta"), Evidence("graph-node", "triplet", "Alpha"),
        Evidence("img-1", "image", "a red alpha"), Evidence("doc-b-s00#s0", "text", "Beta is a company."),
        Evidence("doc-b#p0", "passage", "Beta ...", doc_id="doc-b")])])
    ev = ask.evidence_of(trace, docs())
    assert ev == {"pages": ["doc-a", "doc-b"], "sections": ["doc-a-s00", "doc-b-s00"], "tables": [],
                  "images": ["img-1"], "passages": ["doc-b#p0"]}


def test_compact_traces_mark_gold_evidence():
    gold = {"doc-a-s00", "img-1"}
    brit = Trace("q1", "brit", "Beta", meta={"subgraph": {
        "triplets": [["Alpha", "is made by", "Beta", "doc-a-s00"]] * 2, "images": [["img-1", "a red alpha"]],
        "entities": ["Alpha"], "kept_graphs": 1}})
    lines = ask.trace_lines(brit, gold)
    assert "(Alpha) —[is made by]→ (Beta)   [doc-a-s00*]" in lines and len(lines) == 3  # duplicate kept once
    assert lines[-1].startswith("image img-1*")
    dnc = Trace("q1", "dnc__smollm2__ft", "Beta", steps=[
        Step("tool", target="TextQA", query="Who makes Alpha?", summary="Beta",
             evidence=[Evidence("doc-a-s00#s0", "text")], text="Sub-questions: 1) Who makes Alpha? [TextQA]"),
        Step("answer", text="[Answer: Beta]", summary="Beta")])
    assert ask.dnc_rows(dnc)[0] == {"#": 1, "sub-question": "Who makes Alpha?", "tool": "TextQA", "answer": "Beta",
                                    "evidence": ["doc-a-s00#s0"]}
    assert any("Who makes Alpha? → TextQA → Beta" in ln and "doc-a-s00#s0*" in ln for ln in ask.trace_lines(dnc, gold))
    mmr2 = Trace("q1", "mmr2", "Beta", steps=[
        Step("search", target="U01", query="maker of Alpha", text="<think>find the maker</think><search>[]</search>",
             evidence=[Evidence("doc-a#p0", "passage", "Alpha ...", 0.9, "doc-a", "U01")]),
        Step("answer", text="<summary>Beta makes it</summary><think>done</think><answer>Beta</answer>",
             summary="Beta makes it")])
    cards = ask.mmr2_cards(mmr2)
    assert [c["action"] for c in cards] == ["search", "answer"] and cards[1]["answer"] == "Beta"
    assert "U01" in ask.cards_html(mmr2) and "turn 2" in ask.cards_html(mmr2)


def test_the_rendered_answer_shows_gold_and_cost():
    q = Question("q1", "Who makes Alpha?", "Beta", "mmqa", gold_evidence=["doc-a-s00"],
                 decomposition=[SubQuestion("Who makes Alpha?", "TextQA", "Beta", ["doc-a-s00"])])
    t = Trace("q1", "bm25", "Beta", steps=[Step("retrieve", evidence=[Evidence("doc-a#p0", "passage", "Alpha",
                                                                                1.5, "doc-a")])],
              tokens_in=40, tokens_out=2, meta={"wall_seconds": 0.5, "load_seconds": 3.0, "first_answer": True,
                                                "evidence": ask.evidence_of(Trace("q1", "x", "", steps=[
                                                    Step("retrieve", evidence=[Evidence("doc-a-s00", "text")])]),
                                                    docs())})
    text = ask.render(q, {"bm25": t}, docs())
    assert "gold: Beta" in text and "gold step 1. Who makes Alpha? → TextQA → Beta" in text
    assert "── bm25 · 0.50 s (+3.0 s loading) · 40 tokens in / 2 out · correct" in text
    assert "doc-a (Alpha)" in text and "doc-a-s00*" in text


def test_mmrag_main_dispatches_ask_and_add(tmp_path, capsys):
    assert mmrag_main(["add", "page.html", "--data", str(tmp_path)]) == 1  # tests/test_live.py: the rest of add
    assert capsys.readouterr().err.strip() == (f"error: no corpus in {tmp_path / 'world'} — run "
                                               "`bin/py -m dvc repro world`")
    assert mmrag_main(["ask", ""]) == 2
    assert capsys.readouterr().err.strip() == "error: empty question: ask something"
    assert mmrag_main([]) == 2


def test_explore_notebook_is_a_thin_output_free_layer_over_ask():
    nb = nbformat.read(str(ROOT / "notebooks" / "explore.ipynb"), as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)
    assert not any("parameters" in c.metadata.get("tags", []) for c in nb.cells), "not a stage: no parameters cell"
    tree = ast.parse("\n".join(c.source for c in code))
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported == {"mmrag", "IPython.display"}
    called = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and isinstance(n.func.value, ast.Name) and n.func.value.id == "ask"}
    assert called == {"load_systems", "show", "pick"} and all(hasattr(ask, f) for f in called)


# --------------------------------------------------------------------------- on real artifacts
def check_answers(repo: Path) -> list[dict]:
    """Every system answers a test question and, in the REPL with its models still loaded, one more."""
    proc = run_ask("--pick", "mmqa:0", "--json", "--repl", "--data", str(repo / "data"),
                   "--params", str(repo / "params.yaml"), stdin="Which company makes the product?\n\n", timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    docs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(docs) == 2, proc.stdout[-2000:]
    for k, doc in enumerate(docs):
        assert set(doc) == {"brit", "dnc", "mmr2", "bm25"}, proc.stderr[-3000:]
        for name, raw in doc.items():
            t = Trace.from_dict(raw)
            assert t.steps and t.meta["wall_seconds"] > 0 and set(t.meta["evidence"]) >= {"pages", "images"}
            assert t.meta["first_answer"] is (k == 0), f"{name}: models load once per process"
        assert doc["brit"]["meta"]["subgraph"]["triplets"] or doc["brit"]["meta"]["subgraph"]["images"]
        assert doc["dnc"]["meta"]["strategy"] == "dnc" and doc["dnc"]["tokens_in"] > 0
        assert "need" in doc["mmr2"]["meta"]["intent"] and doc["mmr2"]["tokens_in"] > 0
        assert doc["bm25"]["steps"][0]["evidence"]
    return docs


@pytest.mark.slow
@pytest.mark.pipeline
def test_every_system_answers_on_the_smoke_artifacts(smoke_repo):
    check_answers(smoke_repo)
