"""Search latency as it is used: natural-language questions against the johngrib index, per stage and
wall, p50/p95/p99/max, on an idle machine and with one core kept busy by another process in the same
run; query-embedding threads 1 vs the runtime default; cold CLI and the first query of a fresh process.

    python benchmarks/bench_latency.py [--db runs/johngrib.sqlite] [--korquad 300] [--parts cold,warm,threads,cpu]

Questions: the demo gold sets (tune, holdout, probes), the 114 AutoRAG-ko questions, 300 KorQuAD 1.0
dev questions (seed 0) and the long English questions below. None of them needs to be answerable
from the wiki: this measures time, not quality. Raw figures land in runs/bench/latency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, ROOT, pct, write_result  # noqa: E402
from search_core.index import short_tokens  # noqa: E402
from search_core.index.store import atomic, connect  # noqa: E402

DATA = Path(os.environ.get("AUTORESEARCH_DATA", DATA))   # a git worktree sits one level deeper than ../shared

# Long English questions, the way people ask an agent.
LONG_ENGLISH = [
    "how do I get out of vim, emacs, nano or less when I'm stuck in the terminal",
    "what is the difference between a process and a thread, and when should I use each one",
    "how can I find which process is listening on a given TCP port on linux or macos",
    "why does my git rebase keep stopping with conflicts and how do I continue or abort it safely",
    "what are the SOLID principles of object oriented design and why do people still argue about them",
    "how do I write a bash script that loops over files with spaces in their names without breaking",
    "what is the best way to learn a new programming language quickly when you already know java",
    "how does garbage collection work in the JVM and what do the different collectors trade off",
    "can you explain dependency injection in simple terms with an example from spring",
    "how should I structure unit tests so that they stay readable when the codebase grows",
    "what does the java memory model guarantee about volatile fields and happens-before ordering",
    "how do I undo the last commit in git without losing the changes in my working directory",
    "what is the difference between merge and rebase, and which one should a small team prefer",
    "how can I make my vim setup behave more like an IDE with completion and go to definition",
    "what are good habits for writing commit messages that future readers will thank me for",
    "how do I measure and improve the startup time of a command line tool written in python",
    "why is floating point arithmetic inexact and how should money be represented in software",
    "what are the trade-offs between microservices and a modular monolith for a new product",
    "how do I read a stack trace and find the line that actually caused the exception",
    "what is a closure in javascript and why does a loop variable sometimes behave strangely",
    "how can I search through all files in a project for a regular expression from the terminal",
    "what is test driven development and does it really lead to better designed code",
    "how do I set up tmux so that new panes open in the current directory and the mouse works",
    "what does the CAP theorem say and how does it apply to databases people use every day",
    "how should I handle errors and exceptions in a REST API so clients get useful messages",
    "what is the difference between concurrency and parallelism with a concrete example",
    "how do I profile a slow SQL query and decide which index to add",
    "what are design patterns and which ones are still worth learning today",
    "how can I keep my dotfiles in sync across several machines with git",
    "what is the difference between TCP and UDP and when would I choose one over the other",
    "how do I write a good README for an open source project that people actually read",
    "why do people say premature optimization is the root of all evil and is it still true",
    "how can I learn to estimate software tasks more accurately as a developer",
    "what is functional programming and how can I apply its ideas in an object oriented language",
    "how do I configure ssh keys for several github accounts on one computer",
    "what are the common causes of memory leaks in long running java applications",
    "how does the linux file permission model work with users, groups and the sticky bit",
    "what should I look for when reviewing someone else's pull request",
    "how do I convert a large markdown wiki into a static website with search",
    "what is refactoring, and how do I do it safely without tests in legacy code",
]

STAGES = ("embed", "dense", "sparse", "decomposed", "entity", "retrieve", "fusion", "rerank", "gate", "total", "wall")


def load_questions(korquad_n: int) -> dict[str, list[str]]:
    from tuner.data.gold import load_gold
    groups = {"demo": [], "autorag": [], "korquad": [], "long_english": list(LONG_ENGLISH)}
    for name in ("demo-tune", "demo-holdout", "demo-probes"):
        groups["demo"] += [q.query for q in load_gold(ROOT / "experiments" / "gold" / f"{name}.yaml").questions]
    with open(DATA / "autorag-ko" / "beir" / "queries.jsonl", encoding="utf-8") as f:
        groups["autorag"] = [json.loads(line)["text"] for line in f if line.strip()]
    kq = load_gold(DATA / "korquad-v1-dev" / "KorQuAD_v1.0_dev.json")
    groups["korquad"] = [q.query for q in random.Random(0).sample(list(kq.questions), korquad_n)]
    return groups


def stats(values) -> dict:
    return {"n": len(values), "p50": round(pct(values, 50), 2), "p95": round(pct(values, 95), 2),
            "p99": round(pct(values, 99), 2), "max": round(max(values), 2)}


@contextmanager
def busy_core():
    """Another process spinning on one core for the duration of the block (the busy condition of the latency figures)."""
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        yield
    finally:
        p.kill()
        p.wait()


def run_searches(s, questions: list[str]) -> list[dict]:
    """`s`: a searcher with a query-vector cache of size 0 (every question pays its embedding: no cache hits)."""
    rows = []
    for q in questions:
        t0 = time.perf_counter()
        r = s.search(q)
        rows.append({**r.timings_ms, "wall": (time.perf_counter() - t0) * 1000})
    return rows


def table(rows: list[dict]) -> dict:
    return {k: stats([r.get(k, 0.0) for r in rows]) for k in STAGES}


def warm(db: Path, questions: list[str], conditions, passes: int = 1) -> dict:
    """Every question searched once per pass and condition, conditions alternating pass by pass, so a slow
    minute of the machine lands on both. out[cond] is the first pass (stages and raw timings); with passes >
    1, out["passes"][cond] holds each pass's wall figures and out["summary"][cond] their median and range:
    one pass's p95 moved by +-3 ms from run to run on this machine (BENCHMARKS.md, latency)."""
    from search_core.search.pipeline import Searcher
    from search_core.search.query_cache import QueryEmbeddingCache
    s = Searcher(db, query_cache=QueryEmbeddingCache(maxsize=0))
    for q in questions[:10]:
        s.search(q)
    out, per_pass = {}, {c: [] for c in conditions}
    for i in range(passes):
        for cond in conditions:
            ctx = busy_core() if cond == "busy" else _nothing()
            with ctx:
                t0 = time.perf_counter()
                rows = run_searches(s, questions)
            wall = {**stats([r["wall"] for r in rows]), "over_500ms": sum(r["wall"] > 500 for r in rows),
                    "seconds": round(time.perf_counter() - t0, 1)}
            per_pass[cond].append(wall)
            if i == 0:
                out[cond] = {"stages_ms": table(rows), "seconds": wall["seconds"], "over_500ms": wall["over_500ms"],
                             "raw": rows}
            print(f"[{cond}{f' pass {i + 1}' if passes > 1 else ''}] wall p50 {wall['p50']} p95 {wall['p95']} "
                  f"p99 {wall['p99']} max {wall['max']} ms", flush=True)
    if passes > 1:
        out["passes"] = per_pass
        out["summary"] = {c: {k: {"median": round(statistics.median(p[k] for p in ps), 2),
                                  "min": min(p[k] for p in ps), "max": max(p[k] for p in ps)}
                              for k in ("p50", "p95", "p99", "max", "over_500ms")} for c, ps in per_pass.items()}
        for c, summ in out["summary"].items():
            print(f"[{c}, {passes} passes] " + ", ".join(f"{k} median {v['median']} ({v['min']}-{v['max']})"
                                                        for k, v in summ.items()), flush=True)
    # repeated questions: the query-vector cache
    s.close()
    s = Searcher(db, query_cache=QueryEmbeddingCache())
    for q in questions:
        s.search(q)
    rows = []
    for q in questions:
        t0 = time.perf_counter()
        r = s.search(q)
        rows.append({**r.timings_ms, "wall": (time.perf_counter() - t0) * 1000})
    out["idle_cached_query"] = {"stages_ms": table(rows)}
    s.close()
    return out


