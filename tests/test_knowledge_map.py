"""KnowledgeMap on planted clusters: the search recovers them, late passages land right,
per-unit FAISS finds the planted passage, metadata names each cluster, quality check acts."""

from __future__ import annotations

import numpy as np
import pytest

from mmrag.mmr2 import knowledge_map as km
from mmrag.schema import Passage

TOPICS = ["volcano lava eruption magma", "violin orchestra symphony concerto",
          "protein enzyme cell membrane"]


def _planted(n_per: int = 40, d: int = 32, seed: int = 0):
    """Three well-separated clusters on the sphere, with passages whose words name the topic."""
    rng = np.random.default_rng(seed)
    centers = np.eye(d)[:3] * 1.0
    X, gold, passages = [], [], []
    for c in range(3):
        pts = centers[c] + 0.15 * rng.standard_normal((n_per, d))
        for j, v in enumerate(pts):
            X.append(v / np.linalg.norm(v))
            gold.append(c)
            passages.append(Passage(id=f"t{c}-{j}", doc_id=f"d{c}-{j}", title=f"Page {c}-{j}",
                                    text=f"{TOPICS[c]} item {j}", domain=str(c)))
    return passages, np.asarray(X, dtype=np.float32), np.asarray(gold)


def tiny_search(X, dev, **grid):
    """search_configs with this file's knobs: equal weights, 2 to 10 units, Hit@5, seed 0."""
    return km.search_configs(X, dev, weights=km.SearchWeights(1.0, 1.0, 1.0, 1.0), min_units=2,
                             max_units=10, k=5, seed=0, **grid)


def tiny_build(P, X, labels, n_card_titles=16):
    """KnowledgeMap.build with this file's metadata knobs (8 keywords, 3 representatives)."""
    return km.KnowledgeMap.build(P, X, labels, top_keywords=8, n_representatives=3,
                                 n_card_titles=n_card_titles)


