"""The dense channel on PostgreSQL + pgvector against numpy's exact product, at 100,000 and 525,000 vectors.

    python benchmarks/bench_pgvector.py --dsn postgresql://postgres@127.0.0.1:PORT/postgres [--sizes 100000 525000]

(`bash .ci/postgres.sh start DIR` prints such a DSN.) Vectors (`--vectors`):
- `text` (the default): the test embedder's (tests/helpers/fake_embedder.py: hashed character 2-3-grams, 256
  dimensions) of n windows of 400 characters at an even stride over the text of the johngrib wiki, KorQuAD's
  contexts and AutoRAG-ko's passages, read in place from $AUTORESEARCH_DATA (about 8 M characters, so windows
  overlap: neighbours are shifted windows, as a real vault's near-duplicate sections are, though more so);
  queries are KorQuAD's first questions, embedded the same way. A real embedder's vectors would take days here.
- `random`: random unit vectors, 384 dimensions, seed 0 (bench_dense_525k's), queries random too (seed 1): the
  cost of a scan does not depend on content, and for HNSW they are the worst case (no structure for the graph
  to follow: recall@10 0.56 at ef_search 200 on 20,000 of them).

For each size: the load (binary COPY through search_core.index.pgvector.copy_rows, the rows `sync` writes) and
the HNSW build (create_hnsw: m, ef_construction), both timed; then over the same queries, each answered as the
dense channel asks (depth 50: 200 rows, every row tied with the 200th for exact):
- numpy: channels.dense over the matrix memory-mapped from a file (np.load mmap_mode="r", as the index's layout
  file is mapped), warm;
- pgvector exact (a sequential scan ordered by inner product), its top 10 checked against numpy's;
- pgvector HNSW at each ef_search asked: recall@10 against numpy's exact top 10, latency.
The vectors and the matrix file are cached under --cache (outside the repository). Results go to
runs/bench/pgvector.json; the server's settings and the machine's load beside them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import summary, write_result  # noqa: E402

DATA = Path(os.environ.get("AUTORESEARCH_DATA", "/work/shared/data"))
WINDOW = 400
EPS = 1e-3


class _View:
    """What channels.dense reads from an IndexView: one note per chunk (dedup keeps every row)."""
    def __init__(self, matrix, backend=None):
        self.matrix = matrix
        self.vec_ids = np.arange(1, len(matrix) + 1, dtype=np.int64)
        self.chunk_note = _Identity()
        self.dense_backend = backend


class _Identity:
    def get(self, cid, default=None):
        return f"n{cid:07d}"


def corpus_text() -> str:
    import json
    parts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted((DATA / "johngrib-wiki" / "_wiki").rglob("*.md"))]
    for article in json.loads((DATA / "korquad-v1-dev" / "KorQuAD_v1.0_dev.json").read_text(encoding="utf-8"))["data"]:
        parts += [p["context"] for p in article["paragraphs"]]
    with open(DATA / "autorag-ko" / "beir" / "corpus.jsonl", encoding="utf-8") as f:
        parts += [json.loads(line)["text"] for line in f]
    return " ".join(" ".join(p.split()) for p in parts)


def questions(k: int) -> list[str]:
    import json
    d = json.loads((DATA / "korquad-v1-dev" / "KorQuAD_v1.0_dev.json").read_text(encoding="utf-8"))
    return [qa["question"] for a in d["data"] for p in a["paragraphs"] for qa in p["qas"]][:k]


def vectors(kind: str, n: int, cache: Path) -> tuple[np.ndarray, np.ndarray]:
    """(n unit vectors memory-mapped from a .npy file in the cache, the queries)."""
    if kind == "text":
        from tests.helpers.fake_embedder import HashedNgramEmbedder
        emb = HashedNgramEmbedder()
        dim = emb.dim
    else:
        dim = 384
    path = cache / f"{kind}-{n}x{dim}.npy"
    if not path.exists():
        tmp = path.with_suffix(".tmp.npy")
        m = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n, dim))
        if kind == "text":
            text = corpus_text()
            starts = np.linspace(0, len(text) - WINDOW, n).astype(np.int64)
            for b in range(0, n, 20_000):
                m[b:b + 20_000] = emb.embed([text[s:s + WINDOW] for s in starts[b:b + 20_000]])
        else:
            rng = np.random.default_rng(0)
            for start in range(0, n, 50_000):
                v = rng.standard_normal((min(50_000, n - start), dim)).astype(np.float32)
                m[start:start + len(v)] = v / np.linalg.norm(v, axis=1, keepdims=True)
        m.flush()
        del m
        tmp.rename(path)
    return np.load(path, mmap_mode="r")


def query_vectors(kind: str, k: int) -> np.ndarray:
    if kind == "text":
        from tests.helpers.fake_embedder import HashedNgramEmbedder
        return HashedNgramEmbedder().embed(questions(k), is_query=True)
    rng = np.random.default_rng(1)
    qs = rng.standard_normal((k, 384)).astype(np.float32)
    return qs / np.linalg.norm(qs, axis=1, keepdims=True)


def load_table(dsn: str, table: str, mat: np.ndarray, m: int, efc: int) -> dict:
    """The table loaded as sync loads it, the HNSW index built, the meta row written: timings."""
    from search_core.index import pgvector as pv
    from search_core.index.layout import VaultLayout
    ids = np.arange(1, len(mat) + 1, dtype=np.int64)
    dim = mat.shape[1]
    layout = VaultLayout((), np.zeros(1, np.int64), ids, ids, mat, np.zeros(0, np.int64), np.zeros((0, dim), np.float32))
    rows = [(int(i), f"n{int(i):07d}", 0, "h") for i in ids]
    pg = pv.connect(dsn)
    try:
        pg.execute("SET maintenance_work_mem = '2GB'")    # the graph of 525,000 vectors built in memory, not on disk
        with pg.transaction():
            pv.create_table(pg, table, dim)
            t0 = time.perf_counter()
            pv.copy_rows(pg.cursor(), table, rows, layout)
            load_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            pv.create_hnsw(pg, table, m, efc)
            hnsw_s = time.perf_counter() - t0
            pv.write_meta(pg, table, Path("/bench") / table, 1, "bench", "bench", dim, len(rows), {"m": m, "ef_construction": efc})
        pg.execute(f"ANALYZE {table}")
        size = pg.execute("SELECT pg_total_relation_size(%s), pg_relation_size(%s)",
                          (table, pv.hnsw_index_name(table))).fetchone()
        settings = dict(pg.execute("SELECT name, setting FROM pg_settings WHERE name IN ('shared_buffers', "
                                   "'maintenance_work_mem', 'max_parallel_maintenance_workers', 'work_mem', "
                                   "'max_parallel_workers_per_gather')").fetchall())
    finally:
        pg.close()
    return {"load_s": round(load_s, 1), "hnsw_build_s": round(hnsw_s, 1), "table_and_index_mib": round(size[0] / 2**20),
            "hnsw_index_mib": round(size[1] / 2**20), "server": settings, "load_avg_after": round(os.getloadavg()[0], 1)}


def table_exists(dsn: str, table: str) -> bool:
    from search_core.index import pgvector as pv
    pg = pv.connect(dsn)
    try:
        return pg.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is not None
    finally:
        pg.close()


def timed(fn, qs) -> tuple[list, list[float]]:
    out, ms = [], []
    for q in qs:
        t0 = time.perf_counter()
        out.append(fn(q))
        ms.append((time.perf_counter() - t0) * 1000)
    return out, ms


def run_size(args, n: int) -> dict:
    from search_core.index import pgvector as pv
    from search_core.search.channels import dense
    mat = vectors(args.vectors, n, args.cache)
    table = f"bench_{args.vectors}_{n}_m{args.m}_efc{args.ef_construction}"
    res = {"n": n, "dim": mat.shape[1], "vectors": args.vectors, "m": args.m, "ef_construction": args.ef_construction, "load_avg_before": round(os.getloadavg()[0], 1)}
    if args.reuse and table_exists(args.dsn, table):
        res["reused_table"] = True     # loaded and built by an earlier run (its load and build times are there)
        print(f"{n}: reusing {table}", flush=True)
    else:
        print(f"{n}: loading into {table} and building HNSW (m {args.m}, ef_construction {args.ef_construction})", flush=True)
        res.update(load_table(args.dsn, table, mat, args.m, args.ef_construction))
        print(f"  load {res['load_s']} s, HNSW build {res['hnsw_build_s']} s", flush=True)
    qs = query_vectors(args.vectors, args.queries)
    depth = 50

    view = _View(mat)
    for q in qs[:3]:
        dense(view, q, depth)
    exact_hits, ms = timed(lambda q: [(h.note_id, h.chunk_id, h.score) for h in dense(view, q, depth)], qs)
    exact = [[x[1] for x in hits] for hits in exact_hits]
    res["numpy_mapped_ms"] = summary(ms)
    print(f"  numpy (mapped) p50 {res['numpy_mapped_ms']['p50']} ms", flush=True)

    def backend(search, ef):
        settings = pv.PgvectorSettings(dsn=args.dsn, table=table, search=search, m=args.m,
                                       ef_construction=args.ef_construction, ef_search=ef)
        return pv.PgvectorDense(Path("/bench") / table, settings, 1, "bench")

    b = backend("exact", 200)
    pv_view = _View(mat, b)
    got, ms = timed(lambda q: [(h.note_id, h.chunk_id, h.score) for h in dense(pv_view, q, depth)], qs[:args.exact_queries])
    b.close()
    from tests.helpers.pgvector import FLOAT_TIE, ranking_difference
    res["pgvector_exact_ms"] = summary(ms)
    res["exact_same_lists"] = sum([x[1] for x in g] == e for g, e in zip(got, exact)) / len(got)
    # the same up to the order of scores closer than float32 rounding of the two engines' sums
    res["exact_same_lists_up_to_float_ties"] = sum(ranking_difference(g, e, FLOAT_TIE) is None
                                                   for g, e in zip(got, exact_hits)) / len(got)
    print(f"  pgvector exact p50 {res['pgvector_exact_ms']['p50']} ms, same lists {res['exact_same_lists']} "
          f"({res['exact_same_lists_up_to_float_ties']} up to ties within {FLOAT_TIE})", flush=True)
    res["hnsw"] = []
    for ef in args.ef_search:
        b = backend("hnsw", ef)
        pv_view = _View(mat, b)
        dense(pv_view, qs[0], depth)
        got, ms = timed(lambda q: [h.chunk_id for h in dense(pv_view, q, depth)], qs)
        b.close()
        recall = float(np.mean([len(set(g[:10]) & set(e[:10])) / 10 for g, e in zip(got, exact)]))
        # ann-benchmarks' recall: a row counts when its exact score is within EPS of the exact 10th (a near-
        # duplicate window scored 1e-5 below the 10th is as good an answer as the 10th)
        eps_recall = float(np.mean([np.sum(mat[np.asarray(g[:10]) - 1] @ q >= float(mat[e[9] - 1] @ q) - EPS) / 10
                                    for g, e, q in zip(got, exact, qs)]))
        res["hnsw"].append({"ef_search": ef, "recall_at_10": round(recall, 4), "recall_at_10_eps": round(eps_recall, 4),
                            "ms": summary(ms)})
        print(f"  HNSW ef_search {ef}: recall@10 {recall:.4f} (within {EPS}: {eps_recall:.4f}), "
              f"p50 {summary(ms)['p50']} ms", flush=True)
    res["load_avg_after"] = round(os.getloadavg()[0], 1)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", default=os.environ.get("AUTORESEARCH_TEST_PGVECTOR_DSN"), help="a PostgreSQL with pgvector")
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 525_000])
    ap.add_argument("--vectors", choices=("text", "random"), default="text")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--exact-queries", type=int, default=50, help="queries timed through pgvector's exact scan")
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=64)
    ap.add_argument("--ef-search", type=int, nargs="+", default=[200, 400, 800])
    ap.add_argument("--reuse", action="store_true", help="search a table an earlier run loaded and built")
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/pgvector"))
    args = ap.parse_args()
    if not args.dsn:
        raise SystemExit("give --dsn (or AUTORESEARCH_TEST_PGVECTOR_DSN); `bash .ci/postgres.sh start DIR` prints one")
    args.cache.mkdir(parents=True, exist_ok=True)
    import subprocess
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    out = {"vectors": args.vectors, "date": time.strftime("%Y-%m-%d"), "commit": commit, "cpus": os.cpu_count(), "sizes": []}
    for n in args.sizes:
        out["sizes"].append(run_size(args, n))
        print("written", write_result(f"pgvector-{args.vectors}", out), flush=True)


if __name__ == "__main__":
    main()
