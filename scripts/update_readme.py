"""Regenerate the generated blocks of the README and of two benchmark notes.

    bin/py scripts/update_readme.py          # rewrite the files in place
    bin/py scripts/update_readme.py --check  # exit 1 if any file is out of date

    bin/py scripts/update_readme.py --costs  # first snapshot results/*/cost.json of the run just made

README.md gets the pipeline graph (from `dvc dag`), the headline results, copied from
results/report/headline.md (written by the `report` stage from metrics files), in its opening the
headline's first paragraph (the paper claims' verdicts counted per paper), and the `bin/ask` speed
table from results/bench/ask.json (benchmarks/bench_ask.py). benchmarks/notes/seeds.md gets the
training-seed block, rendered from results/bench/brit_training_seeds.json
(benchmarks/bench_training_seeds.py). benchmarks/notes/training-cost.md gets the per-stage table of a
default run, rendered from benchmarks/notes/stage_costs.json, which ``--costs`` snapshots from the
run's git-ignored results/<stage>/cost.json files. So no number in these blocks is ever typed by hand.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import yaml

from mmrag import config

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SEEDS_PAGE = ROOT / "benchmarks" / "notes" / "seeds.md"
HEADLINE = ROOT / "results" / "report" / "headline.md"
SEEDS = ROOT / "results" / "bench" / "brit_training_seeds.json"
COST_PAGE = ROOT / "benchmarks" / "notes" / "training-cost.md"
COSTS = ROOT / "benchmarks" / "notes" / "stage_costs.json"
ASK = ROOT / "results" / "bench" / "ask.json"


def dag() -> str:
    """The root pipeline's stage graph as compact Mermaid: one line per stage, `stage --> consumers`.

    Parsed from `dvc dag --md` (nodes and edges sorted), so it is stable from run to run and
    `--check` compares like with like; GitHub draws it as a diagram. `dvc dag` also lists the
    stages of benchmarks/dvc.yaml, which `make repro` never runs: they are left out."""
    out = subprocess.run([str(ROOT / "bin" / "py"), "-m", "dvc", "dag", "--md"], cwd=ROOT,
                         text=True, capture_output=True, check=True).stdout
    return compact_dag(out, yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"])


def compact_dag(mermaid: str, stages: Iterable[str]) -> str:
    keep = set(stages)
    names = {node: name for node, name in re.findall(r'^\s*(node\d+)\["([^"]+)"\]', mermaid, re.M)
             if name in keep}
    edges: dict[str, set[str]] = {name: set() for name in names.values()}
    for src, dst in re.findall(r"^\s*(node\d+)-->(node\d+)\s*$", mermaid, re.M):
        if src in names and dst in names:
            edges[names[src]].add(names[dst])
    targets = set().union(*edges.values())
    lines = ["```mermaid", "flowchart TD"]
    for name in sorted(edges):
        if edges[name]:
            lines.append(f"\t{name} --> " + " & ".join(sorted(edges[name])))
        elif name not in targets:
            lines.append(f"\t{name}")
    return "\n".join(lines + ["```"])


def results() -> str:
    if not HEADLINE.exists():
        return "*The headline table is generated from `results/report/headline.md` by the `report` stage.*"
    return ("Generated from `results/report/headline.md` (stage `report`; full paper: "
            "`results/report/report.html`).\n\n" + HEADLINE.read_text().strip())


def headline(path: Path = HEADLINE) -> str:
    """The headline's first paragraph, the paper claims' verdicts counted per paper (the report stage
    writes it from claims.json; diagnostics apart), for the README's opening; a note while the
    headline predates claims.yaml's verdicts."""
    from mmrag.stages.report import HEADLINE_LEAD

    first = path.read_text().strip().split("\n\n")[0] if path.exists() else ""
    if first.startswith(HEADLINE_LEAD):
        return first
    return ("*The verdict counts per paper are generated here from `results/report/headline.md` by the "
            "`report` stage, deciding the claims pre-registered in `claims.yaml` (the committed headline "
            "predates them: rerun `dvc repro report`).*")


