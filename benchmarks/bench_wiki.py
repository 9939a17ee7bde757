"""Index the johngrib wiki from scratch, reindex after one change and with none, then search latency.

    python benchmarks/bench_wiki.py [--vault PATH] [--work DIR] [--skip-full]

The vault is copied to --work (a note must be edited for the one-change run); nothing lands in the repo
but runs/bench/wiki.json.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, run_cli, summary, write_result  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", type=Path, default=DATA / "johngrib-wiki" / "_wiki")
    ap.add_argument("--work", type=Path, default=Path("/tmp/autoresearch-bench-wiki"))
    ap.add_argument("--skip-full", action="store_true", help="reuse the index already in --work")
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    vault, db = args.work / "vault", args.work / "index.sqlite"
    result = {}
    if not args.skip_full:
        shutil.rmtree(args.work, ignore_errors=True)
        shutil.copytree(args.vault, vault)
        secs, peak, out = run_cli("index", str(vault), "--db", str(db), "--no-progress")
        result["full_index"] = {"seconds": round(secs, 1), "peak_rss_mib": peak, "report": out.strip()}
        print("full index:", result["full_index"], flush=True)

    notes = sorted(vault.rglob("*.md"))
    rng = random.Random(0)
    one_change, noop = [], []
    for i in range(5):
        p = rng.choice(notes)
        with p.open("a", encoding="utf-8") as f:
            f.write(f"\n\n벤치마크 수정 {i}: 한 노트만 바뀌었다.\n")
        secs, _, _ = run_cli("index", str(vault), "--db", str(db), "--no-progress")
        one_change.append(secs)
        secs, _, _ = run_cli("index", str(vault), "--db", str(db), "--no-progress")
        noop.append(secs)
    result["reindex_one_change_s"] = summary(one_change)
    result["reindex_noop_s"] = summary(noop)
    print("one change:", result["reindex_one_change_s"], "\nno-op:", result["reindex_noop_s"], flush=True)

    from search_core.pipeline import Searcher
    s = Searcher(db)
    titles = [v["title"] for v in s.view.notes.values()]
    summaries = [v["summary"] for v in s.view.notes.values() if v["summary"]]
    qs = rng.sample(titles, min(len(titles), args.queries // 2)) + rng.sample(summaries, min(len(summaries), args.queries // 2))
    for q in qs[:10]:
        s.search(q)                                   # warm up
    per_stage: dict[str, list[float]] = {}
    for q in qs:
        r = s.search(q)
        for k, v in r.timings_ms.items():
            per_stage.setdefault(k, []).append(v)
    result["search_ms"] = {k: summary(v) for k, v in per_stage.items()}
    for k, v in result["search_ms"].items():
        print(f"search {k:<10} p50 {v['p50']:>7} ms  p95 {v['p95']:>7} ms", flush=True)
    print("written", write_result("wiki", result))


if __name__ == "__main__":
    main()
