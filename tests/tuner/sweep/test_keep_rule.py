"""The keep rule's hit@5 guards (a non-inferiority test by default; the count and the per-question veto by
flag), the gate judged in its own unit, and a ranking gain kept only when it is beyond noise."""

import dataclasses

from tests.helpers.ranked import ranked
from tuner.evaluation.evaluate import EvalResult
from tuner.sweep.keep_rule import Rule, decide, questions_hit


def rows(n_hit, n, level="L1"):
    return [{"id": f"q{i}", "level": level, "hit@5": float(i < n_hit)} for i in range(n)]


def result(n_hit, n, *, score=70.0, gate=0.8):
    # the overall rate is rounded to 4 decimals, as evaluate() stores it
    return EvalResult.from_ledger({"overall": {"n": n, "hit@5": round(n_hit / n, 4), "mrr": 0.5, "ndcg@10": 0.5},
                                   "score100": {"quality": 0.0, "speed": 0.0, "total": score, "passed": False},
                                   "gate": {"gate_accuracy": gate},
                                   "latency_ms": {"p95": 30.0}, "per_query": rows(n_hit, n)})


def test_one_lost_question_in_25000_is_a_regression_under_the_count_guard():
    base, cand = result(20_000, 25_000), result(19_999, 25_000, score=71.0)
    assert base.overall["hit@5"] == cand.overall["hit@5"] == 0.8      # the rounded rates agree
    assert questions_hit(base) == (20_000, 25_000) and questions_hit(cand) == (19_999, 25_000)
    d = decide(base, cand, Rule(hit5_guard="count"))[0]
    assert d.decision == "rejected:hit5_regressed" and "(1 question(s) lost)" in d.reason
    # the test: one question lost of 25,000 bounds the true drop far below 2 points
    d = decide(base, cand, Rule())[0]
    assert d.decision == "kept" and "1 out, 0 in" in d.reason, d.reason


def test_a_gate_round_uses_the_gate_epsilon_not_the_score_epsilon():
    base, cand = result(8, 10, gate=0.80), result(8, 10, gate=0.85)
    # --epsilon 0.5 is half a score point; in accuracy it would ask for +50 points and never keep
    d = decide(base, cand, Rule(epsilon=0.5, gate_measure="accuracy"), objective="gate_accuracy")[0]
    assert d.decision == "kept", d.reason
    d = decide(base, cand, Rule(epsilon=0.5, gate_epsilon=0.05, gate_measure="accuracy"), objective="gate_accuracy")[0]
    assert d.decision == "rejected:no_gain" and "needs > +0.05" in d.reason


def test_a_swap_in_the_top_5_is_a_lost_question_under_the_question_guard():
    base = ranked([1, 5, None, 2])
    swap = ranked([1, None, 4, 1], score=71.0)          # q01 leaves the top 5, q02 comes in: the count holds
    assert questions_hit(base) == questions_hit(swap) == (3, 4)
    assert decide(base, swap, Rule(hit5_guard="count"))[0].decision == "kept"    # counting alone lets it through
    d = decide(base, swap, Rule(hit5_guard="question"))[0]
    assert d.decision == "rejected:hit5_regressed"
    assert "1 question(s) left the top 5 as 1 came in" in d.reason, d.reason
    gained = ranked([1, 5, 4, 1], score=71.0)            # nobody leaves: kept
    assert decide(base, gained, Rule(hit5_guard="question"))[0].decision == "kept"


def test_a_gain_from_one_question_is_within_noise():
    base = ranked([2] * 24)
    one = ranked([1] + [2] * 23, score=70.4)             # one question from rank 2 to rank 1
    assert decide(base, one, Rule())[0].decision == "kept"
    d = decide(base, one, Rule(noise_alpha=0.05))[0]
    assert d.decision == "rejected:no_gain" and "within noise: 1 question(s) moved (1 up, 0 down)" in d.reason, d.reason
    many = ranked([1] * 10 + [2] * 14, score=73.0)      # ten up, none down: beyond noise
    d = decide(base, many, Rule(noise_alpha=0.05))[0]
    assert d.decision == "kept" and "10 question(s) up, 0 down" in d.reason, d.reason
    mixed = ranked([1] * 6 + [4] * 6 + [2] * 12, score=71.0)     # the mean rose, as many went down
    d = decide(base, mixed, Rule(noise_alpha=0.05))[0]
    assert d.decision == "rejected:no_gain" and "(6 up, 6 down)" in d.reason, d.reason
    faster = ranked([2] * 24, score=72.0)                 # the same ranking, a faster config
    assert decide(base, faster, Rule(noise_alpha=0.05))[0].decision == "kept"


