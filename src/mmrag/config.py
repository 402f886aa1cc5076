"""The whole params.yaml, for the tools around the stages: ``python -m mmrag.config check|use``,
``bin/exp``'s override check, the stage runner's preflight and the benchmarks.

No stage imports this module: a stage reads only the sections it declares (``mmrag.params``),
and each section's dataclass lives beside the code that reads it. This module only gathers
them, so that one command can validate every section of a params file at once.
"""

from __future__ import annotations

import argparse
import copy
import io
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml
from ruamel.yaml import YAML

from mmrag.brit.params import BritGraph, BritLinking, BritSeeds
from mmrag.corpora.params import Corpora
from mmrag.evaluate.params import Report, TwoAxisEval
from mmrag.mmr2.params import KnowledgeMap, Mmr2Train, Mmr2Traj
from mmrag.models.params import Inference, Models
from mmrag.params import PARAMS_FILE, ROOT, Base, ConfigError, Sections, as_dict, build, merge, read_raw
from mmrag.toolagent.params import ToolagentData, ToolagentEval, ToolagentFinetune
from mmrag.train.params import Clip
from mmrag.world.params import World

__all__ = ["ConfigError", "Params", "SECTIONS", "as_dict", "load", "from_dict", "preflight", "read_raw", "PARAMS_FILE"]

PROFILES_DIR = ROOT / "profiles"
PROFILES = ("smoke", "quick", "default", "paper")


@dataclass(frozen=True)
class Params(Sections):
    """Every section of params.yaml."""

    base: Base
    models: Models
    inference: Inference
    world: World
    toolagent_data: ToolagentData
    toolagent_finetune: ToolagentFinetune
    toolagent_eval: ToolagentEval
    clip: Clip
    corpora: Corpora
    knowledge_map: KnowledgeMap
    mmr2_traj: Mmr2Traj
    brit_graph: BritGraph
    brit_linking: BritLinking
    brit_seeds: BritSeeds
    mmr2_train: Mmr2Train
    two_axis_eval: TwoAxisEval
    report: Report


SECTIONS: dict[str, type] = typing.get_type_hints(Params)


def from_dict(raw: Mapping[str, Any]) -> Params:
    """Validate a whole params mapping (as read from YAML): an unknown section fails too. Paths are
    checked per stage (:func:`preflight`), so a bad folder blocks only the stages that read it."""
    params = build(Params, raw, "")
    found = params.base.problems()
    if found:
        raise ConfigError("params: " + "; ".join(found))
    return params


def load(path: str | Path = PARAMS_FILE) -> Params:
    """Read and validate a whole params file."""
    return from_dict(read_raw(path))


# --------------------------------------------------------------------------- before a run
def apply_overrides(raw: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """A params mapping with DVC's ``-S`` overrides applied: ``a.b=value`` (a YAML value),
    ``+a.b=value`` (add) and ``~a.b`` (remove). The input is left untouched."""
    out = copy.deepcopy(dict(raw))
    for item in overrides:
        spec = item.split(":", 1)[1] if ":" in item.split("=", 1)[0] else item  # params.yaml:a.b=1
        if spec.startswith("~"):
            keys, value, remove = spec[1:], None, True
        else:
            if "=" not in spec:
                raise ConfigError(f"override '{item}': expected key=value, +key=value or ~key")
            keys, text = spec.lstrip("+").split("=", 1)
            try:
                value, remove = yaml.safe_load(text), False
            except yaml.YAMLError as e:
                raise ConfigError(f"override '{item}': the value is not valid YAML ({e})") from e
        node = out
        *parents, last = keys.split(".")
        for key in parents:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override '{item}': '{key}' is not a section")
        if remove:
            node.pop(last, None)
        else:
            node[last] = value
    return out


def preflight(params: Params, sections: Sequence[str] | None = None) -> list[str]:
    """The sections' own cheap checks (paths a user gives), for the declared sections only."""
    wanted = set(sections) if sections is not None else set(SECTIONS)
    found: list[str] = []
    for name in SECTIONS:
        if name in wanted:
            section = getattr(params, name)
            found.extend(section.problems() if callable(getattr(section, "problems", None)) else [])
    return found


# --------------------------------------------------------------------------- profiles
def profile_overrides(profile: str) -> dict[str, Any]:
    """The overlay a profile applies on top of the default params.yaml."""
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile '{profile}': expected one of {', '.join(PROFILES)}")
    if profile == "default":
        return {"base": {"profile": "default"}}
    over = read_raw(PROFILES_DIR / f"{profile}.yaml")
    over.setdefault("base", {})["profile"] = profile
    return over


def write_profile(profile: str, params_path: str | Path = PARAMS_FILE) -> Params:
    """Rewrite params.yaml in place with a profile's overrides, keeping its comments."""
    params_path = Path(params_path)
    ry = YAML()
    ry.preserve_quotes = True
    doc = ry.load(params_path.read_text())
    merge(doc, profile_overrides(profile))
    validated = from_dict(yaml.safe_load(_dump(ry, doc)))
    tmp = params_path.with_suffix(".yaml.tmp")
    tmp.write_text(_dump(ry, doc))
    tmp.replace(params_path)
    return validated


def _represent_float(representer: Any, value: float) -> Any:
    """Floats PyYAML reads back as floats: YAML 1.1 needs a dot before an exponent (5.0e-06)."""
    text = repr(float(value))
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return representer.represent_scalar("tag:yaml.org,2002:float", text)


def _dump(ry: Any, doc: Any) -> str:
    ry.representer.add_representer(float, _represent_float)
    buf = io.StringIO()
    ry.dump(doc, buf)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    """`python -m mmrag.config [check|use PROFILE]`."""
    ap = argparse.ArgumentParser(prog="python -m mmrag.config", description=main.__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    chk = sub.add_parser("check", help="validate a params file")
    chk.add_argument("path", nargs="?", default=str(PARAMS_FILE))
    chk.add_argument("-S", "--set-param", dest="overrides", action="append", default=[],
                     help="a dvc-style override to check with the file (repeatable)")
    use = sub.add_parser("use", help="apply a profile's overrides to params.yaml")
    use.add_argument("profile", choices=PROFILES)
    use.add_argument("--params", default=str(PARAMS_FILE))
    args = ap.parse_args(argv)
    try:
        if args.cmd == "check":
            p = from_dict(apply_overrides(read_raw(Path(args.path)), args.overrides)) if args.overrides \
                else load(args.path)
            found = preflight(p)
            if found:
                raise ConfigError("; ".join(found))
            print(f"ok: {args.path} (profile {p.base.profile}, seed {p.base.seed})")
        else:
            p = write_profile(args.profile, args.params)
            print(f"ok: {args.params} now uses profile {p.base.profile}")
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
