"""The handlers of `serve`'s endpoints: each reads its body (search_core.recall.request_body), calls the
recall engine and answers JSON. What every handler shares (the token check, errors as JSON, metrics) is
the server's `endpoint` wrapper (search_core.recall.server.create_app).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from dataclasses import asdict, dataclass

from search_core import SearchCoreError
from search_core.models.base import ModelUnavailable
from search_core.recall.engine import RecallEngine, current_profile
from search_core.recall.request_body import (FIELDS, MAX_K, MAX_PROFILE_CHARS, MAX_SESSION_CHARS, ApiError,
                                             explain_flag, read_json, text_field)

MAX_PENDING_SEARCHES = 64         # beyond this /search answers 503 busy at once instead of queueing forever


@dataclass(frozen=True)
class Limits:
    max_body: int
    max_query_chars: int
    max_pending: int = MAX_PENDING_SEARCHES


def string_list(data: dict, name: str, what: str) -> list[str]:
    v = data.get(name) or []
    if not isinstance(v, list) or not all(isinstance(h, str) for h in v):
        raise ApiError(400, "wrong_type", f'"{name}" must be a list of strings ({what})')
    return v


def as_profile(data: dict):
    """Set this request's profile (its task only); returns the token to reset it with."""
    profile = text_field(data, "profile", required=False)
    if profile is not None and not 0 < len(profile) <= MAX_PROFILE_CHARS:
        raise ApiError(400, "bad_profile", f'"profile" must be a name of 1 to {MAX_PROFILE_CHARS} characters')
    return current_profile.set(profile or "default")


def recall_log_health(engine: RecallEngine) -> dict:
    """The recall log's part of /healthz: its path, how often it was found deleted or replaced and
    reopened, and how many rows could not be written."""
    log = engine.log
    return {"path": str(getattr(log, "path", "")) or None, "reopened": getattr(log, "reopened", 0),
            "write_errors": engine.counters.get("log_errors", 0)}


class Routes:
    """The endpoints over one engine. `pending` counts searches waiting per lane: long queries waiting never
    make a short one "busy". `warm_error` is what warming the engine said at start (None when it worked)."""

    def __init__(self, engine: RecallEngine, limits: Limits, *, watcher=None, started: float | None = None):
        self.engine, self.limits, self.watcher = engine, limits, watcher
        self.pending = {"short": 0, "long": 0}
        self.warm_error: str | None = None
        self.started = started if started is not None else time.time()

    async def search(self, request):
        engine, limits = self.engine, self.limits
        data = await read_json(request, limits.max_body, FIELDS["/search"])
        query = text_field(data, "query", max_chars=limits.max_query_chars)
        if not query.strip():
            raise ApiError(400, "empty_query", 'the "query" is empty; send what you are looking for')
        explain = explain_flag(data)
        k = data.get("k", None)
        if k is not None and (not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K):
            raise ApiError(400, "bad_k", f'"k" must be an integer from 1 to {MAX_K}')
        lane = engine.lane_of(query)
        if self.pending[lane] >= limits.max_pending:
            raise ApiError(503, "busy", f"{self.pending[lane]} searches are already waiting; retry in a moment")
        self.pending[lane] += 1
        try:
            fut = engine.submit_search(query, k)
            try:
                res = await asyncio.wait_for(asyncio.wrap_future(fut), engine.cfg.timeout_s)
            except asyncio.TimeoutError:
                fut.cancel()
                raise ApiError(504, "timeout", f"the search took longer than {engine.cfg.timeout_s:.1f} s") from None
        except ModelUnavailable as e:
            raise ApiError(503, "model_unavailable", str(e)) from None
        except SearchCoreError as e:
            raise ApiError(503, "index_unavailable", str(e)) from None
        except sqlite3.Error as e:
            raise ApiError(503, "index_unavailable", f"the index could not be read ({e}); retry, or rebuild it "
                                                     "with `autoresearch index VAULT --db FILE`") from None
        finally:
            self.pending[lane] -= 1
        from starlette.responses import JSONResponse
        return JSONResponse(res.as_dict(explain=explain))

    async def queue(self, request):
        data = await read_json(request, self.limits.max_body, FIELDS["/queue"])
        query = text_field(data, "query", max_chars=self.limits.max_query_chars)
        sid = text_field(data, "session_id", max_chars=MAX_SESSION_CHARS)
        token = as_profile(data)
        try:
            stopped = self.engine.queue_prefetch(query, sid, start=asyncio.get_running_loop().call_soon)
        finally:
            current_profile.reset(token)
        from starlette.responses import JSONResponse
        return JSONResponse({"queued": stopped is None, "stopped_by": stopped, "session_id": sid})

    async def prefetch(self, request):
        data = await read_json(request, self.limits.max_body, FIELDS["/prefetch"])
        sid = text_field(data, "session_id", max_chars=MAX_SESSION_CHARS)
        held = string_list(data, "held", "lines the agent already holds")
        exclude = string_list(data, "exclude_notes", "note ids the agent was already given")
        explain = explain_flag(data)
        budget = data.get("char_budget")
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
            raise ApiError(400, "bad_char_budget", '"char_budget" must be a positive integer (characters)')
        token = as_profile(data)
        from starlette.responses import JSONResponse
        try:
            return JSONResponse(self.engine.prefetch(sid, held, exclude, budget).as_dict(explain=explain))
        finally:
            current_profile.reset(token)

    async def healthz(self, request):
        from starlette.responses import JSONResponse

        from search_core.recall.health import check
        engine = self.engine
        b = engine.backend
        log = recall_log_health(engine)
        watch = self.watcher.status() if self.watcher is not None else None
        outcomes = engine.outcomes
        health = await asyncio.get_running_loop().run_in_executor(None, check, b.db, outcomes, watch,
                                                                  log.get("write_errors"))
        body = {"status": health.status, "reasons": list(health.reasons), "db": str(b.db),
                "db_exists": b.db.exists(), "index_fingerprint": b.fingerprint_key,
                "in_flight": engine.in_flight(), "warm_error": self.warm_error,
                "searches": asdict(outcomes), "log": log,
                "uptime_s": round(time.time() - self.started, 1),
                **({"watch": watch} if watch is not None else {})}
        if health.status == "ok":
            return JSONResponse(body)
        # 503, so a monitor or a supervisor that reads only the status code sees the outage; the body is the
        # same state, with the server's usual error beside it (every reason says what to do)
        error = {"code": "degraded", "message": "; ".join(health.reasons)}
        return JSONResponse({**body, "error": error}, status_code=503)
