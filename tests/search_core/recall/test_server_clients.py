"""`serve` under hostile clients, against a real uvicorn on 127.0.0.1: lone surrogates, a recall log
deleted under the server, SIGTERM with accepted calls, connections that send nothing (with a lowered
file limit, in a child process), a byte a second, huge session ids, a long query ahead of a short one."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from search_core.config import SearchConfig
from search_core.recall.config import RecallConfig
from search_core.recall.backend import SearchBackend
from search_core.recall.engine import RecallEngine
from search_core.recall.log import RecallLog, read_calls
from tests.helpers import ROOT, free_port
from tests.helpers.http import get, post, running

QUESTION = "GraphRAG에서 커뮤니티 요약은 어떻게 만드나요?"
LONG_QUERY = ("GraphRAG 커뮤니티 요약과 RRF 융합을 비교한다. hybrid retrieval. " * 100)[:3996]   # + 4 digits: 4,000


def _engine(db, log_path, **cfg):
    cfg.setdefault("timeout_s", 60.0)
    return RecallEngine(SearchBackend(db, SearchConfig(threshold=0.0)), RecallLog(log_path), RecallConfig(**cfg))


def raw_post(url, text: str):
    """POST a body given as JSON text, so that escapes such as \\ud83d reach the server as they are."""
    req = urllib.request.Request(url, data=text.encode("utf-8"), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_lone_surrogates_are_searched_and_logged_not_500(index_db, tmp_path):
    log = tmp_path / "log.sqlite"
    engine = _engine(index_db, log)
    with running(engine) as url:
        st, body = raw_post(url + "/search", '{"query": "GraphRAG \\ud83d 커뮤니티"}')
        assert st == 200, body
        st, body = raw_post(url + "/queue", '{"query": "GraphRAG 커뮤니티 요약 \\ud83d", "session_id": "s1"}')
        assert st == 200 and body["queued"], body
        st, body = raw_post(url + "/queue", '{"query": "RRF 점수는 어떻게 계산하나요", "session_id": "cut\\ud83d"}')
        assert st == 200 and body["queued"], body
        assert engine.wait_idle(120)
        st, block = raw_post(url + "/prefetch", '{"session_id": "cut\\ud83d"}')
        assert st == 200 and block["call_id"] is not None, block
    # the two queued searches run side by side: their rows may land in either order
    rows = {r["session"]: r for r in read_calls(log)}
    assert sorted(rows) == ["cut\ufffd", "s1"]
    assert rows["s1"]["query"] == "GraphRAG 커뮤니티 요약 \ufffd" and rows["s1"]["stopped_by"] != "error"


def test_bodies_nested_too_deep_or_naming_no_call_are_refused_not_500(index_db, tmp_path):
    engine = _engine(index_db, tmp_path / "log.sqlite")
    with running(engine) as url:
        st, body = raw_post(url + "/search", "[" * 60_000)            # json.loads: RecursionError, a 500
        assert st == 400 and body["error"]["code"] == "invalid_json", body
        st, body = raw_post(url + "/queue", '{"query": ' + "[" * 30_000 + "]" * 30_000 + ', "session_id": "s"}')
        assert st == 400 and body["error"]["code"] == "invalid_json", body
        st, body = post(url + "/label/calls", {"id": 10 ** 20, "label": "relevant"})    # SQLite OverflowError
        assert st == 400 and body["error"]["code"] == "bad_id", body
        st, body = post(url + "/label/calls", {"id": 1, "label": "relevant", "lable": "irrelevant"})
        assert st == 400 and "did you mean 'label'" in body["error"]["message"], body
        assert get(url + "/healthz")[0] == 200


def test_a_deleted_recall_log_is_reopened_and_counted(index_db, tmp_path):
    log = tmp_path / "log.sqlite"
    engine = _engine(index_db, log)
    with running(engine) as url:
        assert post(url + "/queue", {"query": QUESTION, "session_id": "a"})[0] == 200
        assert engine.wait_idle(120)
        log.unlink()                                       # what `rm runs/recall-log.sqlite` does
        assert post(url + "/queue", {"query": "RRF 점수는 어떻게 계산하나요", "session_id": "b"})[0] == 200
        assert engine.wait_idle(120)
        health = json.loads(get(url + "/healthz")[1])
    assert [r["session"] for r in read_calls(log)] == ["b"]      # the new file has the row, not the unlinked one
    assert health["log"]["reopened"] == 1


def test_session_ids_are_capped_like_mcp(index_db, tmp_path):
    engine = _engine(index_db, tmp_path / "log.sqlite")
    with running(engine) as url:
        st, body = post(url + "/queue", {"query": QUESTION, "session_id": "x" * 60_000})
        assert st == 413 and "session_id" in body["error"]["message"]
        st, body = post(url + "/prefetch", {"session_id": "x" * 201})
        assert st == 413


def test_session_state_is_bounded_lru(index_db, tmp_path, monkeypatch):
    import search_core.recall.engine as eng
    monkeypatch.setattr(eng, "MAX_SESSIONS", 20)
    engine = _engine(index_db, tmp_path / "log.sqlite")
    try:
        for i in range(100):
            assert engine.queue_prefetch("ok", f"session-{i}") == "too_short"    # a gate: no search needed
        assert len(engine._sessions) <= 20
        assert ("default", "session-99") in engine._sessions and ("default", "session-0") not in engine._sessions
        assert engine.counters["sessions_dropped"] == 80
    finally:
        engine.close()


def test_sessions_idle_past_their_age_are_dropped(index_db, tmp_path, monkeypatch):
    import search_core.recall.engine as eng
    monkeypatch.setattr(eng, "SESSION_IDLE_S", -1.0)        # every session older than now counts as idle
    engine = _engine(index_db, tmp_path / "log.sqlite")
    try:
        for i in range(5):
            assert engine.queue_prefetch("ok", f"session-{i}") == "too_short"
        assert list(engine._sessions) == [("default", "session-4")]      # under MAX_SESSIONS, gone by age
        assert engine.counters["sessions_dropped"] == 4
    finally:
        engine.close()


def test_a_short_query_does_not_wait_behind_a_long_one(index_db, tmp_path):
    engine = _engine(index_db, tmp_path / "log.sqlite")
    try:
        engine.warm()
        hold = threading.Event()
        engine._long_pool.submit(hold.wait, 120)           # the long lane is busy (as with a 4,000-char query)
        long_query = engine.submit_search("GraphRAG 커뮤니티 요약 " * 100)
        res = engine.search("RRF 점수", timeout_s=120)     # answered while the long lane is still held
        assert res.hits and not long_query.done()
        hold.set()
        assert long_query.result(120).hits
    finally:
        engine.close()


def _until(pred, timeout=300):
    """Poll `pred` until it holds (a condition, not a duration: the test waits for a state, never for time)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def _hold(backend):
    """Make `backend`'s searches wait on an Event: returns (entered, release)."""
    entered, release, real = threading.Event(), threading.Event(), backend.search

    def held(query, top_k=None):
        entered.set()
        release.wait(300)
        return real(query, top_k)
    backend.search = held
    return entered, release


