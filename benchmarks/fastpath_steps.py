"""Where a fast-path answer's time goes: each step of Searcher.search on the questions the fast path answers,
and the FTS5 agreement query in several forms, in one run.

    python benchmarks/fastpath_steps.py [--sets demo,johngrib] [--cache /work/cache/fastpath] [--reps 5]
        [--search-only]

Per question the fast path answers (bench_fastpath's sets and margin), each step is timed warm `--reps` times and
its median kept; the table gives the p50 and p90 of those medians over the questions, with the load. Steps: the
whole search (its wall time, and the process's CPU time, which a loaded machine's preemptions do not move;
--search-only: these two alone), retrieve_for (the check and the answer's list), the n-gram list, choosing the rarest trigrams,
the FTS5 query itself (_fts_best) and its rows as the channel gets them (fts_best: computed in memory where it
can be, search_core.search.fts_bm25), the whole FTS5 list over CHECK_PHRASES trigrams, both_keyword, rank with and
without snippets. Query forms: the same MATCH as _fts_best with other LIMITs, without ORDER BY, through FTS5's
rank column, and returning row ids or a count only (what bm25() itself costs). Nothing is written."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bench_fastpath import open_set  # noqa: E402
from benchmarks.bench_peers import BenchSet  # noqa: E402



def _median_ms(fn, reps: int, clock=time.perf_counter) -> float:
    times = []
    for _ in range(reps):
        t0 = clock()
        fn()
        times.append((clock() - t0) * 1000)
    return statistics.median(times)


def query_forms(limit: int) -> dict[str, str]:
    from search_core.search import channels as ch
    score = f"bm25(chunks_fts, {', '.join(map(str, ch.FIELD_WEIGHTS))})"
    base = f"SELECT rowid, {score} AS s FROM chunks_fts WHERE chunks_fts MATCH ?"
    weights = ", ".join(map(str, ch.FIELD_WEIGHTS))
    return {f"bm25, LIMIT tie_room ({ch.tie_room(limit)})": f"{base} ORDER BY s LIMIT {ch.tie_room(limit)}",
            f"bm25, LIMIT 4x ({4 * limit})": f"{base} ORDER BY s LIMIT {4 * limit}",
            f"bm25, LIMIT {limit}": f"{base} ORDER BY s LIMIT {limit}",
            "bm25, LIMIT 1": f"{base} ORDER BY s LIMIT 1",
            "bm25, no ORDER BY": base,
            "FTS5 rank column": f"SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? AND rank MATCH "
                                f"'bm25({weights})' ORDER BY rank LIMIT {ch.tie_room(limit)}",
            "row ids only": "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?",
            "count(*)": "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?"}


def steps(s, bs: BenchSet, margin: float, reps: int, search_only: bool = False) -> tuple[dict, dict, int]:
    from search_core.config import SearchConfig
    from search_core.search import channels as ch
    cfg = SearchConfig(embedder=s.embedder_name, fast_path_margin=margin)
    s.warm_up()
    ch.ngram_sparse(s.conn, s.view, "warm-up", cfg.depth)
    step: dict[str, list[float]] = {}
    form: dict[str, list[float]] = {}
    n = 0
    for query in dict.fromkeys(q.query for q in bs.questions):
        r = s.retrieve_for(query, cfg)
        if not r.fast:
            continue
        n += 1
        conn, view, depth = s.conn, s.view, cfg.depth
        trigrams = ch.query_terms(query)[0]
        chosen = ch.fts_trigrams(view, conn, trigrams, ch.CHECK_PHRASES)
        # the lists as both_keyword takes them: arrays (ch.NoteList) where the checkout has them, else hits
        lists = (ch.ngram_list, ch.sparse_list) if hasattr(ch, "NoteList") else (ch.ngram_sparse, ch.sparse)
        ngram = lists[0](conn, view, query, depth)
        fts5 = lists[1](conn, view, query, depth, ch.CHECK_PHRASES)
        # the process's CPU beside the wall time: on a loaded machine a search is preempted for a scheduler slice
        # (~12-16 ms) often enough to move the wall p50, the CPU it spent not (AutoRAG-ko's fast questions at load
        # 9: 2 ms or 14-18 ms by the moment, the same question alike)
        step.setdefault("search, CPU", []).append(_median_ms(lambda: s.search(query, cfg), reps, time.process_time))
        if search_only:
            step.setdefault("search", []).append(_median_ms(lambda: s.search(query, cfg), reps))
            continue
        timed = {"search": lambda: s.search(query, cfg), "retrieve_for": lambda: s.retrieve_for(query, cfg),
                 "n-gram list": lambda: lists[0](conn, view, query, depth),
                 "rarest trigrams": lambda: ch.fts_trigrams(view, conn, trigrams, ch.CHECK_PHRASES),
                 "FTS5 list (12 trigrams)": lambda: lists[1](conn, view, query, depth, ch.CHECK_PHRASES),
                 "both_keyword": lambda: ch.both_keyword(ngram, fts5, depth),
                 "rank": lambda: s.rank(r, cfg), "rank without snippets": lambda: s.rank(r, cfg, snippets=False)}
        if chosen:
            match = ch.fts_match_expr(chosen)
            timed["FTS5 query (_fts_best)"] = lambda: ch._fts_best(conn, match, depth * 4)
            if hasattr(ch, "fts_best"):           # timed on an older checkout too
                timed["the same rows in memory (fts_best)"] = lambda: ch.fts_best(view, conn, chosen, depth * 4)
            for name, sql in query_forms(depth * 4).items():
                form.setdefault(name, []).append(_median_ms(lambda: conn.execute(sql, (match,)).fetchall(), reps))
        for name, fn in timed.items():
            step.setdefault(name, []).append(_median_ms(fn, reps))
    return step, form, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="demo,johngrib")
    ap.add_argument("--margin", type=float, default=0.2)
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/fastpath"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--search-only", action="store_true", help="time the whole search alone (wall and CPU)")
    args = ap.parse_args()
    for key in args.sets.split(","):
        bs, s = open_set(key, args.cache)
        step, form, n = steps(s, bs, args.margin, args.reps, args.search_only)
        s.close()
        print(f"\n{bs.name}: {n} questions on the fast path, load {os.getloadavg()[0]:.1f}\n")
        print("| step | p50 ms | p90 ms |\n|---|---|---|")
        for table in (step, form):
            for name, ms in table.items():
                ms = sorted(ms)
                print(f"| {name} | {statistics.median(ms):.3f} | {ms[int(0.9 * (len(ms) - 1))]:.3f} |")


if __name__ == "__main__":
    main()
