"""The Wikipedia corpus is its own stage: a folder edit (folder_manifest -> corpora) never rebuilds it.

Fast checks of dvc.yaml and of the two stage modules; nothing runs the pipeline."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from mmrag import config
from mmrag.schema import Document, Section

ROOT = Path(__file__).resolve().parents[1]
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def _names(items: list) -> list[str]:
    return [next(iter(i)) if isinstance(i, dict) else i for i in items]


def _params(spec: dict) -> list[str]:
    return [k for i in spec.get("params", []) for k in ([i] if isinstance(i, str) else
                                                        [x for v in i.values() for x in v])]


def test_the_wiki_corpus_is_written_by_the_wiki_stage_not_by_corpora():
    outs = _names(STAGES["corpora"]["outs"]) + _names(STAGES["corpora"].get("metrics", []))
    assert "data/wiki" not in outs
    assert not [o for o in outs if "wiki" in o], outs
    assert "data/wiki" in _names(STAGES["wiki"]["outs"])
    assert "results/wiki/metrics.json" in _names(STAGES["wiki"]["metrics"])


def test_wiki_depends_on_nothing_of_the_folder():
    spec = STAGES["wiki"]
    deps = _names(spec["deps"])
    assert not [d for d in deps if d.startswith(("data/folder", "data/folder_manifest"))], deps
    params = _params(spec)
    assert "corpora" not in params, "the whole corpora section would include corpora.folder.path"
    assert not [p for p in params if p.startswith("corpora.folder")], params
    # what it does read: the wiki keys and the chunking its gold passage ids follow
    assert {"corpora.wiki_max_docs", "corpora.wiki_questions_per_kind", "corpora.dev_share",
            "corpora.test_share", "knowledge_map.max_chars", "knowledge_map.chunk_chars",
            "knowledge_map.overlap"} <= set(params)


def test_only_the_wiki_stage_writes_data_wiki_and_readers_follow_it():
    writers = [name for name, spec in STAGES.items() if "data/wiki" in _names(spec.get("outs", []))]
    assert writers == ["wiki"]
    # the folder is tracked through its manifest by corpora, which the wiki never reads
    assert "data/folder_manifest/manifest.json" in STAGES["corpora"]["deps"]


def test_wiki_corpus_is_the_same_whatever_the_folder(monkeypatch, tmp_path):
    """build_wiki reads corpora.wiki_* and the shares, never corpora.folder: a folder change
    cannot change data/wiki."""
    from mmrag.corpora import wiki as wiki_corpus
    from mmrag.corpora.passages import Chunking
    from mmrag.stages import wiki

    docs = [Document(id=f"d{i}", title=f"Title {i}", domain=f"topic{i % 2}", summary=f"Thing number {i}",
                     sections=[Section(id=f"d{i}#s0", doc_id=f"d{i}", title="",
                                       text=f"Title {i} is a thing. It was made in {1900 + i} by someone.")])
            for i in range(6)]
    monkeypatch.setattr(wiki_corpus, "load_summaries", lambda: [{}] * len(docs))
    monkeypatch.setattr(wiki_corpus, "build_documents", lambda rows: docs)
    params = config.load()
    built = {}
    for folder in (None, str(tmp_path / "my_documents")):
        corpora = replace(params.corpora, folder=replace(params.corpora.folder, path=folder))
        corpus = wiki.build_wiki(corpora, 0, Chunking.of(params.knowledge_map), tmp_path / f"wiki_{folder is None}")
        built[folder] = [q.to_dict() for q in corpus.questions]
    first, second = built.values()
    assert first and first == second


def test_demo_folder_without_the_wiki_corpus_says_which_stage_to_run(tmp_path):
    from mmrag.stages.corpora import wiki_documents

    with pytest.raises(FileNotFoundError, match="repro wiki"):
        wiki_documents(tmp_path / "wiki")
