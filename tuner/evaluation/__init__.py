"""Evaluating one config on a gold set: the metrics, the 100-point score, the fake-miss audit, and comparing two runs."""

from search_core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "evaluate": ("evaluate", "EvalResult", "build_result", "run_queries", "RetrievalCache", "QuestionResult",
                 "GateMetrics", "TotalLatency"),
    "metrics": ("hit_at_k", "reciprocal_rank", "precision_at_k", "recall_at_k", "ndcg_at_k", "mean"),
    "score": ("ScoreConfig", "Score100", "score100", "load_score_config"),
    "compare": ("compare", "format_compare", "Comparison", "PairedMetric"),
    "stats": ("paired_randomization", "bootstrap_ci"),
    "fake_miss": ("possible_gold_gaps",),
})