def test_five_long_queries_in_flight_do_not_make_a_short_query_time_out(index_db, tmp_path):
    # Five 4,000-character queries used to make every search answer 504: one lane, 1.9 s each. They are
    # held here, all five in flight on their lane, while a short query is sent: it is answered.
    engine = _engine(index_db, tmp_path / "log.sqlite", timeout_s=60.0)
    answers = []
    with running(engine) as url:
        entered, release = _hold(engine._long())
        threads = [threading.Thread(target=lambda i=i: answers.append(
            post(url + "/search", {"query": f"{LONG_QUERY}{i:04d}"})[0])) for i in range(5)]
        try:
            for t in threads:
                t.start()
            assert _until(lambda: entered.is_set() and engine._long_pool._work_queue.qsize() == 4)
            st, body = post(url + "/search", {"query": "RRF 점수는 어떻게 계산하나요"})
            assert st == 200 and body["results"], body
            assert 200 not in answers                  # all five still held (a 504 is a busy machine's)
        finally:
            release.set()
            for t in threads:
                t.join(300)
    assert len(answers) == 5 and set(answers) <= {200, 504}, answers   # answered or timed out, never lost


def test_long_searches_waiting_never_make_a_short_one_busy(index_db, tmp_path):
    # The waiting-search cap was one count for both lanes: long queries waiting made /search answer 503
    # "busy" to a short query the idle short lane would have answered at once.
    engine = _engine(index_db, tmp_path / "log.sqlite", timeout_s=60.0)
    answers = []
    with running(engine, max_pending=2) as url:
        entered, release = _hold(engine._long())
        threads = [threading.Thread(target=lambda i=i: answers.append(
            post(url + "/search", {"query": f"{LONG_QUERY}{i:04d}"})[0])) for i in range(2)]
        try:
            for t in threads:
                t.start()
            assert _until(lambda: entered.is_set() and engine._long_pool._work_queue.qsize() == 1)
            st, body = post(url + "/search", {"query": f"{LONG_QUERY}more"})
            assert st == 503 and body["error"]["code"] == "busy"          # the long lane is full
            st, body = post(url + "/search", {"query": "RRF 점수는 어떻게 계산하나요"})
            assert st == 200 and body["results"], body                      # the short one is not
        finally:
            release.set()
            for t in threads:
                t.join(300)
    assert len(answers) == 2 and set(answers) <= {200, 504}, answers


