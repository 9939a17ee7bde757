"""A client for `autoresearch serve` that uses only the standard library: an agent's interpreter may not
have our dependencies, so this file also works copied on its own (`python -I` imports nothing else).

    from client import RecallClient          # or: from search_core.client import RecallClient
    rc = RecallClient("http://127.0.0.1:8765", token=None)
    block = rc.prefetch(session_id)          # turn start: the block of the previous turn ("" if none)
    ...                                      # inject `block` into the prompt when it is not empty
    rc.queue(user_message, session_id)       # turn end: start the background search for the next turn

Like the engine, prefetch() and queue() never raise: a dead server costs the agent nothing but recall.
"""

from __future__ import annotations

import json
import urllib.error
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

    def _call(self, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.url + path, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json"})
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            try:
                err = json.loads(e.read())["error"]
            except Exception:
                err = {"code": "http_error", "message": str(e)}
            raise RecallError(e.code, err.get("code", "?"), err.get("message", "")) from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise RecallError(0, "unreachable", f"{self.url}: {getattr(e, 'reason', e)}") from None

    def search(self, query: str, k: int = 5) -> dict:
        """What `autoresearch search --json` prints; raises RecallError."""
        return self._call("/search", {"query": query, "k": k})

    def queue(self, query: str, session_id: str) -> bool:
        """Start the background recall for the next turn. True when a search was queued; never raises."""
        try:
            out = self._call("/queue", {"query": query, "session_id": session_id})
            self.last_error = None
            return bool(out.get("queued"))
        except RecallError as e:
            self.last_error = str(e)
            return False

    def prefetch_result(self, session_id: str, held: list[str] | None = None) -> dict:
        """The full answer {"block", "injected", "gate", "stopped_by", ...}; on any failure an empty block."""
        try:
            out = self._call("/prefetch", {"session_id": session_id, "held": list(held or [])})
            self.last_error = None
            return out
        except RecallError as e:
            self.last_error = str(e)
            return {"block": "", "injected": False, "gate": {}, "stopped_by": "error", "error": str(e)}

    def prefetch(self, session_id: str, held: list[str] | None = None) -> str:
        """The block to inject at this turn, or "" (never raises)."""
        return self.prefetch_result(session_id, held).get("block", "") or ""

    def healthy(self) -> bool:
        try:
            return self._call("/healthz").get("status") == "ok"
        except RecallError:
            return False
