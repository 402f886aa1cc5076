"""The params core: read params.yaml, validate one section, hand a stage only what it declares.

Each system keeps its own section dataclasses beside the code that reads them
(``mmrag/brit/params.py``, ``mmrag/mmr2/params.py``, ...): types, ranges and which keys name a
model. What each key means is written once, in params.yaml, where it is set. A stage module
lists the sections it reads as the fields of its own ``Params(Sections)`` class, so "a stage
declares the params it reads" holds by construction: the object a stage gets has no attribute
for a section it did not declare.

Validation is strict on purpose: an ablation with a misspelt key silently running the default
is the most expensive bug a research repo can have. Every error is one line naming the key
path and the fix (did-you-mean for a typo, the allowed range for a number).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

ROOT = Path(__file__).resolve().parents[2]
PARAMS_FILE = ROOT / "params.yaml"


class ConfigError(ValueError):
    """A params value that cannot be used; the message names the key path and the fix."""


def rng(ge: float | None = None, gt: float | None = None, le: float | None = None,
        lt: float | None = None) -> dict[str, Any]:
    """Field metadata for a numeric range check."""
    return {k: v for k, v in dict(ge=ge, gt=gt, le=le, lt=lt).items() if v is not None}


def model(kind: Literal["llm", "text_encoder", "spacy"],
          when: Callable[[Any], bool] | None = None) -> dict[str, Any]:
    """Field metadata: this key names a model of ``kind`` that the stage loads (when ``when(section)``
    holds). The runner checks such keys before a stage starts, so a missing model fails in a second,
    not after minutes of work, and the runner needs to know no stage by name."""
    return {"model": kind, "model_when": when}


@dataclass(frozen=True)
class Base:
    """Shared by every stage (each key's meaning is documented in params.yaml, the only place)."""

    seed: int = field(metadata=rng(ge=0))
    profile: Literal["smoke", "quick", "default", "paper"]
    allow_network: bool
    device: Literal["cpu", "cuda", "auto"]

    def problems(self) -> list[str]:
        if self.profile != "paper" and self.allow_network:
            return ["base.allow_network = True is only allowed with base.profile = 'paper' "
                    "(smoke and default run offline)"]
        return []


# --------------------------------------------------------------------------- validation
def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin in (list, tuple):
        return f"a list of {_type_name(typing.get_args(tp)[0])}"
    if origin is dict:
        return f"a mapping to {_type_name(typing.get_args(tp)[1])}"
    if dataclasses.is_dataclass(tp):
        return f"a mapping ({tp.__name__} section)"
    if tp is type(None):
        return "null"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(
        tp, getattr(tp, "__name__", str(tp)))


def _fail(path: str, value: Any, expected: str) -> typing.NoReturn:
    raise ConfigError(f"params: {path} = {value!r} is invalid: expected {expected}.")


def _coerce(value: Any, tp: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin is Literal:
        if value not in typing.get_args(tp):
            _fail(path, value, _type_name(tp))
        return value
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            try:
                return _coerce(value, arg, path)
            except ConfigError:
                continue
        _fail(path, value, _type_name(tp))
    if origin in (list, tuple):
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            _fail(path, value, _type_name(tp))
        (item_tp, *_) = typing.get_args(tp)
        return tuple(_coerce(v, item_tp, f"{path}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping):
            _fail(path, value, _type_name(tp))
        _, val_tp = typing.get_args(tp)
        return types.MappingProxyType(
            {str(k): _coerce(v, val_tp, f"{path}.{k}") for k, v in value.items()})
    if dataclasses.is_dataclass(tp):
        return build(tp, value, path)
    if tp is type(None):
        if value is not None:
            _fail(path, value, "null")
        return None
    if tp is bool:
        if not isinstance(value, bool):
            _fail(path, value, "true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(path, value, "an integer")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            _fail(path, value, "a number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            _fail(path, value, "a string")
        return value
    raise TypeError(f"params: unsupported field type {tp!r} at {path}")


def _check_range(value: Any, meta: Mapping[str, Any], path: str) -> None:
    checks = {"ge": (lambda v, b: v >= b, ">="), "gt": (lambda v, b: v > b, ">"),
              "le": (lambda v, b: v <= b, "<="), "lt": (lambda v, b: v < b, "<")}
    for key, (ok, sym) in checks.items():
        if key in meta and value is not None and not ok(value, meta[key]):
            _fail(path, value, f"a value {sym} {meta[key]}")


T = TypeVar("T")


def build(cls: type[T], raw: Any, path: str) -> T:
    """Validate a mapping into the frozen dataclass ``cls``: unknown keys (with a did-you-mean),
    missing keys, types and ranges, each failing with one line that names ``path.key``."""
    if not isinstance(raw, Mapping):
        _fail(path or "<root>", raw, _type_name(cls))
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in raw:
        if key not in fields:
            where = f"{path}.{key}" if path else str(key)
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"params: unknown key '{where}'.{hint} "
                              f"Allowed keys here: {', '.join(fields)}.")
    missing = [name for name in fields if name not in raw]
    if missing:
        where = f"'{path}'" if path else "the top level"
        raise ConfigError(f"params: {where} lacks {', '.join(repr(m) for m in missing)}. "
                          f"params.yaml is the only home of a default: add the key there "
                          f"(see the default profile's params.yaml in git).")
    kwargs = {}
    for name, f in fields.items():
        sub = f"{path}.{name}" if path else name
        value = _coerce(raw[name], hints[name], sub)
        _check_range(value, f.metadata, sub)
        kwargs[name] = value
    return cls(**kwargs)


def problems_of(obj: Any) -> list[str]:
    """Cheap checks a section defines beyond types and ranges (paths that must exist, settings
    that exclude each other), gathered from its ``problems()`` method, nested sections included."""
    found = list(obj.problems()) if callable(getattr(obj, "problems", None)) else []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            found.extend(problems_of(value))
    return found


# --------------------------------------------------------------------------- reading
def read_raw(path: str | Path = PARAMS_FILE) -> dict[str, Any]:
    """params.yaml as plain YAML (a missing or broken file is one line naming it)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"params: {path.name} not found; run from the repository root.")
    try:
        return copy.deepcopy(yaml.safe_load(path.read_text()) or {})
    except yaml.YAMLError as e:
        raise ConfigError(f"params: {path.name} is not valid YAML: {' '.join(str(e).split())}") from e


def merge(into: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``over`` into ``into`` in place, section by section (a nested mapping is merged, a
    value replaced)."""
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), Mapping):
            merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)
    return into


S = TypeVar("S", bound="Sections")


@dataclass(frozen=True)
class Sections:
    """Base of a stage's params: one field per declared section, typed by its section class."""

    @classmethod
    def from_raw(cls: type[S], raw: Mapping[str, Any], check: bool = True) -> S:
        """Validate the declared sections of a params mapping (other sections are ignored); with
        ``check``, also the sections' own checks (:func:`problems_of`)."""
        hints = typing.get_type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        absent = [n for n in names if n not in raw]
        if absent:
            raise ConfigError(f"params: no section {', '.join(repr(a) for a in absent)} in params.yaml; "
                              f"add it (see the default profile's params.yaml in git).")
        obj = cls(**{n: build(hints[n], raw[n], n) for n in names})
        found = problems_of(obj) if check else []
        if found:
            raise ConfigError("params: " + "; ".join(found))
        return obj

    @classmethod
    def load(cls: type[S], **injected: Mapping[str, Any]) -> S:
        """The declared sections for a notebook: what papermill injected wins, params.yaml fills in
        the rest (a notebook opened by hand in Jupyter gets empty dicts and reads params.yaml)."""
        raw = read_raw() if PARAMS_FILE.exists() else {}
        for key, value in injected.items():
            if value:  # papermill injects whole sections; a partial one is merged over params.yaml
                raw[key] = merge(raw.get(key) or {}, value) if isinstance(raw.get(key), Mapping) else dict(value)
        return cls.from_raw(raw)


def as_dict(obj: Any) -> Any:
    """Plain-Python view of a params object (for metrics, fingerprints and notebooks)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: as_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (tuple, list)):
        return [as_dict(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: as_dict(v) for k, v in obj.items()}
    return obj
