"""``bin/py -m mmrag <command> ...``: the commands around the pipeline that are not a stage.

- ``ask "question" [--image PATH] [--systems ...] [--json] [--repl] ...``: ask BRIT, DnC, MM-R2 and BM25
  one question over the last run's artifacts (:mod:`mmrag.ask`; ``bin/ask`` is the same).
- ``add FILE ... [--corpus world|wiki|folder]``, ``add --reset``: add .html/.md/.pdf/.zim documents to what
  ``ask`` answers over, without a rebuild (:mod:`mmrag.live`): BRIT's graph updates incrementally and the
  KnowledgeMap assigns the new passages to its units, in a live overlay beside the stages' outputs
  (``data/live/<corpus>``), which DVC never sees; it prints what it added and what it skipped, and why.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from mmrag import ask

USAGE = ("usage: bin/py -m mmrag ask \"question\" [options]   (bin/py -m mmrag ask --help)\n"
         "       bin/py -m mmrag add FILE... [--corpus C] | add --reset   (bin/py -m mmrag add --help)")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = args.pop(0) if args else ""
    if command == "ask":
        return ask.main(args)
    if command == "add":
        from mmrag import live  # ingestion and the overlay: only for add

        return live.main(args)
    print(f"unknown command {command!r}; {USAGE}" if command else USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
