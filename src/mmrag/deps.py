"""The source files each DVC stage runs, computed from its imports: deps that cannot drift.

A stage runs its notebook, which calls ``mmrag.stages.<stage>``; everything either imports,
transitively (function-level imports and the ``module:Class`` strings of registries included),
is code whose change must rerun the stage. ``python -m mmrag.deps --check`` lists what
dvc.yaml lacks or lists in vain; ``--write`` (``make deps``) rewrites the ``src/`` part of every
stage's deps and keeps the rest (the notebook, upstream data, requirement files) as it was.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PACKAGE = "mmrag"
# strings such as "mmrag.brit.system:BritSystem" name a module a registry imports by name
_DOTTED = re.compile(rf"^{PACKAGE}(?:\.\w+)+(?::\w+)?$")
# How notebooks run and display, never what a stage computes: the runner, the result container
# of mmrag.stages and the package marker. They are in no stage's deps, so editing the runner
# stales nothing; tests/test_stage.py checks that none of them imports a module that computes.
INFRASTRUCTURE = frozenset({PACKAGE, f"{PACKAGE}.stage", f"{PACKAGE}.stages"})


def module_file(name: str, src: Path = SRC) -> Path | None:
    """The file a dotted module name loads from (package: its __init__.py), or None."""
    base = src.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def imported_names(source: str, module: str = "", is_package: bool = False) -> set[str]:
    """Dotted ``mmrag`` names a piece of source imports anywhere (top level or inside functions)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importing module's package
                pkg = module.split(".") if is_package else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                base = ".".join(pkg + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)  # submodules imported by name
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _DOTTED.match(node.value):
            names.add(node.value.split(":")[0])
    return {n for n in names if n == PACKAGE or n.startswith(PACKAGE + ".")}


# a module's own data file, named as a bare string beside it ("paper_tables.yaml", "fidelity.yaml")
_DATA_FILE = re.compile(r"^[\w\-]+\.(?:ya?ml|json|csv)$")


def data_files(source: str, module_path: Path) -> set[Path]:
    """Data files that sit beside a module and that it names (its tables, fidelity file): read at
    run time, so an edit to one must rerun the stage like an edit to the code."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _DATA_FILE.match(node.value):
            path = module_path.parent / node.value
            if path.is_file():
                found.add(path)
    return found


# a data file a notebook reads, named by its repo path ("src/mmrag/brit/fidelity.yaml")
_NOTEBOOK_DATA_FILE = re.compile(r"^src/[\w\-/]+\.(?:ya?ml|json|csv)$")


def notebook_data_files(source: str, root: Path) -> set[Path]:
    """Data files under src/ that a notebook names by their repo path: read when the stage runs (a
    paper's fidelity file), so an edit to one reruns the stage whose notebook shows it, and only it."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _NOTEBOOK_DATA_FILE.match(node.value):
            if (root / node.value).is_file():
                found.add(root / node.value)
    return found


def closure(roots: Iterable[str], extra_sources: Iterable[str] = (), src: Path = SRC) -> set[Path]:
    """Every mmrag source file the root modules (and the extra source texts) import, transitively,
    and the data files beside them that they name (:func:`data_files`)."""
    todo = list(roots)
    for text in extra_sources:
        todo.extend(imported_names(text))
    seen: set[str] = set()
    files: set[Path] = set()
    while todo:
        name = todo.pop()
        if name in seen or name in INFRASTRUCTURE:
            continue
        seen.add(name)
        path = module_file(name, src)
        if path is None:
            continue  # an attribute imported from a module, not a module itself
        files.add(path)
        text = path.read_text()
        files.update(data_files(text, path))
        todo.extend(_parents(name))
        todo.extend(imported_names(text, name, path.name == "__init__.py"))
    return files


def notebook_code(path: Path) -> str:
    """The code cells of a notebook, IPython magics dropped, as one source text."""
    cells = json.loads(path.read_text())["cells"]
    lines = [line for c in cells if c["cell_type"] == "code"
             for line in "".join(c["source"]).splitlines() if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


def stage_sources(stage: str, root: Path = ROOT) -> list[str]:
    """The repo-relative source files a stage runs: its stage module and what it and its notebook
    import, transitively (the infrastructure aside)."""
    notebooks = sorted((root / "notebooks").glob(f"[0-9][0-9]_{stage}.ipynb"))
    texts = [notebook_code(p) for p in notebooks]
    roots = []
    if module_file(f"{PACKAGE}.stages.{stage}", root / "src"):
        roots.append(f"{PACKAGE}.stages.{stage}")
    files = closure(roots, texts, root / "src")
    for text in texts:
        files |= notebook_data_files(text, root)
    return sorted(str(p.relative_to(root)) for p in files)


def _dep_name(dep: object) -> str:
    return next(iter(dep)) if isinstance(dep, dict) else str(dep)


def problems(dvc_file: Path = ROOT / "dvc.yaml", root: Path = ROOT) -> list[str]:
    """What each stage's deps lack or list in vain (empty when dvc.yaml matches the imports)."""
    import yaml

    out = []
    for stage, spec in yaml.safe_load(dvc_file.read_text())["stages"].items():
        declared = {_dep_name(d) for d in spec.get("deps", []) if _dep_name(d).startswith("src/")}
        needed = set(stage_sources(stage, root))
        covered = {n for n in needed if n in declared or any(n.startswith(d.rstrip("/") + "/") for d in declared)}
        for missing in sorted(needed - covered):
            out.append(f"{stage}: runs {missing} but dvc.yaml does not list it (run `make deps`)")
        for extra in sorted(declared - needed):
            if not any(n.startswith(extra.rstrip("/") + "/") for n in needed):
                out.append(f"{stage}: lists {extra}, which it never imports (run `make deps`)")
    return out


def rewrite(dvc_file: Path, edit: Callable[[Any], None], width: int = 120) -> bool:
    """Load a dvc.yaml keeping its comments and quotes, let ``edit`` change the document, and write
    it back atomically if it changed; True if it did."""
    ry = YAML()
    ry.preserve_quotes = True
    ry.width = width
    ry.indent(mapping=2, sequence=4, offset=2)
    text = dvc_file.read_text()
    doc = ry.load(text)
    edit(doc)
    buf = io.StringIO()
    ry.dump(doc, buf)
    if buf.getvalue() == text:
        return False
    tmp = dvc_file.with_suffix(".yaml.tmp")
    tmp.write_text(buf.getvalue())
    tmp.replace(dvc_file)
    return True


def write(dvc_file: Path = ROOT / "dvc.yaml", root: Path = ROOT) -> bool:
    """Rewrite the src/ deps of every stage from its imports; True if dvc.yaml changed."""
    return rewrite(dvc_file, lambda doc: _write_deps(doc, root))


def _write_deps(doc: Any, root: Path) -> None:
    for stage, spec in doc["stages"].items():
        deps = list(spec.get("deps", []))
        keep = [d for d in deps if not _dep_name(d).startswith("src/")]
        notebook = [d for d in keep if _dep_name(d).startswith("notebooks/")]
        rest = [d for d in keep if d not in notebook]
        new = notebook + stage_sources(stage, root) + rest
        seq = spec["deps"]
        seq.clear()
        seq.extend(new)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mmrag.deps", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="rewrite the src/ deps in dvc.yaml")
    args = ap.parse_args(argv)
    if args.write:
        changed = write()
        print("dvc.yaml: src deps rewritten from the imports" if changed else "dvc.yaml: deps already match")
        return 0
    found = problems()
    for line in found:
        print(line, file=sys.stderr)
    if not found:
        print("dvc.yaml: every stage's deps cover the modules it runs")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
