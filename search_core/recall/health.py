"""What `serve`'s /healthz says: `ok` (HTTP 200), or `degraded` (HTTP 503) with every reason found, each saying
what to do.

Degraded when
- the index file is missing or cannot be read (store.peek and its fingerprint read, now: a file
  replaced by garbage or by another database is caught here even while the server searches an older view);
- searches are failing: SEARCHES_FAILING in a row since the last one that succeeded, or every search so
  far (the warm-up at start included) when none has succeeded yet;
- the vault watcher (--watch) is failing: its folder is gone, its thread has stopped, or its updates have
  failed since the last one that succeeded;
- recall-log rows could not be written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# One failed search is often the machine, not the index (a search that lost a race with a file swap is
# retried clean: the backend reopens); three in a row with none between is not a passing hiccup.
SEARCHES_FAILING = 3
INDEX_PROBE_BUSY_MS = 1000        # a probe waits at most this long for a lock; /healthz must answer fast


@dataclass(frozen=True)
class Health:
    status: str                   # "ok" or "degraded"
    reasons: tuple[str, ...]


def index_problem(db: Path) -> str | None:
    """Why the index at `db` cannot be read now, or None."""
    from search_core.index.store import get_meta, peek
    if not db.exists():
        return f"no index at {db}: build it with `autoresearch index VAULT --db {db}`"
    try:
        conn = peek(db)           # the look at a live file that keeps this process's locks and leaves no trace
        try:
            conn.execute(f"PRAGMA busy_timeout = {INDEX_PROBE_BUSY_MS}")
            fingerprint = get_meta(conn, "fingerprint")
        finally:
            conn.close()
    except Exception as e:        # noqa: BLE001 - whatever the file is, the answer is "cannot be read"
        return (f"the index at {db} cannot be read ({type(e).__name__}: {e}); rebuild it with "
                f"`autoresearch index VAULT --db {db} --full`")
    if not fingerprint:
        return (f"{db} is not a finished autoresearch index (no fingerprint); rebuild it with "
                f"`autoresearch index VAULT --db {db} --full`")
    return None


def search_problem(outcomes) -> str | None:
    """Why searches count as failing (an engine's SearchOutcomes), or None."""
    n = outcomes.failed_in_a_row
    if n >= SEARCHES_FAILING or (n and not outcomes.succeeded):
        since = "none has succeeded yet" if not outcomes.succeeded else "since the last one that succeeded"
        return f"the last {n} search(es) failed, {since}: {outcomes.last_error}"
    return None


def watch_problems(status: dict) -> list[str]:
    """Why the vault watcher is failing (its status(): search_core.index.watch.WatchState), or none."""
    out = []
    vault = Path(status["vault"])
    if not vault.is_dir():
        out.append(f"the watched vault {vault} is gone: saved notes are no longer indexed; restore the folder, "
                   "or restart serve with --watch pointing at the vault")
    if not status.get("running", True):
        out.append("the vault watcher has stopped: saved notes are no longer indexed; restart serve")
    n = status.get("errors_since_ok") or 0
    if n:
        out.append(f"the vault watcher failed {n} update(s) since its last successful one: {status.get('last_error')}")
    return out


def check(db: Path, outcomes, watch_status: dict | None, log_write_errors: int) -> Health:
    """Every reason the server is degraded now (reads the index file: call it off the event loop)."""
    reasons = [r for r in (index_problem(db), search_problem(outcomes)) if r]
    if watch_status is not None:
        reasons += watch_problems(watch_status)
    if log_write_errors:
        reasons.append(f"{log_write_errors} recall-log row(s) could not be written (is the disk full?)")
    return Health("degraded" if reasons else "ok", tuple(reasons))
