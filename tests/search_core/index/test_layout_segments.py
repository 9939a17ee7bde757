"""The layout's rows files under updates: an update appends the rows of what changed as a segment padded to
layout.ROW_BLOCK and marks the rows it replaced dead, and the dense channel then answers exactly as over a
fresh build of the same vault (the same notes, chunks and float scores, ties in vault order); an update
killed between its layout files and its commit leaves the last committed index mapped whole, and the next
update completes. The test embedder makes the vectors; two notes of one text make exact ties."""

import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from search_core.index.indexer import index_vault
from search_core.index.layout import (COUNTS, IDS, NAMES, ROW_BLOCK, TAILS, companion_files, layout_path, pad_rows,
                                      rows_named_by, rows_path)
from search_core.index.store import connect
from search_core.search import channels as ch
from search_core.search.view import IndexView
from tests.helpers import DEMO_VAULT, child_env, kill_at_marker
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER, HashedNgramEmbedder

TWIN = "---\ntitle: 쌍둥이 노트\n---\n# 쌍둥이\n\nRRF 융합과 BM25 점수를 함께 쓰는 하이브리드 검색의 쌍둥이 문단.\n"
QUERIES = ["RRF 융합 점수", "하이브리드 검색 쌍둥이", "HNSW 그래프 인덱스", "청킹 전략", "리랭커 교차 인코더",
           "쿼리 재작성", "임베딩 모델 비교"]


@pytest.fixture
def vault(tmp_path):
    v = tmp_path / "vault"
    shutil.copytree(DEMO_VAULT / "ai" / "rag", v)
    (v / "twin-b.md").write_text(TWIN, encoding="utf-8")
    (v / "twin-a.md").write_text(TWIN.replace("쌍둥이 문단", "첫 문단"), encoding="utf-8")
    return v


def dense_lists(db, depth=10):
    """Per query: the dense channel's list as (note, ord, score), and every live row's product by (note, ord)."""
    emb = HashedNgramEmbedder()
    view = IndexView.open(db)
    try:
        ords = dict(((cid, (nid, o)) for cid, nid, o in view.conn.execute("SELECT id, note_id, ord FROM chunks")))
        out = []
        for q in QUERIES:
            qvec = emb.embed([q], is_query=True)[0].astype(np.float32)
            product = ch.dense_product(view, qvec)
            hits = ch.dense(view, qvec, depth, product)
            live = np.flatnonzero(view.vec_ids >= 0)
            rows = {ords[int(view.vec_ids[r])]: product[r].tobytes() for r in live}
            out.append(([(h.note_id, ords[h.chunk_id][1], h.score) for h in hits], rows))
        return out, view.layout_source, view.layout
    finally:
        view.close()


def test_after_a_one_note_edit_the_dense_channel_equals_a_fresh_builds(vault, tmp_path, shared_cache):
    db = tmp_path / "updated" / "index.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    first_rows = rows_path(db, IndexView.open(db).layout.files[0].name)
    size_before = first_rows.stat().st_size
    # twin-a takes twin-b's text: its new rows are appended after twin-b's, and every query that reaches them
    # ties the two notes exactly; a fresh build puts twin-a (vault order) first, and so must the update
    (vault / "twin-a.md").write_text(TWIN, encoding="utf-8")
    report = index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    assert report.mode == "incremental" and report.changed == 1
    fresh = tmp_path / "fresh" / "index.sqlite"
    index_vault(vault, fresh, embedder=FAKE_EMBEDDER, cache=shared_cache)

    got, got_source, layout = dense_lists(db)
    want, want_source, fresh_layout = dense_lists(fresh)
    assert got_source.mapped and want_source.mapped
    # the update appended one segment to the same rows file, padded, and marked twin-a's old rows dead
    chunks = layout.files[0]
    assert rows_path(db, chunks.name) == first_rows and len(chunks.segments) == 2
    start, n, _ = chunks.segments[-1]
    assert n % ROW_BLOCK == 0 and start % ROW_BLOCK == 0 and n == ROW_BLOCK
    assert first_rows.stat().st_size == size_before + n * layout.matrix.shape[1] * 4
    assert (layout.vec_ids[:start] < 0).sum() > (fresh_layout.vec_ids < 0).sum()
    assert not np.array_equal(layout.vec_ids[layout.vec_ids >= 0], fresh_layout.vec_ids[fresh_layout.vec_ids >= 0])
    ties = 0
    for q, ((g_list, g_rows), (w_list, w_rows)) in zip(QUERIES, zip(got, want)):
        assert g_list == w_list, q                     # notes, chunks, scores as exact floats, in order
        assert g_rows == w_rows, q                     # every chunk's product, bit for bit
        ties += any(a[2] == b[2] for a, b in zip(w_list, w_list[1:]))
    assert ties, "no query tied two notes: the tie rule went untested"


HOLDER = textwrap.dedent("""
    import os, sys, threading
    from pathlib import Path
    vault, db, cache, marker = sys.argv[1:5]
    from search_core.models import register_embedder
    from tests.helpers.fake_embedder import NAME, HashedNgramEmbedder
    register_embedder(NAME, HashedNgramEmbedder)
    from search_core.index import indexer
    real = indexer.refresh_layout

    def held(*args, **kw):
        out = real(*args, **kw)                 # the layout files written, the transaction not committed
        Path(marker).write_text(str(os.getpid()))
        threading.Event().wait()                # until killed
        return out

    indexer.refresh_layout = held
    indexer.index_vault(vault, db, embedder=NAME, cache=cache)
""")


