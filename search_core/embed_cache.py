"""Embeddings cached by (model fingerprint, text hash) in their own SQLite file, shared by every index.

Re-indexing unchanged text never re-embeds, a full rebuild reuses it, and swapping back to a model
costs nothing. Batches are committed as they finish, so Ctrl-C keeps the work already done.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from .store import connect


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def model_key(fingerprint: dict) -> str:
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:16]


class EmbeddingCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = connect(self.path)
        self.conn.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, text_hash TEXT NOT NULL, "
                          "vec BLOB NOT NULL, PRIMARY KEY (model, text_hash)) WITHOUT ROWID")

    def get_many(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for i in range(0, len(hashes), 500):
            part = hashes[i:i + 500]
            q = f"SELECT text_hash, vec FROM vectors WHERE model = ? AND text_hash IN ({','.join('?' * len(part))})"
            for h, blob in self.conn.execute(q, [model, *part]):
                out[h] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        self.conn.execute("BEGIN")
        self.conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                              [(model, h, np.asarray(v, np.float32).tobytes()) for h, v in items.items()])
        self.conn.execute("COMMIT")

    def embed(self, embedder, texts: list[str], *, batch: int = 32, progress=None) -> np.ndarray:
        """Vectors for passages, from the cache where present; new ones are embedded and stored per batch."""
        key = model_key(embedder.fingerprint())
        hashes = [text_hash(t) for t in texts]
        have = self.get_many(key, list(dict.fromkeys(hashes)))
        missing = list(dict.fromkeys(h for h in hashes if h not in have))
        by_hash = dict(zip(hashes, texts))
        if progress is not None:
            progress(0, len(missing))
        for i in range(0, len(missing), batch):
            part = missing[i:i + batch]
            vecs = embedder.embed([by_hash[h] for h in part])
            new = dict(zip(part, vecs))
            self.put_many(key, new)
            have.update(new)
            if progress is not None:
                progress(len(part), len(missing))
        if not texts:
            return np.zeros((0, embedder.dim), np.float32)
        return np.stack([have[h] for h in hashes]).astype(np.float32)

    def close(self) -> None:
        self.conn.close()
