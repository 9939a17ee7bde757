"""A client for `autoresearch serve` that uses only the standard library: an agent's interpreter may not
have our dependencies, so this file also works copied on its own (`python -I` imports nothing else).

    from client import RecallClient          # or: from search_core.recall.client import RecallClient
    rc = RecallClient("http://127.0.0.1:8765", token=None)
    block = rc.prefetch(session_id)          # turn start: the block of the previous turn ("" if none)
    ...                                      # inject `block` into the prompt when it is not empty
    rc.queue(user_message, session_id)       # turn end: start the background search for the next turn

Like the engine, prefetch() and queue() never raise: a dead server costs the agent nothing but recall.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8765"


class RecallError(Exception):
    """search() failed: .status (HTTP code, 0 when unreachable), .code and the server's message."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class RecallClient:
    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, timeout: float = 2.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout      # seconds per HTTP call; the agent's turn never waits longer
        self.last_error: str | None = None
        parts = urllib.parse.urlsplit(self.url)
        host = parts.hostname or ""
        # A loopback server is called over kept-alive connections (http.client, no proxy): a new TCP
        # connection per call cost ~0.3 ms more at the median and ~2-9 ms more at p99 here (load 7 on 2 cores),
        # and urllib sends even 127.0.0.1 to HTTP_PROXY unless NO_PROXY lists it. Other hosts go through
        # urllib, proxies and all.
        self._loopback = parts.scheme == "http" and (host in ("127.0.0.1", "::1", "localhost")
                                                      or host.startswith("127."))
        self._host, self._port, self._prefix = host, parts.port or 80, parts.path.rstrip("/")
        self._idle: list[http.client.HTTPConnection] = []   # connections between two calls, any thread's
        self._idle_lock = threading.Lock()

    def _headers(self) -> dict:
        h = {"Content-Type": "application/json"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        return h

    def _kept_alive(self, method: str, path: str, data: bytes | None) -> tuple[int, bytes]:
        for attempt in (0, 1):
            with self._idle_lock:
                conn = self._idle.pop() if self._idle else None
            reused = conn is not None
            if conn is None:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
            elif conn.sock is not None:
                conn.sock.settimeout(self.timeout)
            deadline = time.monotonic() + self.timeout
            try:
                conn.request(method, self._prefix + path, body=data, headers=self._headers())
                if conn.sock is not None:   # the timeout bounds the whole call, not each socket operation
                    conn.sock.settimeout(max(0.001, deadline - time.monotonic()))
                resp = conn.getresponse()
                raw = resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()
                if reused and not attempt:   # the server closed it while idle (uvicorn: after 5 s): anew
                    continue
                raise
            except BaseException:
                conn.close()
                raise
            if resp.will_close:
                conn.close()
            else:
                with self._idle_lock:
                    if len(self._idle) < 4:  # Hermes calls from 2-3 threads at once at most
                        self._idle.append(conn)
                        conn = None
                if conn is not None:
                    conn.close()
            return resp.status, raw
        raise ConnectionResetError("the server closed the connection twice")

    def _call(self, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode("utf-8")
        method = "GET" if body is None else "POST"
        return self._answer(path, *self._request(method, path, data))

    def _answer(self, path: str, status: int, raw: bytes) -> dict:
        """The JSON of an answer; RecallError for an error status (with the server's code and message)."""
        if status >= 400:
            try:
                err = json.loads(raw)["error"]
            except Exception:
                err = {"code": "http_error", "message": f"HTTP {status}"}
            raise RecallError(status, err.get("code", "?"), err.get("message", ""))
        try:
            return json.loads(raw)
        except ValueError as e:
            raise RecallError(status, "bad_answer", f"{self.url}{path} answered no JSON ({e})") from None

    def search(self, query: str, k: int = 5) -> dict:
        """What `autoresearch search --json` prints; raises RecallError."""
        return self._call("/search", {"query": query, "k": k})

    def queue(self, query: str, session_id: str, profile: str | None = None) -> bool:
        """Start the background recall for the next turn. True when a search was queued; never raises."""
        body = {"query": query, "session_id": session_id}
        if profile:
            body["profile"] = profile
        try:
            out = self._call("/queue", body)
            self.last_error = None
            return bool(out.get("queued"))
        except RecallError as e:
            self.last_error = str(e)
            return False

    def prefetch_result(self, session_id: str, held: list[str] | None = None, *, exclude_notes=(),
                        char_budget: int | None = None, profile: str | None = None) -> dict:
        """The full answer {"block", "injected", "gate", "stopped_by", "notes", ...}; on any failure an
        empty block. exclude_notes: note ids already given in this session; char_budget: a lower budget."""
        body = {"session_id": session_id, "held": list(held or [])}
        if exclude_notes:
            body["exclude_notes"] = list(exclude_notes)
        if char_budget is not None:
            body["char_budget"] = int(char_budget)
        if profile:
            body["profile"] = profile
        try:
            out = self._call("/prefetch", body)
            self.last_error = None
            return out
        except RecallError as e:
            self.last_error = str(e)
            return {"block": "", "injected": False, "gate": {}, "stopped_by": "error", "error": str(e), "notes": []}

    def prefetch(self, session_id: str, held: list[str] | None = None) -> str:
        """The block to inject at this turn, or "" (never raises)."""
        return self.prefetch_result(session_id, held).get("block", "") or ""

    def recall_calls(self) -> dict:
        """How many /queue and /prefetch calls the server answered since it started (its /metrics);
        raises RecallError."""
        counts = {"/queue": 0, "/prefetch": 0}
        for line in self._text("/metrics").splitlines():
            for path in counts:
                if line.startswith(f'autoresearch_requests_total{{path="{path}",status="200"}} '):
                    counts[path] += int(float(line.rsplit(" ", 1)[1]))
        return counts

    def _request(self, method: str, path: str, data: bytes | None) -> tuple[int, bytes]:
        """(status, body) of one request, kept alive on loopback; RecallError "unreachable" when none came."""
        try:
            if self._loopback:
                return self._kept_alive(method, path, data)
            req = urllib.request.Request(self.url + path, data=data, method=method, headers=self._headers())
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as e:
                return e.code, e.read()
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            raise RecallError(0, "unreachable", f"{self.url}: {getattr(e, 'reason', e) or type(e).__name__}") from None

    def _text(self, path: str) -> str:
        """A GET whose answer is text (not JSON)."""
        status, raw = self._request("GET", path, None)
        if status >= 400:
            raise RecallError(status, "http_error", f"{self.url}{path} answered HTTP {status}")
        return raw.decode("utf-8", errors="replace")

    def health(self) -> dict:
        """GET /healthz: {"status", "reasons", "db", ...}, "ok" (HTTP 200) or "degraded" (HTTP 503: the same
        body, its reasons saying what to do); raises RecallError when no such answer came."""
        status, raw = self._request("GET", "/healthz", None)
        if status == 503:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            if isinstance(body, dict) and body.get("status") == "degraded":
                return body
        return self._answer("/healthz", status, raw)

    def healthy(self) -> bool:
        try:
            return self.health().get("status") == "ok"
        except RecallError:
            return False
