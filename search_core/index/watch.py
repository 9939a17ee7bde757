"""Follow a vault: re-index the notes that changed shortly after they are saved.

watchfiles (a Rust file watcher) groups a burst of saves into one set of changes: it yields once no new
change arrived for `step_ms` (or after `debounce_ms` of continuous changes), so an editor's save (write a
temp file, rename, touch) or a sync that drops 50 files is one update. Each update is an ordinary
incremental `index_vault` run, which lists the vault and re-reads only the files whose size or mtime
moved: the watcher never has to trust the event paths (an event missed by the OS is picked up by the next
update). A note that fails to parse is reported in the update's `skipped` and left out; an update that
fails as a whole (the index is locked by another writer, or damaged) is recorded and retried on the next
change: nothing stops the watch but stop().

Readers see either the state before an update or after it: the update is one SQLite transaction in WAL
mode, and a searcher rebuilds its view (and its query caches, keyed by the index generation) when the
file moves; the server's is built off its search thread, which answers from the old view until the new
one is swapped in (handle.py).

The state (last caught up, changes pending, last error) is kept in memory for `/healthz` and written to
`<db>.watch.json` (replaced atomically) for `autoresearch stats`, which runs in another process.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from search_core.files import atomic_write_text
from search_core.index.indexer import index_vault
from search_core.index.write import communities_state

# watchfiles' own defaults are 1,600 ms (debounce) and 50 ms (step). A save is searchable within 2 s only
# if the group closes well before that: 400 ms caps one group, and a burst keeps extending it 50 ms at a time.
DEBOUNCE_MS = 400
STEP_MS = 50
# Communities left stale by updates are recomputed once the vault has been quiet this long (Louvain costs
# 0.35-1.3 s on 974 notes: not worth paying while someone is typing).
COMMUNITIES_IDLE_S = 30.0


def status_path(db: str | Path) -> Path:
    db = Path(db)
    return db.with_name(db.name + ".watch.json")


def _is_note(change, path: str) -> bool:
    """A note, or what may be a folder of notes (a folder moved in or renamed raises one event for the
    folder, none for the notes in it); attachments and editor swap files are ignored."""
    name = os.path.basename(path)
    if name.startswith("."):
        return False
    return name.lower().endswith(".md") or not os.path.splitext(name)[1]


@dataclass
class WatchState:
    vault: str
    db: str
    pid: int = field(default_factory=os.getpid)
    started_at: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    caught_up_at: str | None = None      # the end of the last update that left nothing pending
    pending: int = 0                     # changed paths seen and not yet indexed
    updates: int = 0
    last_update: dict | None = None      # counts, seconds and skipped notes of the last update
    last_error: str | None = None
    errors: int = 0
    errors_since_ok: int = 0             # updates failed since the last one that succeeded (/healthz)
    running: bool = True

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class VaultWatcher:
    """Watch `vault`, keep `db` current. start() runs it in a thread; run() blocks (the CLI)."""

    def __init__(self, vault: str | Path, db: str | Path, *, cache: str | Path | None = None,
                 debounce_ms: int = DEBOUNCE_MS, step_ms: int = STEP_MS,
                 communities_idle_s: float = COMMUNITIES_IDLE_S, on_update=None, on_skip=None):
        self.vault, self.db, self.cache = Path(vault), Path(db), cache
        self.debounce_ms, self.step_ms, self.communities_idle_s = debounce_ms, step_ms, communities_idle_s
        self.on_update = on_update            # called with each IndexReport (the CLI prints it)
        # called with each file an update skipped that the update before did not (or for another reason):
        # a server says once that a note (a link out of the vault, a binary file) is left out, not per save
        self.on_skip = on_skip
        self._skipped: set[tuple[str, str]] = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.state = WatchState(str(self.vault), str(self.db))

    def status(self) -> dict:
        with self._lock:
            return self.state.as_dict()

    def _set(self, **kw) -> None:
        with self._lock:
            for k, v in kw.items():
                setattr(self.state, k, v)
            snapshot = self.state.as_dict()
        try:
            atomic_write_text(status_path(self.db), json.dumps(snapshot, ensure_ascii=False, indent=1))
        except OSError:
            pass                           # the status file is a courtesy; the watch goes on without it

    def update(self, *, communities: bool = False):
        """One incremental update now. Never raises: a failure is recorded in the state."""
        try:
            report = index_vault(self.vault, self.db, cache=self.cache, communities=communities)
        except Exception as e:                 # noqa: BLE001 - the watch outlives any one update
            with self._lock:
                errors, since_ok = self.state.errors + 1, self.state.errors_since_ok + 1
            self._set(last_error=f"{time.strftime('%H:%M:%S')} {type(e).__name__}: {e}", errors=errors,
                      errors_since_ok=since_ok)
            return None
        with self._lock:
            updates = self.state.updates + 1
        self._set(updates=updates, pending=0, caught_up_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), last_error=None,
                  errors_since_ok=0,
                  last_update={"added": report.added, "changed": report.changed, "deleted": report.deleted,
                               "embedded": report.embedded, "seconds": report.seconds,
                               "skipped": [{"path": s.path, "reason": s.reason} for s in report.skipped],
                               "communities": report.communities})
        skipped = {(s.path, s.reason) for s in report.skipped}
        if self.on_skip is not None:
            for s in report.skipped:
                if (s.path, s.reason) not in self._skipped:
                    self.on_skip(s)
        self._skipped = skipped
        if self.on_update is not None:
            self.on_update(report)
        return report

    def _communities_stale(self) -> bool:
        from search_core.index.store import connect
        try:
            conn = connect(self.db, readonly=True)
            try:
                return not communities_state(conn).get("current", False)
            finally:
                conn.close()
        except Exception:                      # noqa: BLE001 - a missing index is the next update's business
            return False

    def run(self) -> None:
        import watchfiles
        self.update()                          # catch up with what changed while nobody watched
        quiet_since = time.monotonic()
        try:
            for changes in watchfiles.watch(self.vault, watch_filter=_is_note, debounce=self.debounce_ms,
                                            step=self.step_ms, stop_event=self._stop, rust_timeout=1000,
                                            yield_on_timeout=True, raise_interrupt=False):
                if self._stop.is_set():
                    break
                if changes:
                    self._set(pending=len({p for _, p in changes}))
                    self.update()
                    quiet_since = time.monotonic()
                elif self.state.pending:      # the last update failed (a lock, a full disk): try again
                    self.update()
                elif time.monotonic() - quiet_since > self.communities_idle_s and self._communities_stale():
                    self.update(communities=True)
                    quiet_since = time.monotonic()
        finally:
            self._set(running=False)

    def start(self) -> VaultWatcher:
        self._thread = threading.Thread(target=self.run, name="vault-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)


def read_status(db: str | Path) -> dict | None:
    """The watch state a watcher of `db` last wrote, with whether that process is still alive."""
    p = status_path(db)
    try:
        state = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    try:
        os.kill(int(state.get("pid", -1)), 0)
        alive = True
    except (OSError, ValueError):
        alive = False
    state["running"] = bool(state.get("running")) and alive
    return state
