"""`autoresearch serve`: a real uvicorn on 127.0.0.1, every endpoint, the bad inputs, the stdlib client."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from search_core.recall.client import RecallClient, RecallError
from search_core.config import SearchConfig
from search_core.recall.block import LEAN_GATE_KEYS
from search_core.recall.config import RecallConfig
from search_core.recall.backend import SearchBackend
from search_core.recall.engine import RecallEngine
from search_core.recall.log import RecallLog, read_calls
from tests.helpers import ROOT, free_port
from tests.helpers.http import get, post, running
from tuner.cli import main

QUESTION = "GraphRAG에서 커뮤니티 요약은 어떻게 만드나요?"


def _engine(db, tmp_path, threshold=0.0, **cfg):
    cfg.setdefault("timeout_s", 60.0)   # the shared machine: the timeout tests set their own
    return RecallEngine(SearchBackend(db, SearchConfig(threshold=threshold)), RecallLog(tmp_path / "log.sqlite"),
                        RecallConfig(**cfg))


def test_endpoints_and_shapes(index_db, tmp_path):
    engine = _engine(index_db, tmp_path)
    with running(engine) as url:
        status, res = post(url + "/search", {"query": QUESTION, "k": 3, "explain": True})
        cli = json.loads(CliRunner().invoke(main, ["search", QUESTION, "--db", str(index_db), "--json", "-k", "3",
                                                   "--config", str(_toml(tmp_path, threshold=0.0))]).output)
        assert status == 200 and set(res) == set(cli)
        assert res["results"] == cli["results"] and res["gate"] == cli["gate"]
        # by default the answer carries the decision and its reason, not the gate's features or the timings
        status, lean = post(url + "/search", {"query": QUESTION, "k": 3})
        assert status == 200 and "features" not in lean["gate"] and "timings_ms" not in lean
        assert lean["gate"]["reason"] == res["gate"]["reason"] and lean["results"] == res["results"]
        assert len(json.dumps(lean)) < len(json.dumps(res)) - 1000
        # every hit says where its file is: inside the vault, and on this machine
        top = lean["results"][0]
        assert top["path"].endswith(".md") and top["path"].startswith(top["note_id"])
        assert Path(top["abs_path"]).is_file() and Path(top["abs_path"]).as_posix().endswith(top["path"])
        assert post(url + "/search", {"query": QUESTION, "explain": "yes"})[0] == 400
        assert post(url + "/queue", {"query": QUESTION, "session_id": "s1"}) == (
            200, {"queued": True, "stopped_by": None, "session_id": "s1"})
        assert post(url + "/queue", {"query": "thanks!", "session_id": "s2"})[1]["stopped_by"] in ("too_short",
                                                                                                 "small_talk")
        assert engine.wait_idle(60)
        status, blk = post(url + "/prefetch", {"session_id": "s1"})
        assert status == 200 and set(blk) >= {"block", "injected", "gate", "stopped_by"}
        assert blk["injected"] and "GraphRAG" in blk["block"] and blk["gate"]["threshold"] == 0.0
        assert set(blk["gate"]) <= {*LEAN_GATE_KEYS, "decided_by"} and blk["gate"]["reason"] and blk["caveat"] is False
        # which cut decided, as /search says it: a model's probability is read against its own threshold
        decided = blk["gate"]["decided_by"]
        assert decided == {k: res["gate"]["decided_by"][k] for k in ("kind", "source", "threshold")}
        assert decided["kind"] == blk["gate"]["kind"] == "model" and decided["threshold"] != blk["gate"]["threshold"]
        assert blk["gate"]["probability"] >= decided["threshold"]
        assert ".md)" in blk["block"]      # each line names its note's file
        assert post(url + "/prefetch", {"session_id": "never-seen"})[1]["stopped_by"] == "nothing_queued"
        status, health = get(url + "/healthz")
        assert status == 200 and json.loads(health)["status"] == "ok"
        post(url + "/search", {"query": QUESTION})        # the same query again: served from the vector cache
        status, text = get(url + "/metrics")
        assert status == 200 and 'autoresearch_requests_total{path="/search",status="200"} 3' in text
        hits = int(text.split("autoresearch_query_cache_hits_total ")[1].split()[0])
        assert hits >= 2        # the CLI-free repeats of QUESTION: /search twice + the queued recall


def _toml(tmp_path, **kw):
    p = tmp_path / "cfg.toml"
    p.write_text("".join(f"{k} = {v}\n" for k, v in kw.items()))
    return p


def test_bad_inputs_get_clear_json_errors(index_db, tmp_path):
    engine = _engine(index_db, tmp_path)
    with running(engine) as url:
        cases = [
            ("/search", b"", 400, "empty_body"), ("/queue", b"{not json", 400, "invalid_json"),
            ("/prefetch", b"[1, 2]", 400, "not_an_object"), ("/queue", b'{"query": "x"}', 400, "missing_field"),
            ("/search", b'{"query": 42}', 400, "wrong_type"), ("/search", b'{"query": "   "}', 400, "empty_query"),
            ("/search", json.dumps({"query": "q" * 100_000}).encode(), 413, "body_too_large"),
            ("/queue", json.dumps({"query": "가" * 20_000, "session_id": "s"}, ensure_ascii=False).encode(), 413, "query_too_long"),
            ("/search", b'{"query": "RRF", "k": 0}', 400, "bad_k"), ("/prefetch", b'{"session_id": "s", "held": 3}',
                                                                     400, "wrong_type"),
            ("/queue", b'{"query": "RRF score", "sesion_id": "s"}', 400, "unknown_field"),
        ]
        for path, raw, status, code in cases:
            got_status, body = post(url + path, None, raw=raw)
            assert (got_status, body["error"]["code"]) == (status, code), (path, raw[:40])
            assert body["error"]["message"]
        _, body = post(url + "/queue", None, raw=b'{"query": "RRF score", "sesion_id": "s"}')
        assert "unknown field \"sesion_id\" (did you mean 'session_id'?)" in body["error"]["message"]
        status, text = get(url + "/nope")
        assert status == 404 and json.loads(text)["error"]["code"] == "not_found"
        status, text = get(url + "/search")
        assert status == 405 and "endpoints" in json.loads(text)["error"]["message"]
        # clients that go away: mid-body, and after a full request before reading the answer
        host, port = url.removeprefix("http://").split(":")
        for payload in (b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 5000\r\n\r\n{\"query\": \"Gra",
                        b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 22\r\n\r\n{\"query\": \"RRF score\"}"):
            with socket.create_connection((host, int(port))) as s:
                s.sendall(payload)
        assert post(url + "/search", {"query": "RRF 점수"})[0] == 200          # still serving
        for _ in range(100):    # the mid-body one is counted as a disconnect (499), not a server error
            if 'path="/search",status="499"} 1' in get(url + "/metrics")[1]:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the mid-body disconnect was not recorded as 499: " + get(url + "/metrics")[1])
    assert read_calls(tmp_path / "log.sqlite") == []      # rejected requests start no recall


def test_bearer_token(index_db, tmp_path):
    with running(_engine(index_db, tmp_path), token="s3cret") as url:
        status, body = post(url + "/search", {"query": QUESTION})
        assert status == 401 and body["error"]["code"] == "unauthorized"
        assert post(url + "/search", {"query": QUESTION}, headers={"Authorization": "Bearer wrong"})[0] == 401
        assert post(url + "/search", {"query": QUESTION}, headers={"Authorization": "Bearer s3cret"})[0] == 200
        assert get(url + "/metrics")[0] == 401 and get(url + "/healthz")[0] == 200
        rc = RecallClient(url, token="s3cret", timeout=30)
        assert rc.search(QUESTION)["results"]
        with pytest.raises(RecallError, match="401 unauthorized"):
            RecallClient(url, timeout=30).search(QUESTION)


def test_burst_of_500_loses_nothing_and_the_server_stays_up(index_db, tmp_path):
    engine = _engine(index_db, tmp_path)
    with running(engine) as url:
        n = 500
        barrier = threading.Barrier(n)
        out = [None] * n
        queries = [QUESTION, "RRF 점수는 어떻게 계산하나요", "ok", "김치찌개 재료가 뭐였지?", "hello there!"]

        def fire(i):
            barrier.wait()            # all 500 go at once
            path, body = (("/queue", {"query": queries[i % 5], "session_id": f"b{i}"}) if i % 2 else
                          ("/search", {"query": queries[i % 5] + f" {i}"}))
            try:
                out[i] = (path, *post(url + path, body))
            except Exception as e:    # a refused connection would show here
                out[i] = (path, 0, {"error": {"code": type(e).__name__}})

        threads = [threading.Thread(target=fire, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        statuses = {(p, s, b.get("error", {}).get("code")) for p, s, b in out}
        assert all(s in (200, 503, 504) for _, s, _ in statuses), statuses   # JSON answers, never a crash
        assert sum(1 for p, s, _ in out if p == "/queue" and s == 200) == n // 2
        assert engine.wait_idle(120)
        rows = read_calls(tmp_path / "log.sqlite")
        assert len(rows) == n // 2 and {r["session"] for r in rows} == {f"b{i}" for i in range(1, n, 2)}
        assert {r["stopped_by"] for r in rows} >= {"too_short", "small_talk"}
        assert post(url + "/search", {"query": QUESTION})[0] == 200 and get(url + "/healthz")[0] == 200


def test_missing_and_locked_index(index_db, tmp_path, capfd):
    engine = _engine(tmp_path / "gone.sqlite", tmp_path)
    with running(engine) as url:
        # said once at start, where the person who started the server looks (it only said so in /healthz)
        assert "the index is not usable yet" in capfd.readouterr().err
        status, body = post(url + "/search", {"query": QUESTION})
        assert status == 503 and body["error"]["code"] == "index_unavailable" and "no index at" in body["error"]["message"]
        assert post(url + "/queue", {"query": QUESTION, "session_id": "s"})[1]["queued"]
        assert engine.wait_idle(30)
        blk = post(url + "/prefetch", {"session_id": "s"})[1]
        assert blk["block"] == "" and blk["stopped_by"] == "error" and "no index at" in blk["error"]
        status, health = get(url + "/healthz")
        assert status == 503 and json.loads(health)["status"] == "degraded"

    # WAL readers never wait on a writer (that is the point of WAL); a file left in rollback-journal mode
    # under an exclusive transaction is what "locked" looks like to the server.
    import sqlean
    copy = tmp_path / "locked.sqlite"
    copy.write_bytes(index_db.read_bytes())
    holder = sqlean.connect(str(copy), isolation_level=None)
    holder.execute("PRAGMA journal_mode = DELETE")
    holder.execute("BEGIN EXCLUSIVE")
    engine = _engine(copy, tmp_path / "l", timeout_s=1.0)
    with running(engine, warm=False) as url:
        try:
            status, body = post(url + "/search", {"query": "RRF 점수는 어떻게 계산하나요"})
            assert status in (503, 504) and body["error"]["code"] in ("index_unavailable", "timeout"), body
            engine.queue_prefetch("김치찌개 재료가 뭐였지?", "s")
            assert engine.wait_idle(30)
            blk = engine.prefetch("s")
            assert blk.stopped_by == "error" and ("locked" in blk.error or "timeout" in blk.error)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        for _ in range(40):          # the searcher blocked on the lock gives up after its 5 s busy timeout
            if post(url + "/search", {"query": QUESTION})[0] == 200:
                break
            time.sleep(0.5)
        else:
            pytest.fail("the server did not recover after the lock was released")


def test_remote_host_needs_a_flag(index_db):
    r = CliRunner().invoke(main, ["serve", "--db", str(index_db), "--host", "0.0.0.0"])
    assert r.exit_code != 0 and "--allow-remote" in r.output
    r = CliRunner().invoke(main, ["serve", "--db", str(index_db), "--allow-host", "notes.lan:http"])
    assert r.exit_code != 0 and "--allow-host 'notes.lan:http' is not a host name" in r.output


AGENT = r'''
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("client", sys.argv[1])
client = importlib.util.module_from_spec(spec); spec.loader.exec_module(client)
rc = client.RecallClient(sys.argv[2], timeout=30)
def fetch():                                          # the user takes a while to answer: wait for the
    while True:                                      # search rather than guess a sleep
        r = rc.prefetch_result("agent-1")
        if r["stopped_by"] != "in_flight":
            return r
        time.sleep(0.05)
import time
from pathlib import Path
turns = []
for msg in ["GraphRAG에서 커뮤니티 요약은 어떻게 만드나요?", "감사합니다 수고하셨습니다!", "RRF 점수 계산에서 k는 보통 얼마?"]:
    r = fetch()                                      # turn start: last turn's recall
    block = r["block"]
    prompt = (block + "\n\n" if block else "") + msg  # inject
    turns.append({"block": block, "r": r, "prompt_chars": len(prompt)})
    rc.queue(msg, "agent-1")                         # turn end
turns.append({"block": fetch()["block"]})
print(json.dumps({"turns": turns, "modules": sorted(m for m in sys.modules if m.split(".")[0] in
                                                      ("search_core", "numpy", "starlette"))}))
'''


def test_stdlib_agent_through_the_real_cli_server(index_db, tmp_path):
    port = free_port()
    cfg = _toml(tmp_path, threshold=0.0)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", "from tuner.cli import main; main()", "serve", "--db", str(index_db), "--port", str(port),
                             "--config", str(cfg), "--log", str(tmp_path / "log.sqlite"), "--timeout", "10"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            if RecallClient(url).healthy():
                break
            time.sleep(0.1)
        (tmp_path / "agent.py").write_text(AGENT)
        out = subprocess.run([sys.executable, "-I", str(tmp_path / "agent.py"), str(ROOT / "search_core" / "recall" / "client.py"),
                              url], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        res = json.loads(out.stdout)
    finally:
        proc.terminate()
        proc.wait(15)
    blocks = [t["block"] for t in res["turns"]]
    assert blocks[0] == "" and "GraphRAG" in blocks[1] and blocks[2] == "" and "RRF" in blocks[3]
    assert res["modules"] == []        # the agent imported none of our dependencies
    rows = read_calls(tmp_path / "log.sqlite")
    assert [r["stopped_by"] for r in rows] == [None, "small_talk", None]
    assert [bool(r["delivered_at"]) for r in rows] == [True, False, True]


def test_prefetch_leaves_out_given_notes_lowers_the_budget_and_keys_by_profile(index_db, tmp_path):
    engine = _engine(index_db, tmp_path)
    with running(engine) as url:
        def queued(sid, profile=None):
            body = {"query": QUESTION, "session_id": sid, **({"profile": profile} if profile else {})}
            assert post(url + "/queue", body)[1]["queued"]
            assert engine.wait_idle(60)

        queued("p1", profile="coder")
        assert post(url + "/prefetch", {"session_id": "p1"})[1]["stopped_by"] == "nothing_queued"   # another profile
        full = post(url + "/prefetch", {"session_id": "p1", "profile": "coder"})[1]
        assert full["injected"] and full["notes"][0] == "ai/graphrag" and len(full["notes"]) >= 2
        queued("p1", profile="coder")
        rest = post(url + "/prefetch", {"session_id": "p1", "profile": "coder", "exclude_notes": ["ai/graphrag"]})[1]
        assert "ai/graphrag" not in rest["notes"] and "(ai/graphrag.md)" not in rest["block"] and rest["injected"]
        queued("p1", profile="coder")
        none = post(url + "/prefetch", {"session_id": "p1", "profile": "coder", "exclude_notes": full["notes"]})[1]
        assert none["block"] == "" and none["stopped_by"] == "already_held" and none["notes"] == []
        queued("p2")
        small = post(url + "/prefetch", {"session_id": "p2", "char_budget": 80})[1]
        assert 0 < len(small["block"]) <= 80 and small["notes"] == ["ai/graphrag"]
        queued("p3")
        tiny = post(url + "/prefetch", {"session_id": "p3", "char_budget": 10})[1]   # shorter than the header
        assert tiny["block"] == "" and tiny["stopped_by"] == "no_room"
        for body, code in (({"session_id": "s", "char_budget": 0}, "bad_char_budget"),
                           ({"session_id": "s", "char_budget": "9"}, "bad_char_budget"),
                           ({"session_id": "s", "exclude_notes": "ai/rrf"}, "wrong_type"),
                           ({"session_id": "s", "profile": ""}, "bad_profile"),
                           ({"session_id": "s", "profile": "x" * 201}, "bad_profile")):
            status, res = post(url + "/prefetch", body)
            assert (status, res["error"]["code"]) == (400, code), body
    rows = read_calls(tmp_path / "log.sqlite")
    assert [r["profile"] for r in rows] == ["coder"] * 3 + ["default"] * 2
