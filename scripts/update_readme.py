"""Regenerate the README's generated blocks: the pipeline graph and the headline results.

    bin/py scripts/update_readme.py          # rewrite README.md in place
    bin/py scripts/update_readme.py --check  # exit 1 if README.md is out of date

The results block is copied from results/report/headline.md (written by the `report` stage
from metrics files), so no number in the README is ever typed by hand.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
HEADLINE = ROOT / "results" / "report" / "headline.md"


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


def render(text: str) -> str:
    for name, body in (("dag", dag()), ("results", results())):
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
