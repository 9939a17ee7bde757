"""The recall path: after a turn, queue a background search on the user's message; at the next turn,
fetch its block (recall is one turn late by design). Neither call blocks and neither ever raises.

    engine = RecallEngine(SearchBackend("runs/vault.sqlite"), RecallLog("runs/recall-log.sqlite"))
    engine.queue_prefetch(user_message, session_id)     # end of turn N: returns at once
    block = engine.prefetch(session_id)                  # start of turn N+1: the cached block, at once

Gates, in this order, each named in the log: kill_switch, too_short, small_talk, in_flight, threshold.
"""

from __future__ import annotations

import contextvars
import dataclasses
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path

from search_core.recall.backend import SearchBackend, is_query_error
from search_core.recall.block import (RecallBlock, compose_block, compose_notes, empty_block_reason, gate_features,
                                      header_for, hit_lines)
from search_core.recall.config import RecallConfig, active_config_path, load_recall_config
from search_core.recall.pre_gates import first_closed_gate
from search_core.validate import clean_text

LONG_QUERY_CHARS = 1000                     # past about one 512-token window a query searches on the long lane
MAX_SESSIONS = 10_000                       # sessions kept (LRU); ~0.6 KB each when idle
SESSION_IDLE_S = 3600.0                     # a session untouched for an hour is forgotten (its block is stale)
# Not gates, but reasons a block is empty: the search failed or timed out / nothing was queued (and
# ALREADY_HELD, NO_ROOM in search_core.recall.block).
ERROR, NOTHING_QUEUED = "error", "nothing_queued"
SHUTDOWN = "shutdown"     # accepted, then the server stopped before its search ran: logged, not searched

# The profile the caller works for. Background work runs in a copy of the caller's context: a thread
# that lost it would read "default" here and answer (and log) for another profile.
current_profile: contextvars.ContextVar[str] = contextvars.ContextVar("autoresearch_recall_profile",
                                                                      default="default")


# -- the engine ----------------------------------------------------------------------------------------
def _now(fn, *args):
    fn(*args)


@dataclass(frozen=True)
class SearchOutcomes:
    """How the searches behind this engine have gone (for /healthz): every search, warm-up included, that
    finished; a query's own fault (an empty query) is not counted."""
    succeeded: int = 0
    failed: int = 0
    failed_in_a_row: int = 0       # since the last search that succeeded
    last_error: str | None = None  # of the last failed search
    last_ok_at: float | None = None  # wall clock of the last search that succeeded

    def after(self, error: BaseException | None) -> "SearchOutcomes":
        if error is None:
            return dataclasses.replace(self, succeeded=self.succeeded + 1, failed_in_a_row=0, last_ok_at=time.time())
        return dataclasses.replace(self, failed=self.failed + 1, failed_in_a_row=self.failed_in_a_row + 1,
                                   last_error=f"{type(error).__name__}: {error}")


@dataclass
class _Job:
    query: str
    gen: int
    t0: float                    # perf_counter when queued: the timeout counts from here
    ts: float                    # wall clock for the log
    ctx: contextvars.Context


@dataclass
class _Session:
    touched: float = 0.0         # monotonic time of the last call (sessions idle for SESSION_IDLE_S are dropped)
    gen: int = 0
    running: bool = False
    pending: _Job | None = None
    cached: tuple | None = None  # (lines, their note ids, RecallBlock-without-text)


