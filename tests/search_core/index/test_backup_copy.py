"""backup_copy: the one way an index, ledger, log or cache file is copied (SQLite's backup API, never a file copy)."""
from __future__ import annotations

import sqlean

from search_core.index.store import backup_copy, connect


def _wal_file_with_unmerged_rows(path, page_size=4096, rows=50):
    """A WAL-mode file whose last rows are only in its -wal (a live index between checkpoints)."""
    c = sqlean.connect(str(path), isolation_level=None)
    c.execute(f"PRAGMA page_size = {page_size}")
    c.execute("PRAGMA journal_mode = WAL")
    c.execute("PRAGMA wal_autocheckpoint = 0")
    c.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
    c.executemany("INSERT INTO t (v) VALUES (?)", [(f"row {k}",) for k in range(rows)])
    return c          # kept open: closing the last connection would checkpoint the -wal into the file


def test_a_copy_carries_the_rows_still_in_the_wal(tmp_path):
    src = tmp_path / "src.sqlite"
    held = _wal_file_with_unmerged_rows(src)
    assert (tmp_path / "src.sqlite-wal").stat().st_size > 0
    out = backup_copy(src, tmp_path / "deep" / "copy.sqlite")
    held.close()
    c = connect(out, readonly=True)
    assert c.execute("SELECT count(*), max(v) FROM t").fetchone() == (50, "row 9")
    assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    c.close()


def test_a_file_with_large_pages_copies_into_a_new_file(tmp_path):
    # the embedding cache's pages are 16 KB; a destination put in WAL mode before the copy refuses the size
    src = tmp_path / "cache.sqlite"
    _wal_file_with_unmerged_rows(src, page_size=16384).close()
    out = backup_copy(src, tmp_path / "copy.sqlite")
    c = connect(out, readonly=True)
    assert c.execute("PRAGMA page_size").fetchone()[0] == 16384
    assert c.execute("SELECT count(*) FROM t").fetchone()[0] == 50
    c.close()


def test_a_copy_over_an_open_file_is_one_commit_its_reader_sees(tmp_path):
    old, new = tmp_path / "old.sqlite", tmp_path / "new.sqlite"
    _wal_file_with_unmerged_rows(old, rows=2).close()
    _wal_file_with_unmerged_rows(new, rows=9).close()
    dst = backup_copy(old, tmp_path / "live.sqlite")
    reader = connect(dst, readonly=True)
    assert reader.execute("SELECT count(*) FROM t").fetchone()[0] == 2
    backup_copy(new, dst)
    assert reader.execute("SELECT count(*) FROM t").fetchone()[0] == 9
    reader.close()
