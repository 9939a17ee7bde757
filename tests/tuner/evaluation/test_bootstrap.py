"""The paired bootstrap's interval: resampled in blocks, its memory bounded, its answer the all-at-once one."""

import tracemalloc

import numpy as np
import pytest

from tuner.evaluation import stats as stats_util


def test_the_bootstrap_memory_is_bounded_and_its_answer_unchanged():
    rng = np.random.default_rng(1)
    a, b = rng.random(5774), rng.random(5774)
    tracemalloc.start()
    lo, hi = stats_util.bootstrap_ci(a, b, n_resamples=2000, seed=0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 40e6, f"peak {peak / 1e6:.0f} MB"      # all at once: 2000 x 5774 x 8 x 2 = 185 MB
    d = b - a
    idx = np.random.default_rng(0).integers(0, d.size, size=(2000, d.size))
    means = d[idx].mean(axis=1)
    assert (lo, hi) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])), rel=1e-12)
