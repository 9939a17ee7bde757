"""One index file held open for days (a server, a sweep): open it, verify whose vectors it holds, and
reload its in-memory view whenever another process commits to it or replaces it.

The searcher (pipeline.py) asks `refresh()` for the current view before each query; retrieval
(channels.py) reads that view and its connection, and ranking (ranking.py) is a pure function of the
channel lists. Nothing here searches.

- open: the file is an autoresearch index, and the embedder recorded in its fingerprint is the one that
  would embed queries (name, weights, dimension, prefixes, chunking), or a typed error naming the fix.
- reload stamp: (inode, data_version, generation, indexed_at), read on the handle's own probe
  connection. `PRAGMA data_version` changes on that connection whenever another connection commits
  (every commit, not one per second like indexed_at); the inode changes when a full rebuild replaced
  the file, and the probe is then reopened. generation and indexed_at are read again only when one of
  the first two moved: the probe never writes, so they cannot have changed otherwise.
- re-verification: the fingerprint is read again on every reload; another embedder's vectors under a
  warm searcher raise IndexChangedError, never a silent mix of two 384-dimension models.
- each view has a connection of its own and keeps the read transaction it was built in
  (view.IndexView.open): the view and every FTS5, posting-list and chunk read made through it see one
  commit, never the view of one update and the text of the next.
- follow=True (a server): new views are built on a thread of the handle's (the follower), never on the
  thread that searches. On johngrib a build is 0.4-0.9 s of a loaded machine, and a server whose one
  search thread built it let the searches queued behind it pass their 2 s bound (20 of 540 answered
  504 while a vault was being edited). The follower notices a change when a search asks (`refresh()`
  wakes it) or by itself every FOLLOW_POLL_S (a watched vault saved while nobody searches); `refresh()`
  swaps the new view in between two searches on the searching thread, so a search in flight finishes
  on the view it started with; the old view's connection closes when nothing holds the view any more.
  Until the swap, searches are answered from the old view (the state before the update).
- follow=False (a CLI run, a sweep, a test): `refresh()` builds the new view itself, as the caller
  expects the commit it just made to be searched next.

SQLite: connections come from store.connect (check_same_thread=False, sqlite-vec loaded on each), and
this sqlean build is multi-thread (threadsafety 1): a connection may move between threads, never be
used by two at once. The probe is used under the handle's lock only; a view's connection by the
follower while it builds, then, after the swap, by the searching thread alone. The index is in WAL
mode: the writer (an `index` run, the vault watcher) never waits for these readers, and they read
their snapshot while it writes. A held snapshot keeps SQLite from checkpointing the commits after it
until the view is let go, so the owner of the searching thread sets `on_ready` to run refresh() there
when a view is ready (the recall engine queues it on its search thread): an idle server swaps too.
"""

from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path

from search_core import SearchCoreError
from search_core.hashing import hash_json
from search_core.index.indexer import fingerprint_mismatch_message
from search_core.models import get_embedder
from search_core.index.store import get_meta, open_index
from search_core.search.view import IndexView

# How often a follower looks at the file when no search asks: the probe is a stat and a pragma (and two
# one-row reads when the file moved; ~0.1 ms at most), and a save's 2 s budget (debounce 0.4 s, update, view
# build) leaves room for 0.1 s.
FOLLOW_POLL_S = 0.1


class IndexChangedError(SearchCoreError):
    """The index file under a warm searcher now has another fingerprint (another embedder or chunking)."""