def reuse(runs: list[dict]) -> str:
    """Whether the bench's seconds include CLIP's training or reused the CLIPs of an earlier run."""
    trained = {r["clip"].get("trained") for r in runs}
    if trained == {True}:
        return ", CLIP trained in the run"
    if trained == {False}:
        return ", the CLIPs of an earlier run in its work folder reused"
    return ", a CLIP already in its work folder reused"


def training_seeds(path: Path = SEEDS) -> str:
    """BRIT's verdicts under each CLIP training seed beside the committed run's, as the bench wrote them."""
    if not path.exists():
        return "*Rendered from `results/bench/brit_training_seeds.json` by `benchmarks/bench_training_seeds.py`.*"
    bench = json.loads(path.read_text())
    seeds = bench["seeds"]
    table1 = "with" if bench.get("table1") else "without"
    base_seed = config.load().base.seed
    own = (f"; seed {base_seed} is the default run's own, so its column is the same training rerun"
           if base_seed in seeds else "")
    lines = [f"BRIT's claims with CLIP retrained under base.seed {', '.join(map(str, seeds))} "
             f"(`bin/py benchmarks/bench_training_seeds.py{' --table1' if bench.get('table1') else ''}`, "
             f"{bench['seconds']:,.0f} s{reuse(bench['runs'])}, load {bench['load_avg_end']} at the end; "
             f"{table1} Table 1's reader; "
             "the test split and every other setting as the default run's; holds = seeds whose verdict is the "
             f"committed run's{own}). Estimate and 95 % CI per seed:", "",
             "| claim | committed | " + " | ".join(f"seed {s}" for s in seeds) + " | holds |",
             "|---|---|" + "---|" * len(seeds) + "---|"]
    for row in bench["claims"]:
        cells = [f"{row['estimates'][str(s)]:+.3f} [{row['cis'][str(s)][0]:+.3f}, {row['cis'][str(s)][1]:+.3f}] "
                 f"{row['verdicts'][str(s)]}" for s in seeds]
        committed = row["committed_estimate"]
        ref = f"{committed:+.3f} {row['committed_verdict']}" if committed is not None else "—"
        lines.append(f"| {row['id']} | {ref} | " + " | ".join(cells) + f" | {row['holds'] or '—'} |")
    clip = ", ".join(f"seed {r['seed']} {r['clip']['zero_shot_mean']:.3f} / {r['clip']['zero_shot_min']:.3f}"
                     for r in bench["runs"])
    committed_clip = ROOT / "results" / "clip" / "metrics.json"
    if committed_clip.exists():
        m = json.loads(committed_clip.read_text())
        clip += f"; the committed run's {m['zero_shot_mean']:.3f} / {m['zero_shot_min']:.3f}"
    every = f"{len(seeds)}/{len(seeds)}"
    moved = [f"{r['id']} ({r['holds']})" for r in bench["claims"] if r["holds"] not in (None, every)]
    steady = len(bench["claims"]) - len(moved)
    lines += ["", f"CLIP's held-out zero-shot accuracy, mean / min over attributes: {clip}.",
              "", (f"Verdicts that move with CLIP's training seed: {', '.join(moved)}; the other {steady} keep the "
                   "committed verdict on every seed." if moved else
                   f"All {steady} verdicts keep the committed verdict on every seed.")]
    return "\n".join(lines)


