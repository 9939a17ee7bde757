"""Fitting a gate model (tuner.gate.fit): refusals that name the fix, constant features dropped, C from a grid."""

import numpy as np
import pytest

from search_core.gate.model import GateFitError
from tuner.gate.fit import fit_gate


def test_bad_labels_are_refused():
    rows = [{"top_cos": 0.8 + i / 100} for i in range(6)]
    with pytest.raises(GateFitError, match="2 probes"):
        fit_gate(rows, [1] * 6, fingerprint={})
    with pytest.raises(GateFitError, match="every feature is constant"):
        fit_gate([{"top_cos": 0.8}] * 6, [1, 0, 1, 0, 1, 0], fingerprint={}, features=["top_cos"])


def test_constant_features_are_dropped_not_fatal():
    rng = np.random.default_rng(0)
    y = [1] * 20 + [0] * 20
    rows = [{"top_cos": (0.9 if l else 0.8) + rng.normal(0, 0.02), "sparse_found": 1.0} for l in y]
    m = fit_gate(rows, y, fingerprint={}, features=["top_cos", "sparse_found"])
    assert m.features == ("top_cos",) and m.fitted_on["dropped_constant"] == ["sparse_found"]
    assert m.probability({"top_cos": 0.92}) > 0.8 > 0.2 > m.probability({"top_cos": 0.78})


def test_fit_gate_chooses_C_from_a_grid_on_the_fitting_rows():
    """A grid: every C is scored by the same grouped out-of-fold balanced accuracy, the best one is used
    (ties to the smaller C) and recorded; a one-value grid is the fixed-C fit."""
    rng = np.random.default_rng(0)
    y = np.array([1] * 40 + [0] * 40)
    rows = [{"top_cos": 0.8 + 0.05 * yi + rng.normal(0, 0.04), "term_overlap": rng.normal(0.5, 0.2)} for yi in y]
    groups = [i // 4 for i in range(len(y))]
    m = fit_gate(rows, y, fingerprint={}, features=["top_cos", "term_overlap"], C=(0.01, 1.0, 100.0), groups=groups)
    scores = {float(c): b for c, b in m.fitted_on["C_cv_balanced_accuracy"].items()}
    assert set(scores) == {0.01, 1.0, 100.0}
    best = max(scores.values())
    assert m.fitted_on["C"] == min(c for c, b in scores.items() if b == best)
    one = fit_gate(rows, y, fingerprint={}, features=["top_cos", "term_overlap"], C=(1.0,), groups=groups)
    fixed = fit_gate(rows, y, fingerprint={}, features=["top_cos", "term_overlap"], C=1.0, groups=groups)
    assert one.coef == fixed.coef and one.threshold == fixed.threshold and one.calib_a == fixed.calib_a
