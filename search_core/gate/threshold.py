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
"""

from __future__ import annotations

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
