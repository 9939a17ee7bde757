"""Label-driven gate rules and fitted-gate feature sets, measured offline on spent labelled sets.

bench_gate_week.py runs a simulated week through a real `serve` (3 splits, minutes each); this script replays
the same week in memory, from each question's gate features searched once, so a rule can be judged on many
splits: per split the set is halved (stratified), the traffic half is the week's log (LoggedCall rows),
`suggest` (the product's picker) picks 20 calls, then 10 more under the gate the first round installed,
`calibrate` (the product's function) decides from their true labels, and the installed gate is scored on
the other half beside the shipped default. A rule is `calibrate`'s `threshold_rule` argument
(tuner.gate.calibrate.THRESHOLD_RULES).

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=$PWD nice -n 5 python benchmarks/bench_gate_labels.py rules \
        --demo-db runs/bench-demo.sqlite --autorag-db runs/autorag.sqlite --johngrib-db runs/johngrib.sqlite
    ... bench_gate_labels.py features ...     # every feature set in the table x C, fitted on a small tuning set
    ... bench_gate_labels.py lovo --splits 20 --rule labelled-sign-test --rule covered-sign-test
        # weeks from each vault's left-out gate (bench_gate_lovo.py's rows and gates in --lovo-cache), started at
        # the gate's own cut and at the best cut on the pool (the false-move rate); runs/bench/gate-labels-lovo.json

Only spent sets (tuning data): johngrib-tune, -holdout, -blind, -week, -final; the demo sets; AutoRAG-ko with
held-out PDFs as probes. Rows (per question: keep them out of the repository) are cached in
runs/bench/gate-labels-rows.pkl; results in runs/bench/gate-labels-{rules,features}.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import pickle
import random
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA, ROOT, write_result  # noqa: E402
from bench_gate_transfer import autorag_heldout  # noqa: E402

from search_core.config import SearchConfig  # noqa: E402
from search_core.gate.model import DEFAULT_GATE_FILE, load_gate  # noqa: E402
from search_core.gate.request import GateRequest  # noqa: E402
from search_core.recall.log import LoggedCall  # noqa: E402
import search_core.recall.suggest as picker_module  # noqa: E402
from search_core.recall.suggest import suggest  # noqa: E402
from search_core.search.pipeline import Searcher  # noqa: E402
from tuner.data.gold import load_gold  # noqa: E402
from tuner.gate.metrics import auroc, balanced_accuracy  # noqa: E402

GOLD = ROOT / "experiments" / "gold"
SETS = ROOT / "benchmarks" / "sets"
DEMO_SETS = ("demo-tune", "demo-holdout", "demo-probes", "demo-gate-tune", "demo-gate-holdout", "demo-gate-holdout2")
JOHNGRIB_SETS = ("johngrib-tune", "johngrib-holdout", "johngrib-blind", "johngrib-week", "johngrib-final")
AUTORAG_SEEDS = (1, 2, 3)          # held-out PDFs; split 0 is in the shipped default's fit
ROUNDS = (20, 30)
REPEAT_SHARE = 0.25        # traffic questions asked a second time in the week (bench_gate_week.py's share)
# the pools a week is drawn from: every spent set of one vault (AutoRAG-ko: one held-out split each)
POOLS = {"johngrib-all": JOHNGRIB_SETS,
         "demo-gate-all": ("demo-gate-tune", "demo-gate-holdout", "demo-gate-holdout2"),
         **{f"autorag-s{s}": (f"autorag-s{s}",) for s in AUTORAG_SEEDS}}


def collect(a) -> list[dict]:
    cache = ROOT / "runs" / "bench" / "gate-labels-rows.pkl"
    if cache.exists() and not a.recollect:
        return pickle.loads(cache.read_bytes())
    rows = []
    for vault, db in (("demo", a.demo_db), ("johngrib", a.johngrib_db), ("autorag", a.autorag_db)):
        t0 = time.perf_counter()
        s = Searcher(db, gate=GateRequest(path=DEFAULT_GATE_FILE))
        cfg = SearchConfig(embedder=s.embedder_name)
        if vault == "autorag":
            gold = load_gold(a.data / "autorag-ko" / "beir")
            doc_of = {nid: (n["title"] or nid) for nid, n in s.view.notes.items()}
            for seed, q, res, _, answerable in autorag_heldout(s, cfg, gold, doc_of, AUTORAG_SEEDS):
                rows.append({"vault": vault, "set": f"autorag-s{seed}", "id": q.id, "query": q.query,
                             "y": int(answerable), "f": res.gate.features})
        else:
            for name in (DEMO_SETS if vault == "demo" else JOHNGRIB_SETS):
                gold = load_gold((GOLD if vault == "demo" else SETS) / f"{name}.yaml")
                for q in gold.questions:
                    res = s.rank(s.retrieve(q.query, cfg.depth), cfg, snippets=False)
                    rows.append({"vault": vault, "set": name, "id": q.id, "query": q.query, "level": q.level,
                                 "y": int(not q.is_probe), "f": res.gate.features})
        s.close()
        print(f"{vault}: rows in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(pickle.dumps(rows))
    return rows


# ---- the simulated week ---------------------------------------------------------------------------------

def _calls(rows) -> list[LoggedCall]:
    # a row without query text (AutoRAG-ko's held-out rows) gets a random one: suggest folds near-duplicate
    # queries, so it must be unique and share no trigrams with the others
    return [LoggedCall(i + 1, 1000.0 + i, f"s{i}", "default", r.get("query") or f"{hash(r['id']) & 0xFFFFFFFFFF:x}",
                       "", (), dict(r["f"]), {}, None, None, False, None, 10.0, None, None, None)
            for i, r in enumerate(rows)]


def _bacc(p, y, t) -> float:
    return float(balanced_accuracy(np.asarray(p) >= t, np.asarray(y)))


def one_week(rows, seed, rule, default, truth_of, start: float | None = None, cover_flips: bool = False) -> dict:
    from tuner.gate.calibrate import calibrate
    rng = random.Random(seed)
    ans = [r for r in rows if r["y"]]
    prb = [r for r in rows if not r["y"]]
    rng.shuffle(ans)
    rng.shuffle(prb)
    traffic = ans[: len(ans) // 2] + prb[: len(prb) // 2]
    test = ans[len(ans) // 2:] + prb[len(prb) // 2:]
    traffic = traffic + rng.sample(traffic, round(REPEAT_SHARE * len(traffic)))   # asked again, as in the week
    rng.shuffle(traffic)
    calls = _calls(traffic)
    truth = {c.id: truth_of[id(r)] for c, r in zip(calls, traffic)}
    y_test = [r["y"] for r in test]
    f_test = [r["f"] for r in test]
    p_test = np.array([default.probability(f) for f in f_test])
    gate, labelled = default, 0
    if start is not None:         # a gate in force whose cut is off (as the old default's was on johngrib)
        gate = dataclasses.replace(default, threshold=float(start))
    out = {"default": _bacc(p_test, y_test, gate.threshold), "rounds": []}
    for total in ROUNDS:
        picks = suggest(calls, threshold=gate.threshold, model=gate, n=total - labelled, cover_flips=cover_flips).picks
        lab = {p.id: ("relevant" if truth[p.id] else "irrelevant") for p in picks}
        calls = [dataclasses.replace(c, label=lab[c.id]) if c.id in lab else c for c in calls]
        labelled += len(picks)
        cal = calibrate(calls, [], model=gate, cos_threshold=0.82, fingerprint=dict(default.fingerprint),
                        threshold_rule=rule)
        rec = cal.recommendation      # the records are dataclasses (tuner.gate.records); the JSON is to_json()
        if rec.basis and rec.model:
            from search_core.gate.model import GateModel
            m = rec.model
            gate = GateModel(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in m.items() if k != "format"})
        p_new = np.array([gate.probability(f) for f in f_test])
        mv = rec.threshold_move
        out["rounds"].append({"labels": labelled, "threshold": round(gate.threshold, 4),
                              "method": rec.model_summary.method if rec.model_summary else None,
                              "proposed": mv.to if mv else None, "sign_test": mv.sign_test.to_json() if mv else None,
                              "labels_to_decide": mv.labels_to_decide.more if mv and mv.labels_to_decide else None,
                              "bacc": _bacc(p_new, y_test, gate.threshold)})
    out["ceiling"] = float(max(_bacc(p_test, y_test, t) for t in np.unique(p_test)))
    return out


def rules(a, rows) -> None:
    from tuner.gate.calibrate import THRESHOLD_RULES
    default = load_gate(DEFAULT_GATE_FILE)
    truth_of = {id(r): bool(r["y"]) for r in rows}
    names = a.rule or list(THRESHOLD_RULES)
    results = {"splits": a.splits, "load_average": os.getloadavg(), "pools": {}}
    for pool, sets in POOLS.items():
        prow = [r for r in rows if r["set"] in sets]
        if not prow:
            continue
        res = {}
        for name, start, picker in [(n, st, pk) for st in a.start for n in names for pk in a.picker]:
            st = None if start == "default" else float(start)
            shipped_share = picker_module.FLIP_SHARE
            if picker.startswith("flips@"):       # another share of the picks on the calls a move would flip
                picker_module.FLIP_SHARE = float(picker.partition("@")[2])
            try:
                weeks = [one_week(prow, a.seed + k, name, default, truth_of, st, picker != "centre")
                         for k in range(a.splits)]
            finally:
                picker_module.FLIP_SHARE = shipped_share
            d = np.array([w["default"] for w in weeks])
            summ = {"default": round(float(d.mean()), 4), "ceiling": round(float(np.mean([w["ceiling"] for w in weeks])), 4)}
            for i, n in enumerate(ROUNDS):
                b = np.array([w["rounds"][i]["bacc"] for w in weeks])
                summ[f"labels_{n}"] = {"mean": round(float(b.mean()), 4), "delta": round(float((b - d).mean()), 4),
                                       "worse": int((b < d - 1e-9).sum()), "better": int((b > d + 1e-9).sum()),
                                       "worst_delta": round(float((b - d).min()), 4),
                                       "moved": sum(w["rounds"][i]["method"] not in (None, "keep") for w in weeks)}
            res[f"{name} | start {start} | {picker}"] = summ
            r20, r30 = summ["labels_20"], summ["labels_30"]
            print(f"{pool:<14} {name:<24} {picker:<12} {start:<8} start {summ['default']:.3f} ceiling {summ['ceiling']:.3f} | "
                  f"20: {r20['mean']:.3f} ({r20['delta']:+.4f}, worse {r20['worse']}, better {r20['better']}, worst "
                  f"{r20['worst_delta']:+.3f}, moved {r20['moved']}) | 30: {r30['mean']:.3f} ({r30['delta']:+.4f}, "
                  f"worse {r30['worse']}, better {r30['better']}, worst {r30['worst_delta']:+.3f}, moved {r30['moved']})",
                  flush=True)
        results["pools"][pool] = {"rows": len(prow), "answerable": sum(r["y"] for r in prow), "rules": res}
    results["load_average_end"] = os.getloadavg()
    print(write_result(a.out or "gate-labels-rules", results))


# ---- from a gate that never saw the vault: the leave-one-vault-out rows and gates ----------------------------

LOVO_POOLS = {        # pool -> (vault's rows file, the sets in it, its left-out gate)
    "demo": ("demo", None, "lovo-demo"),
    "autorag-s1": ("autorag", ("autorag-s1",), "lovo-autorag"),
    "autorag-s2": ("autorag", ("autorag-s2",), "lovo-autorag"),
    "johngrib-last": ("johngrib", ("johngrib-last",), "lovo-johngrib"),
    "johngrib-all": ("johngrib", None, "lovo-johngrib"),
    "baekjungho": ("baekjungho", None, "lovo-baekjungho"),
    "hoonti06": ("hoonti06", None, "lovo-hoonti06"),
}


def pool_weeks(pool, prow, gate, rule_names, a) -> dict:
    """Weeks on one pool of labelled rows from `gate`, per start (`gate`: its own cut; `best`: the best cut on the
    whole pool, where any move is a false one; a number: that P) and per rule and picker."""
    from search_core.gate.model import best_balanced_threshold
    truth_of = {id(r): bool(r["y"]) for r in prow}
    p_pool = [gate.probability(r["f"]) for r in prow]
    best_cut, best_bacc = best_balanced_threshold(p_pool, [r["y"] for r in prow])
    res = {}
    for start in a.start:
        st = None if start == "gate" else best_cut if start == "best" else float(start)
        for name, picker in [(n, pk) for n in rule_names for pk in a.picker]:
            weeks = [one_week(prow, a.seed + k, name, gate, truth_of, st, picker == "flips")
                     for k in range(a.splits)]
            d = np.array([w["default"] for w in weeks])
            summ = {"start": round(float(d.mean()), 4), "ceiling": round(float(np.mean([w["ceiling"] for w in weeks])), 4)}
            for i, n in enumerate(ROUNDS):
                b = np.array([w["rounds"][i]["bacc"] for w in weeks])
                moved = [w["rounds"][i]["threshold"] != round((st if st is not None else gate.threshold), 4)
                         for w in weeks]
                summ[f"labels_{n}"] = {"mean": round(float(b.mean()), 4), "delta": round(float((b - d).mean()), 4),
                                       "worse": int((b < d - 1e-9).sum()), "better": int((b > d + 1e-9).sum()),
                                       "worst_delta": round(float((b - d).min()), 4), "moved": int(sum(moved)),
                                       "reach_ceiling_0.90": int(sum(bb >= 0.90 for bb, w in zip(b, weeks)
                                                                      if w["ceiling"] >= 0.90)),
                                       "ceiling_0.90": int(sum(w["ceiling"] >= 0.90 for w in weeks))}
            res[f"{name} | start {start} | {picker}"] = summ
            r20, r30 = summ["labels_20"], summ["labels_30"]
            print(f"{pool:<14} {name:<26} {picker:<6} {start:<5} start {summ['start']:.3f} ceiling {summ['ceiling']:.3f} | "
                  f"20: {r20['mean']:.3f} ({r20['delta']:+.4f}, moved {r20['moved']}, worse {r20['worse']}, worst "
                  f"{r20['worst_delta']:+.3f}) | 30: {r30['mean']:.3f} ({r30['delta']:+.4f}, moved {r30['moved']}, "
                  f"worse {r30['worse']}, worst {r30['worst_delta']:+.3f}, >=0.90 {r30['reach_ceiling_0.90']}/"
                  f"{r30['ceiling_0.90']})", flush=True)
    return {"rows": len(prow), "answerable": sum(r["y"] for r in prow), "best_cut_on_pool": round(best_cut, 4),
            "best_on_pool": round(best_bacc, 4), "rules": res}


def sets_weeks(a) -> None:
    """Weeks on labelled sets of any vault (--set NAME=GOLD[+GOLD...],INDEX, as bench_gate_week.py takes them),
    each question searched once with the defaults (rows cached in --rows-cache, never in the repository), from the
    shipped default or --start-gate."""
    from bench_gate_week import load_questions, question_features
    gate = load_gate(a.start_gate or DEFAULT_GATE_FILE)
    rule_names = a.rule or ["labelled-sign-test", "scan-sign-test"]
    results = {"splits": a.splits, "start_gate": str(a.start_gate or DEFAULT_GATE_FILE),
               "load_average": os.getloadavg(), "pools": {}}
    for spec in a.set:
        name, rest = spec.split("=", 1)
        gold, db = rest.rsplit(",", 1)
        cache = a.rows_cache / f"rows-{name}.pkl"
        if cache.exists():
            prow = pickle.loads(cache.read_bytes())
        else:
            qs = load_questions(gold)
            feats = question_features(Path(db), qs)
            prow = [{"set": name, "id": q.id, "query": q.query, "y": int(not q.is_probe), "f": feats[q.id]} for q in qs]
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_bytes(pickle.dumps(prow))
        results["pools"][name] = pool_weeks(name, prow, gate, rule_names, a)
    results["load_average_end"] = os.getloadavg()
    print(write_result(a.out or "gate-labels-sets", results))


def lovo(a) -> None:
    """Weeks on each vault from the gate fitted with that vault left out (bench_gate_lovo.py's rows and gates, in
    --lovo-cache): `--start gate` from the gate's own cut (does the rule move it where the labels show it is
    off?), `--start best` from the best cut on the whole pool, where the current cut is already right (how
    often does the rule move anyway, and what does that cost?)."""
    rule_names = a.rule or ["labelled-sign-test", "covered-sign-test"]
    results = {"splits": a.splits, "load_average": os.getloadavg(), "pools": {}}
    for pool, (vault, sets, gate_name) in LOVO_POOLS.items():
        if a.pool and pool not in a.pool:
            continue
        rows = pickle.loads((a.lovo_cache / f"rows-{vault}.pkl").read_bytes())["labelled"]
        prow = [r for r in rows if sets is None or r["set"] in sets]
        gate = load_gate(a.lovo_cache / "gates" / f"{gate_name}.json")
        results["pools"][pool] = {**pool_weeks(pool, prow, gate, rule_names, a), "gate": gate_name}
    results["load_average_end"] = os.getloadavg()
    print(write_result(a.out or "gate-labels-lovo", results))


# ---- synthetic weeks: a rule's error rates where the right cut is known ---------------------------------

SYNTH_ROUNDS = (10, 20, 30, 60)


def synthetic(a) -> None:
    """Weeks where the vault's right cut is known, through the product's `suggest` and `calibrate`: a gate whose
    logit P is normal with unit spread, `--separation` apart between answerable calls and probes (2.8: AUROC 0.98,
    best balanced accuracy 0.92, as the wikis' left-out gates), so the best cut is P = 0.5; the week starts from a
    cut `--offset` off it on the logit scale (0: any move is a false one). Per week `--calls` calls, `--share` of
    them answerable; labels in rounds of 10, 20, 30, 60 picked by `suggest` under the gate the round before
    installed. Balanced accuracy is exact (the two normals), so a week's change is the rule's alone."""
    from scipy.stats import norm
    from search_core.gate.model import GateModel
    from tuner.gate.calibrate import calibrate

    fp = {"embedder": {"name": "synthetic", "dim": 1}}
    mu1, mu0 = a.separation / 2, -a.separation / 2

    def bacc(t):
        z = math.log(t / (1 - t))
        return float((norm.sf(z - mu1) + norm.cdf(z - mu0)) / 2)

    results = {"splits": a.splits, "calls": a.calls, "share": a.share, "separation": a.separation,
               "best": round(bacc(0.5), 4), "load_average": os.getloadavg(), "cells": {}}
    for off in a.offset:
        start = 1 / (1 + math.exp(-off))
        for rule in a.rule or ["labelled-sign-test", "scan-sign-test"]:
            weeks = []
            for k in range(a.splits):
                rng = np.random.default_rng(a.seed + k)
                y = rng.random(a.calls) < a.share
                z = np.where(y, rng.normal(mu1, 1, a.calls), rng.normal(mu0, 1, a.calls))
                calls = [LoggedCall(i + 1, 1000.0 + i, f"s{i}", "default", f"{int(rng.integers(1 << 40)):x}", "", (),
                                    {"top_cos": float(z[i]), "title_match": 0.0}, {}, None, None, False, None, 10.0,
                                    None, None, None) for i in range(a.calls)]
                truth = {c.id: bool(t) for c, t in zip(calls, y)}
                gate = GateModel(("top_cos", "title_match"), (0.0, 0.0), (1.0, 1.0), (1.0, 0.0), 0.0, 1.0, 0.0, start,
                                 fp, fitted_on={"sets": {"synthetic": 1}})
                labelled, rounds = 0, []
                for total in SYNTH_ROUNDS:
                    picks = suggest(calls, threshold=gate.threshold, model=gate, n=total - labelled).picks
                    lab = {p.id: ("relevant" if truth[p.id] else "irrelevant") for p in picks}
                    calls = [dataclasses.replace(c, label=lab[c.id]) if c.id in lab else c for c in calls]
                    labelled += len(picks)
                    rec = calibrate(calls, [], model=gate, cos_threshold=0.82, fingerprint=fp,
                                    threshold_rule=rule).recommendation
                    if rec.basis and rec.model:
                        gate = dataclasses.replace(gate, threshold=float(rec.model["threshold"]))
                    mv = rec.threshold_move
                    rounds.append({"labels": labelled, "threshold": gate.threshold,
                                   "bacc": bacc(gate.threshold) - bacc(start),
                                   "more": mv.labels_to_decide.more if mv and mv.labels_to_decide else None})
                weeks.append(rounds)
            cell = {}
            for i, n in enumerate(SYNTH_ROUNDS):
                d = np.array([w[i]["bacc"] for w in weeks])
                moved = np.array([w[i]["threshold"] != start for w in weeks])
                cell[f"labels_{n}"] = {"moved": round(float(moved.mean()), 4), "delta": round(float(d.mean()), 4),
                                       "worse_0.01": round(float((d < -0.01).mean()), 4),
                                       "worst": round(float(d.min()), 4),
                                       "reach_0.90": round(float((bacc(start) + d >= 0.90).mean()), 4)}
            key = f"{rule} | offset {off:+g}"
            results["cells"][key] = {"start": round(bacc(start), 4), **cell}
            print(f"{key:<34} start {bacc(start):.3f} | " + " | ".join(
                f"{n}: moved {cell[f'labels_{n}']['moved']:.2f} d {cell[f'labels_{n}']['delta']:+.4f} worse "
                f"{cell[f'labels_{n}']['worse_0.01']:.2f} worst {cell[f'labels_{n}']['worst']:+.3f}"
                for n in SYNTH_ROUNDS), flush=True)
    results["load_average_end"] = os.getloadavg()
    print(write_result(a.out or "gate-labels-synthetic", results))


# ---- fitted gates: which features and C on a small tuning set -------------------------------------------

# (fit on, scored on): the sweep's and the A/B's fitted gate sees only the tuning set (demo-tune: 24 + 12)
FIT_PLANS = {
    "demo-tune": ("demo-tune", ("demo-holdout+demo-probes", "demo-gate-tune", "demo-gate-holdout", "demo-gate-holdout2")),
    "demo-gate-tune": ("demo-gate-tune", ("demo-holdout+demo-probes", "demo-gate-holdout", "demo-gate-holdout2")),
    "johngrib-tune": ("johngrib-tune", ("johngrib-holdout", "johngrib-blind")),
    "autorag-s1 (half)": ("autorag-s1:0", ("autorag-s2:1", "autorag-s3:1")),
}


def _select(rows, spec):
    out = []
    for part in spec.split("+"):
        name, _, half = part.partition(":")
        rs = [r for r in rows if r["set"] == name]
        if half:                  # AutoRAG-ko: half of the questions by id, so fit and score share none
            rs = [r for r in rs if int(re.match(r"\d+", r["id"]).group(0)) % 2 == int(half)]
        out += rs
    return out


def features(a, rows) -> None:
    from search_core.gate.features import FEATURE_SETS
    from search_core.gate.model import GateFitError
    from tuner.gate.fit import fit_gate
    from tuner.gate.calibrate import probabilities
    results = {"load_average": os.getloadavg(), "plans": {}}
    for plan, (fit_spec, targets) in FIT_PLANS.items():
        fit_rows = _select(rows, fit_spec)
        per = {}
        for fs in FEATURE_SETS:
            for C in (0.03, 0.1, 0.3, 1.0):
                key = f"{fs} | C={C:g}"
                try:
                    m = fit_gate([r["f"] for r in fit_rows], [r["y"] for r in fit_rows], fingerprint={},
                                 features=list(FEATURE_SETS[fs]), C=C)
                except GateFitError as e:
                    per[key] = {"error": str(e)}
                    continue
                cells = {}
                for t in targets:
                    tr = _select(rows, t)
                    p = probabilities(m, [r["f"] for r in tr])
                    y = [r["y"] for r in tr]
                    cells[t] = {"bacc": round(_bacc(p, y, m.threshold), 4), "auroc": round(float(auroc(p, y)), 4)}
                cells["mean_bacc"] = round(float(np.mean([c["bacc"] for c in cells.values()])), 4)
                cells["mean_auroc"] = round(float(np.mean([c["auroc"] for k, c in cells.items() if k != "mean_bacc"])), 4)
                per[key] = cells
                print(f"{plan:<18} ({len(fit_rows):>3} rows) {key:<28} " +
                      " ".join(f"{t}: {cells[t]['bacc']:.3f}/{cells[t]['auroc']:.3f}" for t in targets) +
                      f" | mean {cells['mean_bacc']:.3f} / {cells['mean_auroc']:.3f}", flush=True)
        results["plans"][plan] = {"fit": fit_spec, "rows": len(fit_rows), "candidates": per}
    keys = [k for k in next(iter(results["plans"].values()))["candidates"]]
    results["mean_over_plans"] = {k: round(float(np.mean([p["candidates"][k]["mean_bacc"] for p in results["plans"].values()
                                                          if "mean_bacc" in p["candidates"].get(k, {})])), 4) for k in keys}
    for k, v in results["mean_over_plans"].items():
        print(f"mean over plans {k:<28} {v:.3f}")
    print(write_result(a.out or "gate-labels-features", results))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("rules", "features", "collect", "lovo", "synthetic", "sets"))
    ap.add_argument("--demo-db", default="runs/bench-demo.sqlite")
    ap.add_argument("--autorag-db", default="runs/autorag.sqlite")
    ap.add_argument("--johngrib-db", default="runs/johngrib.sqlite")
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("AUTORESEARCH_DATA", DATA)))
    ap.add_argument("--recollect", action="store_true")
    ap.add_argument("--splits", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rule", action="append", help="a THRESHOLD_RULES name (repeatable; default: all)")
    ap.add_argument("--start", action="append", help="the gate in force's threshold at the start of the week: "
                    "`default` (the shipped one), or a P to start from a cut that is off (repeatable)")
    ap.add_argument("--picker", action="append",
                    help="how `suggest` places its near picks once labels point away from the threshold: `centre` "
                         "(the product's: centred where the labels point), `flips` (cover_flips: on the calls a move "
                         "would flip, FLIP_SHARE of them), `flips@0.8` (another share); repeatable")
    ap.add_argument("--lovo-cache", type=Path, default=Path("/work/cache/lovo"),
                    help="lovo: bench_gate_lovo.py's --cache (rows-VAULT.pkl, gates/lovo-VAULT.json)")
    ap.add_argument("--pool", action="append", help=f"lovo: one of {', '.join(LOVO_POOLS)} (repeatable; default: all)")
    ap.add_argument("--set", action="append", help="sets: NAME=GOLD[+GOLD...],INDEX (repeatable)")
    ap.add_argument("--start-gate", type=Path, help="sets: start from this gate file instead of the shipped default")
    ap.add_argument("--rows-cache", type=Path, default=ROOT / "runs" / "bench",
                    help="sets: where each set's rows (one per question: never commit them) are kept")
    ap.add_argument("--offset", action="append", type=float,
                    help="synthetic: how far the starting cut is off the right one, on the logit scale (repeatable; "
                         "default 0, -1, -0.5, 0.5, 1)")
    ap.add_argument("--calls", type=int, default=120, help="synthetic: calls in a week")
    ap.add_argument("--share", type=float, default=0.67, help="synthetic: the share of answerable calls")
    ap.add_argument("--separation", type=float, default=2.8,
                    help="synthetic: the distance between the two classes' logit P, in units of their spread")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.what == "sets":
        if not a.set:
            ap.error("sets: give at least one --set NAME=GOLD[+GOLD...],INDEX")
        a.start = a.start or ["gate", "best"]
        a.picker = a.picker or ["centre"]
        return sets_weeks(a)
    if a.what == "synthetic":
        a.offset = a.offset if a.offset is not None else [0.0, -1.0, -0.5, 0.5, 1.0]
        return synthetic(a)
    if a.what == "lovo":
        a.start = a.start or ["gate", "best"]
        a.picker = a.picker or ["centre"]
        return lovo(a)
    a.start = a.start or ["default"]
    a.picker = a.picker or ["centre"]
    for pk in a.picker:
        if not (pk in ("flips", "centre") or re.fullmatch(r"flips@(0(\.\d+)?|1(\.0*)?)", pk)):
            ap.error(f"--picker {pk}: valid are flips, flips@SHARE (0-1), centre")
    rows = collect(a)
    if a.what == "rules":
        rules(a, rows)
    elif a.what == "features":
        features(a, rows)


if __name__ == "__main__":
    main()