@contextmanager
def _nothing():
    yield


def embed_threads(db: Path, questions: list[str]) -> dict:
    """Query embedding alone, one thread vs the runtime's default, idle and busy; and batch (indexing)
    throughput for both choices."""
    from search_core.models.threads import embed_with_threads
    from search_core.search.pipeline import Searcher
    s = Searcher(db)
    emb = s.embedder
    out = {}
    for cond in ("idle", "busy"):
        ctx = busy_core() if cond == "busy" else _nothing()
        with ctx:
            for threads in (1, None):
                times = []
                for q in questions:
                    t0 = time.perf_counter()
                    embed_with_threads(emb, [q], is_query=True, threads=threads)
                    times.append((time.perf_counter() - t0) * 1000)
                key = f"{cond}_threads_{threads or 'default'}"
                out[key] = {**stats(times), "over_1s": sum(t > 1000 for t in times)}
                print(f"[embed {key}] {out[key]}", flush=True)
    texts = [f"{c}\n{t}" for c, t in s.conn.execute("SELECT context, text FROM chunks ORDER BY id LIMIT 256")]
    for threads in (1, None):
        t0 = time.perf_counter()
        for i in range(0, len(texts), 32):
            embed_with_threads(emb, texts[i:i + 32], is_query=False, threads=threads)
        secs = time.perf_counter() - t0
        key = f"batch_threads_{threads or 'default'}"
        out[key] = {"chunks": len(texts), "seconds": round(secs, 2), "chunks_per_s": round(len(texts) / secs, 1)}
        print(f"[{key}] {out[key]}", flush=True)
    s.close()
    return out


