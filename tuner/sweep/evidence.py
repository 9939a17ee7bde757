"""What the per-question rows of two tuning evaluations say about a candidate beyond their means.

The keep rule asks two questions of them:
- which questions the baseline had in the top 5 and the candidate does not: a hit@5 count that holds
  can hide a swap (one question out, another in), and a swap is a question lost;
- whether a gain that moves the ranking is larger than noise: the paired randomization test `compare`
  and the holdout check use, on each question's share of the objective. On 24 tuning questions one
  question moving from rank 2 to rank 1 lifts score100 by 0.4 points, and a sweep that keeps such
  gains keeps whatever those few questions happen to prefer.

Everything here reads what a ledger row keeps of each question (QuestionResult.to_json(LEDGER): hit@5, MRR,
nDCG@10, the first gold rank), so a decision that stands on it is recomputed from the ledger alone.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from tuner.evaluation.evaluate import EvalResult, QuestionResult
from tuner.evaluation.stats import paired_randomization

MRR_CUTOFF = 10        # MRR is MRR@10 (tuner/evaluation/metrics.py)


def answerable_rows(res: EvalResult) -> dict[str, QuestionResult]:
    return {q.id: q for q in res.per_query if q.level != "probe"}


def left_top5(base: EvalResult, cand: EvalResult) -> list[str]:
    """Answerable questions the baseline hit@5 and the candidate does not."""
    b = answerable_rows(base)
    return [q.id for q in cand.per_query if q.level != "probe" and q.id in b and b[q.id].metrics.get("hit@5")
            and not q.metrics.get("hit@5")]


def came_into_top5(base: EvalResult, cand: EvalResult) -> list[str]:
    """Answerable questions the candidate hit@5 and the baseline did not."""
    return left_top5(cand, base)


def _reciprocal_rank(q: QuestionResult) -> float:
    if "mrr" in q.metrics:
        return q.metrics["mrr"]
    r = q.first_rank
    return 1.0 / r if r and r <= MRR_CUTOFF else 0.0


def question_value(q: QuestionResult, objective: str, quality_weights) -> float:
    """One answerable question's share of the objective: its own metric for hit@5 / MRR / nDCG@10; for
    score100 its quality term (the rubric's weighted metrics: the speed term is one figure for the
    whole set, predicted by the cost model, not a per-question draw)."""
    if objective == "hit@5":
        return float(bool(q.metrics.get("hit@5")))
    if objective == "mrr":
        return _reciprocal_rank(q)
    if objective == "ndcg@10":
        return q.metrics["ndcg@10"]
    if objective == "score100":
        total = sum(w for _, w in quality_weights)
        return sum(w * (_reciprocal_rank(q) if m == "mrr" else float(q.metrics[m])) for m, w in quality_weights) / total
    raise ValueError(f"no per-question value for the objective {objective!r}")


@dataclass(frozen=True)
class RankingEvidence:
    moved: int          # answerable questions whose share of the objective changed
    better: int
    worse: int
    delta: float        # mean per-question change (candidate - baseline)
    p_value: float      # paired randomization, two-sided (1.0 when nothing moved)
    spread: float = 0.0  # standard deviation of the per-question changes (what the test's power turns on)
    n: int = 0          # answerable questions both evaluated

    def beyond_noise(self, alpha: float) -> bool:
        return self.delta > 0 and self.p_value < alpha


def ranking_evidence(base: EvalResult, cand: EvalResult, objective: str, quality_weights) -> RankingEvidence:
    """The candidate's per-question shares of the objective against the baseline's, over the answerable
    questions both evaluated, in id order (the test's resampling follows it; seed 0, so a replay agrees)."""
    b, c = answerable_rows(base), answerable_rows(cand)
    ids = sorted(set(b) & set(c))
    xb = [question_value(b[i], objective, quality_weights) for i in ids]
    xc = [question_value(c[i], objective, quality_weights) for i in ids]
    d = [y - x for x, y in zip(xb, xc)]
    eps = 1e-12
    return RankingEvidence(sum(abs(v) > eps for v in d), sum(v > eps for v in d), sum(v < -eps for v in d),
                           sum(d) / len(d) if d else 0.0, paired_randomization(xb, xc, seed=0),
                           statistics.stdev(d) if len(d) > 1 else 0.0, len(d))
