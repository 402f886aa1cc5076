"""The stores outside the work tree: one environment per pin set, built once even when two setups
start together, and a DVC cache shared by the clones of a machine, so a second clone gets the
last run's outputs without rerunning anything."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT, dvc

from mmrag.exp import stale_after_repro

# A stand-in for Python 3.11 whose `-m venv` makes a venv whose pip takes a second and logs each
# call: the setup's logic (lock, reuse, link) runs for real, without installing gigabytes.
FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin"
  printf '#!/usr/bin/env bash\\necho "$$ start" >> %s/builds.log; sleep 1; echo "$$ end" >> %s/builds.log\\n' \
    "$LOGDIR" "$LOGDIR" > "$3/bin/pip"
  printf '#!/usr/bin/env bash\\nexit 0\\n' > "$3/bin/python"
  chmod +x "$3/bin/pip" "$3/bin/python"
fi
exit 0
"""


def _clone_of_setup(dest: Path) -> Path:
    for rel in ("scripts/setup_env.sh", "scripts/setup_dvc.sh", "requirements/base.txt",
                "requirements/models.txt", "bin/py"):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    return dest


def test_two_setups_at_once_build_the_environment_once_and_both_use_it(tmp_path):
    fake = tmp_path / "python3.11"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake), "LOGDIR": str(tmp_path), "MMRAG_ENV_STORE": str(tmp_path / "store"),
           "MMRAG_DVC_CACHE": str(tmp_path / "cache"), "MMRAG_DVC_REMOTE": str(tmp_path / "remote")}
    clones = [_clone_of_setup(tmp_path / name) for name in ("one", "two")]
    procs = [subprocess.Popen(["bash", "scripts/setup_env.sh"], cwd=c, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for c in clones]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    log = (tmp_path / "builds.log").read_text().split()[1::2]
    assert log == ["start", "end"] * 4, f"one build (four pip calls, none overlapping), not two: {log}"
    built = [os.path.realpath(c / ".venv") for c in clones]
    assert built[0] == built[1] and (Path(built[0]) / ".ready").exists()
    assert sum("reusing environment" in out or "waiting for it" in out for out in outputs) == 1, outputs


@pytest.mark.pipeline
@pytest.mark.slow
def test_a_second_clone_is_clean_after_a_pull_without_rerunning(smoke_repo, tmp_path):
    """What the shared cache buys: `make pull` in a new clone, then `dvc status` is clean."""
    subprocess.run(["git", "add", "-A"], cwd=smoke_repo, check=True)
    subprocess.run(["git", "-c", "user.name=smoke", "-c", "user.email=smoke@localhost", "commit", "-q",
                    "--allow-empty", "-m", "smoke results"], cwd=smoke_repo, check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(smoke_repo), str(clone)], check=True)
    os.symlink(os.path.realpath(ROOT / ".venv"), clone / ".venv")
    env = {**os.environ, "MMRAG_DVC_CACHE": str(smoke_repo / ".dvc" / "cache"),
           "MMRAG_DVC_REMOTE": str(tmp_path / "remote")}
    subprocess.run(["bash", "scripts/setup_dvc.sh"], cwd=clone, env=env, check=True)
    started = time.time()
    dvc(clone, "pull", "--allow-missing")
    assert not stale_after_repro(clone), "the second clone would rerun stages"
    assert time.time() - started < 300