def stage_order() -> list[str]:
    """The root pipeline's stages in the order dvc.yaml lists them (the order they run in)."""
    return list(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"])


def snapshot_costs(results: Path = ROOT / "results", out: Path = COSTS) -> dict:
    """Copy every stage's cost.json (git-ignored: it belongs to one machine's run) into one committed
    record, in pipeline order, so the per-stage table can be rendered in any clone."""
    stages = {}
    for name in stage_order():
        path = results / name / "cost.json"
        if path.exists():
            stages[name] = json.loads(path.read_text())
    record = {"profile": config.load().base.profile, "stages": stages}
    out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def stage_costs(path: Path = COSTS) -> str:
    """The per-stage wall time with the load it ran under and its peak memory, and the total."""
    if not path.exists():
        return "*Rendered from `benchmarks/notes/stage_costs.json` by `bin/py scripts/update_readme.py --costs`.*"
    record = json.loads(path.read_text())
    rows = record["stages"]
    total = sum(r["wall_seconds"] for r in rows.values())
    lines = [f"Profile `{record['profile']}`, {len(rows)} stages, **{total:,.0f} s ({total / 3600:.1f} h)** in all "
             "(`results/<stage>/cost.json`; load = the 1-minute load average at the stage's start and end on "
             f"{next(iter(rows.values()))['cpu_count'] if rows else '?'} cores: above the core count, something "
             "else ran beside it and its seconds are inflated).", "",
             "| stage | s | load start / end | peak MB |", "|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['wall_seconds']:,.0f} | {r.get('load_1min_start', '–')} / "
                     f"{r.get('load_1min_end', '–')} | {r.get('peak_rss_mb', '–')} |")
    return "\n".join(lines)


def ask_speed(path: Path = ASK) -> str:
    """How long `bin/ask` takes per system, as benchmarks/bench_ask.py measured it, with its target."""
    if not path.exists():
        return "*Rendered from `results/bench/ask.json` by `bin/py benchmarks/bench_ask.py`.*"
    bench = json.loads(path.read_text())
    m = bench["machine"]
    lines = [f"`bin/ask` per system (`bin/py benchmarks/bench_ask.py`: {bench['questions']} MMQA test questions, "
             f"{m['cores']} cores, load {m['load_1min']} / {m['load_1min_after']} before / after):", "",
             "| system | load s | first answer s | warm answer s, median [min, max] (n) | target |",
             "|---|---|---|---|---|"]
    for name, r in bench["systems"].items():
        if "error" in r:
            lines.append(f"| {name} | – | – | {r['error']} | – |")
            continue
        warm = (f"{r['warm_median_seconds']} [{r['warm_min_seconds']}, {r['warm_max_seconds']}] ({r['warm_n']})"
                if r["warm_median_seconds"] is not None else "–")
        target = ("–" if r.get("target_warm_seconds") is None else
                  f"≤ {r['target_warm_seconds']:g} s: {'met' if r['meets_target'] else 'missed'}")
        lines.append(f"| {name} | {r['load_seconds']} | {r['first_answer_seconds']} | {warm} | {target} |")
    return "\n".join(lines)


def render(text: str, blocks: dict[str, str]) -> str:
    for name, body in blocks.items():
        text = re.sub(rf"(<!-- {name}:start -->\n)(?:.*?\n)??(<!-- {name}:end -->)",
                      lambda m: m.group(1) + body + "\n" + m.group(2), text, flags=re.S)
    return text


def targets() -> list[tuple[Path, dict[str, str]]]:
    """Each file this script owns a block of, with the blocks' fresh contents."""
    return [(README, {"headline": headline(), "dag": dag(), "results": results(), "ask": ask_speed()}),
            (SEEDS_PAGE, {"seeds": training_seeds()}),
            (COST_PAGE, {"costs": stage_costs()})]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--costs", action="store_true", help="snapshot results/*/cost.json first")
    args = ap.parse_args()
    if args.costs:
        snapshot_costs()
    stale = []
    for path, blocks in targets():
        current = path.read_text()
        missing = [name for name in blocks if f"<!-- {name}:start -->\n" not in current]
        if missing:
            print(f"{path.relative_to(ROOT)} has no block for {', '.join(missing)}", file=sys.stderr)
            return 1
        new = render(current, blocks)
        if new == current:
            continue
        if args.check:
            stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(new)
    if stale:
        print(f"{', '.join(stale)} out of date: run `bin/py scripts/update_readme.py`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
