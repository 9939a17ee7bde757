"""The paired significance tests used by compare, the holdout report and the A/B (percentiles: search_core.percentiles)."""

from __future__ import annotations

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
