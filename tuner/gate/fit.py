"""Fitting a gate model: an L2 logistic regression over gate features, Platt-calibrated on out-of-fold decision
values, its threshold at the best balanced cut of those calibrated probabilities.

The engine only reads a fitted model (search_core.gate.model.GateModel, plain JSON); fitting needs scikit-learn, a
`[tune]` dependency, so it lives with the tuner that fits: the sweep's gate, `calibrate` and the benchmarks.
"""

from __future__ import annotations

import time

import numpy as np

from search_core.gate.features import FEATURE_NAMES
from search_core.gate.model import (DEFAULT_CAVEAT_WIDTH, GateFitError, GateModel, sigmoid,
                                    best_balanced_threshold)


def fit_gate(rows: list[dict], labels, *, fingerprint: dict, features=None, scope: str = "embedder",
             reranker: str = "none", C: float = 1.0, groups=None, folds: int = 5,
             fitted_on: dict | None = None, caveat_width: float = DEFAULT_CAVEAT_WIDTH) -> GateModel:
    """Fit the gate on feature rows (name -> value) and labels (1 answerable, 0 probe).
    `groups` (e.g. the document each question came from) keeps a group inside one fold, so the
    calibration and the threshold are set on documents the regression did not see. `C` is the L2 strength,
    or a grid of them: then the one with the best out-of-fold balanced accuracy on these rows is used
    (fitted_on records the grid's scores)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold, StratifiedKFold

    y = np.asarray(labels, dtype=int)
    npos, nneg = int((y == 1).sum()), int((y == 0).sum())
    if npos < 2 or nneg < 2:
        raise GateFitError(f"fitting a gate needs at least 2 answerable questions and 2 probes; got {npos} "
                           f"answerable and {nneg} probes. Label more calls (`recall-log label`) or add probes "
                           "(`autoresearch probes make`); until then the cosine gate is used")
    names = list(features or FEATURE_NAMES)
    unknown = [n for n in names if n not in FEATURE_NAMES]
    if unknown:     # read as 0.0 on every row, each would be dropped as a constant without a word
        raise GateFitError(f"unknown gate features {unknown}; valid: {', '.join(FEATURE_NAMES)}")
    X = np.array([[r.get(n, 0.0) for n in names] for r in rows], dtype=np.float64)
    sd = X.std(axis=0)
    keep = [i for i in range(len(names)) if sd[i] > 1e-12]
    dropped = [names[i] for i in range(len(names)) if i not in keep]
    if not keep:
        raise GateFitError(f"every feature is constant over these {len(rows)} rows ({', '.join(names)}); "
                           "nothing to fit, the cosine gate stays")
    names = [names[i] for i in keep]
    X = X[:, keep]
    mean, scale = X.mean(axis=0), X.std(axis=0)
    Z = (X - mean) / scale

    def lr(c):
        return LogisticRegression(C=c, class_weight="balanced", max_iter=1000)

    k = max(2, min(folds, npos, nneg))
    if groups is not None and len(set(groups)) >= k:
        splits = list(GroupKFold(n_splits=k).split(Z, y, groups))
    else:
        splits = list(StratifiedKFold(n_splits=k, shuffle=True, random_state=0).split(Z, y))

    def out_of_fold(c):
        oof = np.zeros(len(y))
        for tr, te in splits:
            if len(set(y[tr])) < 2:
                oof[te] = 0.0
                continue
            oof[te] = lr(c).fit(Z[tr], y[tr]).decision_function(Z[te])
        return oof

    c_cv = None
    if isinstance(C, (int, float)):
        C = float(C)
        oof = out_of_fold(C)
    else:
        # C chosen on these rows only, by the same (grouped) folds that set the calibration and the threshold:
        # the best out-of-fold balanced accuracy at its best cut (Platt is monotone, so the cut on decision
        # values is the cut on probabilities); a tie goes to the smaller C (the stronger regularisation)
        grid = sorted(float(c) for c in C)
        if not grid:
            raise GateFitError("an empty C grid")
        c_cv = {}
        best = None
        for c in grid:
            o = out_of_fold(c)
            b = best_balanced_threshold(o, y)[1]
            c_cv[c] = round(b, 4)
            if best is None or b > best[0] + 1e-12:
                best = (b, c, o)
        _, C, oof = best
    platt = LogisticRegression(C=1e6, max_iter=1000).fit(oof.reshape(-1, 1), y)
    a, b = float(platt.coef_[0, 0]), float(platt.intercept_[0])
    if a <= 0:      # cross-validated scores carry no signal: keep the ordering, flat calibration
        a, b = 1.0, 0.0
    p_oof = np.array([sigmoid(a * z + b) for z in oof])
    threshold, bacc = best_balanced_threshold(p_oof, y)
    threshold = min(max(threshold, 0.01), 0.99)
    final = lr(C).fit(Z, y)
    info = {"rows": int(len(y)), "answerable": npos, "probes": nneg, "cv_balanced_accuracy": round(bacc, 4),
            "dropped_constant": dropped, "C": C,
            **({"C_cv_balanced_accuracy": {str(c): b for c, b in c_cv.items()}} if c_cv else {}), "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **(fitted_on or {})}
    return GateModel(tuple(names), tuple(map(float, mean)), tuple(map(float, scale)),
                     tuple(map(float, final.coef_[0])), float(final.intercept_[0]), a, b, float(threshold),
                     dict(fingerprint), scope, reranker, caveat_width, info)
