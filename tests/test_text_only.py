"""A folder of text documents only (no image anywhere) goes through `corpora`, `brit_graph`,
`brit_linking`, `knowledge_map` and `toolagent_eval` (their `run()` functions, on a sandboxed
data/ and results/): every declared output is written, image-only parts say why they are skipped,
and the BM25 and dense flat baselines report the answer in their retrieved context."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import redirect_io

from mmrag import config
from mmrag.stages import brit_graph, brit_linking, corpora, knowledge_map, toolagent_eval

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]

# eight short pages about invented things, two sections each
PAGES = {
    "vantor.md": ("Vantor X2", "The Vantor X2 is a drone made by Helix Corp in Osmera.",
                  "The Vantor X2 weighs 840 grams. Its battery lasts 31 minutes."),
    "helix.md": ("Helix Corp", "Helix Corp is a company founded by Mara Quell in 1998.",
                 "Helix Corp employs 420 people. Its headquarters are in Osmera."),
    "quell.md": ("Mara Quell", "Mara Quell is an engineer born in Tarsine.",
                 "Mara Quell studied physics at Brennock University. She founded Helix Corp."),
    "osmera.md": ("Osmera", "Osmera is a port city on the Calder coast.",
                  "Osmera has a population of 90,000. The Osmera lighthouse dates from 1821."),
    "tarsine.md": ("Tarsine", "Tarsine is a mountain village known for its glass.",
                   "Tarsine glass is blown by hand. The village festival is held in June."),
    "brennock.md": ("Brennock University", "Brennock University is a university in Lorwick.",
                    "Brennock University was founded in 1702. Its library holds rare maps."),
    "lorwick.md": ("Lorwick", "Lorwick is a river town north of Osmera.",
                   "Lorwick bridges span the Fennel river. The town brews dark ale."),
    "calder.md": ("Calder coast", "The Calder coast is a stretch of cliffs and coves.",
                  "The Calder coast is home to puffins. Storms are frequent in winter."),
}
QUESTIONS = [
    {"id": "q1", "question": "Which company makes the Vantor X2?", "answer": "Helix Corp"},
    {"id": "q2", "question": "Who founded Helix Corp?", "answer": "Mara Quell"},
    {"id": "q3", "question": "Where was Mara Quell born?", "answer": "Tarsine"},
    {"id": "q4", "question": "In which town is Brennock University?", "answer": "Lorwick"},
    {"id": "q5", "question": "How long does the battery of the Vantor X2 last?", "answer": "31 minutes"},
    {"id": "q6", "question": "Which river do the Lorwick bridges span?", "answer": "Fennel"},
]


def write_folder(root: Path) -> Path:
    """The text-only fixture folder: Markdown pages and questions/qa.jsonl."""
    root.mkdir(parents=True)
    for name, (title, lead, body) in PAGES.items():
        (root / name).write_text(f"# {title}\n\n{lead}\n\n## Facts\n\n{body}\n")
    (root / "questions").mkdir()
    (root / "questions" / "qa.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return root


def tiny_clip(folder: Path) -> Path:
    """An untrained, tiny CLIP checkpoint (the stages load one; a text-only corpus never uses its images)."""
    from mmrag.models import clip as clip_model

    cfg = clip_model.model_config(embed_dim=32, image_size=32, vision_layers=[1, 1, 1, 1], vision_width=8,
                                  text_width=32, text_layers=1, text_heads=2, context_length=32)
    clip_model.save_checkpoint(clip_model.create_model(cfg, seed=0), cfg, folder, name="mmrag-clip-textonly")
    return folder


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """(params, data dir, results dir) with data/ and results/ redirected to a scratch folder."""
    tmp = tmp_path_factory.mktemp("textonly")
    data, results = tmp / "data", tmp / "results"
    mp = pytest.MonkeyPatch()
    redirect_io(mp, data, results, corpora, brit_graph, knowledge_map, toolagent_eval)
    folder = write_folder(tmp / "my_documents")
    clip_dir = tiny_clip(tmp / "clip")
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw = config.apply_overrides(raw, [
        "corpora.wiki_max_docs=30", f"corpora.folder.path={folder}", f"models.clip={clip_dir}",
        "brit_graph.corpus=folder", "brit_graph.nea_documents=''", "brit_graph.example_page=0",
        "brit_linking.question_set=qa", "brit_linking.calibration_grid=[0.5]",
        # the models conftest provisions (the default reader, Qwen-0.5B, is a models-stage ladder GGUF)
        "brit_linking.reader_llm=smollm2-135m-instruct",
        "knowledge_map.corpora=[folder]", "knowledge_map.max_docs=0", "knowledge_map.dims=[5]",
        "knowledge_map.min_cluster_frac=[0.1]", "knowledge_map.min_samples=[2]",
        "knowledge_map.selection=[eom]", "knowledge_map.min_units=2", "knowledge_map.chunk_chars=120",
        "knowledge_map.overlap=20",
        "toolagent_eval.corpus=folder", "toolagent_eval.question_set=qa", "toolagent_eval.conv_set=''",
        "toolagent_eval.llms=[smollm2-135m-instruct]", "toolagent_eval.n_mmqa=2",
        "toolagent_eval.base_strategies=[]", "toolagent_eval.max_tool_calls=2",
        "toolagent_eval.max_new_tokens=16"])
    yield config.from_dict(raw), data, results
    mp.undo()


@pytest.fixture(scope="module")
def ran(sandbox):
    """Every stage's result, in pipeline order."""
    params, data, results = sandbox
    out = {"corpora": corpora.run(params)}
    out["brit_graph"] = brit_graph.run(params)
    out["brit_linking"] = brit_linking.run(params)
    out["knowledge_map"] = knowledge_map.run(params)
    out["toolagent_eval"] = toolagent_eval.run(params)
    return out


