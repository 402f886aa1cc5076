"""Regenerate the README's generated blocks: the pipeline graph and the headline results.

    bin/py scripts/update_readme.py          # rewrite README.md in place
    bin/py scripts/update_readme.py --check  # exit 1 if README.md is out of date

The results block is copied from results/report/headline.md (written by the `report` stage
from metrics files) and the training-seed block is rendered from
results/bench/brit_training_seeds.json (scripts/bench_training_seeds.py), so no number in the
README is ever typed by hand.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from mmrag import config

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
HEADLINE = ROOT / "results" / "report" / "headline.md"
SEEDS = ROOT / "results" / "bench" / "brit_training_seeds.json"


def dag() -> str:
    # Mermaid (nodes and edges sorted) is stable from run to run, unlike the ASCII layout, so
    # `--check` compares like with like; GitHub draws it as a diagram.
    out = subprocess.run([str(ROOT / "bin" / "py"), "-m", "dvc", "dag", "--md"], cwd=ROOT,
                         text=True, capture_output=True, check=True).stdout
    return "\n".join(line.rstrip() for line in out.strip("\n").splitlines())


def results() -> str:
    if not HEADLINE.exists():
        return "*The headline table is generated from `results/report/headline.md` by the `report` stage.*"
    return ("Generated from `results/report/headline.md` (stage `report`; full paper: "
            "`results/report/report.html`).\n\n" + HEADLINE.read_text().strip())


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
        return "*Rendered from `results/bench/brit_training_seeds.json` by `scripts/bench_training_seeds.py`.*"
    bench = json.loads(path.read_text())
    seeds = bench["seeds"]
    table1 = "with" if bench.get("table1") else "without"
    base_seed = config.load().base.seed
    own = (f"; seed {base_seed} is the default run's own, so its column is the same training rerun"
           if base_seed in seeds else "")
    lines = [f"BRIT's claims with CLIP retrained under base.seed {', '.join(map(str, seeds))} "
             f"(`bin/py scripts/bench_training_seeds.py{' --table1' if bench.get('table1') else ''}`, "
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


def render(text: str) -> str:
    for name, body in (("dag", dag()), ("results", results()), ("seeds", training_seeds())):
        text = re.sub(rf"(<!-- {name}:start -->\n).*?(\n<!-- {name}:end -->)",
                      lambda m: m.group(1) + body + m.group(2), text, flags=re.S)
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    current = README.read_text()
    new = render(current)
    if args.check:
        if new != current:
            print("README.md is out of date: run `bin/py scripts/update_readme.py`", file=sys.stderr)
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
