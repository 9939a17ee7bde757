"""What keeps `serve` answering whatever its clients do: the uvicorn settings and the connection protocol
of a server nobody can hold.

- A connection must finish a request head within HEADER_TIMEOUT_S of opening (or of its previous
  response): one that sends nothing, or one byte a second, is closed. Idle keep-alive: KEEP_ALIVE_S.
- At most `max_connections` are open, below the process's file limit (RLIMIT_NOFILE) by FD_RESERVE for
  the index, the log, the model and the accept burst. Past it the oldest connection that is waiting for
  a request head is closed to make room, so a new client (a /healthz probe) always gets in; when every
  connection is busy with a request the new one is closed. Without this, 1,100 connections that sent
  nothing under `ulimit -n 1024` made accept() fail with EMFILE and the server answered nobody.
- The same error is printed at most once a minute, as one line: a refused accept() or a protocol error
  repeated per connection used to print a traceback each time (about 125 MB of stderr in 30 s).
- What the guard did is counted (ConnectionGuard) and shown in /metrics beside the request counters: an
  attack that is held off is otherwise invisible, since its connections never become requests.

Who may send a request (RequestGuard, around the whole app): a web page the user happens to open is a
client too. Without a token, a page on any origin could write labels (which steer `calibrate`) with a
`text/plain` form post or a "no-cors" fetch, and a page whose DNS name was pointed at 127.0.0.1 (DNS
rebinding) could read the recall log's raw queries. So:
- the Host header must name this server: a loopback name (127.0.0.1, localhost, [::1], any port), the
  address it was asked to bind, any IP literal on a wildcard bind (rebinding needs a DNS name), or a name
  given with --allow-host; anything else is 421 `host_not_allowed`, naming --allow-host;
- a POST/PUT/PATCH/DELETE must say `Content-Type: application/json` (415 `unsupported_media_type`): a
  browser sends that cross-origin only after a CORS preflight, which this server never grants;
- and one that carries an Origin header must come from the server's own origin (403 `cross_origin`).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import resource
import socket
import sys
import threading
import time
from dataclasses import dataclass

HEADER_TIMEOUT_S = 10.0      # a request head is a few hundred bytes: 10 s is generous for any real client
BODY_TIMEOUT_S = 10.0        # the body (at most 64 KB) must arrive within this once the head has
KEEP_ALIVE_S = 5             # uvicorn's default, kept explicit
FD_RESERVE = 128             # files the process needs besides sockets: SQLite (+WAL, shm), model, pipes
MAX_CONNECTIONS = 2000       # above this, memory per connection matters more than file descriptors
MAX_BACKLOG = 2048
REPEAT_EVERY_S = 60.0        # one line per distinct error per minute


def connection_limits(nofile: int | None = None) -> tuple[int, int]:
    """(max open connections, listen backlog) for a soft file limit of `nofile` (default: ours). asyncio
    accepts up to `backlog` sockets in one go before any protocol runs, so both must fit under the limit."""
    if nofile is None:
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if nofile == resource.RLIM_INFINITY:
            nofile = 1 << 20
    room = max(nofile - FD_RESERVE, 16)
    backlog = max(8, min(MAX_BACKLOG, room // 4))
    return max(8, min(MAX_CONNECTIONS, room - backlog)), backlog


class RepeatLimiter:
    """Lets each distinct error through once per REPEAT_EVERY_S, and counts what it held back."""

    def __init__(self, every_s: float = REPEAT_EVERY_S, clock=time.monotonic):
        self.every_s, self.clock = every_s, clock
        self.last: dict[str, float] = {}
        self.held: dict[str, int] = {}
        self.suppressed = 0                     # every line held back, all kinds together (for /metrics)
        self.lock = threading.Lock()

    def admit(self, key: str) -> int | None:
        """None to drop this one; else how many of its kind were dropped since it was last let through."""
        now = self.clock()
        with self.lock:
            if key in self.last and now - self.last[key] < self.every_s:
                self.held[key] = self.held.get(key, 0) + 1
                self.suppressed += 1
                return None
            if len(self.last) > 1000:          # distinct keys are few; never let this grow either
                self.last.clear()
            self.last[key] = now
            return self.held.pop(key, 0)


CLOSE_REASONS = ("header_timeout", "keep_alive_idle", "evicted_for_room", "refused_busy")
REFUSE_REASONS = ("host_not_allowed", "cross_origin", "unsupported_media_type")


class ConnectionGuard:
    """One server's guard counters: connections open, and closed by the guard for each reason (no request
    head within HEADER_TIMEOUT_S; idle KEEP_ALIVE_S after a response; the oldest idle one closed to make room
    at the cap; a new one refused when every connection was busy), and the error lines held back."""

    def __init__(self):
        self.closed = dict.fromkeys(CLOSE_REASONS, 0)
        self.refused = dict.fromkeys(REFUSE_REASONS, 0)      # requests RequestGuard answered itself
        self.open = 0
        self.limit = 0
        self.limiter = RepeatLimiter()

    def metrics_text(self) -> str:
        """Prometheus text, in the same style as the server's other counters."""
        out = ["# TYPE autoresearch_connections_closed_total counter"]
        out += [f'autoresearch_connections_closed_total{{reason="{r}"}} {self.closed[r]}' for r in CLOSE_REASONS]
        out += [f"autoresearch_connections_open {self.open}", f"autoresearch_connections_limit {self.limit}",
                "# TYPE autoresearch_error_lines_suppressed_total counter",
                f"autoresearch_error_lines_suppressed_total {self.limiter.suppressed}",
                "# TYPE autoresearch_requests_refused_total counter"]
        out += [f'autoresearch_requests_refused_total{{reason="{r}"}} {self.refused[r]}' for r in REFUSE_REASONS]
        return "\n".join(out) + "\n"


