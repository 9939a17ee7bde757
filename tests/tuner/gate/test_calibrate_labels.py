"""`calibrate` from a few labels: the threshold moves, the weights stay, with an interval and the decisions
it flips; a refit only when enough labels measure it better; rows of another index kept apart."""

import dataclasses
import math

import numpy as np
import pytest

from search_core.gate.model import GateModel
from search_core.gate.threshold import binomial_tail, flipped_decisions, flipped_labels, threshold_from_labels
from tuner.gate.threshold import decide_threshold
from search_core.recall.log import LoggedCall
from tuner.gate.calibrate import calibrate
from tuner.gate.records import Flipped
from tests.helpers.logged_calls import (FP, cosine_call, gate_model, logged_call, vault_labelled_near,
                                        vault_with_boundary_at)

_model, _call = gate_model, logged_call
_vault_with_boundary_at, _vault_labelled_near = vault_with_boundary_at, vault_labelled_near


def test_labels_that_cover_the_move_move_the_threshold_and_keep_the_weights():
    calls = _vault_labelled_near(0.3)
    model = _model()
    cal = calibrate(calls, [], model=model, cos_threshold=0.82, fingerprint=FP, fingerprint_key="idx-A")
    rec = cal.recommendation
    mv = rec.threshold_move
    assert rec.model_summary.method == "threshold"
    assert mv.from_ == 0.64 and 0.15 < mv.to < 0.45
    lo, hi = mv.interval
    assert lo < mv.to < hi and hi - lo < 0.4
    st = mv.sign_test      # every call the move flips is labelled, and answerable: a win each
    assert st.losses == 0 and st.wins == mv.flips.let_through >= 10 and st.p_value <= 0.05
    assert mv.cross_validation is None and "labels with 20 of each kind" in mv.refit_needs
    new = rec.model
    assert new["coef"] == list(model.coef) and new["intercept"] == model.intercept      # the weights stay
    assert new["calib_a"] == model.calib_a and new["calib_b"] == model.calib_b
    assert new["threshold"] == pytest.approx(mv.to, abs=1e-4) and new["scope"] == "index"
    # the flips: every call (labelled or not) whose P lies between the new threshold and the old one
    ps = np.array([1 / (1 + math.exp(-c.features["top_cos"])) for c in calls])
    assert mv.flips == Flipped(int(((ps >= new["threshold"]) & (ps < 0.64)).sum()), 0, len(calls))
    assert mv.accuracy_to > mv.accuracy_from


def test_a_move_over_calls_nobody_labelled_is_not_made():
    # the covered rule: 24 labels spread over 224 calls point to 0.3, but the move would flip some 75 calls, most
    # never labelled: they count against it, and the threshold stays
    calls = _vault_with_boundary_at(0.3, n_labels=24)
    cal = calibrate(calls, [], model=_model(), cos_threshold=0.82, fingerprint=FP, fingerprint_key="idx-A",
                    threshold_rule="covered-sign-test")
    rec = cal.recommendation
    mv = rec.threshold_move
    assert 0.15 < mv.to < 0.45 and mv.kept and rec.model_summary.method == "keep"
    assert mv.sign_test.p_value > 0.05 and "not labelled" in mv.sign_test.why
    # the same labels with the rule that ignores the unlabelled calls would move it
    moved = calibrate(calls, [], model=_model(), cos_threshold=0.82, fingerprint=FP, fingerprint_key="idx-A",
                      threshold_rule="always").recommendation
    assert moved.model_summary.method == "threshold"


def test_a_call_asked_again_carries_its_label():
    # the labelled calls near the cut, each asked once more unlabelled: the repeats are not evidence against
    calls = _vault_labelled_near(0.3, n=100, seed=4)
    again = [dataclasses.replace(c, id=1000 + c.id, ts=c.ts + 5000, label=None) for c in calls if c.label]
    with_again = calibrate(calls + again, [], model=_model(), cos_threshold=0.82, fingerprint=FP).recommendation
    assert with_again.model_summary.method == "threshold"
    st = with_again.threshold_move.sign_test
    alone = calibrate(calls, [], model=_model(), cos_threshold=0.82, fingerprint=FP).recommendation
    assert st.losses == 0 and st.wins > alone.threshold_move.sign_test.wins


