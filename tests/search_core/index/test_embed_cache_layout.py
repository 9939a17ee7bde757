"""The embedding cache's file: about the size of its vectors, opened without reading them, each row checked
where it is read, and a file in the layout before migrated in place with every vector and its recency."""

import numpy as np

from search_core.index.embed_cache import FORMAT, PAGE_SIZE, EmbeddingCache, row_key, text_hash
from search_core.index.store import connect

DIM = 384                       # e5-small's
ROW = DIM * 4


def _vectors(prefix: str, n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {text_hash(f"{prefix} {i}"): rng.standard_normal(DIM).astype(np.float32) for i in range(n)}


def _checkpointed_size(path) -> int:
    c = connect(path)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    return path.stat().st_size


def _write_layout_before(path, rows: dict, ticks: dict) -> None:
    """A cache as the layout before wrote it: (model, text_hash) keyed, WITHOUT ROWID, 4 KB pages."""
    old = connect(path)
    old.execute("CREATE TABLE vectors (model TEXT NOT NULL, text_hash TEXT NOT NULL, vec BLOB NOT NULL, "
                "used INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (model, text_hash)) WITHOUT ROWID")
    old.execute("CREATE INDEX vectors_by_use ON vectors (used)")
    old.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
    old.executemany("INSERT INTO vectors VALUES ('m', ?, ?, ?)", [(h, v.tobytes(), ticks[h]) for h, v in rows.items()])
    old.execute("INSERT INTO meta VALUES ('bytes', ?), ('clock', ?)", (len(rows) * ROW, max(ticks.values())))
    old.close()


def test_the_file_is_about_the_size_of_its_vectors(tmp_path):
    """3,000 e5-small vectors (4.4 MB): the file within 15 % of them (1.12 measured; the layout before: 2.9 times)."""
    path = tmp_path / "cache.sqlite"
    cache = EmbeddingCache(path, max_bytes=10**12)
    for k in range(6):
        cache.put_many("m", _vectors(f"batch{k}", 500, k))
    cache.close()
    size = _checkpointed_size(path)
    assert size <= 1.15 * 3000 * ROW, f"{size / (3000 * ROW):.2f} times the vectors"


def test_opening_reads_no_row_and_a_damaged_row_is_found_where_it_is_read(tmp_path):
    """The open reads the header only: a vector damaged on disk does not stop it. The read of that vector fails
    its CRC: it counts as not cached, the others are returned, and the next write replaces it."""
    path = tmp_path / "cache.sqlite"
    rows = _vectors("t", 50)
    cache = EmbeddingCache(path, max_bytes=10**12)
    cache.put_many("m", rows)
    cache.close()
    _checkpointed_size(path)
    victim = next(iter(rows))
    raw = path.read_bytes()
    at = raw.find(rows[victim].tobytes())
    assert at > 0
    with open(path, "r+b") as f:
        f.seek(at + 100)
        f.write(np.float32([1e3, -1e3]).tobytes())          # finite numbers: only the CRC can tell

    again = EmbeddingCache(path, max_bytes=10**12)
    got = again.get_many("m", list(rows))
    assert again.set_aside is None and again.unreadable == 1
    assert set(got) == set(rows) - {victim}
    assert all(np.array_equal(got[h], rows[h]) for h in got)
    assert "failed their check on read" in again.warning()
    again.put_many("m", {victim: rows[victim]})
    assert np.array_equal(again.get_many("m", [victim])[victim], rows[victim])
    assert again.stored_bytes() == 50 * ROW
    again.close()


def test_another_keys_row_under_the_same_id_is_not_returned(tmp_path):
    """Two keys sharing a 64-bit id (made here by writing one key's row under the other's id): the CRC covers
    the key, so the read says not cached rather than returning another text's vector."""
    path = tmp_path / "cache.sqlite"
    cache = EmbeddingCache(path, max_bytes=10**12)
    [(h, v)] = _vectors("mine", 1).items()
    cache.put_many("m", {h: v})
    cache.conn.execute("UPDATE vectors SET key = ? WHERE key = ?", (row_key("other-model", h), row_key("m", h)))
    assert cache.get_many("other-model", [h]) == {} and cache.unreadable == 1
    cache.close()


def test_a_cache_in_the_layout_before_is_migrated_with_its_vectors_and_recency(tmp_path):
    path = tmp_path / "cache.sqlite"
    rows = _vectors("old", 400)
    ticks = {h: i + 1 for i, h in enumerate(rows)}             # the first written is the least recently used
    _write_layout_before(path, rows, ticks)
    before = _checkpointed_size(path)

    cache = EmbeddingCache(path, max_bytes=400 * ROW)
    got = cache.get_many("m", list(rows)[200:])               # the second half: read now
    assert cache.migrated and "400 vectors kept" in cache.migrated and "shrinks" not in cache.migrated
    assert cache.conn.execute("PRAGMA user_version").fetchone()[0] == FORMAT
    assert cache.conn.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE
    assert all(np.array_equal(got[h], rows[h]) for h in list(rows)[200:])
    assert cache.stored_bytes() == 400 * ROW
    cache.put_many("m", _vectors("new", 10, 1))               # past the bound: the oldest ticks go first
    assert cache.evicted == 50
    assert set(cache.get_many("m", list(rows)[50:])) == set(list(rows)[50:])
    assert cache.has("m", list(rows)[:50]) == set()
    cache.close()
    after = _checkpointed_size(path)
    assert after < before / 2, (before, after)

    reopened = EmbeddingCache(path, max_bytes=400 * ROW)
    assert len(reopened.get_many("m", list(rows))) == 350 and reopened.migrated is None
    reopened.close()


def test_a_migration_while_another_process_has_the_file_open_keeps_every_vector(tmp_path):
    """Another connection holds the file: the rows move, the repack waits for a later open, and the message
    says so."""
    path = tmp_path / "cache.sqlite"
    rows = _vectors("old", 20)
    _write_layout_before(path, rows, {h: 1 for h in rows})
    other = connect(path)
    other.execute("SELECT count(*) FROM meta").fetchone()
    try:
        cache = EmbeddingCache(path, max_bytes=10**12)
        assert len(cache.get_many("m", list(rows))) == 20
        assert "shrinks once no other process has it open" in cache.migrated
        cache.close()
    finally:
        other.close()
