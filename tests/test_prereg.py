"""claims.yaml, the pre-registration: every claim cites a sentence the paper text holds (at most 25
words), takes its numbers from paper_tables.yaml cells, names valid roles, metrics and types, sizes
its sample by a params key whose value is params.yaml's, and the rules are all stated; the claims
the papers make are all there, our own checks only among the diagnostics."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import PAPERS_DIR, needs_papers

from mmrag.evaluate import claims, papers

ROOT = Path(__file__).resolve().parents[1]
PREREG = yaml.safe_load((ROOT / "claims.yaml").read_text())
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
CLAIMS, DIAGNOSTICS = PREREG["claims"], PREREG["diagnostics"]
METRICS = {"accuracy", "em", "f1", "brit_recall", "route_recall@1", "recall@5", "tool_calls", "sparsity",
           "fidelity", "judge_consistency", "judge_support", "loop_fired", ""}




def param_refs(node: Any, where: str = "") -> list[tuple[str, str, Any]]:
    """Every {param: KEY, value: V} in claims.yaml: (where, key, value)."""
    if isinstance(node, dict):
        if "param" in node and "value" in node:
            return [(where, node["param"], node["value"])]
        return [r for k, v in node.items() for r in param_refs(v, f"{where}.{k}" if where else str(k))]
    if isinstance(node, list):
        return [r for i, v in enumerate(node) for r in param_refs(v, f"{where}[{i}]")]
    return []


def test_every_params_reference_holds_params_yamls_value():
    refs = param_refs(PREREG)
    assert len(refs) > 40  # the rules and every claim's sample size
    for where, key, value in refs:
        node: Any = PARAMS
        for part in key.split("."):
            assert isinstance(node, dict) and part in node, f"{where}: params.yaml has no {key}"
            node = node[part]
        assert node == value, f"{where}: claims.yaml says {key} = {value!r}, params.yaml {node!r}"


def test_the_rules_are_stated_once_each():
    rules = PREREG["rules"]
    assert {"alpha", "power", "bootstrap", "equivalence_margin", "verdicts", "tests", "multiplicity", "ceiling",
            "format", "seeds", "seed_sources"} <= set(rules)
    assert set(rules["verdicts"]) == set(claims.VERDICTS)
    fmt = rules["format"]
    assert {"rule", "limit", "fixed"} <= set(fmt) and fmt["limit"]["param"] == "report.max_format_errors"
    assert "exempt" in fmt["rule"] and "format-clean" in fmt["rule"]  # who is exempt, why, and what they report
    assert "after" in fmt["fixed"]  # when the limit was fixed, honestly
    assert "Holm" in rules["multiplicity"] and "@seed<k>" in rules["seeds"]["naming"]
    assert "(ceiling - chance) / (1 - chance)" in rules["ceiling"]
    text = (ROOT / "claims.yaml").read_text()
    assert text.count("rule: >-") == 1  # one format rule, stated once


def test_every_claim_is_complete_and_its_cells_resolve():
    ids = [e["id"] for e in CLAIMS + DIAGNOSTICS]
    assert len(ids) == len(set(ids))
    for c in CLAIMS:
        where = c["id"]
        assert c["paper"] in papers.PAPERS, where
        assert {"section", "quote"} <= set(c["cite"]), where
        assert len(c["cite"]["quote"].split()) <= papers.MAX_QUOTE_WORDS, where
        assert c["type"] in ("method", "model") and c["set"] in claims.ROLES and c["metric"] in METRICS, where
        assert c.get("direction", 1) in (-1, 0, 1) and c.get("seeds") in PREREG["rules"]["seed_sources"], where
        assert "n" in c and {"param", "value"} <= set(c["n"]), where
        for ref in (c.get("cells") or {}).values():
            papers.value(c["paper"], *ref)  # KeyError names the closest cells
        if c.get("direction") == 0:
            assert c.get("margin"), f"{where}: an equivalence or level claim needs a margin"
        if c.get("untestable"):
            assert "missing run" in c["untestable"], f"{where}: an untestable claim names the run it lacks"
        elif not c.get("cells"):
            assert c.get("magnitude", {}).get("compare") is False, f"{where}: no cells, so only a direction"
    for d in DIAGNOSTICS:
        assert d.get("why") and "cite" not in d, d["id"]  # ours: why it is ours, no sentence of the paper


def test_no_number_of_a_paper_is_typed_in_claims_yaml():
    """Paper numbers come from cells: a claim's fields hold no figure outside its quote and notes."""
    import re

    for c in CLAIMS:
        typed = {k: v for k, v in c.items() if k not in ("cite", "note", "claim", "magnitude", "untestable", "n",
                                                          "margin", "min_correct", "direction")}
        assert not re.search(r"\b0\.\d+\b", yaml.safe_dump(typed)), c["id"]


