"""Indexing throughput of e5-small with 1 vs 2 OpenMP threads (search_core.models.threads.BATCH_THREADS).

    python benchmarks/bench_batch_threads.py --db runs/johngrib.sqlite [--chunks 256] [--rounds 3]

Embeds the first N chunks of an index (context + text, as the indexer does) in batches of 32, the
thread counts alternating round by round so that a change in machine load hits both alike. Reports
chunks per second (wall) and CPU seconds per 100 chunks (what a second thread costs in overhead), with
the load average beside them. Raw figures land in runs/bench/batch_threads.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import write_result  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--chunks", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()
    from search_core.models import get_embedder
    from search_core.models.threads import embed_with_threads
    from search_core.index.store import connect
    conn = connect(args.db, readonly=True)
    texts = [f"{c}\n{t}" for c, t in conn.execute("SELECT context, text FROM chunks ORDER BY id LIMIT ?",
                                                   (args.chunks,))]
    conn.close()
    emb = get_embedder("e5-small")
    embed_with_threads(emb, texts[:8], is_query=False, threads=1)       # load the model, untimed
    counts = [int(x) for x in args.threads.split(",")]
    runs = {n: [] for n in counts}
    for r in range(args.rounds):
        for n in (counts if r % 2 == 0 else counts[::-1]):
            load = os.getloadavg()[0]
            w0, c0 = time.perf_counter(), time.process_time()
            for i in range(0, len(texts), 32):
                embed_with_threads(emb, texts[i:i + 32], is_query=False, threads=n)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            runs[n].append({"chunks_per_s": round(len(texts) / wall, 2), "cpu_s_per_100": round(cpu * 100 / len(texts), 2),
                            "wall_s": round(wall, 2), "loadavg_1m": round(load, 2)})
            print(f"round {r} threads {n}: {runs[n][-1]}", flush=True)
    best = {n: max(x["chunks_per_s"] for x in v) for n, v in runs.items()}
    result = {"db": str(args.db), "chunks": len(texts), "runs": runs, "best_chunks_per_s": best,
              "cpus": os.cpu_count(), "loadavg_end": os.getloadavg()}
    print("best chunks/s", best)
    print("written", write_result("batch_threads", result))


if __name__ == "__main__":
    main()
