"""`python -m mmrag.evaluate TRACES.jsonl [...] --questions QUESTIONS.jsonl`: score traces on both axes.

`python -m mmrag.evaluate claims [--data DIR] [--out claims.json] [--papers BRIT ...] [--sets brit=mine ...]`
decides every claim of claims.yaml (estimate, 95 % CI, p and Holm's p_adj, n, mde, the paper's effect
scaled to our ceiling, n needed, verdict, seeds) and its diagnostics from the traces under data/, on the
question sets the stages' params name (or those given with --sets).
`python -m mmrag.evaluate power` prints the questions each paper effect needs (scaled to our ceilings
where a run measured them; no trace needed).
`python -m mmrag.evaluate papers [--json] [--paper BRIT] [--verify DIR]` prints the papers' results tables,
cell by cell, as transcribed in src/mmrag/evaluate/paper_tables.yaml (``--verify``: against the paper texts).

Prints one markdown row per trace file (task level: accuracy, EM, F1, Recall@k; process level:
Route Recall@1, Explanation Sparsity, judge consistency/support; cost), and optionally writes
the summaries and the per-question scores as JSON. The judge is the deterministic lexical proxy
unless ``--judge-url`` names an OpenAI-compatible server (then ``--allow-network`` for remote ones).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from mmrag import config, io
from mmrag.evaluate import claims, evidence, papers
from mmrag.evaluate.evaluator import evaluate_file, summarize_by
from mmrag.evaluate.judge import LexicalJudge, LLMJudge
from mmrag.evaluate.tables import cross_system_table, markdown
from mmrag.io import read_json, read_jsonl, write_json, write_jsonl
from mmrag.models.generation import engine_settings, load_chat


def _unit_map(path: str | None) -> dict[str, str] | None:
    """passage id -> unit id: a KnowledgeMap folder, its passages.jsonl, or a JSON mapping."""
    if not path:
        return None
    p = Path(path)
    if p.is_dir():
        p = p / "passages.jsonl"
    try:
        if p.suffix == ".jsonl":
            return {str(r.get("passage_id", r.get("id"))): str(r["unit"]) for r in read_jsonl(p)}
        raw = read_json(p)
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        return {str(k): str(v) for k, v in raw.items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"error: --units {path}: expected a KnowledgeMap folder (e.g. "
                         f"data/knowledge_map/world), its passages.jsonl (rows with id and unit) "
                         f"or a JSON object passage id -> unit id ({type(e).__name__}: {e})")


def _role(arg: str) -> tuple[str, str]:
    """'brit=mine' -> ('brit', 'mine'), naming the roles when the key is not one."""
    roles = [f.name for f in dataclasses.fields(claims.ClaimSets)]
    role, sep, name = arg.partition("=")
    if not sep or role not in roles:
        raise ValueError(f"'{arg}' is not ROLE=SET with ROLE one of {', '.join(roles)}")
    return role, name


def default_data() -> Path:
    """data/ where a run left traces there, else the evidence pack committed beside claims.json."""
    if any(io.DATA.glob("*/traces/*.jsonl")):
        return io.DATA
    return io.RESULTS / "report" / "evidence"


def decide(args: argparse.Namespace, data: Path, params: Any, pre: Any, sets: Any,
           previous: dict[str, Any] | None) -> dict[str, Any]:
    """The claims document from the traces under ``data``, with the command line's overrides."""
    return claims.evaluate(
        data,
        alpha=pre.value("alpha") if args.alpha is None else args.alpha,
        power=pre.value("power") if args.power is None else args.power,
        reps=pre.value("bootstrap") if args.bootstrap is None else args.bootstrap,
        seed=params.base.seed if args.seed is None else args.seed,
        llms=list(params.toolagent_eval.llms) if args.llms is None else args.llms,
        size_llms=list(params.toolagent_eval.size_llms) if args.size_llms is None else args.size_llms,
        margin=args.margin, papers=args.papers or (), sets=sets, max_format_errors=args.max_format_errors,
        fidelity_min_correct=params.two_axis_eval.fidelity_min_correct,
        results=Path(args.results) if args.results else io.RESULTS, prereg=pre, previous=previous)


