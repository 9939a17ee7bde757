"""Where the in-memory bm25's counts come from (search_core.search.fts_bm25): what each choice costs on an index.

    python benchmarks/bench_fts_bm25.py --db INDEX [--db INDEX ...] [--questions GOLD.yaml ...]

Per index: (1) as shipped, per term on first use from FTS5's vocabulary (fts5vocab `instance`): the view's load
(FTS5's sizes and averages record), then every question's trigrams (CHECK_PHRASES and MAX_PHRASES rarest) read
cold, then their warm query, and the memory the kept lists hold; (2) every term's list read when the view loads
(the whole `instance` table, grouped by term): its wall time and its arrays' bytes (traced peak too), which is
also what an index-time table of the same lists would hold, and about what building that table would read
(its write left out). Wall times on a shared machine: the load is printed beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _queries(conn, gold: list[Path]) -> list[str]:
    from tuner.data.gold import load_gold
    out = [q.query for g in gold for q in load_gold(g).questions]
    out += [r[0] for r in conn.execute("SELECT title FROM notes ORDER BY id") if r[0]]
    return list(dict.fromkeys(out))


def lazy(db: Path, queries: list[str]) -> dict:
    from search_core.search import channels as ch
    from search_core.search.fts_bm25 import FtsBm25
    from search_core.search.view import IndexView
    view = IndexView.open(db)
    conn = view.conn
    t0 = time.perf_counter()
    scorer = FtsBm25(conn)
    load_ms = (time.perf_counter() - t0) * 1000
    cold, warm, fts5 = [], [], []
    for q in queries:
        for phrases in (ch.CHECK_PHRASES, ch.MAX_PHRASES):
            tri = ch.fts_trigrams(view, conn, ch.query_terms(q)[0], phrases)
            if not tri:
                continue
            t0 = time.perf_counter()
            got = scorer.best(tri, 200)
            t1 = time.perf_counter()
            if got is None:
                continue
            scorer.best(tri, 200)
            t2 = time.perf_counter()
            ch._fts_best(conn, ch.fts_match_expr(tri), 200)
            t3 = time.perf_counter()
            cold.append((t1 - t0) * 1000)
            warm.append((t2 - t1) * 1000)
            fts5.append((t3 - t2) * 1000)
    view.close()
    q = lambda xs: f"{statistics.median(xs):.3f} / {np.percentile(xs, 95):.3f}" if xs else "-"
    return {"rows": scorer.rows, "load_ms": round(load_ms, 1), "size_array_mb": round(scorer.size.nbytes / 2**20, 2),
            "queries": len(warm), "terms_held": scorer.terms_held, "lists_mb": round(scorer.nbytes / 2**20, 2),
            "cold_ms_p50_p95": q(cold), "warm_ms_p50_p95": q(warm), "fts5_ms_p50_p95": q(fts5)}


def load_all(db: Path, traced: bool = False) -> dict:
    """Every term's (rows, hits per column) from the whole instance table: the load-time choice. traced: under
    tracemalloc (its peak; the wall time then is tracemalloc's too)."""
    from search_core.search.fts_bm25 import FIELD_WEIGHTS, TABLE
    from search_core.search.view import IndexView
    view = IndexView.open(db)
    conn = view.conn
    cols = [r[1] for r in conn.execute(f"PRAGMA table_info({TABLE})")]
    case = " ".join(f"WHEN '{c}' THEN {i}" for i, c in enumerate(cols))
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.bench_all_instances USING fts5vocab(main, {TABLE}, instance)")
    if traced:
        tracemalloc.start()
    t0 = time.perf_counter()
    # every instance as (term number, row, column), then one sort: a numpy pass per term instead cost 30 s on
    # the demo's 39,541 terms
    vocab: dict[str, int] = {}
    term_no, doc, colno = [], [], []
    for term, d, c in conn.execute(f"SELECT term, doc, CASE col {case} END FROM temp.bench_all_instances"):
        term_no.append(vocab.setdefault(term, len(vocab)))
        doc.append(d)
        colno.append(c)
    instances = len(doc)
    ncol = len(cols)
    key = (np.array(term_no, np.int64) << 40) | (np.array(doc, np.int64) * ncol + np.array(colno, np.int64))
    del term_no, doc, colno
    keys, counts = np.unique(key, return_counts=True)
    cell = keys & ((1 << 40) - 1)
    row_key = (keys >> 40 << 40) | (cell // ncol)            # (term, row)
    rows_u, at = np.unique(row_key, return_inverse=True)
    hits = np.zeros((len(rows_u), ncol), np.int32)
    hits[at, cell % ncol] = counts
    term_of = rows_u >> 40
    bounds = np.flatnonzero(np.r_[True, term_of[1:] != term_of[:-1], True])
    rowids = (rows_u & ((1 << 40) - 1)).astype(np.int32)
    f = (hits @ np.asarray(FIELD_WEIGHTS)).astype(np.float32)      # the scorer's form: weighted hits per row
    del hits
    names = list(vocab)
    lists: dict[str, tuple[np.ndarray, np.ndarray]] = {
        names[int(term_of[a])]: (rowids[a:b], f[a:b]) for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())}
    wall = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] if traced else 0
    tracemalloc.stop()
    view.close()
    arrays = rowids.nbytes + f.nbytes              # the lists are views into these two
    return {"terms": len(lists), "instances": instances, "postings": int(sum(len(r) for r, _ in lists.values())),
            "load_s": round(wall, 2), "arrays_mb": round(arrays / 2**20, 1), "traced_peak_mb": round(peak / 2**20, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", type=Path, action="append", required=True)
    ap.add_argument("--questions", type=Path, action="append", default=[])
    ap.add_argument("--no-load-all", action="store_true")
    args = ap.parse_args()
    from search_core.index.store import connect
    for db in args.db:
        conn = connect(db, readonly=True)
        queries = _queries(conn, args.questions)
        conn.close()
        print(f"{db} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f}, "
              f"{len(queries)} questions and titles)")
        print("  per term on first use:", lazy(db, queries))
        if not args.no_load_all:
            print("  every term at load:", load_all(db))
            print("  the same, traced:", load_all(db, traced=True))


if __name__ == "__main__":
    main()
