"""The recall path's numbers: API call latency, log writes and stats, and the HTTP server under load.

    python benchmarks/bench_recall.py [--index runs/johngrib.sqlite] [--stages api,log,open,closed]

- api:    queue_prefetch() and prefetch() latency (p50/p95/p99) while searches run in the background
- log:    one recall-log write (p95) over 10,000 calls, then `recall-log stats` over 100,000 calls
- open:   `autoresearch serve` on a copy of the johngrib index, open loop 20 req/s for 100 s on /search,
          while an incremental reindex of an edited copy of the vault runs in a loop
- closed: the same server, 20 concurrent clients, 2,000 /search requests in all
- omp:    (not in the default list) search latency with OpenMP's default wait policy vs PASSIVE
Nothing lands in the repo but runs/bench/recall.json (the index and vault copies go to --work).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, ROOT, pct, summary, write_result  # noqa: E402

# the same OpenMP policy `serve` sets (see tuner/cli/recall.py); the reindex subprocesses inherit it
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
CLI = [sys.executable, "-c", "from tuner.cli import main; main()"]


def load_queries(db: Path, n: int, seed: int = 0) -> list[str]:
    """Note titles and one-line summaries, as bench_wiki uses: what a user types about their notes."""
    import sqlean
    c = sqlean.connect(f"file:{db}?mode=ro", uri=True)
    rows = c.execute("SELECT title, summary FROM notes").fetchall()
    c.close()
    pool = [t for t, _ in rows if t and len(t) >= 8] + [s for _, s in rows if s and len(s) >= 8]
    random.Random(seed).shuffle(pool)
    return pool[:n]


def ms(values_s) -> list[float]:
    return [v * 1000 for v in values_s]


def full_summary(values_ms) -> dict:
    if not values_ms:
        return {"n": 0}
    d = summary(values_ms)
    d["p99"] = round(pct(values_ms, 99), 3)
    d["p50"], d["p95"] = round(pct(values_ms, 50), 3), round(pct(values_ms, 95), 3)
    return d


# -- api --------------------------------------------------------------------------------------------------
def bench_api(db: Path, work: Path, queries: list[str], calls: int = 2000) -> dict:
    from search_core.recall.config import RecallConfig
    from search_core.recall.backend import SearchBackend
    from search_core.recall.engine import RecallEngine
    from search_core.recall.log import RecallLog

    log_path = work / "api-log.sqlite"
    log_path.unlink(missing_ok=True)
    engine = RecallEngine(SearchBackend(db), RecallLog(log_path), RecallConfig(timeout_s=30))
    assert engine.warm() is None
    q_t, p_t, busy = [], [], 0
    for i in range(calls):
        sid = f"s{i % 50}"
        t0 = time.perf_counter()
        engine.queue_prefetch(queries[i % len(queries)], sid)
        q_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        engine.prefetch(f"s{(i + 25) % 50}")
        p_t.append(time.perf_counter() - t0)
        busy += engine.in_flight() > 0
        time.sleep(0.005)            # an agent's turns are not back to back; searches keep running meanwhile
    engine.wait_idle(300)
    searched = engine.counters["searched"]
    engine.close()
    return {"calls": calls, "calls_with_a_search_in_flight": busy, "searches_completed": searched,
            "queue_prefetch_ms": full_summary(ms(q_t)), "prefetch_ms": full_summary(ms(p_t))}


# -- log --------------------------------------------------------------------------------------------------
def bench_log(work: Path, total: int = 100_000, timed: int = 10_000) -> dict:
    from search_core.recall.log import RecallLog, recall_stats

    path = work / "log-bench.sqlite"
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        p.unlink(missing_ok=True)
    log = RecallLog(path, retention_days=None)
    rng = random.Random(0)
    now = time.time()
    write_t = []
    for i in range(total):
        inj = rng.random() < 0.43
        rec = {"ts": now - rng.random() * 14 * 86400, "session": f"sess-{i % 300}", "query": f"질문 {i} GraphRAG 요약",
               "top_scores": [{"note_id": f"n{j}", "score": 0.02, "cosine": 0.8 - j / 100} for j in range(3)],
               "features": {"top_score": 0.83, "threshold": 0.82}, "threshold": 0.82, "index_fingerprint": "abc",
               "config_hash": "def", "injected": inj, "stopped_by": None if inj else "threshold",
               "chars_injected": 718 if inj else 0, "latency_ms": rng.lognormvariate(4.0, 0.5),
               "stages_ms": {"embed": 11.0, "dense": 1.3, "sparse": 5.9, "total": 30.0}}
        t0 = time.perf_counter()
        log.write(rec)
        if i < timed:
            write_t.append(time.perf_counter() - t0)
    log.close()
    stats_t = []
    for _ in range(5):
        t0 = time.perf_counter()
        s = recall_stats(path, 7 * 86400)
        stats_t.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    p = subprocess.run([*CLI, "recall-log", "stats", "--log", str(path), "--json"], capture_output=True, text=True,
                       cwd=ROOT)
    cli_s = time.perf_counter() - t0
    assert p.returncode == 0, p.stderr
    return {"write_ms": full_summary(ms(write_t)), "rows": total,
            "stats_function_s": {"median": round(sorted(stats_t)[2], 3), "min": round(min(stats_t), 3),
                                 "max": round(max(stats_t), 3)},
            "stats_cli_s": round(cli_s, 3), "stats_last7d_calls": s["calls"]}


# -- the server -------------------------------------------------------------------------------------------
def post(url: str, body: dict, timeout: float = 30.0) -> tuple[int, float]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            return r.status, time.perf_counter() - t0
    except urllib.error.HTTPError as e:
        e.read()
        return e.code, time.perf_counter() - t0
    except OSError:
        return 0, time.perf_counter() - t0


def start_server(db: Path, work: Path, port: int):
    log = work / "server-log.sqlite"
    log.unlink(missing_ok=True)
    proc = subprocess.Popen([*CLI, "serve", "--db", str(db), "--port", str(port), "--log", str(log)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=open(work / "server.stderr", "w"))
    url = f"http://127.0.0.1:{port}"
    for _ in range(1200):
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1) as r:
                if json.loads(r.read())["status"] == "ok":
                    return proc, url
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"the server did not come up; see {work / 'server.stderr'}")


class Reindexer(threading.Thread):
    """Edits a few notes of the vault copy, runs an incremental `autoresearch index`, again and again."""

    def __init__(self, vault: Path, db: Path, cache: Path, per_pass: int = 10):
        super().__init__(daemon=True)
        self.vault, self.db, self.cache, self.per_pass = vault, db, cache, per_pass
        self.stop = threading.Event()
        self.passes: list[dict] = []
        self.notes = sorted(vault.rglob("*.md"))

    def run(self):
        rng = random.Random(1)
        n = 0
        while not self.stop.is_set():
            for p in rng.sample(self.notes, self.per_pass):
                n += 1
                with open(p, "a", encoding="utf-8") as f:
                    f.write(f"\n\n벤치마크 편집 {n}: 증분 재색인이 도는 동안 검색 지연을 잰다 ({time.time():.0f}).\n")
            t0 = time.perf_counter()
            p = subprocess.run([*CLI, "index", str(self.vault), "--db", str(self.db), "--cache", str(self.cache),
                                "--no-progress", "--json"], capture_output=True, text=True, cwd=ROOT)
            rep = json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr[-300:]}
            self.passes.append({"seconds": round(time.perf_counter() - t0, 1), "changed": rep.get("changed"),
                                "embedded": rep.get("embedded"), "error": rep.get("error")})


def open_loop(url: str, queries: list[str], rate: float, duration: float) -> dict:
    n = int(rate * duration)
    results = [None] * n
    lag = [0.0] * n

    def one(i, due):
        lag[i] = time.perf_counter() - due
        results[i] = post(url + "/search", {"query": queries[i % len(queries)]})

    t_start = time.perf_counter()
    with ThreadPoolExecutor(64) as pool:
        for i in range(n):
            due = t_start + i / rate
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            pool.submit(one, i, due)
    wall = time.perf_counter() - t_start
    lat = [r[1] * 1000 for r in results if r and r[0] == 200]
    errors = {}
    for r in results:
        if not r or r[0] != 200:
            code = r[0] if r else "none"
            errors[code] = errors.get(code, 0) + 1
    return {"requests": n, "rate_per_s": rate, "wall_s": round(wall, 1), "errors": errors,
            "latency_ms": full_summary(lat), "send_lag_ms_p99": round(pct([v * 1000 for v in lag], 99), 2)}


def closed_loop(url: str, queries: list[str], clients: int, total: int) -> dict:
    per = total // clients
    out: list[tuple[int, float]] = []
    lock = threading.Lock()

    def client(c):
        mine = []
        for j in range(per):
            mine.append(post(url + "/search", {"query": queries[(c * per + j) % len(queries)]}))
        with lock:
            out.extend(mine)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat = [r[1] * 1000 for r in out if r[0] == 200]
    errors = {}
    for code, _ in out:
        if code != 200:
            errors[code] = errors.get(code, 0) + 1
    return {"clients": clients, "requests": len(out), "wall_s": round(wall, 1),
            "throughput_rps": round(len(out) / wall, 1), "errors": errors, "latency_ms": full_summary(lat)}


OMP_PROBE = """
import json, sys, time
from search_core.search.pipeline import Searcher
s = Searcher(sys.argv[1])
s.search("warm up")
out = []
for q in json.loads(sys.argv[2]):
    t0 = time.perf_counter(); s.search(q); out.append((time.perf_counter() - t0) * 1000)
