"""One round: a candidate value for one variable, evaluated against a baseline and decided.

The sweep and the audit's re-test of rejected candidates both call `run_round`, so a re-test is judged
by the rules of the round it re-tests: the same variable-kind table (what a change needs, whether the
gate is re-fitted), the same grid for fitted thresholds, the same cost model for latency, the same keep
rule. A round's latency is predicted (cost_model) and the calibration it used is written into the row,
so `replay_decisions` recomputes every decision from the ledger without a clock.
"""

from __future__ import annotations

import dataclasses
import traceback
from dataclasses import dataclass

from search_core import SearchCoreError
from search_core.config import SearchConfig
from search_core.models import ModelUnavailable
from search_core.percentiles import percentile
from tuner.evaluation.cost_model import Calibration, predicted_total
from tuner.evaluation.evaluate import EvalResult, LatencyCharge, Percentiles
from tuner.ledger.round import Round
from tuner.ledger.schema import RoundDecision
from tuner.sweep.evidence import left_top5
from tuner.sweep.keep_rule import Rule, decide
from tuner.sweep.space import Space
from tuner.sweep.variables import (MODEL_GATE_FIELD, gate_field, is_default_move, kind_of, unchanged_reason,
                                   with_change)


@dataclass(frozen=True)
class RoundOutcome:
    candidate: SearchConfig      # as evaluated: with the gate re-fitted when its kind asks for it
    result: EvalResult | None    # the evaluation, with its latency charge (None: not evaluated)
    decision: RoundDecision
    reason: str
    objective: float | None
    reindex_s: float = 0.0


def snap(space: Space, name: str, value: float) -> float:
    """A fitted threshold on the space's grid when the space turns it (optuna refuses a history value
    off its grid), else rounded to 4 places."""
    if name not in space.names():
        return round(value, 4)
    v = space.get(name)
    value = min(max(value, v.low), v.high)
    if v.step:
        value = v.low + round((value - v.low) / v.step) * v.step
    return round(value, 6)


def charged(bench, cfg: SearchConfig, res: EvalResult, kind: str) -> EvalResult:
    """res with how the round's latency was charged, for the ledger: the calibration itself (so the row can
    be re-scored without a clock) and the measured p95 beside the predicted one."""
    cal = bench.cost_for(cfg)
    lat = res.total_latency()
    measured, predicted = lat.measured_p95, lat.p95
    return dataclasses.replace(res, latency_charge=LatencyCharge(
        "cost model", kind, cfg.reranker, cal.to_json(), predicted, measured,
        round(measured / predicted, 3) if measured and predicted else None))


def run_round(bench, gold, baseline: SearchConfig, base_metrics: EvalResult, variable: str, value, rule: Rule, *,
              space: Space, ensure_gate, timing_samples: int = 0) -> RoundOutcome:
    """Evaluate `baseline` with `variable` set to `value` on `gold` and decide it against `base_metrics`.
    `variable` may be a coupled pair (tuner/sweep/variables.py), `value` then its two values in order.
    ensure_gate(cfg): the gate model for cfg's (embedder, reranker) pair, fitted on the tuning set."""
    kind = kind_of(variable)
    cand = with_change(baseline, variable, value)
    if cand.config_hash() == baseline.config_hash():
        return RoundOutcome(cand, None, RoundDecision.NO_GAIN, "the baseline already has this value", None)
    same = unchanged_reason(variable, baseline, cand)
    if same is not None:
        return RoundOutcome(cand, None, RoundDecision.NO_GAIN,
                            f"{same}: the ranked lists are provably unchanged, so no timing contest", None)
    reindex_s = 0.0
    try:
        if kind.reindex:
            _, reindex_s = bench.searcher_for(getattr(cand, variable))
        if kind.refit_gate:
            # score scales differ between models: choose the pair's gate before comparing (its gate file or
            # the shipped default, else a model fitted on the tuning set, once per embedder/reranker pair).
            # The cosine threshold is re-fitted every time: it decides only where no model fits the pair,
            # and the confidence label reads it; where a model decides it moves no decision
            from tuner.sweep.workbench import fit_gate_cut
            model = ensure_gate(cand)
            fitted = fit_gate_cut(bench.evaluate(cand, gold).per_query, rule.gate_measure)
            changes = {gate_field(): snap(space, gate_field(), fitted)} if fitted is not None else {}
            if model is not None:
                changes[MODEL_GATE_FIELD] = snap(space, MODEL_GATE_FIELD, model.threshold)
            cand = cand.replace(**changes)
        res = charged(bench, cand, bench.evaluate(cand, gold, timing_samples=timing_samples), kind.name)
        d, _, c_obj = decide(base_metrics, res, rule, objective=kind.objective, prior=is_default_move(variable))
        reason = d.reason
        broken = left_top5(base_metrics, res)
        if broken:
            reason += f"; broke {', '.join(broken[:8])}" + (" ..." if len(broken) > 8 else "")
        return RoundOutcome(cand, res, d.decision, reason, c_obj, reindex_s)
    except ModelUnavailable as e:
        return RoundOutcome(cand, None, RoundDecision.UNAVAILABLE, str(e), None, reindex_s)
    except SearchCoreError as e:
        return RoundOutcome(cand, None, RoundDecision.CRASHED, f"{type(e).__name__}: {e}", None, reindex_s)
    except Exception as e:  # a bug or a broken model must not end an overnight sweep
        tb = traceback.format_exception_only(type(e), e)[-1].strip()
        return RoundOutcome(cand, None, RoundDecision.CRASHED, tb, None, reindex_s)


