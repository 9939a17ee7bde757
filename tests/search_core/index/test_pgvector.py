"""The dense channel on PostgreSQL + pgvector (search_core.index.pgvector), against a real server.

The channel tests both backends must pass are the existing ones, run on each (the `dense_backend` fixture:
tests/search_core/search/test_results_follow_the_vault.py, test_search_overlap.py). Here: numpy's lists on a
real e5 index, the HNSW option, the table following the index (sync, `index`'s own sync, a stale table
refused), and the errors a user meets without the driver, the server or a valid settings file."""

import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.config import SearchConfig
from search_core.index import pgvector as pv
from search_core.index.indexer import index_vault
from search_core.index.store import connect, get_meta
from search_core.search import channels as ch
from search_core.search.pipeline import Searcher
from search_core.search.query_cache import QueryEmbeddingCache
from tests.helpers import ROOT, free_port
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
from tests.helpers.pgvector import DenseBackend, ranking_difference
from tuner.cli import main
from tuner.data.gold import load_gold

QUESTIONS = [q.query for name in ("demo-tune", "demo-holdout")
             for q in load_gold(ROOT / "experiments" / "gold" / f"{name}.yaml").questions][:40]


@pytest.fixture
def pg(pgvector_dsn):
    backend = DenseBackend("pgvector", pgvector_dsn)
    yield backend
    backend.drop_tables()


def dense_lists(db, queries, depth=50):
    """Each query's dense channel list [(note id, chunk id, score)], through whatever backend `db` has."""
    s = Searcher(db, query_cache=QueryEmbeddingCache(0))
    try:
        vecs = s.embedder.embed(list(queries), is_query=True)
        return [[(h.note_id, h.chunk_id, h.score) for h in ch.dense(s.view, v, depth)] for v in vecs], s.view.dense_backend
    finally:
        s.close()


def hide_settings(db):
    """The index's pgvector settings moved aside (it searches with numpy, and `index` syncs nothing)."""
    path = pv.settings_path(db)
    aside = path.with_name(path.name + ".aside")
    path.rename(aside)
    return lambda: aside.rename(path)


def test_exact_search_gives_numpys_lists_on_a_real_index(demo_index_e5, pg, tmp_path):
    """e5-small's vectors of the demo vault: the same notes, chunks and order at depth 50 (200 rows read),
    the same cosines to float32 rounding (ties closer than that in either order: FLOAT_TIE)."""
    want, backend = dense_lists(demo_index_e5, QUESTIONS)
    assert backend is None
    db = pg.copy_of(demo_index_e5, tmp_path)
    got, backend = dense_lists(db, QUESTIONS)
    assert isinstance(backend, pv.PgvectorDense) and backend.settings.search == "exact"
    assert all(len(w) == 50 for w in want)
    differ = {q: d for q, g, w in zip(QUESTIONS, got, want) if (d := ranking_difference(g, w))}
    assert not differ, differ
    # nearly every list is the same one exactly, in order
    assert sum([x[:2] for x in g] == [x[:2] for x in w] for g, w in zip(got, want)) >= len(QUESTIONS) - 2


def test_the_hnsw_option_builds_pgvectors_index_with_its_settings(demo_index, pg, tmp_path):
    db = pg.copy_of(demo_index, tmp_path, search="hnsw", m=8, ef_construction=32, ef_search=40)
    want, _ = dense_lists(demo_index, QUESTIONS[:20])
    got, backend = dense_lists(db, QUESTIONS[:20])
    assert backend.settings.search == "hnsw" and backend.settings.ef_search == 40
    conn = pv.connect(pg.dsn)
    indexdef = lambda: [r[0] for r in conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s",
                                                  (pv.hnsw_index_name(backend.settings.table),))]
    try:
        assert len(indexdef()) == 1 and "hnsw" in indexdef()[0] and "m='8'" in indexdef()[0]
        assert "ef_construction='32'" in indexdef()[0]
        # 560 vectors, read with ef_search raised to the 200 rows the channel asks for: the graph finds the top 10
        recall = [len({x[1] for x in g[:10]} & {x[1] for x in w[:10]}) / 10 for g, w in zip(got, want)]
        assert sum(recall) / len(recall) >= 0.95, recall
        # other graph settings rebuild the index; exact search drops it
        report = pv.sync(db, pv.PgvectorSettings(dsn=pg.dsn, table=backend.settings.table, search="hnsw", m=12))
        assert report.hnsw_built and "m='12'" in indexdef()[0] and report.mode == "incremental"
        pv.sync(db, pv.PgvectorSettings(dsn=pg.dsn, table=backend.settings.table, search="exact"))
        assert indexdef() == []
    finally:
        conn.close()
    assert pv.read_settings(db).search == "exact"


