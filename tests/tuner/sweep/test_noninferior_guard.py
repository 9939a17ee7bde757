"""The noninferior hit@5 guard, its score bound, and the power figures, on small hand-computed rows, and
against the per-question veto on a large set with a flat true effect."""

import math

import pytest

from tests.helpers.ranked import ranked
from tuner.evaluation.evaluate import EvalResult
from tuner.evaluation.stats import normal_quantile, paired_drop_score, paired_drop_upper_bound
from tuner.sweep.keep_rule import Rule, decide, hit5_evidence
from tuner.sweep.power import detectable_gain, guard_questions_needed, questions_needed

Z95 = 1.6448536269514722      # z[0.95]


# -- the score statistic and its bound, by hand ------------------------------------------------------------

def test_the_score_statistic_by_hand():
    # 10 of 100 questions lost, none gained, H0 drop = 0.02: A = 200, B = -10 + 190 * 0.02 = -6.2, C = 0,
    # so the restricted p_gained = 6.2 / 200 = 0.031; variance 100 * (0.062 + 0.02 * 0.98) = 8.16;
    # Z = (10 - 0 - 2) / sqrt(8.16)
    assert paired_drop_score(10, 0, 100, 0.02) == pytest.approx(8 / math.sqrt(8.16), abs=1e-12)
    # 2 lost, 2 gained of 50, H0 drop 0: B = -4, C = 0, p_gained = 4/200 = 0.02, Z = 0 / ... = 0
    assert paired_drop_score(2, 2, 50, 0.0) == 0.0
    # nothing crossed the border, H0 drop = d: p_gained = 0, Z = -n d / sqrt(n d (1 - d)) = -sqrt(n d / (1 - d))
    assert paired_drop_score(0, 0, 20, 0.1) == pytest.approx(-math.sqrt(20 * 0.1 / 0.9), abs=1e-12)
    with pytest.raises(ValueError, match="at least one question"):
        paired_drop_score(0, 0, 0, 0.02)


def test_the_upper_bound_by_hand():
    assert normal_quantile(0.95) == pytest.approx(Z95, abs=1e-12)
    # no question crossed: the bound solves n d / (1 - d) = z^2, d = z^2 / (n + z^2): 11.9 points at 20, 0.27 at 1,000
    for n in (20, 1000):
        assert paired_drop_upper_bound(0, 0, n) == pytest.approx(Z95 ** 2 / (n + Z95 ** 2), abs=1e-9)
    assert paired_drop_upper_bound(20, 0, 20) == 1.0                     # every question lost: nothing is ruled out
    # elsewhere the bound is where the statistic meets -z, and it is above the observed drop
    for lost, gained, n in ((3, 1, 20), (12, 20, 368), (30, 30, 1000), (45, 15, 1000)):
        ub = paired_drop_upper_bound(lost, gained, n)
        assert ub > (lost - gained) / n
        assert paired_drop_score(lost, gained, n, ub) == pytest.approx(-Z95, abs=1e-6)
    # a lower alpha asks for more: a wider bound
    assert paired_drop_upper_bound(30, 30, 1000, alpha=0.01) > paired_drop_upper_bound(30, 30, 1000)


# -- the guard in the keep rule ---------------------------------------------------------------------------

