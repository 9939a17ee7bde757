"""Index the johngrib wiki from scratch, reindex after one change and with none, then search latency.

    python benchmarks/bench_wiki.py [--vault PATH] [--work DIR] [--skip-full]

The vault is copied to --work (a note must be edited for the one-change run); nothing lands in the repo
but runs/bench/wiki.json.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, ROOT, run_cli, summary, write_result  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", type=Path, default=DATA / "johngrib-wiki" / "_wiki")
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "bench" / "wiki-work")
    ap.add_argument("--stages", default="full,reindex,search",
                    help="comma-separated subset; results merge into runs/bench/wiki.json")
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    stages = set(args.stages.split(","))
    vault, db = args.work / "vault", args.work / "index.sqlite"
    out = Path(__file__).resolve().parent.parent / "runs" / "bench" / "wiki.json"
    result = json.loads(out.read_text()) if out.exists() else {}
    if "full" in stages:
        shutil.rmtree(args.work, ignore_errors=True)
        shutil.copytree(args.vault, vault)
        secs, peak, out = run_cli("index", str(vault), "--db", str(db), "--no-progress")
        result["full_index"] = {"seconds": round(secs, 1), "peak_rss_mib": peak, "report": out.strip()}
        print("full index:", result["full_index"], flush=True)

    notes = sorted(vault.rglob("*.md"))
    rng = random.Random(0)
    one_change, noop = [], []
    for i in range(5 if "reindex" in stages else 0):
        p = rng.choice(notes)
        with p.open("a", encoding="utf-8") as f:
            f.write(f"\n\n벤치마크 수정 {i}: 한 노트만 바뀌었다.\n")
        secs, _, _ = run_cli("index", str(vault), "--db", str(db), "--no-progress")
        one_change.append(secs)
        secs, _, _ = run_cli("index", str(vault), "--db", str(db), "--no-progress")
        noop.append(secs)
    if one_change:
        result["reindex_one_change_s"] = summary(one_change)
        result["reindex_noop_s"] = summary(noop)
        print("one change:", result["reindex_one_change_s"], "\nno-op:", result["reindex_noop_s"], flush=True)
    if "search" not in stages:
        print("written", write_result("wiki", result))
        return

    from search_core.search.pipeline import Searcher
    s = Searcher(db)
    titles = [v["title"] for v in s.view.notes.values()]
    summaries = [v["summary"] for v in s.view.notes.values() if v["summary"]]
    qs = rng.sample(titles, min(len(titles), args.queries // 2)) + rng.sample(summaries, min(len(summaries), args.queries // 2))
    for q in qs[:10]:
        s.search(q)                                   # warm up
    # queries as people type them: note titles (short) and one-line summaries (long); reported
    # separately too, because query embedding costs ~0.5 ms per token on this CPU
    groups = {"all": qs, "titles": qs[: len(qs) // 2], "summaries": qs[len(qs) // 2:]}
    timings: dict[str, list[dict]] = {"titles": [], "summaries": []}
    for name in ("titles", "summaries"):
        for q in groups[name]:
            timings[name].append(s.search(q).timings_ms)
    timings["all"] = timings["titles"] + timings["summaries"]
    result["search_ms"] = {}
    for name, rows in timings.items():
        result["search_ms"][name] = {k: summary([r[k] for r in rows]) for k in rows[0]}
        result["search_ms"][name]["query_chars_median"] = sorted(len(q) for q in groups[name])[len(groups[name]) // 2]
    for name, stages_ms in result["search_ms"].items():
        print(f"-- {name} (median query {stages_ms['query_chars_median']} chars)")
        for k, v in stages_ms.items():
            if isinstance(v, dict):
                print(f"search {k:<10} p50 {v['p50']:>7} ms  p95 {v['p95']:>7} ms", flush=True)
    print("written", write_result("wiki", result))


if __name__ == "__main__":
    main()
