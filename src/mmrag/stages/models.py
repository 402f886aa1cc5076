"""Stage `models`: provision the offline model zoo and check that each model works.

Every later stage needs a language model, a text encoder and a parser. This stage materialises
the provisioned ones into ``data/models/<name>/`` (see :mod:`mmrag.models.registry`) and runs
one greedy generation, one embedding similarity and one parse, so a broken model fails here.
The LLM ladder (``models.ladder``: GGUF files for the llama.cpp engine, sha256-checked) gets a
sample generation each and the capability probe of :mod:`mmrag.models.probe`, with its cost,
which is what the later stages' choice of agent, reader, teacher and judge rests on.
Only deterministic quantities go into ``results/models/metrics.json``; speeds go to ladder_cost.json,
which, like cost.json, no stage depends on and git ignores.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mmrag.io import save_figure, stage_dirs, write_json
from mmrag.models import probe, registry
from mmrag.models.generation import engine_settings, open_chat, parameter_count
from mmrag.models.params import Inference, Models
from mmrag.params import Base, Sections
from mmrag.stages import StageResult, new_figure

# Two paraphrases, then two unrelated sentences: the first row of their similarity matrix is
# the check (paraphrase far above unrelated).
SIMILARITY_SENTENCES = (
    "The red robot vacuum was designed in Oslo.",
    "A crimson cleaning robot was created in Norway's capital.",
    "The quarterly budget meeting moved to Friday.",
    "Photosynthesis turns light into chemical energy.",
)
# Invented names: the parser must find them as entities from capitalisation and context alone.
PARSE_SENTENCE = "Ada Quill designed the Vantor X2 for Helix Labs in Oslo in 2031."


@dataclass(frozen=True)
class Params(Sections):
    """The params sections this stage reads (the ones dvc.yaml declares for it)."""

    base: Base
    models: Models
    inference: Inference


@dataclass
class SampleGeneration:
    """One greedy reply of the default LLM, with its size and speed."""

    llm: str
    n_params: int
    prompt: str
    text: str
    tokens_out: int
    seconds: float

    def describe(self) -> str:
        """The lines the notebook shows under its 'sample generation' heading."""
        return (f"{self.llm}: {self.n_params / 1e6:.1f}M parameters\n"
                f"prompt: {self.prompt}\nreply:  {self.text}")


@dataclass
class ModelsResult(StageResult):
    """The zoo table, the sample generation, and the models skipped (optional extras only)."""

    generation: SampleGeneration | None = None
    samples: list[SampleGeneration] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)


def provision_zoo(models: Models, models_dir: Path) -> tuple[pd.DataFrame, list[dict[str, str]]]:
    """Provision every model the params name, once each; an optional extra LLM whose package is
    missing is skipped (reported with the reason), anything else missing fails the stage.
    Training bases (llm, extra_llms) get fp32 Hugging Face weights; ladder-only models a GGUF."""
    wanted = [models.llm, *models.extra_llms, *models.ladder, models.text_encoder, models.spacy]
    training = {models.llm, *models.extra_llms}
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    for name in dict.fromkeys(wanted):
        if name not in registry.PROVISIONED:
            rows.append({"name": name, "kind": "external", "package": "-", "size_mb": None})
            continue
        try:
            info = registry.provision(name, models_dir, hf=name in training)
        except registry.ModelError as e:
            if name in models.extra_llms or name in models.ladder:
                skipped.append({"name": name, "reason": str(e)})
                continue
            raise
        info["size_mb"] = round(registry.folder_size_mb(info.pop("path")), 1)
        rows.append(info)
    return pd.DataFrame(rows), skipped


def ladder_runs(models: Models, inference: Inference, base: Base, models_dir: Path,
                names: list[str]) -> tuple[list[SampleGeneration], pd.DataFrame, pd.DataFrame]:
    """Per ladder model: the sample generation, the probe replies, and one row of scores and cost."""
    settings = engine_settings(inference)
    samples, rows, replies = [], [], []
    for name in names:
        with open_chat(name, engine=models.engine, settings=settings, allow_network=base.allow_network,
                       device=base.device, models_dir=models_dir) as llm:
            t0 = time.time()
            gen = llm.generate([[{"role": "user", "content": models.sample_prompt}]],
                               max_new_tokens=models.sample_max_new_tokens)[0]
            n_params = parameter_count(llm)
            samples.append(SampleGeneration(name, n_params, models.sample_prompt, gen.text,
                                            gen.tokens_out, time.time() - t0))
            items, seconds = probe.run_probe(llm, max_new_tokens=probe.PROBE_TOKENS)
            usage = llm.usage.as_dict() if hasattr(llm, "usage") else {}
        by_skill = pd.DataFrame([vars(i) for i in items]).groupby("skill")["correct"]
        # llama.cpp times prefill and decode apart; the hf engine times neither apart (None)
        decode = (usage["completion_tokens"] / usage["decode_seconds"]
                  if usage.get("decode_seconds") and usage.get("prompt_seconds") else None)
        prefill = usage["prompt_tokens"] / usage["prompt_seconds"] if usage.get("prompt_seconds") else None
        spec = registry.PROVISIONED.get(name)
        rows.append({"model": name, "params_m": round(n_params / 1e6, 1),
                     "instruct": bool(spec and spec.instruct),
                     "reading": f"{int(by_skill.sum()['reading'])}/{int(by_skill.count()['reading'])}",
                     "tool_call": f"{int(by_skill.sum()['tool_call'])}/{int(by_skill.count()['tool_call'])}",
                     "reading_correct": int(by_skill.sum()["reading"]),
                     "tool_call_correct": int(by_skill.sum()["tool_call"]),
                     "s_per_item": round(seconds / len(items), 3),
                     "decode_tok_s": round(decode, 1) if decode is not None else None,
                     "prefill_tok_s": round(prefill, 1) if prefill is not None else None})
        replies += [{"model": name, **vars(i)} for i in items]
    return samples, pd.DataFrame(rows), pd.DataFrame(replies)


def cosine_similarity_matrix(encoder: Any, sentences: list[str]) -> tuple[np.ndarray, int]:
    """(cosine similarity of normalised embeddings rounded to 4 places, embedding dimension)."""
    emb = encoder.encode(sentences, normalize_embeddings=True, convert_to_numpy=True)
    return (emb @ emb.T).round(4), int(emb.shape[1])


def similarity_figure(sim: np.ndarray, sentences: list[str], title: str) -> Any:
    """The similarity matrix as an annotated heatmap (rows labelled by the sentence start)."""
    import seaborn as sns

    fig, ax = new_figure(figsize=(6, 4.5))
    sns.heatmap(pd.DataFrame(sim, index=[s[:28] + "…" for s in sentences],
                             columns=range(1, len(sentences) + 1)),
                annot=True, fmt=".2f", cmap="mako", ax=ax)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def parse_tables(nlp: Any, text: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(tokens with part of speech and dependency, named entities) of one parsed sentence."""
    doc = nlp(text)
    tokens = pd.DataFrame([{"token": t.text, "pos": t.pos_, "dep": t.dep_, "head": t.head.text}
                           for t in doc])
    entities = pd.DataFrame([{"entity": e.text, "label": e.label_} for e in doc.ents])
    return tokens, entities


