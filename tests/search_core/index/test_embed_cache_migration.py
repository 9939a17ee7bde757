"""The embedding cache's migration seen from outside: it reports progress while it moves the rows, an open in
another process waits for it (as long as the caller says) and then finds it done, and an older autoresearch that
meets a migrated cache keeps working, keeps the file and says how to get its vectors back."""

import importlib.util
import io
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from search_core import SearchCoreError
from search_core.index import embed_cache
from search_core.index.embed_cache import FORMAT, MIGRATION_STAGE, EmbeddingCache, text_hash
from search_core.index.indexer import index_vault
from search_core.index.store import connect
from tests.helpers import ROOT, SMALL_VAULT, child_env, write_vault
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
from tuner.progress import StageProgress

DIM = 384
ROW = DIM * 4
DEADLINE_S = 300


def _vectors(prefix: str, n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {text_hash(f"{prefix} {i}"): rng.standard_normal(DIM).astype(np.float32) for i in range(n)}


def _write_layout_before(path, rows: dict, model: str = "m") -> None:
    """A cache as the layout before wrote it: (model, text_hash) keyed, WITHOUT ROWID, a `used` tick per row."""
    old = connect(path)
    old.execute("CREATE TABLE vectors (model TEXT NOT NULL, text_hash TEXT NOT NULL, vec BLOB NOT NULL, "
                "used INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (model, text_hash)) WITHOUT ROWID")
    old.execute("CREATE INDEX vectors_by_use ON vectors (used)")
    old.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
    old.executemany("INSERT INTO vectors VALUES (?, ?, ?, 1)", [(model, h, v.tobytes()) for h, v in rows.items()])
    old.execute("INSERT INTO meta VALUES ('bytes', ?), ('clock', 1)",
                (sum(len(v.tobytes()) for v in rows.values()),))
    old.close()


def _older_autoresearch():
    """The release before the compact layout: its embedding cache module, as it shipped."""
    spec = importlib.util.spec_from_file_location("embed_cache_before_compact",
                                                  ROOT / "tests" / "helpers" / "embed_cache_before_compact.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_migration_reports_its_progress_as_plain_lines_when_not_a_terminal(tmp_path, monkeypatch):
    monkeypatch.setattr(embed_cache, "MIGRATION_BATCH", 100)
    path = tmp_path / "cache.sqlite"
    rows = _vectors("old", 450)
    _write_layout_before(path, rows)
    out = io.StringIO()
    cache = EmbeddingCache(path)
    cache.progress = StageProgress(stream=out, tty=False)
    assert len(cache.get_many("m", list(rows))) == 450
    cache.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == f"{MIGRATION_STAGE}: 0/450 (0%)", lines
    assert lines[-1] == f"{MIGRATION_STAGE}: 450/450 (100%) done", lines


def test_index_reports_the_migration_of_its_cache_through_its_progress(tmp_path):
    """The index step that meets a cache in the layout before says so while it moves it, then in its report."""
    vault = write_vault(tmp_path / "vault", SMALL_VAULT)
    cache_file = tmp_path / "cache.sqlite"
    _write_layout_before(cache_file, _vectors("someone else's", 30))
    out = io.StringIO()
    rep = index_vault(vault, tmp_path / "idx.sqlite", embedder=FAKE_EMBEDDER, cache=cache_file,
                      progress=StageProgress(stream=out, tty=False))
    assert f"{MIGRATION_STAGE}: 30/30 (100%) done" in out.getvalue(), out.getvalue()
    assert any("moved to its compact layout: 30 vectors kept" in w for w in rep.warnings), rep.warnings


# A second process that migrates the cache and holds its transaction at the first progress report until the
# test writes a line to its stdin
MIGRATOR = textwrap.dedent("""
    import sys
    from search_core.index.embed_cache import EmbeddingCache
    cache = EmbeddingCache(sys.argv[1])
    def held(stage, done, total):
        if done == 0:
            print("migrating", flush=True)
            sys.stdin.readline()
    cache.progress = held
    cache.conn                       # the open migrates
    print("migrated" if cache.migrated else "not migrated", flush=True)
""")


def _migrator(path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", MIGRATOR, str(path)], env=child_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line == "migrating\n", line + proc.stderr.read()
    return proc


def _release(proc: subprocess.Popen) -> str:
    out, err = proc.communicate("go\n", timeout=DEADLINE_S)
    assert proc.returncode == 0, err
    return out


@pytest.mark.slow
def test_an_open_waits_for_another_process_s_migration_and_finds_it_done(tmp_path, monkeypatch):
    path = tmp_path / "cache.sqlite"
    rows = _vectors("old", 200)
    _write_layout_before(path, rows)
    proc = _migrator(path)                            # holds the migration's write lock
    got, failed = {}, []
    asking = threading.Event()                        # set as this process's open asks for the write lock
    real_atomic = embed_cache.atomic

    def atomic(conn):
        asking.set()
        return real_atomic(conn)

    monkeypatch.setattr(embed_cache, "atomic", atomic)

    def open_here():
        try:
            cache = EmbeddingCache(path, migration_wait_s=DEADLINE_S)
            got.update(cache.get_many("m", list(rows)))
            got["migrated here"] = cache.migrated
            cache.close()
        except Exception as e:                        # noqa: BLE001 (reported below)
            failed.append(e)

    waiter = threading.Thread(target=open_here)
    waiter.start()
    try:
        assert asking.wait(DEADLINE_S), failed
        assert _release(proc).strip() == "migrated"
    finally:
        waiter.join(DEADLINE_S)
    assert not failed, failed
    assert got.pop("migrated here") is None, "the waiting open migrated what the other process had migrated"
    assert set(got) == set(rows)
    c = connect(path, readonly=True)
    assert c.execute("PRAGMA user_version").fetchone()[0] == FORMAT
    c.close()


@pytest.mark.slow
def test_an_open_that_waits_longer_than_it_was_told_says_who_holds_the_cache(tmp_path):
    path = tmp_path / "cache.sqlite"
    rows = _vectors("old", 20)
    _write_layout_before(path, rows)
    proc = _migrator(path)
    try:
        cache = EmbeddingCache(path, migration_wait_s=0.5)
        with pytest.raises(SearchCoreError, match="being moved to its current layout by another process, still "
                                                  "after 0.5 s of waiting: let that process finish"):
            cache.get_many("m", list(rows))
        cache.close()
    finally:
        _release(proc)
    again = EmbeddingCache(path)
    assert set(again.get_many("m", list(rows))) == set(rows), "the wait that gave up lost nothing"
    again.close()


def test_an_older_autoresearch_sets_a_migrated_cache_aside_and_says_how_to_get_it_back(tmp_path):
    path = tmp_path / "embed-cache.sqlite"
    rows = _vectors("old", 40)
    _write_layout_before(path, rows)
    cache = EmbeddingCache(path)
    assert len(cache.get_many("m", list(rows))) == 40 and cache.migrated
    cache.close()

    older = _older_autoresearch().EmbeddingCache(path, max_bytes=10**12)
    assert older.get_many("m", list(rows)) == {}, "the older version reads a cache of its own, empty"
    older.put_many("m", dict(list(rows.items())[:5]))  # and keeps working: it embeds again
    warning = older.warning()
    older.close()
    assert warning is not None and older.set_aside is not None
    assert "a newer autoresearch moved it to its compact layout" in warning, warning
    assert "upgrade autoresearch and rename the file it was set aside as back to its name" in warning, warning
    assert f"set aside as {older.set_aside}" in warning

    # the way back the message gives: a newer autoresearch reads every vector of the file set aside
    older.set_aside.replace(path)
    back = EmbeddingCache(path)
    got = back.get_many("m", list(rows))
    assert set(got) == set(rows) and all(np.array_equal(got[h], rows[h]) for h in rows)
    back.close()


def test_a_cache_in_the_compact_layout_without_the_guard_gains_it_and_keeps_its_vectors(tmp_path):
    """Caches made or migrated before the guard existed get it on their next open, nothing moved, the layout's
    number unchanged (so a release of this layout without the guard still reads it)."""
    path = tmp_path / "cache.sqlite"
    rows = _vectors("new", 30)
    cache = EmbeddingCache(path)
    cache.put_many("m", rows)
    cache.conn.execute("DROP TRIGGER older_version_guard")
    cache.close()

    again = EmbeddingCache(path)
    assert set(again.get_many("m", list(rows))) == set(rows) and again.migrated is None
    assert again.conn.execute("PRAGMA user_version").fetchone()[0] == FORMAT
    assert again.conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'").fetchone()[0] == 1
    again.close()
