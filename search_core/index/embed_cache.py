"""Embeddings cached by (model fingerprint, text hash) in their own SQLite file, shared by every index.

Re-indexing unchanged text never re-embeds, a full rebuild reuses it, and swapping back to a model
costs nothing. Batches are committed as they finish, so Ctrl-C keeps the work already done.

The cache is bounded (`max_bytes` of vectors; $AUTORESEARCH_CACHE_MAX_MB, default search_core.paths.CACHE_MAX_MB):
each row has the tick of the last transaction that wrote or read it (table `used`), and a write that takes the total
past the bound evicts the rows used least recently down to LOW_WATER of it. The total and the clock live in
a `meta` table written in the same IMMEDIATE transaction as the rows, so two processes filling the cache at
once keep one exact count (SQLite gives one writer at a time).
"""

from __future__ import annotations

import hashlib
import time
import zlib
from contextlib import closing
from pathlib import Path

import numpy as np

from search_core import SearchCoreError, StopRequested
from search_core.hashing import hash_json
from search_core.index.store import is_lock_error, atomic, connect, sqlite_file_problem
from search_core.models.threads import embed_batches


# Texts per batch when a stop may be asked (the daemon): a batch already in the model is finished before
# the run stops, and a stop seen after one batch waits for the other worker's, so two batches bound the wait.
# At load 22 on 2 cores a text costs 1.3-2.1 s whether batched by 1, 2 or 4 (16 e5-small texts, twice), and
# batches of 4 left SIGTERM to exit at 6.0-19.9 s (bench_daemon D, 5 runs): one text a batch keeps it near 4 s.
STOPPABLE_BATCH = 1
# an eviction frees down to this share of the bound, so a vault that is being indexed past the bound evicts
# once per tenth of the bound, not on every batch
LOW_WATER = 0.9


# The file's layout (PRAGMA user_version). 2: one row per vector, appended in the order written (so pages fill:
# rows placed by a hash key left them 73 % full), found by a 64-bit hash of (model, text) through one index of
# integers, the vector a float32 blob in the row's own page, a CRC of key and vector checked on every read;
# recency in a small table of its own, so a read rewrites 30 bytes, not the vector's page; with DOWNGRADE_GUARD, added
# to a file that lacks it on open (a trigger, not a new layout: a release of this layout reads the file unchanged).
# 0 with a `text_hash` column: the layout before (2.9 times the vectors on disk, a full scan at open), migrated in
# place on first open.
FORMAT = 2
# 16 KB pages hold ten 384-float rows (95 % full) or five 768-float ones; at the default 4 KB a 1.5 KB row
# leaves a quarter of each page empty. Only a new (or repacked) file can take it: SQLite fixes it at creation.
PAGE_SIZE = 16384
SCHEMA = ("CREATE TABLE IF NOT EXISTS vectors (id INTEGER PRIMARY KEY, key INTEGER NOT NULL, vec BLOB NOT NULL, "
          "crc INTEGER NOT NULL)",
          "CREATE UNIQUE INDEX IF NOT EXISTS vectors_by_key ON vectors (key)",
          "CREATE TABLE IF NOT EXISTS used (id INTEGER PRIMARY KEY, tick INTEGER NOT NULL)",
          "CREATE INDEX IF NOT EXISTS used_by_tick ON used (tick)",
          "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
          "INSERT OR IGNORE INTO meta VALUES ('bytes', 0)",
          "INSERT OR IGNORE INTO meta VALUES ('clock', 0)")
# An autoresearch from before layout 2 opens the cache by writing its byte total into `meta` (INSERT OR REPLACE),
# and treats any SQLite error in its open as damage: it renames the file to `.damaged-DATE` (kept, never deleted),
# builds a new cache and prints the error in its warning. Without this trigger that open succeeds and its first
# read stops on "no such column: model" (a traceback); with it, the older version keeps working and its warning
# says what happened and how to get the vectors back. This version only ever UPDATEs that row.
DOWNGRADE_MESSAGE = ("not damaged: a newer autoresearch moved it to its compact layout, which this version cannot "
                     "read. Nothing in it is lost: upgrade autoresearch and rename the file it was set aside as back "
                     "to its name to use its vectors again")
GUARD_NAME = "older_version_guard"
DOWNGRADE_GUARD = (f"CREATE TRIGGER IF NOT EXISTS {GUARD_NAME} BEFORE INSERT ON meta WHEN NEW.key = 'bytes' "
                   f"BEGIN SELECT RAISE(ABORT, '{DOWNGRADE_MESSAGE}'); END")
