"""Which past src/ commits would have made every stage stale: the old deps layout against the new one.

    bin/py benchmarks/bench_deps_replay.py [--count 166] [--out results/bench/deps_replay.json]

Replays the last ``--count`` commits that touched src/ before the params core (src/mmrag/params.py)
was added, i.e. the history of the old layout.

Old layout: a commit stales every stage when it touches a file that all stages listed in that
commit's own dvc.yaml (also counted: against the files all stages shared in the old layout's last
dvc.yaml). New layout: the files every stage lists now (the params core and io); the runner and
the package files are out of the deps, and each section's dataclass sits beside its system. A
commit's edits to the old config.py are split by hunk: a line of the validation core (now
mmrag.params) stales every stage; a line of a section's dataclass now lands in that system's params
module (staling only the stages that read it); the whole-file tools (profiles, overrides, the CLI)
are in no stage's deps.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
from pathlib import Path

import yaml
from machine import snapshot, with_load_after

from mmrag.deps import stage_sources
from mmrag.io import write_json

ROOT = Path(__file__).resolve().parents[1]
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.M)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, text=True, capture_output=True, check=True).stdout


def common_deps(dvc_text: str) -> set[str]:
    """The src/ files every stage of a dvc.yaml lists."""
    stages = yaml.safe_load(dvc_text)["stages"].values()
    sets = [{d if isinstance(d, str) else next(iter(d)) for d in s.get("deps", [])} for s in stages]
    return {f for f in set.intersection(*sets) if f.startswith("src/")} if sets else set()


# what moved into the params core (every stage's dep); the rest of the old config.py is now a section
# module (one system's stages) or the whole-file tools in config.py (no stage's dep)
CORE = {"ConfigError", "Base", "rng", "_type_name", "_fail", "_coerce", "_check_range", "_build", "from_dict",
        "load", "section", "as_dict"}


def spans(source: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Line spans of an old config.py: (the core's definitions, every top-level definition)."""
    core, every = [], []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            every.append((start, node.end_lineno))
            if node.name in CORE:
                core.append((start, node.end_lineno))
    return core, every


def config_edit_is_core(commit: str) -> bool:
    """Whether a commit's edit of the old config.py touched the params core: a line of a core definition,
    or a module-level line outside every definition (imports, constants; counted as core to be safe)."""
    try:
        old = spans(git("show", f"{commit}^:src/mmrag/config.py"))
        new = spans(git("show", f"{commit}:src/mmrag/config.py"))
    except subprocess.CalledProcessError:
        return True  # created or deleted: the core
    inside = lambda n, ranges: any(a <= n <= b for a, b in ranges)  # noqa: E731
    core_line = lambda n, sp: inside(n, sp[0]) or not inside(n, sp[1])  # noqa: E731
    diff = git("diff", "-U0", f"{commit}^", commit, "--", "src/mmrag/config.py")
    for m in HUNK.finditer(diff):
        o_start, o_len = int(m.group(1)), int(m.group(2) or 1)
        n_start, n_len = int(m.group(3)), int(m.group(4) or 1)
        if any(core_line(n, old) for n in range(o_start, o_start + o_len)) or \
                any(core_line(n, new) for n in range(n_start, n_start + n_len)):
            return True
    return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=166)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "deps_replay.json"))
    args = ap.parse_args()
    before_machine = snapshot()
    added = git("log", "--diff-filter=A", "--format=%H", "--", "src/mmrag/params.py").split()
    if not added:
        raise SystemExit("bench_deps_replay: src/mmrag/params.py was never added; nothing to compare")
    old_layout = f"{added[-1]}^"  # the last commit before the params core
    stages = list(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"])
    new_common = set.intersection(*(set(stage_sources(s)) for s in stages))
    infrastructure = {"src/mmrag/stage.py", "src/mmrag/stages/__init__.py", "src/mmrag/__init__.py"}
    commits = git("log", "--format=%H", old_layout, "--", "src").split()[: args.count]
    last_common = common_deps(git("show", f"{old_layout}:dvc.yaml"))  # the files all stages shared last
    rows = []
    for commit in commits:
        files = set(git("diff-tree", "--no-commit-id", "--name-only", "-r", commit).split())
        src = {f for f in files if f.startswith("src/")}
        try:
            old_common = common_deps(git("show", f"{commit}:dvc.yaml"))
        except subprocess.CalledProcessError:
            old_common = set()
        before = bool(src & old_common)
        before_last = bool(src & last_common)
        after_files = {f for f in src if f not in infrastructure and f != "src/mmrag/config.py"}
        core = "src/mmrag/config.py" in src and config_edit_is_core(commit)
        after = bool(after_files & new_common) or core
        rows.append({"commit": commit[:12], "before": before, "before_last_layout": before_last, "after": after,
                     "config_edit": "core" if core else ("sections" if "src/mmrag/config.py" in src else None)})
    summary = {"commits": len(rows), "staled_every_stage_before": sum(r["before"] for r in rows),
               "touched_a_file_every_stage_shared_last": sum(r["before_last_layout"] for r in rows),
               "files_every_stage_shared_last": sorted(last_common),
               "staled_every_stage_after": sum(r["after"] for r in rows),
               "new_common_deps": sorted(new_common), "stages": len(stages)}
    write_json(Path(args.out), {"machine": with_load_after(before_machine), **summary, "rows": rows})
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
