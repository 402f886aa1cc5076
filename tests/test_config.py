"""config.py: the committed params and profiles validate; bad params fail naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mmrag import config
from mmrag.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def raw_params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def test_committed_params_validate_and_are_frozen():
    p = config.load(ROOT / "params.yaml")
    assert p.base.profile == "default"
    with pytest.raises(AttributeError):
        p.base.seed = 3  # type: ignore[misc]


@pytest.mark.parametrize("profile", config.PROFILES)
def test_every_profile_validates(profile, tmp_path):
    target = tmp_path / "params.yaml"
    target.write_text((ROOT / "params.yaml").read_text())
    p = config.write_profile(profile, target)
    assert p.base.profile == profile
    assert "# One section per stage" in target.read_text(), "comments must survive"


def test_misspelt_key_is_named_with_a_suggestion():
    raw = raw_params()
    raw["base"]["sed"] = raw["base"].pop("seed")
    with pytest.raises(ConfigError, match=r"unknown key 'base\.sed'.*Did you mean 'seed'"):
        config.from_dict(raw)


def test_unknown_section_is_named():
    raw = raw_params()
    raw["modles"] = {}
    with pytest.raises(ConfigError, match=r"unknown key 'modles'"):
        config.from_dict(raw)


def test_string_where_number_belongs_names_key_value_and_expectation():
    raw = raw_params()
    raw["base"]["seed"] = "zero"
    with pytest.raises(ConfigError, match=r"base\.seed = 'zero' is invalid: expected an integer"):
        config.from_dict(raw)


def test_out_of_range_value_is_rejected():
    raw = raw_params()
    raw["models"]["sample_max_new_tokens"] = 0
    with pytest.raises(ConfigError, match=r"models\.sample_max_new_tokens = 0 .*>= 1"):
        config.from_dict(raw)


def test_bool_is_not_an_integer_and_literal_is_enforced():
    raw = raw_params()
    raw["base"]["seed"] = True
    with pytest.raises(ConfigError, match="base.seed"):
        config.from_dict(raw)
    raw = raw_params()
    raw["base"]["profile"] = "laptop"
    with pytest.raises(ConfigError, match=r"base\.profile = 'laptop'.*one of 'smoke', 'default', 'paper'"):
        config.from_dict(raw)


def test_list_items_are_checked_by_index():
    raw = raw_params()
    raw["models"]["extra_llms"] = ["gemma3-270m", 7]
    with pytest.raises(ConfigError, match=r"models\.extra_llms\[1\] = 7"):
        config.from_dict(raw)


def test_network_only_in_paper_profile():
    raw = raw_params()
    raw["base"]["allow_network"] = True
    with pytest.raises(ConfigError, match="allow_network"):
        config.from_dict(raw)


def test_cli_check_reports_the_key(tmp_path, capsys):
    bad = tmp_path / "params.yaml"
    raw = raw_params()
    raw["models"]["llmm"] = "x"
    bad.write_text(yaml.safe_dump(raw))
    assert config.main(["check", str(bad)]) == 2
    assert "models.llmm" in capsys.readouterr().err


def test_section_prefers_injected_values():
    p = config.section("models", base={"seed": 5}, models={"llm": "some/path"})
    assert p.base.seed == 5 and p.models.llm == "some/path"