# -- recomputing decisions from the ledger ------------------------------------------------------------------

def rescore(res: EvalResult, score_cfg) -> EvalResult:
    """A ledger row's evaluation with latency and the score re-derived from its questions' counted work
    and the calibration the row records: what the decision stood on, recomputed without a clock."""
    from tuner.evaluation.score import score100
    charge = res.latency_charge
    cal = Calibration.from_json(charge.calibration)
    totals = [predicted_total(q.search_work, cal, charge.rerank_model) for q in res.per_query]
    p95 = round(percentile(totals, 95), 2)
    total = dataclasses.replace(res.latency_ms.get("total", Percentiles()), p95=p95)
    return dataclasses.replace(res, latency_ms={**res.latency_ms, "total": total},
                               score100=score100(res.overall, p95, score_cfg) if res.overall.get("n") else None)


@dataclass(frozen=True)
class ReplayedRound:
    """An evaluated round decided again from the ledger, beside what the ledger recorded."""
    round: int
    variable: str
    recorded: RoundDecision
    recomputed: RoundDecision
    objective: float | None              # recomputed
    recorded_objective: float | None

    @property
    def agrees(self) -> bool:
        return self.recomputed == self.recorded

    def to_json(self) -> dict:
        """`ledger --replay --json`'s form of a round."""
        return {"round": self.round, "variable": self.variable, "recorded": self.recorded,
                "recomputed": self.recomputed, "agrees": self.agrees, "objective": self.objective,
                "recorded_objective": self.recorded_objective}


def replay_decisions(rows: list[Round], rule: Rule, score_cfg) -> list[ReplayedRound]:
    """Each evaluated round of a sweep decided again from the ledger alone: latency re-predicted from
    the recorded work and calibration, the score re-computed, the keep rule applied against the baseline
    the round was run against (the last kept row before it). Returns one entry per evaluated round:
    round, recorded and recomputed decision and objective."""
    out, baseline = [], None
    for r in rows:
        m = r.result
        if r.is_start:
            baseline = rescore(m, score_cfg) if m is not None and m.latency_charge else m
            continue
        if not r.decision.evaluated or m is None or not m.per_query or baseline is None:
            continue
        if not m.latency_charge:
            continue                      # not evaluated (provably unchanged): no latency stood behind it
        cand = rescore(m, score_cfg)
        kind = kind_of(r.variable)
        d, _, c_obj = decide(baseline, cand, rule, objective=kind.objective, prior=is_default_move(r.variable))
        out.append(ReplayedRound(r.round, r.variable, r.decision, d.decision, c_obj, r.objective))
        if r.kept:
            baseline = cand
    return out
