"""config.py: the committed params and profiles validate; bad params fail naming the key."""

from __future__ import annotations

import copy
import json
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
    with pytest.raises(ConfigError, match=r"base\.profile = 'laptop'.*one of 'smoke', 'quick', 'default', 'paper'"):
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


def test_a_stage_gets_injected_values_over_params_yaml_and_only_its_sections():
    from mmrag.stages import models as stage

    p = stage.Params.load(base={"seed": 5}, models={"llm": "some/path"})
    assert p.base.seed == 5 and p.models.llm == "some/path"
    assert p.inference == config.load().inference  # not injected: params.yaml fills it in
    assert not hasattr(p, "world")  # a section the stage does not declare is not there to read


def test_a_missing_key_is_an_error_naming_it_not_a_silent_default():
    raw = raw_params()
    del raw["mmr2_train"]["sft_lr"]
    with pytest.raises(ConfigError, match=r"'mmr2_train' lacks 'sft_lr'.*only home of a default"):
        config.from_dict(raw)


def test_no_section_class_declares_a_default():
    """params.yaml is the only home of a default: a dataclass default could silently disagree."""
    import dataclasses
    import typing

    classes = list(config.SECTIONS.values())
    while classes:
        cls = classes.pop()
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, \
                f"{cls.__module__}.{cls.__name__}.{f.name} declares a default; put it in params.yaml only"
            if dataclasses.is_dataclass(hints[f.name]):
                classes.append(hints[f.name])


def test_overrides_are_validated_like_the_file_and_leave_it_untouched():
    raw = raw_params()
    before = copy.deepcopy(raw)
    with pytest.raises(ConfigError, match=r"unknown key 'corpora\.folder\.pth'.*Did you mean 'path'"):
        config.from_dict(config.apply_overrides(raw, ["+corpora.folder.pth=/x"]))
    with pytest.raises(ConfigError, match=r"corpora\.folder\.page_chars = 'lots'"):
        config.from_dict(config.apply_overrides(raw, ["corpora.folder.page_chars=lots"]))
    ok = config.from_dict(config.apply_overrides(raw, ["base.seed=3", "params.yaml:models.sample_max_new_tokens=8"]))
    assert (ok.base.seed, ok.models.sample_max_new_tokens) == (3, 8)
    assert raw == before


def test_preflight_names_a_folder_that_is_missing_or_empty(tmp_path):
    raw = raw_params()
    missing = config.from_dict(config.apply_overrides(raw, [f"corpora.folder.path={tmp_path / 'nope'}"]))
    assert "is not a folder" in config.preflight(missing)[0]
    empty = config.from_dict(config.apply_overrides(raw, [f"corpora.folder.path={tmp_path}"]))
    assert "holds no .html" in config.preflight(empty)[0]
    (tmp_path / "a.md").write_text("# A\n")
    assert config.preflight(config.from_dict(config.apply_overrides(raw, [f"corpora.folder.path={tmp_path}"]))) == []
    assert config.preflight(missing, sections=["base", "world"]) == []  # only the stage's sections


def test_a_folder_holding_only_an_official_question_file_with_contexts_is_accepted(tmp_path):
    """HotpotQA's or MuSiQue's own file carries the context paragraphs that become the documents."""
    raw = raw_params()
    (tmp_path / "questions").mkdir()
    row = {"_id": "a1", "question": "Q?", "answer": "A", "context": [["T", ["S."]]], "supporting_facts": []}
    (tmp_path / "questions" / "hotpot_dev.json").write_text(json.dumps([row]))
    params = config.from_dict(config.apply_overrides(raw, [f"corpora.folder.path={tmp_path}"]))
    assert config.preflight(params) == []
    (tmp_path / "questions" / "hotpot_dev.json").unlink()
    (tmp_path / "questions" / "mine.jsonl").write_text(json.dumps({"id": "q", "question": "Q?", "answer": "A"}))
    assert "no official question file" in config.preflight(params)[0]  # plain questions need documents


def test_preflight_suffixes_match_what_ingestion_reads():
    from mmrag.corpora import ingest
    from mmrag.corpora.params import DOCUMENT_SUFFIXES

    assert set(DOCUMENT_SUFFIXES) == ingest.HTML_EXT | ingest.MD_EXT | {".pdf", ".zim"}


def test_bin_exp_refuses_a_bad_override_without_running_or_editing_params(tmp_path):
    from mmrag import exp

    assert exp.overrides_of(["-S", "a.b=1", "--set-param=c.d=2", "-Se.f=3", "corpora"]) == ["a.b=1", "c.d=2", "e.f=3"]
    before = config.PARAMS_FILE.read_bytes()
    assert exp.main(["-S", "corpora.folder.max_zim_articles=-1", "corpora"]) == 2
    assert config.PARAMS_FILE.read_bytes() == before


def test_bin_exp_ends_an_interrupted_run_with_one_line_and_waits_for_the_child(tmp_path, capsys):
    """Ctrl-C reaches bin/exp and its child alike: bin/exp waits for the child to put its outputs
    back and reports it in one line, with no traceback."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from mmrag import exp

    marker = tmp_path / "cleaned"
    child = ("import signal, sys, time\n"
             "def stop(*_):\n    open(sys.argv[1], 'w').write('ok'); sys.exit(130)\n"
             "signal.signal(signal.SIGINT, stop)\nprint('ready', flush=True)\ntime.sleep(30)\n")
    script = tmp_path / "child.py"
    script.write_text(child)
    driver = (f"import sys; sys.path.insert(0, {str(Path(exp.__file__).parents[1])!r})\n"
              "from mmrag import exp\n"
              f"code, interrupted = exp.run_child([sys.executable, {str(script)!r}, {str(marker)!r}])\n"
              "print('result', code, interrupted)\n")
    proc = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    time.sleep(3)  # both processes up
    os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole process group
    out, err = proc.communicate(timeout=60)
    assert "result 130 True" in out and "Traceback" not in err, err
    assert marker.read_text() == "ok", "the child got to clean up before bin/exp returned"
