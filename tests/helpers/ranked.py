"""An evaluation made from ranks alone, as a ledger row keeps it, for keep-rule tests with hand-computed
figures (ranx-style: one row per question, its rank)."""

import math

from tuner.evaluation.evaluate import EvalResult


def ranked(ranks, *, score=70.0) -> EvalResult:
    """An evaluation whose question i has its first gold note at ranks[i] (None: not in the top 10)."""
    rows = [{"id": f"q{i:04d}", "level": "L1", "first_rank": r, "hit@5": float(bool(r and r <= 5)),
             "mrr": 1.0 / r if r else 0.0, "ndcg@10": 1.0 / math.log2(r + 1) if r else 0.0}
            for i, r in enumerate(ranks)]
    n = len(rows)
    return EvalResult.from_ledger(
        {"overall": {"n": n, "hit@5": round(sum(q["hit@5"] for q in rows) / n, 4),
                     "mrr": sum(q["mrr"] for q in rows) / n, "ndcg@10": sum(q["ndcg@10"] for q in rows) / n},
         "score100": {"quality": 0.0, "speed": 0.0, "total": score, "passed": False}, "gate": {"gate_accuracy": 0.8},
         "latency_ms": {"p95": 30.0},
         "per_query": rows})