@dataclass
class RecallEngine:
    backend: SearchBackend
    log: object | None = None                       # a RecallLog, or None to log nothing
    cfg: RecallConfig = field(default_factory=RecallConfig)
    runners: int = 8                                # sessions served at once (they mostly wait on the search)

    def __post_init__(self):
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._sessions: OrderedDict[tuple[str, str], _Session] = OrderedDict()   # least recently used first
        self._closing = False
        self._pending_writes = 0
        self._runner_pool = ThreadPoolExecutor(self.runners, thread_name_prefix="recall-session")
        # A runner waits on its search; long queries' sessions wait on runners of their own, or eight of
        # them in a row held every runner while the short lane stood idle (and short calls timed out).
        self._long_runner_pool = ThreadPoolExecutor(self.runners, thread_name_prefix="recall-session-long")
        # One search at a time per lane: the Searcher holds one connection, and e5 already spreads one
        # query over both cores. Queries over LONG_QUERY_CHARS take a lane of their own (a second Searcher
        # on the same index and the same loaded model): a 4,000-character query embeds four 512-token
        # windows (1.9 s on a quiet machine), and a short one queued behind it used to wait all that time.
        self._search_pool = ThreadPoolExecutor(1, thread_name_prefix="recall-search")
        self._long_pool = ThreadPoolExecutor(1, thread_name_prefix="recall-search-long")
        self._long_backend: SearchBackend | None = None
        self.outcomes = SearchOutcomes()
        self._outcomes_lock = threading.Lock()
        self.counters = {"queued": 0, "searched": 0, "errors": 0, "timeouts": 0, "sessions_dropped": 0,
                         "shutdown": 0, "log_errors": 0}
        if isinstance(self.backend, SearchBackend):
            self.backend.on_view_ready = self._view_ready

    # -- public, never raising -----------------------------------------------------------------------
    def queue_prefetch(self, query: str, session_id: str, *, start=None) -> str | None:
        """Start a background recall for this session and return at once: None when a search was queued,
        else the name of the gate that stopped it (kill_switch, too_short, small_talk) or "error".
        `start` (e.g. the event loop's call_soon) is handed the search's start instead of running it here:
        the server answers first, because a search that starts while the answer is still being written
        holds the GIL, and the answer then waits out the 5 ms switch interval (the p99 of a /queue call)."""
        try:
            t0, ts = time.perf_counter(), time.time()
            query = clean_text(query) if isinstance(query, str) else ""
            key = self._key(session_id)
            stopped = first_closed_gate(query, self.cfg)
            begin = False
            with self._lock:
                self.counters["queued"] += 1
                s = self._session_locked(key)
                s.gen += 1
                dropped, s.pending, s.cached = s.pending, None, None   # an older block is stale now
                if stopped:
                    s.cached = ((), (), RecallBlock("", False, {}, stopped))
                else:
                    s.pending = _Job(query, s.gen, t0, ts, contextvars.copy_context())
                    begin, s.running = not s.running, True
            if dropped is not None:   # queued behind a running search and never started: superseded
                self._bg(dropped.ctx, self._write, self._record(dropped, key, stopped_by="in_flight"))
            if stopped:
                self._bg(contextvars.copy_context(), self._write, self._record_gate(query, key, ts, stopped))
                return stopped
            if begin:
                runners = self._long_runner_pool if self.lane_of(query) == "long" else self._runner_pool
                (start or _now)(runners.submit, self._drain, key)
            return None
        except Exception:        # the agent's turn goes on whatever happens here
            return ERROR

    def prefetch(self, session_id: str, held=(), exclude_notes=(), char_budget: int | None = None) -> RecallBlock:
        """The block of this session's previous call, at once (and only once). Empty when nothing was
        queued, a gate stopped it, it failed, or its search is still in flight. `exclude_notes` leaves out
        notes the caller was already given; `char_budget` lowers (never raises) the configured budget."""
        try:
            key = self._key(session_id)
            with self._lock:
                s = self._sessions.get(key)
                if s is None or (s.cached is None and not s.running):
                    return RecallBlock("", False, {}, NOTHING_QUEUED)
                if s.cached is None:
                    return RecallBlock("", False, {}, "in_flight")
                (lines, ids, meta), s.cached = s.cached, None
            if not meta.injected:
                return meta
            budget = self.cfg.char_budget if char_budget is None else min(char_budget, self.cfg.char_budget)
            text, notes = compose_notes(lines, budget, held, ids, exclude_notes, header_for(meta.gate))
            if meta.call_id is not None and self.log is not None:
                self._bg(contextvars.copy_context(), self.log.mark_delivered, meta.call_id, len(text))
            return dataclasses.replace(meta, block=text, injected=bool(text), notes=notes, stopped_by=None if text
                                       else empty_block_reason(lines, held, ids, exclude_notes))
        except Exception as e:
            return RecallBlock("", False, {}, ERROR, error=f"{type(e).__name__}: {e}")

    def recall_now(self, query: str, session_id: str = "direct", held=()) -> RecallBlock:
        """The same gates, search and log, synchronously (for MCP, which has no turn hook)."""
        try:
            t0, ts = time.perf_counter(), time.time()
            key = self._key(session_id)
            query = clean_text(query) if isinstance(query, str) else ""
            stopped = first_closed_gate(query, self.cfg)
            if stopped:
                call_id = self._write(self._record_gate(query or "", key, ts, stopped))
                return RecallBlock("", False, {}, stopped, call_id)
            lines, ids, meta = self._search_block(_Job(query, 0, t0, ts, contextvars.copy_context()), key,
                                                  current=True)
            if not meta.injected:
                return meta
            text, notes = compose_notes(lines, self.cfg.char_budget, held, ids, header=header_for(meta.gate))
            return dataclasses.replace(meta, block=text, injected=bool(text), notes=notes,
                                       stopped_by=None if text else empty_block_reason(lines, held, ids))
        except Exception as e:
            return RecallBlock("", False, {}, ERROR, error=f"{type(e).__name__}: {e}")

    def submit_search(self, query: str, top_k: int | None = None):
        """A plain search on the same serialized worker; returns a concurrent Future (the server awaits it)."""
        return self._submit(clean_text(query), top_k)

    def read_notes(self, refs: list[str], cap: int | None = None, timeout_s: float | None = None):
        """Whole notes by id or path (NoteText), read on the search thread (it owns the index connection);
        raises UnknownNote with close matches, or TimeoutError."""
        fut = self._search_pool.submit(contextvars.copy_context().run, self.backend.read_notes, refs, cap)
        try:
            return fut.result(timeout=timeout_s or self.cfg.timeout_s)
        except FutureTimeout:
            fut.cancel()
            raise TimeoutError(f"reading the notes took longer than {timeout_s or self.cfg.timeout_s:.1f} s") from None

    def lane_of(self, query: str) -> str:
        """"long" for a query over LONG_QUERY_CHARS, searched on a lane of its own; else "short"."""
        return "long" if len(query) > LONG_QUERY_CHARS and isinstance(self.backend, SearchBackend) else "short"

    def _submit(self, query: str, top_k: int | None = None):
        """The search on its lane's worker (short and long queries never wait for each other)."""
        if self.lane_of(query) == "short":
            fut = self._search_pool.submit(contextvars.copy_context().run, self.backend.search, query, top_k)
        else:
            fut = self._long_pool.submit(contextvars.copy_context().run, self._long().search, query, top_k)
        fut.add_done_callback(self._count_outcome)
        return fut

    def _count_outcome(self, fut) -> None:
        """Counted when the search ends, not when its caller stops waiting: a slow search that succeeds
        after the caller's timeout is a working index."""
        if fut.cancelled():
            return
        error = fut.exception()
        if error is not None and is_query_error(error):
            return
        with self._outcomes_lock:
            self.outcomes = self.outcomes.after(error)

    def _view_ready(self) -> None:
        """The index follower has a new view: swap it in on the search thread between two searches, so an
        idle server lets go of the old view's snapshot (SQLite cannot checkpoint past it: the WAL would
        grow with every save until the next search); the long lane drops its searcher, and its next long
        query opens the index as it is then."""
        try:
            # the long lane's reset is queued first: once the swap has run, work queued on the long lane after
            # it finds the reset done (queued second, a busy machine let a caller's task slip in between)
            if self._long_backend is not None:
                self._long_pool.submit(self._long_backend.reset)
            self._search_pool.submit(self.backend.swap_view)
        except RuntimeError:      # shutting down: the pools take no more work
            pass

    def _long(self) -> SearchBackend:
        if self._long_backend is None:
            b = self.backend
            # follow=False: this lane builds a changed index's view when a long query comes (a long query
            # is seconds anyway), not a second build per update next to the short lane's
            self._long_backend = SearchBackend(b.db, b._cfg, config_path=b._config_path, query_cache=b.query_cache,
                                               gate=b.gate, follow=False)
        return self._long_backend

    def search(self, query: str, top_k: int | None = None, timeout_s: float | None = None):
        """A plain search bounded by the timeout (raises TimeoutError, or the search's own error)."""
        fut = self.submit_search(query, top_k)
        try:
            return fut.result(timeout=timeout_s or self.cfg.timeout_s)
        except FutureTimeout:
            fut.cancel()
            raise TimeoutError(f"the search took longer than {timeout_s or self.cfg.timeout_s:.1f} s") from None

    def warm(self) -> str | None:
        """Open the index and load the model now (a cold first search takes seconds, longer than the
        timeout). Returns the error text when the index or model cannot load, else None."""
        try:
            fut = self._search_pool.submit(self.backend.search, "warm-up query: 검색 준비")
            fut.add_done_callback(self._count_outcome)
            fut.result()
            if isinstance(self.backend, SearchBackend):   # open the long lane's Searcher too (the model is shared)
                self._long_pool.submit(self._long().search, "warm-up query: 검색 준비").result()
            return None
        except Exception as e:
            return f"{type(e).__name__}: {e}"

    def close(self, wait: bool = True):
        self._runner_pool.shutdown(wait=wait)
        self._long_runner_pool.shutdown(wait=wait)
        self._search_pool.shutdown(wait=wait, cancel_futures=not wait)
        self._long_pool.shutdown(wait=wait, cancel_futures=not wait)

    def shutdown(self) -> None:
        """Stop without losing an accepted call: searches already running finish (each is bounded by the
        timeout), every call still queued is logged as `stopped_by: shutdown` instead of searched, and
        every pending log write lands before this returns."""
        with self._lock:
            self._closing = True
        self._runner_pool.shutdown(wait=True)     # the queued _drain tasks run, and log instead of search
        self._long_runner_pool.shutdown(wait=True)
        self._search_pool.shutdown(wait=True)
        self._long_pool.shutdown(wait=True)
        self.wait_idle(self.cfg.timeout_s + 5)

    def _key(self, session_id) -> tuple[str, str]:
        return current_profile.get(), clean_text(str(session_id))

    def _session_locked(self, key) -> _Session:
        """The session for `key`, made most recently used; sessions past MAX_SESSIONS or idle for
        SESSION_IDLE_S are dropped from the old end first (never one whose search is running)."""
        now = time.monotonic()
        s = self._sessions.get(key)
        if s is None:
            s = self._sessions[key] = _Session()
        else:
            self._sessions.move_to_end(key)
        s.touched = now
        while len(self._sessions) > 1:
            old_key, old = next(iter(self._sessions.items()))
            if old is s or old.running or (len(self._sessions) <= MAX_SESSIONS and now - old.touched < SESSION_IDLE_S):
                break
            del self._sessions[old_key]
            self.counters["sessions_dropped"] += 1
        return s

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until no session has a search queued or running (for tests, benchmarks and shutdown)."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._pending_writes and not any(
                s.running for s in self._sessions.values()), timeout)

    def in_flight(self) -> int:
        with self._lock:
            return sum(1 for s in self._sessions.values() if s.running)

    # -- background ------------------------------------------------------------------------------------
    def _bg(self, ctx, fn, *args):
        with self._lock:
            self._pending_writes += 1
        try:
            self._runner_pool.submit(ctx.run, self._counted, fn, *args)
        except RuntimeError:      # shut down: write inline rather than lose the row
            self._counted(fn, *args)

    def _counted(self, fn, *args):
        try:
            fn(*args)
        finally:
            with self._lock:
                self._pending_writes -= 1
                self._idle.notify_all()

    def _drain(self, key):
        """Run this session's pending job, then the next one queued meanwhile: one search per session."""
        while True:
            with self._lock:
                s = self._sessions[key]
                job, s.pending = s.pending, None
                if job is None:
                    s.running = False
                    self._idle.notify_all()
                    return
                closing = self._closing
            if closing:       # accepted before the stop: the caller was told "queued", so it is a row
                self.counters["shutdown"] += 1
                job.ctx.run(self._write, self._record(job, key, stopped_by=SHUTDOWN))
                continue
            try:
                cached = job.ctx.run(self._search_block, job, key, current=None)
            except BaseException as e:   # _search_block catches everything; this is the last line of defence
                self.counters["errors"] += 1
                rec = {**job.ctx.run(self._record, job, key, stopped_by=ERROR), "error": f"{type(e).__name__}: {e}"}
                cached = (), (), RecallBlock("", False, {}, ERROR, self._write(rec), rec["error"])
            with self._lock:
                if s.gen == job.gen:
                    s.cached = cached

    def _search_block(self, job: _Job, key, current):
        rec = self._record(job, key)
        waited = (time.perf_counter() - job.t0) * 1000
        remaining = self.cfg.timeout_s - waited / 1000
        res, error = None, None
        try:
            if remaining <= 0:
                raise TimeoutError(f"waited {waited:.0f} ms in the queue; the timeout is {self.cfg.timeout_s:.1f} s")
            fut = self._submit(job.query)
            try:
                res = fut.result(timeout=remaining)
            except FutureTimeout:
                fut.cancel()
                raise TimeoutError(f"the search took longer than {self.cfg.timeout_s:.1f} s") from None
        except TimeoutError as e:
            error = f"timeout: {e}"
            self.counters["timeouts"] += 1
        except Exception as e:
            error = f"{type(e).__name__}: {e}"
        total = (time.perf_counter() - job.t0) * 1000
        rec["latency_ms"] = total
        rec["stages_ms"] = {"queue_wait": round(waited, 3), "total": round(total, 3)}
        if current is None:
            with self._lock:
                current = self._sessions[key].gen == job.gen
        if error is not None:
            self.counters["errors"] += 1
            rec.update(error=error, stopped_by=ERROR, injected=False)
            return (), (), RecallBlock("", False, {}, ERROR, self._write(rec), error)
        self.counters["searched"] += 1
        feats = gate_features(res)
        shown = res.hits[: self.cfg.max_lines]
        lines, ids = hit_lines(shown), tuple(h.note_id for h in shown)
        injected = bool(res.gate.inject) and current
        stopped = None if injected else ("threshold" if not res.gate.inject else "in_flight")
        rec.update(
            top_scores=[{"note_id": h.note_id, "score": round(float(h.score), 6), "cosine": round(float(h.cosine), 4)}
                        for h in res.hits[:3]],
            features=feats, threshold=float(res.gate.threshold), index_fingerprint=self.backend.index_id,
            config_hash=self.backend.cfg.config_hash() if self.backend.cfg else None, injected=injected,
            stopped_by=stopped, chars_injected=len(compose_block(lines, self.cfg.char_budget, header=header_for(feats)))
            if injected else 0)
        rec["stages_ms"].update({k: round(v, 3) for k, v in res.timings_ms.items() if k != "total"})
        return lines, ids, RecallBlock("", injected, feats, stopped, self._write(rec))

    def _record(self, job: _Job, key, stopped_by=None) -> dict:
        rec = {"ts": job.ts, "session": key[1], "profile": current_profile.get(), "query": job.query,
               "injected": False}
        if stopped_by:
            rec["stopped_by"] = stopped_by
        return rec

    def _record_gate(self, query, key, ts, stopped) -> dict:
        return {"ts": ts, "session": key[1], "profile": key[0], "query": query, "injected": False,
                "stopped_by": stopped}

    def _write(self, rec: dict) -> int | None:
        if self.log is None:
            return None
        try:
            return self.log.write(rec)
        except Exception:        # a full disk must not break the agent's turn either
            self.counters["errors"] += 1
            self.counters["log_errors"] += 1
            return None


def open_engine(db, *, config_path=None, log_path, retention_days: float | None, privacy: str | None = None,
                timeout_s: float | None = None) -> tuple[RecallEngine, Path | None]:
    """The engine `serve` and `mcp` run: the index, the config in force (--config, else the active one),
    the recall log. Returns (engine, the config file used or None for the defaults)."""
    from search_core.recall.log import RecallLog

    cfg_path = active_config_path(config_path)
    rcfg = load_recall_config(cfg_path)
    if timeout_s is not None:
        rcfg = rcfg.replace(timeout_s=timeout_s)
    log = RecallLog(log_path, retention_days=retention_days, privacy=privacy or rcfg.query_log)
    return RecallEngine(SearchBackend(db, config_path=cfg_path), log, rcfg), cfg_path
