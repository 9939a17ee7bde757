"""Embedder and reranker A/B: every candidate on the same questions, compared pairwise."""

from search_core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "run": ("run_ab", "parse_candidates", "ABRun"),
    "records": ("ABParams", "Candidate", "CandidateResult", "ABError"),
    "prepare": ("prepare",),
    "compare": ("compare_pair", "PairComparison"),
    "verdicts": ("ab_verdict",),
    "progress": ("ABProgress",),
})
