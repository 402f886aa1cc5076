# Two commands matter (see README): `make repro` and `make test`. Both set everything up first
# and are idempotent: a second run reuses the environment, the models and DVC's cache.
SHELL := /bin/bash
PY := bin/py

.PHONY: env models repro pull push smoke test test-fast lab params-check dag deps lint clean-smoke site

env:            ## create or reuse the pinned environment (.venv); point DVC at the machine's shared cache
	@scripts/setup_env.sh

models: env     ## provision the offline models into data/models (the first stage)
	$(PY) -m dvc repro models

repro: env      ## the main job: `dvc repro` of the profile in params.yaml (default), then push what it made
	$(PY) -m dvc repro
	$(PY) -m dvc push

pull: env       ## the last run's outputs into this clone, from the shared cache or the remote (seconds)
	$(PY) -m dvc pull --allow-missing

push: env       ## this clone's outputs to the default remote (offline: ~/.cache/mmrag/dvc/remote)
	$(PY) -m dvc push

smoke: env      ## the whole pipeline on the smoke profile, in build/smoke (your workspace untouched)
	$(PY) scripts/smoke.py

test: env       ## unit tests, notebook hygiene and the smoke pipeline end to end
	$(PY) -m pytest

test-fast: env  ## unit tests only
	$(PY) -m pytest -m "not slow and not pipeline"

lab: env        ## JupyterLab with the project's environment as the kernel
	$(PY) -m jupyter lab notebooks/

params-check: env
	$(PY) -m mmrag.config check

dag: env
	$(PY) -m dvc dag

deps: env       ## rewrite each stage's src/ deps in dvc.yaml and benchmarks/dvc.yaml from what it imports
	$(PY) -m mmrag.deps --write
	$(PY) benchmarks/deps.py --write

lint: env       ## ruff over src, tests, scripts, benchmarks and the notebooks
	$(PY) -m ruff check src tests scripts benchmarks notebooks

site: env       ## the static site of this run into docs/: the pipeline's last stage (`dvc repro site`)
	$(PY) -m dvc repro site

clean-smoke:
	rm -rf build/smoke
