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
                                                   200 when ok, 503 when degraded, with "error" beside;
                                                   what degrades it: search_core.recall.health)
    GET  /metrics                               -> Prometheus text
    GET  /label                                 -> the labelling page (search_core.recall.label_page)
Errors are {"error": {"code", "message"}} with a 4xx/5xx status; nothing a client sends takes the server down.
Every request must name this server in its Host header, and a POST must be `application/json` from no other
origin (http_guard.RequestGuard: a web page must not read the log or write labels); a body that repeats a key
is refused. The request body: search_core.recall.request_body; the handlers: search_core.recall.routes.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import sys
import threading
import time
from collections import defaultdict, deque

from search_core import SearchCoreError
from search_core.recall.engine import RecallEngine
from search_core.recall.request_body import MAX_BODY_BYTES, MAX_QUERY_CHARS, ApiError, error_response
from search_core.recall.routes import MAX_PENDING_SEARCHES, Limits, Routes

LOOPBACK = ("127.0.0.1", "::1", "localhost")


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
    from search_core.recall.label_page import label_routes     # GET /label: the labelling page and its data

    guard = guard or ConnectionGuard()      # its connection counters and held-back errors go into /metrics
    metrics = _Metrics()
    routes = Routes(engine, Limits(max_body, max_query_chars, max_pending), watcher=watcher, started=metrics.started)

    def endpoint(fn, *, auth=True):
        """`fn` behind the token check (unless auth=False), its errors as JSON, counted in /metrics."""
        async def handler(request):
            t0 = time.perf_counter()
            try:
                if auth and token:
                    given = request.headers.get("authorization", "")
                    if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                        raise ApiError(401, "unauthorized", "send `Authorization: Bearer TOKEN` (the server's --token)")
                resp = await fn(request)
            except ApiError as e:
                resp = error_response(e.status, e.code, e.message)
            except Exception as e:       # the server stays up whatever a request does
                resp = error_response(500, "internal", f"{type(e).__name__}: {e}")
            metrics.observe(request.url.path, resp.status_code, time.perf_counter() - t0)
            return resp
        return handler

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
            routes.warm_error = await asyncio.get_running_loop().run_in_executor(None, engine.warm)
            if routes.warm_error:   # serving on (the index may appear), but say so where the user looks
                print(f"autoresearch serve: the index is not usable yet ({routes.warm_error}); searches "
                      "will answer with that error and /healthz says degraded", file=sys.stderr, flush=True)
        yield
        # Here, not after run(): uvicorn re-raises the SIGTERM it caught once serve() returns, which ends
        # the process before any code after run() (150 accepted /queue calls left 8 rows that way).
        await asyncio.get_running_loop().run_in_executor(None, engine.shutdown)

    table = [Route("/search", endpoint(routes.search), methods=["POST"]),
             Route("/queue", endpoint(routes.queue), methods=["POST"]),
             Route("/prefetch", endpoint(routes.prefetch), methods=["POST"]),
             Route("/healthz", endpoint(routes.healthz, auth=False), methods=["GET"]),
             Route("/metrics", endpoint(metrics_ep), methods=["GET"])]
    table += label_routes(engine, endpoint, max_body)
    app = Starlette(routes=table, exception_handlers={HTTPException: http_error}, lifespan=lifespan)
    return RequestGuard(app, hosts or host_policy(), guard)


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
