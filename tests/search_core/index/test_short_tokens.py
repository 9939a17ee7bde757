"""Short-token posting lists stored at index time answer exactly what the LIKE scan answers,
stay right through incremental updates, and an index written without them still searches."""

import shutil

import numpy as np
import pytest

from search_core.index import short_tokens
from search_core.search.channels import TOKEN_RE, sparse
from search_core.index.indexer import index_vault
from search_core.search.pipeline import Searcher
from search_core.index.store import connect
from search_core.search.view import IndexView, ShortTokenIndex
from tests.helpers import write_vault


def like_scan(conn, token):
    pat = f"%{token}%"
    return sorted(r[0] for r in conn.execute("SELECT id FROM chunks WHERE text LIKE ? OR context LIKE ?", (pat, pat)))


def short_tokens_of(conn):
    toks = set()
    for ctx, text in conn.execute("SELECT context, text FROM chunks"):
        for tok in TOKEN_RE.findall(f"{ctx} {text}".lower()):
            toks.update(tok[i:i + 2] for i in range(len(tok) - 1))
            toks.update(tok)
    return sorted(toks) + ["없는", "zq", "é"]


def whole_table(conn):
    return {c: np.frombuffer(b, short_tokens.DTYPE).tolist() for c, b in conn.execute("SELECT code, chunks FROM short_postings")}


def test_stored_postings_answer_what_like_and_the_memory_index_answer(small_index):
    conn = connect(small_index)
    assert short_tokens.is_built(conn)
    stored, memory = short_tokens.StoredShortTokens(conn), ShortTokenIndex(conn)
    toks = short_tokens_of(conn)
    assert len(toks) > 100
    for tok in toks:
        got = stored.chunks_containing(tok).tolist()
        assert got == memory.chunks_containing(tok).tolist(), tok
        if tok.isascii():            # SQLite's LIKE folds ASCII case only; Korean has no case
            assert got == like_scan(conn, tok), tok
    conn.close()


def test_a_build_in_slices_writes_the_lists_of_a_build_in_one(small_index, tmp_path):
    db = tmp_path / "copy.sqlite"
    copy = connect(db)
    connect(small_index, readonly=True).backup(copy)
    copy.close()
    conn = connect(db)
    chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    assert chunks > 5 and len(list(short_tokens._slices(conn, 1))) == chunks     # a slice per chunk
    conn.execute("BEGIN")
    short_tokens.build(conn, slice_chars=10 ** 12)                   # the whole vault in one slice
    whole = whole_table(conn)
    assert len(whole) > 100
    short_tokens.build(conn, slice_chars=1)
    assert whole_table(conn) == whole
    conn.execute("ROLLBACK")
    conn.close()


def test_incremental_updates_keep_the_lists_equal_to_a_fresh_build(small_vault, tmp_path, shared_cache):
    db = tmp_path / "idx.sqlite"
    index_vault(small_vault, db, cache=shared_cache)
    (small_vault / "ai" / "rrf.md").write_text("---\ntitle: RRF\n---\n# RRF\n\nk 값은 60, AI 팀 검색 실험.\n",
                                               encoding="utf-8")
    (small_vault / "life" / "kimchi.md").unlink()
    write_vault(small_vault, {"new/ml.md": "# ML\n\nAI 모델과 벡터 DB. 큐(queue)는 FIFO.\n"})
    r = index_vault(small_vault, db, cache=shared_cache)
    assert (r.changed, r.deleted, r.added) == (1, 1, 1)
    conn = connect(db)
    after_update = whole_table(conn)
    conn.execute("BEGIN")
    short_tokens.build(conn)
    assert whole_table(conn) == after_update
    conn.execute("ROLLBACK")
    stored = short_tokens.StoredShortTokens(conn)
    for tok in ("ai", "팀", "큐", "돼지", "db"):      # "돼지" was only in the deleted note
        assert stored.chunks_containing(tok).tolist() == like_scan(conn, tok), tok
    assert stored.chunks_containing("돼지").tolist() == []
    conn.close()


def drop_postings(db):
    conn = connect(db)
    conn.execute("DROP TABLE short_postings")
    conn.execute("DELETE FROM meta WHERE key = ?", (short_tokens.META_KEY,))
    conn.close()


def test_an_index_written_without_postings_still_searches_and_any_index_run_adds_them(
        small_vault, small_index, tmp_path, shared_cache):
    query = "AI 팀 회식 메뉴"
    s = Searcher(small_index)
    assert isinstance(s.view.short_index(), short_tokens.StoredShortTokens)   # the first query builds nothing
    with_postings = sparse(s.conn, s.view, query, 10)
    s.close()
    old = tmp_path / "old.sqlite"
    shutil.copy(small_index, old)
    drop_postings(old)
    s = Searcher(old)
    assert isinstance(s.view.short_index(), ShortTokenIndex)                  # built in memory, as before
    assert sparse(s.conn, s.view, query, 10) == with_postings
    fingerprint = s.fingerprint
    s.close()
    r = index_vault(small_vault, old, cache=shared_cache)                      # nothing changed in the vault
    assert (r.added, r.changed, r.deleted) == (0, 0, 0)
    s = Searcher(old)
    assert isinstance(s.view.short_index(), short_tokens.StoredShortTokens)
    assert s.fingerprint == fingerprint                                        # derived data, same index
    assert sparse(s.conn, s.view, query, 10) == with_postings
    s.close()


def test_token_codes_reject_what_they_cannot_answer():
    assert short_tokens.token_code("팀") == ord("팀")
    assert short_tokens.token_code("AI") == (ord("a") << 21) | ord("i")
    with pytest.raises(ValueError, match="1- or 2-character"):
        short_tokens.token_code("abc")
