"""The README tells the truth and stays a guide: CI runs its test command, its pipeline graph names
every stage, its results block is the report stage's generated table, not hand-typed numbers, every
path and page it links exists, and it stays short and free of lab notes (commit hashes, issue
numbers), which belong in benchmarks/notes/ and CHANGELOG.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
NOTES = ROOT / "benchmarks" / "notes"
SEEDS_PAGE = (NOTES / "seeds.md").read_text()
MAX_LINES = 250
# A commit hash: 7-40 hex digits with at least one letter and one digit (so 1,425 or "decade" are not).
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", re.I)
ISSUE = re.compile(r"\bissues?\s+#?\d+\b|(?<![\w&/#])#\d+\b", re.I)


def test_ci_runs_the_readme_test_command():
    assert "make test" in README
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_dag_block_names_every_stage():
    block = re.search(r"<!-- dag:start -->(.*?)<!-- dag:end -->", README, re.S).group(1)
    for name in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]:
        assert re.search(rf"\b{name}\b", block), f"README dag is missing '{name}': run scripts/update_readme.py"


def test_results_block_is_generated_from_the_report():
    block = re.search(r"<!-- results:start -->\n(.*?)\n<!-- results:end -->", README, re.S).group(1)
    headline = ROOT / "results" / "report" / "headline.md"
    if headline.exists():
        assert headline.read_text().strip() in block, "run scripts/update_readme.py"
    else:
        assert not re.search(r"\d+\.\d+", block), "no numbers in the README before the report exists"


def update_readme():
    return load_script("update_readme")


def test_training_seed_block_is_rendered_from_the_bench_into_its_page():
    block = re.search(r"<!-- seeds:start -->\n(.*?)\n<!-- seeds:end -->", SEEDS_PAGE, re.S).group(1)
    assert block == update_readme().training_seeds(), "run scripts/update_readme.py"
    assert "<!-- seeds:start -->" not in README, "the training-seed block lives in benchmarks/notes/seeds.md"


def test_dag_block_shows_the_root_pipeline_only():
    """`dvc dag` also lists benchmarks/dvc.yaml's stages, which `make repro` never runs."""
    mermaid = "\n".join(['```mermaid', 'flowchart TD', '\tnode1["benchmarks/dvc.yaml:bench_judge"]',
                         '\tnode2["clip"]', '\tnode3["world"]', '\tnode4["wiki"]',
                         '\tnode3-->node1', '\tnode3-->node2', '\tnode2-->node1', '```'])
    out = update_readme().compact_dag(mermaid, ["clip", "world", "wiki"])
    # clip is drawn by world's edge; wiki, with no edge, on a line of its own; the bench not at all
    assert out == "\n".join(["```mermaid", "flowchart TD", "\twiki", "\tworld --> clip", "```"])


def test_render_fills_an_empty_block_and_keeps_the_rest():
    text = "intro\n<!-- seeds:start -->\n<!-- seeds:end -->\noutro\n"
    once = update_readme().render(text, {"seeds": "| a |"})
    assert once == "intro\n<!-- seeds:start -->\n| a |\n<!-- seeds:end -->\noutro\n"
    assert update_readme().render(once, {"seeds": "| b |"}).count("| b |") == 1