def _dev(X, gold, n=9):
    idx = list(range(0, len(X), max(1, len(X) // n)))[:n]
    return km.DevQueries(X[idx], [[i] for i in idx])


def test_search_recovers_planted_clusters_and_ranks_them_first():
    P, X, gold = _planted()
    rows = tiny_search(X, _dev(X, gold), dims=[5, 0], min_cluster_sizes=[8, 60], min_samples=[3],
                       selections=["eom"])
    best = rows[0]
    assert best["valid"] and best["units"] == 3
    assert km.agreement(km.fill_noise(X, best["_labels"]), gold)["ari"] > 0.95
    # mcs=60 > 40 per cluster cannot make 3 units: it is ranked below
    assert all(r["units"] != 3 for r in rows if r["min_cluster_size"] == 60)


def test_build_assign_search_and_roundtrip(tmp_path):
    P, X, gold = _planted()
    labels = km.hdbscan_labels(km.reduce(X, 5, seed=0), km.ClusterConfig(5, 8, 3, "eom"))
    kmap = tiny_build(P, X, labels)
    assert len(kmap.units) == 3 and sum(u.size for u in kmap.units) == len(P)
    # metadata: each unit's keywords come from its own topic words only
    for u in kmap.units:
        topic = TOPICS[gold[kmap.pid_index[u.representatives[0]]]].split()
        assert set(u.keywords[:3]) <= set(topic), (u.keywords, topic)
    # a passage added later lands in the unit of its cluster
    rng = np.random.default_rng(5)
    v = np.eye(X.shape[1])[1] + 0.15 * rng.standard_normal(X.shape[1])
    v = (v / np.linalg.norm(v)).astype(np.float32)[None]
    assert kmap.assign(v)[0] == kmap.unit_of("t1-0")
    # per-unit FAISS returns the planted passage; an unknown unit names the valid ids
    target = kmap.pid_index["t2-7"]
    hits = kmap.search(kmap.unit_of("t2-7"), X[target], k=2)
    assert hits[0].passage.id == "t2-7" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert all(h.passage.id.startswith("t2-") for h in hits)
    assert kmap.search_flat(X[target], k=1)[0].passage.id == "t2-7"
    with pytest.raises(KeyError, match="valid ids"):
        kmap.search("U99", X[0], k=3)
    back = km.KnowledgeMap.load(kmap.save(tmp_path / "map"))
    assert back.unit_ids == kmap.unit_ids and back.search(back.unit_of("t2-7"), X[target], 1)[0] \
        .passage.id == "t2-7"


def test_quality_check_merges_tiny_and_splits_oversized():
    P, X, gold = _planted()
    labels = gold.copy()
    labels[:3] = 3  # a tiny fourth unit carved out of cluster 0
    merged, changes = km.quality_check(X, labels, min_size=5, max_share=0.9, min_coherence=0.0,
                                       seed=0)
    assert [c["change"] for c in changes] == ["merge"] and changes[0]["into"] == 0
    assert km.agreement(merged, gold)["ari"] == pytest.approx(1.0)
    both = np.where(gold == 2, 1, gold)  # clusters 1 and 2 glued into one oversized unit
    split, changes = km.quality_check(X, both, min_size=5, max_share=0.5, min_coherence=0.0,
                                      seed=0)
    assert any(c["change"] == "split" and c["unit"] == 1 for c in changes)
    assert km.agreement(split, gold)["ari"] > 0.95


def test_scores_behave():
    lab = np.asarray([0, 0, 1, 1, -1])
    assert km.coverage(lab) == pytest.approx(0.8)
    assert km.balance(lab) == pytest.approx(1.0) and km.balance(np.zeros(4, int)) == 0.0
    assert km.agreement([0, 0, 1, 1], ["a", "a", "b", "b"]) == \
        pytest.approx({"nmi": 1.0, "ari": 1.0, "purity": 1.0})


def test_no_dev_questions_and_no_gold_domains_are_not_applicable():
    """A user's folder: no dev questions with gold passages, no domains."""
    P, X, gold = _planted()
    no_dev = km.DevQueries(np.zeros((0, X.shape[1]), np.float32), [])
    rows = tiny_search(X, no_dev, dims=[5], min_cluster_sizes=[8, 60], min_samples=[3],
                       selections=["eom"])
    assert all(r["utility"] is None for r in rows)
    best = rows[0]
    assert best["valid"] and best["units"] == 3  # the other three criteria still pick it
    assert best["score"] == pytest.approx((best["coherence_scaled"] + best["balance"]
                                           + best["coverage"]) / 3)
    primary = km.fill_noise(X, best["_labels"])
    assert km.flat_recall(X, no_dev, k=5) is None and km.routed_recall(X, primary, no_dev, k=5) is None
    assert km.agreement(primary, [""] * len(X)) == {"nmi": None, "ari": None, "purity": None}


def test_unit_cards_list_member_pages_and_route_by_name():
    P, X, gold = _planted()
    # a second passage of page 'Page 1-0' makes it the most frequent title of its unit
    P.append(Passage(id="t1-0b", doc_id="d1-0", title="Page 1-0", text=f"{TOPICS[1]} more",
                     domain="1"))
    X = np.vstack([X, X[40:41]])
    labels = np.append(gold, 1)
    kmap = tiny_build(P, X, labels, n_card_titles=5)
    u1 = kmap.by_id[kmap.unit_of("t1-0")]
    assert u1.pages[0] == "Page 1-0" and len(u1.pages) == 5
    assert all(t.startswith("Page 1-") for t in u1.pages)
    assert kmap.card_unit("page 1-0") == u1.id          # case-insensitive lookup
    assert kmap.card_unit("Page 1-39") is None           # not on the (5-title) card
    assert kmap.card_unit("") is None
    assert "Pages: Page 1-0;" in kmap.compact()
    bare = tiny_build(P, X, labels, n_card_titles=0)
    assert "Pages:" not in bare.compact() and bare.card_unit("Page 1-0") is None


# --------------------------------------------------------------------------- the stage's helpers
def test_unit_map_names_every_passage_unit():
    P, X, gold = _planted(n_per=10)
    kmap = tiny_build(P, X, gold)
    units = kmap.unit_map()
    assert set(units) == {p.id for p in P}
    assert all(units[p.id] == kmap.unit_of(p.id) for p in P)
    assert len(set(units.values())) == 3


def test_page_sample_is_domain_stratified_and_matches_the_salted_hash():
    import hashlib

    from mmrag.schema import Document
    from mmrag.stages import knowledge_map as stage

    docs = ([Document(id=f"a{i}", title="", domain="a") for i in range(30)]
            + [Document(id=f"b{i}", title="", domain="b") for i in range(9)]
            + [Document(id=f"n{i}", title="", domain=None) for i in range(1)])
    got = stage.sample_pages(docs, 10, seed=3)

    # the domain-stratified sample written out longhand (pages in salted-hash order, each domain's
    # share of n rounded, at least one page each, back in input order): the stage picks the same pages
    def stratified(docs, n, seed):
        key = lambda d: hashlib.sha1(f"knowledge_map:{seed}:{d.id}".encode()).hexdigest()  # noqa: E731
        by = {}
        for d in sorted(docs, key=key):
            by.setdefault(d.domain or "", []).append(d)
        out = []
        for dom in sorted(by):
            out += by[dom][: max(1, round(n * len(by[dom]) / len(docs)))]
        keep = {d.id for d in out[:n]}
        return [d for d in docs if d.id in keep]

    assert [d.id for d in got] == [d.id for d in stratified(docs, 10, 3)]
    assert len(got) == 10 and {d.domain for d in got} == {"a", "b", None}  # every domain kept
    assert [d.id for d in got] == sorted((d.id for d in got), key=[x.id for x in docs].index)
    assert stage.sample_pages(docs, 0, seed=3) == docs and stage.sample_pages(docs, 99, 3) == docs


def test_dev_text_uses_the_grounded_text_subquestion_of_an_image_question():
    from mmrag.schema import Question, SubQuestion
    from mmrag.stages import knowledge_map as stage

    q = Question(id="q", text="Who designed this product?", answer="Ada", dataset="infoseek",
                 image_path="images/x.png",
                 decomposition=[SubQuestion(text="Which product is shown?", tool="ImageQA", answer="Vantor X2"),
                                SubQuestion(text="Who designed the Vantor X2?", tool="TextQA", answer="Ada")])
    assert stage.dev_text(q) == "Who designed the Vantor X2?"
    assert stage.dev_text(Question(id="t", text="Who founded Helix?", answer="A",
                                   dataset="wiki")) == "Who founded Helix?"


def test_why_tables_compare_winner_and_runner_up():
    from mmrag.stages import knowledge_map as stage

    def row(config, units, valid, **crit):
        return {"config": config, "units": units, "valid": valid, **crit}

    rows = [row("A", 4, True, coherence_scaled=0.5, balance=0.9, coverage=0.8, utility=0.6, score=0.7),
            row("B", 9, True, coherence_scaled=1.0, balance=0.5, coverage=0.6, utility=0.5, score=0.65),
            row("C", 1, False, coherence_scaled=0.0, balance=0.0, coverage=1.0, utility=0.1, score=0.9)]
    why, alone = stage.why_tables("t", rows)
    assert why.loc["score", "margin"] == pytest.approx(0.05)
    assert list(why.columns) == ["winner", "runner-up", "margin"]
    picks = dict(zip(alone.criterion, alone["best config"]))
    assert picks == {"coherence_scaled": "B", "balance": "A", "coverage": "C", "utility": "A"}


def test_load_corpus_says_how_much_of_the_pages_truncation_keeps(tmp_path, monkeypatch, capsys):
    """Each page is cut at knowledge_map.max_chars: the share kept is printed and shown in the
    corpora table."""
    from types import SimpleNamespace

    from mmrag.corpora.layout import write_corpus
    from mmrag.corpora.passages import kept_share
    from mmrag.schema import Document, Section
    from mmrag.stages import knowledge_map as stage

    class Encoder:
        def encode(self, texts, **_):
            return np.ones((len(texts), 4), np.float32) / 2

    docs = [Document(id=f"d{i}", title="T", sections=[Section(id=f"d{i}#s0", doc_id=f"d{i}",
                                                              title="", text="x" * n)])
            for i, n in enumerate((98, 398))]  # pages of 100 and 400 characters ("T\n" + text)
    (tmp_path / "c").mkdir()
    write_corpus(tmp_path / "c", docs, {})
    monkeypatch.setattr(stage, "DATA", tmp_path)
    cfg = SimpleNamespace(max_docs=0, max_chars=200, chunk_chars=100, overlap=0, dev_queries=5)
    corpus = stage.load_corpus("c", cfg, Encoder(), seed=0)
    assert corpus.chars_kept == pytest.approx(300 / 500) == kept_share(docs, 200)
    assert "c: 60.0% of the sampled pages' characters kept" in capsys.readouterr().out
    assert stage.corpora_table({"c": corpus})["chars kept"].tolist() == [0.6]
    assert kept_share([], 10) == 1.0