def claims_main(argv: list[str]) -> int:
    """`python -m mmrag.evaluate claims`: decide every claim of claims.yaml from the traces in data/."""
    ap = argparse.ArgumentParser(prog="python -m mmrag.evaluate claims", description=claims.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None,
                    help="the data folder holding <stage>/traces, or an evidence pack (default: data/ where it "
                         "holds traces, else the committed pack results/report/evidence)")
    ap.add_argument("--previous", default=None,
                    help="the last claims.json, whose records say whether a rule changed after its traces "
                         "(default: results/report/claims.json)")
    ap.add_argument("--results", default=None, help="the stages' metrics.json folder, for the ceilings "
                                                    "(default: results/ beside --data)")
    ap.add_argument("--prereg", default=None, help="the pre-registration file (default: claims.yaml)")
    ap.add_argument("--out", help="write the document here (JSON), as the report's claims.json")
    ap.add_argument("--alpha", type=float, help="default: claims.yaml rules.alpha (params report.alpha)")
    ap.add_argument("--power", type=float, help="default: claims.yaml rules.power (params report.power)")
    ap.add_argument("--bootstrap", type=int, help="default: claims.yaml rules.bootstrap (params report.bootstrap)")
    ap.add_argument("--seed", type=int, help="default: params base.seed")
    ap.add_argument("--margin", type=float, help="equivalence margin of the equivalence and level claims "
                                                 "(default: claims.yaml rules.equivalence_margin)")
    ap.add_argument("--llms", nargs="*", help="DnC's LLMs, smallest first (default: toolagent_eval.llms)")
    ap.add_argument("--size-llms", nargs="*", help="other sizes for the size claim only "
                                                   "(default: toolagent_eval.size_llms)")
    ap.add_argument("--sets", nargs="*", default=[], metavar="ROLE=SET",
                    help="decide on other question sets than the stages' params name, e.g. brit=mine "
                         "multihop=mine (roles: brit, nea, multihop, conversational, infoseek)")
    ap.add_argument("--max-format-errors", type=float,
                    help="default: claims.yaml rules.format.limit (params report.max_format_errors)")
    ap.add_argument("--papers", nargs="*", choices=("BRIT", "DnC", "MM-R2"),
                    help="only these papers' claims (default: all three), e.g. BRIT while only its stages ran")
    args = ap.parse_args(argv)
    params = config.load()
    pre = claims.load_prereg(args.prereg)
    sets = claims.ClaimSets.from_params(params)
    try:
        sets = dataclasses.replace(sets, **dict(_role(s) for s in args.sets))
    except (TypeError, ValueError) as e:
        ap.error(f"--sets: {e}")
    data = Path(args.data) if args.data else default_data()
    last = Path(args.previous) if args.previous else io.RESULTS / "report" / "claims.json"
    previous = read_json(last) if last.exists() else None
    with evidence.unpacked(data) as folder:
        doc = decide(args, folder, params, pre, sets, previous if isinstance(previous, dict) else None)
    print(markdown(claims.table(doc["claims"])))
    if doc["diagnostics"]:
        print("\ndiagnostics (ours, not counted):")
        print(markdown(claims.table(doc["diagnostics"])))
    for paper, tally in doc["counts"].items():
        print(f"{paper}: " + ", ".join(f"{tally[v]} {v}" for v in claims.VERDICTS if v in tally))
    if doc["rules"]["overridden"]:
        print(f"rules overridden on the command line: {', '.join(doc['rules']['overridden'])}")
    if args.out:
        write_json(args.out, doc)
    return 0


