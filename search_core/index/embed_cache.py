"""Embeddings cached by (model fingerprint, text hash) in their own SQLite file, shared by every index.

Re-indexing unchanged text never re-embeds, a full rebuild reuses it, and swapping back to a model
costs nothing. Batches are committed as they finish, so Ctrl-C keeps the work already done.
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


class _CacheDamaged(Exception):
    pass


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def model_key(fingerprint: dict) -> str:
    return hash_json(fingerprint, 16, ascii=True)     # ascii: the key every existing cache row carries


class EmbeddingCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
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
            conn.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, text_hash TEXT NOT NULL, "
                         "vec BLOB NOT NULL, PRIMARY KEY (model, text_hash)) WITHOUT ROWID")
            rows = [r[0] for r in conn.execute("PRAGMA quick_check")]
            if rows != ["ok"]:
                raise _CacheDamaged("; ".join(rows[:3]))
            conn.execute("SELECT sum(length(vec)) FROM vectors").fetchone()
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

    def warning(self) -> str | None:
        if self.set_aside is None:
            return None
        return (f"the embedding cache {self.path} was damaged ({self.damage}); it was set aside as "
                f"{self.set_aside} and a new cache was built (embeddings are recomputed once)")

    def get_many(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for i in range(0, len(hashes), 500):
            part = hashes[i:i + 500]
            q = f"SELECT text_hash, vec FROM vectors WHERE model = ? AND text_hash IN ({','.join('?' * len(part))})"
            for h, blob in self.conn.execute(q, [model, *part]):
                out[h] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        # IMMEDIATE: the write lock is taken (or waited for, busy_timeout) up front; another process
        # indexing into the same user cache writes its own batches between ours
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                              [(model, h, np.asarray(v, np.float32).tobytes()) for h, v in items.items()])
        self.conn.execute("COMMIT")

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
