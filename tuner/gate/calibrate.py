"""Recalibrate the gate from a window of the recall log and from labelled sets, and apply the result.

The log reader is a small interface (read_log -> list[LogCall]) over the recall log's table
`recall_calls` (one row per recall call; the columns read: id, ts, session, query, top_scores,
features, threshold, injected, stopped_by, latency_ms, label). A label is `relevant` (the vault
could answer: counted as answerable) or `irrelevant` (counted as a probe). Any other store can feed
calibrate() by producing LogCall rows.

calibrate() is pure: rows in, a Calibration (plain dict) out. The CLI writes it as a report (md, html,
json) and as a proposal file (tuner.gate.proposal: write, apply, undo).
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from search_core import SearchCoreError
from search_core.percentiles import percentile
from search_core.gate.model import GateFitError, GateModel, best_balanced_threshold, fit_gate
# our users' rule to retire recall (p95 over 400 ms, or fewer than 20 % of calls injected): one definition,
# shared with `recall-log stats`
from search_core.recall.log import RETIRE_MIN_INJECTION, RETIRE_P95_MS

from tuner.gate.metrics import auroc, gate_scorecard, risk_coverage_curve
from tuner.gate.proposal import write_proposal

LOG_TABLE = "recall_calls"
LABEL_ANSWERABLE, LABEL_PROBE = "relevant", "irrelevant"
FLIP_DELTA = 0.02
# the features a recalibrated gate uses: every one that transfers between vaults (no query length or script
# mix), fixed before measuring, not chosen on a test set. Third round (BENCHMARKS.md, gate): unknown_latin
# added, chosen among 12 / 13 / 13 + unknown_latin / 16 by the mean balanced accuracy of the default gate's
# transfer to KorQuAD, AutoRAG-ko and demo-gate-tune (fitted without each; the demo measurement sets were not
# read): 0.779 / 0.792 / 0.804 / 0.798. meta_overlap stays (the 12 lost on all three). Fourth round:
# unknown_names (the word-level test, search_core.index.word_df) added by the same rule: 14 / 14' (unknown_names in
# place of unknown_latin) / 15 (both) = 0.804 / 0.814 / 0.816; 14' and 15 differ within noise. Sixth round:
# sparse_idf_overlap (the BM25 channel's own top chunk, independent of the fusion's rrf_k) added by a rule
# declared before measuring: on 20 fresh KorQuAD splits balanced accuracy 0.9444 vs the 15's 0.9415 (better on
# 15 of 20), transfer mean 0.811 vs 0.808, and the re-fitted default passes the five-note vault's tests.
CALIBRATION_FEATURES = ("top_cos", "cos_margin", "cos_wig", "cos_spread", "bm25_top_norm", "sparse_found",
                        "term_overlap", "idf_overlap", "sparse_idf_overlap", "meta_overlap", "unknown_words",
                        "unknown_latin", "unknown_names", "dense_sparse_agree", "top1_agree", "title_match")
CALIBRATION_C = 1.0       # the regression's L2 strength (sklearn's C) for every gate the tuner fits
# Fifth round (BENCHMARKS.md, gate): a grid for fit_gate to choose C from by its own grouped out-of-fold
# balanced accuracy, on the fitting rows only. Measured (bench_gate.py `--also NAME|cv`), NOT used by any gate
# the product fits: on the shipped default's pool it picks C = 10, whose gate skips an obvious answer in a
# five-note vault (P 0.10; C = 1: 0.99).
CALIBRATION_C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)
MIN_LABELLED = 8          # fewer labelled rows than this: recommend a cosine threshold, never fit a model


@dataclass(frozen=True)
class LogCall:
    id: int
    ts: float
    session: str
    query: str | None
    features: dict
    top_score: float | None
    injected: bool
    stopped_by: str | None
    latency_ms: float | None
    label: str | None


@dataclass(frozen=True)
class LabelledRow:
    source: str            # "log" or the gold set's name
    id: str
    query: str
    features: dict
    answerable: bool


def _top_score(features: dict, top_scores) -> float | None:
    if "hit_cos" in features:
        return float(features["hit_cos"])
    if isinstance(top_scores, list) and top_scores and isinstance(top_scores[0], dict):
        v = top_scores[0].get("cosine", top_scores[0].get("score"))
        return None if v is None else float(v)
    return None


def read_log(path: str | Path, since_s: float | None = None, now: float | None = None) -> list[LogCall]:
    """The calls of the last `since_s` seconds (all when None), oldest first."""
    p = Path(path)
    if not p.exists():
        raise SearchCoreError(f"no recall log at {p}; it is written by the recall path (serve / mcp). "
                              "Pass --log FILE, or calibrate from labelled sets only with --labels")
    conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    try:
        cols = {r[1] for r in conn.execute(f"PRAGMA table_info({LOG_TABLE})")}
        if not cols:
            raise SearchCoreError(f"{p} has no {LOG_TABLE} table: it is not a recall log")
        label = "label" if "label" in cols else "NULL"
        cutoff = (now or time.time()) - since_s if since_s else float("-inf")
        rows = conn.execute(f"SELECT id, ts, session, query, top_scores, features, injected, stopped_by, latency_ms, "
                            f"{label} FROM {LOG_TABLE} WHERE ts >= ? ORDER BY id", (cutoff,)).fetchall()
    except sqlite3.DatabaseError as e:
        raise SearchCoreError(f"{p} is not a readable recall log ({e})") from None
    finally:
        conn.close()
    out = []
    for cid, ts, session, query, top_scores, feats, injected, stopped_by, latency, lab in rows:
        f = json.loads(feats) if feats else {}
        f = {k: float(v) for k, v in f.items() if isinstance(v, (int, float))}
        ts_list = json.loads(top_scores) if top_scores else []
        out.append(LogCall(int(cid), float(ts), session or "", query, f, _top_score(f, ts_list), bool(injected),
                           stopped_by, None if latency is None else float(latency), lab))
    return out


def apply_label_file(calls: list[LogCall], pairs: list[tuple[int, str]]) -> list[LogCall]:
    """Labels from a file (id, relevant|irrelevant), over the window's calls, in memory. Unknown ids
    and unknown labels are refused together, naming them."""
    by_id = {c.id: c for c in calls}
    unknown = [i for i, _ in pairs if i not in by_id]
    bad = [f"{i}: {lab!r}" for i, lab in pairs if lab not in (LABEL_ANSWERABLE, LABEL_PROBE)]
    if bad:
        raise SearchCoreError(f"unknown label(s) {', '.join(bad[:10])}; valid labels: relevant, irrelevant")
    if unknown:
        raise SearchCoreError(f"the label file names {len(unknown)} call(s) not in this log window: "
                              f"{', '.join(map(str, unknown[:10]))}; widen --since or fix the ids "
                              "(`autoresearch recall-log list` shows them)")
    labels = dict(pairs)
    return [c if c.id not in labels else LogCall(**{**c.__dict__, "label": labels[c.id]}) for c in calls]


def gold_rows(searcher, gold, cfg) -> list[LabelledRow]:
    """Run a labelled set's questions through the search (features as the live gate sees them)."""
    rows = []
    for q in gold.questions:
        res = searcher.rank(searcher.retrieve(q.query, cfg.depth), cfg, snippets=False)
        rows.append(LabelledRow(gold.name, q.id, q.query, res.gate.features, not q.is_probe))
    return rows