def test_a_partitioned_table_has_a_graph_per_partition_and_answers_as_one(demo_index, pg, tmp_path):
    """`partitions` 3: the table hash-partitioned by chunk id, an HNSW graph in each, every vector in one of them;
    exact search through it gives numpy's lists; another count loads the table whole, partitioned anew."""
    db = pg.copy_of(demo_index, tmp_path, search="hnsw", m=8, ef_construction=32, partitions=3)
    table = pv.read_settings(db).table
    conn = pv.connect(pg.dsn)
    try:
        parts = [r[0] for r in conn.execute("SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = "
                                            "to_regclass(%s) ORDER BY 1", (table,))]
        assert len(parts) == 3
        graphs = conn.execute("SELECT count(*) FROM pg_indexes WHERE tablename = ANY(%s) AND indexdef LIKE "
                              "'%%USING hnsw%%'", (parts,)).fetchone()[0]
        assert graphs == 3
        counts = [conn.execute(pv._sql("SELECT count(*) FROM {p}", p=p)).fetchone()[0] for p in parts]
        assert all(c > 0 for c in counts) and sum(counts) == pv._table_meta(conn, table)["rows"]
        want, _ = dense_lists(demo_index, QUESTIONS[:20])
        got, backend = dense_lists(db, QUESTIONS[:20])
        recall = [len({x[1] for x in g[:10]} & {x[1] for x in w[:10]}) / 10 for g, w in zip(got, want)]
        assert sum(recall) / len(recall) >= 0.95, recall
        report = pv.sync(db, pv.PgvectorSettings(dsn=pg.dsn, table=table, search="exact", partitions=2))
        assert report.mode == "full" and pv.table_partitions(conn, table) == 2
        got, _ = dense_lists(db, QUESTIONS[:20])
        differ = {q: d for q, g, w in zip(QUESTIONS, got, want) if (d := ranking_difference(g, w))}
        assert not differ, differ
    finally:
        conn.close()


def test_read_rows_past_pgvectors_1000_reads_on_with_an_iterative_scan(demo_index, pg, tmp_path):
    """`read_rows` above pgvector's ef_search limit (1000) reads on with pgvector 0.8's iterative scan and keeps
    the best n of what it read, in exact order: reading every row of the demo's 560, the lists are numpy's."""
    db = pg.copy_of(demo_index, tmp_path, search="hnsw", m=4, ef_construction=8, ef_search=10, read_rows=1500)
    want, _ = dense_lists(demo_index, QUESTIONS[:10])
    got, backend = dense_lists(db, QUESTIONS[:10])
    assert backend.settings.read_rows == 1500 and backend.cost_key()["read_rows"] == 1500
    assert [[x[:2] for x in g[:10]] for g in got] == [[x[:2] for x in w[:10]] for w in want]
    s = Searcher(db)
    try:
        qvec = s.embedder.embed([QUESTIONS[0]], is_query=True)[0]
        assert len(s.view.dense_backend.search(qvec, 20)) == 20
    finally:
        s.close()
    with pytest.raises(SearchCoreError, match="`read_rows` 20001 must be a whole number from 0 to 20000"):
        pv.PgvectorSettings(dsn=pg.dsn, table="t1", read_rows=20_001).validate("settings")


