"""The index handle (search_core/index/handle.py): open and verify, reload only when the file changed;
a following handle builds the new view off the thread that searches, which answers from the old view
until the swap. Every wait is on an event the code under test sets, against a generous deadline."""

import threading
import weakref

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
    assert second.conn is not first.conn
    first_ref = weakref.ref(first)
    del first
    assert first_ref() is None             # the handle kept nothing of it: its snapshot and connection are gone
    h.close()


def test_an_unchanged_file_is_checked_without_its_meta_rows_and_a_commit_still_reads_them(small_index, monkeypatch):
    from search_core.index import handle as handle_module
    h = IndexHandle(small_index)
    reads = []
    real = handle_module.get_meta
    monkeypatch.setattr(handle_module, "get_meta", lambda conn, key, *a: (reads.append(key), real(conn, key, *a))[1])
    first = h.refresh()
    assert h.refresh() is first and reads == []            # the inode and data_version alone: nothing moved
    w = connect(small_index)
    with atomic(w):
        w.execute("UPDATE notes SET summary = 'changed' WHERE id = 'ai/rrf'")
    w.close()
    assert h.refresh() is not first and {"generation", "indexed_at"} <= set(reads)
    reads.clear()
    second = h.refresh()
    assert h.refresh() is second and reads == [] and h.reloads == 2
    h.close()


def test_the_searcher_reads_its_index_through_the_handle(small_index):
    s = Searcher(small_index)
    assert s.view is s.index.view and s.conn is s.view.conn and s.fingerprint_key == s.index.fingerprint_key
    s.search("RRF")
    assert s.index.reloads == 1                                    # a query on an unchanged file reloads nothing


def test_open_refuses_another_embedder_by_name(small_index):
    with pytest.raises(SearchCoreError, match="minilm-l6"):
        IndexHandle(small_index, embedder="minilm-l6")


@pytest.mark.models
def test_a_swap_to_another_embedder_is_refused_at_reload(small_vault, small_index_e5, shared_cache):
    h = IndexHandle(small_index_e5)
    index_vault(small_vault, small_index_e5, embedder="minilm-l6", full=True, cache=shared_cache)
    with pytest.raises(IndexChangedError, match="was e5-small, now minilm-l6"):
        h.refresh()


DEADLINE_S = 120
NEW_WORD = "Quarzelbrot"


def found(searcher, note_id="ai/rrf") -> bool:
    """The note is among the keyword matches of the new word (dense ranks every note of a 4-note vault)."""
    return note_id in [h.note_id for h in searcher.search(NEW_WORD).retrieval.lists["sparse"]]


def chunks_with_new_word(conn) -> int:
    return conn.execute("SELECT count(*) FROM chunks WHERE text LIKE ?", (f"%{NEW_WORD}%",)).fetchone()[0]


def test_a_following_searcher_answers_from_the_old_view_while_the_new_one_is_built_elsewhere(
        small_vault, small_index, shared_cache):
    s = Searcher(small_index, follow=True)
    h, old = s.index, s.view
    assert not found(s)
    searching = threading.get_ident()
    started, release = threading.Event(), threading.Event()
    real_build = h.build_view

    def held_build(db):
        if threading.get_ident() == searching:
            raise AssertionError("the new view was built on the thread that searches")
        started.set()
        assert release.wait(DEADLINE_S), "the test never released the build"
        return real_build(db)

    h.build_view = held_build
    try:
        with (small_vault / "ai" / "rrf.md").open("a", encoding="utf-8") as f:
            f.write(f"\n{NEW_WORD} 저장 직후의 새 문장.\n")
        # the writer commits while the old view holds its snapshot (WAL: it does not wait for the reader)
        assert index_vault(small_vault, small_index, cache=shared_cache).changed == 1
        assert not found(s)                        # noticed here, built elsewhere: answered from the old view
        assert started.wait(DEADLINE_S), "no build started after the commit"
        assert not found(s) and s.view is old      # the build is held: still the old view, still answering
        assert chunks_with_new_word(old.conn) == 0       # its reads see the commit it was built from
        fresh = connect(small_index)
        assert chunks_with_new_word(fresh) == 1
        fresh.close()
        release.set()
        assert h.wait_ready(DEADLINE_S), "the released build never became ready"
        assert found(s)                            # swapped in at this search: the saved text is found
        assert s.view is not old and h.reloads == 2
        assert chunks_with_new_word(old.conn) == 0       # a reader still holding the old view reads on
        old_ref = weakref.ref(old)
        del old
        assert old_ref() is None                   # and once nothing holds it, it is gone with its connection
    finally:
        release.set()
        s.close()


@pytest.mark.models
def test_a_following_handle_refuses_another_embedder_at_the_next_search(small_vault, small_index_e5, shared_cache):
    h = IndexHandle(small_index_e5, follow=True)
    try:
        index_vault(small_vault, small_index_e5, embedder="minilm-l6", full=True, cache=shared_cache)
        with pytest.raises(IndexChangedError, match="was e5-small, now minilm-l6"):
            h.refresh()
    finally:
        h.close()


def test_an_idle_server_swaps_a_new_view_in_and_lets_sqlite_checkpoint(small_vault, small_index, shared_cache):
    """A view holds its read snapshot, and SQLite cannot checkpoint the WAL past it: a server that swapped
    only at its next search let the WAL grow with every save while nobody searched."""
    from search_core.recall.backend import SearchBackend
    from search_core.recall.engine import RecallEngine
    engine = RecallEngine(SearchBackend(small_index))
    assert engine.warm() is None                       # both lanes open: each holds a view
    try:
        h, old = engine.backend.searcher.index, engine.backend.searcher.view
        swapped, real_swap = threading.Event(), engine.backend.swap_view

        def swap_and_tell():
            real_swap()
            swapped.set()

        engine.backend.swap_view = swap_and_tell
        with (small_vault / "ai" / "rrf.md").open("a", encoding="utf-8") as f:
            f.write(f"\n{NEW_WORD} 아무도 검색하지 않는 동안 저장.\n")
        assert index_vault(small_vault, small_index, cache=shared_cache).changed == 1
        assert swapped.wait(DEADLINE_S), "the ready view was never swapped in without a search"
        engine._long_pool.submit(lambda: None).result(DEADLINE_S)    # the long lane's reset ran before this
        assert h.view is not old and h.reloads == 2 and chunks_with_new_word(h.view.conn) == 1
        old_ref = weakref.ref(old)
        del old
        assert old_ref() is None
        conn = connect(small_index)
        busy, wal_frames, checkpointed = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        conn.close()
        assert busy == 0 and checkpointed == wal_frames, (wal_frames, checkpointed)   # no reader holds it back
    finally:
        engine.shutdown()
