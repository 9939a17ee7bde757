"""`serve` against web pages: a request whose Host is not this server's is refused (DNS rebinding read the
recall log's raw queries), and so is a write that is not `application/json` or comes from another origin (a
page on any site wrote labels through a text/plain form post); a body that repeats a key is refused. The
same attacks from a real browser: test_label_page.py."""

import json
import urllib.error
import urllib.request

import pytest

from search_core.config import SearchConfig
from search_core.recall.config import RecallConfig
from search_core.recall.backend import SearchBackend
from search_core.recall.engine import RecallEngine
from search_core.recall.http_guard import host_name, host_policy
from search_core.recall.log import RecallLog, read_calls
from tests.helpers.http import get, post, running

QUERY = "GraphRAG 커뮤니티 요약은 어떻게 하나"


def _send(url, method="GET", body=None, headers=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture
def served(index_db, tmp_path):
    """`serve` with no token (the default) and one logged call to label. Yields (url, port, call id, log)."""
    log = RecallLog(tmp_path / "log.sqlite")
    engine = RecallEngine(SearchBackend(index_db, SearchConfig(threshold=0.0)), log, RecallConfig(timeout_s=60.0))
    with running(engine) as url:
        assert post(url + "/queue", {"query": QUERY, "session_id": "s"})[0] == 200
        assert engine.wait_idle(60)
        (call,) = read_calls(log.path)
        yield url, int(url.rsplit(":", 1)[1]), call["id"], log.path


def _labels(log_path):
    return [r["label"] for r in read_calls(log_path)]


def test_a_host_that_is_not_this_server_is_refused(served):
    url, port, _, _ = served
    status, body = _send(url + "/label/calls?since=all", headers={"Host": f"evil.example:{port}"})
    assert status == 421 and body["error"]["code"] == "host_not_allowed", body
    assert "--allow-host evil.example" in body["error"]["message"] and QUERY not in json.dumps(body)
    for path in ("/healthz", "/metrics", "/label"):
        assert _send(url + path, headers={"Host": "evil.example"})[0] == 421, path
    status, body = _send(url + "/search", "POST", json.dumps({"query": QUERY}).encode(),
                         {"Host": "evil.example", "Content-Type": "application/json"})
    assert status == 421
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "localhost", "LOCALHOST.", "127.0.0.1"):
        status, body = _send(url + "/label/calls?since=all", headers={"Host": host})
        assert status == 200 and body["suggested"][0]["query"] == QUERY, host
    metrics = get(url + "/metrics")[1]
    assert 'autoresearch_requests_refused_total{reason="host_not_allowed"} 5' in metrics.splitlines()


def test_the_host_names_a_server_answers_to():
    loop = host_policy("127.0.0.1")
    assert all(loop.allows(host_name(h)) for h in ("127.0.0.1:8765", "localhost", "[::1]:80", "Localhost:1"))
    assert not any(loop.allows(host_name(h) or "") for h in ("evil.example", "10.0.0.5", "127.0.0.1.evil.example",
                                                             "[::1", "localhost:http", "::1"))
    remote = host_policy("192.168.1.5", ["notes.lan"])        # a remote bind the user asked for (--allow-remote)
    assert remote.allows("192.168.1.5") and remote.allows("notes.lan") and not remote.allows("evil.example")
    wildcard = host_policy("0.0.0.0")                          # reached by whatever address the machine has
    assert wildcard.allows("10.1.2.3") and wildcard.allows("fe80::1") and not wildcard.allows("evil.example")
    with pytest.raises(ValueError, match="--allow-host"):
        host_policy("127.0.0.1", ["bad host:name"])


def test_writes_must_be_json_from_no_other_origin(served):
    url, port, call_id, log_path = served
    body = json.dumps({"id": call_id, "label": "relevant"}).encode()
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        status, got = _send(url + "/label/calls", "POST", body, {"Content-Type": ctype} if ctype else {})
        assert status == 415 and got["error"]["code"] == "unsupported_media_type", (ctype, got)
        assert "application/json" in got["error"]["message"]
    for origin in (f"http://127.0.0.1:{port + 1}", "http://evil.example", "null"):
        status, got = _send(url + "/label/calls", "POST", body, {"Content-Type": "application/json",
                                                                 "Origin": origin})
        assert status == 403 and got["error"]["code"] == "cross_origin", (origin, got)
    status, got = _send(url + "/queue", "POST", json.dumps({"query": QUERY + "?", "session_id": "x"}).encode(),
                        {"Content-Type": "text/plain"})
    assert status == 415
    assert _labels(log_path) == [None] and len(read_calls(log_path)) == 1   # nothing written, nothing queued
    # the server's own page, and a program (no Origin), still write
    status, got = _send(url + "/label/calls", "POST", body, {"Content-Type": "application/json; charset=utf-8",
                                                             "Origin": f"http://127.0.0.1:{port}"})
    assert status == 200 and _labels(log_path) == ["relevant"]
    assert post(url + "/label/calls", {"id": call_id, "label": "irrelevant"})[0] == 200
    assert _labels(log_path) == ["irrelevant"]


def test_a_body_that_repeats_a_key_is_refused(served):
    url, _, call_id, log_path = served
    # the shape a text/plain form post makes: name `{"id": N, "label": "`, value `", "label": "relevant"}`
    raw = ('{"id": %d, "label": "=", "label": "relevant"}' % call_id).encode()
    status, got = post(url + "/label/calls", None, raw=raw)
    assert status == 400 and got["error"]["code"] == "duplicate_key" and '"label"' in got["error"]["message"]
    status, got = post(url + "/prefetch", None, raw=b'{"session_id": "s", "held": [], "session_id": "t"}')
    assert status == 400 and got["error"]["code"] == "duplicate_key"
    assert _labels(log_path) == [None]
