"""One table of gate features: the shipped default, `calibrate`'s refit, the sweep's and the A/B's fitted gate
all read GATE_FEATURES; a name that is not a feature is refused with the valid ones."""

from types import SimpleNamespace

import numpy as np
import pytest

from search_core.gate.features import (FEATURE_NAMES, FEATURE_SETS, GATE_FEATURE_SET, GATE_FEATURES, feature_set,
                                       unknown_features)
from search_core.gate.model import DEFAULT_GATE_FILE, GateFitError, load_gate
from tuner.gate.fit import fit_gate

FP = {"embedder": {"name": "e5-small", "dim": 384}}


def _rows(n=40, seed=0):
    """Feature rows for every name gate_features computes; answerable rows have higher values of all of them."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        y = i % 3 != 0
        out.append(({f: float(rng.normal(0.6 if y else 0.0, 1.0)) for f in FEATURE_NAMES}, int(y)))
    return out


def test_the_table_names_only_features_and_lookups_name_the_valid_sets():
    assert GATE_FEATURES == FEATURE_SETS[GATE_FEATURE_SET]
    for name, feats in FEATURE_SETS.items():
        assert feats and not unknown_features(feats) and len(set(feats)) == len(feats), name
    # the query's length and script mix say more about how a set was written than about answerability
    assert not {"query_chars", "hangul_share", "latin_share"} & set(GATE_FEATURES)
    assert unknown_features(["top_cos", "top_cosine"]) == ["top_cosine"]
    with pytest.raises(ValueError, match="unknown gate feature set 'sixteen'; valid: transferable-16, scale-free-23, cross-script-27, words-32, overlaps-35, ngram-40"):
        feature_set("sixteen")


def test_the_shipped_default_reads_the_table():
    assert load_gate(DEFAULT_GATE_FILE).features == GATE_FEATURES


def test_fit_gate_refuses_a_feature_it_cannot_read():
    rows = _rows()
    with pytest.raises(GateFitError, match=r"unknown gate features \['top_cosine'\]; valid: top_cos, hit_cos"):
        fit_gate([f for f, _ in rows], [y for _, y in rows], fingerprint=FP, features=["top_cosine", "cos_margin"])


def test_calibrates_refit_fits_the_table():
    from tuner.gate.calibrate import LabelledRow, calibrate
    labelled = [LabelledRow("set", str(i), f"q{i}", f, bool(y)) for i, (f, y) in enumerate(_rows())]
    rec = calibrate([], labelled, model=None, cos_threshold=0.82, fingerprint=FP, log_read=False).recommendation
    assert rec.model_summary.method == "refit"
    assert tuple(rec.model["features"]) == GATE_FEATURES


def test_the_sweeps_and_the_ab_fitted_gate_fit_the_table():
    # the A/B fits its candidate's gate with the sweep's function (tuner.ab.run.candidate_gate)
    from tuner.sweep.workbench import fit_gate_model
    rows = [SimpleNamespace(gate_features=f, level="L1" if y else "probe") for f, y in _rows()]
    m = fit_gate_model(rows, FP, gold_name="tune")
    assert m is not None and m.features == GATE_FEATURES