def _quantiles(values) -> dict:
    v = np.asarray([x for x in values if x is not None], dtype=np.float64)
    if not len(v):
        return {"n": 0}
    return {"n": int(len(v)), **{f"p{k}": round(percentile(v, k), 4) for k in (5, 25, 50, 75, 95)}}


def probabilities(model: GateModel | None, feature_dicts: list[dict]) -> np.ndarray | None:
    """P(answerable) for many rows at once (the same arithmetic as GateModel.probability)."""
    if model is None or not feature_dicts:
        return None
    X = np.array([[f.get(n, 0.0) for n in model.features] for f in feature_dicts], dtype=np.float64)
    z = ((X - np.asarray(model.mean)) / np.asarray(model.scale)) @ np.asarray(model.coef) + model.intercept
    return 1.0 / (1.0 + np.exp(-(model.calib_a * z + model.calib_b)))


def _auroc(scores, labels) -> float | None:
    a = auroc(scores, labels)
    return None if np.isnan(a) else round(a, 4)


def calibrate(calls: list[LogCall], labelled: list[LabelledRow], *, model: GateModel | None, cos_threshold: float,
              fingerprint: dict, target_probe_rate: float = 0.10, features=CALIBRATION_FEATURES,
              log_read: bool = True) -> dict:
    """Everything the report and the proposal need, as plain data."""
    labelled = list(labelled) + [LabelledRow("log", str(c.id), c.query or "", c.features, c.label == LABEL_ANSWERABLE)
                                 for c in calls if c.label in (LABEL_ANSWERABLE, LABEL_PROBE)]
    unlabelled = [c for c in calls if c.label not in (LABEL_ANSWERABLE, LABEL_PROBE)]
    lab_cos = [r.features.get("hit_cos", r.features.get("top_cos")) for r in labelled]
    ans = [r.answerable for r in labelled]
    p_log = probabilities(model, [c.features for c in calls])
    p_lab = probabilities(model, [r.features for r in labelled])
    out: dict = {"window": _window(calls), "labelled": {"answerable": sum(ans), "probes": len(ans) - sum(ans),
                                                          "sources": sorted({r.source for r in labelled})},
                 "current": {"kind": "model" if model else "cosine", "cos_threshold": cos_threshold,
                             "p_threshold": model.threshold if model else None},
                 "warnings": []}
    out["distributions"] = {
        "cosine": {"answerable": _quantiles(s for s, a in zip(lab_cos, ans) if a),
                   "probes": _quantiles(s for s, a in zip(lab_cos, ans) if not a),
                   "unlabelled log": _quantiles(c.top_score for c in unlabelled)},
    }
    if p_log is not None or p_lab is not None:      # a gate model in force: its P, also with labels alone
        lab_p = p_lab if p_lab is not None else np.zeros(0)
        ul = np.array([c.label not in (LABEL_ANSWERABLE, LABEL_PROBE) for c in calls], dtype=bool)
        out["distributions"]["probability"] = {
            "answerable": _quantiles(lab_p[np.asarray(ans, dtype=bool)] if len(lab_p) else []),
            "probes": _quantiles(lab_p[~np.asarray(ans, dtype=bool)] if len(lab_p) else []),
            "unlabelled log": _quantiles(p_log[ul] if p_log is not None else [])}
    out["traffic"] = _traffic(calls, p_log, model, cos_threshold)
    out["gate_on_labels"] = _gate_on_labels(labelled, lab_cos, ans, p_lab, model, cos_threshold, out)
    out["recommendation"] = _recommend(labelled, lab_cos, ans, fingerprint, target_probe_rate, features, out)
    out["retirement"] = _retirement(out["window"], out["traffic"])
    if not calls and log_read:
        out["warnings"].append("the log window holds no calls: traffic, latency and the retirement rule are "
                               "unknown; widen --since or check that the recall path logs")
    return out


