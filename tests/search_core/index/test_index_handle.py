"""The index handle (search_core/index/handle.py): open and verify, reload only when the file changed."""

import pytest

from search_core import SearchCoreError
from search_core.index.handle import IndexChangedError, IndexHandle
from search_core.index.indexer import index_vault
from search_core.search.pipeline import Searcher
from search_core.index.store import atomic, connect


def test_the_view_is_rebuilt_on_a_commit_and_only_then(small_index):
    h = IndexHandle(small_index)
    first = h.refresh()
    assert h.refresh() is first and h.reloads == 1                 # nothing committed: the same view
    w = connect(small_index)
    with atomic(w):
        w.execute("UPDATE notes SET summary = 'changed' WHERE id = 'ai/rrf'")
    w.close()
    second = h.refresh()
    assert second is not first and h.reloads == 2 and second.notes["ai/rrf"]["summary"] == "changed"
    h.close()


def test_the_searcher_reads_its_index_through_the_handle(small_index):
    s = Searcher(small_index)
    assert s.view is s.index.view and s.conn is s.index.conn and s.fingerprint_key == s.index.fingerprint_key
    s.search("RRF")
    assert s.index.reloads == 1                                    # a query on an unchanged file reloads nothing


def test_open_refuses_another_embedder_by_name(small_index):
    with pytest.raises(SearchCoreError, match="minilm-l6"):
        IndexHandle(small_index, embedder="minilm-l6")


def test_a_swap_to_another_embedder_is_refused_at_reload(small_vault, small_index_e5, shared_cache):
    h = IndexHandle(small_index_e5)
    index_vault(small_vault, small_index_e5, embedder="minilm-l6", full=True, cache=shared_cache)
    with pytest.raises(IndexChangedError, match="was e5-small, now minilm-l6"):
        h.refresh()
