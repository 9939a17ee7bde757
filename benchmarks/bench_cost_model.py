"""Does the cost model tell the truth? Predicted against measured search latency, per stage and overall.

    python benchmarks/bench_cost_model.py [--sets demo,autorag,johngrib] [--passes 3] [--busy]
    python benchmarks/bench_cost_model.py --determinism [--rounds 24]

For each set: one cost calibration on its questions (tuner.evaluation.cost_model.calibrate), then every question
searched for real (`Searcher.retrieve` + `rank`, no query-vector or channel-list cache) over --passes
passes in a seeded shuffled order; each search's counted work (search_core.work) is charged with the
calibration. Reported per stage (embed, sparse, retrieve, rank, total): measured and predicted p50/p95
and their ratio. With --busy the same searches run again with another process spinning on one core,
against the calibration taken on the quiet machine: the ratio then says how far a busy night drifts
from the prediction (what the morning report flags).

Sets: demo (the demo vault, its tune + holdout + probe questions), autorag (AutoRAG-ko, 114 questions),
johngrib (the johngrib wiki: the demo and AutoRAG questions plus bench_latency's long English ones; this
measures time, not quality). Indexes: runs/bench-demo.sqlite (built here if missing), runs/autorag.sqlite
and runs/johngrib.sqlite (`autoresearch index ../shared/data/johngrib-wiki/_wiki --db runs/johngrib.sqlite`).
Raw figures land in runs/bench/cost_model.json.

--determinism: three sweeps with one seed over fusion weights, rrf_k, depth, the embedder (e5-small <->
minilm-l6, a full reindex) and a reranker served over HTTP on loopback, on the demo vault and tuning set,
sharing one cost calibration (the first sweep takes it, the others find it under the runs folder). The
third starts two processes spinning (both cores busy) once its baseline is evaluated. The decisions,
objectives and predicted p95 must agree round by round; the measured p95 need not. Raw figures:
runs/bench/cost_model_determinism.json.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
from benchmarks.common import DATA, ROOT, write_result  # noqa: E402

STAGES = ("embed", "sparse", "retrieve", "rank", "total")


@contextmanager
def busy_core():
    """Another process spinning on one core for the duration of the block."""
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        yield
    finally:
        p.kill()
        p.wait()


def questions_for(name: str) -> list[str]:
    from tuner.data.gold import load_gold
    demo = [q.query for f in ("demo-tune", "demo-holdout", "demo-probes")
            for q in load_gold(ROOT / "experiments" / "gold" / f"{f}.yaml").questions]
    autorag = [q.query for q in load_gold(DATA / "autorag-ko" / "beir").questions]
    if name == "demo":
        return demo
    if name == "autorag":
        return autorag
    from benchmarks.bench_latency import LONG_ENGLISH
    return demo + autorag + list(LONG_ENGLISH)


def index_for(name: str) -> Path:
    if name == "demo":
        db = ROOT / "runs" / "bench-demo.sqlite"
        if not db.exists():
            from search_core.index.indexer import index_vault
            index_vault(ROOT / "experiments" / "demo-vault", db)
        return db
    db = ROOT / "runs" / f"{name}.sqlite"
    if not db.exists():
        src = DATA / "autorag-ko" / "beir" if name == "autorag" else DATA / "johngrib-wiki" / "_wiki"
        raise SystemExit(f"no index at {db}; build it with `autoresearch index {src} --db {db}`")
    return db


def measure(searcher, questions: list[str], cal, passes: int, seed: int) -> dict:
    """Per stage: the measured and predicted milliseconds of every search."""
    from search_core.config import SearchConfig
    from search_core.search.ranking import K_LIST
    from search_core.search.work import search_work
    from tuner.evaluation.cost_model import predict
    from search_core.search.query_cache import uncached_queries
    cfg = SearchConfig(embedder=searcher.embedder_name)
    rng = random.Random(seed)
    measured = {s: [] for s in STAGES}
    predicted = {s: [] for s in STAGES}
    work_of: dict = {}
    with uncached_queries(searcher):
        for _ in range(passes):
            order = list(questions)
            rng.shuffle(order)
            for q in order:
                t0 = time.perf_counter()
                r = searcher.retrieve(q, cfg.depth)
                res = searcher.rank(r, cfg, snippets=False, limit_fused=K_LIST)
                wall = (time.perf_counter() - t0) * 1000
                if q not in work_of:
                    work_of[q] = search_work(searcher, r, cfg, res.fused)
                p = predict(work_of[q], cal)
                t = res.timings_ms
                m = {"embed": t.get("embed", 0.0), "sparse": t.get("sparse", 0.0), "retrieve": t.get("retrieve", 0.0),
                     "rank": wall - t.get("retrieve", 0.0), "total": wall}   # rank: all after retrieve
                for s in STAGES:
                    measured[s].append(m[s])
                    predicted[s].append(p[s] if s != "rank" else p["rank"] + p["rerank"] + p["overhead"])
    return {"measured": measured, "predicted": predicted}


def table(raw: dict) -> dict:
    from search_core.percentiles import percentile
    out = {}
    for s in STAGES:
        m, p = raw["measured"][s], raw["predicted"][s]
        row = {"measured_p50": round(percentile(m, 50), 2), "measured_p95": round(percentile(m, 95), 2),
               "predicted_p50": round(percentile(p, 50), 2), "predicted_p95": round(percentile(p, 95), 2)}
        row["p95_ratio"] = round(row["predicted_p95"] / row["measured_p95"], 3) if row["measured_p95"] else None
        out[s] = row
    return out


def run_set(name: str, passes: int, busy: bool, seed: int) -> dict:
    from search_core.search.pipeline import Searcher
    from tuner.evaluation.cost_model import calibrate
    s = Searcher(index_for(name))
    qs = questions_for(name)
    t0 = time.perf_counter()
    cal = calibrate(s, qs, seed=seed)
    out = {"set": name, "questions": len(qs), "chunks": int(s.view.matrix.shape[0]), "calibration": cal.to_json(),
           "calibration_s": round(time.perf_counter() - t0, 1),
           "idle": table(measure(s, qs, cal, passes, seed))}
    if busy:
        with busy_core():
            out["busy"] = table(measure(s, qs, cal, passes, seed + 1))
    s.close()
    return out


DETERMINISM_SPACE = """
[w_dense]
kind = "float"
low = 0.0
high = 1.0
step = 0.05