def fitted_sources(model: GateModel | None) -> set[str]:
    """The labelled sets (gold set names, "log") a gate model was fitted on, as its fitted_on records them."""
    if model is None:
        return set()
    fo = model.fitted_on or {}
    names = set(fo.get("sources") or ()) | set(fo.get("gold_sets") or ()) | set((fo.get("sets") or {}).keys())
    return {str(n) for n in names}


def _gate_on_labels(labelled, lab_cos, ans, p_lab, model, cos_threshold, out) -> dict | None:
    """The gate in force scored on the labelled rows (a query-performance-prediction report): AUROC, balanced accuracy at its
    threshold, what it injects, risk-coverage, and the cosine gate at its threshold on the same rows. Rows
    from a set the gate was fitted on are in-sample: said, never hidden."""
    n_ans = sum(ans)
    if not labelled or not n_ans or n_ans == len(ans):
        return None
    y = [int(a) for a in ans]
    cos = [c if c is not None else -1.0 for c in lab_cos]
    res = {"rows": len(y), "answerable": n_ans, "probes": len(y) - n_ans,
           "sources": sorted({r.source for r in labelled}),
           "cosine": gate_scorecard(cos, y, cos_threshold)}
    res["curves"] = {"cosine gate": risk_coverage_curve(cos, y)}
    if model is not None and p_lab is not None:
        res["model"] = gate_scorecard(p_lab, y, model.threshold)
        res["curves"] = {"gate model": risk_coverage_curve(p_lab, y), **res["curves"]}
        seen = sorted(fitted_sources(model) & set(res["sources"]))
        res["in_sample"] = seen
        if seen:
            out["warnings"].append(f"the gate in force was fitted on {', '.join(seen)}: its scores on those rows are "
                                   "in-sample and flatter it; score it on a labelled set it was not fitted on")
    if len(res["sources"]) > 1:          # e.g. the daemon's tuning set (in-sample) beside its holdout (not)
        res["by_source"] = {}
        for src in res["sources"]:
            idx = [i for i, r in enumerate(labelled) if r.source == src]
            ys = [y[i] for i in idx]
            if not 0 < sum(ys) < len(ys):
                res["by_source"][src] = {"rows": len(ys), "probes": len(ys) - sum(ys),
                                         "note": "one kind of row only: scored in the pooled rows above"}
            else:
                one = {"rows": len(ys), "probes": len(ys) - sum(ys),
                       "cosine": gate_scorecard([cos[i] for i in idx], ys, cos_threshold)}
                if "model" in res:
                    one["model"] = gate_scorecard(p_lab[idx], ys, model.threshold)
                    one["in_sample"] = src in res["in_sample"]
                res["by_source"][src] = one
    return res


