"""How well a gate separates answerable questions from probes, on rows it was not fitted on: the
numbers a query-performance-prediction paper reports. Pure functions over (scores, labels), where a
label is 1 for answerable and 0 for a probe and a higher score means "inject".

`calibrate` reports them for the gate in force on the labelled rows it is given, and
`benchmarks/gate_eval.py` uses the same functions for every table in BENCHMARKS.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RISK_COVERAGE_POINTS = (0.2, 0.4, 0.6, 0.8, 1.0)
CURVE_POINTS = tuple(round(0.05 * i, 2) for i in range(1, 21))     # the plotted curve: 5 % steps


def auroc(scores, labels) -> float:
    """Area under the ROC curve (ties count half); NaN with one class only. The Mann-Whitney form (the positives'
    mean rank, ties at their average rank), which is sklearn's roc_auc_score without its import: loading
    scikit-learn for a few dozen labels was a second of `calibrate`'s CPU and 60 MB of its memory."""
    y = np.asarray(labels, dtype=int)
    if len(set(y.tolist())) != 2:
        return float("nan")
    s = np.asarray(scores, dtype=np.float64)
    if not np.isfinite(s).all():
        raise ValueError("Input contains NaN or infinity: every labelled row needs a finite score")
    _, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    rank = (np.cumsum(counts) - (counts - 1) / 2.0)[inverse]        # 1-based, ties at their average
    pos = y == y.max()
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return float((rank[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def balanced_accuracy(injected, labels) -> float:
    """(share of answerable rows injected + share of probes skipped) / 2; a class with no rows counts 0."""
    pred, y = np.asarray(injected, bool), np.asarray(labels, bool)
    return float(((pred & y).sum() / max(y.sum(), 1) + (~pred & ~y).sum() / max((~y).sum(), 1)) / 2)


def _risks(scores, labels, points) -> list[float]:
    """Inject only the most confident share `c` of the rows: the share of the injected that are probes
    (the risk) at each coverage `c`."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    y = np.asarray(labels)[order]
    return [round(float(1 - y[: max(1, round(c * len(y)))].mean()), 4) for c in points]


def risk_coverage(scores, labels, points=RISK_COVERAGE_POINTS) -> dict[str, float]:
    """The risk at each coverage in `points`, keyed "0.2" ... "1.0" (a report's table columns)."""
    return {f"{c:.1f}": r for c, r in zip(points, _risks(scores, labels, points))}


def risk_coverage_curve(scores, labels, points=CURVE_POINTS) -> list[list[float]]:
    """[[coverage, risk], ...] at every 5 % of coverage, for a plot."""
    return [[float(c), r] for c, r in zip(points, _risks(scores, labels, points))]


@dataclass(frozen=True)
class GateScorecard:
    """One gate on labelled rows (what `gate_scorecard` measures); `to_json` is its shape in a report."""
    threshold: float
    auroc: float | None                     # None with one kind of row only
    balanced_accuracy: float
    answerable_injected: float | None       # None without answerable rows
    probes_injected: float | None           # None without probes
    risk_coverage: dict[str, float]         # coverage ("0.2" ... "1.0") -> risk

    def to_json(self) -> dict:
        return {"threshold": self.threshold, "auroc": self.auroc, "balanced_accuracy": self.balanced_accuracy,
                "answerable_injected": self.answerable_injected, "probes_injected": self.probes_injected,
                "risk_coverage": dict(self.risk_coverage)}


def gate_scorecard(scores, labels, threshold: float) -> GateScorecard:
    """One gate on labelled rows: AUROC, balanced accuracy at its own threshold, the share of answerable
    rows and of probes it injects, and the risk-coverage curve."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    inject = s >= threshold
    a = auroc(s, y)
    return GateScorecard(round(float(threshold), 4), None if np.isnan(a) else round(a, 4),
                         round(balanced_accuracy(inject, y), 4),
                         round(float(inject[y].mean()), 4) if y.any() else None,
                         round(float(inject[~y].mean()), 4) if (~y).any() else None,
                         risk_coverage(s, y))
