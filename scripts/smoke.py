"""Run the whole pipeline on the smoke profile in a scratch copy of the repository.

    bin/py scripts/smoke.py [--dest build/smoke] [--profile smoke] [stage ...]

Copies the working tree (tracked and untracked-but-not-ignored files) into ``--dest``, applies
``profiles/<profile>.yaml`` to the copy's params.yaml, runs ``dvc repro [stage ...]`` there and checks that
``dvc status`` is clean afterwards. Your own params.yaml, data/ and results/ are untouched.
The copy is kept, so a second run only redoes the stages whose inputs changed.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

from mmrag import config
from mmrag.exp import stale_after_repro

ROOT = Path(__file__).resolve().parents[1]


def sh(cmd: list[str], cwd: Path) -> str:
    """Run a command, echoing it; raise with its output if it fails."""
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=cwd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    print(proc.stdout, end="", flush=True)
    if proc.returncode:
        raise SystemExit(f"smoke: `{' '.join(cmd)}` failed with exit code {proc.returncode}")
    return proc.stdout


def sync(dest: Path) -> None:
    """Mirror the working tree's source files into dest (leaving dest's data/ and caches)."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           text=True, capture_output=True, check=True).stdout.split("\n")
    # pipeline outputs are produced in the copy, never carried over from this workspace
    wanted = {f for f in files if f and (ROOT / f).is_file()
              and (not f.startswith(("results/", "data/")) or f.endswith(".gitignore"))}
    for rel in sorted(wanted):
        src, dst = ROOT / rel, dest / rel
        if rel == "params.yaml" or (dst.exists() and filecmp.cmp(src, dst, shallow=False)):
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    # params.yaml is rewritten below; copy it fresh each time so the overlay applies to HEAD's
    shutil.copy2(ROOT / "params.yaml", dest / "params.yaml")
    venv = ROOT / ".venv"
    if venv.exists() and not (dest / ".venv").exists():
        os.symlink(os.path.realpath(venv), dest / ".venv")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dest", default=str(ROOT / "build" / "smoke"))
    ap.add_argument("--profile", default="smoke", choices=config.PROFILES)
    ap.add_argument("stages", nargs="*", help="repro only these stages (and what they need)")
    args = ap.parse_args()
    dest = Path(args.dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    sync(dest)
    py = [str(dest / "bin" / "py")]
    if not (dest / ".git").exists():
        sh(["git", "init", "-q"], dest)
    sh(py + ["-m", "mmrag.config", "use", args.profile], dest)
    sh(["git", "add", "-A"], dest)
    sh(["git", "-c", "user.name=smoke", "-c", "user.email=smoke@localhost", "commit", "-q",
        "--allow-empty", "-m", "smoke snapshot"], dest)
    sh(py + ["-m", "dvc", "repro", *args.stages], dest)
    stale = stale_after_repro(dest, *args.stages)
    if stale:
        raise SystemExit(f"smoke: `dvc status` is not clean after `dvc repro`: {stale}")
    print(f"smoke: {args.profile} pipeline complete in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