def _window(calls: list[LogCall]) -> dict:
    lat = [c.latency_ms for c in calls if c.latency_ms is not None]
    return {"calls": len(calls), "sessions": len({c.session for c in calls}),
            "from": min((c.ts for c in calls), default=None), "to": max((c.ts for c in calls), default=None),
            "latency_ms": {"p50": round(percentile(lat, 50), 2) if lat else None,
                           "p95": round(percentile(lat, 95), 2) if lat else None}}


def _traffic(calls, p_log, model, cos_threshold) -> dict:
    """What the current gate did to the window's calls, and how many decisions flip at +/- 0.02."""
    if not calls:
        return {"injected": 0, "injection_rate": None, "stopped": {}, "stopped_examples": [], "flips": {}}
    injected = sum(c.injected for c in calls)
    stopped: dict = {}
    for c in calls:
        if not c.injected:
            stopped[c.stopped_by or "gate"] = stopped.get(c.stopped_by or "gate", 0) + 1
    examples = [{"id": c.id, "query": c.query, "top_score": c.top_score, "stopped_by": c.stopped_by}
                for c in calls if not c.injected][-10:]
    if p_log is not None:
        scores, t, scale = p_log, model.threshold, "probability"
    else:
        scores = np.array([c.top_score if c.top_score is not None else -1.0 for c in calls])
        t, scale = cos_threshold, "cosine"
    now_in = scores >= t
    flips = {"scale": scale, "threshold": round(float(t), 4),
             f"-{FLIP_DELTA}": int((scores >= t - FLIP_DELTA).sum() - now_in.sum()),
             f"+{FLIP_DELTA}": int(now_in.sum() - (scores >= t + FLIP_DELTA).sum())}
    return {"injected": injected, "injection_rate": round(injected / len(calls), 4), "stopped": stopped,
            "stopped_examples": examples, "flips": flips}


def _recommend(labelled, lab_cos, ans, fingerprint, target_probe_rate, features, out) -> dict:
    n_ans, n_probe = sum(ans), len(ans) - sum(ans)
    rec: dict = {"basis": None}
    if n_ans and n_probe:
        t, bacc = best_balanced_threshold(lab_cos, [int(a) for a in ans])
        rec["cosine"] = {"threshold": round(t, 4), "balanced_accuracy": round(bacc, 4),
                         "auroc": _auroc(lab_cos, ans), "note": "in-sample on the labelled rows"}
        rec["basis"] = "best balanced accuracy on labelled data"
        if len(ans) >= MIN_LABELLED:
            try:
                groups = [r.source for r in labelled] if len({r.source for r in labelled}) >= 5 else None
                m = fit_gate([r.features for r in labelled], [int(a) for a in ans], fingerprint=fingerprint,
                             features=list(features), scope="index", groups=groups, C=CALIBRATION_C,
                             fitted_on={"labelled": {"answerable": n_ans, "probes": n_probe},
                                        "sources": sorted({r.source for r in labelled})})
                rec["model"] = m.as_json()
                rec["model_summary"] = {"p_threshold": round(m.threshold, 4),
                                        "cv_balanced_accuracy": m.fitted_on.get("cv_balanced_accuracy"),
                                        "features": list(m.features)}
            except GateFitError as e:
                out["warnings"].append(f"no gate model: {e}")
        else:
            out["warnings"].append(f"only {len(ans)} labelled rows (< {MIN_LABELLED}): a cosine threshold is "
                                   "recommended, no model is fitted")
    elif n_probe:
        s = np.sort(np.asarray([x for x, a in zip(lab_cos, ans) if not a], dtype=np.float64))
        t = float(np.quantile(s, 1 - target_probe_rate)) if len(s) else None
        rec = {"basis": f"probes only: the cosine that injects {target_probe_rate:.0%} of the probes",
               "cosine": {"threshold": round(t, 4) if t is not None else None}}
        out["warnings"].append("the labels hold no answerable questions: only a target probe rate can be used")
    else:
        out["warnings"].append("no labelled probes: the gate cannot be calibrated (label calls as irrelevant with "
                               "`recall-log label`, or pass a gold set with probes via --labels); the current "
                               "gate stays")
    return rec