def declared_outs(stage: str) -> list[str]:
    """The files dvc.yaml declares for a stage under results/ (not the notebook renderings)."""
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"][stage]
    names = [next(iter(o)) if isinstance(o, dict) else o for o in spec.get("outs", []) + spec.get("metrics", [])]
    return [n for n in names if n.startswith("results/") and not n.endswith((".ipynb", ".html"))]


@pytest.mark.parametrize("stage", ["corpora", "brit_graph", "brit_linking", "knowledge_map", "toolagent_eval"])
def test_every_declared_output_exists(sandbox, ran, stage):
    _, _, results = sandbox
    for out in declared_outs(stage):
        assert (results / out.removeprefix("results/")).exists(), out


def test_the_folder_is_text_only_and_ingested(ran):
    res = ran["corpora"]
    assert res.metrics["folder_documents"] == len(PAGES) and res.metrics["folder_images"] == 0
    assert res.metrics["folder_questions"] == len(QUESTIONS)


def test_brit_runs_and_reports_baselines_with_answer_in_context(ran):
    res = ran["brit_linking"]
    answers = res.tables["answers"]
    assert {"BM25 top-k", "dense top-k"} <= set(answers.index)
    assert answers.loc["BM25 top-k", "answer_in_context"] >= 0.5  # lexical overlap finds these pages
    assert (answers["open_questions"] == len(QUESTIONS)).all()


def test_knowledge_map_has_lexical_and_dense_rows(ran):
    res = ran["knowledge_map"]
    row = res.tables["agreement"].iloc[0]
    assert row["corpus"] == "folder" and row["answer questions"] == len(QUESTIONS)
    assert row["answer in top-5: BM25"] >= 0.5
    assert res.metrics["folder"]["answer_in_context"]["n"] == len(QUESTIONS)


def test_toolagent_eval_reports_tool_only_and_trivial_baselines(ran):
    res = ran["toolagent_eval"]
    assert "baselines" in res.tables
    names = set(res.tables["baselines"]["system"])
    assert {"TextQA tool alone", "BM25 top-k", "dense top-k"} <= names
