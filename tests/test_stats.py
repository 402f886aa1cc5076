"""The claims' statistics against values published or computed by hand."""

from __future__ import annotations

import pytest

from mmrag.evaluate import stats


def test_wilson_interval_of_five_in_ten_and_of_the_extremes():
    assert stats.wilson(5, 10) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    lo, hi = stats.wilson(0, 12)
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(0.2425, abs=1e-4)  # not "exactly 0"
    assert stats.wilson(3, 0) == (None, None)


def test_newcombe_difference_matches_newcombes_worked_example():
    # Newcombe (1998), example (a): 56/70 vs 48/80 -> 0.2000, 95 % CI 0.0524 to 0.3339
    d, lo, hi = stats.newcombe(56, 70, 48, 80)
    assert d == pytest.approx(0.2) and lo == pytest.approx(0.0524, abs=1e-4)
    assert hi == pytest.approx(0.3339, abs=1e-4)


def test_exact_mcnemar_on_the_discordant_pairs():
    assert stats.mcnemar_exact(8, 2) == pytest.approx(2 * 56 / 1024)  # 2 P(X <= 2 | 10, 1/2)
    assert stats.mcnemar_exact(0, 0) == 1.0
    assert stats.discordant([1, 1, 0, 0, 1], [0, 1, 1, 0, 0]) == (2, 1)


def test_bootstraps_are_seeded_and_resample_whole_conversations():
    a, b = [1, 1, 0, 1, 1, 0], [0, 1, 0, 0, 1, 0]
    first = stats.paired_bootstrap(a, b, seed=3)
    assert first == stats.paired_bootstrap(a, b, seed=3) and first[0] == pytest.approx(2 / 6)
    # one conversation holds every difference: resampling conversations widens the interval
    conv = ["c1", "c1", "c2", "c2", "c3", "c3"]
    d, lo, hi = stats.cluster_bootstrap([1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], conv, seed=3)
    assert d == pytest.approx(1 / 3) and lo == 0.0 and hi == 1.0
    assert stats.mean_ci([0.5, 0.25, 1.0], seed=1) == stats.mean_ci([0.5, 0.25, 1.0], seed=1)


def test_power_sample_sizes_and_detectable_effects():
    # two independent rates 0.80 vs 0.59 (BRIT's recall): 75 per group at 80 % power
    assert stats.n_unpaired(0.8, 0.59) == 75
    # GRPO's +0.5 points over SFT (54.3 vs 53.8) needs of the order of 10^5 paired questions
    assert stats.n_paired(0.543, 0.538) > 100_000
    # a 10-point paired effect with 30 % discordant questions: ~232 pairs (Connor 1987)
    assert 200 < stats.n_paired(0.60, 0.50, discordance=0.3) < 260
    assert stats.mde_paired(150, 0.3) == pytest.approx(2.8016 * (0.3 / 150) ** 0.5, rel=1e-3)
    # no discordant pair: a difference d needs d of the pairs discordant, so d = c^2 / n, not c / n
    assert stats.mde_paired(150, 0.0) == pytest.approx(2.8016 ** 2 / 150, rel=1e-3)
    assert stats.mde_paired(150, 0.0) <= stats.mde_paired(150, 0.06)
    assert stats.n_mean(0.1, 0.3) == 71 and stats.n_paired(0.5, 0.5) is None


def test_newcombe_paired_interval_is_sound_where_the_bootstrap_collapses():
    # no discordant pair: the interval is the Wilson half-width of 0/n on each side, not [0, 0]
    d, lo, hi = stats.newcombe_paired(0, 0, 0, 40)
    u = stats.wilson(0, 40)[1]
    assert d == 0 and lo == pytest.approx(-u) and hi == pytest.approx(u)
    # every discordant pair on one side: the far bound still crosses 0
    d, lo, hi = stats.newcombe_paired(6, 0, 2, 72)
    assert d == pytest.approx(-0.025) and lo < d and hi > 0
    # many one-sided discordant pairs: the interval excludes 0, inside [-1, 1]
    d, lo, hi = stats.newcombe_paired(2, 18, 0, 20)
    assert d == pytest.approx(0.45) and 0 < lo < d < hi <= 1
    # swapping A and B mirrors the interval
    d2, lo2, hi2 = stats.newcombe_paired(2, 0, 18, 20)
    assert (d2, lo2, hi2) == pytest.approx((-d, -hi, -lo))