def _one_line(message: str, exc: BaseException | None, held: int) -> str:
    text = f"autoresearch serve: {message}"
    if exc is not None:
        text += f": {type(exc).__name__}: {exc}"
    if held:
        text += f" ({held} more like it in the last {REPEAT_EVERY_S:.0f} s)"
    return text


class OneLinePerMinute(logging.Filter):
    """A logging filter for uvicorn's and asyncio's loggers: one line per distinct message per minute,
    with the exception's type and text in place of its traceback."""

    def __init__(self, limiter: RepeatLimiter):
        super().__init__()
        self.limiter = limiter

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        exc = record.exc_info[1] if record.exc_info else None
        held = self.limiter.admit(f"{record.name}:{record.msg}:{type(exc).__name__ if exc else ''}")
        if held is None:
            return False
        record.msg, record.args = _one_line(record.getMessage(), exc, held), ()
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def install_quiet_errors(loop, limiter: RepeatLimiter | None = None, stream=None) -> RepeatLimiter:
    """The event loop's exception handler and uvicorn's loggers, rate-limited to one line per error per
    minute (called from the app's startup, on the serving loop)."""
    limiter = limiter or RepeatLimiter()
    out = stream or sys.stderr

    def handler(loop, context):
        exc = context.get("exception")
        held = limiter.admit(f"loop:{context.get('message')}:{type(exc).__name__ if exc else ''}:"
                             f"{getattr(exc, 'errno', '')}")
        if held is not None:
            print(_one_line(str(context.get("message", "event loop error")), exc, held), file=out, flush=True)

    loop.set_exception_handler(handler)
    filt = OneLinePerMinute(limiter)
    for name in ("uvicorn", "uvicorn.error", "asyncio"):
        lg = logging.getLogger(name)
        ours = [f for f in lg.filters if isinstance(f, OneLinePerMinute)]
        if ours:              # the loggers are the process's: a later server counts into its own limiter
            ours[0].limiter = limiter
        else:
            lg.addFilter(filt)
    return limiter


def guarded_protocol(max_connections: int, header_timeout_s: float | None = None,
                     guard: ConnectionGuard | None = None):
    """uvicorn's h11 protocol with a request-head deadline and a connection cap (see the module doc),
    counting into `guard`."""
    from uvicorn.protocols.http.h11_impl import H11Protocol
    if header_timeout_s is None:
        header_timeout_s = HEADER_TIMEOUT_S
    guard = guard or ConnectionGuard()
    guard.limit = max_connections
    closed = guard.closed

    class GuardedH11Protocol(H11Protocol):

        def connection_made(self, transport):
            self._head_timer = None
            self._opened = time.monotonic()
            guard.open += 1
            super().connection_made(transport)
            self._arm()
            if len(self.connections) > max_connections:
                self._make_room()

        def _waiting_for_head(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self):
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_cycle = self.cycle
            self._head_timer = self.loop.call_later(header_timeout_s, self._head_deadline)

        def _head_deadline(self):
            self._head_timer = None
            if self.cycle is self._head_cycle and self._waiting_for_head() and not self.transport.is_closing():
                closed["header_timeout"] += 1
                self.transport.close()

        def _make_room(self):
            idle = [c for c in self.connections if c is not self and getattr(c, "_waiting_for_head", None)
                    and c._waiting_for_head() and not c.transport.is_closing()]
            if idle:
                victim = min(idle, key=lambda c: c._opened)
                closed["evicted_for_room"] += 1
                victim.transport.close()
            else:
                closed["refused_busy"] += 1
                self.transport.close()

        def on_response_complete(self):
            super().on_response_complete()
            if self.cycle is not None and self.cycle.response_complete and not self.transport.is_closing():
                self._arm()      # the next request's head has the same deadline as the first's

        def timeout_keep_alive_handler(self):
            if not self.transport.is_closing():
                closed["keep_alive_idle"] += 1
            super().timeout_keep_alive_handler()

        def connection_lost(self, exc):
            guard.open -= 1
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            super().connection_lost(exc)

    return GuardedH11Protocol