def test_an_index_update_brings_the_table_along(small_vault, small_index, pg, shared_cache):
    """`index` after a note changed: the table's rows are the index's vectors of the new commit, written by
    the update's own sync, and searches through it answer as numpy does."""
    pg.use(small_index)
    note = next(small_vault.rglob("*.md"))
    note.write_text(note.read_text(encoding="utf-8") + "\n\n## 새 절\n\nZyxquartz 색인을 새로 쓴 문단.\n", encoding="utf-8")
    report = index_vault(small_vault, small_index, embedder=FAKE_EMBEDDER, cache=shared_cache)
    assert report.mode == "incremental" and not [w for w in report.warnings if "pgvector" in w], report.warnings
    conn = connect(small_index)
    ids = sorted(r[0] for r in conn.execute("SELECT id FROM chunks WHERE has_vector"))
    generation, token = get_meta(conn, "generation"), get_meta(conn, "generation_token")
    conn.close()
    settings = pv.read_settings(small_index)
    pgc = pv.connect(pg.dsn)
    try:
        rows = sorted(r[0] for r in pgc.execute(pv._sql("SELECT chunk_id FROM {t}", t=settings.table)))
        meta = pv._table_meta(pgc, settings.table)
    finally:
        pgc.close()
    assert rows == ids and (meta["generation"], meta["token"]) == (generation, token)
    got, backend = dense_lists(small_index, ["Zyxquartz 색인", "검색"])
    assert backend is not None
    restore = hide_settings(small_index)
    want, _ = dense_lists(small_index, ["Zyxquartz 색인", "검색"])
    restore()
    assert [[x[:2] for x in g] for g in got] == [[x[:2] for x in w] for w in want]
    # nothing changed since: a sync writes nothing and reads no diff
    assert pv.sync(small_index).mode == "current"


def test_a_stale_table_is_refused_with_the_fix(small_vault, small_index, pg, shared_cache):
    """The index moved on without its table (updated while the settings were away, then rebuilt): a search
    through the table is refused, naming the generations and the command that syncs; after it, it answers."""
    pg.use(small_index)
    restore = hide_settings(small_index)
    note = next(small_vault.rglob("*.md"))
    note.write_text(note.read_text(encoding="utf-8") + "\n\n덧붙인 문단.\n", encoding="utf-8")
    index_vault(small_vault, small_index, embedder=FAKE_EMBEDDER, cache=shared_cache)
    restore()
    s = Searcher(small_index)
    with pytest.raises(pv.StaleTableError, match=r"holds generation 1 of .*, this search reads generation 2 of .*"
                                                 r"stale; run `autoresearch pgvector sync --db "):
        s.search("검색", SearchConfig(embedder=FAKE_EMBEDDER))
    s.close()
    report = pv.sync(small_index)
    assert report.mode == "incremental" and report.inserted and report.deleted
    s = Searcher(small_index)
    assert s.search("검색", SearchConfig(embedder=FAKE_EMBEDDER)).hits
    s.close()
    # a full rebuild is another build (a new generation token): its first generation is not the table's
    restore = hide_settings(small_index)
    index_vault(small_vault, small_index, embedder=FAKE_EMBEDDER, cache=shared_cache, full=True)
    restore()
    s = Searcher(small_index)
    with pytest.raises(pv.StaleTableError, match="holds generation 2 of .*, this search reads generation 1 of .* stale; run `autoresearch pgvector sync"):
        s.search("검색", SearchConfig(embedder=FAKE_EMBEDDER))
    s.close()
    # the rebuilt file has no change record (nor the table's commit in one): compared key by key, once
    report = pv.sync(small_index)
    assert report.mode == "incremental" and report.keys_read == report.rows, report
    assert_table_holds_the_index(pg.dsn, small_index)
    assert pv.sync(small_index).keys_read == 0


def table_state(dsn, table):
    """{chunk id: (note id, ord, text hash, vector)} of a table."""
    conn = pv.connect(dsn)
    try:
        return {r[0]: (r[1], r[2], r[3], np.array(json.loads(r[4]), np.float32))
                for r in conn.execute(pv._sql("SELECT chunk_id, note_id, ord, text_hash, embedding::text FROM {t}",
                                              t=table))}
    finally:
        conn.close()


def assert_table_holds_the_index(dsn, db):
    """Every row of the table is the index's chunk of that id with its vector, and every chunk vector is there."""
    from search_core.index.layout import read_layout
    from search_core.index.store import open_index
    conn = open_index(db)
    try:
        want = {r[0]: r[1:] for r in conn.execute("SELECT id, note_id, ord, text_hash FROM chunks WHERE has_vector")}
        layout, _ = read_layout(conn, db)
        generation, token = get_meta(conn, "generation"), get_meta(conn, "generation_token")
    finally:
        conn.close()
    table = pv.read_settings(db).table
    got = table_state(dsn, table)
    assert sorted(got) == sorted(want)
    assert all(got[c][:3] == tuple(want[c]) for c in want)
    row = {int(c): i for i, c in enumerate(layout.vec_ids)}
    assert all(np.allclose(got[c][3], layout.matrix[row[c]], atol=1e-6) for c in want)
    pgc = pv.connect(dsn)
    try:
        meta = pv._table_meta(pgc, table)
    finally:
        pgc.close()
    assert (meta["generation"], meta["token"], meta["rows"]) == (generation, token, len(want))


