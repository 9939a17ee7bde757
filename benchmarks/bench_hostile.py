"""Costs of the input guards (a 100 KB query with the embedder cap, `check` full and quick, the ledger
verifier), and with --attacks the server under hostile clients, each against a real `serve`:

- 1,100 connections that send nothing, under a file limit of 1,024: does /healthz answer, how fast, and
  how much does stderr grow;
- SIGTERM right after 150 accepted /queue calls (real questions): how many rows the recall log has;
- 1,000 /queue calls with distinct 60 KB session ids: refused or kept, and the server's RSS growth;
- a short query sent right behind a 4,000-character one: its wait, with one search lane (before) and with
  the long-query lane (after), p50/p95 over --runs pairs;
- five 4,000-character /search calls in flight, then a short /search, over a real server (the default 2 s
  timeout): the short one's status and wait, one lane (before) and two (after), --runs rounds;
- eight 4,000-character /queue calls (distinct sessions), then a short one: the short call's outcome and
  latency in the recall log, with one pool of session runners (before) and one per lane (after).

The wrong-input pass (also part of the default run; alone with --wrong-input): one wrong value, and no
value, for every option and argument of every verb (tests/tuner/cli/test_option_values.py, which reads the
verbs from the `main` group): how many cases, how many ended in exit 1 or 2 with a message that names the
option or the value and no traceback, and the ones that did not. --code DIR runs the cases against another
checkout's code (its tests/ are replaced by this one's for the run), to count the same cases before a fix.

    python benchmarks/bench_hostile.py [--db PATH] [--runs 3] [--uncapped] [--attacks] [--wrong-input [--code DIR]]

--db defaults to an index of the demo vault built under runs/bench/; --uncapped also times one embedding
of the whole 100 KB query (what every such search cost before the cap; minutes on a busy machine).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import ROOT, free_port, summary, write_result  # noqa: E402


def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from search_core.recall.engine import RecallEngine, RecallConfig, SearchBackend
from search_core.recall.server import make_server
make_server(RecallEngine(SearchBackend(sys.argv[1]), None, RecallConfig()), port=int(sys.argv[2]), warm=False).run()
"""


def _http(url, body=None, timeout=30.0):
    import json
    import urllib.error
    import urllib.request
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                 method="GET" if body is None else "POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())



def _up(url, proc, timeout=600):
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        try:
            return _http(url + "/healthz", timeout=5)[0]
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"the server did not come up ({proc.returncode})")


def attack_idle(db: Path, n: int = 1100) -> dict:
    import os
    import resource
    import socket
    import subprocess
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 200)), hard))
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        err_path = Path(tmp) / "stderr"
        with open(err_path, "w") as err:
            proc = subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(port)], stderr=err, cwd=ROOT,
                                    env={**os.environ, "PYTHONPATH": str(ROOT)})
            url = f"http://127.0.0.1:{port}"
            try:
                _up(url, proc)
                before = err_path.stat().st_size
                socks = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(n)]
                t0 = time.perf_counter()
                try:
                    st = _http(url + "/healthz", timeout=10)[0]
                except OSError as e:
                    st = f"no answer ({e})"
                healthz_s = time.perf_counter() - t0
                time.sleep(30)              # what the issue watched: stderr over 30 s of held connections
                grown = err_path.stat().st_size - before
                for s in socks:
                    s.close()
            finally:
                proc.terminate()
                proc.wait(60)
    return {"connections": n, "nofile": 1024, "healthz_status": st, "healthz_s": round(healthz_s, 3),
            "stderr_growth_bytes_30s": grown}


