"""Trigram document frequencies stored at index time equal FTS5's own, stay equal through incremental
updates, spare the gate its fts5vocab walks, and are never read when a writer left them stale."""

import pytest

from search_core.index import term_df
from search_core.gate.features import gate_features
from search_core.index.indexer import index_vault
from search_core.search import fts_bm25
from search_core.search.pipeline import Searcher
from search_core.index.store import atomic, bump_generation, connect
from tests.helpers import write_vault


def live_vocab(conn):
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.t_vocab USING fts5vocab(main, chunks_fts, row)")
    return dict(conn.execute("SELECT term, doc FROM temp.t_vocab").fetchall())


def stored(conn):
    return dict(conn.execute("SELECT term, df FROM trigram_df").fetchall())


def test_the_table_equals_fts5_after_a_full_build_and_after_updates(small_vault, tmp_path, shared_cache):
    db = tmp_path / "idx.sqlite"
    index_vault(small_vault, db, cache=shared_cache)
    conn = connect(db)
    assert term_df.is_current(conn)
    vocab = live_vocab(conn)
    assert len(vocab) > 200 and stored(conn) == vocab
    conn.close()
    (small_vault / "ai" / "rrf.md").write_text("---\ntitle: RRF\n---\n# RRF\n\nk 값은 60, 검색 실험.\n", encoding="utf-8")
    (small_vault / "life" / "kimchi.md").unlink()
    write_vault(small_vault, {"new/ml.md": "# ML\n\nAI 모델과 벡터 DB. 큐(queue)는 FIFO.\n"})
    r = index_vault(small_vault, db, cache=shared_cache)
    assert (r.changed, r.deleted, r.added) == (1, 1, 1)
    conn = connect(db)
    after = live_vocab(conn)
    assert after != vocab                       # the update changed the vocabulary...
    assert term_df.is_current(conn) and stored(conn) == after    # ...and the table followed it
    got = term_df.lookup_stored(conn, ["fif", "김치찌", "없는말"])
    assert got == {"fif": after["fif"], "김치찌": 0, "없는말": 0}
    conn.close()


def _vocab_reads(s, query):
    seen = []
    s.conn.set_trace_callback(seen.append)
    try:
        r = s.retrieve(query)
        f = gate_features(r.query, r.lists, [], s.view, conn=s.conn)
    finally:
        s.conn.set_trace_callback(None)
    # the sparse channel's own bm25 reads its term lists from FTS5's instance vocabulary (search.fts_bm25): the
    # channel's postings, which FTS5's bm25() read before; not the frequency walks the gate must not make
    return f, [q for q in seen if ("fts5vocab" in q or "vocab" in q.split("FROM")[-1]) and fts_bm25.VOCAB not in q]


def test_the_gate_reads_the_table_not_the_vocabulary(small_index):
    f_table, reads = _vocab_reads(Searcher(small_index), "RRF 점수 커뮤니티 요약")
    assert f_table["bm25_top_norm"] > 0
    assert reads == []
    # the same index with the table made stale (a write by code that does not keep it): the gate must
    # read FTS5's vocabulary, and the value is the same
    conn = connect(small_index)
    with atomic(conn):
        conn.execute("UPDATE trigram_df SET df = 1")          # wrong values that must not be read
        bump_generation(conn)
    conn.close()
    f_live, reads = _vocab_reads(Searcher(small_index), "RRF 점수 커뮤니티 요약")
    assert reads                                                 # the vocabulary, not the stale table
    assert f_live["bm25_top_norm"] == pytest.approx(f_table["bm25_top_norm"])
