"""The rerank scorer a Searcher is given: by default every pair scored and the stopwatch charged; a shared
scorer (the sweep's) scores a pair once for every searcher that holds it and charges each pair the model's
per-pair cost, so a cached window costs what a cold one does. Real HTTP reranker (tests/helpers/rerank_server.py)."""

from search_core.config import SearchConfig
from search_core.search.pipeline import Searcher
from search_core.search.ranking import window
from search_core.search.rerank import RerankScorer

ITEMS = [("ai/graphrag", 1), ("ai/rrf", 2), ("ai/rag", None)]
TEXTS = {1: "GraphRAG 커뮤니티 요약", 2: "RRF 점수 합치기"}


def _passage_counting(asked: list):
    def passage(chunk_id, note_id):
        asked.append(note_id)
        return TEXTS.get(chunk_id, note_id)
    return passage


def test_the_default_scorer_scores_every_pair_and_charges_the_stopwatch(rerank_server):
    name, asked = f"rerank+{rerank_server}/rerank", []
    scorer = RerankScorer()
    first = scorer.scores(name, "GraphRAG 요약", ITEMS, _passage_counting(asked))
    second = scorer.scores(name, "GraphRAG 요약", ITEMS, _passage_counting(asked))
    assert first == second and first[0] > first[1]               # the bigram server: the GraphRAG chunk first
    assert len(asked) == 2 * len(ITEMS)                          # nothing kept: the second call scored again
    assert scorer.charged_ms(name, len(ITEMS), 12.5) == 12.5


def test_a_shared_scorer_scores_a_pair_once_and_charges_its_per_pair_cost(rerank_server):
    name, asked = f"rerank+{rerank_server}/rerank", []
    scorer = RerankScorer.shared()
    first = scorer.scores(name, "GraphRAG 요약", ITEMS, _passage_counting(asked))
    cost = scorer.cost[name]                                     # measured on the model's first window
    assert cost > 0 and len(asked) == len(ITEMS)                 # each pair read once (the warm-up reuses one)
    asked.clear()
    assert scorer.scores(name, "GraphRAG 요약", ITEMS, _passage_counting(asked)) == first and asked == []
    assert scorer.charged_ms(name, len(ITEMS), 0.01) == len(ITEMS) * cost      # cached, charged as cold
    assert scorer.cost[name] == cost                                            # measured once per model


def test_searchers_given_one_scorer_share_its_scores_and_charge(demo_index, rerank_server):
    scorer = RerankScorer.shared()
    a, b = Searcher(demo_index, reranking=scorer), Searcher(demo_index, reranking=scorer)
    plain = Searcher(demo_index)
    cfg = SearchConfig(embedder=a.embedder_name, reranker=f"rerank+{rerank_server}/rerank", rerank_depth=10)
    try:
        ra = a.search("GraphRAG 커뮤니티 요약", cfg)
        pairs = len(window(ra.fused, cfg))
        cached = dict(scorer.cache)
        assert pairs and len(cached) == pairs
        rb = b.search("GraphRAG 커뮤니티 요약", cfg)
        assert scorer.cache == cached                           # b scored nothing: every pair came from a's
        assert rb.ranked == ra.ranked
        cost = scorer.cost[cfg.reranker]
        assert ra.timings_ms["rerank"] == rb.timings_ms["rerank"] == pairs * cost
        assert plain.reranking == RerankScorer() and plain.search("GraphRAG 커뮤니티 요약", cfg).ranked == ra.ranked
    finally:
        for s in (a, b, plain):
            s.close()
