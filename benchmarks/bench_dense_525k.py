"""Dense channel over 525,000 x 384 vectors (a large "second brain"): numpy matrix product vs vec0 scan.

    python benchmarks/bench_dense_525k.py [--n 525000] [--queries 200]

Vectors are random unit vectors (brute-force cost does not depend on their content), written to a
real sqlite-vec table, copied back out of it (as a view read them before the layout file), and searched
by channels.dense(). `--mapped`: the same vectors written as an index's layout file
(search_core.index.layout) and, in a new process each time, mapped and searched: the time to the first
answer and the process's RSS, against the copy's.
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


# A new process: map the layout file, answer one query, then `n` more; its timings and RSS as JSON.
MAPPED = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from search_core.index.layout import map_layout
from search_core.search.channels import dense
from search_core.search.view import ChunkNotes
path, dim, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = time.perf_counter()
lay = map_layout(path, 1, "bench")
place_of = np.full(int(lay.chunk_at.max()) + 1, -1, np.int64)
place_of[lay.chunk_at] = np.arange(len(lay.chunk_at))
class V:
    vec_ids, matrix = lay.vec_ids, lay.matrix
    chunk_note = ChunkNotes(place_of, lay.chunk_at, lay.note_start, lay.note_ids)
map_s = time.perf_counter() - t
rng = np.random.default_rng(1)
qs = rng.standard_normal((n + 1, dim)).astype(np.float32)
t = time.perf_counter()
dense(V, qs[0], 50)
first_s = time.perf_counter() - t
ms = []
for q in qs[1:]:
    t = time.perf_counter()
    dense(V, q, 50)
    ms.append((time.perf_counter() - t) * 1000)
st = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
print(json.dumps({"map_s": map_s, "first_query_s": first_s, "process_s": time.perf_counter() - t0, "ms": ms,
                  "rss_mib": int(st["VmRSS"].split()[0]) / 1024, "rss_file_mib": int(st["RssFile"].split()[0]) / 1024,
                  "rss_anon_mib": int(st["RssAnon"].split()[0]) / 1024}))
"""


def mapped(ids: np.ndarray, mat: np.ndarray, db: Path, queries: int, chunks_per_note: int = 5) -> dict:
    """The layout file of `mat` beside `db`, then three new processes that map it and search it."""
    import json
    import subprocess
    from search_core.index.layout import VaultLayout, companion_files, layout_path, write_layout, write_rows
    order = np.argsort(ids, kind="stable")
    notes = (ids[order] - 1) // chunks_per_note
    first = np.r_[True, notes[1:] != notes[:-1]]
    dim = mat.shape[1]
    t0 = time.perf_counter()
    chunks = write_rows(db, "chunks", 1, None, None, ids[order], mat[order], dim)
    ents = write_rows(db, "entities", 1, None, None, np.zeros(0, np.int64), np.zeros((0, dim), np.float32), dim)
    layout = VaultLayout(tuple(f"note-{int(n)}" for n in notes[first]), np.r_[np.flatnonzero(first), len(ids)].astype(np.int64),
                         ids[order], chunks.ids, np.zeros((0, dim), np.float32), ents.ids, np.zeros((0, dim), np.float32))
    write_layout(db, layout, 1, "bench", (chunks.file, ents.file))
    write_s = time.perf_counter() - t0
    runs = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", MAPPED, str(layout_path(db)), str(mat.shape[1]), str(queries)],
                             capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {"write_s": round(write_s, 2), "file_mib": round(sum(p.stat().st_size for p in companion_files(db)) / 2**20),
            "runs": [{k: (round(v, 3) if k != "ms" else summary(v)) for k, v in r.items()} for r in runs]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=525_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--db", type=Path, default=ROOT / "runs" / "bench" / "dense-525k.sqlite")
    ap.add_argument("--mapped", action="store_true", help="Also map the vectors from a layout file, in new processes.")
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
    import resource
    copy_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
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
              "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"), "copy_peak_rss_mib": round(copy_rss_mib),
              "load": round(os.getloadavg()[0], 1)}
    if args.mapped:
        result["mapped"] = mapped(ids, mat, args.db, args.queries)
    print(result)
    print("written", write_result("dense-525k", result))


if __name__ == "__main__":
    main()
