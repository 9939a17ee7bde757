"""The read path: a query through the four channels, fusion and ranking, to a gated list of hits."""

from search_core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "pipeline": ("Searcher", "SearchResult", "Hit", "Gate", "Retrieval", "check_query"),
    "channels": ("ChannelHit",),
    "fusion": ("weighted_rrf", "Fused"),
    "ranking": ("final_ranking", "rank_lists", "Ranking"),
    "view": ("IndexView", "ViewCaches"),
    "rerank": ("RerankScorer",),
    "query_cache": ("QueryEmbeddingCache",),
    "limits": ("cap_query", "repair_surrogates"),
})
