"""The gate, measured like a QPP paper would: AUROC, balanced accuracy at the chosen threshold and a
risk-coverage curve, always on rows never used to fit, with the cosine gate on the same rows beside it.

Parts (--parts, comma separated):
  demo      choose the feature set and C by cross-validation on demo-tune ONLY (gate_eval.cv_select),
            then fit on demo-tune and measure on demo-holdout + demo-probes (near-topic probes), once.
  korquad   KorQuAD 1.0 dev read as it is (paragraphs = notes, an article = a document), every question.
            ONE index of all the articles (--korquad-db); per split 20 % of the articles are held out by
            dropping their notes from every channel list before fusion; fit on half of the articles'
            questions, measure on the other half's (--splits, 20).
  autorag   the same protocol on AutoRAG-ko (documents = the PDFs: passages sharing a title).
  default   the shipped default gate: fitted on demo + KorQuAD + AutoRAG held-out-document rows (split 0;
            300 KorQuAD rows so they do not drown the others), and the transfer table: for each set,
            fitted on the other two, measured on it. --write-default writes search_core/gate/gate_default.json.
  default-compare  the default part, plus the transfer of each DEFAULT_CANDIDATES feature list (how the
            14 CALIBRATION_FEATURES were chosen: KorQuAD, AutoRAG-ko and demo-gate-tune rows only).
  calibrate `calibrate` over a 100,000-call recall log made of real searches.
  cv        the cross-validation tables only, on tuning rows only (demo-tune; demo-tune + demo-gate-tune
            pooled), and what each rule picks from them; demo-holdout and demo-probes are not even loaded.
            --cv-tables FILE (that run's JSON) lets the demo part reuse them instead of re-running the CV
            (fourth round: the CV was run and read before the holdout look, which then took seconds).
The gate measured everywhere is the one the tuner, `calibrate` and the shipped default fit: the
transferable features of tuner.gate.calibrate.CALIBRATION_FEATURES (16 since the sixth round), C = 1. The demo
part also chooses a feature set and C by cross-validation on demo-tune (it runs whatever --parts says,
unless --features/--C name it); that choice is scored beside it (`alt`) on KorQuAD and AutoRAG.
Retrievals are pickled in runs/bench/ (keyed by the index content), so a re-run after a config change
(rrf_k, say) only re-fuses: the default gate is one command,

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=$PWD nice -n 10 python benchmarks/bench_gate.py --parts default \
        --write-default --demo-db runs/demo.sqlite --korquad-db runs/korquad.sqlite --autorag-db runs/autorag.sqlite
Raw results: runs/bench/gate.json (--out).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, ROOT, write_result  # noqa: E402
from gate_eval import (ALL_TRANSFERABLE, CAL13, COS_DEFAULT, FEATURE_SETS, c_label, cv_table, draw_split, fit,  # noqa: E402
                       heldout_rows, heldout_splits, judge, parse_C, per_feature_auroc, pick_best, pick_one_se,
                       retrieve_all, summarise)

from search_core.config import SearchConfig  # noqa: E402
from search_core.gate.model import DEFAULT_GATE_FILE  # noqa: E402
from search_core.search.pipeline import Searcher  # noqa: E402
from search_core.recall.log import log_search  # noqa: E402
from search_core.recall.log import read_logged_calls  # noqa: E402
from tuner.gate.calibrate import calibrate  # noqa: E402
from tuner.data.gold import load_gold  # noqa: E402

GOLD = ROOT / "experiments" / "gold"
DEMO_SETS = ("demo-tune", "demo-holdout", "demo-probes")
GATE_TUNE = "demo-gate-tune"     # extra near-topic fitting rows, written from the vault's notes (third round)
FOURTH_FIXED = ("calibration-13 + unknown_names", "calibration-13 + unknown_latin + unknown_names")


def gold_rows(s, gold, cfg):
    rows = []
    for q in gold.questions:
        res = s.rank(s.retrieve(q.query, cfg.depth), cfg, snippets=False)
        rows.append({"id": q.id, "set": gold.name, "f": res.gate.features, "y": int(not q.is_probe),
                     "query": q.query, "res": res})
    return rows


def part_demo(s, sets, features, C, table, repeats, pooled=None):
    """Fit on demo-tune, measure on demo-holdout + demo-probes. `features`/`C`: the old rule's choice (best
    CV mean on demo-tune; `model`, as in the earlier runs). The third round adds, all declared before its
    holdout look: the one-standard-error choice on demo-tune ("pure": the target's wording), and, fitted
    on demo-tune + demo-gate-tune ("enlarged"), both rules' choices by CV on those pooled rows, and the
    fixed CALIBRATION_FEATURES gate fitted on either."""
    tune, test = sets["demo-tune"], sets["demo-holdout"] + sets["demo-probes"]
    fp = s.fingerprint["embedder"]
    before = FEATURE_SETS["calibration-10 (before)"]
    out = {"fit": "demo-tune", "measure": "demo-holdout + demo-probes", "chosen": {"features": features, "C": C},
           "cv_table": table, **judge(fit(tune, fp, features, C), tune, test),
           "before (calibration-10, C=1)": judge(fit(tune, fp, before, 1.0), tune, test)["model"],
           ALL_TRANSFERABLE[0]: judge(fit(tune, fp, ALL_TRANSFERABLE[1], ALL_TRANSFERABLE[2]), tune, test)["model"]}
    third = {}
    if table:
        name, c = pick_one_se(table)
        third["pure, 1-SE rule on demo-tune CV"] = {"features": name, "C": c, **judge(
            fit(tune, fp, FEATURE_SETS[name], c), tune, test)["model"]}
    if sets.get(GATE_TUNE):
        big = tune + sets[GATE_TUNE]
        if pooled is None:
            pooled = cv_table(big, fp, repeats) if table else []
        out["cv_table_pooled"] = pooled
        rules = (("best mean", pick_best), ("1-SE rule", pick_one_se)) if pooled else ()
        for rule, pick in rules:
            name, c = pick(pooled)
            third[f"enlarged, {rule} on pooled CV"] = {"features": name, "C": c, **judge(
                fit(big, fp, FEATURE_SETS[name], c), big, test)["model"]}
        third[f"enlarged, {ALL_TRANSFERABLE[0]}"] = judge(fit(big, fp, ALL_TRANSFERABLE[1], ALL_TRANSFERABLE[2]),
                                                          big, test)["model"]
        third["enlarged, 13 features (CALIBRATION_FEATURES until the third round), C=1"] = judge(
            fit(big, fp, CAL13, 1.0), big, test)["model"]
        out["fit_rows"] = {"pure": len(tune), "enlarged": len(big),
                           "enlarged_probes": sum(1 - r["y"] for r in big)}
    third["pure, 13 features (CALIBRATION_FEATURES until the third round), C=1"] = judge(
        fit(tune, fp, CAL13, 1.0), tune, test)["model"]
    out["third_round"] = third
    # fourth round, declared before look 3: the word-level unknown_names in the fixed 14 (in place of
    # unknown_latin) and beside it (15), C = 1, fitted pure and enlarged (BENCHMARKS.md, gate, fourth round)
    fourth = {}
    for label in FOURTH_FIXED:
        fourth[f"pure, {label}, C=1"] = judge(fit(tune, fp, FEATURE_SETS[label], 1.0), tune, test)["model"]
        if sets.get(GATE_TUNE):
            fourth[f"enlarged, {label}, C=1"] = judge(fit(big, fp, FEATURE_SETS[label], 1.0), big, test)["model"]
    out["fourth_round"] = fourth
    out["per_feature_auroc"] = per_feature_auroc(test, sorted(set(features) | set(ALL_TRANSFERABLE[1])
                                                              | {"hit_cos", "unknown_names"}))
    return out


# ---- held-out-document sets: KorQuAD and AutoRAG-ko ------------------------------------------------------

def korquad_set(s, path):
    data = json.loads(Path(path).read_text(encoding="utf-8"))["data"]
    items = [(str(qa["id"]), qa["question"], (f"{ai:03d}",)) for ai, a in enumerate(data)
             for p in a["paragraphs"] for qa in p["qas"]]
    doc_of = {nid: nid.split("-", 1)[0] for nid in s.view.notes}
    return items, doc_of, sorted({d for _, _, ds in items for d in ds})


def autorag_set(s, folder):
    gold = load_gold(Path(folder))
    doc_of = {nid: n["title"] for nid, n in s.view.notes.items()}
    items = [(q.id, q.query, tuple(dict.fromkeys(doc_of[g] for g in q.gold if g in doc_of))) for q in gold.questions]
    return [it for it in items if it[2]], doc_of, sorted(set(doc_of.values()))


def load_set(name, args, cfg):
    s = Searcher(args.korquad_db if name == "korquad" else args.autorag_db)
    items, doc_of, docs = (korquad_set(s, args.korquad_json) if name == "korquad"
                           else autorag_set(s, args.autorag_beir))
    if name == "korquad" and args.korquad_questions:     # a random sample over every article
        items = sorted(random.Random(0).sample(items, args.korquad_questions))
        docs = sorted({d for _, _, ds in items for d in ds})
    retrievals = retrieve_all(s, items, cfg.depth, ROOT / "runs" / "bench" / f"gate-{name}-retrievals.pkl")
    return s, items, retrievals, doc_of, docs


def part_heldout(name, args, cfg, alt):
    """The gate the tuner and `calibrate` fit (ALL_TRANSFERABLE) as `model`; `alt` (the demo-CV choice) beside it,
    and each --also set (at --C) on the same splits."""
    s, items, retrievals, doc_of, docs = load_set(name, args, cfg)
    _, features, C = ALL_TRANSFERABLE
    also = []
    for spec in args.also:       # "NAME" (at --C, else 1) or "NAME|C", C a number or "cv" (chosen in each fit)
        n, _, c = spec.partition("|")
        C_also = parse_C(c) if c else (args.C if args.C is not None else 1.0)
        also.append((f"{n}, C={c_label(C_also)}" if c else n, FEATURE_SETS[n], C_also))
    splits = heldout_splits(s, cfg, items, retrievals, doc_of, docs, list(features), C, args.splits, name, alt=alt,
                            also=also, seed_start=args.seed_start)
    return {"documents": len(docs), "questions": len(items), "splits": len(splits),
            "probes_per_split": [sp["probes"] for sp in splits], "summary": summarise(splits), "per_split": splits}


def split0_rows(name, args, cfg):
    s, items, retrievals, doc_of, docs = load_set(name, args, cfg)
    held, _ = draw_split(docs, 0)
    return heldout_rows(s, cfg, items, retrievals, doc_of, held), s.fingerprint["embedder"]


# Feature lists compared for the shipped default (third round, declared before their numbers were seen):
# the 12 of the first run (no meta_overlap), the 13 shipped, the 13 + unknown_latin, and all 16 transferable.
# The choice reads the transfer rows of KorQuAD, AutoRAG-ko and demo-gate-tune only (the mean balanced
# accuracy, fitted without the set): never the demo row, which holds the near-topic measurement set.
DEFAULT_CANDIDATES = {
    "12 (first run, no meta_overlap)": [f for f in FEATURE_SETS["calibration-13 + unknown_latin"]
                                        if f not in ("meta_overlap", "unknown_latin")],
    "13 (CALIBRATION_FEATURES until the third round)": [f for f in FEATURE_SETS["calibration-13 + unknown_latin"]
                                                        if f != "unknown_latin"],
    "13 + unknown_latin": FEATURE_SETS["calibration-13 + unknown_latin"],
    "16 (13 + unknown_latin + heading_overlap + bm25_wig)":
        FEATURE_SETS["calibration-13 + unknown_latin + heading_overlap + bm25_wig"],
    # fourth round (declared before look 3): the word-level unknown_names in place of unknown_latin, and
    # beside it. The 14 stays unless one of these beats it on CHOICE_TARGETS' mean (no change without a win).
    "14' (13 + unknown_names, in place of unknown_latin)": FEATURE_SETS["calibration-13 + unknown_names"],
    "15 (13 + unknown_latin + unknown_names)": FEATURE_SETS["calibration-13 + unknown_latin + unknown_names"],
    # fifth round: "17 (15 + dense/sparse top idf_overlap), C by inner CV" was a (features, "cv") pair here;
    # measured, not shipped (BENCHMARKS.md, gate, fifth round). A value may still be a (features, C) pair.
    # sixth round (declared before its measurement): the 15 + sparse_idf_overlap, C = 1
    "16 (15 + sparse_idf_overlap)": FEATURE_SETS["calibration-16"],
}
CHOICE_TARGETS = ("korquad", "autorag-ko", GATE_TUNE)


def transfer_table(fit_rows, named, fp, features, C, skip=()):
    out = {}
    for target in named:
        if target in skip:       # --blind-demo: the demo row holds the near-topic measurement set
            continue
        others = [r for n, rs in fit_rows.items() if n != target for r in rs]
        if others:
            m = fit(others, fp, features, C)
            out[target] = {"fitted_on": [n for n in named if n != target], **judge(m, others, named[target])}
    return out


def part_default(sets, args, cfg, fp, compare=False):
    _, features, C = ALL_TRANSFERABLE
    demo = [r for n in DEMO_SETS for r in sets[n]]
    named = {"demo": demo}
    if sets.get(GATE_TUNE):
        named[GATE_TUNE] = sets[GATE_TUNE]
    if args.korquad_db:
        kq, _ = split0_rows("korquad", args, cfg)
        named["korquad"] = kq
    if args.autorag_db:
        named["autorag-ko"], _ = split0_rows("autorag", args, cfg)
    # 300 KorQuAD rows in a fit: its 5,774 would drown the 112 demo rows
    fit_rows = {n: (random.Random(0).sample(r, min(300, len(r))) if n == "korquad" else r) for n, r in named.items()}
    skip = ("demo",) if args.blind_demo else ()
    out = {"transfer": transfer_table(fit_rows, named, fp, features, C, skip), "not_measured": list(skip)}
    if compare:
        cmp = {}
        for label, feats in DEFAULT_CANDIDATES.items():
            feats, c = feats if isinstance(feats, tuple) else (feats, C)
            t = transfer_table(fit_rows, named, fp, feats, parse_C(c), skip)
            cmp[label] = {"choice_mean_bacc": round(float(np.mean([t[n]["model"]["bacc"] for n in CHOICE_TARGETS
                                                                    if n in t])), 4),
                          **{n: {"auroc": round(v["model"]["auroc"], 4), "bacc": round(v["model"]["bacc"], 4),
                                 "cos_fitted_bacc": round(v["cos_fitted"]["bacc"], 4)} for n, v in t.items()}}
        out["candidates"] = cmp
    full = [r for rs in fit_rows.values() for r in rs]
    gold_sets = list(DEMO_SETS) + [n for n in (GATE_TUNE,) if sets.get(n)]   # names `calibrate --labels` sees
    if args.korquad_db:
        gold_sets.append(Path(args.korquad_json).stem)
    if args.autorag_db:
        gold_sets.append(load_gold(Path(args.autorag_beir)).name)
    m = fit(full, fp, features, C, fitted_on={
        "sets": {n: len(r) for n, r in fit_rows.items()}, "gold_sets": gold_sets, "config_hash": cfg.config_hash(),
        "note": "shipped default; see BENCHMARKS.md, the gate; re-fit: benchmarks/bench_gate.py --parts default"})
    if args.write_default:
        m.save(DEFAULT_GATE_FILE)
    return {**out, "default": m.as_json(), "written": str(DEFAULT_GATE_FILE) if args.write_default else None}


def part_calibrate(s, sets, n_calls):
    rows = [r for n in DEMO_SETS for r in sets[n]]
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
        calls = read_logged_calls(tmp, 7 * 86400)
        t1 = time.perf_counter()
        cal = calibrate(calls, [], model=s.gate_for("none").model, cos_threshold=COS_DEFAULT, fingerprint=s.fingerprint)
        t2, c2 = time.perf_counter(), time.process_time()
        timings.append({"read": t1 - t0, "calibrate": t2 - t1, "total": t2 - t0, "cpu": c2 - c0})
    return {"calls": len(calls), "seconds": timings, "best_total_s": round(min(t["total"] for t in timings), 3),
            "best_cpu_s": round(min(t["cpu"] for t in timings), 3),
            "recommendation": {k: v for k, v in cal.recommendation.items() if k != "model"}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="demo,default,calibrate")
    ap.add_argument("--demo-db", default="runs/demo.sqlite")
    ap.add_argument("--korquad-db", default="")
    ap.add_argument("--korquad-json", default=str(DATA / "korquad-v1-dev/KorQuAD_v1.0_dev.json"))
    ap.add_argument("--korquad-questions", type=int, default=0, help="0: every question")
    ap.add_argument("--autorag-db", default="")
    ap.add_argument("--autorag-beir", default=str(DATA / "autorag-ko/beir"))
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--seed-start", type=int, default=0, help="korquad/autorag: the first split's seed (sixth "
                    "round: 20, splits never measured before)")
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--write-default", action="store_true")
    ap.add_argument("--features", default="", help="a gate_eval.FEATURE_SETS name: skip the CV selection "
                    "(it takes minutes; the demo part's JSON records what it chose)")
    ap.add_argument("--C", type=float, default=None)
    ap.add_argument("--cv-repeats", type=int, default=20)
    ap.add_argument("--cv-tables", default="", help="a `--parts cv` run's JSON: reuse its CV tables")
    ap.add_argument("--also", action="append", default=[], help="korquad/autorag: one more gate_eval.FEATURE_SETS "
                    "name (at --C) on the same splits; repeatable")
    ap.add_argument("--blind-demo", action="store_true", help="default parts: fit on the demo sets as always, but "
                    "do not measure the transfer to them (their rows hold demo-holdout + demo-probes, the near-topic "
                    "measurement set; fifth round)")
    ap.add_argument("--out", default="gate")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    out: dict = {"load_average_start": os.getloadavg(), "parts": sorted(parts), "argv": sys.argv[1:]}
    cfg = SearchConfig()
    s = Searcher(args.demo_db)
    fp = s.fingerprint["embedder"]
    tuning_only = parts <= {"cv"}          # the CV alone never loads the measurement sets
    names = ("demo-tune", GATE_TUNE) if tuning_only else DEMO_SETS + (GATE_TUNE,)
    sets = {n: gold_rows(s, load_gold(GOLD / f"{n}.yaml"), cfg) for n in names}
    pooled = None
    if args.features:
        name, C, table = args.features, args.C if args.C is not None else 1.0, []
    elif args.cv_tables:
        saved = json.loads(Path(args.cv_tables).read_text(encoding="utf-8"))["cv"]
        table, pooled = saved["table"], saved["pooled"]
        if {t["features"] for t in table} != set(FEATURE_SETS):
            sys.exit(f"{args.cv_tables} was made with other candidate sets; re-run `--parts cv`")
        name, C = pick_best(table)
    else:
        table = cv_table(sets["demo-tune"], fp, args.cv_repeats)       # demo-tune only: never the holdout
        name, C = pick_best(table)
    if "cv" in parts:
        if pooled is None:
            pooled = cv_table(sets["demo-tune"] + sets[GATE_TUNE], fp, args.cv_repeats)
        out["cv"] = {"table": table, "pooled": pooled, "repeats": args.cv_repeats,
                     "picks": {"pure best mean": pick_best(table), "pure 1-SE": pick_one_se(table),
                               "enlarged best mean": pick_best(pooled), "enlarged 1-SE": pick_one_se(pooled)}}
        print(json.dumps(out["cv"]["picks"]), file=sys.stderr)
        write_result(args.out, out)
    features = FEATURE_SETS[name]
    out["selection"] = {"features_name": name, "features": features, "C": C}
    print(f"chosen on demo-tune by CV: {name}, C={C}", file=sys.stderr)
    if "demo" in parts:
        out["demo"] = part_demo(s, sets, features, C, table, args.cv_repeats, pooled=pooled)
        print(json.dumps({k: out["demo"][k] for k in ("model", "cos_0.82", "cos_fitted", "third_round", "fourth_round")}),
              file=sys.stderr)
    for part in ("korquad", "autorag"):
        if part in parts:
            out[part] = part_heldout(part, args, cfg, (f"demo-CV choice: {name}, C={C}", features, C))
            print(part, json.dumps(out[part]["summary"]), file=sys.stderr)
            write_result(args.out, out)
    if "default" in parts or "default-compare" in parts:
        out["default"] = part_default(sets, args, cfg, fp, compare="default-compare" in parts)
    if "calibrate" in parts:
        out["calibrate"] = part_calibrate(s, sets, args.calls)
    out["load_average_end"] = os.getloadavg()
    print(write_result(args.out, out))


if __name__ == "__main__":
    main()
