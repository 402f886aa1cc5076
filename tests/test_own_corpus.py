"""Realistic folders of your own go through `corpora`, `brit_graph`, `brit_linking`, `knowledge_map` and
`toolagent_eval` (their `run()` functions, on a sandboxed data/ and results/, set up as
tests/test_text_only.py sets them up): an official HotpotQA JSON array alone in its folder, official
MuSiQue JSONL alone in its folder, and a Kiwix ZIM of illustrated articles with a questions file beside
it (tests/own_corpus_fixtures.py writes all three at test time, invented and seeded).

Every stage completes and writes every output dvc.yaml declares, and ingestion finds what each folder
holds: one document per title, the questions with their gold evidence, MuSiQue's decomposition hop by
hop, the ZIM's captions, its site logo dropped as decorative and its tiny icons skipped."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import redirect_io
from own_corpus_fixtures import HotpotFixture, MusiqueFixture, ZimFixture, write_hotpotqa, write_musique, write_zim
from test_text_only import ROOT, declared_outs, tiny_clip

from mmrag import config
from mmrag.corpora import ingest, multihop
from mmrag.corpora.layout import slug
from mmrag.schema import Document, Question, load_documents, load_questions
from mmrag.stages import brit_graph, brit_linking, corpora, knowledge_map, toolagent_eval

pytestmark = pytest.mark.slow
STAGES = ["corpora", "brit_graph", "brit_linking", "knowledge_map", "toolagent_eval"]
CORPORA = ["hotpotqa", "musique", "zim"]
# Table 1's reader (an LLM, ~10 prompts a question) reads this many test questions: the sets hold 35
# to 40, the other tables use every one
QA_QUESTIONS = 6


@dataclass
class Ran:
    """One folder after the five stages: the stages' results and the sandbox they wrote into."""

    fixture: HotpotFixture | MusiqueFixture | ZimFixture
    data: Path
    results: Path
    out: dict[str, Any]  # stage -> its StageResult
    seconds: dict[str, float]  # stage -> wall time (printed: where this module's minutes go)

    @property
    def documents(self) -> list[Document]:
        return load_documents(self.data / "folder")

    @property
    def questions(self) -> list[Question]:
        return load_questions(self.data / "folder" / "questions" / f"{self.fixture.set_name}.jsonl")

    def ingest_report(self) -> dict[str, Any]:
        return json.loads((self.results / "corpora" / "ingest_report.json").read_text())


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory) -> Path:
    return tiny_clip(tmp_path_factory.mktemp("clip"))


def run_stages(tmp: Path, fixture: HotpotFixture | MusiqueFixture | ZimFixture, clip: Path) -> Ran:
    """The five stages on ``fixture``'s folder, data/ and results/ redirected under ``tmp`` only while
    they run (each folder has its own sandbox; nothing leaks into the next)."""
    data, results = tmp / "data", tmp / "results"
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw = config.apply_overrides(raw, [
        "corpora.wiki_max_docs=30", f"corpora.folder.path={fixture.folder}", f"models.clip={clip}",
        "brit_graph.corpus=folder", "brit_graph.nea_documents=''", "brit_graph.example_page=0",
        f"brit_linking.question_set={fixture.set_name}", "brit_linking.calibration_grid=[0.5]",
        f"brit_linking.qa_questions={QA_QUESTIONS}",
        "brit_linking.reader_llm=smollm2-135m-instruct",
        "knowledge_map.corpora=[folder]", "knowledge_map.max_docs=0", "knowledge_map.dims=[5]",
        "knowledge_map.min_cluster_frac=[0.1]", "knowledge_map.min_samples=[2]",
        "knowledge_map.selection=[eom]", "knowledge_map.min_units=2", "knowledge_map.chunk_chars=120",
        "knowledge_map.overlap=20",
        "toolagent_eval.corpus=folder", f"toolagent_eval.question_set={fixture.set_name}",
        "toolagent_eval.conv_set=''", "toolagent_eval.llms=[smollm2-135m-instruct]", "toolagent_eval.n_mmqa=2",
        "toolagent_eval.base_strategies=[]", "toolagent_eval.max_tool_calls=2",
        "toolagent_eval.max_new_tokens=16"])
    params = config.from_dict(raw)
    with pytest.MonkeyPatch.context() as mp:
        redirect_io(mp, data, results, corpora, brit_graph, knowledge_map, toolagent_eval)
        out, seconds, cpu = {}, {}, {}
        for name, stage in zip(STAGES, (corpora, brit_graph, brit_linking, knowledge_map, toolagent_eval)):
            t0, c0 = time.perf_counter(), time.process_time()
            out[name] = stage.run(params)
            seconds[name] = round(time.perf_counter() - t0, 1)
            cpu[name] = round(time.process_time() - c0, 1)
    print(f"{fixture.folder.name}: stage seconds {seconds}, CPU seconds {cpu}")
    return Ran(fixture, data, results, out, seconds)


@pytest.fixture(scope="module")
def hotpotqa(tmp_path_factory, clip_dir) -> Ran:
    tmp = tmp_path_factory.mktemp("hotpotqa")
    return run_stages(tmp, write_hotpotqa(tmp / "my_hotpotqa"), clip_dir)


