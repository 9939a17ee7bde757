"""Costs of the guards against hostile input: a 100 KB query with the embedder cap, `check` (full and quick), and the
ledger verifier.

    python benchmarks/bench_hostile.py [--db PATH] [--runs 3] [--uncapped]

--db defaults to an index of the demo vault built under runs/bench/; --uncapped also times one embedding
of the whole 100 KB query (what every such search cost before the cap; minutes on a busy machine).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import ROOT, summary, write_result  # noqa: E402


def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", type=Path, default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--uncapped", action="store_true")
    a = ap.parse_args()
    from search_core.index.check import check_index
    from search_core.index.indexer import index_vault
    from search_core.search.limits import QUERY_EMBED_MAX_CHARS
    from search_core.search.pipeline import Searcher

    db = a.db
    if db is None:
        db = ROOT / "runs" / "bench" / "hostile-demo.sqlite"
        index_vault(ROOT / "experiments" / "demo-vault", db)
    query = ("GraphRAG 커뮤니티 요약과 RRF 융합을 비교한다. hybrid retrieval with dense and sparse channels. " * 2000)[:100_000]
    s = Searcher(db)
    s.search("warm-up")
    res = {"db": str(db), "query_chars": len(query), "cap_chars": QUERY_EMBED_MAX_CHARS,
           "search_100kb_query_s": summary(timed(lambda: s.search(query), a.runs)),
           "search_short_query_s": summary(timed(lambda: s.search("GraphRAG 커뮤니티 요약"), a.runs)),
           "check_full_s": summary(timed(lambda: check_index(db), a.runs)),
           "check_quick_s": summary(timed(lambda: check_index(db, quick=True), a.runs))}
    if a.uncapped:
        res["embed_whole_100kb_query_once_s"] = round(timed(lambda: s.embedder.embed([query], is_query=True), 1)[0], 2)
    from tuner.ledger.ledger import Ledger
    from tuner.ledger.chain import verify_ledger
    with tempfile.TemporaryDirectory() as tmp:
        led = Path(tmp) / "l.sqlite"
        lg = Ledger(led)
        lg.new_sweep("s", {"rounds": 1000}, {})
        row = {"variable": "rrf_k", "old": 60, "new": 61, "config": {"rrf_k": 61}, "config_hash": "c",
               "baseline_hash": "b", "metrics": {"hit@5": 0.5, "mrr": 0.4}, "objective": 70.0,
               "decision": "rejected:no_gain", "reason": "no gain", "eval_s": 1.0}
        t0 = time.perf_counter()
        for i in range(1000):
            lg.append_round("s", {**row, "round": i})
        res["append_1000_rounds_s"] = round(time.perf_counter() - t0, 3)
        lg.close()
        res["verify_1000_rounds_s"] = summary(timed(lambda: verify_ledger(led), a.runs))
    res["note"] = "measured on a 2-core machine shared with other jobs; see BENCHMARKS.md"
    print(write_result("hostile", res))
    for k, v in res.items():
        print(f"{k:<32} {v}")


if __name__ == "__main__":
    main()