def test_long_queue_calls_holding_every_runner_do_not_starve_a_short_one(index_db, tmp_path):
    # Each session's search waits on a runner thread (8); eight long /queue calls in a row held all eight
    # while the short lane stood idle, and the short call behind them timed out in the runners' queue.
    log = tmp_path / "log.sqlite"
    engine = _engine(index_db, log, timeout_s=60.0)
    try:
        engine.warm()
        entered, release = _hold(engine._long())
        try:
            for i in range(engine.runners):
                assert engine.queue_prefetch(f"{LONG_QUERY}{i:04d}", f"long-{i}") is None
            assert _until(lambda: entered.is_set() and engine._long_pool._work_queue.qsize() == engine.runners - 1)
            assert engine.queue_prefetch("RRF 점수는 어떻게 계산하나요", "short") is None
            assert _until(lambda: any(r["session"] == "short" for r in read_calls(log)), timeout=120)
            row = next(r for r in read_calls(log) if r["session"] == "short")
            assert row["stopped_by"] != "error", row                     # searched while every long one waits
            assert not any(r["session"].startswith("long-") for r in read_calls(log))
        finally:
            release.set()
        assert engine.wait_idle(300)
    finally:
        engine.close()
    assert len(read_calls(log)) == engine.runners + 1


def test_the_connection_guard_counts_into_metrics(index_db, tmp_path, monkeypatch):
    # Raw sockets, each read until the server closes it: the server has dropped a connection before the
    # client sees its end, so every count below is exact.
    import search_core.recall.http_guard as guard
    monkeypatch.setattr(guard, "HEADER_TIMEOUT_S", 600.0)       # only the keep-alive and the cap close here
    monkeypatch.setattr(guard, "KEEP_ALIVE_S", 1)
    monkeypatch.setattr(guard, "connection_limits", lambda nofile=None: (4, 8))
    engine = _engine(index_db, tmp_path / "log.sqlite")

    def connect():
        return socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=300)

    def until_closed(s):
        while s.recv(65536):
            pass
        s.close()

    def search_and_close(i):
        body = json.dumps({"query": f"RRF 점수는 어떻게 계산하나요 {i}"}).encode()
        s = connect()
        s.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        until_closed(s)
    with running(engine) as url:
        for _ in range(3):                  # the same protocol error three times: printed once, two held back
            s = connect()
            s.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            until_closed(s)
        s = connect()                       # a response, then nothing: closed by the keep-alive timeout
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        until_closed(s)
        entered, release = _hold(engine.backend)     # four connections busy with a search: a fifth is refused
        busy = [threading.Thread(target=search_and_close, args=(i,)) for i in range(4)]
        try:
            for t in busy:
                t.start()
            assert _until(lambda: entered.is_set() and engine._search_pool._work_queue.qsize() == 3)
            until_closed(connect())
        finally:
            release.set()
            for t in busy:
                t.join(300)
        idle = [connect() for _ in range(5)]        # five that send nothing: the oldest is closed for room
        until_closed(idle[0])
        st, text = get(url + "/metrics")            # one more over the cap: the next oldest idle one goes
        for c in idle[1:]:
            c.close()
    assert st == 200
    for line in ('autoresearch_connections_closed_total{reason="header_timeout"} 0',
                 'autoresearch_connections_closed_total{reason="keep_alive_idle"} 1',
                 'autoresearch_connections_closed_total{reason="evicted_for_room"} 2',
                 'autoresearch_connections_closed_total{reason="refused_busy"} 1',
                 "autoresearch_connections_limit 4", "autoresearch_error_lines_suppressed_total 2"):
        assert line in text.splitlines(), (line, text)


# -- a real `serve` process ---------------------------------------------------------------------------------
def _wait_healthy(url, proc, timeout=300):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited with {proc.returncode}: {proc.stderr.read()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("the server did not come up")


@pytest.mark.slow
def test_sigterm_logs_every_accepted_queue_call(index_db, tmp_path):
    log, port = tmp_path / "log.sqlite", free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "serve", "--db", str(index_db), "--log", str(log),
                             "--port", str(port), "--timeout", "30"], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc)
        n = 60
        for i in range(n):
            st, body = post(url + "/queue", {"query": f"{QUESTION} 질문 {i}번", "session_id": f"s{i}"})
            assert st == 200 and body["queued"], body
        proc.send_signal(signal.SIGTERM)
        proc.wait(180)
    finally:
        if proc.poll() is None:
            proc.kill()
    rows = read_calls(log)
    assert len(rows) == n, f"{len(rows)} rows for {n} accepted calls"
    assert {r["stopped_by"] for r in rows} <= {None, "threshold", "shutdown", "error"}


CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[3]), int(sys.argv[3])))
import search_core.recall.http_guard as guard
guard.HEADER_TIMEOUT_S = float(sys.argv[4])
from search_core.recall.config import RecallConfig
from search_core.recall.backend import SearchBackend
from search_core.recall.engine import RecallEngine
from search_core.recall.server import make_server
engine = RecallEngine(SearchBackend(sys.argv[1]), None, RecallConfig())
make_server(engine, port=int(sys.argv[2]), warm=False).run()
"""


def _child_server(tmp_path, index_db, nofile, header_timeout):
    port = free_port()
    err = open(tmp_path / "stderr.txt", "w")
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(index_db), str(port), str(nofile), str(header_timeout)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=err)
    return proc, f"http://127.0.0.1:{port}", port, err


def _healthz(url, proc, timeout=300):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, (Path(proc.args[0]).name, "exited")
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=5) as r:
                return r.status
        except OSError:
            time.sleep(0.2)
    return None


@pytest.mark.slow
def test_idle_connections_under_a_low_file_limit_do_not_stop_the_server(index_db, tmp_path):
    # 300 connections that send nothing against a server limited to 256 files (the 1,100-under-1,024 case,
    # scaled): the server keeps answering and its stderr stays small. The header deadline is long here
    # (600 s), so what keeps it alive is the connection cap, not the idle timeout.
    proc, url, port, err = _child_server(tmp_path, index_db, 256, 600)
    socks = []
    try:
        assert _healthz(url, proc) == 200
        for _ in range(300):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            socks.append(s)
        assert _healthz(url, proc, timeout=60) == 200, "the server stopped answering under idle connections"
    finally:
        for s in socks:
            s.close()
        proc.terminate()
        proc.wait(60)
        err.close()
    assert (tmp_path / "stderr.txt").stat().st_size < 100_000


@pytest.mark.slow
def test_a_silent_or_trickling_connection_is_closed(index_db, tmp_path):
    proc, url, port, err = _child_server(tmp_path, index_db, 1024, 2)
    try:
        assert _healthz(url, proc) == 200
        silent = socket.create_connection(("127.0.0.1", port), timeout=120)
        assert silent.recv(100) == b"", "a connection that sends nothing was kept"
        trickle = socket.create_connection(("127.0.0.1", port), timeout=120)
        head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Pad: " + b"a" * 600
        closed = False
        for i in range(len(head)):        # one byte every 0.2 s: the head would take 2 minutes
            try:
                trickle.sendall(head[i:i + 1])
            except OSError:
                closed = True
                break
            trickle.settimeout(0.2)
            try:
                if trickle.recv(100) == b"":
                    closed = True
                    break
            except socket.timeout:
                pass
        assert closed, "a request head sent a byte at a time kept its connection"
        metrics = get(url + "/metrics")[1].splitlines()
        assert 'autoresearch_connections_closed_total{reason="header_timeout"} 2' in metrics, metrics
    finally:
        proc.terminate()
        proc.wait(60)
        err.close()


@pytest.mark.slow
def test_mcp_answers_a_call_with_a_lone_surrogate_and_logs_it(index_db, tmp_path):
    import select
    log = tmp_path / "log.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "mcp", "--db", str(index_db), "--log", str(log),
                             "--timeout", "60"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path)

    def send(text):
        proc.stdin.write((text + "\n").encode())
        proc.stdin.flush()

    def reply():
        ready, _, _ = select.select([proc.stdout], [], [], 300)
        return json.loads(proc.stdout.readline()) if ready else None
    try:
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        assert reply()["id"] == 1
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        send('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "recall", "arguments": '
             '{"query": "GraphRAG 커뮤니티 요약 \\ud83d", "session_id": "s\\ud83d"}}}')
        got = reply()
        assert got is not None and got["id"] == 2 and "result" in got, got
        # a line nested past Python's stack, with a lone surrogate: its cleaning raised RecursionError, which
        # ended the stdin reader, and no later call was answered
        send('{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "recall", "arguments": '
             '{"query": "x \\ud83d", "held": ' + "[" * 50_000 + "]" * 50_000 + "}}}")
        send('{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "search_notes", "arguments": '
             '{"query": "GraphRAG", "k": 1}}}')
        got = reply()              # the SDK cannot read it either: it is answered with a JSON-RPC error
        assert got is not None and "error" in got and got["id"] in (3, None), got
        got = reply()
        assert got is not None and got["id"] == 4 and "result" in got, got
    finally:
        proc.stdin.close()
        proc.wait(120)
    rows = read_calls(log)
    assert [(r["session"], r["query"]) for r in rows] == [("s\ufffd", "GraphRAG 커뮤니티 요약 \ufffd")]