def test_a_sweep_replays_under_the_rule_its_params_recorded():
    from tuner.sweep.loop import SweepParams
    now = SweepParams(db="x", gold="g", space="s")
    assert (now.rule().hit5_guard, now.rule().hit5_margin, now.rule().noise_alpha) == ("noninferior", 2.0, 0.05)
    old = SweepParams.from_record({"db": "x", "gold": "g", "space": "s", "epsilon": 0.0})
    assert (old.rule().hit5_guard, old.rule().noise_alpha) == ("count", None)
    veto = SweepParams.from_record({"db": "x", "gold": "g", "space": "s", "question_guard": True, "noise_alpha": 0.05})
    assert (veto.rule().hit5_guard, veto.rule().noise_alpha) == ("question", 0.05)
    count = SweepParams.from_record({"db": "x", "gold": "g", "space": "s", "question_guard": False})
    assert count.rule().hit5_guard == "count"
    again = SweepParams.from_record(dataclasses.asdict(now))
    assert again.rule() == now.rule()
    # threshold rounds: balanced over the person's questions now; a record without the key judged every question
    assert (now.rule().gate_measure, old.rule().gate_measure, again.rule().gate_measure) == ("balanced", "accuracy",
                                                                                             "balanced")
    # the move to the shipped default: rejected only when shown lower now; a record without the key ran the rule's
    # own hit@5 guard before it, and replays so (one out and four in of 30: the bound 2.8 is over the margin)
    before = SweepParams.from_record({"db": "x", "gold": "g", "space": "s", "hit5_guard": "noninferior",
                                      "noise_alpha": 0.05, "default_round": True})
    assert (now.rule().prior_hit5, before.rule().prior_hit5, again.rule().prior_hit5) == ("shown_worse", "guard",
                                                                                          "shown_worse")
    start, moved = ranked([None] * 4 + [2] * 26), ranked([1] * 4 + [None] + [2] * 25, score=72.0)
    assert decide(start, moved, now.rule(), prior=True)[0].decision == "kept"
    assert decide(start, moved, before.rule(), prior=True)[0].decision == "rejected:hit5_regressed"


