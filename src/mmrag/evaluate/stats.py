"""Small-sample statistics for deciding the papers' claims: intervals, paired tests, power.

Every claim here is a rate (accuracy, recall) or a mean (F1, tool calls) measured on a few dozen
to a few hundred questions, usually by two systems on the *same* questions. So: Wilson intervals
for one rate, Newcombe's hybrid score interval for a difference of independent rates, the exact
McNemar test and a paired bootstrap for two systems on the same questions, a cluster bootstrap
when questions come in conversations, and the sample size (and smallest detectable difference)
for 80 % power. Every resampling takes a seed, so a rerun gives the same interval.

Deciding many claims at once: sign-flip permutation tests for paired means (whole conversations
flipped together), TOST for equivalence and levels, Holm-Bonferroni adjustment within a family,
and the scaling of a paper's effect to a ceiling of ours (a reader that cannot reach 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product

import numpy as np
from scipy import stats as st


def z(alpha: float) -> float:
    """The two-sided normal quantile of level ``alpha`` (1.96 for 0.05)."""
    return float(st.norm.ppf(1 - alpha / 2))


# --------------------------------------------------------------------------- one rate
def wilson(k: float, n: int, alpha: float = 0.05) -> tuple[float | None, float | None]:
    """Wilson score interval of a proportion k/n (sound at 0/n and n/n, unlike the Wald one)."""
    if n <= 0:
        return None, None
    p, zz = k / n, z(alpha)
    centre = (p + zz * zz / (2 * n)) / (1 + zz * zz / n)
    half = zz * math.sqrt(p * (1 - p) / n + zz * zz / (4 * n * n)) / (1 + zz * zz / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def is_binary(values: Sequence[float]) -> bool:
    """Every value is 0 or 1 (a rate, not a mean of graded scores)."""
    return all(v in (0, 1) for v in values)


def mean_ci(values: Sequence[float], alpha: float = 0.05, reps: int = 2000,
            seed: int = 0) -> tuple[float | None, float | None]:
    """A mean's interval: Wilson for 0/1 values, else a seeded percentile bootstrap."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None, None
    if is_binary(vals):
        return wilson(sum(vals), len(vals), alpha)
    arr = np.asarray(vals)
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, len(arr), size=(reps, len(arr)))].mean(axis=1)
    return float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


# --------------------------------------------------------------------------- two rates
def newcombe(k1: float, n1: int, k2: float, n2: int, alpha: float = 0.05
             ) -> tuple[float, float, float]:
    """(p1 - p2, low, high): Newcombe's hybrid score interval (method 10) for independent rates."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1, alpha)
    l2, u2 = wilson(k2, n2, alpha)
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return d, low, high


def newcombe_paired(both: int, only_a: int, only_b: int, neither: int, alpha: float = 0.05
                    ) -> tuple[float, float, float]:
    """(p_a - p_b, low, high) for two rates on the same questions: Newcombe's hybrid score interval
    for paired proportions (1998, method 10). Unlike a percentile bootstrap it does not collapse to
    a bound of exactly 0 when all the few discordant pairs fall on one side."""
    n = both + only_a + only_b + neither
    if n <= 0:
        raise ValueError("newcombe_paired: no pairs")
    pa, pb = (both + only_a) / n, (both + only_b) / n
    la, ua = wilson(both + only_a, n, alpha)
    lb, ub = wilson(both + only_b, n, alpha)
    denom = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    cross = both * neither - only_a * only_b  # Newcombe's phi, shrunk by n/2 when positive
    cross = cross - n / 2 if cross > n / 2 else min(cross, 0)
    phi = cross / math.sqrt(denom) if denom > 0 else 0.0
    d = pa - pb
    low = d - math.sqrt(max((pa - la) ** 2 - 2 * phi * (pa - la) * (ub - pb) + (ub - pb) ** 2, 0.0))
    high = d + math.sqrt(max((ua - pa) ** 2 - 2 * phi * (ua - pa) * (pb - lb) + (pb - lb) ** 2, 0.0))
    return d, max(low, -1.0), min(high, 1.0)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs (b: only A right, c: only B)."""
    if b + c == 0:
        return 1.0
    return float(st.binomtest(int(b), int(b + c), 0.5).pvalue)


def discordant(a: Sequence[float], b: Sequence[float]) -> tuple[int, int]:
    """(questions only A got right, questions only B got right) of two paired 0/1 vectors."""
    return (sum(1 for x, y in zip(a, b) if x and not y), sum(1 for x, y in zip(a, b) if y and not x))


