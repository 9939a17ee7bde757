"""The dense channel on PostgreSQL + pgvector against numpy's exact product, at 100,000 and 525,000 vectors.

    python benchmarks/bench_pgvector.py --dsn postgresql://postgres@127.0.0.1:PORT/postgres [--sizes 100000 525000]

(`bash .ci/postgres.sh start DIR` prints such a DSN.) Vectors (`--vectors`):
- `text` (the default): the test embedder's (tests/helpers/fake_embedder.py: hashed character 2-3-grams, 256
  dimensions) of n windows of 400 characters at an even stride over the text of the johngrib wiki, KorQuAD's
  contexts and AutoRAG-ko's passages, read in place from $AUTORESEARCH_DATA (about 8 M characters, so windows
  overlap: neighbours are shifted windows, as a real vault's near-duplicate sections are, though more so);
  queries are KorQuAD's first questions, embedded the same way. A real embedder's vectors would take days here.
- `e5`: real multilingual-e5-small vectors (384 dimensions) read from the e5-small indexes given with
  `--e5-index` (their layout files, read only; identical vectors kept once), and KorQuAD's first questions
  embedded by e5-small ("query: "): as many as this machine has embedded, about 14,000 (e5-small embeds ~8
  chunks a second here, so 525,000 would take most of a day).
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
import json
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
        self.place_of = np.arange(-1, len(matrix), dtype=np.int64)      # chunk id c sits at place c - 1
        self.dead_rows = np.zeros(0, np.int64)
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


def e5_vectors(indexes: list[Path], cache: Path) -> np.ndarray:
    """Every distinct chunk vector of the given e5-small indexes (refused if one was built by another model)."""
    path = cache / "e5-real.npy"
    if not path.exists():
        from search_core.index.layout import read_layout
        from search_core.index.store import connect, get_meta
        parts = []
        for db in indexes:
            conn = connect(db, readonly=True)
            try:
                name = (get_meta(conn, "fingerprint") or {}).get("embedder", {}).get("name")
                if name != "e5-small":
                    raise SystemExit(f"{db} was embedded by {name!r}, not e5-small")
                layout = read_layout(conn, db)[0]
                parts.append(np.array(layout.matrix[layout.vec_ids >= 0], np.float32))    # no padding rows
            finally:
                conn.close()
        m = np.unique(np.concatenate(parts), axis=0)
        np.save(path.with_suffix(".tmp.npy"), m)
        path.with_suffix(".tmp.npy").rename(path)
    return np.load(path, mmap_mode="r")


def vectors(kind: str, n: int, cache: Path) -> tuple[np.ndarray, np.ndarray]:
    """(n unit vectors memory-mapped from a .npy file in the cache, the queries)."""
    if kind == "e5":
        return e5_vectors([], cache)[:n]
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


def query_vectors(kind: str, k: int, cache: Path | None = None) -> np.ndarray:
    if kind == "e5":
        path = cache / f"e5-queries-{k}.npy"
        if not path.exists():
            from search_core.models import get_embedder
            np.save(path, get_embedder("e5-small").embed(questions(k), is_query=True).astype(np.float32))
        return np.load(path)
    if kind == "text":
        from tests.helpers.fake_embedder import HashedNgramEmbedder
        return HashedNgramEmbedder().embed(questions(k), is_query=True)
    rng = np.random.default_rng(1)
    qs = rng.standard_normal((k, 384)).astype(np.float32)
    return qs / np.linalg.norm(qs, axis=1, keepdims=True)


def load_table(dsn: str, table: str, mat: np.ndarray, m: int, efc: int, work_mem: str = "2GB", partitions: int = 1) -> dict:
    """The table loaded as sync loads it (partitioned as `partitions` makes it), the HNSW index built (one graph per
    partition), the meta row written: timings."""
    from search_core.index import pgvector as pv
    from search_core.index.layout import VaultLayout
    ids = np.arange(1, len(mat) + 1, dtype=np.int64)
    dim = mat.shape[1]
    layout = VaultLayout((), np.zeros(1, np.int64), ids, ids, mat, np.zeros(0, np.int64), np.zeros((0, dim), np.float32))
    rows = [(int(i), f"n{int(i):07d}", 0, "h") for i in ids]
    pg = pv.connect(dsn)
    try:
        # the graph built in memory, not on disk (at 525,000 x 256, m 32: ~1.2 GB)
        pg.execute("SELECT set_config('maintenance_work_mem', %s, false)", (work_mem,))
        with pg.transaction():
            pv.create_table(pg, table, dim, partitions)
            t0 = time.perf_counter()
            pv.copy_rows(pg.cursor(), table, rows, layout)
            load_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            pv.create_hnsw(pg, table, m, efc)
            hnsw_s = time.perf_counter() - t0
            pv.write_meta(pg, table, Path("/bench") / table, 1, "bench", "bench", dim, len(rows), {"m": m, "ef_construction": efc})
        pg.execute(f"ANALYZE {table}")
        # a partitioned table's size is its partitions' (the parent and its index hold no rows)
        size = pg.execute("SELECT coalesce((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree(%s)), "
                          "pg_total_relation_size(%s)), coalesce((SELECT sum(pg_relation_size(relid)) FROM "
                          "pg_partition_tree(%s)), pg_relation_size(%s))",
                          (table, table, pv.hnsw_index_name(table), pv.hnsw_index_name(table))).fetchone()
        size = (int(size[0]), int(size[1]))
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
    table = f"bench_{args.vectors}_{n}_m{args.m}_efc{args.ef_construction}" + (f"_p{args.partitions}" if args.partitions > 1 else "")
    res = {"n": n, "dim": mat.shape[1], "vectors": args.vectors, "m": args.m, "ef_construction": args.ef_construction,
           "partitions": args.partitions, "load_avg_before": round(os.getloadavg()[0], 1)}
    if args.reuse and table_exists(args.dsn, table):
        res["reused_table"] = True     # loaded and built by an earlier run (its load and build times are there)
        print(f"{n}: reusing {table}", flush=True)
    else:
        print(f"{n}: loading into {table} and building HNSW (m {args.m}, ef_construction {args.ef_construction}, "
              f"{args.partitions} partition(s))", flush=True)
        res.update(load_table(args.dsn, table, mat, args.m, args.ef_construction, args.maintenance_work_mem, args.partitions))
        print(f"  load {res['load_s']} s, HNSW build {res['hnsw_build_s']} s", flush=True)
    qs = query_vectors(args.vectors, args.queries, args.cache)
    depth = 50

    view = _View(mat)
    for q in qs[:3]:
        dense(view, q, depth)
    exact_hits, ms = timed(lambda q: [(h.note_id, h.chunk_id, h.score) for h in dense(view, q, depth)], qs)
    exact = [[x[1] for x in hits] for hits in exact_hits]
    res["numpy_mapped_ms"] = summary(ms)
    print(f"  numpy (mapped) p50 {res['numpy_mapped_ms']['p50']} ms", flush=True)

    def backend(search, ef, read_rows=0):
        settings = pv.PgvectorSettings(dsn=args.dsn, table=table, search=search, m=args.m,
                                       ef_construction=args.ef_construction, ef_search=ef, read_rows=read_rows,
                                       partitions=args.partitions)
        return pv.PgvectorDense(Path("/bench") / table, settings, 1, "bench")

    b = backend("exact", 200)
    pv_view = _View(mat, b)
    got, ms = timed(lambda q: [(h.note_id, h.chunk_id, h.score) for h in dense(pv_view, q, depth)],
                    qs[:1 if args.skip_exact else args.exact_queries])
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
    for ef, read_rows in [(ef, 0) for ef in args.ef_search] + [(1000, r) for r in args.read_rows]:
        b = backend("hnsw", ef, read_rows)
        pv_view = _View(mat, b)
        dense(pv_view, qs[0], depth)
        got, ms = timed(lambda q: [h.chunk_id for h in dense(pv_view, q, depth)], qs)
        b.close()
        recall = float(np.mean([len(set(g[:10]) & set(e[:10])) / 10 for g, e in zip(got, exact)]))
        # ann-benchmarks' recall: a row counts when its exact score is within EPS of the exact 10th (a near-
        # duplicate window scored 1e-5 below the 10th is as good an answer as the 10th)
        eps_recall = float(np.mean([np.sum(mat[np.asarray(g[:10]) - 1] @ q >= float(mat[e[9] - 1] @ q) - EPS) / 10
                                    for g, e, q in zip(got, exact, qs)]))
        res["hnsw"].append({"ef_search": ef, "read_rows": read_rows, "recall_at_10": round(recall, 4),
                            "recall_at_10_eps": round(eps_recall, 4), "ms": summary(ms)})
        print(f"  HNSW ef_search {ef}, read_rows {read_rows}: recall@10 {recall:.4f} (within {EPS}: {eps_recall:.4f}), "
              f"p50 {summary(ms)['p50']} ms", flush=True)
    # how crowded the neighbourhoods are: a data vector's cosine to its 10th nearest other vector, and a query's
    # gap between its 1st and 10th exact scores (the smaller, the more near-ties a graph walk must tell apart)
    sample = np.random.default_rng(2).choice(len(mat), size=min(100, len(mat)), replace=False)
    nn10 = [float(np.sort(np.asarray(mat @ mat[i]))[-11]) for i in sample]
    gaps = [float(mat[e[0] - 1] @ q - mat[e[9] - 1] @ q) for e, q in zip(exact, qs)]
    res["neighbourhood"] = {"nn10_cosine_median": round(float(np.median(nn10)), 4),
                            "query_top1_minus_top10_median": round(float(np.median(gaps)), 4)}
    print(f"  10th neighbour's cosine (median) {res['neighbourhood']['nn10_cosine_median']}, query top-1 minus "
          f"top-10 (median) {res['neighbourhood']['query_top1_minus_top10_median']}", flush=True)
    res["load_avg_after"] = round(os.getloadavg()[0], 1)
    return res


def profile_misses(dsn: str, table: str, n: int, k: int, cache: Path) -> dict:
    """Why an HNSW table misses, on `k` queries over the text vectors of size n (the table built by a run before):
    recall@10 of ef_search 1000 alone; read wider by pgvector 0.8's iterative scans (strict_order: rows in
    distance order, a closer one found late is dropped; relaxed_order: kept) to 2,000 and 5,000 rows
    (max_scan_tuples 20,000 and 100,000), the exact top 10 of them kept (ORDER BY the exact distance over the
    scan's rows, in SQL); the best rows' own vectors searched as well (another way in). Then each missed row: is
    it a float tie of the 10th, within 1e-3, and does the graph find it from its own vector (is it reachable)."""
    import psycopg
    mat = vectors("text", n, cache)
    qs = query_vectors("text", k)
    pg = psycopg.connect(dsn, autocommit=True)
    lit = lambda q: "[" + ",".join(f"{x:.9g}" for x in np.asarray(q).tolist()) + "]"

    def scan(q, rows, mode=None, tuples=20_000):
        with pg.transaction():
            pg.execute("SET LOCAL hnsw.ef_search = 1000")
            if mode:
                pg.execute(f"SET LOCAL hnsw.iterative_scan = {mode}")
                pg.execute(f"SET LOCAL hnsw.max_scan_tuples = {tuples}")
            # the exact re-rank in SQL: the scan's rows, ordered again by the exact distance. MATERIALIZED: from
            # a plain subquery the planner takes the rows as sorted by d already (the index's order) and only
            # breaks ties, which keeps a relaxed scan's late, closer rows where they came
            return [r[0] for r in pg.execute(
                f"WITH s AS MATERIALIZED (SELECT chunk_id, embedding <#> %s::vector AS d FROM {table} "
                f"ORDER BY embedding <#> %s::vector LIMIT %s) SELECT chunk_id FROM s ORDER BY d, chunk_id LIMIT 10",
                (lit(q), lit(q), rows))]

    def expand(q):
        first = scan(q, 1000)
        got = set(first)
        for c in first[:3]:
            got |= set(scan(mat[c - 1], 1000))
        return sorted(got, key=lambda c: (-float(mat[c - 1] @ q), c))[:10]

    variants = {"ef_search 1000": lambda q: scan(q, 200),
                "strict_order, 2,000 rows": lambda q: scan(q, 2000, "strict_order"),
                "relaxed_order, 2,000 rows": lambda q: scan(q, 2000, "relaxed_order"),
                "relaxed_order, 5,000 rows, 100,000 tuples": lambda q: scan(q, 5000, "relaxed_order", 100_000),
                "ef_search 1000 + the top 3's own vectors": expand}
    exact = []
    for q in qs:
        sc = np.asarray(mat @ q)
        exact.append([int(i) + 1 for i in np.lexsort((np.arange(len(sc)), -sc))[:10]])
    out = {"table": table, "queries": k, "load_avg_before": round(os.getloadavg()[0], 1), "variants": {}}
    misses = []
    for name, fn in variants.items():
        hits, ms = 0, []
        for q, e in zip(qs, exact):
            t0 = time.perf_counter()
            got = fn(q)
            ms.append((time.perf_counter() - t0) * 1000)
            hits += len(set(got) & set(e))
            if name == "ef_search 1000":
                misses += [(c, q, e) for c in e if c not in got]
        out["variants"][name] = {"recall_at_10": round(hits / (10 * len(qs)), 4), "ms": summary(ms)}
        print(f"  {name}: recall@10 {out['variants'][name]['recall_at_10']}, p50 {summary(ms)['p50']} ms", flush=True)
    # a missed row of the exact top 10 scored within 1e-6 (float rounding) or 1e-3 of the exact 10th: a tie or a
    # near-tie of the rows returned in its place
    tenth = lambda q, e: float(mat[e[9] - 1] @ q)
    out["misses"] = {"count": len(misses),
                     "float_tie_of_the_10th": sum(float(mat[c - 1] @ q) <= tenth(q, e) + 1e-6 for c, q, e in misses),
                     "within_1e-3_of_the_10th": sum(float(mat[c - 1] @ q) <= tenth(q, e) + EPS for c, q, e in misses),
                     "found_from_their_own_vector": 0}
    with pg.transaction():
        pg.execute("SET LOCAL hnsw.ef_search = 1000")
        for c, _, _ in misses:
            own = [r[0] for r in pg.execute(f"SELECT chunk_id FROM {table} ORDER BY embedding <#> %s::vector LIMIT 1000",
                                            (lit(mat[c - 1]),))]
            out["misses"]["found_from_their_own_vector"] += c in own
    out["load_avg_after"] = round(os.getloadavg()[0], 1)
    pg.close()
    print(json.dumps(out["misses"]), flush=True)
    return out


def sync_at_scale(dsn: str, db: Path) -> dict:
    """`sync` of a real index (a copy: the sync installs its change record into it): the first, whole; then one
    note's chunks rewritten (deleted and inserted again under new ids, a new commit and its layout file, by the
    writer's own functions: search_core.index.write and layout) and synced through the change record; then the
    same change synced by the key-by-key diff a table whose commit the record does not know gets."""
    from search_core.index import pgvector as pv
    from search_core.index.layout import current_layout, refresh_layout
    from search_core.index.store import atomic, bump_generation, connect
    from search_core.index.write import delete_chunks, next_chunk_id
    settings = pv.PgvectorSettings(dsn=dsn, table="bench_sync_scale")
    out = {"index": str(db)}
    first = pv.sync(db, settings, full=True)
    out["full"] = {"rows": first.rows, "seconds": first.seconds, "copy_s": first.load_seconds}

    def rewrite_one_note() -> int:
        conn = connect(db)
        try:
            note = conn.execute("SELECT note_id FROM chunks WHERE has_vector GROUP BY note_id ORDER BY count(*) DESC "
                                "LIMIT 1").fetchone()[0]
            previous = current_layout(conn, db)
            with atomic(conn):
                rows = conn.execute("SELECT id, note_id, ord, heading, context, text, text_hash, has_vector FROM chunks "
                                    "WHERE note_id = ?", (note,)).fetchall()
                vecs = {r[0]: conn.execute("SELECT embedding FROM chunk_vec WHERE rowid = ?", (r[0],)).fetchone()[0]
                        for r in rows if r[7]}
                delete_chunks(conn, [r[0] for r in rows])
                first_new = nid = next_chunk_id(conn)
                for r in rows:
                    conn.execute("INSERT INTO chunks(id, note_id, ord, heading, context, text, text_hash, has_vector) "
                                 "VALUES (?,?,?,?,?,?,?,?)", (nid, *r[1:]))
                    if r[7]:
                        conn.execute("INSERT INTO chunk_vec(rowid, embedding) VALUES (?, ?)", (nid, vecs[r[0]]))
                    nid += 1
                bump_generation(conn)
                refresh_layout(conn, db, previous, first_new)
            return len(rows)
        finally:
            conn.close()

    out["note_chunks"] = rewrite_one_note()
    rep = pv.sync(db)
    out["through_the_record"] = {"seconds": rep.seconds, "keys_read": rep.keys_read, "inserted": rep.inserted,
                                 "deleted": rep.deleted}
    rewrite_one_note()
    conn = connect(db)
    try:
        with atomic(conn):
            conn.execute(f"DELETE FROM {pv.COMMITS}")       # the record no longer knows the table's commit
    finally:
        conn.close()
    rep = pv.sync(db)
    out["key_by_key"] = {"seconds": rep.seconds, "keys_read": rep.keys_read, "inserted": rep.inserted,
                         "deleted": rep.deleted}
    out["load_avg"] = round(os.getloadavg()[0], 1)
    print(json.dumps(out), flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", default=os.environ.get("AUTORESEARCH_TEST_PGVECTOR_DSN"), help="a PostgreSQL with pgvector")
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 525_000])
    ap.add_argument("--vectors", choices=("text", "random", "e5"), default="text")
    ap.add_argument("--e5-index", type=Path, nargs="*", default=[], help="e5-small indexes whose vectors `e5` reads")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--exact-queries", type=int, default=50, help="queries timed through pgvector's exact scan")
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=64)
    ap.add_argument("--partitions", type=int, default=1, help="the table hash-partitioned by chunk id in this many, "
                    "one HNSW graph each (the backend's `partitions`)")
    ap.add_argument("--ef-search", type=int, nargs="+", default=[200, 400, 800])
    ap.add_argument("--read-rows", type=int, nargs="*", default=[], help="also HNSW at ef_search 1000 reading this "
                    "many rows (an iterative scan past 1000), the best kept")
    ap.add_argument("--skip-exact", action="store_true", help="time no pgvector exact scan (a --reuse run)")
    ap.add_argument("--maintenance-work-mem", default="2GB", help="the server's memory for the HNSW build")
    ap.add_argument("--reuse", action="store_true", help="search a table an earlier run loaded and built")
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/pgvector"))
    ap.add_argument("--sync-index", type=Path, default=None, help="time `sync` on a copy of this index instead "
                    "(its first load, one note through the change record, the same by the key-by-key diff)")
    ap.add_argument("--profile-misses", metavar="TABLE", default=None, help="profile the misses of this HNSW table "
                    "(built by an earlier run over --vectors text of the first --sizes) on --queries queries")
    args = ap.parse_args()
    if not args.dsn:
        raise SystemExit("give --dsn (or AUTORESEARCH_TEST_PGVECTOR_DSN); `bash .ci/postgres.sh start DIR` prints one")
    if args.profile_misses:
        write_result("pgvector-misses", profile_misses(args.dsn, args.profile_misses, args.sizes[0], args.queries,
                                                       args.cache))
        return
    if args.sync_index is not None:
        write_result("pgvector-sync", sync_at_scale(args.dsn, args.sync_index))
        return
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.vectors == "e5":
        have = len(e5_vectors(args.e5_index, args.cache))
        args.sizes = [min(n, have) for n in args.sizes]
    import subprocess
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    out = {"vectors": args.vectors, "date": time.strftime("%Y-%m-%d"), "commit": commit, "cpus": os.cpu_count(), "sizes": []}
    for n in args.sizes:
        out["sizes"].append(run_size(args, n))
        print("written", write_result(f"pgvector-{args.vectors}", out), flush=True)


if __name__ == "__main__":
    main()
