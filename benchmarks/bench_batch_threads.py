"""Indexing throughput of e5-small: one call at a time on 1 or 2 OpenMP threads
(search_core.models.threads.BATCH_THREADS), or concurrent calls on a share of the cores each (BATCH_WORKERS).

    python benchmarks/bench_batch_threads.py --db runs/johngrib.sqlite [--chunks 256] [--rounds 3] \
        [--modes 1,2,workers]

Embeds N chunks of an index (context + text, as the indexer does; --every takes every k-th chunk so the
sample spans the vault) in batches of 32, the modes rotating round by round so that a change in machine load
hits all alike. `1` and `2`: one call at a time on that many threads; `workers`: the indexer's path,
threads.embed_batches. Reports chunks per second (wall) and the cores kept busy (CPU over wall), with the
load average beside them. Raw figures land in runs/bench/batch_threads.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import write_result  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--chunks", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--modes", default="1,2", help="comma-separated: a thread count, or `workers`")
    args = ap.parse_args()
    from search_core.models import get_embedder
    from search_core.models.threads import embed_batches, embed_with_threads
    from search_core.index.store import connect
    conn = connect(args.db, readonly=True)
    texts = [f"{c}\n{t}" for c, t in conn.execute("SELECT context, text FROM chunks ORDER BY id")]
    texts = texts[::args.every][:args.chunks]
    conn.close()
    emb = get_embedder("e5-small")
    embed_with_threads(emb, texts[:8], is_query=False, threads=1)       # load the model, untimed
    modes = args.modes.split(",")
    batches = [texts[i:i + 32] for i in range(0, len(texts), 32)]
    runs = {m: [] for m in modes}
    for r in range(args.rounds):
        for n in modes[r % len(modes):] + modes[:r % len(modes)]:
            load = os.getloadavg()[0]
            w0, c0 = time.perf_counter(), time.process_time()
            if n == "workers":
                for _ in embed_batches(emb, texts, batch=32):
                    pass
            else:
                for part in batches:
                    embed_with_threads(emb, part, is_query=False, threads=int(n))
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            runs[n].append({"chunks_per_s": round(len(texts) / wall, 2), "cores_busy": round(cpu / wall, 2),
                            "cpu_s_per_100": round(cpu * 100 / len(texts), 2),
                            "wall_s": round(wall, 2), "loadavg_1m": round(load, 2)})
            print(f"round {r} threads {n}: {runs[n][-1]}", flush=True)
    best = {n: max(x["chunks_per_s"] for x in v) for n, v in runs.items()}
    median = {n: float(np.median([x["chunks_per_s"] for x in v])) for n, v in runs.items()}
    result = {"db": str(args.db), "chunks": len(texts), "runs": runs, "best_chunks_per_s": best, "median_chunks_per_s": median,
              "cpus": os.cpu_count(), "loadavg_end": os.getloadavg()}
    print("best chunks/s", best, "median", median)
    print("written", write_result("batch_threads", result))


if __name__ == "__main__":
    main()