def test_a_call_asked_again_with_a_word_more_carries_its_label():
    # "질문 12" then "질문 12 요": the near-duplicate `suggest` folds into the labelled call and never offers, so
    # it must not count against a move as a call nobody labelled
    calls = _vault_labelled_near(0.3, n=100, seed=4)
    again = [dataclasses.replace(c, id=1000 + c.id, ts=c.ts + 5000, label=None, query=f"{c.query} 요")
             for c in calls if c.label and c.id >= 10]
    alone = calibrate(calls, [], model=_model(), cos_threshold=0.82, fingerprint=FP).recommendation
    with_again = calibrate(calls + again, [], model=_model(), cos_threshold=0.82, fingerprint=FP).recommendation
    st = with_again.threshold_move.sign_test
    assert with_again.model_summary.method == "threshold"
    assert st.losses == alone.threshold_move.sign_test.losses
    assert st.wins > alone.threshold_move.sign_test.wins


def test_the_sign_test_by_hand():
    # P(X >= 5), X ~ Binomial(5, 2/3) = (2/3)^5
    assert binomial_tail(5, 5, 2 / 3) == pytest.approx((2 / 3) ** 5)
    assert binomial_tail(0, 4, 0.5) == 1.0
    assert binomial_tail(3, 4, 0.5) == pytest.approx(5 / 16)
    # lowering the cut from 0.6 to 0.3: the labelled calls in [0.3, 0.6) flip; answerable ones are wins
    w, l, share = flipped_labels([0.35, 0.4, 0.5, 0.55, 0.7, 0.1], [1, 1, 0, 1, 1, 0], 0.6, 0.3)
    assert (w, l) == (3, 1) and share == pytest.approx(4 / 6)
    # raising it: the probes stopped are wins, and break-even is the probes' share
    w, l, share = flipped_labels([0.35, 0.4, 0.5, 0.55, 0.7, 0.1], [1, 1, 0, 1, 1, 0], 0.3, 0.6)
    assert (w, l) == (1, 3) and share == pytest.approx(2 / 6)
    # the same counts from the decisions before and after (what a sweep's threshold round reads)
    y = [1, 1, 0, 1, 1, 0]
    assert flipped_decisions(y, [0, 0, 0, 0, 1, 0], [1, 1, 1, 1, 1, 0]) == (3, 1, pytest.approx(4 / 6))
    assert flipped_decisions(y, [1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 1, 0]) == (1, 3, pytest.approx(2 / 6))
    # flips both ways (a refit, not a cut): each flip decided right is a win, against an even share
    assert flipped_decisions(y, [1, 0, 1, 0, 1, 0], [0, 1, 0, 1, 1, 0]) == (3, 1, 0.5)
    assert flipped_decisions(y, y, y) == (0, 0, pytest.approx(4 / 6))
    # an unlabelled call in the flipped range is a loss; the cut is pulled back to the labelled calls
    p = [0.01 * i for i in range(1, 11)] + [0.5 + 0.01 * i for i in range(9)] + [0.7, 0.8]
    y = [0] * 10 + [1] * 11
    d = decide_threshold(p, y, 0.6, unlabelled=[0.3], rule="covered-sign-test")
    share = 11 / 21
    assert d.move and d.proposed == pytest.approx(0.3) and (d.wins, d.losses) == (9, 1)
    assert d.p_value == pytest.approx(binomial_tail(9, 10, share)) and d.p_value <= 0.025    # alpha halved: 2 tries
    # three unlabelled among them: the labels' cut fails, and so does the cut pulled back to the labelled calls
    # next to the current one (0.56-0.58, above the first unlabelled call at 0.55)
    d = decide_threshold(p, y, 0.6, unlabelled=[0.3, 0.52, 0.55], rule="covered-sign-test")
    assert not d.move and (d.wins, d.losses) == (9, 3)
    with pytest.raises(ValueError, match="unknown threshold rule 'median'; valid: scan-sign-test, calibration-lr, labelled-sign-test, covered-sign-test"):
        decide_threshold([0.1, 0.9], [0, 1], 0.5, rule="median")