def chunk_ids(db, note_ids):
    conn = connect(db)
    try:
        return {r[0] for n in note_ids for r in conn.execute("SELECT id FROM chunks WHERE note_id = ?", (n,))}
    finally:
        conn.close()


def edit_vault(vault):
    """One note rewritten, one deleted, one added: the notes they touch (by id)."""
    notes = sorted(vault.rglob("*.md"))
    changed, deleted = notes[0], notes[1]
    changed.write_text(changed.read_text(encoding="utf-8") + "\n\n## 새 절\n\nZyxquartz 색인을 새로 쓴 문단.\n",
                       encoding="utf-8")
    deleted.unlink()
    (vault / "added-note.md").write_text("# 더한 노트\n\n벡터 표가 바뀐 줄만 읽는지 보는 노트.\n", encoding="utf-8")
    ids = lambda p: p.relative_to(vault).with_suffix("").as_posix()
    return [ids(changed), ids(deleted), "added-note"]


def edit_behind_the_table(vault, db, cache):
    """Rewrite, delete and add notes (edit_vault) and index them with the settings file hidden, so the table
    is not synced: the chunk ids of the touched notes before and after."""
    restore = hide_settings(db)
    touched = edit_vault(vault)
    before = chunk_ids(db, touched)
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=cache)
    restore()
    return before, chunk_ids(db, touched)


def grow(vault, index, cache, notes=40):
    """`notes` more notes in the vault, indexed: a table with rows enough that reading all would show."""
    for i in range(notes):
        (vault / f"filler-{i:02d}.md").write_text(f"# 채움 {i}\n\n벡터 {i}번 노트의 본문, 검색 {i * 7}.\n", encoding="utf-8")
    index_vault(vault, index, embedder=FAKE_EMBEDDER, cache=cache)


def test_a_sync_reads_only_the_chunks_the_change_record_names(small_vault, small_index, pg, shared_cache):
    """After a note is rewritten, one deleted and one added, the sync reads the keys of the chunks that
    changed (removed and added, from the index's change record), not every key of both sides, and leaves the
    table holding exactly the index's rows and vectors. Nothing changed since: nothing read."""
    grow(small_vault, small_index, shared_cache)
    pg.use(small_index)
    total = len(table_state(pg.dsn, pv.read_settings(small_index).table))
    before, after = edit_behind_the_table(small_vault, small_index, shared_cache)
    report = pv.sync(small_index)
    assert report.mode == "incremental" and report.inserted == len(after - before) > 0
    assert report.deleted == len(before - after) > 0
    assert report.keys_read == len(before ^ after) < total / 4, (report, total)
    assert_table_holds_the_index(pg.dsn, small_index)
    # the record is the index's own: a later `index` run's own sync follows it too
    note = small_vault / "added-note.md"
    note.write_text(note.read_text(encoding="utf-8") + "\n\n두 번째 고침.\n", encoding="utf-8")
    report = index_vault(small_vault, small_index, embedder=FAKE_EMBEDDER, cache=shared_cache)
    assert not [w for w in report.warnings if "pgvector" in w], report.warnings
    assert_table_holds_the_index(pg.dsn, small_index)
    report = pv.sync(small_index)
    assert report.mode == "current" and report.keys_read == 0


def change_record(db):
    """The chunk ids of the index's change record, in order of change."""
    conn = connect(db)
    try:
        return [r[0] for r in conn.execute(f"SELECT chunk_id FROM {pv.CHANGES} ORDER BY seq")]
    finally:
        conn.close()


def test_the_change_record_keeps_only_what_the_table_has_not_read(small_vault, small_index, pg, shared_cache):
    """A sync prunes the changes its table has read: after it the record is empty; the next changes are all it
    then holds (numbered past the pruned ones: the sync after reads them and no others), and that sync empties it."""
    grow(small_vault, small_index, shared_cache)
    pg.use(small_index)
    assert change_record(small_index) == []
    restore = hide_settings(small_index)
    edit_vault(small_vault)
    index_vault(small_vault, small_index, embedder=FAKE_EMBEDDER, cache=shared_cache)
    first = change_record(small_index)
    assert first
    restore()
    report = pv.sync(small_index)
    assert report.pruned == len(first) and change_record(small_index) == []
    before, after = edit_behind_the_table(small_vault, small_index, shared_cache)
    second = change_record(small_index)
    assert set(second) == before ^ after, (second, before, after)
    report = pv.sync(small_index)
    assert report.mode == "incremental" and report.keys_read == len(set(second)), report
    assert report.pruned == len(second) and change_record(small_index) == []
    assert_table_holds_the_index(pg.dsn, small_index)


