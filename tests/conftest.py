"""Shared fixtures. `smoke_repo` runs the smoke pipeline once per session in build/smoke."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "build" / "smoke"
# Models that unit tests load. They are provisioned (idempotently, ~1 min the first time) before
# collection, so a test never silently skips on a fresh clone for want of a model.
TEST_MODELS = ("smollm2-135m-instruct", "all-minilm-l6-v2", "en_core_web_sm")


def pytest_sessionstart(session: pytest.Session) -> None:
    from mmrag.models import registry

    registry.offline_env()
    for name in TEST_MODELS:
        registry.provision(name)


@pytest.fixture(scope="session")
def smoke_repo() -> Path:
    """A scratch copy of the repo on which `dvc repro` of the smoke profile has just succeeded."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "smoke.py"), "--dest", str(SMOKE)],
                          text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if proc.returncode:
        pytest.fail(f"smoke pipeline failed:\n{proc.stdout[-6000:]}")
    return SMOKE


def papers_dir() -> Path | None:
    """The folder of the three paper texts (brit.txt, dnc.txt, mmr2.txt): $MMRAG_PAPERS, else
    ../shared/papers beside the repository; None where they are not (the texts are not in git)."""
    env = os.environ.get("MMRAG_PAPERS")
    for d in ([Path(env)] if env else []) + [ROOT.parent / "shared" / "papers"]:
        if all((d / name).is_file() for name in ("brit.txt", "dnc.txt", "mmr2.txt")):
            return d
    return None


PAPERS_DIR = papers_dir()
needs_papers = pytest.mark.skipif(PAPERS_DIR is None, reason="the paper texts (brit.txt, dnc.txt, mmr2.txt) are not "
                                  "here: set MMRAG_PAPERS to their folder (default ../shared/papers)")


def dvc(repo: Path, *args: str) -> str:
    proc = subprocess.run([str(repo / "bin" / "py"), "-m", "dvc", *args], cwd=repo, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.returncode == 0, f"dvc {' '.join(args)} failed:\n{proc.stdout[-4000:]}"
    return proc.stdout


def redirect_io(mp: pytest.MonkeyPatch, data: Path, results: Path, *modules) -> None:
    """Point io.DATA and io.RESULTS, and the ``DATA`` each stage module given bound at import, at a
    scratch data/ and results/, so a test that runs stages never writes the pipeline's own folders."""
    from mmrag import io

    mp.setattr(io, "DATA", data)
    mp.setattr(io, "RESULTS", results)
    for mod in modules:
        mp.setattr(mod, "DATA", data)


def load_script(name: str):
    """A module of benchmarks/ or scripts/ (neither is a package), imported from its file so its
    functions can be tested. Its folder goes on sys.path, as when it runs: the benches import their
    helpers (benchmarks/machine.py) by bare name."""
    import importlib.util

    path = next((p for p in (ROOT / "benchmarks" / f"{name}.py", ROOT / "scripts" / f"{name}.py") if p.exists()),
                None)
    if path is None:
        raise FileNotFoundError(f"no benchmarks/{name}.py or scripts/{name}.py")
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
