"""How many FTS5 trigram phrases a sparse query may OR together (search_core.search.channels.MAX_PHRASES):
quality on every shipped set and sparse time on the johngrib wiki, per cap.

    python benchmarks/bench_keyword_cap.py --caps 12,16,24,32,64 \
        --set demo-tune=runs/demo.sqlite:experiments/gold/demo-tune.yaml \
        --set autorag=runs/autorag.sqlite:../shared/data/autorag-ko/beir \
        --timing-db runs/johngrib.sqlite

Quality is the evaluation's own code (tuner.evaluation.evaluate: rank with limit_fused=K_LIST, QuestionResult.metrics,
summarize), with one difference from `autoresearch eval`: each question is embedded once and its vector
reused across caps (a cap changes only the keyword channels), so five caps cost one embedding pass.
Cap 64 is what every query ran before the cap (query_terms keeps 64 trigrams). Raw figures land in
runs/bench/keyword_cap.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bench_latency import load_questions  # noqa: E402
from benchmarks.common import pct, write_result  # noqa: E402
from search_core.search import channels as ch  # noqa: E402


def quality(db: str, gold_path: str, caps: list[int]) -> dict:
    from search_core.config import SearchConfig
    from search_core.search.pipeline import Searcher
    from search_core.search.query_cache import QueryEmbeddingCache
    from search_core.search.ranking import K_LIST
    from tuner.evaluation.evaluate import QuestionResult, summarize
    from tuner.data.gold import load_gold

    gold = load_gold(gold_path)
    s = Searcher(db, query_cache=QueryEmbeddingCache(maxsize=len(gold.questions) * 4 + 16))   # one embedding per text
    cfg = SearchConfig(embedder=s.embedder_name)
    out, ranked_by_cap = {}, {}
    for cap in caps:
        ch.MAX_PHRASES = cap
        rows, t0 = [], time.perf_counter()
        for q in gold.questions:
            res = s.rank(s.retrieve(q.query, cfg.depth), cfg, snippets=False, limit_fused=K_LIST)
            ranked = res.ranked[:K_LIST]
            rows.append(QuestionResult.searched(q, ranked, inject=res.gate.inject, top_score=res.gate.top_score,
                                                timings_ms=res.timings_ms))
        summ = summarize(rows)
        ranked_by_cap[cap] = [r.ranked for r in rows]
        out[cap] = {"n": summ["n"], "hit@5": summ.get("hit@5"), "mrr@10": summ.get("mrr"),
                    "seconds": round(time.perf_counter() - t0, 1)}
        print(f"  cap {cap}: {out[cap]}", flush=True)
    ref = ranked_by_cap[max(caps)]
    for cap in caps:
        out[cap]["same_top10_as_cap_%d" % max(caps)] = sum(a == b for a, b in zip(ranked_by_cap[cap], ref))
    s.close()
    return out


def timing(db: str, caps: list[int], korquad_n: int) -> dict:
    """Sparse channel alone (the query's own FTS5 work; vocabulary lookups warm) per cap, on the
    benchmark's natural-language questions."""
    from search_core.search.pipeline import Searcher
    s = Searcher(db)
    qs = [q for g in load_questions(korquad_n).values() for q in g]
    for q in qs:                                # warm: page cache and the df cache
        ch.MAX_PHRASES = min(caps)
        ch.sparse(s.conn, s.view, q, 50)
    out = {}
    for cap in caps:
        ch.MAX_PHRASES = cap
        times = []
        for q in qs:
            t0 = time.perf_counter()
            ch.sparse(s.conn, s.view, q, 50)
            times.append((time.perf_counter() - t0) * 1000)
        out[cap] = {"n": len(times), "p50": round(pct(times, 50), 2), "p95": round(pct(times, 95), 2),
                    "max": round(max(times), 2), "loadavg": os.getloadavg()}
        print(f"  sparse, cap {cap}: {out[cap]}", flush=True)
    s.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--caps", default="12,16,24,32,64")
    ap.add_argument("--set", action="append", default=[], help="NAME=DB:GOLD (repeatable)")
    ap.add_argument("--timing-db", default=None)
    ap.add_argument("--korquad", type=int, default=300)
    ap.add_argument("--out", default="keyword_cap")
    args = ap.parse_args()
    caps = sorted(int(c) for c in args.caps.split(","))
    result = {"caps": caps, "loadavg_start": os.getloadavg(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "quality": {}}
    for spec in args.set:
        name, rest = spec.split("=", 1)
        db, gold = rest.split(":", 1)
        print(f"[{name}] {db} {gold}; load average {os.getloadavg()}", flush=True)
        result["quality"][name] = quality(db, gold, caps)
    if args.timing_db:
        print(f"[timing] {args.timing_db}; load average {os.getloadavg()}", flush=True)
        result["sparse_ms"] = timing(args.timing_db, caps, args.korquad)
    result["loadavg_end"] = os.getloadavg()
    print("written", write_result(args.out, result))


if __name__ == "__main__":
    main()