@needs_papers
def test_every_quote_is_in_its_paper():
    texts = {p: " ".join((PAPERS_DIR / name).read_text(encoding="utf-8").split()) for p, name in papers.PAPERS.items()}
    for c in CLAIMS:
        quote = " ".join(c["cite"]["quote"].split())
        assert quote in texts[c["paper"]], f"{c['id']}: quote not in {papers.PAPERS[c['paper']]}: {quote!r}"


def test_the_papers_claims_are_all_there_and_our_checks_are_not_among_them():
    ids = {c["id"] for c in CLAIMS}
    required = {
        # BRIT Table 1: against the baseline, and its ablation rows
        "brit.table1_accuracy", "brit.table1_image_text", "brit.table1_image_image", "brit.table1_ca",
        "brit.table1_ls", "brit.table1_si", "brit.table1_no_linking",
        # Table 2: BRIT against the baseline, LS over LP, caption plus structure's large gain
        "brit.recall_vs_baseline", "brit.recall_text_image", "brit.recall_image_text", "brit.ls_vs_lp",
        "brit.ca_ls_combination",
        # Table 3 both ways
        "brit.nea_baseline_drops", "brit.nea_brit_improves", "brit.nea_vs_baseline.anon", "brit.nea_vs_baseline.orig",
        # DnC per LLM, Tables 3 and 4, EM, F1 and tool calls; fine-tuning; size
        "dnc.vs_toolsanswer.em.{llm}", "dnc.vs_toolsanswer.f1.{llm}", "dnc.vs_react.em.{llm}", "dnc.vs_react.f1.{llm}",
        "dnc.vs_react.tool_calls.{llm}", "dnc.conversational.{llm}", "dnc.conversational.f1.{llm}",
        "dnc.conversational.vs_react.em.{llm}", "dnc.conversational.vs_react.f1.{llm}",
        "dnc.conversational.tool_calls.{llm}", "dnc.finetuning.{llm}", "dnc.model_size",
        # MM-R2: training and module ablations, the budget table, §6.3's process metrics
        "mmr2.sft", "mmr2.grpo", "mmr2.ablation_km", "mmr2.ablation_intent", "mmr2.ablation_loop", "mmr2.budget",
        "mmr2.route_recall", "mmr2.judge_consistency", "mmr2.judge_coverage", "mmr2.sparsity", "mmr2.fidelity"}
    assert required <= ids, sorted(required - ids)
    ours = ("sensitivity", "ceiling", "loop_firing", "knowledge_map", "routed_vs_flat", "linker_")
    assert not [i for i in ids if any(w in i for w in ours)]
    diags = {d["id"] for d in DIAGNOSTICS}
    assert {"brit.diag.sensitivity", "brit.diag.reader_ceiling", "mmr2.diag.reader_ceiling.{policy}",
            "mmr2.diag.loop_firing", "mmr2.diag.knowledge_map_quality", "mmr2.diag.routed_vs_flat_recall"} <= diags


def test_the_blob_hash_is_gits():
    blob = subprocess.run(["git", "hash-object", "claims.yaml"], cwd=ROOT, capture_output=True, text=True)
    if blob.returncode:
        pytest.skip("git is not available")
    assert claims.load_prereg(ROOT / "claims.yaml").blob == blob.stdout.strip()


def test_the_registry_expands_every_entry():
    reg = claims.registry(["a-llm"], ["b-llm"])
    per_llm = sum(1 for c in CLAIMS if c.get("for_each") == "llm")
    assert len(reg) == len(CLAIMS) - per_llm + per_llm * 1
    assert all(c.cite.get("quote") for c in reg) and not any(c.diagnostic for c in reg)
