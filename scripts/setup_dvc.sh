#!/usr/bin/env bash
# Point this clone's DVC at the machine's store, outside the work tree: a cache shared by every
# clone (so a new clone gets the last run's outputs with `make pull` in seconds, and a rerun
# reuses what any clone made) and a default remote that works offline (`dvc push` / `dvc pull`).
# Cache: $MMRAG_DVC_CACHE (default ~/.cache/mmrag/dvc/cache); remote: $MMRAG_DVC_REMOTE (default
# ~/.cache/mmrag/dvc/remote). Both go to .dvc/config.local (this clone only, not in git). A team's
# remote set with `dvc remote add -d` in .dvc/config (committed) is kept: then none is added here.
# DVC writes cache and remote objects to a temporary file renamed into place, so clones that run
# at the same time never see half an object.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${MMRAG_DVC_CACHE:-$HOME/.cache/mmrag/dvc/cache}
REMOTE=${MMRAG_DVC_REMOTE:-$HOME/.cache/mmrag/dvc/remote}
dvc() { bin/py -m dvc "$@"; }
mkdir -p "$CACHE"
[ "$(dvc config --local cache.dir 2>/dev/null || true)" = "$CACHE" ] || dvc config --local cache.dir "$CACHE"
if ! dvc config --project core.remote >/dev/null 2>&1; then
  case "$REMOTE" in *://*) ;; *) mkdir -p "$REMOTE" ;; esac
  if [ "$(dvc config --local remote.machine.url 2>/dev/null || true)" != "$REMOTE" ]; then
    dvc remote add --local --force --default machine "$REMOTE" >/dev/null
  fi
fi
