"""The n-gram posting lists a view holds in memory (ngram_postings.NgramIndex) are the index file's lists:
every term found by its name, its chunks and counts as stored, its notes with the summed counts; after an
incremental update, a new view's lists are the updated file's. The n-gram channel reads nothing else, so
what it scores is what the file holds."""

import shutil

import numpy as np

from search_core.index import ngram_postings
from search_core.index.indexer import index_vault
from search_core.search.view import IndexView
from tests.helpers import DEMO_VAULT
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER


def assert_lists_equal_the_file(db):
    view = IndexView.open(db)
    try:
        index = view.ngram_index()
        terms = [r[0] for r in view.conn.execute("SELECT term FROM ngram_postings ORDER BY term")]
        assert len(terms) > 500
        numbers = index.term_numbers(terms)
        assert len(numbers) == len(terms) == len(set(numbers))
        assert index.term_numbers(["없는말없는말", "zzqqxxnotaterm"]) == []
        for term, t in zip(terms, numbers):
            ids, tfs = ngram_postings.postings(view.conn, term)
            a, b = index.chunk_off[t], index.chunk_off[t + 1]
            got = dict(zip(view.chunk_at[index.chunk_place[a:b]].tolist(), index.chunk_tf[a:b].tolist()))
            assert got == dict(zip(ids.tolist(), tfs.tolist())), term
            want_notes: dict[int, int] = {}
            for cid, n in got.items():
                note = int(index.note_of_place[view.place_of[cid]])
                want_notes[note] = want_notes.get(note, 0) + n
            a, b = index.note_off[t], index.note_off[t + 1]
            assert list(zip(index.note_no[a:b].tolist(), index.note_tf[a:b].tolist())) == sorted(want_notes.items()), term
        assert np.all(np.diff(index.note_no[index.note_off[numbers[0]]:index.note_off[numbers[0] + 1]]) > 0)
        assert index.nbytes > 0
    finally:
        view.close()


def test_the_lists_in_memory_are_the_files_lists(demo_index):
    assert_lists_equal_the_file(demo_index)


def test_terms_of_one_hash_are_told_apart_by_their_names(demo_index, monkeypatch):
    monkeypatch.setattr(ngram_postings, "term_hash", lambda term: hash(term) % 500)   # ~40 terms a hash
    assert_lists_equal_the_file(demo_index)


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
        (t,) = index.term_numbers(["quuxbert"])
        assert [index.note_ids[n] for n in index.note_no[index.note_off[t]:index.note_off[t + 1]]] == ["rag/bm25"]
    finally:
        view.close()
