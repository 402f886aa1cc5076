"""``bin/py -m mmrag <command> ...``: the commands around the pipeline that are not a stage.

- ``ask "question" [--image PATH] [--systems ...] [--json] [--repl] ...``: ask BRIT, DnC, MM-R2 and BM25
  one question over the last run's artifacts (:mod:`mmrag.ask`; ``bin/ask`` is the same).
- ``add FILE ...``: not available. BRIT's graph updates incrementally (``UnifiedGraph.add_documents``,
  checked against a rebuild by the ``brit_graph`` stage), but the KnowledgeMap has no incremental
  update yet, and adding pages by hand would change DVC outputs under the pipeline's feet; put the
  files in a folder and run the ``corpora`` stage on it instead (README, "Your own corpus").
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from mmrag import ask

USAGE = "usage: bin/py -m mmrag ask \"question\" [options]   (bin/py -m mmrag ask --help)"
NO_ADD = ("add: not available — the KnowledgeMap has no incremental update (BRIT's graph has one); put the "
          "files in a folder and run `bin/exp -S corpora.folder.path=/your/folder corpora` (README, "
          "\"Your own corpus\")")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = args.pop(0) if args else ""
    if command == "ask":
        return ask.main(args)
    if command == "add":
        print(NO_ADD, file=sys.stderr)
        return 2
    print(f"unknown command {command!r}; {USAGE}" if command else USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
