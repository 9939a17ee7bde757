"""`autoresearch serve`: the recall path and search over HTTP (Starlette on uvicorn), loopback by default.

    POST /search   {"query", "k", "explain"?}   -> what `search --json` prints, less the gate's features and
                                                   the timings unless "explain" is true
    POST /queue    {"query", "session_id", "profile"?}   -> at once: {"queued", "stopped_by", "session_id"}
    POST /prefetch {"session_id", "held"?, "exclude_notes"?, "char_budget"?, "profile"?, "explain"?}
                   -> {"block", "injected", "caveat", "gate", "stopped_by", "call_id", "error", "notes"}
                      ("gate": the decision and its reason; its features too with "explain": true)
"profile" names whose session this is (an agent serving several profiles; default "default"): the session
key and the recall log's profile column. "exclude_notes" leaves out notes the agent was already given.
    GET  /healthz                               -> {"status": "ok"|"degraded", "reasons", ...} (no token needed;
                                                   what degrades it: search_core.recall.health)
    GET  /metrics                               -> Prometheus text
    GET  /label                                 -> the labelling page (search_core.recall.label_page)
Errors are {"error": {"code", "message"}} with a 4xx/5xx status; nothing a client sends takes the server down.
Every request must name this server in its Host header, and a POST must be `application/json` from no other
origin (http_guard.RequestGuard: a web page must not read the log or write labels); a body that repeats a key
is refused.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import sys
import sqlite3
import threading
import time
from collections import defaultdict, deque

from search_core import SearchCoreError
from search_core.models.base import ModelUnavailable
from search_core.recall.engine import RecallEngine, current_profile
from search_core.recall.http_guard import BODY_TIMEOUT_S
from search_core.validate import clean_text, unknown_field

MAX_BODY_BYTES = 64 * 1024        # a turn's message is a few KB; 64 KB is ~20 pages of text
MAX_QUERY_CHARS = 4000            # e5 reads 512 tokens (~1,500 Korean chars); past 4,000 a query is a paste
MAX_PENDING_SEARCHES = 64         # beyond this /search answers 503 busy at once instead of queueing forever
MAX_K = 100
MAX_PROFILE_CHARS = 200           # a profile is a name, not a document
MAX_SESSION_CHARS = 200           # an id, as over MCP; 60 KB ids used to be kept, per session, forever
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def check_host(host: str, allow_remote: bool) -> str | None:
    """None for loopback; a warning for another address with --allow-remote; refused without it."""
    try:
        loop = host in LOOPBACK or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loop = False
    if loop:
        return None
    if not allow_remote:
        raise SearchCoreError(f"refusing to listen on {host}: the server exposes your notes. Use the default "
                              "--host 127.0.0.1, or pass --allow-remote (and --token) to listen on another address")
    return f"listening on {host}, not loopback: other machines can query your notes"


def check_allowed_hosts(host: str, allow_hosts=()) -> None:
    """Raises SearchCoreError when an --allow-host value is not a host name."""
    from search_core.recall.http_guard import host_policy
    try:
        host_policy(host, allow_hosts)
    except ValueError as e:
        raise SearchCoreError(str(e)) from None


class _Metrics:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = defaultdict(int)                     # (path, status) -> n
        self.latency = defaultdict(lambda: deque(maxlen=10_000))   # path -> seconds, last 10k
        self.started = time.time()

    def observe(self, path, status, seconds):
        with self.lock:
            self.requests[(path, status)] += 1
            self.latency[path].append(seconds)

    def render(self, engine: RecallEngine) -> str:
        out = ["# TYPE autoresearch_requests_total counter"]
        with self.lock:
            for (path, status), n in sorted(self.requests.items()):
                out.append(f'autoresearch_requests_total{{path="{path}",status="{status}"}} {n}')
            out.append("# TYPE autoresearch_request_seconds summary")
            for path, vals in sorted(self.latency.items()):
                s = sorted(vals)
                for q in (0.5, 0.95, 0.99):
                    out.append(f'autoresearch_request_seconds{{path="{path}",quantile="{q}"}} '
                               f'{s[min(int(q * len(s)), len(s) - 1)]:.6f}')
                out.append(f'autoresearch_request_seconds_count{{path="{path}"}} {len(s)}')
        for k, v in engine.counters.items():
            out.append(f"autoresearch_recall_{k}_total {v}")
        cache = engine.backend.query_cache
        out.append(f"autoresearch_query_cache_hits_total {cache.hits}")
        out.append(f"autoresearch_query_cache_misses_total {cache.misses}")
        out.append(f"autoresearch_recall_in_flight {engine.in_flight()}")
        out.append(f"autoresearch_uptime_seconds {time.time() - self.started:.0f}")
        return "\n".join(out) + "\n"


def _err(status, code, message):
    from starlette.responses import JSONResponse
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


async def _read_body(request, max_body: int) -> bytes:
    from starlette.requests import ClientDisconnect
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body:
                raise ApiError(413, "body_too_large", f"the body is over {max_body:,} bytes; send a shorter query")
            chunks.append(chunk)
    except ClientDisconnect:
        raise ApiError(499, "client_disconnected", "the client went away mid-request") from None
    return b"".join(chunks)


# The fields each endpoint reads; anything else is refused by name (a misspelt "session_id" would have
# searched under an empty session and delivered the block to nobody).
FIELDS = {"/search": ("query", "k", "explain"), "/queue": ("query", "session_id", "profile"),
          "/prefetch": ("session_id", "held", "exclude_notes", "char_budget", "profile", "explain")}


def _explain(data: dict) -> bool:
    """The "explain" field: true adds the gate's features (and a search's timings) to the answer."""
    v = data.get("explain", False)
    if not isinstance(v, bool):
        raise ApiError(400, "wrong_type", f'"explain" must be true or false, not {type(v).__name__}')
    return v


def _known_fields(data: dict, fields: tuple[str, ...], path: str) -> dict:
    refusal = unknown_field(data, fields, path)
    if refusal:
        raise ApiError(400, "unknown_field", refusal)
    return data


class DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list) -> dict:
    """json.loads keeps the last of two equal keys: a body can then pass a check on one value and act on
    another, and a text/plain form post can only be shaped into JSON by repeating a key."""
    out = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKey(k)
        out[k] = v
    return out


async def _read_json(request, max_body: int, fields: tuple[str, ...] | None = None) -> dict:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_body:
        raise ApiError(413, "body_too_large", f"the body is {int(declared):,} bytes; the limit is {max_body:,}")
    try:   # a body sent a byte at a time would hold the connection (and its file) for as long as it likes
        raw = await asyncio.wait_for(_read_body(request, max_body), BODY_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise ApiError(408, "body_timeout", f"the body did not arrive within {BODY_TIMEOUT_S:.0f} s") from None
    if not raw.strip():
        raise ApiError(400, "empty_body", 'the body is empty; send JSON, e.g. {"query": "...", "session_id": "..."}')
    try:
        data = json.loads(raw, object_pairs_hook=_no_duplicate_keys)
    except DuplicateKey as e:
        raise ApiError(400, "duplicate_key", f'the body names "{e.args[0]}" twice; send each field once') from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:    # 64 KB of "[" nests too deep
        raise ApiError(400, "invalid_json", f"the body is not valid JSON ({e}); send an object like "
                                            '{"query": "...", "session_id": "..."}') from None
    if not isinstance(data, dict):
        raise ApiError(400, "not_an_object", f"the body must be a JSON object, not {type(data).__name__}")
    return data if fields is None else _known_fields(data, fields, request.url.path)


def _field(data: dict, name: str, *, required=True, max_chars=None) -> str | None:
    """A string field of a body, its lone surrogates made U+FFFD (search_core.validate.clean_text)."""
    v = data.get(name)
    if v is None:
        if required:
            raise ApiError(400, "missing_field", f'"{name}" is required; fields: {", ".join(sorted(data)) or "none"}')
        return None
    if not isinstance(v, str):
        raise ApiError(400, "wrong_type", f'"{name}" must be a string, not {type(v).__name__}')
    if max_chars and len(v) > max_chars:
        raise ApiError(413, "query_too_long", f'"{name}" has {len(v):,} characters; the limit is {max_chars:,}. '
                                              "Send the user's message, not a whole document")
    return clean_text(v)


def create_app(engine: RecallEngine, *, token: str | None = None, max_body: int = MAX_BODY_BYTES,
               max_query_chars: int = MAX_QUERY_CHARS, max_pending: int = MAX_PENDING_SEARCHES, warm: bool = True,
               watcher=None, guard=None, hosts=None):
    """The app, behind RequestGuard (http_guard): `hosts` is its HostPolicy (default: loopback names only)."""
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.responses import JSONResponse, PlainTextResponse
    from starlette.routing import Route

    from search_core.recall.http_guard import ConnectionGuard, RequestGuard, host_policy, install_quiet_errors

    guard = guard or ConnectionGuard()      # its connection counters and held-back errors go into /metrics
    metrics = _Metrics()
    pending = {"short": 0, "long": 0}       # per lane: long queries waiting never make a short one "busy"
    state = {"warm_error": None}

    def endpoint(fn, *, auth=True):
        async def handler(request):
            t0 = time.perf_counter()
            try:
                if auth and token:
                    given = request.headers.get("authorization", "")
                    if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                        raise ApiError(401, "unauthorized", "send `Authorization: Bearer TOKEN` (the server's --token)")
                resp = await fn(request)
            except ApiError as e:
                resp = _err(e.status, e.code, e.message)
            except Exception as e:       # the server stays up whatever a request does
                resp = _err(500, "internal", f"{type(e).__name__}: {e}")
            metrics.observe(request.url.path, resp.status_code, time.perf_counter() - t0)
            return resp
        return handler

    async def search(request):
        data = await _read_json(request, max_body, FIELDS["/search"])
        query = _field(data, "query", max_chars=max_query_chars)
        if not query.strip():
            raise ApiError(400, "empty_query", 'the "query" is empty; send what you are looking for')
        explain = _explain(data)
        k = data.get("k", None)
        if k is not None and (not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K):
            raise ApiError(400, "bad_k", f'"k" must be an integer from 1 to {MAX_K}')
        lane = engine.lane_of(query)
        if pending[lane] >= max_pending:
            raise ApiError(503, "busy", f"{pending[lane]} searches are already waiting; retry in a moment")
        pending[lane] += 1
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
            pending[lane] -= 1
        return JSONResponse(res.as_dict(explain=explain))

    def as_profile(data: dict):
        profile = _field(data, "profile", required=False)
        if profile is not None and not 0 < len(profile) <= MAX_PROFILE_CHARS:
            raise ApiError(400, "bad_profile", f'"profile" must be a name of 1 to {MAX_PROFILE_CHARS} characters')
        return current_profile.set(profile or "default")   # this request's task only

    def string_list(data: dict, name: str, what: str) -> list[str]:
        v = data.get(name) or []
        if not isinstance(v, list) or not all(isinstance(h, str) for h in v):
            raise ApiError(400, "wrong_type", f'"{name}" must be a list of strings ({what})')
        return v

    async def queue(request):
        data = await _read_json(request, max_body, FIELDS["/queue"])
        query = _field(data, "query", max_chars=max_query_chars)
        sid = _field(data, "session_id", max_chars=MAX_SESSION_CHARS)
        token = as_profile(data)
        try:
            stopped = engine.queue_prefetch(query, sid, start=asyncio.get_running_loop().call_soon)
        finally:
            current_profile.reset(token)
        return JSONResponse({"queued": stopped is None, "stopped_by": stopped, "session_id": sid})

    async def prefetch(request):
        data = await _read_json(request, max_body, FIELDS["/prefetch"])
        sid = _field(data, "session_id", max_chars=MAX_SESSION_CHARS)
        held = string_list(data, "held", "lines the agent already holds")
        exclude = string_list(data, "exclude_notes", "note ids the agent was already given")
        explain = _explain(data)
        budget = data.get("char_budget")
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
            raise ApiError(400, "bad_char_budget", '"char_budget" must be a positive integer (characters)')
        token = as_profile(data)
        try:
            return JSONResponse(engine.prefetch(sid, held, exclude, budget).as_dict(explain=explain))
        finally:
            current_profile.reset(token)

    async def healthz(request):
        from dataclasses import asdict

        from search_core.recall.health import check
        b = engine.backend
        log = recall_log_health(engine)
        watch = watcher.status() if watcher is not None else None
        outcomes = engine.outcomes
        health = await asyncio.get_running_loop().run_in_executor(None, check, b.db, outcomes, watch,
                                                                  log.get("write_errors"))
        return JSONResponse({"status": health.status, "reasons": list(health.reasons), "db": str(b.db),
                             "db_exists": b.db.exists(), "index_fingerprint": b.fingerprint_key,
                             "in_flight": engine.in_flight(), "warm_error": state["warm_error"],
                             "searches": asdict(outcomes), "log": log,
                             "uptime_s": round(time.time() - metrics.started, 1),
                             **({"watch": watch} if watch is not None else {})})

    async def metrics_ep(request):
        return PlainTextResponse(metrics.render(engine) + guard.metrics_text(), media_type="text/plain; version=0.0.4")

    async def http_error(request, exc):
        codes = {404: "not_found", 405: "method_not_allowed"}
        return JSONResponse({"error": {"code": codes.get(exc.status_code, "http_error"),
                                       "message": f"{request.method} {request.url.path}: {exc.detail}; endpoints: "
                                                  "POST /search /queue /prefetch, GET /healthz /metrics"}},
                            status_code=exc.status_code)

    @asynccontextmanager
    async def lifespan(app):
        install_quiet_errors(asyncio.get_running_loop(), guard.limiter)
        if warm:   # the first search loads the model (seconds): do it now, not inside a client's timeout
            state["warm_error"] = await asyncio.get_running_loop().run_in_executor(None, engine.warm)
            if state["warm_error"]:   # serving on (the index may appear), but say so where the user looks
                print(f"autoresearch serve: the index is not usable yet ({state['warm_error']}); searches "
                      "will answer with that error and /healthz says degraded", file=sys.stderr, flush=True)
        yield
        # Here, not after run(): uvicorn re-raises the SIGTERM it caught once serve() returns, which ends
        # the process before any code after run() (150 accepted /queue calls left 8 rows that way).
        await asyncio.get_running_loop().run_in_executor(None, engine.shutdown)

    routes = [Route("/search", endpoint(search), methods=["POST"]),
              Route("/queue", endpoint(queue), methods=["POST"]),
              Route("/prefetch", endpoint(prefetch), methods=["POST"]),
              Route("/healthz", endpoint(healthz, auth=False), methods=["GET"]),
              Route("/metrics", endpoint(metrics_ep), methods=["GET"])]
    from search_core.recall.label_page import label_routes     # GET /label: the labelling page and its data
    routes += label_routes(engine, endpoint, _read_json, ApiError, max_body)
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error}, lifespan=lifespan)
    return RequestGuard(app, hosts or host_policy(), guard)


def recall_log_health(engine: RecallEngine) -> dict:
    """The recall log's part of /healthz: its path, how often it was found deleted or replaced and
    reopened, and how many rows could not be written."""
    log = engine.log
    return {"path": str(getattr(log, "path", "")) or None, "reopened": getattr(log, "reopened", 0),
            "write_errors": engine.counters.get("log_errors", 0)}


def make_server(engine: RecallEngine, *, host="127.0.0.1", port=8765, token=None, allow_hosts=(), **kw):
    """A uvicorn.Server (not started): run() blocks; tests run it in a thread and set should_exit.
    Timeouts, the connection cap, quiet errors and the Host names it answers to (loopback, `host` itself,
    `allow_hosts`): search_core.recall.http_guard."""
    import uvicorn

    from search_core.recall.http_guard import ConnectionGuard, guarded_config, host_policy
    check_allowed_hosts(host, allow_hosts)
    hosts = host_policy(host, allow_hosts)
    guard = ConnectionGuard()
    return uvicorn.Server(guarded_config(create_app(engine, token=token, guard=guard, hosts=hosts, **kw), host=host,
                                         port=port, guard=guard))


def run_server(engine: RecallEngine, *, host="127.0.0.1", port=8765, token=None, watcher=None,
               allow_hosts=()) -> None:
    """Serve until SIGTERM/SIGINT; then every call already accepted is searched or logged as
    `stopped_by: shutdown` before the process ends (RecallEngine.shutdown)."""
    try:
        make_server(engine, host=host, port=port, token=token, watcher=watcher, allow_hosts=allow_hosts).run()
    finally:
        engine.shutdown()
