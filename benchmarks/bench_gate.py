"""The gate, measured like a QPP paper would: AUROC, balanced accuracy at the chosen threshold and a
risk-coverage curve, always on rows never used to fit, with the cosine gate on the same rows beside it.

Parts (--parts, comma separated):
  korquad   KorQuAD 1.0 dev read as it is (paragraphs = notes, an article = a document). ONE index of
            all the articles given (--korquad-db); per split, 20 % of the articles are held out by
            dropping their notes from every channel list before fusion (so BM25's IDF, the entity
            graph and the decomposed channel's own RRF still saw them: unlike a separate index).
            Articles are split in halves: fit on one half's questions, measure on the other's.
  demo      fit on demo-tune, measure on demo-holdout + demo-probes (near-topic probes).
  default   fit the shipped default gate (demo sets + KorQuAD) and its transfer: fitted without a set,
            measured on it. Writes search_core/gate_default.json with --write-default.
  cost      gate-feature time per search (the `gate` stage of rank()).
  calibrate `calibrate` over a 100,000-call recall log made of real searches.

    PYTHONPATH=$PWD python benchmarks/bench_gate.py --parts demo,korquad,default,cost,calibrate \
        --demo-db runs/demo.sqlite --korquad-db runs/korquad.sqlite --korquad-json FILE
Raw results: runs/bench/gate.json.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, summary, write_result  # noqa: E402

from search_core.config import SearchConfig  # noqa: E402
from search_core.gate_features import gate_features  # noqa: E402
from search_core.gate_model import DEFAULT_GATE_FILE, best_balanced_threshold, fit_gate  # noqa: E402
from search_core.pipeline import Retrieval, Searcher  # noqa: E402
from tuner.calibrate import CALIBRATION_FEATURES, calibrate, log_search, probabilities, read_log  # noqa: E402
from tuner.gold import load_gold  # noqa: E402

GOLD = ROOT / "experiments" / "gold"
COS_DEFAULT = 0.82
CPU_TIMES: list = []     # gate_features() CPU ms, one call per search
FEATURES = list(CALIBRATION_FEATURES)


def auroc(scores, y):
    from sklearn.metrics import roc_auc_score
    return float(roc_auc_score(y, scores)) if len(set(y)) == 2 else float("nan")


def bacc(pred, y):
    pred, y = np.asarray(pred, bool), np.asarray(y, bool)
    return float(((pred & y).sum() / max(y.sum(), 1) + (~pred & ~y).sum() / max((~y).sum(), 1)) / 2)


def risk_coverage(scores, y, points=(0.2, 0.4, 0.6, 0.8, 1.0)):
    """Inject the most confident share `c` of the rows: the share of injected rows that are probes."""
    order = np.argsort(-np.asarray(scores))
    y = np.asarray(y)[order]
    return {f"{c:.1f}": round(float(1 - y[: max(1, round(c * len(y)))].mean()), 4) for c in points}


def judge(model, train, test):
    """Side by side on `test`: the model, cosine at 0.82, cosine at the threshold fitted on `train`."""
    yt = [r["y"] for r in test]
    p = probabilities(model, [r["f"] for r in test])
    cos = np.array([r["f"]["hit_cos"] for r in test])
    t_cos, _ = best_balanced_threshold([r["f"]["hit_cos"] for r in train], [r["y"] for r in train])
    return {"n": len(test), "probes": int(len(yt) - sum(yt)),
            "model": {"auroc": auroc(p, yt), "bacc": bacc(p >= model.threshold, yt), "threshold": model.threshold,
                      "risk_coverage": risk_coverage(p, yt)},
            "cos_0.82": {"auroc": auroc(cos, yt), "bacc": bacc(cos >= COS_DEFAULT, yt), "threshold": COS_DEFAULT},
            "cos_fitted": {"auroc": auroc(cos, yt), "bacc": bacc(cos >= t_cos, yt), "threshold": round(t_cos, 4),
                           "risk_coverage": risk_coverage(cos, yt)}}


def fit(rows, fp, groups=None, **kw):
    return fit_gate([r["f"] for r in rows], [r["y"] for r in rows], fingerprint=fp, features=FEATURES,
                    groups=groups, **kw)


def gold_rows(s, gold, cfg, times=None):
    rows = []
    for q in gold.questions:
        res = s.rank(s.retrieve(q.query, cfg.depth), cfg, snippets=False)
        if times is not None:   # the gate stage's wall time; CPU time per search is in cpu_times
            c0 = time.process_time()
            gate_features(q.query, res.retrieval.lists, res.hits, s.view, conn=s.conn)
            CPU_TIMES.append((time.process_time() - c0) * 1000)
            times.append(res.timings_ms["gate"])
        rows.append({"id": q.id, "set": gold.name, "f": res.gate.features, "y": int(not q.is_probe),
                     "query": q.query, "res": res})
    return rows


# ---- KorQuAD --------------------------------------------------------------------------------------------

def korquad_retrievals(s, kq_json, depth, limit=None):
    data = json.loads(Path(kq_json).read_text(encoding="utf-8"))["data"]
    qs = [(f"{ai:03d}", qa["question"]) for ai, a in enumerate(data) for p in a["paragraphs"] for qa in p["qas"]]
    if limit and limit < len(qs):          # a random sample over every article, not the first few articles
        qs = sorted(random.Random(0).sample(qs, limit))
    out, t0 = [], time.perf_counter()
    for i, (art, q) in enumerate(qs):
        out.append((art, s.retrieve(q, depth)))
        if i % 200 == 0:
            print(f"  korquad retrieve {i}/{len(qs)} {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    return out, sorted({a for a, _ in qs})


def korquad_split_rows(s, cfg, retrievals, held: set):
    rows = []
    for art, r in retrievals:
        lists = {c: [h for h in hits if h.note_id.split("-", 1)[0] not in held] for c, hits in r.lists.items()}
        res = s.rank(Retrieval(r.query, r.qvec, lists, r.timings_ms, r.subqueries), cfg, snippets=False)
        rows.append({"art": art, "f": res.gate.features, "y": int(art not in held)})
    return rows


def part_korquad(s, cfg, args):
    retrievals, arts = korquad_retrievals(s, args.korquad_json, cfg.depth, args.korquad_questions)
    splits = []
    for seed in range(args.splits):
        rng = random.Random(seed)
        held = set(rng.sample(arts, max(1, round(0.2 * len(arts)))))
        # halves drawn within held-out and kept articles separately, so both halves hold probes
        # (an unstratified half once left one probe on the fitting side and stopped the run)
        kept = sorted(set(arts) - held)
        half = set(rng.sample(sorted(held), len(held) // 2)) | set(rng.sample(kept, len(kept) // 2))
        rows = korquad_split_rows(s, cfg, retrievals, held)
        train = [r for r in rows if r["art"] in half]
        test = [r for r in rows if r["art"] not in half]
        m = fit(train, s.fingerprint["embedder"], groups=[r["art"] for r in train])
        j = judge(m, train, test)
        j["per_feature_auroc"] = {f: round(auroc([r["f"][f] for r in test], [r["y"] for r in test]), 4)
                                  for f in FEATURES + ["hit_cos"]}
        splits.append(j)
        print(f"  split {seed}: model auroc {j['model']['auroc']:.3f} bacc {j['model']['bacc']:.3f} | cos fitted "
              f"bacc {j['cos_fitted']['bacc']:.3f} | cos .82 bacc {j['cos_0.82']['bacc']:.3f}", file=sys.stderr)
    mean = {g: {k: round(float(np.mean([sp[g][k] for sp in splits])), 4) for k in ("auroc", "bacc")}
            for g in ("model", "cos_0.82", "cos_fitted")}
    wins = sum(sp["model"]["bacc"] > sp["cos_fitted"]["bacc"] for sp in splits)
    return {"articles": len(arts), "questions": len(retrievals), "splits": len(splits), "mean": mean,
            "model_beats_fitted_cosine_bacc": f"{wins}/{len(splits)}", "per_split": splits,
            "last_split_rows": rows}


# ---- demo / default / cost / calibrate --------------------------------------------------------------------

def part_demo(s, cfg, sets):
    tune = sets["demo-tune"]
    test = sets["demo-holdout"] + sets["demo-probes"]
    m = fit(tune, s.fingerprint["embedder"])
    return {"fit": "demo-tune", "measure": "demo-holdout + demo-probes", **judge(m, tune, test),
            "per_feature_auroc": {f: round(auroc([r["f"][f] for r in test], [r["y"] for r in test]), 4)
                                  for f in FEATURES + ["hit_cos"]}}


def part_default(s, sets, kq_rows, write: bool):
    demo_all = sets["demo-tune"] + sets["demo-holdout"] + sets["demo-probes"]
    rng = random.Random(0)
    kq = rng.sample(kq_rows, min(300, len(kq_rows))) if kq_rows else []   # 300: KorQuAD must not drown the demo rows
    fp = s.fingerprint["embedder"]
    transfer = {}
    if kq:
        transfer["korquad (fitted on demo sets)"] = judge(fit(demo_all, fp), demo_all, kq_rows)
        transfer["demo sets (fitted on KorQuAD)"] = judge(fit(kq, fp), kq, demo_all)
    held = sets["demo-holdout"] + sets["demo-probes"]
    base = sets["demo-tune"] + kq
    transfer["demo-holdout + probes (fitted on demo-tune" + (" + KorQuAD)" if kq else ")")] = judge(fit(base, fp), base, held)
    full = demo_all + kq
    m = fit(full, fp, fitted_on={"sets": ["demo-tune", "demo-holdout", "demo-probes"] + (["korquad-heldout"] if kq else []),
                                 "note": "shipped default; see BENCHMARKS.md 'Gate (issue 10)'"})
    if write:
        m.save(DEFAULT_GATE_FILE)
    return {"transfer": transfer, "default": m.as_json(), "written": str(DEFAULT_GATE_FILE) if write else None}


def part_cost(times):
    return {"gate_stage_wall_ms": summary(times), "gate_features_cpu_ms": summary(CPU_TIMES)}


def part_calibrate(s, cfg, sets, n_calls):
    rows = sets["demo-tune"] + sets["demo-holdout"] + sets["demo-probes"]
    results = [(r, r["res"]) for r in rows]      # the searches already run (features are what the log keeps)
    tmp = Path(tempfile.mkdtemp()) / "recall-log.sqlite"
    now = time.time()
    log = []
    for i in range(n_calls):
        r, res = results[i % len(results)]
        lab = ("relevant" if r["y"] else "irrelevant") if i < len(results) else None
        log.append({"ts": now - 6.9 * 86400 * (n_calls - i) / n_calls, "session": f"s{i // 50}",
                    "query": r["query"], "res": res, "label": lab})
    log_search(tmp, log)
    timings = []
    for _ in range(3):   # wall and CPU seconds: on a shared machine the CPU time is the honest cost
        t0, c0 = time.perf_counter(), time.process_time()
        calls = read_log(tmp, 7 * 86400)
        t1 = time.perf_counter()
        cal = calibrate(calls, [], model=s.gate_choice.model, cos_threshold=COS_DEFAULT, fingerprint=s.fingerprint)
        t2, c2 = time.perf_counter(), time.process_time()
        timings.append({"read": t1 - t0, "calibrate": t2 - t1, "total": t2 - t0, "cpu": c2 - c0})
    from tuner.cli_gate import calibration_report
    from tuner.reports import render
    t0 = time.perf_counter()
    md = render(calibration_report(cal, "demo", None), "md")
    t_md = time.perf_counter() - t0
    return {"calls": len(calls), "seconds": timings, "best_total_s": round(min(t["total"] for t in timings), 3),
            "best_cpu_s": round(min(t["cpu"] for t in timings), 3),
            "render_md_s": round(t_md, 3), "md_chars": len(md),
            "recommendation": {k: v for k, v in cal["recommendation"].items() if k != "model"}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="demo,default,cost,calibrate")
    ap.add_argument("--demo-db", default="runs/demo.sqlite")
    ap.add_argument("--korquad-db", default="runs/korquad.sqlite")
    ap.add_argument("--korquad-json", default=str(ROOT.parent / "shared/data/korquad-v1-dev/KorQuAD_v1.0_dev.json"))
    ap.add_argument("--korquad-questions", type=int, default=0)
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--write-default", action="store_true")
    ap.add_argument("--out", default="gate")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    out: dict = {"machine": "2 cores shared with ~7 other helpers' jobs (load average ~20)", "parts": sorted(parts)}
    cfg = SearchConfig()
    s = Searcher(args.demo_db)
    times: list = []
    sets = {n: gold_rows(s, load_gold(GOLD / f"{n}.yaml"), cfg, times) for n in ("demo-tune", "demo-holdout", "demo-probes")}
    if "demo" in parts:
        out["demo"] = part_demo(s, cfg, sets)
        print(json.dumps({k: out["demo"][k] for k in ("model", "cos_0.82", "cos_fitted")}), file=sys.stderr)
    if "default" in parts:     # first from the demo sets alone, so a default exists whatever follows
        out["default"] = part_default(s, sets, [], args.write_default)
    write_result(args.out, out)
    if "cost" in parts:
        out["cost"] = part_cost(times)
    if "calibrate" in parts:
        s.use_gate()
        out["calibrate"] = part_calibrate(s, cfg, sets, args.calls)
        print(json.dumps(out["calibrate"]), file=sys.stderr)
    write_result(args.out, out)
    if "korquad" in parts:
        kq_s = Searcher(args.korquad_db)
        out["korquad"] = part_korquad(kq_s, cfg, args)
        kq_rows = out["korquad"].pop("last_split_rows")
        print(json.dumps(out["korquad"]["mean"]), file=sys.stderr)
        write_result(args.out, out)
        if "default" in parts:
            out["default"] = part_default(s, sets, kq_rows, args.write_default)
    print(write_result(args.out, out))


if __name__ == "__main__":
    main()