def test_labels_that_hold_the_current_threshold_keep_it():
    calls = _vault_with_boundary_at(0.64, n_labels=24, seed=2)
    cal = calibrate(calls, [], model=_model(), cos_threshold=0.82, fingerprint=FP)
    rec = cal.recommendation
    mv = rec.threshold_move
    assert mv.interval[0] <= 0.64 <= mv.interval[1] and mv.kept
    assert rec.model_summary.method == "keep" and rec.basis is None and rec.model is None
    assert mv.flips.let_through == mv.flips.stopped == 0
    assert any("The current 0.640 stays" in w for w in cal.warning_lines())


def test_more_labels_narrow_the_interval():
    few = _vault_with_boundary_at(0.3, n_labels=12, seed=1)
    many = _vault_with_boundary_at(0.3, n_labels=60, seed=1)
    def width(calls):
        cal = calibrate(calls, [], model=_model(), cos_threshold=0.82, fingerprint=FP)
        lo, hi = cal.recommendation.threshold_move.interval
        return hi - lo
    assert width(many) < width(few)


def test_the_threshold_by_hand():
    # labels that part cleanly between P 0.30 and 0.34: the cut sits between them, however they are resampled
    p = [0.05, 0.1, 0.2, 0.3, 0.34, 0.5, 0.7, 0.9]
    y = [0, 0, 0, 0, 1, 1, 1, 1]
    t, (lo, hi) = threshold_from_labels(p, y, resamples=200)
    assert 0.3 < t < 0.34 and 0.2 < lo <= t <= hi <= 0.5
    # one mislabelled call moves it, but not to that call
    t2, _ = threshold_from_labels(p + [0.8], y + [0], resamples=200)
    assert 0.2 < t2 < 0.8
    with pytest.raises(ValueError, match="both"):
        threshold_from_labels(p, [1] * len(p))


def test_a_refit_only_when_enough_labels_measure_it_better():
    # the model reads top_cos, which says nothing here; title_match decides: a refit of the weights finds it
    rng = np.random.default_rng(3)
    def calls_for(n):
        out = []
        for i in range(n):
            relevant = i % 2 == 0
            out.append(_call(i + 1, float(rng.uniform(0.05, 0.95)), "relevant" if relevant else "irrelevant",
                             title_match=float(relevant) + float(rng.normal(0, 0.2))))
        return out
    few = calibrate(calls_for(30), [], model=_model(), cos_threshold=0.82, fingerprint=FP).recommendation
    assert few.model_summary.method != "refit"            # 30 labels: no refit tried
    many = calibrate(calls_for(120), [], model=_model(), cos_threshold=0.82, fingerprint=FP).recommendation
    cv = many.threshold_move.cross_validation
    assert cv.refit > cv.threshold_only + 0.02
    assert many.model_summary.method == "refit" and many.basis.text().startswith("a refit of the weights")


def test_rows_of_another_index_are_kept_apart():
    calls = _vault_with_boundary_at(0.3, n_labels=24)
    # another index's rows, labelled the other way round: counted, they would drag the threshold up
    other = [_call(1000 + i, 0.2 + 0.02 * i, "irrelevant", fingerprint="idx-B") for i in range(30)]
    cal = calibrate(calls + other, [], model=_model(), cos_threshold=0.82, fingerprint=FP, fingerprint_key="idx-A")
    alone = calibrate(calls, [], model=_model(), cos_threshold=0.82, fingerprint=FP, fingerprint_key="idx-A")
    assert cal.kept_apart.to_json() == {"calls": 30, "labelled": 30, "fingerprints": ["idx-B"]}
    assert any("another index" in w and "left out" in w for w in cal.warning_lines())
    assert cal.labelled == alone.labelled and cal.window.calls == len(calls)
    assert cal.recommendation.threshold_move.to == alone.recommendation.threshold_move.to



