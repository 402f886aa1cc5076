"""``bin/exp``: ``dvc exp run`` that checks the overrides before DVC touches any output.

``bin/exp -S corpora.folder.path=/docs corpora`` validates params.yaml with the overrides
applied (types, ranges, unknown keys, the paths you give) and runs nothing if they are wrong,
so a typo never deletes the previous results and never stays in params.yaml. If the run itself
fails, params.yaml is put back as it was. Ctrl-C ends in one line from the stage (its last good
outputs put back) and one from bin/exp (params.yaml put back), at any point of the run.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any


def _interrupted_while_loading(signum: int, frame: Any) -> None:
    """Ctrl-C before DVC has started ends in one line, not in an import's traceback."""
    print("bin/exp interrupted before it ran anything; params.yaml and every output are unchanged", file=sys.stderr)
    raise SystemExit(130)


if __name__ == "__main__":  # before the import below and the checks, which take a second on a busy machine
    signal.signal(signal.SIGINT, _interrupted_while_loading)

from mmrag import config  # noqa: E402


def overrides_of(argv: Sequence[str]) -> list[str]:
    """The ``-S``/``--set-param`` values of a ``dvc exp run`` command line."""
    found = []
    args = list(argv)
    for i, arg in enumerate(args):
        if arg in ("-S", "--set-param") and i + 1 < len(args):
            found.append(args[i + 1])
        elif arg.startswith("--set-param="):
            found.append(arg.split("=", 1)[1])
        elif arg.startswith("-S") and len(arg) > 2:
            found.append(arg[2:])
    return found


def check(argv: Sequence[str]) -> list[str]:
    """Problems with params.yaml plus the overrides (empty: safe to run)."""
    try:
        raw = config.apply_overrides(config.read_raw(config.PARAMS_FILE), overrides_of(argv))
        return config.preflight(config.from_dict(raw))
    except config.ConfigError as e:
        return [str(e)]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    problems = check(argv)
    if problems:
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        print("nothing was run; params.yaml and every output are unchanged", file=sys.stderr)
        return 2
    before = config.PARAMS_FILE.read_bytes()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # run_child turns Ctrl-C into a wait for DVC
    code, interrupted = run_child([sys.executable, "-m", "dvc", "exp", "run", *argv])
    with ctrl_c_ignored():  # a late Ctrl-C must not leave params.yaml half written
        return finish(code, interrupted, before)


def finish(code: int, interrupted: bool, before: bytes) -> int:
    """Put params.yaml back after a failed or interrupted run (DVC wrote the -S overrides into it) and
    say so in one line; the exit code of bin/exp."""
    restored = bool(code) and config.PARAMS_FILE.read_bytes() != before
    if restored:
        config.PARAMS_FILE.write_bytes(before)
    if interrupted:
        print("bin/exp interrupted: the stage put its last good outputs back"
              + ("; params.yaml is as it was" if restored or config.PARAMS_FILE.read_bytes() == before else ""),
              file=sys.stderr)
        return 130
    if restored:
        print("params.yaml put back as it was before the failed run", file=sys.stderr)
    return code


@contextlib.contextmanager
def ctrl_c_ignored() -> Iterator[None]:
    """Ctrl-C does nothing inside: the run is over by then, and what remains (putting params.yaml back)
    takes a millisecond that an interrupt must not split."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_child(cmd: Sequence[str], grace: float = 120.0) -> tuple[int, bool]:
    """Run ``cmd`` and wait; (exit code, interrupted). Ctrl-C reaches the child too (same process
    group), so on an interrupt this process only waits for the child to clean up (its outputs put
    back) instead of dying with a traceback; a second Ctrl-C, or ``grace`` seconds, kills it."""
    proc = subprocess.Popen(list(cmd))
    try:
        code = proc.wait()
        # the child may take the same Ctrl-C and end before this process sees it
        return code, code in (130, -signal.SIGINT)
    except KeyboardInterrupt:
        try:
            proc.wait(timeout=grace)
        except (KeyboardInterrupt, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        return 130, True


def changed_stages(status: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Stages `dvc status --json` reports as changed, leaving out the bare "always changed" of a
    stage marked always_changed (folder_manifest hashes the folder on every repro by design)."""
    return {stage: what for stage, what in status.items() if any(w != "always changed" for w in what)}


def stale_after_repro(repo: Path, *stages: str) -> dict[str, list[Any]]:
    """`dvc status` of the pipeline (dvc.yaml's stages, not the benchmarks') as data, minus the
    always-changed stages' bare marker."""
    targets = stages or ("dvc.yaml",)
    proc = subprocess.run([str(repo / "bin" / "py"), "-m", "dvc", "status", "--json", *targets], cwd=repo,
                          text=True, capture_output=True)
    if proc.returncode:
        raise RuntimeError(f"dvc status failed in {repo}:\n{proc.stdout}{proc.stderr}")
    return changed_stages(json.loads(proc.stdout or "{}"))


if __name__ == "__main__":
    raise SystemExit(main())