class IndexHandle:
    def __init__(self, db: str | Path, *, embedder: str | None = None, follow: bool = False):
        self.db = Path(db)
        self.conn = open_index(self.db)                # the probe: stamps and fingerprints, never searched
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
        self.follow = follow
        self.build_view = IndexView.open     # db -> IndexView; a test may wrap it (to hold a build back)
        # called by the follower (on its thread) when a new view is ready: the owner of the searching thread
        # schedules refresh() there, so an idle server lets go of the old view's snapshot too
        self.on_ready = None
        self._lock = threading.Condition()   # guards the probe and every field below
        self.stamp: tuple | None = None      # the file state the newest view (built or being built) is of
        self.view: IndexView | None = None
        self.reloads = 0                     # how many views were swapped in (the first one included)
        self._ready: IndexView | None = None     # built by the follower, not yet swapped in
        self._error: Exception | None = None     # the follower's failure, raised by the next refresh()
        self._wanted: tuple | None = None        # the stamp the follower is to build a view of next
        self._closed = False
        self._wake = threading.Event()
        self._follower: threading.Thread | None = None
        try:
            with self._lock:
                self.stamp = self._file_stamp()
            self._install(self._build())             # the first view: nothing to answer from before it
        except BaseException:
            self.conn.close()
            raise
        if follow:
            self._follower = threading.Thread(target=_follow, args=(weakref.ref(self), self._wake),
                                              name=f"index-follow:{self.db.name}", daemon=True)
            self._follower.start()

    @property
    def fingerprint_key(self) -> str:
        """Changes whenever the index content does, across processes (generation and indexed_at, not the
        per-connection data_version): the key for caching channel lists and for a sweep's index pin.
        The view's own, so a key never names lists of a view not yet swapped in."""
        v = self.view
        return hash_json([self.fingerprint, [v.generation, v.indexed_at] if v is not None else None], 16, ascii=True)

    def _file_stamp(self, known: tuple | None = None) -> tuple:
        """The file's reload stamp; `known` itself when the file and the probe's data_version are still its: only
        another connection's commit moves data_version (the probe never writes), so the meta rows it would read
        again are the same, and those two reads were half of a fast-path answer's freshness check (~13 of 24 us)."""
        st = os.stat(self.db)
        version = self.conn.execute("PRAGMA data_version").fetchone()[0]
        if known is not None and known[0] == st.st_ino and known[1] == version:
            return known
        return (st.st_ino, version, get_meta(self.conn, "generation", 0), get_meta(self.conn, "indexed_at"))

    def _changed(self) -> tuple | None:
        """Under the lock: the file's stamp when it moved past the newest view, else None; raises what a
        searcher must hear at once (the file gone, another embedder's vectors)."""
        try:
            stamp = self._file_stamp(self.stamp)
        except FileNotFoundError:
            raise SearchCoreError(f"index {self.db} disappeared; rebuild it with `autoresearch index`") from None
        if stamp[0] != self.stamp[0]:      # replaced by a full rebuild: reopen the probe on the new file
            self.conn.close()
            self.conn = open_index(self.db)
            stamp = self._file_stamp()
        if stamp == self.stamp:
            return None
        self._check_fingerprint(get_meta(self.conn, "fingerprint"))
        return stamp

    def _check_fingerprint(self, fp) -> None:
        if fp != self.fingerprint:
            # this handle's embedder makes the query vectors: never search another model's vectors
            raise IndexChangedError(
                f"{self.db} was rebuilt by another embedder or chunking while this searcher held it "
                f"(was {self.fingerprint['embedder']['name']}, now {fp['embedder']['name']}); "
                "open a new searcher on it (restart the server or sweep)")

    def _build(self) -> IndexView:
        view = self.build_view(self.db)
        try:
            self._check_fingerprint(view.fingerprint)   # the file may have been replaced since the probe
        except BaseException:
            view.close()
            raise
        return view

    def _install(self, view: IndexView) -> None:
        # The old view is dropped, not closed: a caller may still hold it with its connection (a cost
        # calibration takes `searcher.view, searcher.conn` once for its whole run), and its snapshot and
        # connection go when the last reference does (no cycle holds a view: CPython frees it at once).
        self.view = view
        self.reloads += 1

    def refresh(self) -> IndexView:
        """The current view: the same object until the file changes, then a new one (fingerprint re-verified).
        Call it from the thread that searches, between two searches (it lets go of the view it replaces)."""
        with self._lock:
            ready, self._ready = self._ready, None
            error, self._error = self._error, None
            if ready is not None:
                self._install(ready)
            if error is not None:
                self._wanted = self.stamp          # build again, once per failure a searcher heard
                raise error
            stamp = self._changed()
            if stamp is None:
                return self.view
            if self.follow:
                self._wanted = stamp
                self._wake.set()
                return self.view
        view = self._build()                       # a commit the caller just made is searched next
        with self._lock:
            self.stamp = stamp
            self._install(view)
            return self.view

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the follower has a view (or a failure) for the next refresh() to take; False on timeout.
        For a caller that must know the swap is due (tests, benchmarks): searches never wait for it."""
        with self._lock:
            return self._lock.wait_for(lambda: self._ready is not None or self._error is not None, timeout)

    def _follow_once(self) -> bool:
        """The follower's turn: look at the file, build a view of it if it moved. False once closed."""
        with self._lock:
            if self._closed:
                return False
            try:
                self._wanted = self._changed() or self._wanted
            except Exception as e:              # noqa: BLE001 - a searcher hears it at its next refresh()
                self._error = e
                self._lock.notify_all()
                return True
            if self._wanted is None:
                return True
            # claimed: a commit landing during the build moves the file past it, and is built next
            self.stamp, self._wanted = self._wanted, None
        try:
            view = self._build()                # off the lock: a searcher's refresh() never waits for this
        except Exception as e:                  # noqa: BLE001
            with self._lock:
                self._error = e
                self._lock.notify_all()
            return True
        with self._lock:
            if self._closed:
                view.close()
                return False
            superseded, self._ready = self._ready, view
            self._lock.notify_all()
        if superseded is not None:
            superseded.close()                  # built but never searched: a newer view replaces it
        if self.on_ready is not None:
            try:
                self.on_ready()
            except Exception:                   # noqa: BLE001 - the next search swaps it in instead
                pass
        return True

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._wake.set()
        if self._follower is not None:
            self._follower.join()           # at most the one build it is in the middle of
        with self._lock:
            for v in (self._ready, self.view):
                if v is not None:
                    v.close()
            self._ready = None
            self.conn.close()


def _follow(handle_ref, wake: threading.Event) -> None:
    """The follower thread. It holds its handle only while it works on it: a handle nobody closed (a
    server's engine dropped by a test) is collected, and its follower ends with it."""
    while True:
        wake.wait(FOLLOW_POLL_S)
        wake.clear()
        handle = handle_ref()
        if handle is None or not handle._follow_once():
            return
        del handle
