"""The bounded BM25 of benchmarks/bench_bm25_bound.py: where its bound holds it returns FTS5's own rows and
floats (channels._fts_best) while leaving the common phrases' postings unread, on a real index."""

from __future__ import annotations

from benchmarks import bench_bm25_bound as bb
from search_core.search import channels as ch
from search_core.search.view import IndexView


def test_where_the_bound_holds_the_rows_and_floats_are_fts5s_and_common_postings_are_skipped(demo_index):
    view = IndexView.open(demo_index)
    conn = view.conn
    totals = bb.fts_totals(conn)
    assert totals.rows == conn.execute("SELECT count(*) FROM chunks_fts").fetchone()[0]
    held = fell_back = 0
    for (title,) in conn.execute("SELECT title FROM notes ORDER BY id").fetchall():
        tri = ch.fts_trigrams(view, conn, ch.query_terms(title)[0])
        if len(tri) < 2:
            continue
        df = ch.term_df(view, conn, tri)
        for limit in (1, 5):
            # a budget of 30 postings: the demo's 603 chunks are too few for the default's to bind
            got = bb.bounded_best(conn, tri, df, totals, limit, ch.FIELD_WEIGHTS, ch.fts_match_expr, budget=30)
            if got.rows is None:
                fell_back += 1
                continue
            held += 1
            assert sorted(got.rows) == sorted(ch._fts_best(conn, ch.fts_match_expr(tri), limit)), title
            assert got.skipped > 0 and got.read + got.skipped == sum(df.values()) and got.rescored >= len(got.rows)
    view.close()
    assert held >= 10 and fell_back >= 10      # both paths ran: 43 and 139 when written


def test_a_row_whose_text_folds_otherwise_is_left_to_fts5():
    assert bb.row_freqs(["Straße ÉTÉ", "Ωmega", "ＡＢＣ"], ["été"], (1.0, 1.0, 1.0)) == [1.0]
    assert bb.row_freqs(["İstanbul"], ["ist"], (1.0,)) is None           # lower() gives two characters
    assert bb.row_freqs(["ΟΔΟΣ"], ["οσ"[:2] + "x"], (1.0,)) is None       # a final sigma
    assert bb.row_freqs(["aaaa aaa"], ["aaa"], (2.0,)) == [6.0]          # overlapping trigrams: 2 + 1, weight 2