def test_the_ratio_bootstrap_resamples_questions_as_pairs():
    top = [1] * 9 + [0] * 11  # 9 right from the summaries alone
    bottom = [1] * 10 + [0] * 10  # of 10 right full answers
    est, lo, hi = stats.ratio_bootstrap(top, bottom, reps=2000, seed=3)
    assert est == 0.9 and lo < 0.9 < hi <= 1.0  # paired: a resample never has more numerators than denominators
    with pytest.raises(ValueError, match="sums to 0"):
        stats.ratio_bootstrap([1, 0], [0, 0])
    with pytest.raises(ValueError, match="2 numerators but 3"):
        stats.ratio_bootstrap([1, 0], [1, 1, 0])


def test_holm_adjustment_against_a_hand_computed_case():
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> max(0.06, 0.04) = 0.06
    p = [0.01, 0.04, 0.03, 0.005]
    assert stats.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm_multipliers(p) == [3, 1, 2, 4]
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert stats.holm([]) == [] and stats.holm([0.02]) == [0.02]


def test_the_ceiling_scaling_arithmetic():
    # BRIT Text-Image: the paper's +0.19, our reader's ceiling 0.50, four options (chance 0.25)
    scaled, factor = stats.scale_to_ceiling(0.19, 0.50, 0.25)
    assert factor == pytest.approx(1 / 3) and scaled == pytest.approx(0.19 / 3)
    assert stats.scale_to_ceiling(0.426, 0.5) == pytest.approx((0.213, 0.5))  # open answers: chance 0
    assert stats.scale_to_ceiling(0.2, 0.2, 0.25) == (0.0, 0.0)  # a ceiling below chance: nothing to see
    assert stats.scale_rate(0.80, 1 / 3, 0.25) == pytest.approx(0.25 + 0.55 / 3)
    with pytest.raises(ValueError):
        stats.scale_to_ceiling(0.1, 0.5, 1.0)


def test_sign_flip_tests_are_exact_for_few_pairs_and_flip_whole_conversations():
    assert stats.sign_flip_p([1.0] * 5) == pytest.approx(2 / 32)  # all same sign: 2 of 2^5 flips as extreme
    assert stats.sign_flip_p([0.0, 0.0]) == 1.0
    assert stats.sign_flip_p([1, -1, 1, -1, 0.5]) > 0.5
    many = stats.sign_flip_p([0.3] * 40, reps=999, seed=2)
    assert many == pytest.approx(1 / 1000) and many == stats.sign_flip_p([0.3] * 40, reps=999, seed=2)
    # three conversations, all for A: 2 of 2^3 conversation flips as extreme, whatever the turn count
    conv = [f"c{k // 4}" for k in range(12)]
    assert stats.cluster_sign_flip_p([1.0] * 12, conv) == pytest.approx(0.25)


def test_tost_rejects_only_when_the_interval_sits_inside_the_bounds():
    assert stats.tost_p(0.0, -0.02, 0.02, -0.05, 0.05) < 0.001
    assert stats.tost_p(0.0, -0.1, 0.1, -0.05, 0.05) > 0.1  # a CI wider than the bounds: p = 0.16
    assert stats.tost_p(0.06, 0.04, 0.08, -0.05, 0.05) > 0.5  # outside the upper bound
    # a level against the paper's value: 0.90 [0.87, 0.93] within 0.9011 +- 0.05
    assert stats.tost_p(0.90, 0.87, 0.93, 0.8511, 0.9511) < 0.01
