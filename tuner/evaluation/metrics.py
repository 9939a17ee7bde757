"""Ranking metrics as pure functions of (ranked ids, relevant ids). One definition each, hand-tested.

hit@k: 1 if any relevant id is in the top k.       MRR: 1 / rank of the first relevant id (0 if none).
P@k: relevant in top k / k.    R@k: relevant in top k / |relevant|.
nDCG@k: binary gains, log2 discount, ideal = all relevant ranked first.
Pinned by hand-computed tests and checked against trec_eval (pytrec_eval via ir-measures) in tests/tuner/evaluation/test_metrics.py.
"""

from __future__ import annotations

import math
from typing import Sequence


def first_rank(ranked: Sequence[str], relevant) -> int | None:
    rel = set(relevant)
    for i, d in enumerate(ranked, 1):
        if d in rel:
            return i
    return None


def hit_at_k(ranked, relevant, k: int) -> float:
    r = first_rank(ranked[:k], relevant)
    return 1.0 if r is not None else 0.0


def reciprocal_rank(ranked, relevant, k: int | None = None) -> float:
    r = first_rank(ranked if k is None else ranked[:k], relevant)
    return 1.0 / r if r else 0.0


def precision_at_k(ranked, relevant, k: int) -> float:
    rel = set(relevant)
    return sum(1 for d in ranked[:k] if d in rel) / k


def recall_at_k(ranked, relevant, k: int) -> float:
    rel = set(relevant)
    if not rel:
        return 0.0
    return sum(1 for d in ranked[:k] if d in rel) / len(rel)


def ndcg_at_k(ranked, relevant, k: int) -> float:
    rel = set(relevant)
    if not rel:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 1) for i, d in enumerate(ranked[:k], 1) if d in rel)
    idcg = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(rel), k) + 1))
    return dcg / idcg


# Every per-question metric, in the order reports show them: name -> (label in reports, function of
# (ranked ids, gold ids)). Each question's row carries all of them; a list of metrics anywhere else is a
# subset of this table (validated on import where it is defined).
METRICS = {
    "hit@1": ("hit@1", lambda r, g: hit_at_k(r, g, 1)),
    "hit@3": ("hit@3", lambda r, g: hit_at_k(r, g, 3)),
    "hit@5": ("hit@5", lambda r, g: hit_at_k(r, g, 5)),
    "hit@10": ("hit@10", lambda r, g: hit_at_k(r, g, 10)),
    "mrr": ("MRR@10", lambda r, g: reciprocal_rank(r, g, 10)),
    "p@5": ("P@5", lambda r, g: precision_at_k(r, g, 5)),
    "recall@5": ("recall@5", lambda r, g: recall_at_k(r, g, 5)),
    "ndcg@10": ("nDCG@10", lambda r, g: ndcg_at_k(r, g, 10)),
    "coverage": ("coverage", lambda r, g: float(bool(r))),
}


def metric_names(*names: str) -> tuple[str, ...]:
    """`names`, checked against METRICS (a typo in a report's column list fails at import, not at night)."""
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; metrics: {', '.join(METRICS)}")
    return names


def metric_label(name: str) -> str:
    return METRICS[name][0]


def question_metrics(ranked, gold) -> dict[str, float]:
    """Every metric of one question's ranked list."""
    ranked = list(ranked)
    return {name: fn(ranked, gold) for name, (_, fn) in METRICS.items()}


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0