def test_on_tiny_rows_the_guard_names_its_numbers():
    base = ranked([1, 2, 3, 4, 5, 1, 2, 3, None, None])
    cand = ranked([1, 2, 3, 4, 6, 7, 3, 1, None, 2], score=75.0)         # q04, q05 out; q09 in
    ev = hit5_evidence(base, cand)
    assert (ev.n, ev.lost, ev.gained) == (10, 2, 1)
    assert ev.drop_bound == pytest.approx(100 * paired_drop_upper_bound(2, 1, 10), abs=1e-9)
    d = decide(base, cand, Rule())[0]
    assert d.decision == "rejected:hit5_regressed"
    assert d.reason.startswith(f"hit@5 may have regressed: 2 question(s) out of the top 5, 1 in, of 10; upper bound "
                               f"of the drop {ev.drop_bound:.1f} points >= margin 2 points"), d.reason
    # as many in as out, on 10 questions: no evidence of a drop, but no bound below 2 points either
    even = ranked([1, 2, 3, 4, 6, 1, 2, 3, 1, None], score=75.0)
    d = decide(base, even, Rule())[0]
    assert d.decision == "rejected:hit5_regressed"
    assert d.reason.startswith("hit@5 not shown to hold within the margin: 1 question(s) out of the top 5, 1 in"), d.reason
    assert "questions would rule it out" in d.reason
    # nobody left the top 5: nothing to test, judged on the objective
    assert decide(base, ranked([1, 1, 1, 1, 1, 1, 1, 1, None, None], score=75.0), Rule())[0].decision == "kept"


def flat(n, swapped, *, up):
    """n questions: the baseline ranks every one at 3; the candidate sends `swapped` out of the top 5 and
    brings `swapped` others in (a flat true effect on hit@5), and lifts `up` more from rank 3 to rank 1."""
    base = [3] * (n - swapped) + [None] * swapped
    cand = [None] * swapped + [1] * up + [3] * (n - 2 * swapped - up) + [2] * swapped
    return ranked(base), ranked(cand, score=75.0)


def test_on_1000_questions_the_veto_fires_on_a_flat_effect_and_the_test_keeps():
    base, cand = flat(1000, 20, up=100)
    rule = Rule(noise_alpha=0.05)
    veto = decide(base, cand, Rule(hit5_guard="question", noise_alpha=0.05))[0]
    assert veto.decision == "rejected:hit5_regressed" and "20 question(s) left the top 5 as 20 came in" in veto.reason
    d = decide(base, cand, rule)[0]
    assert d.decision == "kept", d.reason
    assert "hit@5 guard: 20 out, 20 in, upper bound of the drop 1.1 points < margin 2" in d.reason, d.reason


def test_the_test_rejects_a_real_regression_at_every_size():
    # 1,000 questions: 60 out, 20 in is a 4-point drop; the objective rose, the guard holds
    lost = ranked([None] * 60 + [3] * 920 + [2] * 20, score=80.0)
    base = ranked([3] * 980 + [None] * 20)
    d = decide(base, lost, Rule(noise_alpha=0.05))[0]
    assert d.decision == "rejected:hit5_regressed" and d.reason.startswith(
        "hit@5 may have regressed: 60 question(s) out of the top 5, 20 in, of 1000"), d.reason
    assert "score100 rose 70.0000 -> 80.0000, but hit@5 is guarded" in d.reason
    # 20 questions: 3 out, none in
    d = decide(ranked([2] * 20), ranked([None] * 3 + [1] * 17, score=80.0), Rule(noise_alpha=0.05))[0]
    assert d.decision == "rejected:hit5_regressed" and "3 question(s) out of the top 5, 0 in, of 20" in d.reason


def test_an_unknown_guard_is_named():
    with pytest.raises(ValueError, match="unknown hit@5 guard 'veto'; guards: noninferior, count, question"):
        Rule(hit5_guard="veto")


# -- power ------------------------------------------------------------------------------------------------

def test_power_figures_by_hand():
    z = normal_quantile(0.975) + normal_quantile(0.8)         # 1.95996 + 0.84162 = 2.80158
    assert z == pytest.approx(2.801585, abs=1e-6)
    assert detectable_gain(100, 0.1) == pytest.approx(z * 0.1 / 10, abs=1e-12)
    assert detectable_gain(400, 0.1) == pytest.approx(detectable_gain(100, 0.1) / 2, abs=1e-12)   # 4x the questions: half
    assert questions_needed(0.01, 0.1) == math.ceil((z * 10) ** 2) == 785
    assert questions_needed(0.0, 0.1) is None and questions_needed(-0.01, 0.1) is None
    # the guard: 3 % out and 3 % in, margin 2 points: ((1.64485 + 0.84162) * sqrt(0.06) / 0.02)^2 = 927.4
    assert guard_questions_needed(0.03, 0.03, 2.0) == 928
    assert guard_questions_needed(0.05, 0.02, 2.0) is None            # a 3-point drop: never passes
    with pytest.raises(ValueError):
        detectable_gain(0, 0.1)


