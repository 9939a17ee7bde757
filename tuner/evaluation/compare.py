"""Compare two evaluation runs: the one paired comparison behind `compare`, the holdout check and the A/B.

Per metric, over the answerable questions both runs answered: each run's mean, the difference, the paired
randomization p-value and a bootstrap 95% interval; then the questions that moved.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.evaluation.evaluate import EvalResult
from tuner.evaluation.metrics import metric_names
from tuner.evaluation.stats import bootstrap_ci, paired_randomization

ALPHA = 0.05
METRICS = metric_names("hit@5", "mrr", "ndcg@10", "p@5", "recall@5")     # `compare` and the holdout check


@dataclass(frozen=True)
class PairedMetric:
    """B against A on one metric over n paired questions; positive deltas mean B is better."""
    a: float | None
    b: float | None
    delta: float
    delta_questions: float       # in questions (for a 0/1 metric, questions gained)
    p_value: float
    ci95: tuple[float, float]
    within_noise: bool           # p >= ALPHA, decided on the unrounded p-value

    @property
    def verdict(self) -> str:
        return "within noise" if self.within_noise else ("B better" if self.delta > 0 else "A better")


def answerable(per_query) -> dict:
    """id -> per-question row, probes left out (they have no ranking metrics)."""
    return {q["id"]: q for q in per_query if q["level"] != "probe"}


def paired_metrics(qa: dict, qb: dict, ids: list, metrics, *, seed: int = 0) -> dict[str, PairedMetric]:
    """Per metric, B against A on the questions `ids` (in that order: the resampling follows it)."""
    n = len(ids)
    out = {}
    for m in metrics:
        xa, xb = [qa[i][m] for i in ids], [qb[i][m] for i in ids]
        p = paired_randomization(xa, xb, seed=seed)
        lo, hi = bootstrap_ci(xa, xb, seed=seed)
        out[m] = PairedMetric(round(sum(xa) / n, 4) if n else None, round(sum(xb) / n, 4) if n else None,
                              round((sum(xb) - sum(xa)) / n, 4) if n else 0.0, round(sum(xb) - sum(xa), 2),
                              round(p, 4), (round(lo, 4), round(hi, 4)), p >= ALPHA)
    return out


def compare(a: EvalResult, b: EvalResult, *, seed: int = 0) -> dict:
    """a, b: two evaluations of the same gold set (an `eval` file: EvalResult.from_json). Positive deltas
    mean B is better."""
    if a.gold != b.gold:
        raise ValueError(f"runs are on different gold sets ({a.gold} vs {b.gold}); compare like with like")
    qa = {q.id: q for q in a.per_query if q.level != "probe"}
    qb = {q.id: q for q in b.per_query if q.level != "probe"}
    ids = sorted(set(qa) & set(qb))
    if not ids:
        raise ValueError("the two runs share no answerable question")
    out = {"gold": a.gold, "n": len(ids), "a": a.config_hash, "b": b.config_hash, "metrics": {}}
    ma, mb = {i: q.metrics for i, q in qa.items()}, {i: q.metrics for i, q in qb.items()}
    for m, t in paired_metrics(ma, mb, ids, METRICS, seed=seed).items():
        out["metrics"][m] = {"a": t.a, "b": t.b, "delta": t.delta, "p_value": t.p_value, "ci95": list(t.ci95),
                             "verdict": t.verdict}
    rr = [(mb[i]["mrr"] - ma[i]["mrr"]) for i in ids]
    out["wins"] = sum(d > 0 for d in rr)
    out["ties"] = sum(d == 0 for d in rr)
    out["losses"] = sum(d < 0 for d in rr)
    out["flipped"] = [{"id": i, "query": qa[i].query, "a_rank": qa[i].first_rank, "b_rank": qb[i].first_rank,
                       "now": "hit" if mb[i]["hit@5"] else "miss"}
                      for i in ids if ma[i]["hit@5"] != mb[i]["hit@5"]]
    one_q = 1 / len(ids)
    out["one_question_moves_hit5_by"] = round(one_q, 4)
    return out


def format_compare(c: dict) -> str:
    lines = [f"{c['gold']}: {c['n']} questions, A={c['a']} B={c['b']} "
             f"(one question moves hit@5 by {c['one_question_moves_hit5_by']:.3f})",
             f"{'metric':<10} {'A':>7} {'B':>7} {'delta':>7} {'p':>7}  95% CI            verdict"]
    for m, v in c["metrics"].items():
        lines.append(f"{m:<10} {v['a']:>7.3f} {v['b']:>7.3f} {v['delta']:>+7.3f} {v['p_value']:>7.4f}  "
                     f"[{v['ci95'][0]:+.3f}, {v['ci95'][1]:+.3f}]  {v['verdict']}")
    lines.append(f"per-question reciprocal rank: {c['wins']} wins, {c['ties']} ties, {c['losses']} losses (B vs A)")
    for f in c["flipped"]:
        lines.append(f"  flipped {f['id']}: rank {f['a_rank']} -> {f['b_rank']} ({f['now']} now)  {f['query']}")
    return "\n".join(lines)