@pytest.mark.slow
def test_an_update_killed_before_its_commit_leaves_the_last_commit_mapped_whole(vault, tmp_path, shared_cache):
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    before, _, committed = dense_lists(db)
    rows_file, committed_rows = rows_path(db, committed.files[0].name), committed.files[0].rows

    (vault / "twin-a.md").write_text(TWIN, encoding="utf-8")
    (vault / "new-note.md").write_text("# 새 노트\n\nRRF 융합 점수와 청킹 전략을 같이 본다.\n", encoding="utf-8")
    marker = tmp_path / "held"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(vault), str(db), str(shared_cache), str(marker)],
                            env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    kill_at_marker(proc, marker, 180, "the update's layout files")

    # the killed update appended rows and wrote its small file; the committed one is kept beside it and used
    dim = committed.matrix.shape[1]
    assert rows_file.stat().st_size > committed_rows * dim * 4
    assert rows_path(db, committed.files[0].name + IDS).stat().st_size > committed_rows * 8
    order = committed.order                    # the order log's entries for the two notes, appended too
    assert rows_path(db, order.name + COUNTS).stat().st_size > order.entries * 8
    after_kill, source, _ = dense_lists(db)
    assert source.mapped and source.reason.endswith(".prev"), source.reason
    assert after_kill == before

    report = index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    assert report.mode == "incremental" and (report.added, report.changed) == (1, 1)
    fresh = tmp_path / "fresh" / "index.sqlite"
    index_vault(vault, fresh, embedder=FAKE_EMBEDDER, cache=shared_cache)
    got, source, layout = dense_lists(db)
    want, _, _ = dense_lists(fresh)
    assert source.mapped and source.reason.endswith(layout_path(db).name), source.reason
    assert got == want
    # the killed update's tail was cut before the append: the file holds exactly the rows the layout maps
    assert rows_path(db, layout.files[0].name) == rows_file
    assert rows_file.stat().st_size == layout.files[0].rows * dim * 4
    assert rows_path(db, layout.files[0].name + IDS).stat().st_size == layout.files[0].rows * 8
    assert layout.order.name == order.name and layout.order.entries == order.entries + 2
    assert [rows_path(db, order.name + t).stat().st_size for t in ("", COUNTS, NAMES)] == \
        [layout.order.chunks * 8, layout.order.entries * 8, layout.order.name_bytes]
    # and no file is left that neither this commit's layout nor the one kept before it names
    prev = layout_path(db).with_name(layout_path(db).name + ".prev")
    named = {f.name for f in layout.files} | {layout.order.name} | rows_named_by(prev)
    assert set(companion_files(db)) == {layout_path(db), prev,
                                        *(p for n in named for t in TAILS if (p := rows_path(db, n + t)).exists())}


def _write(db, generation, previous, keep, ids, mat):
    """One commit's layout files through write_rows and write_layout, mapped back."""
    from search_core.index.layout import VaultLayout, map_layout, write_layout, write_order, write_rows
    dim = mat.shape[1]
    chunks = write_rows(db, "chunks", generation, previous, keep, ids, mat, dim)
    ents = write_rows(db, "entities", generation, previous, None if previous is None else previous.entity_ids >= 0,
                      np.zeros(0, np.int64), np.zeros((0, dim), np.float32), dim)
    empty = np.zeros((0, dim), np.float32)
    layout = VaultLayout(("n",), np.asarray([0, 0], np.int64), np.zeros(0, np.int64), chunks.ids, empty, ents.ids, empty)
    order = write_order(db, (), np.zeros(1, np.int64), np.zeros(0, np.int64))
    write_layout(db, layout, generation, "t", (chunks.file, ents.file), order)
    return map_layout(layout_path(db), generation, "t"), chunks.written


def test_appended_rows_give_each_live_row_a_fresh_files_product_bit_for_bit(tmp_path):
    """At 20,003 rows OpenBLAS computes the last rows of a matrix (its kernel's tail) with another order of
    sums: unpadded, 1-5 of them differ in the last bit from the same rows elsewhere. Every segment padded to
    ROW_BLOCK, an update's rows (7 marked dead, 5 appended) give every live row the product a fresh file of
    the same rows gives, wherever each sits."""
    from search_core.search.view import matvec
    rng = np.random.default_rng(0)
    n, dim = 20_003, 256
    mat = rng.standard_normal((n + 5, dim)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    ids = np.arange(1, n + 6, dtype=np.int64)
    base, _ = _write(tmp_path / "u.sqlite", 1, None, None, ids[:n], mat[:n])
    dead = rng.choice(n, 7, replace=False)
    keep = np.ones(len(base.vec_ids), bool)
    keep[dead] = False
    updated, written = _write(tmp_path / "u.sqlite", 2, base, keep, ids[n:], mat[n:])
    assert written == pad_rows(5) * (dim * 4 + 8)              # the appended segment and its ids only
    live = np.setdiff1d(np.arange(n + 5), dead)
    fresh, _ = _write(tmp_path / "f.sqlite", 1, None, None, ids[live][::-1], mat[live][::-1])
    for q in (mat[3], mat[n - 1], mat[n + 4], rng.standard_normal(dim).astype(np.float32)):
        got, want = matvec(updated.matrix, q), matvec(fresh.matrix, q)
        got_by_id = dict(zip(updated.vec_ids[updated.vec_ids >= 0].tolist(), got[updated.vec_ids >= 0].tolist()))
        want_by_id = dict(zip(fresh.vec_ids[fresh.vec_ids >= 0].tolist(), want[fresh.vec_ids >= 0].tolist()))
        assert got_by_id == want_by_id
