"""The layout file beside the index (vectors and vault order, memory-mapped): the same answers as reading
SQLite, written by every indexing commit, and never used when it is not of the index's current commit."""

import numpy as np

from search_core.index.indexer import index_vault
from search_core.index.layout import ROW_BLOCK, layout_from_index, layout_path, read_layout
from search_core.index.store import backup_copy, connect, read_snapshot
from search_core.search.pipeline import Searcher
from search_core.search.view import IndexView
from tests.helpers.layout import same_order


def _answers(db, queries):
    s = Searcher(db)
    try:
        return s.view.layout_source, [s.search(q).hits for q in queries]
    finally:
        s.close()


def _same_layout(a, b):
    """The same vault order and the same vectors of the same ids (rows may be ordered apart: an update appends)."""
    same_order(a, b)
    for x, y in zip(a.live(), b.live()):
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


def _as_read_before(conn):
    """(chunk ids, matrix) of every vec0 row, by id."""
    vec = dict(conn.execute("SELECT rowid, embedding FROM chunk_vec"))
    ids = sorted(vec)
    return np.asarray(ids, np.int64), np.frombuffer(b"".join(vec[c] for c in ids), np.float32).reshape(len(ids), -1)


def _mapped_equals_sqlite(db):
    """The file beside `db` is used, and holds exactly what SQLite holds; every segment padded to 16 rows."""
    conn = connect(db, readonly=True)
    try:
        with read_snapshot(conn):
            mapped, source = read_layout(conn, db)
            assert source.mapped, source.reason
            _same_layout(mapped, layout_from_index(conn))
            ids, matrix = _as_read_before(conn)
            live_ids, live_matrix = mapped.live()[:2]
            assert np.array_equal(live_ids, ids) and np.array_equal(live_matrix, matrix)
            for rows_file in mapped.files:
                assert all(n % ROW_BLOCK == 0 and start % ROW_BLOCK == 0 for start, n, _ in rows_file.segments)
    finally:
        conn.close()


def test_searches_answer_alike_from_the_mapped_file_and_from_sqlite(demo_index, tmp_path):
    titles = [r[0] for r in connect(demo_index, readonly=True).execute("SELECT title FROM notes ORDER BY id")]
    queries = titles[::4] + ["RRF 점수는 어떻게 계산하나", "그래프 RAG 커뮤니티 요약", "AI 팀"]
    plain = backup_copy(demo_index, tmp_path / "plain" / "index.sqlite")      # the same commit, no file beside it
    mapped_source, mapped = _answers(demo_index, queries)
    sqlite_source, from_sqlite = _answers(plain, queries)
    assert mapped_source.mapped and not sqlite_source.mapped
    assert "no index.sqlite.layout beside the index" in sqlite_source.reason
    assert sum(len(h) for h in mapped) > 3 * len(queries)
    assert mapped == from_sqlite                  # every hit: note, chunk, score, cosine, ranks, snippet
    _mapped_equals_sqlite(demo_index)


def test_a_stale_layout_file_is_never_used(small_vault, small_index, shared_cache):
    path = layout_path(small_index)
    first_build = path.read_bytes()                           # generation 1 of the first build
    _mapped_equals_sqlite(small_index)

    # an update whose new chunks take the ids of deleted ones (the largest): their old vectors must not be lent
    conn = connect(small_index, readonly=True)
    top_id, top_note = conn.execute("SELECT id, note_id FROM chunks ORDER BY id DESC LIMIT 1").fetchone()
    conn.close()
    (small_vault / f"{top_note}.md").write_text("# 다시 쓴 노트\n\n완전히 새로운 문단: 임베딩 캐시.\n\n"
                                                "## 둘째\n\n벡터 파일과 스냅숏.\n", encoding="utf-8")
    index_vault(small_vault, small_index, cache=shared_cache)
    conn = connect(small_index, readonly=True)
    assert conn.execute("SELECT note_id FROM chunks WHERE id = ?", (top_id,)).fetchone() is not None
    conn.close()
    _mapped_equals_sqlite(small_index)
    current = path.read_bytes()

    path.write_bytes(first_build)                             # the file of an older commit of this index
    view = IndexView.open(small_index)
    try:
        assert not view.layout_source.mapped and "generation 1" in view.layout_source.reason
    finally:
        view.close()

    index_vault(small_vault, small_index, full=True, cache=shared_cache)    # a new build: generation 1 again
    rebuilt = path.read_bytes()
    path.write_bytes(first_build)                             # same generation number, another build's file
    view = IndexView.open(small_index)
    try:
        assert not view.layout_source.mapped
    finally:
        view.close()
    path.write_bytes(current)                                 # a later generation of the old build
    path_source, answers = _answers(small_index, ["RRF 점수", "임베딩 캐시", "김치찌개"])
    assert not path_source.mapped

    path.write_bytes(rebuilt[: len(rebuilt) // 2])            # cut short (a disk that filled up)
    half_source, half_answers = _answers(small_index, ["RRF 점수", "임베딩 캐시", "김치찌개"])
    assert not half_source.mapped and half_answers == answers

    path.write_bytes(rebuilt)
    ok_source, ok_answers = _answers(small_index, ["RRF 점수", "임베딩 캐시", "김치찌개"])
    assert ok_source.mapped and ok_answers == answers


def test_a_noop_index_run_writes_a_missing_layout_file(small_vault, small_index, shared_cache):
    layout_path(small_index).unlink()                         # an index written before the file existed
    index_vault(small_vault, small_index, cache=shared_cache)
    _mapped_equals_sqlite(small_index)


def test_a_folder_hash_leaves_the_layout_file_out(small_vault, tmp_path, shared_cache):
    from search_core.hashing import hash_tree
    from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
    folder = tmp_path / "gold-with-index"
    folder.mkdir()
    (folder / "questions.yaml").write_text("- q: RRF\n", encoding="utf-8")
    db = folder / "index.sqlite"
    index_vault(small_vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    before = hash_tree(folder)
    (small_vault / "ai" / "new.md").write_text("# 새 노트\n\n레이아웃 파일.\n", encoding="utf-8")
    index_vault(small_vault, db, cache=shared_cache)          # the layout file is rewritten
    assert layout_path(db).exists() and hash_tree(folder) == before
