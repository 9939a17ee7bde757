"""The final order: one pure function that `search` returns and evaluation scores."""

import pytest

from search_core.config import SearchConfig
from search_core.search.fusion import weighted_rrf
from search_core.search.pipeline import Searcher
from search_core.search.ranking import K_LIST, final_ranking, fuse, rank_lists, window
from tuner.evaluation.evaluate import run_queries
from tuner.data.gold import load_gold
from tests.helpers import ROOT

TUNE = ROOT / "experiments/gold/demo-tune.yaml"


def test_excluded_ids_take_no_rank_slot():
    lists = {"dense": ["index", "a", "b"], "sparse": ["b", "index", "a"]}
    w = {"dense": 1.0, "sparse": 1.0}
    out = {f.id: f for f in weighted_rrf(lists, w, k=1, exclude={"index"})}
    # with "index" dropped before ranking: dense a=1 b=2, sparse b=1 a=2
    # a = 1/(1+1) + 1/(1+2) = 0.5 + 0.333333 = 0.833333; b the same by symmetry
    assert out["a"].ranks == {"dense": 1, "sparse": 2}
    assert out["a"].score == pytest.approx(0.8333333)
    assert out["b"].score == pytest.approx(0.8333333)
    assert "index" not in out
    # without the exclusion "index" holds rank 1 in dense and 2 in sparse: a = 1/3 + 1/4, not 1/2 + 1/3
    out = {f.id: f for f in weighted_rrf(lists, w, k=1)}
    assert out["a"].score == pytest.approx(0.5833333)

def test_final_order_reranks_the_window_and_refills_from_the_fused_tail():
    lists = {"dense": list("abcdefghijkl")}
    cfg = SearchConfig(w_dense=1.0, w_sparse=0, w_decomposed=0, w_entity=0, rrf_k=0, top_k=3, rerank_depth=4,
                       reranker="some-reranker")
    fused = fuse(lists, cfg)
    assert [f.id for f in window(fused, cfg)] == list("abcd")
    r = final_ranking(fused, cfg, [0.1, 0.9, 0.5, 0.9])         # b and d tie: the fused order breaks it
    assert r.ids == tuple("bdcaefghij") and len(r.ids) == K_LIST
    assert r.returned == tuple("bdc")
    assert r.scores[:4] == (0.9, 0.9, 0.5, 0.1) and r.scores[4] == pytest.approx(1 / 5)
    with pytest.raises(ValueError, match="one rerank score per window entry"):
        final_ranking(fused, cfg, None)
    # no reranker: the fused order, as deep as asked
    plain = rank_lists(lists, cfg.replace(reranker="none"), depth=K_LIST)
    assert plain.ids == tuple("abcdefghij") and plain.reranked == 0


def test_evaluation_scores_exactly_the_list_search_returns_with_a_reranker(demo_index, rerank_server):
    """A real reranker (the bigram-overlap HTTP server) re-sorts 20 candidates; the 10 ids evaluation
    scores start with the 5 that `search` returns, hold no duplicate and are refilled to 10."""
    s = Searcher(demo_index)
    cfg = SearchConfig(reranker=f"rerank+{rerank_server}/rerank", rerank_depth=20, top_k=5)
    gold = load_gold(TUNE)
    rows = run_queries(s, gold, cfg)
    moved = 0
    for q, row in zip(gold.questions, rows):
        res = s.search(q.query, cfg)
        assert row.ranked[:5] == tuple(h.note_id for h in res.hits)
        assert len(set(row.ranked)) == len(row.ranked)
        n_fused = len(res.fused)
        assert len(row.ranked) == min(K_LIST, n_fused), (q.id, row.ranked)
        plain = [f.id for f in res.fused[:5]]
        moved += row.ranked[:5] != tuple(plain)
    assert moved > 0, "the reranker should have re-ordered some top 5"




@pytest.mark.parametrize("margin", [None, 0.2])
def test_search_builds_fused_records_as_deep_as_they_are_read(demo_index, margin):
    """search() keeps the fused records --explain reads (K_LIST), a reranker's window and top_k, not every
    candidate: its hits (channels and fused scores too) and those records are the whole fusion's. An index page
    the query names takes its record from wherever it sits, so then the whole list is built."""
    s = Searcher(demo_index)
    cfg = SearchConfig(embedder=s.embedder_name, fast_path_margin=margin)
    queries = [q.query for q in load_gold(TUNE).questions] + ["root index", "index"]
    try:
        for q in queries:
            res = s.search(q, cfg)
            whole = s.rank(s.retrieve_for(q, cfg), cfg, limit_fused=1000)
            assert res.hits == whole.hits and res.ranked == whole.ranked[:cfg.top_k]
            assert res.fused == whole.fused[:len(res.fused)]
            assert len(res.fused) >= min(K_LIST, len(whole.fused))
            if res.named:
                assert len(res.fused) == len(whole.fused)
    finally:
        s.close()
