"""One index file held open for days (a server, a sweep): open it, verify whose vectors it holds, and
reload its in-memory view whenever another process commits to it or replaces it.

The searcher (pipeline.py) asks `refresh()` for the current view before each query; retrieval
(channels.py) reads that view, and ranking (ranking.py) is a pure function of the channel lists.
Nothing here searches.

- open: the file is an autoresearch index, and the embedder recorded in its fingerprint is the one that
  would embed queries (name, weights, dimension, prefixes, chunking), or a typed error naming the fix.
- reload stamp: (inode, data_version, generation, indexed_at). `PRAGMA data_version` changes on this
  connection whenever another connection commits (every commit, not one per second like indexed_at);
  the inode changes when a full rebuild replaced the file, and the file is then reopened.
- re-verification: the fingerprint is read again on every reload; another embedder's vectors under a
  warm searcher raise IndexChangedError, never a silent mix of two 384-dimension models.
- the view is built from one read transaction (view.IndexView), so it never mixes two commits.
"""

from __future__ import annotations

import os
from pathlib import Path

from search_core import SearchCoreError
from search_core.hashing import hash_json
from search_core.index.indexer import fingerprint_mismatch_message
from search_core.models import get_embedder
from search_core.index.store import get_meta, open_index
from search_core.search.view import IndexView


class IndexChangedError(SearchCoreError):
    """The index file under a warm searcher now has another fingerprint (another embedder or chunking)."""


class IndexHandle:
    def __init__(self, db: str | Path, *, embedder: str | None = None):
        self.db = Path(db)
        self.conn = open_index(self.db)
        self.fingerprint = get_meta(self.conn, "fingerprint")
        recorded = self.fingerprint["embedder"]["name"]
        if embedder is not None and embedder != recorded:
            self.conn.close()
            raise SearchCoreError(fingerprint_mismatch_message(
                self.db, self.fingerprint, {"embedder": {"name": embedder}, "chunking": self.fingerprint["chunking"]}))
        self.embedder = get_embedder(recorded)
        live = self.embedder.fingerprint()
        if live != self.fingerprint["embedder"]:
            self.conn.close()
            raise SearchCoreError(fingerprint_mismatch_message(
                self.db, self.fingerprint, {"embedder": live, "chunking": self.fingerprint["chunking"]}))
        self.stamp: tuple | None = None
        self.view: IndexView | None = None
        self.reloads = 0                      # how many views were built (the first one included)
        self.refresh()

    @property
    def fingerprint_key(self) -> str:
        """Changes whenever the index content does, across processes (generation and indexed_at, not the
        per-connection data_version): the key for caching channel lists and for a sweep's index pin."""
        return hash_json([self.fingerprint, self.stamp[2:] if self.stamp else None], 16, ascii=True)

    def _file_stamp(self) -> tuple:
        st = os.stat(self.db)
        version = self.conn.execute("PRAGMA data_version").fetchone()[0]
        return (st.st_ino, version, get_meta(self.conn, "generation", 0), get_meta(self.conn, "indexed_at"))

    def refresh(self) -> IndexView:
        """The current view: the same object until the file changes, then a new one (fingerprint re-verified)."""
        try:
            stamp = self._file_stamp()
        except FileNotFoundError:
            raise SearchCoreError(f"index {self.db} disappeared; rebuild it with `autoresearch index`") from None
        if self.stamp is not None and stamp[0] != self.stamp[0]:      # replaced by a full rebuild: reopen
            self.conn.close()
            self.conn = open_index(self.db)
            stamp = self._file_stamp()
        if stamp != self.stamp:
            fp = get_meta(self.conn, "fingerprint")
            if fp != self.fingerprint:
                # this handle's embedder makes the query vectors: never search another model's vectors
                raise IndexChangedError(
                    f"{self.db} was rebuilt by another embedder or chunking while this searcher held it "
                    f"(was {self.fingerprint['embedder']['name']}, now {fp['embedder']['name']}); "
                    "open a new searcher on it (restart the server or sweep)")
            self.view = IndexView(self.conn)
            self.stamp = stamp
            self.reloads += 1
        return self.view

    def close(self) -> None:
        self.conn.close()
