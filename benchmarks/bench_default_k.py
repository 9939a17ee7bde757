"""Let the tuner choose the shipped RRF k, on every public set we have.

Protocol (decisions on tuning questions only; holdouts only check):
  1. per set, a sweep over `rrf_k` alone (experiments/spaces/rrf-k.toml), seeded, from the shipped config;
     its holdout check says whether the set's own choice carries over;
  2. a grid of k on every set's TUNING questions (in-memory re-fusion of cached channel lists); the
     candidate is the k with the best mean tuning score100 over the sets among those that lose no
     tuning hit@5 question on any set against the shipped k;
  3. the candidate against the shipped k on every HOLDOUT (paired randomization test, bootstrap CI):
     adopt it only if no holdout loses a hit@5 question and no metric is significantly worse.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_default_k.py --demo-db D --autorag-db A --korquad-db K

Writes runs/bench/default-k.json; ledgers in runs/bench/ledger-k-*.sqlite.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, ROOT, write_result  # noqa: E402

OUT = ROOT / "runs" / "bench"
EXP = ROOT / "experiments"
GRID = (1, 2, 3, 5, 8, 10, 15, 20, 30, 45, 60, 90, 120)


def sets(args) -> list[dict]:
    out = []
    if args.demo_db:
        out.append({"name": "demo", "db": args.demo_db, "gold": EXP / "gold/demo-tune.yaml",
                    "holdout": EXP / "gold/demo-holdout.yaml", "split": None})
    if args.autorag_db:
        out.append({"name": "autorag-ko", "db": args.autorag_db, "gold": DATA / "autorag-ko/beir",
                    "holdout": None, "split": 0.5})
    if args.korquad_db:
        gold = DATA / "korquad-v1-dev/KorQuAD_v1.0_dev.json"
        if args.korquad_questions:
            gold = korquad_sample_yaml(gold, args.korquad_questions, args.seed)
        out.append({"name": "korquad-dev", "db": args.korquad_db, "gold": gold, "holdout": None, "split": 0.5})
    return out


def korquad_sample_yaml(path: Path, n: int, seed: int) -> Path:
    """A seeded sample of `n` KorQuAD dev questions as a gold YAML with the full file's paragraph ids (the
    index holds the whole dev set): 5,774 searches per grid point would take most of an hour here."""
    import random

    import yaml

    from tuner.data.gold import load_gold
    qs = list(load_gold(path).questions)
    pick = sorted(random.Random(seed).sample(range(len(qs)), min(n, len(qs))))
    doc = {"name": f"korquad-dev-{n}", "questions": [{"id": qs[i].id, "level": qs[i].level, "query": qs[i].query,
                                                       "gold": list(qs[i].gold)} for i in pick]}
    out = OUT / f"korquad-dev-{n}.yaml"
    out.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return out


def run_set(s: dict, rounds: int, seed: int) -> dict:
    from tuner.ledger.ledger import Ledger
    from tuner.sweep.loop import Sweep, SweepParams
    ledger_path = OUT / f"ledger-k-{s['name']}.sqlite"
    for p in (ledger_path, Path(f"{ledger_path}-wal"), Path(f"{ledger_path}-shm")):
        p.unlink(missing_ok=True)
    lg = Ledger(ledger_path)
    p = SweepParams(db=str(s["db"]), gold=str(s["gold"]), space=str(EXP / "spaces/rrf-k.toml"), rounds=rounds,
                    holdout=str(s["holdout"]) if s["holdout"] else None, split=s["split"], seed=seed,
                    index_dir=str(OUT / "indexes"))
    t0 = time.perf_counter()
    sw = Sweep(p, lg)
    summ = sw.run().to_json()
    hold = sw.run_holdout().to_json()
    sweep_s = time.perf_counter() - t0
    # the grid on the tuning and the holdout questions, from the same cached channel lists
    base = sw.start
    grid = {}
    for k in GRID:
        cfg = base.replace(rrf_k=k)
        t = sw.bench.evaluate(cfg, sw.gold)
        h = sw.bench.evaluate(cfg, sw.hold_gold)
        grid[k] = {"tune": t, "hold": h}
    lg.close()
    return {"set": s["name"], "tuning_questions": len(sw.gold.questions), "holdout_questions": len(sw.hold_gold.questions),
            "sweep": {"id": summ["sweep"], "seconds": round(sweep_s, 1), "decisions": summ["decisions"],
                      "start_k": summ["start_config"]["rrf_k"], "chosen_k": summ["final_config"]["rrf_k"],
                      "path": summ["path"], "start": summ["start"], "final": summ["final"],
                      "holdout": {k: hold[k] for k in ("start", "final", "holdout_regressed", "within_noise")}},
            "grid": grid}


def hits(res) -> int:
    return sum(1 for q in res.per_query if q.level != "probe" and q.metrics["hit@5"] >= 1)


def line(res) -> dict:
    o = res.overall
    return {"hit5_questions": hits(res), "hit@5": round(o["hit@5"], 4), "mrr": round(o["mrr"], 4),
            "ndcg@10": round(o["ndcg@10"], 4), "score100": round(score(res), 2)}


def score(res) -> float:
    from tuner.sweep.keep_rule import objective_value
    return objective_value(res, "score100")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--demo-db")
    ap.add_argument("--autorag-db")
    ap.add_argument("--korquad-db")
    ap.add_argument("--korquad-questions", type=int, default=1200,
                    help="a seeded sample of KorQuAD dev's 5,774 questions (0: all)")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reuse", action="store_true", help="load a set's sweep and grid saved by an earlier run")
    args = ap.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from search_core.config import SearchConfig
    from tuner.evaluation.compare import compare
    shipped = SearchConfig().rrf_k
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    for s in sets(args):
        saved = OUT / f"default-k-set-{s['name']}.json"
        if args.reuse and saved.exists():
            r = json.loads(saved.read_text(encoding="utf-8"))
            r["grid"] = {int(k): v for k, v in r["grid"].items()}
            print(f"== {s['name']}: reused {saved}", flush=True)
        else:
            print(f"== {s['name']}", flush=True)
            r = run_set(s, args.rounds, args.seed)
            saved.write_text(json.dumps(r, ensure_ascii=False), encoding="utf-8")
        sw = r["sweep"]
        print(f"   sweep {sw['seconds']} s: k {sw['start_k']} -> {sw['chosen_k']}; holdout "
              f"{sw['holdout']['start']} -> {sw['holdout']['final']}, regressed={sw['holdout']['holdout_regressed']}",
              flush=True)
        results.append(r)
    # 2. the candidate, from tuning questions only
    eligible = []
    for k in GRID:
        if all(hits(r["grid"][k]["tune"]) >= hits(r["grid"][shipped]["tune"]) for r in results):
            mean_score = sum(score(r["grid"][k]["tune"]) for r in results) / len(results)
            eligible.append((mean_score, -k, k))
    eligible.sort(reverse=True)
    candidate = eligible[0][2] if eligible else shipped
    # 3. the check on every holdout
    checks = {}
    for r in results:
        a, b = r["grid"][shipped]["hold"], r["grid"][candidate]["hold"]
        c = compare(a, b, seed=args.seed).to_json()
        worse = [m for m, v in c["metrics"].items() if v.get("delta", 0) < 0 and v["p_value"] < 0.05]
        checks[r["set"]] = {"shipped": line(a), "candidate": line(b), "significantly_worse": worse,
                            "holds": hits(b) >= hits(a) and not worse,
                            "p": {m: v["p_value"] for m, v in c["metrics"].items()}}
    adopt = candidate != shipped and all(c["holds"] for c in checks.values())
    table = {r["set"]: {str(k): {"tune": line(r["grid"][k]["tune"]), "hold": line(r["grid"][k]["hold"])} for k in GRID}
             for r in results}
    out = {"shipped_k": shipped, "candidate_k": candidate, "adopt": adopt, "grid": list(GRID),
           "eligible_by_tuning_score": [(round(m, 3), k) for m, _, k in eligible],
           "sets": [{k: v for k, v in r.items() if k != "grid"} for r in results],
           "holdout_check": checks, "table": table, "loadavg": os.getloadavg()}
    write_result("default-k", out)
    print(json.dumps({"candidate_k": candidate, "adopt": adopt, "holdout_check": checks}, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