OLD_CHANGE_LOG = (     # the record as made before it was pruned: numbered by the largest change left
    f"CREATE TABLE {pv.CHANGES} (seq INTEGER PRIMARY KEY, chunk_id INTEGER NOT NULL)",
    f"CREATE TABLE {pv.COMMITS} (token TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID",
    f"CREATE TRIGGER pgvector_chunk_added AFTER INSERT ON chunks BEGIN "
    f"INSERT INTO {pv.CHANGES}(chunk_id) VALUES (NEW.id); END",
    f"CREATE TRIGGER pgvector_commit AFTER INSERT ON meta WHEN NEW.key = 'generation_token' BEGIN "
    f"INSERT OR REPLACE INTO {pv.COMMITS}(token, seq) VALUES (NEW.value, (SELECT coalesce(max(seq), 0) FROM {pv.CHANGES})); END",
)


def test_a_record_made_before_pruning_keeps_its_changes_and_numbers(small_index):
    """An index whose change record numbers by the largest change left: installing moves it to a record that
    never renumbers (its changes and their numbers kept, the next number past every commit entered)."""
    conn = connect(small_index)
    try:
        with conn:
            for stmt in OLD_CHANGE_LOG:
                conn.execute(stmt)
            conn.executemany(f"INSERT INTO {pv.CHANGES}(seq, chunk_id) VALUES (?, ?)", [(3, 11), (4, 12)])
            conn.execute(f"INSERT INTO {pv.COMMITS}(token, seq) VALUES ('\"a\"', 4), ('\"b\"', 9)")
    finally:
        conn.close()
    pv.install_change_log(small_index)
    pv.install_change_log(small_index)          # idempotent
    conn = connect(small_index)
    try:
        assert conn.execute(f"SELECT seq, chunk_id FROM {pv.CHANGES} ORDER BY seq").fetchall() == [(3, 11), (4, 12)]
        with conn:
            conn.execute(f"DELETE FROM {pv.CHANGES}")
            conn.execute("DELETE FROM chunks WHERE id = (SELECT min(id) FROM chunks)")
        assert [r[0] for r in conn.execute(f"SELECT seq FROM {pv.CHANGES}")] == [10]
        triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        assert set(pv.CHANGE_LOG_TRIGGERS) <= triggers
    finally:
        conn.close()


SYNC_HELD = textwrap.dedent("""
    import os, sys, threading
    from pathlib import Path
    from search_core.index import pgvector as pv
    db, marker, attr = sys.argv[1:4]
    real = getattr(pv, attr)

    def held(*args, **kw):
        out = real(*args, **kw)
        Path(marker).write_text(str(os.getpid()))
        threading.Event().wait()          # until killed
        return out

    setattr(pv, attr, held)
    pv.sync(Path(db))
""")


