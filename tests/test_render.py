"""Rendered entity pictures: deterministic, every attribute value drawable and visible."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from mmrag.world import render as R


def _pixels(kind: str, attributes: dict[str, str], seed: int, size: int = 64) -> np.ndarray:
    return np.asarray(R.render(kind, attributes, seed, size), dtype=np.int16)


@pytest.mark.parametrize("kind", R.KINDS)
def test_same_seed_same_pixels_other_seed_other_pixels(kind):
    attrs = R.sample_attributes(kind, random.Random(3))
    a, b = _pixels(kind, attrs, 11), _pixels(kind, attrs, 11)
    assert a.shape == (64, 64, 3) and a.dtype == np.int16
    assert np.array_equal(a, b)
    assert not np.array_equal(a, _pixels(kind, attrs, 12))  # jitter + noise differ by seed


def test_size_is_the_side_of_an_rgb_square():
    img = R.render("place", R.sample_attributes("place", random.Random(0)), seed=0, size=96)
    assert img.size == (96, 96) and img.mode == "RGB"


@pytest.mark.parametrize("kind", R.KINDS)
def test_every_value_renders_and_changes_the_picture(kind):
    """Two values of one attribute, all else and the seed equal, must differ visibly (>40 levels)."""
    base = R.sample_attributes(kind, random.Random(1))
    for attr, values in R.ATTRIBUTES[kind].items():
        for v, u in itertools.combinations(values, 2):
            a, b = dict(base, **{attr: v}), dict(base, **{attr: u})
            if kind == "product" and (a["logo_colour"] == a["colour"]
                                      or b["logo_colour"] == b["colour"]):
                continue  # never sampled: the logo would vanish into the body
            changed = (np.abs(_pixels(kind, a, 7) - _pixels(kind, b, 7)).max(-1) > 40).mean()
            assert changed > 0.003, f"{kind}.{attr}: {v!r} vs {u!r} change {changed:.4f} of pixels"


def test_sampled_logo_never_matches_body_and_values_are_valid():
    rng = random.Random(0)
    for _ in range(300):
        a = R.sample_attributes("product", rng)
        assert a["logo_colour"] != a["colour"]
        assert all(a[k] in vals for k, vals in R.ATTRIBUTES["product"].items())


def test_bad_attributes_are_refused_with_the_allowed_values():
    good = R.sample_attributes("person", random.Random(0))
    with pytest.raises(ValueError, match="not one of"):
        R.render("person", dict(good, hat="crown"), 0, 64)
    with pytest.raises(ValueError, match="lack 'hat'"):
        R.render("person", {k: v for k, v in good.items() if k != "hat"}, 0, 64)
    with pytest.raises(ValueError, match="unknown kind"):
        R.render("animal", good, 0, 64)


@pytest.mark.parametrize("kind", R.KINDS)
def test_full_captions_state_every_attribute_and_partial_ones_leave_some_out(kind):
    rng = random.Random(5)
    attrs = R.sample_attributes(kind, rng)
    full = R.describe(kind, attrs, rng, drop=0.0)
    for attr in R.ATTRIBUTES[kind]:
        for p in R.prompts(kind, attr, attrs[attr]):
            # the prompt's attribute wording appears in the full caption
            assert _key_words(kind, attr, attrs[attr]) in full, (attr, full, p)
    partial = [R.describe(kind, attrs, random.Random(i), drop=1.0) for i in range(40)]
    assert all(len(p) < len(full) + 12 for p in partial)
    assert len(set(partial)) > 5
    assert sum(_key_words(kind, a, attrs[a]) not in p for p in partial
               for a in R.ATTRIBUTES[kind]) > 40


def _key_words(kind: str, attr: str, value: str) -> str:
    if kind == "product":
        return {"logo_colour": f"{value} logo", "logo_position": value}.get(attr, value)
    if kind == "person":
        return {"hat": "no hat" if value == "none" else value,
                "glasses": "without glasses" if value == "none" else value}.get(attr, value)
    return {"roof_colour": f"{value} roof", "time": "night" if value == "night" else "day",
            "windows": f"{value} windows".replace("none windows", "no windows"),
            "trees": {"none": "no trees", "one": "one tree", "two": "two trees"}[value]
            if attr == "trees" else value}.get(attr, value)


def test_captions_are_generic_and_drop_rate_is_respected():
    rng = random.Random(0)
    attrs = R.sample_attributes("product", rng)
    caps = [R.describe("product", attrs, rng, drop=0.2) for _ in range(500)]
    partial = sum(attrs["shape"] not in c or attrs["pattern"] not in c or "logo" not in c
                  for c in caps)
    assert 0.05 < partial / len(caps) < 0.25  # 20% draw a subset; a few subsets keep everything
    with pytest.raises(ValueError, match="drop"):
        R.describe("product", attrs, rng, drop=1.5)


def test_zero_shot_prompts_name_only_their_value():
    for kind, attrs in R.ATTRIBUTES.items():
        for attr, values in attrs.items():
            for v in values:
                ps = R.prompts(kind, attr, v)
                assert ps and all(_key_words(kind, attr, v) in p for p in ps)


def test_phrase_states_exactly_what_it_is_given_and_refuses_unknown_values():
    rng = random.Random(0)
    assert "striped" in R.phrase("product", {"pattern": "striped"}, rng)
    text = R.phrase("place", {"trees": "two", "time": "night"}, rng)
    assert "two trees" in text and "at night" in text and "roof" not in text
    with pytest.raises(ValueError, match="not a non-empty set of product attributes"):
        R.phrase("product", {"pattern": "spotty"}, rng)
    with pytest.raises(ValueError, match="non-empty"):
        R.phrase("person", {}, rng)