def test_the_shipped_default_is_kept_unless_shown_worse():
    """`prior` reverses the burden: a gain within noise keeps the shipped default where any other round is rejected;
    a loss within noise keeps it too; a loss beyond noise, or the same ranks at a lower objective, rejects it."""
    base = ranked([2] * 24)
    one_up = ranked([1] + [2] * 23, score=70.4)
    assert decide(base, one_up, Rule(noise_alpha=0.05))[0].decision == "rejected:no_gain"
    d = decide(base, one_up, Rule(noise_alpha=0.05), prior=True)[0]
    assert d.decision == "kept" and d.reason.startswith("the shipped default, not shown worse here"), d.reason
    one_down = ranked([3] + [2] * 23, score=69.8)        # one question from rank 2 to 3: within noise
    d = decide(base, one_down, Rule(noise_alpha=0.05), prior=True)[0]
    assert d.decision == "kept" and "1 question(s) moved (0 up, 1 down)" in d.reason, d.reason
    # 12 of 24 from rank 2 to 3 (hit@5 holds): randomization p = 2 / 2**12, beyond noise
    half_down = ranked([3] * 12 + [2] * 12, score=66.0)
    d = decide(base, half_down, Rule(noise_alpha=0.05), prior=True)[0]
    assert d.decision == "rejected:no_gain" and d.reason.startswith("the shipped default is worse here beyond noise")
    half_up = ranked([1] * 12 + [2] * 12, score=74.0)     # a gain beyond noise keeps it, as any round, and says so
    d = decide(base, half_up, Rule(noise_alpha=0.05), prior=True)[0]
    assert d.decision == "kept" and d.reason.startswith("the shipped default, better here beyond noise"), d.reason
    # with the noise test off the harm test still runs, at 0.05
    assert decide(base, half_down, Rule(), prior=True)[0].decision == "rejected:no_gain"
    alike = ranked([2] * 24, score=69.0)                 # the same ranks, a lower score: latency alone
    d = decide(base, alike, Rule(noise_alpha=0.05), prior=True)[0]
    assert d.decision == "rejected:no_gain" and "ranks alike here and costs more" in d.reason
    # hit@5 carries the burden the other way too: rejected when shown lower. 6 of 24 out, none in: the score test
    # of no drop (McNemar's at a drop of 0) is 6 / sqrt(6) = 2.45 > z(0.95) = 1.645
    lost = ranked([None] * 6 + [2] * 18, score=75.0)
    d = decide(base, lost, Rule(noise_alpha=0.05), prior=True)[0]
    assert d.decision == "rejected:hit5_regressed" and d.reason.startswith("the shipped default lowers hit@5"), d.reason
    # 3 out, none in: 3 / sqrt(3) = 1.73 > 1.645, shown lower; 2 out: 2 / sqrt(2) = 1.41, not shown (and two of 24
    # questions down is within the paired test's noise: kept)
    assert decide(base, ranked([None] * 3 + [2] * 21, score=70.0), Rule(noise_alpha=0.05),
                  prior=True)[0].decision == "rejected:hit5_regressed"
    d = decide(base, ranked([None] * 2 + [2] * 22, score=70.0), Rule(noise_alpha=0.05), prior=True)[0]
    assert d.decision == "kept" and "hit@5: 2 question(s) out of the top 5, 0 in, of 24, not shown lower" in d.reason
    # one out and four in of 30 (sysmae's hand-written questions on the round): the bound of the drop, 2.8 points,
    # is over the 2-point margin, so an ordinary round is rejected, but nothing shows the default lower: kept
    start = ranked([None] * 4 + [2] * 26)
    moved = ranked([1] * 4 + [None] + [2] * 25, score=72.0)
    assert decide(start, moved, Rule(noise_alpha=0.05))[0].decision == "rejected:hit5_regressed"
    d = decide(start, moved, Rule(noise_alpha=0.05), prior=True)[0]
    assert d.decision == "kept" and "1 question(s) out of the top 5, 4 in, of 30" in d.reason, d.reason


def gated(hand_in, hand, probes_held, probes, made_in=0, made=0):
    """A threshold round's evaluation: `hand` hand-written answerable questions (the first `hand_in` injected),
    `probes` probes (the first `probes_held` held back), `made` questions from the vault's text (`made_in`
    injected). The ids are fixed, so a second call with other counts is the same questions decided otherwise."""
    rows = ([{"id": f"h{i}", "level": "L1", "hit@5": 1.0, "inject": i < hand_in} for i in range(hand)]
            + [{"id": f"p{i}", "level": "probe", "hit@5": 0.0, "inject": i >= probes_held} for i in range(probes)]
            + [{"id": f"v{i}", "level": "L0", "hit@5": 1.0, "inject": i < made_in, "source": "vault"}
               for i in range(made)])
    n = hand + made
    return EvalResult.from_ledger({"overall": {"n": n, "hit@5": 1.0, "mrr": 1.0, "ndcg@10": 1.0},
                                   "score100": {"quality": 0.0, "speed": 0.0, "total": 90.0, "passed": False},
                                   "gate": {"gate_accuracy": round((hand_in + made_in + probes_held) / (n + probes), 4)},
                                   "latency_ms": {"p95": 30.0}, "per_query": rows})


