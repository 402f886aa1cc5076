"""Run one pipeline stage: its notebook, executed by papermill with its params injected.

``python -m mmrag.stage world`` (what dvc.yaml calls, through ``bin/py``):

1. validates the whole params.yaml (a typo fails here, before any work);
2. executes ``notebooks/NN_world.ipynb`` with the sections the stage declares under
   ``params:`` in dvc.yaml injected after its ``parameters`` cell;
3. writes ``results/world/world.ipynb`` and ``results/world/world.html`` atomically, and the
   wall time to ``results/world/cost.json`` (kept out of metrics.json, which must be
   byte-identical across runs with the same seed).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from mmrag import config
from mmrag.io import RESULTS, ROOT, write_json, write_text

NOTEBOOKS = ROOT / "notebooks"
KERNEL = "python3"


def notebook_for(stage: str) -> Path:
    """notebooks/NN_<stage>.ipynb (NN orders the notebooks as the pipeline runs them)."""
    found = sorted(NOTEBOOKS.glob(f"[0-9][0-9]_{stage}.ipynb"))
    if len(found) != 1:
        raise SystemExit(f"stage '{stage}': expected one notebooks/NN_{stage}.ipynb, "
                         f"found {[p.name for p in found]}")
    return found[0]


def declared_sections(stage: str, dvc_file: Path = ROOT / "dvc.yaml") -> list[str]:
    """The params sections a stage declares in dvc.yaml: the only ones it may read."""
    stages = yaml.safe_load(dvc_file.read_text())["stages"]
    if stage not in stages:
        raise SystemExit(f"stage '{stage}' is not in dvc.yaml (stages: {', '.join(stages)})")
    sections = []
    for item in stages[stage].get("params", []):
        if isinstance(item, str):
            sections.append(item.split(".")[0])
        elif isinstance(item, dict):  # {params.yaml: [a, b]}
            for keys in item.values():
                sections.extend(k.split(".")[0] for k in keys)
    return sorted(set(sections), key=sections.index)


def parameters_for(stage: str, params: config.Params) -> dict[str, Any]:
    full = config.as_dict(params)
    return {s: full[s] for s in declared_sections(stage)}


def html_of(notebook: Path) -> str:
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(notebook), as_version=4)
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    return body


def run(stage: str) -> Path:
    import papermill

    params = config.load()
    if not params.base.allow_network:
        from mmrag.models.registry import offline_env

        offline_env()
    source = notebook_for(stage)
    out_dir = RESULTS / stage
    out_dir.mkdir(parents=True, exist_ok=True)
    out_nb = out_dir / f"{stage}.ipynb"
    started = time.time()
    running = out_dir / f".{stage}.running.ipynb"
    try:
        papermill.execute_notebook(
            str(source), str(running), parameters=parameters_for(stage, params),
            kernel_name=KERNEL, cwd=str(ROOT), progress_bar=False, log_output=True)
    except BaseException:
        if running.exists():  # keep the partial notebook for debugging; never as the result
            os.replace(running, out_dir / f"{stage}.failed.ipynb")
        raise
    os.replace(running, out_nb)
    (out_dir / f"{stage}.failed.ipynb").unlink(missing_ok=True)
    write_text(out_dir / f"{stage}.html", html_of(out_nb))
    write_json(out_dir / "cost.json", {"stage": stage, "wall_seconds": round(time.time() - started, 1)})
    return out_nb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mmrag.stage", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage")
    args = ap.parse_args(argv)
    try:
        out = run(args.stage)
    except config.ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{args.stage}: wrote {out.relative_to(ROOT)} and its .html")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