print(json.dumps(out))
"""


def bench_omp(db: Path, queries: list[str], n: int = 8) -> dict:
    """One warm Searcher per OpenMP wait policy (unset = the runtime's default, PASSIVE), same queries."""
    res = {}
    for policy in ("default", "PASSIVE"):
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
        if policy != "default":
            env["OMP_WAIT_POLICY"] = policy
        p = subprocess.run([sys.executable, "-c", OMP_PROBE, str(db), json.dumps(queries[:n])], env=env, cwd=ROOT,
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        res[policy] = full_summary(json.loads(p.stdout.splitlines()[-1]))
    return res


def metrics(url: str) -> dict:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    keep = ("autoresearch_query_cache_hits_total", "autoresearch_query_cache_misses_total",
            "autoresearch_recall_timeouts_total")
    return {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line.startswith(keep)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", type=Path, default=Path("runs/johngrib.sqlite"))
    ap.add_argument("--vault", type=Path, default=DATA / "johngrib-wiki" / "_wiki")
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "bench" / "recall-work")
    ap.add_argument("--stages", default="api,log,open,closed")
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--duration", type=float, default=100.0)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--distinct", type=int, default=400, help="distinct queries; the rest are repeats")
    ap.add_argument("--port", type=int, default=8799)
    args = ap.parse_args()
    stages = set(args.stages.split(","))
    args.work.mkdir(parents=True, exist_ok=True)
    out_path = ROOT / "runs" / "bench" / "recall.json"
    result = json.loads(out_path.read_text()) if out_path.exists() else {}
    db = args.work / "index.sqlite"
    if stages & {"api", "open", "closed", "omp"}:
        from search_core.index.store import backup_copy
        backup_copy(args.index, db)
    result["machine"] = {"load_avg_at_start": open("/proc/loadavg").read().split()[:3], "cores": 2,
                         "note": "shared with other helpers' jobs while measured"}
    if "log" in stages:
        result["log"] = bench_log(args.work)
        print("log:", json.dumps(result["log"]), flush=True)
        write_result("recall", result)
    queries = load_queries(db, args.distinct) if stages & {"api", "open", "closed", "omp"} else []
    if "omp" in stages:
        result["omp_wait_policy_search_ms"] = bench_omp(db, queries)
        print("omp:", json.dumps(result["omp_wait_policy_search_ms"]), flush=True)
        write_result("recall", result)
    if "api" in stages:
        result["api"] = bench_api(db, args.work, queries)
        print("api:", json.dumps(result["api"]), flush=True)
        write_result("recall", result)
    if stages & {"open", "closed"}:
        proc, url = start_server(db, args.work, args.port)
        try:
            if "open" in stages:
                vault = args.work / "vault"
                if not vault.exists():
                    shutil.copytree(args.vault, vault)
                re = Reindexer(vault, db, args.work / "embed-cache.sqlite")
                re.start()
                res = open_loop(url, queries, args.rate, args.duration)
                re.stop.set()
                re.join()
                res["reindex_passes"] = re.passes
                res["metrics_after"] = metrics(url)
                result["open_loop"] = res
                print("open:", json.dumps(res), flush=True)
                write_result("recall", result)
            if "closed" in stages:
                res = closed_loop(url, queries, args.clients, args.requests)
                res["metrics_after"] = metrics(url)
                result["closed_loop"] = res
                print("closed:", json.dumps(res), flush=True)
        finally:
            proc.terminate()
            proc.wait(15)
    result["load_avg_at_end"] = open("/proc/loadavg").read().split()[:3]
    print("wrote", write_result("recall", result))


if __name__ == "__main__":
    main()