[w_sparse]
kind = "float"
low = 0.0
high = 1.0
step = 0.05

[rrf_k]
kind = "int"
low = 1
high = 120
step = 1

[depth]
kind = "int"
low = 10
high = 90
step = 20

[embedder]
kind = "categorical"
choices = ["e5-small", "minilm-l6"]
"""


def determinism(rounds: int, seed: int) -> dict:
    import shutil
    import threading
    from http.server import ThreadingHTTPServer
    from search_core.config import SearchConfig
    from tests.helpers.rerank_server import RerankHandler as _RerankHandler   # a real HTTP rerank server
    from tuner.ledger import Ledger
    from tuner.sweep import Sweep, SweepParams
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = ROOT / "runs" / "bench" / "determinism"
    shutil.rmtree(root / "ledgers", ignore_errors=True)
    shutil.rmtree(root / "cost-model", ignore_errors=True)
    (root / "ledgers").mkdir(parents=True)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _RerankHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    reranker = f"rerank+http://127.0.0.1:{srv.server_address[1]}/rerank"
    space = root / "space.toml"
    space.write_text(DETERMINISM_SPACE + f'\n[reranker]\nkind = "categorical"\nchoices = ["none", "{reranker}"]\n',
                     encoding="utf-8")
    db = index_for("demo")
    runs = []
    for label in ("quiet", "quiet again", "busy part-way"):
        spinners: list = []

        def progress(line, label=label):
            if label == "busy part-way" and not spinners and line.startswith("round 1/"):
                spinners.extend(subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2))
                print("   two spinners started after round 1", flush=True)

        params = SweepParams(db=str(db), gold=str(ROOT / "experiments/gold/demo-tune.yaml"), space=str(space),
                             rounds=rounds, seed=seed, vault=str(ROOT / "experiments/demo-vault"),
                             index_dir=str(root / "indexes"))
        lg = Ledger(root / "ledgers" / f"{label.replace(' ', '-')}.sqlite")
        t0 = time.perf_counter()
        load0 = os.getloadavg()[0]
        try:
            sw = Sweep(params, lg, start=SearchConfig(reranker=reranker, rerank_depth=10), progress=progress)
            sw.run()
        finally:
            for p in spinners:
                p.kill()
                p.wait()
        rows = lg.rounds(sw.id)
        runs.append({"label": label, "seconds": round(time.perf_counter() - t0, 1), "load_start": load0,
                     "load_end": os.getloadavg()[0], "cost_events": sw.bench.cost_events,
                     "rounds": [{"round": r.round, "variable": r.variable, "new": r.new,
                                 "decision": r.decision, "objective": r.objective,
                                 "p95_predicted": (r.result.latency_charge.p95_predicted if r.result.latency_charge else None)
                                 if r.result else None,
                                 "p95_measured": (r.result.latency_charge.p95_measured if r.result.latency_charge else None)
                                 if r.result else None} for r in rows]})
        print(f"{label}: {runs[-1]['seconds']} s, load {load0:.1f} -> {runs[-1]['load_end']:.1f}", flush=True)
    srv.shutdown()
    key = lambda r: (r["round"], r["variable"], r["new"], r["decision"], r["objective"], r["p95_predicted"])
    first = [key(r) for r in runs[0]["rounds"]]
    agree = [[key(r) for r in run["rounds"]] == first for run in runs]
    for r in runs[0]["rounds"]:
        others = [next((x for x in run["rounds"] if x["round"] == r["round"]), {}) for run in runs[1:]]
        print(f"  {r['round']:>3} {r['variable']:<10} {str(r['new'])[:28]:<28} {r['decision']:<22} "
              f"p95 pred {r['p95_predicted']}  meas {r['p95_measured']} / "
              + " / ".join(str(o.get("p95_measured")) for o in others))
    print(f"decisions, objectives and predicted p95 identical in all three runs: {all(agree)}")
    return {"rounds": rounds, "seed": seed, "agree": agree, "runs": runs}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="demo,autorag,johngrib")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--busy", action="store_true", help="also measure with one core kept busy")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--determinism", action="store_true", help="the three-sweep determinism run instead")
    ap.add_argument("--rounds", type=int, default=24, help="rounds per sweep with --determinism")
    args = ap.parse_args()
    if args.determinism:
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        out = determinism(args.rounds, args.seed or 1)
        path = write_result("cost_model_determinism", {"started": started, **out,
                                                       "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())})
        print(f"raw figures: {path.relative_to(ROOT)}")
        return
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    results = []
    for name in args.sets.split(","):
        r = run_set(name, args.passes, args.busy, args.seed)
        results.append(r)
        print(f"\n{name}: {r['questions']} questions x {args.passes} passes, {r['chunks']} chunk vectors, "
              f"calibration {r['calibration_s']} s")
        for mode in ("idle", "busy"):
            if mode not in r:
                continue
            print(f"  {mode:5s} {'stage':9s} {'meas p50':>9s} {'pred p50':>9s} {'meas p95':>9s} {'pred p95':>9s} {'pred/meas p95':>14s}")
            for st, row in r[mode].items():
                print(f"  {'':5s} {st:9s} {row['measured_p50']:9.2f} {row['predicted_p50']:9.2f} "
                      f"{row['measured_p95']:9.2f} {row['predicted_p95']:9.2f} {row['p95_ratio'] or 0:14.3f}")
    path = write_result("cost_model", {"started": started, "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                                       "load_at_end": os.getloadavg(), "results": results})
    print(f"\nraw figures: {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