def guarded_config(app, *, host: str, port: int, log_level: str = "warning", guard: ConnectionGuard | None = None,
                   **kw):
    """A uvicorn.Config with the limits above (the caller's keywords win), counting into `guard`."""
    import uvicorn
    max_conn, backlog = connection_limits()
    opts = dict(host=host, port=port, log_level=log_level, access_log=False, timeout_graceful_shutdown=5,
                backlog=backlog, timeout_keep_alive=KEEP_ALIVE_S, http=guarded_protocol(max_conn, guard=guard))
    opts.update(kw)
    return uvicorn.Config(app, **opts)


# -- who may send a request ------------------------------------------------------------------------------
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARD_BINDS = ("0.0.0.0", "::", "")
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class HostPolicy:
    """The Host names a server answers to: `names` (lower case, no port, IPv6 without brackets), and with
    `any_ip` every IP literal (a wildcard bind is reached by whatever address the machine has)."""
    names: frozenset[str]
    any_ip: bool = False

    def allows(self, name: str) -> bool:
        if name in self.names:
            return True
        if not self.any_ip:
            return False
        try:
            ipaddress.ip_address(name)
            return True
        except ValueError:
            return False

    def shown(self) -> str:
        names = sorted(f"[{n}]" if ":" in n else n for n in self.names)
        return ", ".join(names) + (", any IP address" if self.any_ip else "")


def host_policy(bind_host: str = "127.0.0.1", allow_hosts=()) -> HostPolicy:
    """Loopback names always; the bind address itself (a remote bind the user allowed with --allow-remote);
    on a wildcard bind the machine's own names and any IP literal; plus each --allow-host name."""
    names = set(LOOPBACK_NAMES)
    bind = (bind_host or "").strip().lower().strip("[]")
    any_ip = bind in WILDCARD_BINDS
    if any_ip:
        names.update(n.lower() for n in (socket.gethostname(), socket.getfqdn()) if n)
    else:
        names.add(bind.rstrip("."))
    for h in allow_hosts:
        name = host_name(h)
        if name is None:
            raise ValueError(f"--allow-host {h!r} is not a host name (give e.g. notes.example.com)")
        names.add(name)
    return HostPolicy(frozenset(names), any_ip)


def host_name(value: str) -> str | None:
    """The name part of a Host header value ("localhost:8765" -> "localhost", "[::1]:80" -> "::1"), lower
    case and without a trailing dot; None when it is not a host[:port] at all."""
    v = value.strip().lower()
    if v.startswith("["):
        end = v.find("]")
        name, rest = v[1:end], v[end + 1:]
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
    else:
        name, sep, port = v.rpartition(":") if ":" in v else (v, "", "")
        if (sep and not port.isdigit()) or ":" in name:
            return None
    name = name[:-1] if name.endswith(".") else name
    return name or None


def _header(scope, key: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k == key:
            return v.decode("latin-1")
    return None


class RequestGuard:
    """ASGI middleware around the app: the Host, Origin and Content-Type rules of the module doc."""

    def __init__(self, app, policy: HostPolicy, guard: ConnectionGuard | None = None):
        self.app, self.policy = app, policy
        self.refused = (guard or ConnectionGuard()).refused

    def refusal(self, scope) -> tuple[int, str, str] | None:
        host = _header(scope, b"host")
        # no Host at all is an HTTP/1.0 client by hand, never a browser (the only client that rebinds)
        if host is not None:
            name = host_name(host)
            if name is None or not self.policy.allows(name):
                return (421, "host_not_allowed",
                        f"Host {host!r} is not a name this server answers to ({self.policy.shown()}): a web page "
                        "can reach a server on this machine through a DNS name that points here. To serve "
                        f"under that name, start it with --allow-host {name or 'NAME'}")
        if scope.get("method", "GET").upper() not in WRITE_METHODS:
            return None
        origin = _header(scope, b"origin")
        if origin is not None and (host is None or origin.strip().lower() not in
                                   (f"http://{host.strip().lower()}", f"https://{host.strip().lower()}")):
            return (403, "cross_origin", f"a {scope['method']} from the web page at {origin!r} is refused: only "
                    "this server's own pages may change anything here (send no Origin header from a program)")
        ctype = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return (415, "unsupported_media_type",
                    f"a {scope['method']} body must be sent with `Content-Type: application/json`, not "
                    f"{ctype or 'no Content-Type'} (a form or a no-cors fetch from another site cannot, which "
                    "is why it is required)")
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refused = self.refusal(scope)
        if refused is None:
            return await self.app(scope, receive, send)
        status, code, message = refused
        self.refused[code] += 1
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