# -- evidence by kind ---------------------------------------------------------------------------------------

def with_sources(res: EvalResult, sources) -> EvalResult:
    import dataclasses
    return dataclasses.replace(res, per_query=[dataclasses.replace(q, source=s) for q, s in zip(res.per_query, sources)])


def test_the_guard_reads_hand_written_questions_and_the_vaults_count_for_the_gain():
    # 200 hand-written questions of which 3 leave the top 5; 1,000 vault questions that stay at rank 1
    hand_b, hand_c = [3] * 200, [None] * 3 + [3] * 197
    vault = [1] * 1000
    sources = ["hand"] * 200 + ["vault"] * 1000
    base = with_sources(ranked(hand_b + vault), sources)
    cand = with_sources(ranked(hand_c + vault, score=75.0), sources)
    ev = hit5_evidence(base, cand)
    assert (ev.n, ev.lost, ev.gained, ev.set_aside) == (200, 3, 0, 1000)
    assert ev.drop_bound == pytest.approx(100 * paired_drop_upper_bound(3, 0, 200), abs=1e-9)    # 3.7 points
    d = decide(base, cand, Rule())[0]
    assert d.decision == "rejected:hit5_regressed"
    assert "3 question(s) out of the top 5, 0 in, of 200 hand-written or labelled (1000 from the vault's text set aside)" \
        in d.reason, d.reason
    # pooled, the 1,000 unmoved questions would dilute the drop below the margin (0.6 points)
    assert 100 * paired_drop_upper_bound(3, 0, 1200) < 2.0
    # a set made only from the vault's text: the guard reads it all
    only_vault = ["vault"] * 1200
    ev = hit5_evidence(with_sources(ranked(hand_b + vault), only_vault), with_sources(ranked(hand_c + vault), only_vault))
    assert (ev.n, ev.set_aside) == (1200, 0)
    # the gain test reads every kind: 60 vault questions up from rank 2 to 1, hand-written ones unchanged
    base = with_sources(ranked([3] * 40 + [2] * 60), ["hand"] * 40 + ["vault"] * 60)
    cand = with_sources(ranked([3] * 40 + [1] * 60, score=75.0), ["hand"] * 40 + ["vault"] * 60)
    d = decide(base, cand, Rule(noise_alpha=0.05))[0]
    assert d.decision == "kept" and "60 question(s) up, 0 down" in d.reason, d.reason


def test_a_rounds_power_reads_its_own_per_question_changes():
    import statistics
    from tuner.evaluation.score import ScoreConfig
    from tuner.sweep.evidence import question_value
    from tuner.sweep.power import gain_power
    base = ranked([2] * 30 + [3] * 10)
    cand = ranked([1] * 6 + [2] * 24 + [4] * 2 + [3] * 8, score=71.0)
    w = ScoreConfig().quality_weights
    d = [question_value(c, "score100", w) - question_value(b, "score100", w) for b, c in zip(base.per_query, cand.per_query)]
    gp = gain_power(base, cand, "score100", w)
    assert gp.n == 40 and gp.gain == pytest.approx(sum(d) / 40) and gp.spread == pytest.approx(statistics.stdev(d))
    assert gp.detectable == pytest.approx(detectable_gain(40, statistics.stdev(d)))
    assert gp.needed == questions_needed(sum(d) / 40, statistics.stdev(d)) and gp.needed > 40
