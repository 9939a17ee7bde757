"""What an A/B found is a value (tuner.ab.verdicts) whose message and fix come from one table: one test per
kind that the fix fits the result (a difference within noise is never told to switch models)."""

import pytest

from tuner.ab.compare import PairComparison
from tuner.ab.verdicts import DIFFERS, NOTHING_COMPARED, VERDICTS, WITHIN_NOISE, ab_verdict
from tuner.evaluation.compare import PairedMetric


def _candidate(label, status="ok"):
    return {"label": label, "status": status}


def _pair(b, delta_questions, p, within_noise, n=40):
    a_rate = 0.8
    hit = PairedMetric(a_rate, a_rate + delta_questions / n, delta_questions / n, delta_questions, p, (-0.1, 0.1),
                       within_noise)
    mrr = PairedMetric(0.7, 0.7, 0.0, 0.0, 1.0, (-0.05, 0.05), True)
    return PairComparison("e5-small", b, n, {"hit@5": hit, "mrr": mrr}, (), (), n).to_json()


def test_nothing_compared_says_what_would_let_it_compare():
    v = ab_verdict({"candidates": [_candidate("e5-small"), _candidate("BAAI/bge-m3", "unavailable")], "pairs": []})
    assert v.kind == NOTHING_COMPARED
    assert v.message() == "no comparison: 1 candidate(s) finished; not compared: BAAI/bge-m3 (unavailable)"
    assert "needs two candidates that run" in v.fix() and "switch" not in v.fix()


def test_within_noise_keeps_the_model_in_use():
    v = ab_verdict({"candidates": [_candidate("e5-small"), _candidate("minilm-l6")],
                    "pairs": [_pair("minilm-l6", 1, 0.62, True)]})
    assert v.kind == WITHIN_NOISE
    assert v.message().startswith("minilm-l6 vs e5-small: hit@5 +1 of 40 questions") and "within noise" in v.message()
    fix = v.fix()
    assert fix.startswith("no candidate differs from e5-small beyond noise on these 40 questions")
    assert "switch" not in fix and "index --full" not in fix and "gold make" in fix


def test_a_difference_beyond_noise_names_the_candidate_and_what_switching_takes():
    v = ab_verdict({"candidates": [_candidate("e5-small"), _candidate("minilm-l6"), _candidate("bge", "failed")],
                    "pairs": [_pair("minilm-l6", -9, 0.004, False)]})
    assert v.kind == DIFFERS and "NOT within noise" in v.message() and v.message().endswith("bge (failed)")
    assert v.fix().startswith("minilm-l6 differ(s) from e5-small beyond noise")
    assert "`autoresearch index --full`" in v.fix()


def test_an_unknown_kind_is_refused():
    assert set(VERDICTS) == {NOTHING_COMPARED, WITHIN_NOISE, DIFFERS}
    with pytest.raises(KeyError, match="no A/B verdict 'tie'"):
        VERDICTS("tie")
