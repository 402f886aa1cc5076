"""Each params key is documented once, in params.yaml: every key there has a comment, no section
dataclass field carries one, and the params files cite no issue number or commit hash."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import re
import textwrap
import tokenize
import typing
from pathlib import Path

import pytest

from mmrag import config

ROOT = Path(__file__).resolve().parents[1]
KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w-]*):(?:\s|$)")


# --------------------------------------------------------------------------- params.yaml
def _has_eol_comment(line: str) -> bool:
    """A ` #` outside quotes (YAML starts a comment only after whitespace)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and i > 0 and line[i - 1] in " \t":
            return True
    return False


def documented_keys(text: str) -> dict[str, bool]:
    """Every block-mapping key of a YAML text by dotted path -> whether it has a comment: an
    end-of-line one, or a block comment directly above it at the key's own indentation (a comment
    indented deeper continues the line above, it does not document this key)."""
    lines = text.splitlines()
    found: dict[str, bool] = {}
    stack: list[tuple[int, str]] = []
    for n, line in enumerate(lines):
        m = KEY.match(line)
        if not m:
            continue
        indent, key = len(m["indent"]), m["key"]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [key])
        stack.append((indent, key))
        above = lines[n - 1] if n else ""
        block = above.strip().startswith("#") and len(above) - len(above.lstrip(" ")) == indent
        found[path] = _has_eol_comment(line) or block
    return found


def expected_keys() -> list[str]:
    """Every section and field path of params.yaml, from the section dataclasses (nested ones too)."""
    def walk(cls: type, prefix: str) -> list[str]:
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            path = f"{prefix}.{f.name}"
            out.append(path)
            if dataclasses.is_dataclass(hints[f.name]):
                out.extend(walk(hints[f.name], path))
        return out
    return [p for name, cls in config.SECTIONS.items() for p in [name, *walk(cls, name)]]


def test_every_params_key_has_a_comment():
    found = documented_keys((ROOT / "params.yaml").read_text())
    expected = expected_keys()
    assert sorted(found) == sorted(expected), "the key parser and the section dataclasses disagree"
    bare = [k for k in expected if not found[k]]
    assert not bare, f"params.yaml keys without a comment (end of line, or a block right above): {bare}"


def test_key_comment_check_is_not_vacuous():
    text = textwrap.dedent("""\
        a:              # section
          b: 1          # documented
          c: 'x # y'
          # documents d
          d: [1, 2]
          e: 2          # a long comment
                        #   continued: it does not document f
          f: 3
        """)
    assert documented_keys(text) == {"a": True, "a.b": True, "a.c": False, "a.d": True, "a.e": True,
                                     "a.f": False}


# --------------------------------------------------------------------------- section modules
def section_classes() -> list[type]:
    """The classes of config.SECTIONS and the dataclasses nested in them."""
    seen: list[type] = []
    todo = list(config.SECTIONS.values())
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.append(cls)
        todo.extend(tp for tp in typing.get_type_hints(cls).values() if dataclasses.is_dataclass(tp))
    return seen


def field_comments(source: str) -> list[str]:
    """Comments in a class body outside its methods (on a field line or above one)."""
    source = textwrap.dedent(source)
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef))
    methods = [(n.lineno - len(n.decorator_list), n.end_lineno) for n in cls.body
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return [f"line {tok.start[0]}: {tok.line.strip()}"
            for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT and cls.lineno <= tok.start[0] <= (cls.end_lineno or 0)
            and not any(a <= tok.start[0] <= b for a, b in methods)]


@pytest.mark.parametrize("cls", section_classes(), ids=lambda c: c.__name__)
def test_section_fields_carry_no_comment(cls):
    found = field_comments(inspect.getsource(cls))
    assert not found, (f"{cls.__module__}.{cls.__name__}: document the key in params.yaml, "
                       f"not on the field: {found}")


def test_field_comment_check_is_not_vacuous():
    source = textwrap.dedent('''\
        @dataclass(frozen=True)
        class X:
            """Doc."""

            a: int  # inline
            # above b
            b: int = field(metadata=rng(ge=0))
            c: str

            def problems(self) -> list[str]:
                return []  # a method's comment is not a field's
        ''')
    assert [c.split(": ", 1)[1] for c in field_comments(source)] == ["a: int  # inline", "# above b"]


# --------------------------------------------------------------------------- references
REFERENCES = re.compile(r"\bissues?\s*#?\s*\d+|(?<![\w&])#\d+\b|\b(?:pr|pull request)\s*#?\s*\d+", re.IGNORECASE)
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")


@pytest.mark.parametrize("path", ["params.yaml", *sorted(p.relative_to(ROOT).as_posix()
                                                          for p in (ROOT / "profiles").glob("*.yaml"))])
def test_params_files_cite_no_issue_or_commit(path):
    text = (ROOT / path).read_text()
    cited = [m.group(0) for m in REFERENCES.finditer(text)] + [m.group(0) for m in HASH.finditer(text)]
    assert not cited, f"{path} cites {cited}: say what the evidence is and where it lives instead"


def test_reference_patterns_match_what_they_should():
    ref = "issue"  # the checker's own samples, built so that no line here is itself a reference
    assert REFERENCES.search(f"before ({ref} 19: SFT") and REFERENCES.search("see #" + "18")
    assert HASH.search("commit 1a2b3c4 moved it") and not HASH.search("max_image_pixels: 64000000")
    assert not REFERENCES.search("  # the paper's cap is 12") and not HASH.search("laion2b_s32b_b79k")