@pytest.fixture(scope="module")
def musique(tmp_path_factory, clip_dir) -> Ran:
    tmp = tmp_path_factory.mktemp("musique")
    return run_stages(tmp, write_musique(tmp / "my_musique"), clip_dir)


@pytest.fixture(scope="module")
def zim(tmp_path_factory, clip_dir) -> Ran:
    tmp = tmp_path_factory.mktemp("zim")
    return run_stages(tmp, write_zim(tmp / "my_zim"), clip_dir)


# --------------------------------------------------------------------------- every folder
@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("stage", STAGES)
def test_every_declared_output_exists(request, corpus, stage):
    ran = request.getfixturevalue(corpus)
    missing = [out for out in declared_outs(stage) if not (ran.results / out.removeprefix("results/")).exists()]
    assert not missing, f"{stage} on the {corpus} folder did not write {missing}"


@pytest.mark.parametrize("corpus", CORPORA)
def test_every_question_reaches_brit_and_the_knowledge_map(request, corpus):
    ran = request.getfixturevalue(corpus)
    n = len(ran.questions)
    split = ran.out["brit_linking"].split
    assert len(split.questions) == n  # every question's gold evidence is in the graph
    assert len(split.dev) + len(split.test) == n
    assert ran.out["brit_linking"].metrics["qa_questions"] == min(QA_QUESTIONS, len(split.test))
    row = ran.out["knowledge_map"].tables["agreement"].iloc[0]
    assert row["corpus"] == "folder" and row["answer questions"] == n


@pytest.mark.parametrize("corpus", CORPORA)
def test_toolagent_eval_scores_its_sample_and_the_flat_baselines(request, corpus):
    res = request.getfixturevalue(corpus).out["toolagent_eval"]
    assert {"TextQA tool alone", "BM25 top-k", "dense top-k"} <= set(res.tables["baselines"]["system"])


# --------------------------------------------------------------------------- HotpotQA
def test_hotpotqa_folder_holds_only_the_official_file(hotpotqa):
    fx = hotpotqa.fixture
    files = [p.relative_to(fx.folder).as_posix() for p in fx.folder.rglob("*") if p.is_file()]
    assert files == [f"questions/{fx.set_name}.json"]
    assert isinstance(json.loads((fx.folder / files[0]).read_text()), list)
    assert len(fx.records) >= 30 and {r["type"] for r in fx.records} == {"bridge", "comparison"}
    assert all(4 <= len(r["context"]) <= 10 for r in fx.records)


def test_hotpotqa_becomes_one_document_per_title_and_every_question(hotpotqa):
    metrics, fx = hotpotqa.out["corpora"].metrics, hotpotqa.fixture
    assert metrics["folder_documents"] == len(fx.titles)
    assert metrics["folder_images"] == 0
    assert metrics["folder_questions"] == len(fx.records)
    assert metrics["folder_problems"] == {}
    docs = {d.title: d for d in hotpotqa.documents}
    assert set(docs) == set(fx.titles)
    paragraphs = {t: s for r in fx.records for t, s in r["context"]}
    for title, sentences in paragraphs.items():  # the lead paragraph, sentences joined once
        assert [s.text for s in docs[title].sections] == ["".join(sentences).strip()]


def test_hotpotqa_supporting_facts_are_gold_evidence(hotpotqa):
    fx = hotpotqa.fixture
    section = {d.title: d.sections[0].id for d in hotpotqa.documents}
    questions = {q.id: q for q in hotpotqa.questions}
    assert set(questions) == {r["_id"] for r in fx.records}
    for r in fx.records:
        q = questions[r["_id"]]
        assert (q.text, q.answer, q.kind, q.dataset) == (r["question"], r["answer"], r["type"], multihop.HOTPOTQA)
        assert q.gold_evidence == list(dict.fromkeys(section[t] for t, _ in r["supporting_facts"]))
        context = dict((t, s) for t, s in r["context"])
        assert [f["sentence"] for f in q.meta["supporting_facts"]] == \
            [context[t][i].strip() for t, i in r["supporting_facts"]]
        assert q.meta["level"] == r["level"]


# --------------------------------------------------------------------------- MuSiQue
def test_musique_folder_holds_only_official_jsonl(musique):
    fx = musique.fixture
    files = [p.relative_to(fx.folder).as_posix() for p in fx.folder.rglob("*") if p.is_file()]
    assert files == [f"questions/{fx.set_name}.jsonl"]
    lines = (fx.folder / files[0]).read_text().splitlines()
    assert [json.loads(line) for line in lines] == fx.records
    hops = {len(r["question_decomposition"]) for r in fx.answerable}
    assert len(fx.answerable) >= 30 and hops == {2, 3, 4}


def test_musique_answerable_questions_are_loaded_and_the_rest_counted(musique):
    metrics, fx = musique.out["corpora"].metrics, musique.fixture
    unanswerable = len(fx.records) - len(fx.answerable)
    assert unanswerable > 0
    assert metrics["folder_questions"] == len(fx.answerable)
    assert metrics["folder_problems"] == {"unanswerable_question": unanswerable}
    assert {q.id for q in musique.questions} == {r["id"] for r in fx.answerable}