# --------------------------------------------------------------------------- a guide, not lab notes
def test_readme_is_short():
    n = len(README.splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines (at most {MAX_LINES}): move detail to benchmarks/notes/"


def test_no_commit_hashes_or_issue_numbers_in_the_prose():
    """The README, the changelog and the notes say what holds, not which commit or issue it came from."""
    for path in [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(NOTES.glob("*.md"))]:
        text = path.read_text()
        assert not HASH.findall(text), f"{path.relative_to(ROOT)}: commit hashes {HASH.findall(text)}"
        assert not ISSUE.findall(text), f"{path.relative_to(ROOT)}: issue references {ISSUE.findall(text)}"


def test_the_patterns_catch_what_they_should():
    assert HASH.search("the block of 3f9a1c7 had") and HASH.search("commit 0a1b2c3d4e5f")
    assert not HASH.search("1,425 s, 10,033 pages, sha256, 155950 questions, a decade")
    ref = "issue"  # the checker's own samples, built so that no line here is itself a reference
    assert ISSUE.search(f"{ref} 7 proposes") and ISSUE.search("see #" + "3") and ISSUE.search(f"({ref}s 5)")
    assert not ISSUE.search("[Results](#results), step 3, &#8212;")


def links(text: str) -> list[str]:
    """Relative link targets of a Markdown text (no URLs, no in-page anchors), without fragments."""
    out = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if not re.match(r"[a-z]+:|#", target):
            out.append(target.split("#")[0])
    return out


def test_every_linked_file_exists():
    for page in [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(NOTES.glob("*.md"))]:
        for target in links(page.read_text()):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links a missing {target}"


def test_every_notes_page_is_linked_from_the_readme_and_follows_the_shape():
    linked = {Path(t).name for t in links(README) if t.startswith("benchmarks/notes/")}
    pages = {p.name for p in NOTES.glob("*.md")}
    assert linked, "the README links no benchmarks/notes page"
    assert linked <= pages, f"README links missing notes: {sorted(linked - pages)}"
    assert pages <= linked, f"notes the README does not link: {sorted(pages - linked)}"
    for name in pages:
        text = (NOTES / name).read_text()
        assert "**The question.**" in text and "What we see" in text, name
        commands = re.findall(r"```bash\n(.*?)```", text, re.S)
        assert any("benchmarks/" in c or "dvc repro" in c or "make " in c for c in commands), \
            f"{name}: no command that reproduces its figures"


def test_paths_the_readme_names_exist():
    """Every repository path in backticks (placeholders aside) is there, so the guide can be followed."""
    tops = ("src/", "docs/", "tests/", "benchmarks/", "profiles/", "configs/", "scripts/", "notebooks/")
    for path in re.findall(r"`([\w./-]+)`", README):
        if path.startswith(tops) and "<" not in path:
            assert (ROOT / path).exists(), f"README names a missing path: {path}"
    for name in ("Makefile", "environment.yml", "params.yaml", "dvc.yaml", "CHANGELOG.md"):
        assert (ROOT / name).exists()


def test_readme_order_guides_from_what_it_is_to_the_layout():
    headings = re.findall(r"^## (.+)$", README, re.M)
    assert headings == ["Two commands", "Results", "Your own corpus", "Ablations and experiments",
                        "GPUs and model servers", "Adding a system", "Layout"], headings
    assert README.index("make repro") < README.index("<!-- results:start -->")
    assert "(docs/index.html)" in README[:README.index("## Two commands")]


def test_training_seed_table_shows_each_seed_and_the_committed_verdict(tmp_path):
    import json

    claim = {"id": "brit.nea", "committed_verdict": "reproduced", "committed_estimate": 0.28,
             "estimates": {"0": 0.27, "5": 0.08}, "cis": {"0": [0.15, 0.38], "5": [-0.04, 0.19]},
             "verdicts": {"0": "reproduced", "5": "inconclusive"}, "holds": "1/2"}
    bench = {"seeds": [0, 5], "table1": False, "seconds": 1200.0, "load_avg_end": 1.5, "claims": [claim],
             "runs": [{"seed": s, "clip": {"zero_shot_mean": 0.99, "zero_shot_min": m}}
                      for s, m in ((0, 0.86), (5, 0.94))]}
    (tmp_path / "bench.json").write_text(json.dumps(bench))
    text = update_readme().training_seeds(tmp_path / "bench.json")
    row = next(line for line in text.splitlines() if line.startswith("| brit.nea"))
    assert row == ("| brit.nea | +0.280 reproduced | +0.270 [+0.150, +0.380] reproduced "
                   "| +0.080 [-0.040, +0.190] inconclusive | 1/2 |")
    assert "| seed 0 | seed 5 |" in text and "seed 5 0.990 / 0.940" in text and "without Table 1" in text
    assert "move with CLIP's training seed: brit.nea (1/2); the other 0 keep" in text


# --------------------------------------------------------------------------- "Your own corpus", as written
def own_corpus_section() -> str:
    return re.search(r"## Your own corpus\n(.*?)\n## ", README, re.S).group(1)


def own_corpus_commands(folder: str, qset: str) -> list[tuple[list[str], str]]:
    """The section's bin/exp commands with the placeholders filled: ([-S overrides], stage)."""
    block = re.search(r"```bash\n(.*?)```", own_corpus_section(), re.S).group(1)
    block = block.replace("\\\n", " ").replace("/your/folder", folder).replace("<set>", qset)
    out = []
    for line in block.splitlines():
        words = [w.strip("'") for w in line.split("#")[0].split()]
        if words[:1] == ["bin/exp"]:
            overrides = [words[i + 1] for i, w in enumerate(words) if w == "-S"]
            out.append((overrides, words[-1]))
    return out


def test_own_corpus_section_followed_on_a_fixture(tmp_path):
    """Write a folder as the section says, then check what its commands would run: every override
    validates against params.yaml (and the folder passes the preflight), every stage exists, and
    ingestion reads the questions file in the documented shape (the stages themselves run on a
    text-only folder in tests/test_text_only.py)."""
    import json

    from mmrag import config
    from mmrag.corpora import ingest
    from mmrag.stages.corpora import ingest_options

    folder = tmp_path / "my_documents"
    (folder / "questions").mkdir(parents=True)
    (folder / "page.md").write_text("# Vantor X2\n\nThe Vantor X2 is made by Helix Corp.\n")
    (folder / "questions" / "mine.jsonl").write_text(json.dumps({"question": "Who makes the Vantor X2?",
                                                                 "answer": "Helix Corp"}) + "\n")
    commands = own_corpus_commands(str(folder), "mine")
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert [stage for _, stage in commands] == ["corpora", "brit_linking", "toolagent_eval", "knowledge_map"]
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    for overrides, stage in commands:
        assert stage in stages
        raw = config.apply_overrides(raw, overrides)  # each command's -S values stay in params.yaml
        params = config.from_dict(raw)
        assert config.preflight(params, ["corpora"]) == [], overrides
    assert params.corpora.folder.path == str(folder) and params.brit_graph.corpus == "folder"
    assert params.toolagent_eval.question_set == params.brit_linking.question_set == "mine"
    assert "folder" in params.knowledge_map.corpora
    docs, questions, _ = ingest.ingest_folder(folder, tmp_path / "out", ingest_options(params.corpora.folder))
    assert len(docs) == 1 and [q.answer for q in questions["mine"]] == ["Helix Corp"]
    # what the section says reruns after an edit is what dvc.yaml declares
    assert stages["folder_manifest"].get("always_changed") is True
    assert "data/folder_manifest/manifest.json" in stages["corpora"]["deps"]
    for name in ("folder_manifest", "always_changed", "manifest.json", "BM25", "answer in retrieved context"):
        assert name in own_corpus_section(), name


def test_stage_costs_are_snapshot_in_pipeline_order_and_summed(tmp_path):
    script = update_readme()
    results = tmp_path / "results"
    for stage, secs, load in (("report", 13.0, 0.4), ("models", 204.5, 1.9), ("not_a_stage", 9.0, 0.1)):
        (results / stage).mkdir(parents=True)
        (results / stage / "cost.json").write_text(json.dumps(
            {"stage": stage, "wall_seconds": secs, "load_1min_start": load, "load_1min_end": load,
             "cpu_count": 2, "peak_rss_mb": 100.0}))
    record = script.snapshot_costs(results, tmp_path / "costs.json")
    assert list(record["stages"]) == ["models", "report"]  # dvc.yaml's order; a folder of no stage is left out
    text = script.stage_costs(tmp_path / "costs.json")
    assert "**218 s (0.1 h)**" in text and "| models | 204 | 1.9 / 1.9 | 100.0 |" in text
    assert text.index("| models") < text.index("| report")


def test_ask_speed_table_shows_each_system_against_its_target(tmp_path):
    script = update_readme()
    row = {"load_seconds": 3.1, "first_answer_seconds": 2.0, "warm_n": 5, "warm_median_seconds": 1.4,
           "warm_min_seconds": 1.1, "warm_max_seconds": 2.2}
    bench = {"questions": 6, "machine": {"cores": 2, "load_1min": 0.2, "load_1min_after": 1.1},
             "systems": {"brit": {**row, "target_warm_seconds": 5.0, "meets_target": True},
                         "dnc": {**row, "warm_median_seconds": 41.0, "target_warm_seconds": 30.0,
                                 "meets_target": False},
                         "bm25": {**row, "target_warm_seconds": None, "meets_target": None},
                         "mmr2": {"error": "could not load"}}}
    (tmp_path / "ask.json").write_text(json.dumps(bench))
    text = script.ask_speed(tmp_path / "ask.json")
    assert "| brit | 3.1 | 2.0 | 1.4 [1.1, 2.2] (5) | ≤ 5 s: met |" in text
    assert "| dnc | 3.1 | 2.0 | 41.0 [1.1, 2.2] (5) | ≤ 30 s: missed |" in text
    assert "| bm25 | 3.1 | 2.0 | 1.4 [1.1, 2.2] (5) | – |" in text
    assert "| mmr2 | – | – | could not load | – |" in text
    assert "load 0.2 / 1.1" in text