def test_how_many_more_labels_would_decide_by_hand():
    from tuner.gate.threshold import labels_to_decide
    # 9 of 10 labelled flips right, 3 flipped calls unlabelled (counted against): not decided at alpha 0.025
    share = 11 / 21
    assert binomial_tail(9, 13, share) > 0.025
    d = labels_to_decide(9, 1, 3, share)
    assert d.more is not None and d.more >= 1 and d.win_share == pytest.approx(0.9)
    # with that many more labels split 9:1 the covered test passes, with one fewer it does not
    def passes(k):
        return binomial_tail(math.floor(9 + 0.9 * k + 1e-9), 10 + max(3, k), share) <= 0.025
    assert passes(d.more) and not passes(d.more - 1)
    assert labels_to_decide(9, 1, 0, share).more == 0                    # the labels decide already
    flat = labels_to_decide(5, 5, 2, 0.5)                                # a break-even split: no number would
    assert flat.more is None and "no number of labels would" in flat.text
    assert labels_to_decide(0, 0, 4, 0.5).more is None                   # nothing labelled between the cuts



def test_a_move_with_no_logged_call_between_the_cuts_does_not_send_the_user_to_suggest():
    """Every logged call far from both cuts (a week where P was above 0.95 or below 0.3): `recall-log suggest`
    has no call between them to pick, so the advice names that, not a list that cannot help."""
    from tuner.gate.threshold import ThresholdDecision, labels_to_decide_for
    for rule in ("labelled-sign-test", "covered-sign-test"):
        dec = ThresholdDecision(rule, 0.655, 0.551, (0.542, 0.599), False, 0, 0, 0.8, 1.0, "no flips")
        none = labels_to_decide_for(dec, 0)
        assert none.more is None and "no logged call lies between the two cuts (0.551 and 0.655)" in none.text
        assert "label the calls" not in none.text
        some = labels_to_decide_for(dataclasses.replace(dec, losses=3 if rule.startswith("covered") else 0), 3)
        assert "label the calls `recall-log suggest` picks near them" in some.text