def test_musique_paragraphs_become_sections_of_one_document_per_title(musique):
    fx = musique.fixture
    texts: dict[str, list[str]] = {}
    for r in fx.answerable:  # skipped items add no paragraph
        for p in r["paragraphs"]:
            texts.setdefault(p["title"], [])
            if p["paragraph_text"] not in texts[p["title"]]:
                texts[p["title"]].append(p["paragraph_text"])
    docs = {d.title: d for d in musique.documents}
    assert musique.out["corpora"].metrics["folder_documents"] == len(texts)
    assert {t: [s.text for s in d.sections] for t, d in docs.items()} == texts


def test_musique_decomposition_is_kept_hop_by_hop(musique):
    section = {(d.title, s.text): s.id for d in musique.documents for s in d.sections}
    questions = {q.id: q for q in musique.questions}
    for r in musique.fixture.answerable:
        q, paras, steps = questions[r["id"]], r["paragraphs"], r["question_decomposition"]
        assert q.kind == f"{len(steps)}hop" and q.answer_aliases == r["answer_aliases"]
        assert q.gold_evidence == [section[p["title"], p["paragraph_text"]] for p in paras if p["is_supporting"]]
        assert [s.answer for s in q.decomposition] == [s["answer"] for s in steps]
        for k, (sub, step) in enumerate(zip(q.decomposition, steps)):
            expected = step["question"]
            for j in range(k, 0, -1):  # "#2" before "#1"... no ref is a prefix of another below 10 hops
                expected = expected.replace(f"#{j}", steps[j - 1]["answer"])
            assert sub.text == expected and "#" not in sub.text
            p = paras[step["paragraph_support_idx"]]
            assert sub.evidence_ids == [section[p["title"], p["paragraph_text"]]]
        assert q.decomposition[-1].answer == q.answer


def test_musique_as_a_json_array_loads_the_same_questions(tmp_path, musique):
    """MuSiQue ships JSONL; the same records as one JSON array (questions/<set>.json) read alike."""
    fx = write_musique(tmp_path / "array", as_array=True)
    assert [p.name for p in (fx.folder / "questions").iterdir()] == [f"{fx.set_name}.json"]
    options = corpora.ingest_options(config.from_dict(yaml.safe_load((ROOT / "params.yaml").read_text()))
                                     .corpora.folder)
    docs, sets, report = ingest.ingest_folder(fx.folder, tmp_path / "out", options)
    assert [q.to_dict() for q in sets[slug(fx.set_name)]] == [
        {**q.to_dict(), "meta": {**q.meta, "source_file": f"questions/{fx.set_name}.json"}} for q in musique.questions]
    assert len(docs) == len(musique.documents)


# --------------------------------------------------------------------------- ZIM
def test_zim_is_ingested_article_by_article(zim):
    fx, metrics = zim.fixture, zim.out["corpora"].metrics
    assert len(fx.articles) >= 15
    assert metrics["folder_documents"] == len(fx.articles)  # not the main page, a redirect or the stylesheet
    assert {d.title for d in zim.documents} == {a.title for a in fx.articles}
    assert metrics["folder_questions"] == len(fx.questions) >= 30
    region = next(d for d in zim.documents if d.title == fx.articles[0].title)
    assert [s.title for s in region.sections] == ["", "History", "Geography", "Symbols", "Culture", "External links"]
    assert region.tables and region.tables[0].rows[0][0] == "Capital"  # the infobox, below its header row


def test_zim_captions_are_found_and_decorative_images_dropped(zim):
    fx, report = zim.fixture, zim.ingest_report()
    assert report["ingested"]["images"] == zim.out["corpora"].metrics["folder_images"] == fx.images
    assert report["ingested"]["captioned_images"] == fx.captioned < fx.images
    assert report["problems"] == {"decorative_image": fx.logo_pages, "tiny_image": fx.tiny_icons}
    captions = {i.caption for d in zim.documents for i in d.images}
    region = fx.articles[0].title
    assert {f"Flag of {region}", f"Location of {region} in the Calder Union"} <= captions  # infobox, thumb
    assert any(c.startswith("Farmland near") for c in captions)  # figcaption
    per_doc = [{i.path for i in d.images} for d in zim.documents]
    assert len(set().union(*per_doc)) == fx.distinct_images
    shared = [p for p in set().union(*per_doc) if sum(p in s for s in per_doc) > 1]
    assert len(shared) == fx.shared_images  # a region's map beside its capital's: on two pages, kept

def test_zim_picture_questions_point_at_the_articles_pictures(zim):
    asked = [q for q in zim.questions if q.image_path]
    assert len(asked) == sum(1 for q in zim.fixture.questions if "image" in q) > 0
    shown = {i.path for d in zim.documents for i in d.images}
    assert all(q.image_path in shown and q.answer in q.choices for q in asked)  # the flag, stored once
    assert (zim.data / "folder" / asked[0].image_path).is_file()
