"""A gate model's threshold for one vault from a few labels: the weights stay, one number moves.

The gate's ordering carries from one vault to another, its probability scale does not (on the johngrib wiki
the shipped default ranks answerable above unanswerable questions with AUROC 0.96 while its threshold 0.64
lets only 67 % of the answerable ones through). So with a few dozen labels the feature weights stay and the
threshold on P moves (a monotone move of P, the same as shifting the calibration's intercept): to the cut
with the best balanced accuracy on the labels, taken as the median over bootstrap resamples of them, so one
new label nudges it instead of making it jump between neighbouring calls; the same resamples give the
interval. (A one-parameter shift of the log-odds fitted by log loss was tried first: with the slope held at
1 it is pulled towards P = 0.5 when the vault's answerable and unanswerable calls part sharply, e.g. 0.52
for a boundary at 0.30 on 24 labels.)

Whether the gate moves to that cut is the tuner's question (tuner.gate.threshold); the exact sign test's
tail and the count of labelled calls a move flips, which it decides on, are here beside the cut.
"""

from __future__ import annotations

import math

import numpy as np

from search_core.gate.model import best_balanced_threshold

RESAMPLES = 500


def threshold_from_labels(probabilities, labels, *, level: float = 0.90, resamples: int = RESAMPLES,
                          seed: int = 0) -> tuple[float, tuple[float, float]]:
    """(threshold, (low, high)): the bagged best balanced-accuracy cut on `probabilities` for `labels`
    (1 answerable, 0 not), and the central `level` interval of the cut over the resamples. Needs both
    classes; a resample that misses one is drawn again."""
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(labels, dtype=int)
    if not 0 < y.sum() < len(y):
        raise ValueError("a threshold from labels needs both relevant and irrelevant ones")
    rng = np.random.default_rng(seed)
    cuts = []
    while len(cuts) < resamples:
        idx = rng.integers(0, len(y), size=len(y))
        if 0 < y[idx].sum() < len(y):
            cuts.append(best_balanced_threshold(p[idx], y[idx])[0])
    cuts = np.clip(np.asarray(cuts), 0.0, 1.0)
    lo, hi = np.quantile(cuts, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(np.median(cuts)), (float(lo), float(hi))


EXACT_TAIL_MAX_N = 1000     # up to here the tail is summed term by term; past it math.comb(n, i) overflows a float
                            # (a week of 100,000 calls puts tens of thousands of flipped calls into one test)


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p): the exact sign test's one-sided p-value. Past EXACT_TAIL_MAX_N trials,
    the same quantity as the regularised incomplete beta function I_p(k, n - k + 1)."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    if n <= EXACT_TAIL_MAX_N:
        return float(min(1.0, sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1))))
    return min(1.0, max(0.0, _incomplete_beta(k, n - k + 1, p)))


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) by its continued fraction (modified Lentz), on the side where it converges fast."""
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def _beta_fraction(a: float, b: float, x: float, eps: float = 1e-15, tiny: float = 1e-300) -> float:
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            step = d * c
            h *= step
        if abs(step - 1.0) < eps:
            break
    return h


def flipped_labels(probabilities, labels, current: float, proposed: float) -> tuple[int, int, float]:
    """(wins, losses, null share) of moving the cut from `current` to `proposed`, on the labelled calls it
    flips (flipped_decisions, each call injected when its probability is at or above the cut)."""
    p = np.asarray(probabilities, dtype=np.float64)
    return flipped_decisions(labels, p >= current, p >= proposed)


def flipped_decisions(labels, before, after) -> tuple[int, int, float]:
    """(wins, losses, null share) of the labelled calls whose inject decision differs between `before` and
    `after` (a boolean per call; labels True for answerable). Lowering a cut lets calls through: an answerable
    one is a win, a probe a loss; raising it, the other way round. Balanced accuracy weighs a class by one over
    its size, so a lowering only breaks even when the share of answerable calls among the flipped equals their
    share among all calls (raising: the probes'); that share is the null of the sign test, estimated from the
    labels (kept within 0.2-0.8). A change that flips calls both ways (not one cut's move) counts each flip it
    decides right as a win, against an even share."""
    y = np.asarray(labels, dtype=bool)
    b, a = np.asarray(before, dtype=bool), np.asarray(after, dtype=bool)
    share = float(np.clip(y.mean(), 0.2, 0.8)) if len(y) else 0.5
    through, held = a & ~b, b & ~a
    if through.any() and held.any():
        flipped = through | held
        right = int((flipped & (a == y)).sum())
        return right, int(flipped.sum()) - right, 0.5
    if held.any():
        return int((held & ~y).sum()), int((held & y).sum()), 1.0 - share
    return int((through & y).sum()), int((through & ~y).sum()), share
