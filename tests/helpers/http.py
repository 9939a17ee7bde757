"""A real uvicorn `serve` app in a thread, and JSON over urllib, for the tests of the HTTP surfaces: every test
that runs `serve` in a thread of the test process starts it with `running`."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager

from tests.helpers import free_port


@contextmanager
def running(engine, *, port: int | None = None, **kw):
    """`serve` on 127.0.0.1 (port: a free one unless given, e.g. a restart on the same port) until the block
    ends; then the engine is closed. kw: make_server's (token, warm, ...). Yields the base URL."""
    from search_core.recall.server import make_server
    port = port or free_port()
    srv = make_server(engine, port=port, **kw)
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    for _ in range(6000):
        if srv.started:
            break
        time.sleep(0.05)
    assert srv.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        t.join(60)
        engine.close()


def post(url, body, *, raw=None, headers=None):
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json",
                                                                          **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
