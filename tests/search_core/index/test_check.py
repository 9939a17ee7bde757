"""Damage is detected, not read: `autoresearch check`, the quick check before an
incremental write, readable errors from search, and a damaged embedding cache set aside and rebuilt.

Every damaged file is a copy the test makes itself, with seeded random bytes written into it."""

import random
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.index.check import check_index
from search_core.index.indexer import index_vault
from search_core.index.store import connect
from tests.helpers import write_vault
from tuner.cli import main


def damage(path, offset: int, n: int, seed: int = 0) -> None:
    rnd = random.Random(seed)
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(bytes(rnd.randrange(256) for _ in range(n)))


def copy_of(db, tmp_path, name="copy.sqlite"):
    c = connect(db)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    dst = tmp_path / name
    shutil.copyfile(db, dst)
    return dst


def page_of(db, table: str) -> tuple[int, int]:
    c = connect(db)
    try:
        root = c.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        size = c.execute("PRAGMA page_size").fetchone()[0]
        return (root - 1) * size, size
    finally:
        c.close()


def first_vector(db) -> bytes:
    c = connect(db)
    try:
        return c.execute("SELECT embedding FROM chunk_vec WHERE rowid = (SELECT min(id) FROM chunks)").fetchone()[0]
    finally:
        c.close()


def vector_overflow_pages(db) -> list[int]:
    """The pages (1-based) holding the chunk vectors' blob, from SQLite's dbstat table."""
    c = connect(db)
    try:
        return [r[0] for r in c.execute("SELECT pageno FROM dbstat WHERE name = 'chunk_vec_vector_chunks00' "
                                        "AND pagetype = 'overflow' ORDER BY pageno")]
    finally:
        c.close()


def test_a_sound_index_checks_ok(small_index):
    r = CliRunner().invoke(main, ["check", "--db", str(small_index)])
    assert r.exit_code == 0, r.output
    assert "ok   vectors match their text" in r.output and "ok   fts5 integrity-check" in r.output