@pytest.mark.slow
@pytest.mark.parametrize("point", ["copy_rows", "write_meta"])
def test_a_killed_sync_loses_nothing(small_vault, small_index, pg, shared_cache, tmp_path, point):
    """A sync killed with SIGKILL inside its PostgreSQL transaction (after the changed rows were deleted and
    written: `copy_rows`; after the table's commit was recorded, just before COMMIT: `write_meta`) leaves the
    table at the commit it held, refused as stale; the next sync brings every change, through the record."""
    grow(small_vault, small_index, shared_cache)
    pg.use(small_index)
    table = pv.read_settings(small_index).table
    held_before = table_state(pg.dsn, table)
    restore = hide_settings(small_index)
    edit_vault(small_vault)
    index_vault(small_vault, small_index, embedder=FAKE_EMBEDDER, cache=shared_cache)
    restore()
    unread = change_record(small_index)
    marker = tmp_path / "held"
    child = subprocess.Popen([sys.executable, "-c", SYNC_HELD, str(small_index), str(marker), point],
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        while not marker.exists():
            assert child.poll() is None, child.stdout.read()
            assert time.monotonic() < deadline, "the sync never reached " + point
            time.sleep(0.05)
    finally:
        child.kill()
        child.wait()
    # PostgreSQL rolls the dead client's transaction back: the table is the one before, whole, and the change
    # record still holds every change it has not read
    got = table_state(pg.dsn, table)
    assert sorted(got) == sorted(held_before)
    assert change_record(small_index) == unread != []
    s = Searcher(small_index)
    with pytest.raises(pv.StaleTableError, match=r"holds generation \d+ of .*, this search reads generation \d+ of .* stale"):
        s.search("검색", SearchConfig(embedder=FAKE_EMBEDDER))
    s.close()
    report = pv.sync(small_index)
    assert report.mode == "incremental" and 0 < report.keys_read < len(held_before) / 4, report
    assert_table_holds_the_index(pg.dsn, small_index)
    assert change_record(small_index) == []


def test_the_cli_syncs_and_remembers_the_settings(small_index, pg):
    runner = CliRunner()
    out = runner.invoke(main, ["pgvector", "sync", "--db", str(small_index)])
    assert out.exit_code != 0 and "give --dsn" in out.output
    pg.tables.append(pv.default_table(small_index))
    out = runner.invoke(main, ["pgvector", "sync", "--db", str(small_index), "--dsn", pg.dsn, "--search", "hnsw"])
    assert out.exit_code == 0, out.output
    assert "full sync of generation 1" in out.output and "HNSW index built" in out.output
    settings = pv.read_settings(small_index)
    assert (settings.dsn, settings.search, settings.m, settings.ef_construction, settings.ef_search,
            settings.partitions) == (pg.dsn, "hnsw", 32, 200, 800, 4)
    table = pv.default_table(small_index)
    conn = pv.connect(pg.dsn)
    try:
        assert pv.table_partitions(conn, table) == 4
    finally:
        conn.close()
    out = runner.invoke(main, ["pgvector", "sync", "--db", str(small_index), "--ef-search", "300"])
    assert out.exit_code == 0 and "current sync" in out.output, out.output
    assert pv.read_settings(small_index).ef_search == 300


# ---------------------------------------------------------------- errors (no server needed)

def test_no_server_names_the_dsn_tried_without_its_password(small_index):
    dsn = f"postgresql://someone:sekret@127.0.0.1:{free_port()}/vectors"
    with pytest.raises(SearchCoreError) as e:
        pv.sync(small_index, pv.PgvectorSettings(dsn=dsn, table="t1"))
    msg = str(e.value)
    assert f"cannot connect to PostgreSQL at " in msg and "someone" in msg and "vectors" in msg, msg
    assert "sekret" not in msg and "start the server" in msg, msg
    assert not pv.settings_path(small_index).exists()       # a failed sync does not switch the index over


def test_without_the_driver_a_search_says_what_to_install(small_index, monkeypatch):
    pv.write_settings(small_index, pv.PgvectorSettings(dsn="postgresql://me@db.example:5432/vault", table="t1"))
    monkeypatch.setitem(sys.modules, "psycopg", None)          # `import psycopg` fails as it does uninstalled
    with pytest.raises(SearchCoreError, match=r"pip install 'autoresearch\[pgvector\]'.*db.example.*delete that file"):
        Searcher(small_index)
    with pytest.raises(SearchCoreError, match=r"pip install 'autoresearch\[pgvector\]' \(to reach PostgreSQL at .*db.example"):
        pv.sync(small_index)


@pytest.mark.parametrize("text, message", [
    ('dsn = "postgresql://x@h/d"\ntable = "t1"\nsearch = "ivfflat"\n', "`search` 'ivfflat' is not one of exact, hnsw"),
    ('dsn = "postgresql://x@h/d"\ntable = "t1"\nm = 64\nef_construction = 64\n', "at least twice `m` \\(128\\)"),
    ('dsn = "postgresql://x@h/d"\ntable = "T; DROP"\n', "not a plain table name"),
    ('dsn = "postgresql://x@h/d"\ntable = "t1"\nef = 3\n', "unknown key\\(s\\) \\['ef'\\]"),
    ('table = "t1"\n', "missing \\['dsn'\\]"),
])
def test_a_bad_settings_file_is_refused_with_what_is_wrong(small_index, text, message):
    pv.settings_path(small_index).write_text(text, encoding="utf-8")
    with pytest.raises(SearchCoreError, match=message):
        Searcher(small_index)
