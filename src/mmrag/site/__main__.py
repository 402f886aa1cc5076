"""``python -m mmrag.site [--results results] [--out docs] [--readme]``: build the static site."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mmrag.io import ROOT
from mmrag.site.build import build, update_readme


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mmrag.site", description=__doc__)
    ap.add_argument("--results", type=Path, default=ROOT / "results",
                    help="the results folder to publish (its repository is its parent folder)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs", help="the site's folder (replaced as a whole)")
    ap.add_argument("--readme", action="store_true",
                    help="also rewrite the README's site block (the profile) in the results' repository")
    args = ap.parse_args(argv)
    if not args.results.is_dir():
        print(f"site: no results folder at {args.results}", file=sys.stderr)
        return 1
    info = build(args.results, args.out)
    if args.readme and not update_readme(args.results.resolve().parent, info["stamp"]):
        print("site: README.md has no <!-- site:start --> block; not updated", file=sys.stderr)
    print(f"site: {len(info['pages'])} pages, {info['bytes'] / 2**20:.1f} MiB in {args.out} "
          f"from {info['stamp']['text']}")
    if info["missing"]:
        print("site: no rendered notebook yet for " + ", ".join(info["missing"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
