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
