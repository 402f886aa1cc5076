"""Stage module `models`: the zoo it provisions, the metrics it writes, its similarity figure."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from mmrag import config
from mmrag.stages import models as models_stage


def test_provision_zoo_lists_external_names_once(tmp_path):
    models = dataclasses.replace(config.load().models, llm="some/local-llm", extra_llms=("some/local-llm",),
                                 ladder=("some/local-llm",), text_encoder="enc/path", spacy="nlp/path")
    zoo, skipped = models_stage.provision_zoo(models, tmp_path)
    assert list(zoo["name"]) == ["some/local-llm", "enc/path", "nlp/path"]
    assert set(zoo["kind"]) == {"external"} and skipped == []
    assert not any(tmp_path.iterdir())


def test_models_metrics_rounds_and_counts():
    gen = models_stage.SampleGeneration("llm", 134_515_008, "p", "reply", 8, 0.5)
    sim = np.array([[1.0, 0.81234, 0.0567], [0.8, 1.0, 0.1], [0.05, 0.1, 1.0]], dtype=np.float32).round(4)
    zoo = pd.DataFrame([{"name": "a"}, {"name": "b"}])
    ladder = pd.DataFrame([{"model": "llm", "reading_correct": 7, "tool_call_correct": 5}])
    m = models_stage.models_metrics(gen, 384, sim, 3, zoo, [{"name": "c", "reason": "absent"}], ladder)
    assert m == {"probe_llm": {"reading": 7, "tool_call": 5, "n_reading": 10, "n_tool_call": 6},
                 "llm_params_m": 134.52, "llm_sample_tokens_out": 8, "text_encoder_dim": 384,
                 "similarity_paraphrase": 0.8123, "similarity_unrelated": 0.0567, "spacy_entities": 3,
                 "models_provisioned": 2, "models_skipped": 1}
    assert gen.describe().startswith("llm: 134.5M parameters\nprompt: p\nreply:  reply")


def test_similarity_figure_is_outside_pyplot():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    fig = models_stage.similarity_figure(np.eye(2), ["one sentence", "another"], "t")
    assert plt.get_fignums() == before and fig._repr_png_().startswith(b"\x89PNG")