def paired_bootstrap(a: Sequence[float], b: Sequence[float], alpha: float = 0.05, reps: int = 2000,
                     seed: int = 0) -> tuple[float, float, float]:
    """(mean(a - b), low, high): percentile bootstrap of the paired difference, questions resampled."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if len(d) == 0:
        raise ValueError("paired_bootstrap: no pairs")
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(reps, len(d)))].mean(axis=1)
    return float(d.mean()), float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


def cluster_bootstrap(a: Sequence[float], b: Sequence[float], clusters: Sequence[str],
                      alpha: float = 0.05, reps: int = 2000, seed: int = 0
                      ) -> tuple[float, float, float]:
    """(mean(a - b), low, high) resampling whole clusters (conversations), not turns: turns of one
    conversation are not independent."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    names = sorted(set(clusters))
    if not names:
        raise ValueError("cluster_bootstrap: no pairs")
    index = {c: i for i, c in enumerate(names)}
    cid = np.array([index[c] for c in clusters])
    sums = np.bincount(cid, weights=d, minlength=len(names))
    sizes = np.bincount(cid, minlength=len(names)).astype(float)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(names), size=(reps, len(names)))
    means = sums[pick].sum(axis=1) / sizes[pick].sum(axis=1)
    return float(d.mean()), float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))



def ratio_bootstrap(num: Sequence[float], den: Sequence[float], alpha: float = 0.05, reps: int = 2000,
                    seed: int = 0) -> tuple[float, float, float]:
    """(sum(num) / sum(den), low, high): percentile bootstrap of a ratio of two totals over the same
    questions (fidelity's Acc(summary only) / Acc(full)), questions resampled as pairs; a resample
    whose denominator is 0 has no ratio and is left out."""
    n_arr, d_arr = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if len(n_arr) != len(d_arr):
        raise ValueError(f"ratio_bootstrap: {len(n_arr)} numerators but {len(d_arr)} denominators")
    if d_arr.sum() == 0:
        raise ValueError("ratio_bootstrap: the denominator sums to 0 (no ratio)")
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(n_arr), size=(reps, len(n_arr)))
    tops, bottoms = n_arr[pick].sum(axis=1), d_arr[pick].sum(axis=1)
    ratios = tops[bottoms > 0] / bottoms[bottoms > 0]
    return (float(n_arr.sum() / d_arr.sum()), float(np.quantile(ratios, alpha / 2)),
            float(np.quantile(ratios, 1 - alpha / 2)))

# --------------------------------------------------------------------------- power
def n_unpaired(p1: float, p2: float, alpha: float = 0.05, power: float = 0.8) -> int | None:
    """Questions per group to tell two independent rates apart (two-sided; None if equal)."""
    delta = abs(p1 - p2)
    if delta == 0:
        return None
    pbar = (p1 + p2) / 2
    num = z(alpha) * math.sqrt(2 * pbar * (1 - pbar)) + float(st.norm.ppf(power)) * math.sqrt(
        p1 * (1 - p1) + p2 * (1 - p2))
    return math.ceil(num * num / (delta * delta))


def n_paired(p1: float, p2: float, alpha: float = 0.05, power: float = 0.8,
             discordance: float | None = None) -> int | None:
    """Paired questions for McNemar to detect p1 vs p2 (Connor 1987). ``discordance`` is the share
    of questions the two systems disagree on; unknown, it is taken as for independent systems
    (p1(1-p2) + p2(1-p1)), which overstates n when the systems agree more than chance."""
    delta = abs(p1 - p2)
    if delta == 0:
        return None
    pd = discordance if discordance else p1 * (1 - p2) + p2 * (1 - p1)
    pd = max(pd, delta)
    num = z(alpha) * math.sqrt(pd) + float(st.norm.ppf(power)) * math.sqrt(max(pd - delta * delta, 0.0))
    return math.ceil(num * num / (delta * delta))


def n_mean(delta: float, sd: float, alpha: float = 0.05, power: float = 0.8) -> int | None:
    """Questions to detect a mean (paired) difference ``delta`` given the sd of the differences."""
    if delta == 0 or sd <= 0:
        return None
    return math.ceil(((z(alpha) + float(st.norm.ppf(power))) * sd / abs(delta)) ** 2)