def test_questions_made_from_the_vault_do_not_decide_a_threshold_round():
    """The demo's night: 600 made questions, all answerable, none a probe. Lowering the cut lets 300 of them
    through and 4 probes too: every question's decision says better (0.52 -> 0.98); the person's questions
    say worse (balanced 0.708 -> 0.583: 2 more answered, 4 more probes injected)."""
    base = gated(18, 24, 8, 12, made_in=300, made=600)
    lower = gated(20, 24, 4, 12, made_in=600, made=600)
    d = decide(base, lower, Rule(gate_measure="accuracy", noise_alpha=0.05), objective="gate_accuracy")[0]
    assert d.decision == "kept", d.reason
    d, b_obj, c_obj = decide(base, lower, Rule(noise_alpha=0.05), objective="gate_accuracy")
    assert (b_obj, c_obj) == (round((18 / 24 + 8 / 12) / 2, 4), round((20 / 24 + 4 / 12) / 2, 4))
    assert d.decision == "rejected:no_gain" and "gate_balanced 0.7083 -> 0.5833" in d.reason, d.reason


def test_a_threshold_move_is_kept_only_when_the_decisions_it_flips_are_beyond_noise():
    """Of the 36 labelled rows (24 answerable: the break-even share 2/3), a lower cut that lets 2 more answerable
    questions through and no probe: p = (2/3)^2 = 0.44, within noise. Ten: p = (2/3)^10 = 0.017, kept. Without
    the noise test (noise_alpha None) any rise is kept, as before."""
    base = gated(12, 24, 10, 12)
    two, ten = gated(14, 24, 10, 12), gated(22, 24, 10, 12)
    d = decide(base, two, Rule(noise_alpha=0.05), objective="gate_accuracy")[0]
    assert d.decision == "rejected:no_gain", d.reason
    assert "2 decision(s) flip: 2 right, 0 wrong (sign test against break-even share 0.67: p = 0.4444)" in d.reason
    # what would decide it: (2/3)^7 = 0.059, (2/3)^8 = 0.039 < 0.05
    assert d.reason.endswith("(needs p < 0.05: at least 8 flips, all right)"), d.reason
    d = decide(base, ten, Rule(noise_alpha=0.05), objective="gate_accuracy")[0]
    assert d.decision == "kept" and "p = 0.0173" in d.reason, d.reason
    assert decide(base, two, Rule(noise_alpha=None), objective="gate_accuracy")[0].decision == "kept"
    # a higher cut that holds 2 answerable questions back for 1 probe: balanced falls, rejected before any test
    d = decide(base, gated(10, 24, 11, 12), Rule(noise_alpha=0.05), objective="gate_accuracy")[0]
    assert d.decision == "rejected:no_gain" and "needs > +0" in d.reason, d.reason


def test_without_hand_written_probes_every_question_is_read():
    """A set whose probes are all made (or whose person wrote no answerable question) has no trusted pair of
    classes: the round reads every question, balanced."""
    from tuner.sweep.keep_rule import balanced_gate_accuracy, gate_rows
    made_only = gated(0, 0, 3, 4, made_in=6, made=8)
    assert len(gate_rows(made_only.per_query)) == 12
    assert balanced_gate_accuracy(gate_rows(made_only.per_query)) == round((6 / 8 + 3 / 4) / 2, 4)
    mixed = gated(5, 6, 3, 4, made_in=1, made=8)
    assert {q.source for q in gate_rows(mixed.per_query)} == {"hand"}
    assert balanced_gate_accuracy([q for q in mixed.per_query if q.level != "probe"]) is None


def test_the_flips_a_threshold_move_needs_by_hand():
    from tuner.sweep.keep_rule import GateFlips
    assert GateFlips(36, 0, 0, 2 / 3, 1.0).flips_needed(0.05) == 8        # (2/3)^7 = 0.059, (2/3)^8 = 0.039
    assert GateFlips(36, 0, 0, 0.5, 1.0).flips_needed(0.25) == 3          # 0.5^2 = 0.25 is not below 0.25
    assert GateFlips(36, 0, 0, 0.2, 1.0).flips_needed(0.05) == 2          # 0.2^2 = 0.04