def power_main(argv: list[str]) -> int:
    """`python -m mmrag.evaluate power`: the questions each paper effect needs, from claims.yaml alone
    (scaled to our ceilings where a run has measured them)."""
    ap = argparse.ArgumentParser(prog="python -m mmrag.evaluate power", description=claims.power_table.__doc__)
    ap.add_argument("--llms", nargs="*", help="DnC's LLMs (default: toolagent_eval.llms)")
    ap.add_argument("--data", default=None, help="the data folder whose questions and ceilings scale the effects "
                                                 "(default: data/)")
    ap.add_argument("--results", default=None, help="the stages' metrics.json folder (default: beside --data)")
    ap.add_argument("--out", help="write the rows here (JSON)")
    args = ap.parse_args(argv)
    params = config.load()
    pre = claims.load_prereg()
    data = Path(args.data) if args.data else io.DATA
    sets = claims.ClaimSets.from_params(params)
    reg = claims.registry(list(params.toolagent_eval.llms) if args.llms is None else args.llms,
                          list(params.toolagent_eval.size_llms), sets=sets, prereg=pre)
    rows = claims.power_table(reg, pre.value("alpha"), pre.value("power"), data,
                              Path(args.results) if args.results else None, sets)
    cols = ["paper", "id", "metric", "paper_a", "paper_b", "paper_effect", "ceiling", "chance", "scaled_effect",
            "n_needed", "n"]
    print(markdown(pd.DataFrame(rows)[cols]))
    print(f"{sum(r['at_least_10_points'] for r in rows)} of {len(rows)} claims whose size is compared have a "
          f"(scaled) effect of 10 points or more; claims.json gives each claim's measured n, mde and verdict")
    if args.out:
        write_json(args.out, rows)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["claims"]:
        return claims_main(argv[1:])
    if argv[:1] == ["power"]:
        return power_main(argv[1:])
    if argv[:1] == ["papers"]:
        return papers.main(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m mmrag.evaluate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+", help="trace jsonl files (<system>__<set>.jsonl)")
    ap.add_argument("--questions", required=True, help="the schema.Question jsonl they answer")
    ap.add_argument("--k", type=int, nargs="+", default=[1, 5], help="Recall@k cut-offs")
    ap.add_argument("--units", help="KnowledgeMap folder, or a passage->unit map (JSON or jsonl), "
                                    "for Route Recall@1 and unit hits")
    ap.add_argument("--split", nargs="+", help="only questions of these splits")
    ap.add_argument("--only-traced", action="store_true",
                    help="score only questions that have a trace (else untraced = wrong)")
    ap.add_argument("--by", choices=["split", "kind"], help="also print one row per split/kind")
    ap.add_argument("--out", help="write the summaries here (JSON)")
    ap.add_argument("--per-question", help="write per-question scores here (jsonl)")
    ap.add_argument("--judge-url", help="OpenAI-compatible base URL for an LLM judge")
    ap.add_argument("--judge-model", default="gpt-4o")
    ap.add_argument("--allow-network", action="store_true")
    args = ap.parse_args(argv)

    judge = LexicalJudge()
    if args.judge_url:
        judge = LLMJudge(load_chat(args.judge_model, engine="openai", base_url=args.judge_url,
                                   settings=engine_settings(config.load().inference),
                                   allow_network=args.allow_network, device="cpu"))
    units = _unit_map(args.units)
    summaries, rows = [], []
    for path in args.traces:
        if not Path(path).exists():
            print(f"error: {path} does not exist", file=sys.stderr)
            return 2
        try:
            scored, summary = evaluate_file(path, args.questions, args.k, units, judge,
                                            args.split, args.only_traced)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        summaries.append(summary)
        rows.extend(s.row() for s in scored)
        if args.by:
            for value, sub in summarize_by(scored, args.by).items():
                sub.update(system=summary["system"],
                           question_set=f"{summary['question_set']} [{args.by}={value}]")
                summaries.append(sub)
    cols = ["accuracy", "em", "f1", *[f"recall@{k}" for k in args.k], "route_recall@1",
            "sparsity_tokens", "judge_consistency", "judge_support", "tokens_per_q",
            "tool_calls_per_q", "seconds_per_q"]
    print(markdown(cross_system_table(summaries, cols)))
    print(f"judge: {judge.name}")
    if args.out:
        write_json(args.out, summaries)
    if args.per_question:
        write_jsonl(args.per_question, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