def _vault_half_labelled(boundary=0.3, n=120, seed=0):
    """Calls whose P is uniform on (0.02, 0.98); half of those with P in [0.15, 0.75] are labelled (the vault
    answers those above `boundary`), so a move to the boundary flips as many unlabelled calls as labelled ones."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        p = float(rng.uniform(0.02, 0.98))
        lab = ("relevant" if p >= boundary else "irrelevant") if 0.15 <= p <= 0.75 and rng.random() < 0.5 else None
        out.append(_call(i + 1, p, lab))
    return out


def test_a_declined_move_says_how_many_more_labels_would_decide_it():
    calls = _vault_half_labelled()
    cal = calibrate(calls, [], model=_model(), cos_threshold=0.82, fingerprint=FP, fingerprint_key="idx-A",
                    threshold_rule="covered-sign-test")
    mv = cal.recommendation.threshold_move
    more = mv.labels_to_decide.more
    assert mv.kept and isinstance(more, int) and 0 < more <= mv.labels_to_decide.unlabelled
    assert f"about {more} more labels" in cal.recommendation.declined.text()
    assert any(f"about {more} more labels" in w for w in cal.warning_lines())
    from tuner.reports.calibration import calibration_report
    from tuner.reports.render import to_markdown
    verdict = [line for line in to_markdown(calibration_report(cal, "idx.sqlite", None)).splitlines()
               if "keep the gate's threshold" in line]
    assert verdict and f"about {more} more labels" in verdict[0]         # the weekly report's verdict says it
    # label that many of the unlabelled calls between the cuts (nearest the current cut first) and the move is made
    def p_of(c):
        return 1 / (1 + math.exp(-c.features["top_cos"]))
    between = sorted((c for c in calls if c.label is None and mv.to <= p_of(c) < 0.64), key=p_of, reverse=True)
    picked = {c.id for c in between[:more]}
    relabelled = [dataclasses.replace(c, label="relevant" if p_of(c) >= 0.3 else "irrelevant") if c.id in picked else c
                  for c in calls]
    again = calibrate(relabelled, [], model=_model(), cos_threshold=0.82, fingerprint=FP, fingerprint_key="idx-A",
                      threshold_rule="covered-sign-test")
    assert again.recommendation.model_summary.method == "threshold"


def test_the_labelled_sign_test_by_hand():
    from tuner.gate.threshold import traffic_share
    # the current cut 0.6; the labels say the vault answers down to 0.3: lowering flips the labelled calls in
    # [0.3, 0.6), all answerable
    p = [0.05, 0.1, 0.15, 0.2, 0.25, 0.32, 0.36, 0.4, 0.45, 0.5, 0.55, 0.58, 0.65, 0.7, 0.8, 0.9]
    y = [0] * 5 + [1] * 11
    traffic = p + [0.03, 0.12, 0.33, 0.42, 0.52, 0.75, 0.85, 0.95]
    d = decide_threshold(p, y, 0.6, rule="labelled-sign-test", traffic=traffic)
    share = traffic_share(p, y, traffic)
    assert (d.wins, d.losses) == (7, 0) and d.null_share == pytest.approx(share)
    assert d.p_value == pytest.approx(binomial_tail(7, 7, share)) and d.move == (d.p_value <= 0.05)
    # the cut is shrunk into the gap between the last labelled call it flips (0.32) and the next one below
    # (0.25): halfway on the logit scale, whatever the bagged cut is
    z = (math.log(0.32 / 0.68) + math.log(0.25 / 0.75)) / 2
    assert d.proposed == pytest.approx(1 / (1 + math.exp(-z)))
    # calls nobody labelled are no evidence: the same labels beside 30 unlabelled calls between the cuts decide
    # the same (the covered rule counts them against the move)
    d2 = decide_threshold(p, y, 0.6, rule="labelled-sign-test", traffic=traffic, unlabelled=[0.4] * 30)
    assert (d2.wins, d2.losses, d2.move, d2.proposed) == (d.wins, d.losses, d.move, d.proposed)
    covered = decide_threshold(p, y, 0.6, rule="covered-sign-test", unlabelled=[0.4] * 30)
    assert not covered.move
    # one probe among the flipped calls: a loss
    y3 = list(y)
    y3[p.index(0.45)] = 0
    d3 = decide_threshold(p, y3, 0.6, rule="labelled-sign-test", traffic=traffic)
    assert d3.losses == 1 and d3.p_value > d.p_value


def test_the_traffic_share_is_the_calls_not_the_labels():
    from tuner.gate.threshold import traffic_share
    # labels picked near the cut (half of each kind) from traffic where most calls score high: the answerable
    # share of the traffic is far above the labels' one half
    rng = np.random.default_rng(0)
    traffic = np.concatenate([rng.uniform(0.7, 0.99, 300), rng.uniform(0.01, 0.3, 100)])
    p = np.concatenate([rng.uniform(0.35, 0.5, 20), rng.uniform(0.5, 0.65, 20)])
    y = (p >= 0.5).astype(int)
    assert 0.65 < traffic_share(p, y, traffic) <= 0.8


def test_labels_where_the_current_cut_is_right_rarely_move_it():
    # the vault answers exactly the calls at or above the current cut (20 % label noise), labels drawn near it
    # as `suggest` draws them: over 40 weeks the rule moves in at most 2 (its alpha is 0.05; at 0.3 it moves in 5)
    moved = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        calls = []
        for i in range(75):
            p = float(rng.uniform(0.02, 0.98))
            lab = None
            if abs(p - 0.64) < 0.25 and rng.random() < 0.8:
                lab = "relevant" if (p >= 0.64) != (rng.random() < 0.2) else "irrelevant"
            calls.append(dataclasses.replace(_call(i + 1, p, lab), query=f"q{seed}-{i}-{rng.integers(1e9)}"))
        rec = calibrate(calls, [], model=_model(), cos_threshold=0.82, fingerprint=FP).recommendation
        moved += rec.model_summary.method != "keep"
    assert moved <= 2


def test_a_declined_move_says_how_many_more_labels_would_decide_it_and_whether_the_window_holds_them():
    # four labelled calls between the cuts, all answerable: not enough at a break-even share near 2/3
    calls = [_call(i + 1, p, lab) for i, (p, lab) in enumerate(
        [(0.05, "irrelevant"), (0.1, "irrelevant"), (0.2, "irrelevant"), (0.25, "irrelevant"),
         (0.4, "relevant"), (0.45, "relevant"), (0.5, "relevant"), (0.55, "relevant"),
         (0.7, "relevant"), (0.8, "relevant"), (0.85, "relevant"), (0.9, "relevant"), (0.95, "relevant"),
         (0.75, None), (0.9, None), (0.97, None), (0.6, None)])]
    calls = [dataclasses.replace(c, query=f"질문 {chr(0xAC00 + 37 * c.id)}{c.id * 7919}") for c in calls]
    cal = calibrate(calls, [], model=_model(), cos_threshold=0.82, fingerprint=FP)
    mv = cal.recommendation.threshold_move
    st, more = mv.sign_test, mv.labels_to_decide
    assert mv.kept and (st.wins, st.losses) == (4, 0) and st.p_value > st.level
    assert isinstance(more.more, int) and more.more >= 1 and more.unlabelled == 1
    # the estimate is the rule's own: that many more wins pass its test at its level, one fewer does not (the
    # record rounds the break-even share to 4 digits, hence the 1 % either way)
    assert binomial_tail(4 + more.more, 4 + more.more, st.null_share) <= st.level * 1.01
    assert binomial_tail(3 + more.more, 3 + more.more, st.null_share) > st.level * 0.99
    assert more.of_kind == more.more and "labelled relevant (answerable)" in more.text
    assert "this window holds 1 unlabelled call between them" in more.text or more.more <= 1
    assert f"about {more.more} more labels" in cal.recommendation.declined.text()
    from tuner.reports.calibration import calibration_report
    from tuner.reports.render import to_markdown
    verdict = [line for line in to_markdown(calibration_report(cal, "idx.sqlite", None)).splitlines()
               if "keep the gate's threshold" in line]
    assert verdict and more.text in verdict[0]                        # the weekly report's verdict says it


def test_a_label_on_a_call_that_timed_out_is_skipped_and_counted():
    # It made calibrate die: the call has no cosine, None became NaN, and AUROC raised "Input contains NaN".
    calls = [cosine_call(i, 0.70 + 0.01 * i, "relevant" if i % 2 else "irrelevant") for i in range(1, 7)]
    calls.append(cosine_call(7, 0.0, "relevant", error="timeout: the search took longer than 2.0 s"))
    cal = calibrate(calls, [], model=None, cos_threshold=0.82, fingerprint=FP, fingerprint_key="idx-A")
    assert cal.skipped_labels.to_json() == {"no_search": 1, "ids": [7]}
    assert any("1 labelled call(s) have no search" in w for w in cal.warning_lines())
    assert cal.labelled.answerable == 3 and cal.labelled.probes == 3
    assert math.isfinite(cal.recommendation.cosine.threshold)
    assert cal.window.calls == 7                  # the call stays in the traffic


def test_the_sign_test_holds_over_a_week_of_100000_calls():
    # calibrate over a 100,000-call week died in the sign test: math.comb(n, i) * p ** i overflowed a float
    from fractions import Fraction

    from search_core.gate.threshold import binomial_tail
    n = 2000
    for k in (1000, 1050, 1200):                     # p = 1/2: the exact tail is a ratio of integers
        exact = float(Fraction(sum(math.comb(n, i) for i in range(k, n + 1)), 2 ** n))
        assert binomial_tail(k, n, 0.5) == pytest.approx(exact, rel=1e-9)
    assert binomial_tail(3, 4, 0.5) == 5 / 16                               # a few labels: summed as before
    p = binomial_tail(30_500, 100_000, 0.3)
    assert 0.0 < p < 0.001 and binomial_tail(29_000, 100_000, 0.3) > 0.99


def test_the_scan_sign_test_bands_by_hand():
    from tuner.gate.threshold import scan_bands
    # current cut 0.6, break-even share 0.5: below it 0.5, 0.4, 0.3 answerable and 0.2 a probe; above it 0.7 a probe
    # and 0.8 answerable. A band is the k labelled calls nearest the cut on one side; a win is a call the move decides
    # right (answerable going down, probe going up)
    p = [0.2, 0.3, 0.4, 0.5, 0.7, 0.8]
    y = [0, 1, 1, 1, 0, 1]
    bands = scan_bands(p, y, 0.6, 0.5)
    down = [(b.size, b.wins, b.p_value) for b in bands if b.down]
    up = [(b.size, b.wins, b.p_value) for b in bands if not b.down]
    assert down == [(1, 1, 0.5), (2, 2, 0.25), (3, 3, 0.125), (4, 3, pytest.approx(5 / 16))]
    assert up == [(1, 1, 0.5), (2, 1, 0.75)]
    # each cut sits halfway (on the logit scale) between the band's last call and the next labelled one beyond
    def mid(a, b):
        z = (math.log(a / (1 - a)) + math.log(b / (1 - b))) / 2
        return 1 / (1 + math.exp(-z))
    cuts = [b.cut for b in bands]
    assert cuts[:3] == [pytest.approx(mid(0.5, 0.4)), pytest.approx(mid(0.4, 0.3)), pytest.approx(mid(0.3, 0.2))]
    assert cuts[3] == pytest.approx(0.2) and cuts[4] == pytest.approx(mid(0.7, 0.8)) and cuts[5] > 0.8
    # two calls of the same P cannot be parted by a cut: no band ends between them
    assert [b.size for b in scan_bands([0.4, 0.4, 0.3], [1, 1, 0], 0.6, 0.5)] == [2, 3]


def test_the_scan_level_holds_a_false_move_to_alpha_exactly_enumerated():
    """The per-band level from the simulation, checked against every labelling of a small week: with every
    labelled call decided right by a move at break-even (a cut that is already the best), the chance that some
    band passes is at most alpha (up to the simulation's error), and the next attainable p-value would break it."""
    import itertools
    from tuner.gate.threshold import scan_bands, scan_level
    share, alpha = 0.6, 0.10
    p = [0.30, 0.40, 0.45, 0.50, 0.55, 0.62, 0.66, 0.70, 0.80]          # six below the cut 0.6, three above
    level = scan_level(6, 3, share, alpha)
    chance, smallest = 0.0, []
    for y in itertools.product((0, 1), repeat=len(p)):
        prob = math.prod((share if yi else 1 - share) for yi in y)
        m = min(b.p_value for b in scan_bands(p, y, 0.6, share))
        smallest.append((m, prob))
        chance += prob * (m <= level)
    assert chance <= alpha + 0.01
    above = min(m for m, _ in smallest if m > level)                     # one step more lenient breaks the bound
    assert sum(prob for m, prob in smallest if m <= above) > alpha


def test_the_scan_sign_test_moves_when_the_labels_show_the_cut_is_off_and_stays_when_they_do_not():
    from tuner.gate.threshold import scan_level, scan_sign_test
    share = 0.5
    # eight labelled calls just under the cut, all answerable; two probes further down; four above, answerable
    p = [0.10, 0.15, 0.30, 0.33, 0.36, 0.40, 0.44, 0.48, 0.52, 0.56, 0.70, 0.75, 0.80, 0.90]
    y = [0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    d = scan_sign_test("scan-sign-test", p, y, 0.6, share, (0.2, 0.4), 0.10)
    level = scan_level(10, 4, share, 0.10)
    assert d.alpha == pytest.approx(level)
    # the band of the eight answerable calls: p = 0.5 ** 8, under the level; the gate moves into the gap below 0.30
    assert (d.wins, d.losses) == (8, 0) and d.p_value == pytest.approx(0.5 ** 8) and d.move
    z = (math.log(0.30 / 0.70) + math.log(0.15 / 0.85)) / 2
    assert d.proposed == pytest.approx(1 / (1 + math.exp(-z)))
    # the same calls split at break-even under the cut (answerable, probe, ...): no band passes, the cut stays
    y_flat = [0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 1, 1]
    flat = scan_sign_test("scan-sign-test", p, y_flat, 0.6, share, (0.2, 0.4), 0.10)
    assert not flat.move and flat.threshold == 0.6
    # three answerable calls under the cut are not enough at break-even 0.5 (p = 0.125, over any level under 0.1)
    y_few = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1]
    few = scan_sign_test("scan-sign-test", p, y_few, 0.6, share, (0.2, 0.4), 0.10)
    assert not few.move and (few.wins, few.losses) == (3, 0) and few.proposed < 0.6


def test_how_many_more_labels_the_scan_needs_and_of_which_kind_by_hand():
    from tuner.gate.threshold import ThresholdDecision, labels_to_decide_for
    # four labelled calls a move down flips, all answerable, break-even 0.5, level 0.02: 0.5 ** 4 = 0.0625 is over
    # it; k more answerable ones pass when 0.5 ** (4 + k) <= 0.02, i.e. k = 2 (0.0156), and k = 1 (0.031) does not
    dec = ThresholdDecision("scan-sign-test", 0.6, 0.45, (0.4, 0.5), False, 4, 0, 0.5, 0.0625, "why", 0.02)
    d = labels_to_decide_for(dec, 5)
    assert d.more == 2 and d.of_kind == 2
    assert "calls the gate now stops with P from 0.450 to 0.600, at least 2 of them labelled relevant" in d.text
    # going up, the kind is probes; 6 of 8 flipped calls are probes at break-even 1 - 0.7 = 0.3, level 0.05
    up = ThresholdDecision("scan-sign-test", 0.6, 0.7, (0.6, 0.8), False, 6, 2, 0.3, binomial_tail(6, 8, 0.3),
                           "why", 0.001)
    u = labels_to_decide_for(up, 0)
    k = u.more
    assert binomial_tail(math.floor(6 + 0.75 * k + 1e-9), 8 + k, 0.3) <= 0.001
    assert binomial_tail(math.floor(6 + 0.75 * (k - 1) + 1e-9), 8 + k - 1, 0.3) > 0.001
    assert u.of_kind == math.floor(6 + 0.75 * k + 1e-9) - 6 and "labelled irrelevant (probes)" in u.text
    # split no better than break-even: no number of labels would decide it
    flat = ThresholdDecision("scan-sign-test", 0.6, 0.45, (0.4, 0.5), False, 2, 2, 0.5, 0.69, "why", 0.02)
    assert labels_to_decide_for(flat, 3).more is None


def test_labels_that_agree_with_the_cut_say_so_instead_of_asking_for_more():
    from tuner.gate.threshold import labels_to_decide_for, scan_sign_test
    # every labelled call under the cut a probe, every one above it answerable: no move has a win to show
    p = [0.2, 0.3, 0.4, 0.5, 0.7, 0.8, 0.9]
    y = [0, 0, 0, 0, 1, 1, 1]
    d = scan_sign_test("scan-sign-test", p, y, 0.6, 0.5, (0.55, 0.65), 0.10)
    assert not d.move and d.proposed == 0.6
    more = labels_to_decide_for(d, 4)
    assert more.more is None and "the labels point nowhere else" in more.text
