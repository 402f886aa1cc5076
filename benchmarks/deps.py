"""The code each benchmark stage runs, computed from its imports: deps of benchmarks/dvc.yaml that
cannot drift.

A stage's ``cmd`` names its script (``bin/py benchmarks/<script>.py ...``). What the stage runs is
that script, the benchmark modules it imports by their bare name (``machine``, ``bench_quant`` for
``bench_lora``, ...), and every ``src/mmrag`` file those import, transitively, function-level
imports included (:func:`mmrag.deps.closure`, the same closure the root pipeline's deps come
from). ``bin/py benchmarks/deps.py`` lists what benchmarks/dvc.yaml lacks or lists in vain;
``--write`` rewrites the ``benchmarks/`` and ``src/`` part of every stage's deps and keeps the rest
(upstream data, the adapters a stage reads) as it was. tests/test_benchmarks.py checks them.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from mmrag.deps import closure, imported_names, rewrite  # noqa: E402

BENCH = "benchmarks"
DVC_FILE = ROOT / BENCH / "dvc.yaml"
CODE_PREFIXES = (f"{BENCH}/", "src/")  # the deps this module owns; the rest are kept as written
_SCRIPT = re.compile(rf"(?:^|\s){BENCH}/([\w.-]+)\.py\b")


def local_imports(source: str, root: Path = ROOT) -> set[str]:
    """The benchmark modules (files of benchmarks/) a script imports by their bare name."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if (root / BENCH / f"{n}.py").is_file()}


def script_sources(script: str, root: Path = ROOT) -> list[str]:
    """Repo-relative files a benchmark script runs: itself, the benchmark modules it imports and
    the ``src/mmrag`` files all of them import, transitively."""
    todo, seen, texts = [script], set(), []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        text = (root / BENCH / f"{name}.py").read_text()
        texts.append(text)
        todo.extend(local_imports(text, root))
    names = set().union(*(imported_names(t) for t in texts))
    src = closure(sorted(names), src=root / "src")
    return sorted(f"{BENCH}/{n}.py" for n in seen) + sorted(str(p.relative_to(root)) for p in src)


def body(spec: dict[str, Any]) -> dict[str, Any]:
    """The part of a stage that holds cmd and deps (``do`` of a foreach stage)."""
    return spec["do"] if "do" in spec else spec


def scripts_of(spec: dict[str, Any]) -> list[str]:
    """The benchmark scripts a stage's cmd (a string or a list of them) runs, by name."""
    cmd = body(spec).get("cmd", "")
    cmds = [cmd] if isinstance(cmd, str) else list(cmd)
    return sorted({m for c in cmds for m in _SCRIPT.findall(str(c))})


def stage_sources(spec: dict[str, Any], root: Path = ROOT) -> list[str]:
    """What a stage runs: the union over the scripts its cmd names."""
    files = {f for s in scripts_of(spec) for f in script_sources(s, root)}
    return sorted(f for f in files if f.startswith(f"{BENCH}/")) + sorted(f for f in files if f.startswith("src/"))


def _dep_name(dep: object) -> str:
    return next(iter(dep)) if isinstance(dep, dict) else str(dep)


def problems(dvc_file: Path = DVC_FILE, root: Path = ROOT) -> list[str]:
    """What each stage's code deps lack or list in vain (empty when they match the imports)."""
    import yaml

    out = []
    for stage, spec in yaml.safe_load(dvc_file.read_text())["stages"].items():
        if not scripts_of(spec):
            out.append(f"{stage}: its cmd runs no {BENCH}/<script>.py")
            continue
        declared = {_dep_name(d) for d in body(spec).get("deps", []) if _dep_name(d).startswith(CODE_PREFIXES)}
        needed = set(stage_sources(spec, root))
        for missing in sorted(needed - declared):
            out.append(f"{stage}: runs {missing} but {BENCH}/dvc.yaml does not list it "
                       f"(run `bin/py {BENCH}/deps.py --write`)")
        for extra in sorted(declared - needed):
            out.append(f"{stage}: lists {extra}, which it never runs (run `bin/py {BENCH}/deps.py --write`)")
    return out


def write(dvc_file: Path = DVC_FILE, root: Path = ROOT) -> bool:
    """Rewrite the code deps of every stage from its imports (comments and the other deps kept);
    True if the file changed."""
    def edit(doc: Any) -> None:
        for spec in doc["stages"].values():
            seq = body(spec)["deps"]
            rest = [d for d in seq if not _dep_name(d).startswith(CODE_PREFIXES)]
            new = stage_sources(spec, root) + rest
            seq.clear()
            seq.extend(new)

    return rewrite(dvc_file, edit, width=4096)  # long cmd lines stay on one line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=f"bin/py {BENCH}/deps.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help=f"rewrite the code deps in {BENCH}/dvc.yaml")
    args = ap.parse_args(argv)
    if args.write:
        changed = write()
        print(f"{BENCH}/dvc.yaml: code deps rewritten from the imports" if changed
              else f"{BENCH}/dvc.yaml: deps already match")
        return 0
    found = problems()
    for line in found:
        print(line, file=sys.stderr)
    if not found:
        print(f"{BENCH}/dvc.yaml: every stage's deps cover the code it runs")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
