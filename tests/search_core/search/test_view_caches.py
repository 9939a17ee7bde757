"""What the read path learns about one index view lives in its typed `caches` field and goes with the view:
an updated index is read afresh, never through the counts of the view it replaced."""

import pytest

from search_core.config import SearchConfig
from search_core.index import term_df
from search_core.index.indexer import index_vault
from search_core.search.pipeline import Searcher
from search_core.search.view import ViewCaches
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER

TERMS = ["쿠버네", "버네티"]             # trigrams of 쿠버네티스, a word the small vault does not hold


def test_the_caches_go_with_the_view(small_vault, small_index, shared_cache):
    s = Searcher(small_index)
    try:
        s.search("쿠버네티스 오토스케일링")
        first = s.view.caches
        assert term_df.counts(s.view, s.conn, TERMS) == {t: 0 for t in TERMS}
        assert set(TERMS) <= set(first.term_df) and first.term_df_stored is not None
        assert SearchConfig().nav_globs in first.nav                 # the index pages, once per view
        (small_vault / "k8s.md").write_text("# 쿠버네티스\n\n쿠버네티스 오토스케일링 메모.\n", encoding="utf-8")
        index_vault(small_vault, small_index, embedder=FAKE_EMBEDDER, cache=shared_cache)
        s.search("쿠버네티스 오토스케일링")                            # the searcher takes the new view
        assert term_df.counts(s.view, s.conn, TERMS) == {t: 1 for t in TERMS}    # not the old view's 0
        assert s.view.caches is not first
    finally:
        s.close()


def test_a_cache_the_view_does_not_declare_cannot_be_stashed_on_it():
    caches = ViewCaches()
    with pytest.raises(AttributeError):
        caches.term_dfs = {}                 # a misspelt field: slots refuse it instead of keeping a second cache