def _serve(db: Path, log: Path, port: int):
    import os
    import subprocess
    return subprocess.Popen([sys.executable, "-m", "tuner.cli", "serve", "--db", str(db), "--log", str(log),
                             "--port", str(port)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stderr=subprocess.DEVNULL)


def attack_sigterm(db: Path, n: int = 150) -> dict:
    import signal
    from search_core.recall.log import read_calls
    questions = ["GraphRAG에서 커뮤니티 요약은 어떻게 만드나요?", "RRF 점수는 어떻게 계산하나요?",
                 "hybrid retrieval with dense and sparse channels", "BM25와 dense 검색을 섞는 방법은?"]
    with tempfile.TemporaryDirectory() as tmp:
        log, port = Path(tmp) / "log.sqlite", free_port()
        proc = _serve(db, log, port)
        url = f"http://127.0.0.1:{port}"
        try:
            _up(url, proc)
            accepted = sum(1 for i in range(n) if _http(url + "/queue", {
                "query": f"{questions[i % len(questions)]} ({i})", "session_id": f"s{i}"})[1].get("queued"))
            proc.send_signal(signal.SIGTERM)
            proc.wait(300)
        finally:
            if proc.poll() is None:
                proc.kill()
        rows = read_calls(log)
    by = {}
    for r in rows:
        by[r["stopped_by"] or "injected"] = by.get(r["stopped_by"] or "injected", 0) + 1
    return {"accepted": accepted, "rows": len(rows), "rows_by_outcome": by}


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def attack_session_ids(db: Path, n: int = 1000) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        log, port = Path(tmp) / "log.sqlite", free_port()
        proc = _serve(db, log, port)
        url = f"http://127.0.0.1:{port}"
        try:
            _up(url, proc)
            before = _rss_kib(proc.pid)
            codes = {}
            for i in range(n):
                sid = f"{i:06d}" + "x" * 60_000
                st = _http(url + "/queue", {"query": "ok", "session_id": sid})[0]
                codes[st] = codes.get(st, 0) + 1
            after = _rss_kib(proc.pid)
        finally:
            proc.terminate()
            proc.wait(120)
    return {"calls": n, "status_codes": codes, "rss_growth_mb": round((after - before) / 1024, 1)}


def attack_long_then_short(db: Path, runs: int) -> dict:
    import search_core.recall.engine as eng
    from search_core.recall.engine import RecallConfig, RecallEngine, SearchBackend
    long_q = ("GraphRAG 커뮤니티 요약과 RRF 융합을 비교한다. hybrid retrieval with dense and sparse channels. " * 60)[:4000]
    out = {}
    saved = eng.LONG_QUERY_CHARS
    for name, limit in (("one_lane_before", 10 ** 9), ("long_lane_after", saved)):
        eng.LONG_QUERY_CHARS = limit
        engine = RecallEngine(SearchBackend(db), None, RecallConfig(timeout_s=600))
        engine.warm()
        waits = []
        try:
            for i in range(runs):
                fut = engine.submit_search(f"{long_q[:-6]} {i:05d}")     # a new long query each time (no cache)
                t0 = time.perf_counter()
                engine.search(f"RRF 점수 계산 {i}", timeout_s=600)
                waits.append(time.perf_counter() - t0)
                fut.result(600)
        finally:
            engine.close()
        out[name] = summary(waits)
    eng.LONG_QUERY_CHARS = saved
    return {"short_query_wait_s": out, "long_query_chars": len(long_q)}


LONG_Q = ("GraphRAG 커뮤니티 요약과 RRF 융합을 비교한다. hybrid retrieval with dense and sparse channels. " * 60)[:3994]


def _thread_server(engine):
    """A real `serve` app on uvicorn in a thread of this process (so the lanes can be switched for 'before')."""
    import threading
    from search_core.recall.server import make_server
    port = free_port()
    srv = make_server(engine, port=port)
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    end = time.monotonic() + 600
    while not srv.started and time.monotonic() < end:
        time.sleep(0.05)
    return srv, t, f"http://127.0.0.1:{port}"


def attack_five_long_then_short(db: Path, runs: int) -> dict:
    import threading
    import search_core.recall.engine as eng
    from search_core.recall.engine import RecallConfig, RecallEngine, SearchBackend
    out, saved = {}, eng.LONG_QUERY_CHARS
    for name, limit in (("one_lane_before", 10 ** 9), ("long_lane_after", saved)):
        eng.LONG_QUERY_CHARS = limit
        engine = RecallEngine(SearchBackend(db), None, RecallConfig())      # the served default: 2 s timeout
        srv, thread, url = _thread_server(engine)
        waits, short_codes, long_codes = [], {}, {}
        try:
            for r in range(runs):
                def one_long(i, r=r):
                    st = _http(url + "/search", {"query": f"{LONG_Q} {r:02d}{i:02d}"}, timeout=120)[0]
                    long_codes[st] = long_codes.get(st, 0) + 1
                longs = [threading.Thread(target=one_long, args=(i,)) for i in range(5)]
                for t in longs:
                    t.start()
                time.sleep(0.3)                          # all five sent and waiting before the short one
                t0 = time.perf_counter()
                st = _http(url + "/search", {"query": f"RRF 점수는 어떻게 계산하나요 {r}"}, timeout=120)[0]
                waits.append(time.perf_counter() - t0)
                short_codes[st] = short_codes.get(st, 0) + 1
                for t in longs:
                    t.join(300)
        finally:
            srv.should_exit = True
            thread.join(60)
            engine.close()
        out[name] = {"short_status": short_codes, "short_wait_s": summary(waits), "long_status": long_codes}
    eng.LONG_QUERY_CHARS = saved
    return out


def attack_long_queue_then_short(db: Path, runs: int) -> dict:
    from search_core.recall.engine import RecallConfig, RecallEngine, SearchBackend
    from search_core.recall.log import RecallLog, read_calls
    out = {}
    for name in ("one_runner_pool_before", "runners_per_lane_after"):
        outcomes, latencies = {}, []
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "log.sqlite"
            engine = RecallEngine(SearchBackend(db), RecallLog(log), RecallConfig())
            if name.endswith("before"):
                engine._long_runner_pool = engine._runner_pool
            engine.warm()
            try:
                for r in range(runs):
                    for i in range(engine.runners):
                        engine.queue_prefetch(f"{LONG_Q} {r:02d}{i:02d}", f"long-{r}-{i}")
                    engine.queue_prefetch(f"RRF 점수는 어떻게 계산하나요 {r}", f"short-{r}")
                    engine.wait_idle(600)
            finally:
                engine.close()
            for row in read_calls(log):
                if row["session"].startswith("short-"):
                    outcome = row["stopped_by"] or "injected"
                    outcomes[outcome] = outcomes.get(outcome, 0) + 1
                    latencies.append(row["latency_ms"] / 1000 if row["latency_ms"] is not None else 0.0)
        out[name] = {"short_outcome": outcomes, "short_latency_s": summary(latencies)}
    return out


def wrong_input(code: Path = ROOT) -> dict:
    """The wrong-input pass, run by pytest (its fixtures build the index, ledger and log the cases need) and
    counted from its JUnit XML: cases by outcome, the ones not refused cleanly by how (a traceback, a server,
    sweep or daemon that started, exit 0, another exit code, a message that names neither the option nor the
    value), and those per verb."""
    import os
    import re
    import shutil
    import subprocess
    import xml.etree.ElementTree as ET
    module = "tests/tuner/cli/test_option_values.py"
    if code != ROOT:
        for rel in (module, "tests/helpers/sweeps.py"):
            shutil.copy(ROOT / rel, code / rel)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", module, "-k",
                        "wrong_value", f"--junitxml={report}"], cwd=code, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(code)})
        seconds = time.perf_counter() - t0
        cases = ET.parse(report).getroot().iter("testcase")
        outcome, bad, how = {"refused": 0, "not_refused": 0, "skipped": 0}, {}, {}
        verbs, options = set(), set()
        for c in cases:
            m = re.search(r"\[(.*?):(.*?):(.*)\]$", c.get("name", ""))
            if not m:
                continue
            verbs.add(m[1])
            options.add((m[1], m[2]))
            if c.find("skipped") is not None:
                outcome["skipped"] += 1
            elif c.find("failure") is not None or c.find("error") is not None:
                outcome["not_refused"] += 1
                bad.setdefault(m[1], []).append(f"{m[2]}:{m[3]}")
                f = c.find("failure") if c.find("failure") is not None else c.find("error")
                text = f.get("message") or ""           # not f.text: it quotes the test's own source
                kind = ("started" if "LongRunStarted" in text else "traceback" if "uncaught" in text else
                        "exit_0" if "-> exit 0" in text else "unclear_message" if "names neither" in text else
                        "other_exit_code")
                how[kind] = how.get(kind, 0) + 1
            else:
                outcome["refused"] += 1
    return {"code": str(code), "cases": sum(outcome.values()), "verbs": len(verbs), "options": len(options),
            **outcome, "not_refused_how": how, "not_refused_by_verb": bad, "seconds": round(seconds, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", type=Path, default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--uncapped", action="store_true")
    ap.add_argument("--attacks", action="store_true", help="Only the attacks on `serve` (see the module doc).")
    ap.add_argument("--wrong-input", action="store_true", help="Only the wrong-input pass (see the module doc).")
    ap.add_argument("--code", type=Path, default=ROOT, help="With --wrong-input: the checkout whose code is tried.")
    a = ap.parse_args()
    if a.attacks:
        return run_attacks(a)
    if a.wrong_input:
        res = wrong_input(a.code.resolve())
        print(write_result("hostile-wrong-input", res))
        for k, v in res.items():
            print(f"{k:<20} {v}")
        return
    from search_core.index.check import check_index
    from search_core.index.indexer import index_vault
    from search_core.search.limits import QUERY_EMBED_MAX_CHARS
    from search_core.search.pipeline import Searcher

    db = a.db
    if db is None:
        db = ROOT / "runs" / "bench" / "hostile-demo.sqlite"
        index_vault(ROOT / "experiments" / "demo-vault", db)
    query = ("GraphRAG 커뮤니티 요약과 RRF 융합을 비교한다. hybrid retrieval with dense and sparse channels. " * 2000)[:100_000]
    s = Searcher(db)
    s.search("warm-up")
    res = {"db": str(db), "query_chars": len(query), "cap_chars": QUERY_EMBED_MAX_CHARS,
           "search_100kb_query_s": summary(timed(lambda: s.search(query), a.runs)),
           "search_short_query_s": summary(timed(lambda: s.search("GraphRAG 커뮤니티 요약"), a.runs)),
           "check_full_s": summary(timed(lambda: check_index(db), a.runs)),
           "check_quick_s": summary(timed(lambda: check_index(db, quick=True), a.runs))}
    if a.uncapped:
        res["embed_whole_100kb_query_once_s"] = round(timed(lambda: s.embedder.embed([query], is_query=True), 1)[0], 2)
    import dataclasses
    from tuner.evaluation.evaluate import EvalResult
    from tuner.ledger.ledger import Ledger
    from tuner.ledger.chain import verify_ledger
    from tuner.ledger.round import Round
    from tuner.ledger.schema import RoundDecision
    with tempfile.TemporaryDirectory() as tmp:
        led = Path(tmp) / "l.sqlite"
        lg = Ledger(led)
        lg.new_sweep("s", {"rounds": 1000}, {})
        row = Round("s", 0, "rrf_k", 60, 61, {"rrf_k": 61}, "c", "b", None,
                    EvalResult.from_ledger({"overall": {"hit@5": 0.5, "mrr": 0.4}}), 70.0, RoundDecision.NO_GAIN,
                    "no gain", 1.0)
        t0 = time.perf_counter()
        for i in range(1000):
            lg.append_round(dataclasses.replace(row, round=i))
        res["append_1000_rounds_s"] = round(time.perf_counter() - t0, 3)
        lg.close()
        res["verify_1000_rounds_s"] = summary(timed(lambda: verify_ledger(led), a.runs))
    res["wrong_input"] = wrong_input()
    res["note"] = "measured on a 2-core machine shared with other jobs; see BENCHMARKS.md"
    print(write_result("hostile", res))
    for k, v in res.items():
        print(f"{k:<32} {v}")


def run_attacks(a):
    import os
    db = a.db
    if db is None:
        from search_core.index.indexer import index_vault
        db = ROOT / "runs" / "bench" / "hostile-demo.sqlite"
        index_vault(ROOT / "experiments" / "demo-vault", db)
    res = {"db": str(db), "load_average_at_start": [round(x, 1) for x in os.getloadavg()]}
    res["idle_connections"] = attack_idle(db)
    res["sigterm_after_queue"] = attack_sigterm(db)
    res["session_ids_60kb"] = attack_session_ids(db)
    res["long_then_short"] = attack_long_then_short(db, a.runs)
    res["five_long_then_short_http"] = attack_five_long_then_short(db, a.runs)
    res["eight_long_queue_then_short"] = attack_long_queue_then_short(db, a.runs)
    res["load_average_at_end"] = [round(x, 1) for x in os.getloadavg()]
    res["note"] = "2-core machine shared with other jobs; latency figures need a quieter rerun"
    print(write_result("hostile-attacks", res))
    for k, v in res.items():
        print(f"{k:<24} {v}")


if __name__ == "__main__":
    main()