def overlapped_ms(embed_query: float, keyword: float, parts: list[tuple[int, float]]) -> float:
    """The longer of retrieve()'s two threads: the second embeds the query, this one runs the keyword work;
    then each takes the next sub-question (longest first, `parts` = (characters, embed ms)) when free."""
    other, mine = embed_query, keyword
    for _, ms in sorted(parts, key=lambda p: -p[0]):
        if other <= mine:
            other += ms
        else:
            mine += ms
    return max(other, mine)


def cpu_path(db: Path, groups: dict[str, list[str]]) -> dict:
    """Per-stage CPU time of this thread (time.thread_time), each stage run alone, and the wall time two idle
    cores would give as retrieve() overlaps them (overlapped_ms), against one thread doing it all (serial).
    An estimate a loaded machine can still take (CPU time moves much less with load than wall time does);
    the warm runs are the measurement."""
    from search_core.search import channels as ch
    from search_core.config import SearchConfig
    from search_core.search.limits import cap_query
    from search_core.models.threads import embed_queries
    from search_core.search.pipeline import Searcher
    s = Searcher(db)
    cfg = SearchConfig(embedder=s.embedder_name)
    s.warm_up()

    def cpu(fn):
        t0 = time.thread_time()
        out = fn()
        return out, (time.thread_time() - t0) * 1000

    rows = []
    for g, qs in groups.items():
        for q in qs:
            capped = cap_query(q)
            parts = ch.split_query(capped)
            vec, e_q = cpu(lambda: embed_queries(s.embedder, [capped])[0])
            part_vecs, e_p, embedded = [], [], []
            for p in parts:
                if ch.shares_query_vector(p, capped):          # searched with the query's vector
                    part_vecs.append(None)
                    continue
                v, ms = cpu(lambda p=p: embed_queries(s.embedder, [p]))
                part_vecs.append(v[0])
                e_p.append(ms)
                embedded.append(p)
            _, sp = cpu(lambda: ch.sparse(s.conn, s.view, q, cfg.depth))
            part_sparse, sp_p = cpu(lambda: [ch.sparse(s.conn, s.view, p, cfg.depth) for p in parts])

            def after_join():
                d = ch.dense(s.view, vec, cfg.depth)
                s._decomposed(part_sparse, [d if v is None else ch.dense(s.view, v, cfg.depth) for v in part_vecs],
                              cfg.depth)
                return ch.entity(s.view, q, vec, cfg.depth, s.embedder.default_threshold, d[0].score if d else None)

            _, rest = cpu(after_join)
            rows.append({"group": g, "embed_query": e_q, "embed_parts": sum(e_p), "sparse": sp, "sparse_parts": sp_p,
                         "after_join": rest, "parts": len(parts),
                         "serial": e_q + sum(e_p) + sp + sp_p + rest,
                         "overlapped": overlapped_ms(e_q, sp + sp_p, [(len(p), ms) for p, ms in zip(embedded, e_p)]) + rest})
    s.close()
    out = {k: stats([r[k] for r in rows]) for k in ("embed_query", "embed_parts", "sparse", "sparse_parts",
                                                     "after_join", "serial", "overlapped")}
    out["overlapped_by_group"] = {g: stats([r["overlapped"] for r in rows if r["group"] == g]) for g in groups}
    out["serial_by_group"] = {g: stats([r["serial"] for r in rows if r["group"] == g]) for g in groups}
    out["loadavg"] = os.getloadavg()
    print("[cpu]", json.dumps(out), flush=True)
    return out


FIRST_QUERY = r"""
import json, sys, time
t0 = time.perf_counter()
from search_core.search.pipeline import Searcher
t1 = time.perf_counter()
s = Searcher(sys.argv[1])
t2 = time.perf_counter()
r = s.search(sys.argv[2])
t3 = time.perf_counter()
r2 = s.search(sys.argv[3])
t4 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1000, "open_ms": (t2 - t1) * 1000, "first_query_ms": (t3 - t2) * 1000,
                  "second_query_ms": (t4 - t3) * 1000, "first_stages": r.timings_ms}))
"""


