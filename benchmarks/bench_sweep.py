"""Sweep speed and behaviour, in one run:

  A. 119 rounds over weights, k and threshold on the demo sets (target <= 60 s)
  B. the same on autorag-ko, 114 questions split tune/holdout (target <= 120 s)
     and a fusion-only round on 114 cached questions (target <= 50 ms)
  C. a model round: reindex + evaluation the first time minilm-l6 comes, and when it comes back (<= 10%)
  D. autorag-ko starting from minilm-l6 (English-only) with default weights: the path to a better config

    python benchmarks/bench_sweep.py [--parts ABCD]

(Whether decisions follow the machine's load: benchmarks/bench_cost_model.py --determinism.)
    (from a git worktree: AUTORESEARCH_DATA=/path/to/shared/data python benchmarks/bench_sweep.py)

Every part records the load average before and after it (os.getloadavg): timings on a shared machine
are upper bounds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, ROOT, summary, write_result  # noqa: E402
DATA = Path(os.environ.get("AUTORESEARCH_DATA", DATA))   # a git worktree sits one level deeper than ../shared

OUT = ROOT / "runs" / "bench"
DEMO = ROOT / "experiments"


def sweep(db, gold, space, rounds=119, holdout=None, split=None, seed=0, vault=None, tag=""):
    from tuner.ledger.ledger import Ledger
    from tuner.sweep.loop import Sweep, SweepParams
    ledger_path = OUT / f"ledger-{tag}.sqlite"
    ledger_path.unlink(missing_ok=True)
    lg = Ledger(ledger_path)
    p = SweepParams(db=str(db), gold=str(gold), space=str(space), rounds=rounds, holdout=str(holdout) if holdout else None,
                    split=split, seed=seed, vault=str(vault) if vault else None, index_dir=str(OUT / "indexes"))
    t0 = time.perf_counter()
    sw = Sweep(p, lg)
    s = sw.run().to_json()
    s["seconds"] = round(time.perf_counter() - t0, 2)
    lg.close()
    return s


def part_a():
    from search_core.index.indexer import index_vault
    db = OUT / "demo" / "index.sqlite"
    index_vault(DEMO / "demo-vault", db)
    s = sweep(db, DEMO / "gold/demo-tune.yaml", DEMO / "spaces/fusion.toml", holdout=DEMO / "gold/demo-holdout.yaml",
              tag="demo")
    print(f"A. demo 119-round fusion sweep: {s['seconds']} s; decisions {s['decisions']}; "
          f"holdout regressed: {s['holdout']['holdout_regressed']}", flush=True)
    return {"seconds": s["seconds"], "decisions": s["decisions"], "start": s["start"], "final": s["final"],
            "holdout": {k: s["holdout"][k] for k in ("start", "final", "holdout_regressed")}}


def part_b():
    from search_core.config import SearchConfig
    from search_core.index.indexer import index_vault
    from tuner.data.gold import load_gold
    from tuner.sweep.workbench import Workbench
    beir = DATA / "autorag-ko" / "beir"
    db = OUT / "autorag.sqlite"
    index_vault(beir, db)
    s = sweep(db, beir, DEMO / "spaces/fusion.toml", split=0.5, tag="autorag")
    print(f"B. autorag 119-round fusion sweep: {s['seconds']} s; decisions {s['decisions']}", flush=True)
    wb = Workbench(db)
    gold = load_gold(beir)
    cfg = SearchConfig(embedder=wb.base_embedder, exclude_nav=False)
    wb.evaluate(cfg, gold)                              # fills the channel cache
    times = []
    for i in range(20):
        t0 = time.perf_counter()
        wb.evaluate(cfg.replace(w_sparse=0.2 + i * 0.02), gold)
        times.append((time.perf_counter() - t0) * 1000)
    fr = summary(times)
    print(f"   fusion-only round on {len(gold.questions)} cached questions: p50 {fr['p50']} ms, p95 {fr['p95']} ms", flush=True)
    return {"seconds": s["seconds"], "decisions": s["decisions"], "start": s["start"], "final": s["final"],
            "holdout": {k: s["holdout"][k] for k in ("start", "final", "holdout_regressed")},
            "fusion_round_ms": fr, "path": s["path"]}


def part_c():
    from search_core.config import SearchConfig
    from tuner.data.gold import load_gold
    from tuner.sweep.workbench import Workbench
    db = OUT / "demo" / "index.sqlite"
    idx = OUT / "indexes-modelround"
    shutil.rmtree(idx, ignore_errors=True)
    gold = load_gold(DEMO / "gold/demo-tune.yaml")
    runs = []
    for attempt in ("first", "again"):
        wb = Workbench(db, vault=str(DEMO / "demo-vault"), index_dir=str(idx))   # a fresh process-level state
        t0 = time.perf_counter()
        _, reindex = wb.searcher_for("minilm-l6")
        t1 = time.perf_counter()
        wb.evaluate(SearchConfig(embedder="minilm-l6"), gold)
        runs.append({"attempt": attempt, "reindex_s": round(reindex, 2), "eval_s": round(time.perf_counter() - t1, 2),
                     "total_s": round(time.perf_counter() - t0, 2)})
    ratio = runs[1]["total_s"] / runs[0]["total_s"]
    print(f"C. model round minilm-l6: first {runs[0]}, again {runs[1]}: {ratio:.1%} of the first", flush=True)
    # a cold first time means an empty embedding cache: measure it for honesty
    return {"runs": runs, "ratio": round(ratio, 3),
            "note": "the first run reuses the embedding cache if an earlier run filled it; delete "
                    "runs/bench/demo/embed-cache.sqlite for a cold number"}


def part_d():
    from search_core.index.indexer import index_vault
    beir = DATA / "autorag-ko" / "beir"
    db = OUT / "autorag-minilm.sqlite"
    index_vault(beir, db, embedder="minilm-l6", cache=OUT / "embed-cache.sqlite")
    s = sweep(db, beir, DEMO / "spaces/minilm-start.toml", split=0.5, vault=beir, tag="minilm-start")
    h = s["holdout"]
    print(f"D. autorag from minilm-l6: {s['seconds']} s; tuning {s['start']} -> {s['final']}; holdout "
          f"{h['start']} -> {h['final']} (hit@5 p={h['compare']['metrics']['hit@5']['p_value']}); "
          f"regressed: {h['holdout_regressed']}", flush=True)
    for step in s["path"]:
        print(f"   kept round {step['round']}: {step['variable']} {step['old']} -> {step['new']} ({step['reason']})")
    return {"seconds": s["seconds"], "start": s["start"], "final": s["final"], "path": s["path"],
            "holdout": {k: h[k] for k in ("start", "final", "holdout_regressed")},
            "holdout_p_hit5": h["compare"]["metrics"]["hit@5"]["p_value"],
            "holdout_p_mrr": h["compare"]["metrics"]["mrr"]["p_value"], "final_config": s["final_config"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="ABCD")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    result = {}
    for part in args.parts:
        load_before = os.getloadavg()
        result[part] = {"A": part_a, "B": part_b, "C": part_c, "D": part_d}[part]()
        result[part]["loadavg"] = {"before": [round(x, 2) for x in load_before],
                                   "after": [round(x, 2) for x in os.getloadavg()]}
        print(f"   load average before {result[part]['loadavg']['before']}, after {result[part]['loadavg']['after']}",
              flush=True)
    print("written", write_result("sweep-" + args.parts, result))


if __name__ == "__main__":
    main()