def models_metrics(generation: SampleGeneration, dim: int, sim: np.ndarray, n_entities: int,
                   zoo: pd.DataFrame, skipped: list[dict[str, str]], ladder: pd.DataFrame) -> dict[str, Any]:
    """The deterministic checks of every model (no timings: metrics.json must rerun byte-identical)."""
    probe_scores = {f"probe_{row.model}": {"reading": row.reading_correct, "tool_call": row.tool_call_correct,
                                           "n_reading": len(probe.READING), "n_tool_call": len(probe.TOOL_CALLS)}
                    for row in ladder.itertuples()}
    return {**probe_scores,
        "llm_params_m": round(generation.n_params / 1e6, 2),
        "llm_sample_tokens_out": generation.tokens_out,
        "text_encoder_dim": int(dim),
        "similarity_paraphrase": round(float(sim[0, 1]), 4),
        "similarity_unrelated": round(float(sim[0, 2]), 4),
        "spacy_entities": n_entities,
        "models_provisioned": len(zoo),
        "models_skipped": len(skipped),
    }


def run(params: Params) -> ModelsResult:
    """Provision the models of params.models and check each with one sample use."""
    import seaborn as sns

    models, base = params.models, params.base
    data_dir, out_dir = stage_dirs("models")
    sns.set_theme(style="whitegrid")

    zoo, skipped = provision_zoo(models, data_dir)
    missing = {s["name"] for s in skipped}
    names = [n for n in dict.fromkeys([models.llm, *models.ladder]) if n not in missing]
    samples, ladder, replies = ladder_runs(models, params.inference, base, data_dir, names)
    generation = samples[0]

    encoder = registry.load_text_encoder(models.text_encoder, allow_network=base.allow_network, device="cpu")
    sentences = list(SIMILARITY_SENTENCES)
    sim, dim = cosine_similarity_matrix(encoder, sentences)
    fig = similarity_figure(sim, sentences, f"{models.text_encoder}: cosine similarity ({dim}-d)")
    save_figure(fig, out_dir / "similarity.png", dpi=110)

    tokens, entities = parse_tables(registry.load_spacy(models.spacy), PARSE_SENTENCE)

    metrics = models_metrics(generation, dim, sim, len(entities), zoo, skipped, ladder)
    write_json(out_dir / "metrics.json", metrics)
    write_json(out_dir / "samples.json", {"prompt": models.sample_prompt, "reply": generation.text,
                                          "samples": [{k: v for k, v in vars(s).items() if k != "seconds"}
                                                      for s in samples],
                                          "zoo": zoo.to_dict(orient="records"),
                                          "probe": replies.to_dict(orient="records")})
    costs = ladder.drop(columns=["reading", "tool_call"]).to_dict(orient="records")
    for row, sample in zip(costs, samples):
        row["sample_seconds"] = round(sample.seconds, 2)
    # speeds are this machine's: beside cost.json, in no stage's outs, so a rerun elsewhere stales nothing
    write_json(out_dir / "ladder_cost.json", {"engine": models.engine, "threads": params.inference.threads,
                                              "slots": params.inference.slots, "ladder": costs})
    tables = {"zoo": zoo, "ladder": ladder.drop(columns=["reading_correct", "tool_call_correct"]),
              "tokens": tokens, "entities": entities}
    if skipped:
        tables["skipped"] = pd.DataFrame(skipped)
    return ModelsResult(metrics=metrics, tables=tables, figures={"similarity": fig},
                        artifacts={"models": data_dir, "samples": out_dir / "samples.json",
                                   "ladder_cost": out_dir / "ladder_cost.json",
                                   "similarity": out_dir / "similarity.png"},
                        generation=generation, samples=samples, skipped=skipped)
