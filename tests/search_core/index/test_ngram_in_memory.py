"""The n-gram posting lists a view reads (ngram_postings.NgramIndex, per term on first use) are the index
file's lists: every term's chunks and counts as stored, its notes with the summed counts; after an
incremental update, a new view's lists are the updated file's. A view reads the lists of the terms it is
asked for only, and the lists it keeps (up to CACHE_BYTES) change no answer. The n-gram channel reads
nothing else, so what it scores is what the file holds."""

import shutil

import numpy as np

from search_core.index import ngram_postings
from search_core.index.indexer import index_vault
from search_core.search import channels as ch
from search_core.search.view import IndexView
from tests.helpers import DEMO_VAULT
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER


def assert_lists_equal_the_file(db):
    view = IndexView.open(db)
    try:
        index = view.ngram_index()
        terms = [r[0] for r in view.conn.execute("SELECT term FROM ngram_postings ORDER BY term")]
        assert len(terms) > 500
        lists = index.term_lists(terms)
        assert len(lists) == len(terms)
        assert index.term_lists(["없는말없는말", "zzqqxxnotaterm"]) == []
        for term, got_list in zip(terms, lists):
            ids, tfs = ngram_postings.postings(view.conn, term)
            assert np.all(np.diff(got_list.chunk_place) > 0), term
            got = dict(zip(view.chunk_at[got_list.chunk_place].tolist(), got_list.chunk_tf.tolist()))
            assert got == dict(zip(ids.tolist(), tfs.tolist())), term
            want_notes: dict[int, int] = {}
            for cid, n in got.items():
                note = int(index.note_of_place[view.place_of[cid]])
                want_notes[note] = want_notes.get(note, 0) + n
            assert list(zip(got_list.note_no.tolist(), got_list.note_tf.tolist())) == sorted(want_notes.items()), term
        assert index.nbytes > 0
    finally:
        view.close()


def test_the_lists_a_view_reads_are_the_files_lists(demo_index):
    assert_lists_equal_the_file(demo_index)


def test_a_view_reads_the_lists_of_the_terms_asked_only_and_its_cache_changes_no_answer(demo_index, monkeypatch):
    view = IndexView.open(demo_index)
    try:
        # every note's title and summary as a question: long and short, Korean and English
        questions = [q for r in view.conn.execute("SELECT title, summary FROM notes ORDER BY id") for q in r if q]
        assert len(questions) > 50
        index = view.ngram_index()
        assert index.terms_held == 0
        first = questions[0]
        ch.ngram_sparse(view.conn, view, first, 20)
        assert index.terms_held == len(set(ngram_postings.terms_of(first)))
        kept = [ch.ngram_sparse(view.conn, view, q, 20) for q in questions]
    finally:
        view.close()
    monkeypatch.setattr(ngram_postings.NgramIndex, "CACHE_BYTES", 4096)   # a few short lists at a time
    view = IndexView.open(demo_index)
    try:
        assert [ch.ngram_sparse(view.conn, view, q, 20) for q in questions] == kept
        assert view.ngram_index().terms_held < len({t for q in questions for t in ngram_postings.terms_of(q)})
    finally:
        view.close()


def test_after_an_update_a_new_views_lists_are_the_updated_files(tmp_path, shared_cache):
    vault = tmp_path / "vault"
    shutil.copytree(DEMO_VAULT / "ai", vault)
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    note = vault / "rag" / "bm25.md"
    note.write_text(note.read_text(encoding="utf-8") + "\n\nOkapi Quuxbert 변형도 있다. 검색 팀.\n", encoding="utf-8")
    (vault / "rag" / "hnsw.md").unlink()
    assert index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache).mode == "incremental"
    assert_lists_equal_the_file(db)
    view = IndexView.open(db)
    try:
        index = view.ngram_index()
        (got,) = index.term_lists(["quuxbert"])
        assert [index.note_ids[n] for n in got.note_no] == ["rag/bm25"]
    finally:
        view.close()
