"""The keep rule, as a pure function of two evaluations.

A candidate is kept only if hit@5 on the tuning set does not regress AND the objective improves by
more than epsilon. Optional guards: no level loses more than one question; p95 latency within a budget;
no question the baseline had in the top 5 leaves it (question_guard: a held count can hide a swap);
a gain that moves the ranking must be beyond noise (noise_alpha: tuner/sweep/evidence.py).
A candidate whose objective rises while hit@5 falls is rejected, and the reason says so.

The p95 both evaluations carry is the cost model's prediction (tuner/evaluation/cost_model.py), not a stopwatch's,
so the same two evaluations are decided alike on a quiet machine and a busy one.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.evaluation.evaluate import EvalResult
from tuner.evaluation.score import ScoreConfig
from tuner.ledger.schema import RoundDecision
from tuner.sweep.evidence import came_into_top5, left_top5, ranking_evidence

SWEEP_OBJECTIVES = ("score100", "mrr", "hit@5", "ndcg@10")      # what a sweep may maximise
OBJECTIVES = SWEEP_OBJECTIVES + ("gate_accuracy",)              # and what a threshold round is judged on

@dataclass(frozen=True)
class Rule:
    objective: str = "score100"
    epsilon: float = 0.0            # the objective must rise by MORE than this
    level_guard: bool = False       # no level may lose more than one question
    latency_budget_ms: float | None = None
    gate_epsilon: float = 0.0       # in gate accuracy (0..1), for rounds judged on the gate, not in score points
    question_guard: bool = False    # no tuning question in the baseline's top 5 may leave it, even if another comes in
    noise_alpha: float | None = None   # a gain that moves the ranking is kept only if the paired test's p < this
    quality_weights: tuple = ScoreConfig().quality_weights    # score100's per-question share (the rubric's)


@dataclass(frozen=True)
class Decision:
    decision: RoundDecision
    reason: str


def objective_value(res: EvalResult, objective: str) -> float:
    if objective == "score100":
        return res.score100["total"]
    if objective == "gate_accuracy":
        return res.gate["gate_accuracy"] or 0.0
    return res.overall[objective]


def questions_hit(res: EvalResult) -> tuple[int, int]:
    """(questions hit@5, answerable questions), counted from the per-question rows: at 25,000 questions
    one lost question moves the rate by 0.00004, which a rate rounded to 4 decimals does not show."""
    rows = [q for q in res.per_query if q.level != "probe"]
    return sum(int(bool(q.metrics.get("hit@5", 0))) for q in rows), len(rows)


def level_hits(res: EvalResult) -> dict[str, int]:
    """Questions hit@5 per level (counts, not rates: the guard speaks in questions)."""
    out: dict[str, int] = {}
    for q in res.per_query:
        if q.level != "probe":
            out[q.level] = out.get(q.level, 0) + int(q.metrics.get("hit@5", 0))
    return out


def decide(base: EvalResult, cand: EvalResult, rule: Rule, *,
           objective: str | None = None) -> tuple[Decision, float, float]:
    """Returns (decision, base objective, candidate objective). `objective` overrides the rule's
    (threshold rounds are judged on gate accuracy)."""
    obj = objective or rule.objective
    b_obj, c_obj = objective_value(base, obj), objective_value(cand, obj)
    b_hit, c_hit = base.overall["hit@5"], cand.overall["hit@5"]
    b_count, _ = questions_hit(base)
    c_count, _ = questions_hit(cand)
    if c_count < b_count:
        lost = b_count - c_count
        rose = f"; {obj} rose {b_obj:.4f} -> {c_obj:.4f}, but hit@5 is guarded" if c_obj > b_obj else ""
        return Decision(RoundDecision.HIT5_REGRESSED,
                        f"hit@5 {b_hit:.4f} -> {c_hit:.4f} ({lost} question(s) lost){rose}"), b_obj, c_obj
    if rule.question_guard and obj != "gate_accuracy":
        out, came = left_top5(base, cand), came_into_top5(base, cand)
        if out:
            return Decision(RoundDecision.HIT5_REGRESSED,
                            f"hit@5 {b_hit:.4f} -> {c_hit:.4f}, but {len(out)} question(s) left the top 5 "
                            f"as {len(came)} came in (the guard is per question)"), b_obj, c_obj
    if rule.level_guard:
        bl, cl = level_hits(base), level_hits(cand)
        worst = [(lv, bl[lv] - cl.get(lv, 0)) for lv in bl if bl[lv] - cl.get(lv, 0) > 1]
        if worst:
            lv, lost = max(worst, key=lambda t: t[1])
            return Decision(RoundDecision.LEVEL_GUARD, f"level {lv} lost {lost} questions (guard allows 1)"), b_obj, c_obj
    if rule.latency_budget_ms is not None:
        p95 = cand.p95_ms
        if p95 > rule.latency_budget_ms:
            return Decision(RoundDecision.LATENCY_BUDGET,
                            f"p95 {p95:.1f} ms over the budget {rule.latency_budget_ms:.0f} ms"), b_obj, c_obj
    eps = rule.gate_epsilon if obj == "gate_accuracy" else rule.epsilon
    if c_obj - b_obj <= eps:
        return Decision(RoundDecision.NO_GAIN, f"{obj} {b_obj:.4f} -> {c_obj:.4f} "
                                            f"(needs > +{eps:g}); hit@5 {b_hit:.4f} -> {c_hit:.4f}"), b_obj, c_obj
    if rule.noise_alpha is not None and obj != "gate_accuracy":
        ev = ranking_evidence(base, cand, obj, rule.quality_weights)
        if ev.moved and not ev.beyond_noise(rule.noise_alpha):
            return Decision(RoundDecision.NO_GAIN,
                            f"{obj} {b_obj:.4f} -> {c_obj:.4f}, within noise: {ev.moved} question(s) moved "
                            f"({ev.better} up, {ev.worse} down), paired p = {ev.p_value:.4f} "
                            f"(needs < {rule.noise_alpha:g}); hit@5 {b_hit:.4f} -> {c_hit:.4f}"), b_obj, c_obj
        if ev.moved:
            return Decision(RoundDecision.KEPT, f"{obj} {b_obj:.4f} -> {c_obj:.4f}; hit@5 {b_hit:.4f} -> {c_hit:.4f}; "
                            f"{ev.better} question(s) up, {ev.worse} down, paired p = {ev.p_value:.4f}"), b_obj, c_obj
    return Decision(RoundDecision.KEPT, f"{obj} {b_obj:.4f} -> {c_obj:.4f}; hit@5 {b_hit:.4f} -> {c_hit:.4f}"), b_obj, c_obj
