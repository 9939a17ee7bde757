"""The paired significance tests used by compare, the holdout report, the A/B and the keep rule
(percentiles: search_core.percentiles)."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

BOOTSTRAP_BLOCK = 1 << 20     # draws per block: ~8 MB of indexes + 8 MB gathered


def paired_randomization(a, b, *, n_resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided p-value for mean(b - a) == 0 by random sign flips of the paired differences
    (Fisher's randomization test, as in Smucker et al. 2007). The observed assignment is counted."""
    d = np.asarray(b, float) - np.asarray(a, float)
    if d.size == 0 or not np.any(d):
        return 1.0
    obs = abs(d.mean())
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(n_resamples, d.size))
    null = np.abs((signs * d).mean(axis=1))
    return float((1 + np.sum(null >= obs - 1e-12)) / (n_resamples + 1))


def bootstrap_ci(a, b, *, n_resamples: int = 10_000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval for mean(b - a) over questions."""
    d = np.asarray(b, float) - np.asarray(a, float)
    if d.size == 0:
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    # resamples x n at once is 10,000 x 5,774 x 8 bytes ~ 460 MB of indexes plus as much again gathered
    # (KorQuAD dev): draw them in blocks of about BOOTSTRAP_BLOCK values; the stream of draws is the same
    block = max(1, BOOTSTRAP_BLOCK // d.size)
    means = np.empty(n_resamples)
    for start in range(0, n_resamples, block):
        stop = min(start + block, n_resamples)
        idx = rng.integers(0, d.size, size=(stop - start, d.size))
        means[start:stop] = d[idx].mean(axis=1)
    lo, hi = np.percentile(means, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(lo), float(hi)


def normal_quantile(p: float) -> float:
    return NormalDist().inv_cdf(p)


def paired_drop_score(lost: int, gained: int, n: int, drop: float) -> float:
    """Tango's score statistic (Stat Med 1998;17:891-908) for H0: p_lost - p_gained = drop, over n paired
    binary outcomes (a question in the baseline's top 5 and not the candidate's is lost, the reverse gained).
    The variance is taken at the restricted maximum-likelihood cell probabilities under H0, which keeps the
    test near its level when few questions cross the border, and defined when none do (a Wald bound is 0 there)."""
    if n <= 0:
        raise ValueError("a paired test needs at least one question")
    a = 2.0 * n
    b = -lost - gained + (2.0 * n - lost + gained) * drop
    c = -gained * drop * (1.0 - drop)
    p_gained = (math.sqrt(max(b * b - 4.0 * a * c, 0.0)) - b) / (2.0 * a)
    var = n * (2.0 * p_gained + drop * (1.0 - drop))
    diff = lost - gained - n * drop
    if var <= 0.0:
        return 0.0 if diff == 0 else math.copysign(math.inf, diff)
    return diff / math.sqrt(var)


def paired_drop_upper_bound(lost: int, gained: int, n: int, *, alpha: float = 0.05) -> float:
    """One-sided (1 - alpha) upper confidence bound on p_lost - p_gained: the largest true drop the score
    test does not reject at level alpha. A non-inferiority test with margin m rejects "the drop is m or
    more" exactly when this bound is below m. Bisection on the score, which falls as the drop rises."""
    z = normal_quantile(1.0 - alpha)
    lo, hi = (lost - gained) / n, 1.0
    if paired_drop_score(lost, gained, n, hi - 1e-12) >= -z:
        return 1.0
    for _ in range(60):            # 2^-60 of the interval: far below any count's resolution
        mid = (lo + hi) / 2.0
        if paired_drop_score(lost, gained, n, mid) >= -z:
            lo = mid
        else:
            hi = mid
    return lo