# how long an open waits for another process's migration of the same file: 207 s at 500,000 rows (load 7), so
# minutes to spare at a busy machine's pace
MIGRATION_WAIT_S = 30 * 60.0
CREATE_WAIT_S = 10.0          # a new file's switch to WAL retried this long while another process creates it
MIGRATION_STAGE = "migrate cache"     # the progress stage of a migration (index's progress lines and bars)
MIGRATION_BATCH = 10_000              # rows moved between two progress reports (about 1 s at load 7)
_DAMAGE_CODES = {11, 26}       # SQLITE_CORRUPT, SQLITE_NOTADB: the file is damaged (locked or full are not)


class _CacheDamaged(Exception):
    pass


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def model_key(fingerprint: dict) -> str:
    return hash_json(fingerprint, 16, ascii=True)     # ascii: the key every existing cache row carries


def row_key(model: str, thash: str) -> int:
    """The key of (model, text hash)'s row: 64 bits of their SHA-256. Two keys sharing one (500,000 rows: odds of
    7e-9) fail the other's CRC on read and count as not cached; the write that follows takes the row."""
    return int.from_bytes(hashlib.sha256(f"{model}\0{thash}".encode()).digest()[:8], "big", signed=True)


def row_crc(model: str, thash: str, blob: bytes) -> int:
    return zlib.crc32(blob, zlib.crc32(f"{model}\0{thash}".encode()))


def _is_damage(e: Exception) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _DAMAGE_CODES
    return "malformed" in str(e) or "not a database" in str(e)