def _retirement(window: dict, traffic: dict) -> dict:
    p95, rate = window["latency_ms"]["p95"], traffic.get("injection_rate")
    slow = p95 is not None and p95 > RETIRE_P95_MS
    rare = rate is not None and rate < RETIRE_MIN_INJECTION
    verdict = ("unknown (no calls in the window)" if p95 is None and rate is None else
               "consider switching recall off" if slow or rare else "keep recall on")
    return {"rule": f"p95 > {RETIRE_P95_MS:.0f} ms or injection < {RETIRE_MIN_INJECTION:.0%}",
            "p95_ms": p95, "injection_rate": rate, "p95_over": slow, "injection_under": rare, "verdict": verdict}


def calibrate_index(db: str | Path, *, log_path: str | Path | None, since_s: float | None,
                    gold_paths=(), call_labels=(), gate_path: str | Path | None = None,
                    target_probe_rate: float = 0.10):
    """The whole calibration of one index: read the log window (`log_path` None: labels alone), label
    calls, search the labelled gold sets, calibrate against the gate in force. Returns
    (calibration, calls, labelled rows, gate choice); the `calibrate` verb and the daemon's weekly job
    both call this."""
    from search_core.config import SearchConfig
    from search_core.search.pipeline import Searcher

    from tuner.data.gold import load_gold

    searcher = Searcher(db)
    try:
        choice = searcher.use_gate(gate_path)
        cfg = SearchConfig(embedder=searcher.embedder_name)
        calls = [] if log_path is None else read_log(log_path, since_s)
        if call_labels:
            calls = apply_label_file(calls, list(call_labels))
        labelled = []
        for p in gold_paths:
            labelled += gold_rows(searcher, load_gold(p), cfg)
        cal = calibrate(calls, labelled, model=choice.model, cos_threshold=searcher.embedder.default_threshold,
                        fingerprint=searcher.fingerprint, target_probe_rate=target_probe_rate,
                        log_read=log_path is not None)
        cal["current"]["reason"] = choice.reason or choice.source
        return cal, calls, labelled, choice
    finally:
        searcher.close()


def score_series(calls, labelled, choice) -> dict:
    """Scores by group for the report's histograms: the top cosine of answerable rows, probes and the
    unlabelled log, and P(answerable) over the unlabelled log when a gate model is in force."""
    cos = {"answerable": [r.features.get("hit_cos", 0.0) for r in labelled if r.answerable],
           "probes": [r.features.get("hit_cos", 0.0) for r in labelled if not r.answerable],
           "unlabelled log": [c.top_score for c in calls if c.top_score is not None and c.label is None]}
    series = {"top cosine": cos}
    p = probabilities(choice.model, [c.features for c in calls if c.label is None])
    if p is not None:
        series["P(answerable), log"] = {"unlabelled log": p.tolist()}
    return series


WEEK_S = 7 * 86400


def daemon_job(cfg) -> dict:
    """The daemon's weekly `calibrate` job: the last 7 days of the recall log (runs/recall-log.sqlite)
    plus the sweep's gold and holdout sets as labels, against the active index. It writes the report
    and a proposal; applying it stays a person's decision (`autoresearch calibrate apply`)."""
    from search_core.paths import recall_log_file
    from tuner.reports.calibration import calibration_report
    from tuner.promotion.promote import read_active
    from tuner.reports import emit

    runs = Path(cfg.runs)
    active = read_active(runs)
    db = Path(active.index) if active and active.index else Path(cfg.sweep["db"])
    log_path = recall_log_file(runs)
    golds = [p for p in (cfg.sweep.get("gold"), cfg.sweep.get("holdout")) if p]
    cal, calls, labelled, _ = calibrate_index(db, log_path=log_path if log_path.exists() else None,
                                              since_s=WEEK_S, gold_paths=golds)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    proposal = None
    if cal["recommendation"].get("basis"):
        proposal = str(runs / "reports" / f"gate-proposal-{stamp}.json")
        Path(proposal).parent.mkdir(parents=True, exist_ok=True)
        write_proposal(cal, db, proposal)
    report = emit(calibration_report(cal, str(db), proposal), "md", runs / "reports" / f"calibrate-{stamp}.md")
    return {"db": str(db), "calls": len(calls), "labelled": len(labelled), "report": report, "proposal": proposal,
            "retire": cal["retirement"]}