def mde_paired(n: int, discordance: float, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Smallest paired difference of rates McNemar detects with ``n`` pairs at this discordance.

    A difference d needs at least a share d of the pairs discordant, so two systems that agree
    everywhere (both 0 %) do not make a tiny difference detectable: the floor is c**2 / n."""
    if n <= 0:
        return None
    c = z(alpha) + float(st.norm.ppf(power))
    return max(c * math.sqrt(max(discordance, 0.0) / n), c * c / n)


def mde_unpaired(n: int, p: float, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Smallest difference between two independent rates near ``p`` detectable with n per group."""
    if n <= 0:
        return None
    p = min(max(p, 0.5 / n), 1 - 0.5 / n)
    return (z(alpha) + float(st.norm.ppf(power))) * math.sqrt(2 * p * (1 - p) / n)


def mde_mean(n: int, sd: float, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Smallest mean (paired) difference detectable with ``n`` questions at this sd."""
    if n <= 0:
        return None
    return (z(alpha) + float(st.norm.ppf(power))) * sd / math.sqrt(n)


def mde_level(n: int, p: float, alpha: float = 0.05) -> float | None:
    """Half-width of the Wilson interval around ``p`` at ``n``: how close a level can be pinned."""
    if n <= 0:
        return None
    lo, hi = wilson(p * n, n, alpha)
    return None if lo is None else (hi - lo) / 2


# --------------------------------------------------------------------------- tests for many claims
def sign_flip_p(d: Sequence[float], reps: int = 2000, seed: int = 0, exact_up_to: int = 16) -> float:
    """Two-sided p of a paired mean difference ``d`` against 0 by sign flipping: every sign vector
    when n <= ``exact_up_to`` (exact), else ``reps`` seeded flips ((1 + hits) / (reps + 1))."""
    arr = np.asarray(d, dtype=float)
    if len(arr) == 0 or not np.any(arr):
        return 1.0
    obs = abs(arr.mean()) - 1e-12
    if len(arr) <= exact_up_to:
        signs = np.array(list(product((1.0, -1.0), repeat=len(arr))))
        return float(np.mean(np.abs((signs * arr).mean(axis=1)) >= obs))
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(reps, len(arr)))
    hits = int(np.sum(np.abs((signs * arr).mean(axis=1)) >= obs))
    return (1 + hits) / (reps + 1)


def cluster_sign_flip_p(d: Sequence[float], clusters: Sequence[str], reps: int = 2000, seed: int = 0,
                        exact_up_to: int = 16) -> float:
    """Two-sided p of a paired mean difference against 0, flipping whole clusters (conversations):
    the turns of one conversation keep their signs together."""
    arr = np.asarray(d, dtype=float)
    names = sorted(set(clusters))
    if len(arr) == 0 or not np.any(arr):
        return 1.0
    index = {c: i for i, c in enumerate(names)}
    sums = np.bincount([index[c] for c in clusters], weights=arr, minlength=len(names))
    obs = abs(sums.sum()) - 1e-12
    if len(names) <= exact_up_to:
        signs = np.array(list(product((1.0, -1.0), repeat=len(names))))
        return float(np.mean(np.abs(signs @ sums) >= obs))
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(reps, len(names)))
    hits = int(np.sum(np.abs(signs @ sums) >= obs))
    return (1 + hits) / (reps + 1)


def tost_p(est: float, lo: float, hi: float, low: float, high: float, alpha: float = 0.05) -> float:
    """Two one-sided tests that the quantity lies inside (low, high): the larger one-sided p, each
    from a normal approximation whose standard error is read off the (1 - alpha) CI [lo, hi]."""
    se = (hi - lo) / (2 * z(alpha))
    if se <= 0:
        return 0.0 if low < est < high else 1.0
    p_low = 1 - float(st.norm.cdf((est - low) / se))
    p_high = 1 - float(st.norm.cdf((high - est) / se))
    return max(p_low, p_high)


def holm_multipliers(pvalues: Sequence[float]) -> list[int]:
    """Each p's Holm multiplier: m for the smallest, m - 1 for the next, ..., 1 for the largest."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    out = [0] * len(pvalues)
    for rank, i in enumerate(order):
        out[i] = len(pvalues) - rank
    return out


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input's order: sorted ascending, the j-th (from 0)
    becomes max over i <= j of min(1, (m - i) p_(i))."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    out = [0.0] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * float(pvalues[i])))
        out[i] = running
    return out


def scale_to_ceiling(effect: float, ceiling: float, chance: float = 0.0) -> tuple[float, float]:
    """(scaled effect, factor): a paper's effect on a 0-1 rate mapped to a range that ends at our
    ``ceiling`` and starts at ``chance``, factor = (ceiling - chance) / (1 - chance) (at least 0)."""
    if chance >= 1:
        raise ValueError(f"scale_to_ceiling: chance {chance} leaves no range")
    factor = max(0.0, (ceiling - chance) / (1 - chance))
    return effect * factor, factor


def scale_rate(p: float, factor: float, chance: float = 0.0) -> float:
    """A paper's rate mapped into our range: chance + (p - chance) x factor."""
    return chance + (p - chance) * factor
