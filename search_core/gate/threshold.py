"""A gate model's threshold for one vault from a few labels: move only the calibration's intercept.

The gate's ordering carries from one vault to another, its probability scale does not (on the johngrib wiki
the shipped default ranks answerable above unanswerable questions with AUROC 0.96 while its threshold 0.64
lets only 67 % of the answerable ones through). So with a few dozen labels the feature weights stay and one
number moves: the shift d of the calibrated log-odds that fits the labels best (class-balanced log loss of
sigmoid(logit(P) + d)); the new threshold is where the shifted probability crosses 1/2, sigmoid(-d). One
parameter cannot overfit two dozen labels the way a 16-weight refit does, and unlike the best cut on the
labels (a step function of them) it moves smoothly as labels arrive.
"""

from __future__ import annotations

import numpy as np

_EPS = 1e-6
_NEWTON_STEPS = 50


def _logit(p) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), _EPS, 1 - _EPS)
    return np.log(p / (1 - p))


def _shifts(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Newton on d, one row of (z, y) per problem: z (B, n) log-odds, y (B, n) labels in {0, 1}, each row
    holding both classes. Returns d (B,)."""
    npos = y.sum(axis=1, keepdims=True)
    nneg = y.shape[1] - npos
    w = np.where(y == 1, 0.5 / npos, 0.5 / nneg)            # class-balanced: each class weighs 1/2
    d = np.zeros(z.shape[0])
    for _ in range(_NEWTON_STEPS):
        s = 1.0 / (1.0 + np.exp(-(z + d[:, None])))
        grad = (w * (s - y)).sum(axis=1)
        hess = (w * s * (1 - s)).sum(axis=1) + 1e-9
        step = np.clip(grad / hess, -4.0, 4.0)               # far-off labels: no overshoot past the data
        d -= step
        if np.abs(step).max() < 1e-9:
            break
    return d


def shifted_threshold(probabilities, labels) -> float:
    """The probability threshold after the intercept shift that best fits `labels` (1 answerable, 0 not).
    Needs both classes among the labels."""
    y = np.asarray(labels, dtype=np.float64)
    if not 0 < y.sum() < len(y):
        raise ValueError("a threshold from labels needs both relevant and irrelevant ones")
    d = _shifts(_logit(probabilities)[None, :], y[None, :])[0]
    return float(1.0 / (1.0 + np.exp(d)))


def threshold_interval(probabilities, labels, *, level: float = 0.90, resamples: int = 1000,
                       seed: int = 0) -> tuple[float, float]:
    """How sure the shifted threshold is: the central `level` interval of it over bootstrap resamples of the
    labels (resamples that miss one class are drawn again)."""
    z, y = _logit(probabilities), np.asarray(labels, dtype=np.float64)
    if not 0 < y.sum() < len(y):
        raise ValueError("an interval needs both relevant and irrelevant labels")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(y), size=(resamples, len(y)))
    both = (y[idx].sum(axis=1) > 0) & (y[idx].sum(axis=1) < len(y))
    while not both.all():                                     # few labels: some resamples hold one class only
        redo = ~both
        idx[redo] = rng.integers(0, len(y), size=(int(redo.sum()), len(y)))
        both = (y[idx].sum(axis=1) > 0) & (y[idx].sum(axis=1) < len(y))
    d = _shifts(z[idx], y[idx])
    t = 1.0 / (1.0 + np.exp(d))
    lo, hi = np.quantile(t, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)
