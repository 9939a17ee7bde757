# The embedding cache as the release before the compact layout (layout 0) wrote and read it, verbatim (git:
# search_core/index/embed_cache.py at b529ebc^): a real older autoresearch for the tests of what it does when it
# meets a cache a newer one migrated (tests/search_core/index/test_embed_cache_downgrade.py). Not collected, never
# imported by the package.
"""Embeddings cached by (model fingerprint, text hash) in their own SQLite file, shared by every index.

Re-indexing unchanged text never re-embeds, a full rebuild reuses it, and swapping back to a model
costs nothing. Batches are committed as they finish, so Ctrl-C keeps the work already done.

The cache is bounded (`max_bytes` of vectors; $AUTORESEARCH_CACHE_MAX_MB, default search_core.paths.CACHE_MAX_MB):
each row carries the tick of the last transaction that wrote or read it, and a write that takes the total
past the bound evicts the rows used least recently down to LOW_WATER of it. The total and the clock live in
a `meta` table written in the same IMMEDIATE transaction as the rows, so two processes filling the cache at
once keep one exact count (SQLite gives one writer at a time).
"""

from __future__ import annotations

import hashlib
import time
from contextlib import closing
from pathlib import Path

import numpy as np

from search_core import StopRequested
from search_core.hashing import hash_json
from search_core.index.store import connect, sqlite_file_problem
from search_core.models.threads import embed_batches


# Texts per batch when a stop may be asked (the daemon): a batch already in the model is finished before
# the run stops, so its length bounds the wait. e5-small costs the same per text in batches of 4, 8 or 16
# (1.1, 1.18, 1.05 s per 500-character text at load 18 on 2 cores), so 4 costs nothing and bounds the wait
# at 4.4 s there (about 0.5 s idle), where 2 workers x 16 took longer than the 10 s a stop is promised in.
STOPPABLE_BATCH = 4
# an eviction frees down to this share of the bound, so a vault that is being indexed past the bound evicts
# once per tenth of the bound, not on every batch
LOW_WATER = 0.9


class _CacheDamaged(Exception):
    pass


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def model_key(fingerprint: dict) -> str:
    return hash_json(fingerprint, 16, ascii=True)     # ascii: the key every existing cache row carries


