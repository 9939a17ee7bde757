"""Dense channel over 525,000 x 384 vectors (a large "second brain"): numpy matrix product vs vec0 scan.

    python benchmarks/bench_dense_525k.py [--n 525000] [--queries 200]

Vectors are random unit vectors (brute-force cost does not depend on their content), written to a
real sqlite-vec table, loaded back the way IndexView loads them, and searched by channels.dense().
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import ROOT, summary, write_result  # noqa: E402


class _View:
    """The three fields channels.dense() reads from an IndexView."""
    def __init__(self, ids, matrix, chunks_per_note=5):
        self.vec_ids, self.matrix = ids, matrix
        self.chunk_note = {int(c): f"note-{int(c) // chunks_per_note}" for c in ids}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=525_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--db", type=Path, default=ROOT / "runs" / "bench" / "dense-525k.sqlite")
    args = ap.parse_args()
    from search_core.search.channels import dense
    from search_core.index.store import connect
    from search_core.search.view import _load_matrix

    rng = np.random.default_rng(0)
    if not args.db.exists():
        args.db.parent.mkdir(parents=True, exist_ok=True)
        conn = connect(args.db)
        conn.execute(f"CREATE VIRTUAL TABLE chunk_vec USING vec0(embedding float[{args.dim}] distance_metric=cosine)")
        t0 = time.perf_counter()
        for start in range(0, args.n, 25_000):
            v = rng.standard_normal((min(25_000, args.n - start), args.dim)).astype(np.float32)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO chunk_vec(rowid, embedding) VALUES (?, ?)",
                             ((start + i + 1, row.tobytes()) for i, row in enumerate(v)))
            conn.execute("COMMIT")
        print(f"wrote {args.n} vectors in {time.perf_counter() - t0:.0f}s", flush=True)
        conn.close()
    conn = connect(args.db)
    t0 = time.perf_counter()
    ids, mat = _load_matrix(conn, "chunk_vec")
    load_s = time.perf_counter() - t0
    view = _View(ids, mat)
    print(f"loaded {mat.shape} in {load_s:.1f}s ({mat.nbytes / 2**20:.0f} MiB)", flush=True)
    qs = rng.standard_normal((args.queries, args.dim)).astype(np.float32)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    for q in qs[:5]:
        dense(view, q, 50)
    numpy_ms = []
    for q in qs:
        t0 = time.perf_counter()
        dense(view, q, 50)
        numpy_ms.append((time.perf_counter() - t0) * 1000)
    # correctness: the numpy top hit is vec0's nearest neighbour too
    vec0_ms = []
    for q in qs[:10]:
        t0 = time.perf_counter()
        rows = conn.execute("SELECT rowid, distance FROM chunk_vec WHERE embedding MATCH ? AND k = 200",
                            (q.tobytes(),)).fetchall()
        vec0_ms.append((time.perf_counter() - t0) * 1000)
    agree = int(rows[0][0]) == dense(view, qs[9], 50)[0].chunk_id
    result = {"n": args.n, "dim": args.dim, "load_s": round(load_s, 1),
              "numpy_dense_channel_ms": summary(numpy_ms), "vec0_knn_ms": summary(vec0_ms),
              "top1_agrees_with_vec0": agree, "ratio_vec0_over_numpy_p50": round(
                  summary(vec0_ms)["p50"] / summary(numpy_ms)["p50"], 1),
              "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE")}
    print(result)
    print("written", write_result("dense-525k", result))


if __name__ == "__main__":
    main()
