"""The keep rule counts questions and judges the gate in its own unit."""

from tuner.evaluation.evaluate import EvalResult
from tuner.sweep.keep_rule import Rule, decide, questions_hit


def rows(n_hit, n, level="L1"):
    return [{"id": f"q{i}", "level": level, "hit@5": float(i < n_hit)} for i in range(n)]


def result(n_hit, n, *, score=70.0, gate=0.8):
    # the overall rate is rounded to 4 decimals, as evaluate() stores it
    return EvalResult.from_ledger({"overall": {"n": n, "hit@5": round(n_hit / n, 4), "mrr": 0.5, "ndcg@10": 0.5},
                                   "score100": {"total": score}, "gate": {"gate_accuracy": gate},
                                   "latency_ms": {"p95": 30.0}, "per_query": rows(n_hit, n)})


def test_one_lost_question_in_25000_is_a_regression():
    base, cand = result(20_000, 25_000), result(19_999, 25_000, score=71.0)
    assert base.overall["hit@5"] == cand.overall["hit@5"] == 0.8      # the rounded rates agree
    assert questions_hit(base) == (20_000, 25_000) and questions_hit(cand) == (19_999, 25_000)
    d = decide(base, cand, Rule())[0]
    assert d.decision == "rejected:hit5_regressed" and "(1 question(s) lost)" in d.reason


def test_a_gate_round_uses_the_gate_epsilon_not_the_score_epsilon():
    base, cand = result(8, 10, gate=0.80), result(8, 10, gate=0.85)
    # --epsilon 0.5 is half a score point; in accuracy it would ask for +50 points and never keep
    d = decide(base, cand, Rule(epsilon=0.5), objective="gate_accuracy")[0]
    assert d.decision == "kept", d.reason
    d = decide(base, cand, Rule(epsilon=0.5, gate_epsilon=0.05), objective="gate_accuracy")[0]
    assert d.decision == "rejected:no_gain" and "needs > +0.05" in d.reason