class EmbeddingCache:
    def __init__(self, path: str | Path, *, max_bytes: int | None = None):
        from search_core.paths import embed_cache_max_bytes
        self.path = Path(path)
        self.max_bytes = embed_cache_max_bytes() if max_bytes is None else int(max_bytes)
        self.evicted = 0                       # rows this handle evicted (for the index report)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.set_aside: Path | None = None     # where a damaged cache was moved, if it was
        self.damage = ""
        self._conn = None
        self.stop = None                       # asked between batches: True ends embed() with StopRequested

    @property
    def conn(self):
        """Opened (and checked: 0.2-0.3 s on a 45 MB cache) on first use, so an update that embeds
        nothing (a no-op, an edit of a note's text that keeps its vectors) never pays for it."""
        if self._conn is None:
            try:
                self._conn = self._open()
            except _CacheDamaged as e:
                self._set_aside(str(e))
                self._conn = self._open()
        return self._conn

    def _open(self):
        """Open and check the cache. It is shared by every index of the user, so one damaged file would
        fail them all; quick_check plus one read of every row's length finds that before it is used."""
        import sqlean
        conn = None
        try:
            if self.path.exists() and self.path.stat().st_size:
                problem = sqlite_file_problem(self.path)
                if problem is not None:
                    raise _CacheDamaged(f"not a SQLite file ({problem}: its header is damaged)")
            conn = connect(self.path)
            rows = [r[0] for r in conn.execute("PRAGMA quick_check")]
            if rows != ["ok"]:
                raise _CacheDamaged("; ".join(rows[:3]))
            conn.execute("BEGIN IMMEDIATE")     # the schema and the total, against another process's writes
            conn.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, text_hash TEXT NOT NULL, "
                         "vec BLOB NOT NULL, used INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (model, text_hash)) "
                         "WITHOUT ROWID")
            if "used" not in {r[1] for r in conn.execute("PRAGMA table_info(vectors)")}:   # a cache from before the bound
                conn.execute("ALTER TABLE vectors ADD COLUMN used INTEGER NOT NULL DEFAULT 0")
            conn.execute("CREATE INDEX IF NOT EXISTS vectors_by_use ON vectors (used)")
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
            # every row's length read once: a damaged page shows here, and the total the bound keeps is exact
            # even when a writer that did not keep it (an older version) wrote since
            total = conn.execute("SELECT coalesce(sum(length(vec)), 0) FROM vectors").fetchone()[0]
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('bytes', ?)", (total,))
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('clock', 0)")
            conn.execute("COMMIT")
            return conn
        except sqlean.DatabaseError as e:
            if conn is not None:
                conn.close()
            raise _CacheDamaged(str(e)) from None
        except _CacheDamaged:
            if conn is not None:
                conn.close()
            raise

    def _set_aside(self, why: str) -> None:
        """Rename (never delete) the damaged file and its WAL, so a fresh cache can be built in its place."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(self.path) + suffix)
            if src.exists():
                src.replace(Path(str(target) + suffix))
        self.set_aside, self.damage = target, why

    def eviction_note(self) -> str | None:
        """What this handle evicted, for the index report (None: nothing)."""
        if not self.evicted:
            return None
        return (f"the embedding cache {self.path} reached its bound of {self.max_bytes / 2**20:g} MB of vectors: "
                f"{self.evicted} text(s) used least recently were evicted (embedded again if an index needs them; "
                "$AUTORESEARCH_CACHE_MAX_MB sets the bound)")

    def warning(self) -> str | None:
        if self.set_aside is None:
            return None
        return (f"the embedding cache {self.path} was damaged ({self.damage}); it was set aside as "
                f"{self.set_aside} and a new cache was built (embeddings are recomputed once)")

    def _tick(self) -> int:
        """The next tick of the cache's clock, inside the caller's write transaction."""
        self.conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'clock'")
        return self.conn.execute("SELECT value FROM meta WHERE key = 'clock'").fetchone()[0]

    def get_many(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        """The cached vectors of these hashes; the ones found are marked used now (what eviction spares)."""
        out: dict[str, np.ndarray] = {}
        for i in range(0, len(hashes), 500):
            part = hashes[i:i + 500]
            marks = ','.join('?' * len(part))
            q = f"SELECT text_hash, vec FROM vectors WHERE model = ? AND text_hash IN ({marks})"
            found = [(h, blob) for h, blob in self.conn.execute(q, [model, *part])]
            for h, blob in found:
                out[h] = np.frombuffer(blob, dtype=np.float32)
            if found:
                self.conn.execute("BEGIN IMMEDIATE")
                try:
                    tick = self._tick()
                    self.conn.execute(f"UPDATE vectors SET used = ? WHERE model = ? AND text_hash IN ({marks})",
                                      [tick, model, *part])
                    self.conn.execute("COMMIT")
                except BaseException:
                    if self.conn.in_transaction:   # after SQLITE_FULL SQLite may have rolled back itself
                        self.conn.execute("ROLLBACK")
                    raise
        return out

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        # IMMEDIATE: the write lock is taken (or waited for, busy_timeout) up front; another process
        # indexing into the same user cache writes its own batches between ours, and the total in `meta`
        # is read and written by one of us at a time
        rows = [(model, h, np.asarray(v, np.float32).tobytes()) for h, v in items.items()]
        if not rows:
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            hashes = [h for _, h, _ in rows]
            have = set()
            for i in range(0, len(hashes), 500):
                part = hashes[i:i + 500]
                have.update(h for (h,) in self.conn.execute(
                    f"SELECT text_hash FROM vectors WHERE model = ? AND text_hash IN ({','.join('?' * len(part))})",
                    [model, *part]))
            added = sum(len(blob) for _, h, blob in rows if h not in have)   # a replaced row keeps its length
            tick = self._tick()
            self.conn.executemany("INSERT OR REPLACE INTO vectors (model, text_hash, vec, used) VALUES (?, ?, ?, ?)",
                                  [(m, h, blob, tick) for m, h, blob in rows])
            total = self.conn.execute("UPDATE meta SET value = value + ? WHERE key = 'bytes' RETURNING value",
                                      (added,)).fetchone()[0]
            if total > self.max_bytes:
                total -= self._evict(total - int(self.max_bytes * LOW_WATER), tick)
                self.conn.execute("UPDATE meta SET value = ? WHERE key = 'bytes'", (total,))
            self.conn.execute("COMMIT")
        except BaseException:
            # after SQLITE_FULL or an I/O error SQLite may have rolled the transaction back itself: a second
            # ROLLBACK would raise "no transaction is active" and hide why the write failed
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise

    def _evict(self, need: int, spare_tick: int) -> int:
        """Delete the rows used least recently until `need` bytes are freed, sparing this write's own rows
        (tick `spare_tick`); returns the bytes freed. Inside the caller's write transaction."""
        freed, doomed = 0, []
        cur = self.conn.execute("SELECT model, text_hash, length(vec) FROM vectors WHERE used < ? ORDER BY used",
                                (spare_tick,))
        try:
            while freed < need:
                page = cur.fetchmany(1000)
                if not page:
                    break
                for model, h, size in page:
                    if freed >= need:
                        break
                    doomed.append((model, h))
                    freed += size
        finally:
            cur.close()                      # done reading before the rows are deleted
        self.conn.executemany("DELETE FROM vectors WHERE model = ? AND text_hash = ?", doomed)
        self.evicted += len(doomed)
        return freed

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