def test_64_kb_of_random_bytes_mid_file_is_reported_by_check_and_index(small_vault, small_index, tmp_path,
                                                                             shared_cache):
    db = copy_of(small_index, tmp_path)
    # the vectors live in one large blob spread over overflow pages (1,024 slots x 384 floats); 64 KB in
    # the middle of it breaks that chain, which is what made `search` fail with "reading from blob failed"
    pages = vector_overflow_pages(db)
    start = pages[len(pages) // 2]
    assert pages[len(pages) // 2 + 15] == start + 15            # 16 pages in a row, all vector data
    damage(db, (start - 1) * 4096, 64 * 1024, seed=1)
    r = CliRunner().invoke(main, ["check", "--db", str(db)])
    assert r.exit_code == 1 and "is damaged" in r.output and f"index VAULT --db {db} --full" in r.output
    # `stats` used to print the counts and exit 0 on this file
    r = CliRunner().invoke(main, ["stats", "--db", str(db)])
    assert r.exit_code == 1 and "is damaged" in r.output and "--full" in r.output, r.output
    assert CliRunner().invoke(main, ["stats", "--db", str(small_index)]).exit_code == 0
    with pytest.raises(SearchCoreError, match=r"damaged.*--full"):
        index_vault(small_vault, db, cache=shared_cache)
    # the fix it names works
    index_vault(small_vault, db, cache=shared_cache, full=True)
    assert check_index(db).ok


def test_a_broken_vector_chain_stops_an_incremental_index(small_vault, small_index, tmp_path, shared_cache):
    db = copy_of(small_index, tmp_path)
    for page in vector_overflow_pages(db)[:16]:     # the next-page pointers of the first 16 overflow pages
        damage(db, (page - 1) * 4096, 4, seed=page)
    assert not check_index(db, quick=True).ok
    # this used to report "4 unchanged" and exit 0
    with pytest.raises(SearchCoreError, match=r"is damaged: .*Rebuild it: `autoresearch index VAULT --db .* --full`"):
        index_vault(small_vault, db, cache=shared_cache)
    # search reads vectors that sit past the broken pointer: a message naming check and --full, no traceback
    r = CliRunner().invoke(main, ["search", "GraphRAG 커뮤니티", "--db", str(db)])
    assert r.exit_code == 1 and isinstance(r.exception, SystemExit), r.output
    assert "probably damaged" in r.output and f"autoresearch check --db {db}" in r.output and "--full" in r.output


def test_random_writes_into_fts5_pages_are_found(small_index, tmp_path):
    db = copy_of(small_index, tmp_path)
    off, size = page_of(db, "chunks_fts_data")
    damage(db, off + size - 600, 512, seed=2)
    rep = check_index(db, sample=0)
    assert not rep.ok
    bad = {c.name for c in rep.checks if not c.ok}
    assert bad & {"integrity_check", "fts5 integrity-check"}, rep.message()
    r = CliRunner().invoke(main, ["check", "--db", str(db), "--sample", "0"])
    assert r.exit_code == 1 and "--full" in r.output


def test_a_changed_vector_is_found_by_re_embedding_a_sample(small_index, tmp_path):
    db = copy_of(small_index, tmp_path)
    blob = first_vector(db)
    raw = db.read_bytes()
    at = raw.find(blob)
    assert at > 0 and raw.find(blob, at + 1) == -1          # the vector's bytes, found once in the file
    # 512 bytes of small floats, so the vector stays finite and readable: only its values change
    rnd = np.random.default_rng(3)
    with open(db, "r+b") as f:
        f.seek(at + 512)
        f.write(rnd.normal(0, 0.05, 128).astype(np.float32).tobytes())
    assert check_index(db, quick=True).ok                  # SQLite itself cannot see this
    rep = check_index(db)
    assert not rep.ok and "cosine" in rep.message() and "--full" in rep.message()


@pytest.mark.parametrize("where", ["header", "pages"])
def test_a_damaged_embedding_cache_is_set_aside_and_rebuilt(tmp_path, where):
    cache = tmp_path / "c" / "embed-cache.sqlite"
    v1 = write_vault(tmp_path / "v1", {"a.md": "# 하나\n첫 번째 노트의 본문", "b.md": "# 둘\n두 번째 노트의 본문"})
    index_vault(v1, tmp_path / "one.sqlite", cache=cache)
    c = connect(cache)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    if where == "header":
        damage(cache, 0, 100, seed=4)
    else:
        page = int.from_bytes(cache.read_bytes()[16:18], "big")    # the header's page size
        damage(cache, page, cache.stat().st_size - page, seed=5)   # every page but the first: found where read
    before = cache.read_bytes()
    v2 = write_vault(tmp_path / "v2", {"c.md": "# 셋\n세 번째 노트의 본문"})
    r = index_vault(v2, tmp_path / "two.sqlite", cache=cache)
    assert r.notes == 1
    assert any("embedding cache" in w and "set aside" in w for w in r.warnings), r.warnings
    aside = [p for p in cache.parent.iterdir() if ".damaged-" in p.name and not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == 1 and aside[0].read_bytes() == before   # renamed, not deleted, not changed
    r = index_vault(v2, tmp_path / "three.sqlite", cache=cache)   # the new cache serves the next run
    assert r.embedded == 0 and not any("embedding cache" in w for w in r.warnings)


def test_the_check_before_an_update_reads_what_it_must_and_the_whole_file_once_a_day(small_index, tmp_path):
    import time

    from search_core.index.check import WHOLE_FILE_CHECK_EVERY_S, check_before_update
    db = copy_of(small_index, tmp_path)
    off, size = page_of(db, "links")
    damage(db, off, 8, seed=4)                       # the links table's root page header: no update reads it
    assert not check_index(db, quick=True).ok
    assert check_before_update(db).ok                # a day has not passed since the build checked the file
    later = check_before_update(db, now=time.time() + 2 * WHOLE_FILE_CHECK_EVERY_S)
    assert not later.ok and "quick_check" in later.message() and "--full" in later.message()