def cold(db: Path, runs: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    q1, q2 = "vim 에서 빠져나오는 방법은 무엇인가", "자바 스레드와 프로세스의 차이"
    first, cli = [], []
    for _ in range(runs):
        p = subprocess.run([sys.executable, "-c", FIRST_QUERY, str(db), q1, q2], capture_output=True, text=True,
                           env=env, cwd=ROOT, check=True)
        first.append(json.loads(p.stdout.strip().splitlines()[-1]))
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "tuner.cli", "search", q1, "--db", str(db)], capture_output=True,
                       env=env, cwd=ROOT, check=True)
        cli.append(time.perf_counter() - t0)
    out = {"cli_search_s": {**stats(cli), "runs": [round(x, 3) for x in cli]},
           "fresh_process": {k: stats([f[k] for f in first]) for k in ("import_ms", "open_ms", "first_query_ms",
                                                                      "second_query_ms")},
           "raw_first": first}
    print("[cold]", json.dumps({k: v for k, v in out.items() if k != "raw_first"}), flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", type=Path, default=ROOT / "runs" / "johngrib.sqlite")
    ap.add_argument("--korquad", type=int, default=300)
    ap.add_argument("--parts", default="cold,cold_old,warm,threads")
    ap.add_argument("--cold-runs", type=int, default=5)
    ap.add_argument("--out", default="latency")
    ap.add_argument("--passes", type=int, default=1,
                    help="warm part: search every question this many times per condition (idle and busy alternate); "
                         "reports each pass and their median and range")
    ap.add_argument("--solo-threads", type=int, default=None,
                    help="also run the warm part with SOLO_QUERY_THREADS set to this (threads for a query "
                         "without sub-questions; needs OMP_WAIT_POLICY=PASSIVE)")
    args = ap.parse_args()
    if not args.db.exists():
        raise SystemExit(f"no index at {args.db}; build one with "
                         f"`autoresearch index {DATA / 'johngrib-wiki' / '_wiki'} --db {args.db}`")
    parts = set(args.parts.split(","))
    groups = load_questions(args.korquad)
    questions = [q for g in groups.values() for q in g]
    result = {"db": str(args.db), "questions": {k: len(v) for k, v in groups.items()}, "n": len(questions),
              "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(),
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    print(f"{len(questions)} questions: {result['questions']}; load average {os.getloadavg()}", flush=True)
    if "cold" in parts:
        result["cold"] = cold(args.db, args.cold_runs)
    if "cold_old" in parts:     # the same file as written before short-token postings existed
        old = args.db.with_name(args.db.stem + "-without-postings.sqlite")
        shutil.copy(args.db, old)
        conn = connect(old)
        conn.execute("DROP TABLE IF EXISTS short_postings")
        conn.execute("DELETE FROM meta WHERE key = 'short_postings'")
        conn.close()
        result["cold_without_postings"] = cold(old, args.cold_runs)
        conn = connect(old)
        t0 = time.perf_counter()
        with atomic(conn):
            short_tokens.build(conn)
        result["postings_build_s"] = round(time.perf_counter() - t0, 2)
        result["postings_rows"] = conn.execute("SELECT count(*), sum(length(chunks)) FROM short_postings").fetchone()
        conn.close()
        print("[postings] build", result["postings_build_s"], "s; rows, bytes", result["postings_rows"], flush=True)
    if "warm" in parts:
        result["warm"] = warm(args.db, questions, ("idle", "busy"), args.passes)
        result["warm_by_group_idle_wall"] = {}
        raw, i = result["warm"]["idle"]["raw"], 0
        for g, qs in groups.items():
            result["warm_by_group_idle_wall"][g] = stats([r["wall"] for r in raw[i:i + len(qs)]])
            i += len(qs)
    if "warm" in parts and args.solo_threads:
        from search_core.models import threads
        saved, threads.SOLO_QUERY_THREADS = threads.SOLO_QUERY_THREADS, args.solo_threads
        print(f"[warm, SOLO_QUERY_THREADS={args.solo_threads}, effective {threads.solo_query_threads()}]", flush=True)
        result["warm_solo"] = warm(args.db, questions, ("idle", "busy"))
        result["warm_solo"]["solo_threads"] = threads.solo_query_threads()
        threads.SOLO_QUERY_THREADS = saved
    if "cpu" in parts:
        result["cpu_path_ms"] = cpu_path(args.db, groups)
    if "threads" in parts:
        sample = random.Random(1).sample(questions, min(180, len(questions)))
        result["embed_threads"] = embed_threads(args.db, sample)
    result["loadavg_end"] = os.getloadavg()
    print("written", write_result(args.out, result))


if __name__ == "__main__":
    main()
