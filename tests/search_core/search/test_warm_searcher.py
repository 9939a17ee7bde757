"""A warm Searcher follows its index: a commit in the same second is seen, an index rebuilt with another embedder is refused."""

import pytest

from search_core.index.indexer import index_vault
from search_core.index.store import atomic, connect
from search_core.search.pipeline import IndexChangedError, Searcher


def test_a_commit_within_the_same_second_is_seen_by_a_warm_searcher(small_vault, small_index, shared_cache):
    s = Searcher(small_index)
    assert s.view.notes["ai/rrf"]["title"] == "Reciprocal Rank Fusion"
    key = s.fingerprint_key
    w = connect(small_index)
    with atomic(w):                                  # a commit that leaves indexed_at as it was
        w.execute("UPDATE notes SET title = 'RRF (renamed)' WHERE id = 'ai/rrf'")
    w.close()
    s.search("RRF 점수")
    assert s.view.notes["ai/rrf"]["title"] == "RRF (renamed)"
    (small_vault / "ai" / "new.md").write_text("# 새 노트\n\nRRF 메모.\n", encoding="utf-8")
    index_vault(small_vault, small_index, cache=shared_cache)     # an indexing commit bumps the counter
    s.search("RRF 점수")
    assert s.fingerprint_key != key


@pytest.mark.models
def test_a_warm_searcher_refuses_an_index_swapped_to_another_embedder(small_vault, small_index_e5, shared_cache):
    s = Searcher(small_index_e5)
    s.search("GraphRAG")
    index_vault(small_vault, small_index_e5, embedder="minilm-l6", full=True, cache=shared_cache)
    with pytest.raises(IndexChangedError, match="was e5-small, now minilm-l6"):
        s.search("GraphRAG")