class EmbeddingCache:
    def __init__(self, path: str | Path, *, max_bytes: int | None = None, migration_wait_s: float = MIGRATION_WAIT_S):
        from search_core.paths import embed_cache_max_bytes
        self.path = Path(path)
        self.max_bytes = embed_cache_max_bytes() if max_bytes is None else int(max_bytes)
        self.evicted = 0                       # rows this handle evicted (for the index report)
        self.unreadable = 0                    # rows whose CRC failed on read: embedded again
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.set_aside: Path | None = None     # where a damaged cache was moved, if it was
        self.damage = ""
        self.migrated: str | None = None       # what opening an older layout did (for the index report)
        self._conn = None
        self.stop = None                       # asked between batches: True ends embed() with StopRequested
        self.migration_wait_s = migration_wait_s
        self.progress = None                   # progress(stage, done, total) while an older layout is migrated

    @property
    def conn(self):
        """Opened on first use, so an update that embeds nothing (a no-op, an edit of a note's text that keeps
        its vectors) never pays for it. The open reads the header only (0.0x s at any size); damage is found
        where it is read: a CRC per row, SQLite's own checks per page (see _guarded)."""
        if self._conn is None:
            try:
                self._conn = self._open()
            except _CacheDamaged as e:
                self._set_aside(str(e))
                self._conn = self._open()
        return self._conn

    def _open(self):
        import sqlean
        conn = None
        try:
            if self.path.exists() and self.path.stat().st_size:
                problem = sqlite_file_problem(self.path)
                if problem is not None:
                    raise _CacheDamaged(f"not a SQLite file ({problem}: its header is damaged)")
            else:
                self._create()
            conn = connect(self.path)
            if conn.execute("PRAGMA user_version").fetchone()[0] != FORMAT:
                self._upgrade(conn)
            elif conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?",
                              (GUARD_NAME,)).fetchone() is None:
                try:                         # a file made before the guard: once (the schema is read anyway)
                    with atomic(conn):
                        conn.execute(DOWNGRADE_GUARD)
                except sqlean.OperationalError as e:
                    if "locked" not in str(e) and "busy" not in str(e):
                        raise
                    # another process is writing: the guard waits for a later open, this one goes on
            return conn
        except sqlean.DatabaseError as e:
            if conn is not None:
                conn.close()
            if not _is_damage(e):
                raise
            raise _CacheDamaged(str(e)) from None
        except BaseException:
            if conn is not None:
                conn.close()
            raise

    def _create(self) -> None:
        """A new file: its page size is set before its first write (SQLite cannot change it after, in WAL)."""
        import sqlean
        conn = sqlean.connect(str(self.path), isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout = 5000")
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            # Two processes creating the file at once: the one whose switch to WAL would wait on the other's
            # lock while holding its own gets "locked" at once, busy_timeout or not (SQLite's deadlock rule; 2 of
            # 120 opens of three processes racing). Its lock is gone when the statement fails: try again.
            deadline = time.monotonic() + CREATE_WAIT_S
            while True:
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    break
                except sqlean.OperationalError as e:
                    if not is_lock_error(e) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
            with atomic(conn):    # another process creating it at once: one of us makes the schema
                if conn.execute("PRAGMA user_version").fetchone()[0] == 0 and not _tables(conn):
                    for stmt in SCHEMA:
                        conn.execute(stmt)
                    conn.execute(DOWNGRADE_GUARD)
                    conn.execute(f"PRAGMA user_version = {FORMAT}")
        finally:
            conn.close()

    def _upgrade(self, conn) -> None:
        """An older layout (or a file with no schema yet) brought to FORMAT, in one write transaction: another
        process opening it at once waits, then finds it done. Vectors and their recency are kept."""
        # another process may be migrating it: wait for it, not the usual 5 s
        import sqlean
        conn.execute(f"PRAGMA busy_timeout = {int(self.migration_wait_s * 1000)}")
        try:
            with atomic(conn):
                conn.execute("PRAGMA busy_timeout = 5000")      # the write lock is ours: back to the usual wait
                moved = self._upgrade_in_transaction(conn)
        except sqlean.OperationalError as e:
            # holding the write lock, nothing inside waits on another process: a lock error is the BEGIN's
            if "locked" not in str(e) and "busy" not in str(e):
                raise
            raise SearchCoreError(
                f"the embedding cache {self.path} is being moved to its current layout by another process, still "
                f"after {self.migration_wait_s:g} s of waiting: let that process finish (an `index`, a `search`, the "
                "daemon), then run this again") from None
        finally:
            conn.execute("PRAGMA busy_timeout = 5000")
        if moved:
            self.migrated = (f"the embedding cache {self.path} was moved to its compact layout: {moved} vectors kept"
                             + ("" if _repack(conn) else
                                " (its file shrinks once no other process has it open and it is opened again)"))

    def _upgrade_in_transaction(self, conn) -> int:
        """The upgrade's work inside its write transaction; returns the vectors moved from the layout before."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == FORMAT:
            return 0            # another process migrated it while this one waited
        if version > FORMAT:
            raise SearchCoreError(
                f"the embedding cache {self.path} was written by a newer autoresearch (layout {version}; this "
                f"one reads {FORMAT}): upgrade autoresearch, or give this one its own cache "
                "($AUTORESEARCH_CACHE_DIR or `index --cache FILE`)")
        old = _tables(conn).get("vectors")
        moved = 0
        if old is not None and "text_hash" in old:
            moved = self._move_rows(conn, recency="used" in old)
        else:
            for stmt in SCHEMA:
                conn.execute(stmt)
        conn.execute(DOWNGRADE_GUARD)
        conn.execute(f"PRAGMA user_version = {FORMAT}")
        return moved

    def _move_rows(self, conn, *, recency: bool) -> int:
        """The layout before's rows into this layout, inside the caller's transaction, MIGRATION_BATCH rows at a
        time with a progress report after each (207 s at 500,000 rows, load 7: never silent). Returns the rows kept."""
        total = conn.execute("SELECT count(*) FROM vectors").fetchone()[0]    # through the small index on `used`
        conn.execute("ALTER TABLE vectors RENAME TO vectors_before")
        conn.execute("DROP INDEX IF EXISTS vectors_by_use")
        for stmt in SCHEMA:
            conn.execute(stmt)
        if self.progress is not None:
            self.progress(MIGRATION_STAGE, 0, total)
        tick = "used" if recency else "0"      # a cache from before the bound had no recency
        # ids given in order: the new table is empty, and `used` needs each row's id without a read back
        done, next_id = 0, 1
        cur = conn.execute(f"SELECT model, text_hash, vec, {tick} FROM vectors_before")
        try:
            while rows := cur.fetchmany(MIGRATION_BATCH):
                ids = range(next_id, next_id + len(rows))
                conn.executemany("INSERT OR REPLACE INTO vectors (id, key, vec, crc) VALUES (?, ?, ?, ?)",
                                 [(i, row_key(m, h), v, row_crc(m, h, v)) for i, (m, h, v, _) in zip(ids, rows)])
                conn.executemany("INSERT INTO used (id, tick) VALUES (?, ?)",
                                 [(i, t) for i, (_, _, _, t) in zip(ids, rows)])
                next_id += len(rows)
                done += len(rows)
                if self.progress is not None:
                    self.progress(MIGRATION_STAGE, done, total)
        finally:
            cur.close()
        conn.execute("DROP TABLE vectors_before")
        moved = conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
        if moved < done:      # two texts whose keys collide (odds 7e-9 at 500,000): the later row replaced the other
            conn.execute("DELETE FROM used WHERE id NOT IN (SELECT id FROM vectors)")
        total_bytes = conn.execute("SELECT coalesce(sum(length(vec)), 0) FROM vectors").fetchone()[0]
        conn.execute("UPDATE meta SET value = ? WHERE key = 'bytes'", (total_bytes,))
        return moved

    def _set_aside(self, why: str) -> None:
        """Rename (never delete) the damaged file and its WAL, so a fresh cache can be built in its place."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(self.path) + suffix)
            if src.exists():
                src.replace(Path(str(target) + suffix))
        self.set_aside, self.damage = target, why

    def _guarded(self, op):
        """op() on the cache; a page SQLite finds damaged on the way sets the file aside and op runs again on a
        fresh one (what was cached is embedded again), as a damaged header does at open."""
        import sqlean
        try:
            return op()
        except sqlean.DatabaseError as e:
            if not _is_damage(e):
                raise
            self.close()
            self._set_aside(str(e))
            return op()

    def eviction_note(self) -> str | None:
        """What this handle evicted, for the index report (None: nothing)."""
        if not self.evicted:
            return None
        return (f"the embedding cache {self.path} reached its bound of {self.max_bytes / 2**20:g} MB of vectors: "
                f"{self.evicted} text(s) used least recently were evicted (embedded again if an index needs them; "
                "$AUTORESEARCH_CACHE_MAX_MB sets the bound)")

    def warning(self) -> str | None:
        if self.set_aside is not None:
            return (f"the embedding cache {self.path} was damaged ({self.damage}); it was set aside as "
                    f"{self.set_aside} and a new cache was built (embeddings are recomputed once)")
        if self.unreadable:
            return (f"the embedding cache {self.path} held {self.unreadable} vector(s) that failed their check on "
                    "read; they were embedded again and replaced")
        return None

    def _tick(self) -> int:
        """The next tick of the cache's clock, inside the caller's write transaction."""
        return self.conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'clock' RETURNING value").fetchone()[0]

    def get_many(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        """The cached vectors of these hashes (each checked against its CRC); the ones found are marked used
        now (what eviction spares)."""
        return self._guarded(lambda: self._get_many(model, hashes))

    def _get_many(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for i in range(0, len(hashes), 500):
            keys = {row_key(model, h): h for h in hashes[i:i + 500]}
            marks = ','.join('?' * len(keys))
            found = []
            for rid, key, blob, crc in self.conn.execute(
                    f"SELECT id, key, vec, crc FROM vectors WHERE key IN ({marks})", list(keys)):
                h = keys[key]
                if row_crc(model, h, blob) != crc or len(blob) % 4:
                    self.unreadable += 1            # damaged, or another key's row: not cached; put_many replaces it
                    continue
                out[h] = np.frombuffer(blob, dtype=np.float32)
                found.append(rid)
            if found:
                with atomic(self.conn):
                    tick = self._tick()
                    self.conn.execute(f"UPDATE used SET tick = ? WHERE id IN ({','.join('?' * len(found))})",
                                      [tick, *found])
        return out

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        self._guarded(lambda: self._put_many(model, items))

    def _put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        # IMMEDIATE: the write lock is taken (or waited for, busy_timeout) up front; another process
        # indexing into the same user cache writes its own batches between ours, and the total in `meta`
        # is read and written by one of us at a time
        rows = []
        for h, v in items.items():
            blob = np.asarray(v, np.float32).tobytes()
            rows.append((row_key(model, h), blob, row_crc(model, h, blob)))
        if not rows:
            return
        with atomic(self.conn):
            have = {}                            # key: (id, bytes) of the rows these replace (the same text again)
            keys = [r[0] for r in rows]
            for i in range(0, len(keys), 500):
                part = keys[i:i + 500]
                have.update((k, (rid, n)) for k, rid, n in self.conn.execute(
                    f"SELECT key, id, length(vec) FROM vectors WHERE key IN ({','.join('?' * len(part))})", part))
            added = sum(len(blob) for _, blob, _ in rows) - sum(n for _, n in have.values())
            tick = self._tick()
            ids = []
            for key, blob, crc in rows:
                if key in have:
                    rid = have[key][0]
                    self.conn.execute("UPDATE vectors SET vec = ?, crc = ? WHERE id = ?", (blob, crc, rid))
                else:
                    rid = self.conn.execute("INSERT INTO vectors (key, vec, crc) VALUES (?, ?, ?) RETURNING id",
                                            (key, blob, crc)).fetchone()[0]
                ids.append((rid, tick))
            self.conn.executemany("INSERT OR REPLACE INTO used (id, tick) VALUES (?, ?)", ids)
            total = self.conn.execute("UPDATE meta SET value = value + ? WHERE key = 'bytes' RETURNING value",
                                      (added,)).fetchone()[0]
            if total > self.max_bytes:
                total -= self._evict(total - int(self.max_bytes * LOW_WATER), tick)
                self.conn.execute("UPDATE meta SET value = ? WHERE key = 'bytes'", (total,))

    def _evict(self, need: int, spare_tick: int) -> int:
        """Delete the rows used least recently until `need` bytes are freed, sparing this write's own rows
        (tick `spare_tick`); returns the bytes freed. Inside the caller's write transaction."""
        freed, doomed = 0, []
        cur = self.conn.execute("SELECT u.id, length(v.vec) FROM used u JOIN vectors v ON v.id = u.id "
                                "WHERE u.tick < ? ORDER BY u.tick", (spare_tick,))
        try:
            while freed < need:
                page = cur.fetchmany(1000)
                if not page:
                    break
                for rid, size in page:
                    if freed >= need:
                        break
                    doomed.append((rid,))
                    freed += size
        finally:
            cur.close()                      # done reading before the rows are deleted
        self.conn.executemany("DELETE FROM vectors WHERE id = ?", doomed)
        self.conn.executemany("DELETE FROM used WHERE id = ?", doomed)
        self.evicted += len(doomed)
        return freed

    def has(self, model: str, hashes: list[str]) -> set[str]:
        """Which of these hashes have a row (unchecked, unmarked: for reports and tests)."""
        out = set()
        for i in range(0, len(hashes), 500):
            keys = {row_key(model, h): h for h in hashes[i:i + 500]}
            out.update(keys[k] for (k,) in self.conn.execute(
                f"SELECT key FROM vectors WHERE key IN ({','.join('?' * len(keys))})", list(keys)))
        return out

    def stored_bytes(self) -> int:
        """Bytes of vectors in the cache, as the bound counts them."""
        return self.conn.execute("SELECT value FROM meta WHERE key = 'bytes'").fetchone()[0]

    def embed(self, embedder, texts: list[str], *, batch: int = 32, progress=None) -> np.ndarray:
        """Vectors for passages, from the cache where present; new ones are embedded and stored per batch.
        progress(done, total): the texts embedded so far of those the cache lacked, after every batch."""
        key = model_key(embedder.fingerprint())
        hashes = [text_hash(t) for t in texts]
        have = self.get_many(key, list(dict.fromkeys(hashes)))
        missing = list(dict.fromkeys(h for h in hashes if h not in have))
        by_hash = dict(zip(hashes, texts))
        if progress is not None:
            progress(0, len(missing))
        if self.stop is not None:
            batch = min(batch, STOPPABLE_BATCH)
        # closing(): a failed write (or a stop) below stops the workers now, not when the generator is collected
        embedded = 0
        with closing(embed_batches(embedder, [by_hash[h] for h in missing], batch=batch)) as done:
            for a, b, vecs in done:
                part = missing[a:b]
                new = dict(zip(part, vecs))
                self.put_many(key, new)          # kept: the next run embeds only what is still missing
                have.update(new)
                embedded += len(part)
                if progress is not None:
                    progress(embedded, len(missing))
                if self.stop is not None and self.stop():
                    raise StopRequested(f"stopped after {len(have)} of {len(set(hashes))} vectors; the rest "
                                        "are embedded by the next run")
        if not texts:
            return np.zeros((0, embedder.dim), np.float32)
        return np.stack([have[h] for h in hashes]).astype(np.float32)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _tables(conn) -> dict[str, set[str]]:
    """The file's tables and their columns."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {n: {r[1] for r in conn.execute(f"PRAGMA table_info({n})")} for n in names}


def _repack(conn) -> bool:
    """Rewrite a migrated file at PAGE_SIZE without the older layout's free pages, when no other connection
    has it open (SQLite leaves WAL only then); False when one does: the free pages are reused by later writes."""
    import sqlean
    try:
        if conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0] != "delete":
            return False
    except sqlean.OperationalError:          # "database is locked": another process has it open
        return False
    try:
        conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        conn.execute("VACUUM")
    finally:
        conn.execute("PRAGMA journal_mode = WAL")
    return True
