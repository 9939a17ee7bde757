"""Recalibrate the gate from a window of the recall log and from labelled sets, and apply the result.

The log is read by the recall log's one reader (search_core.recall.log.read_logged_calls -> LoggedCall
rows of the table `recall_calls`, one per recall call). A label is `relevant` (the vault
could answer: counted as answerable) or `irrelevant` (counted as a probe). Any other store can feed
calibrate() by producing LogCall rows.

calibrate() is pure: rows in, a Calibration out. The CLI writes it as a report (md, html, json) and as a
proposal file (tuner.gate.proposal: write, apply, undo).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from search_core import SearchCoreError, StopRequested
from search_core.percentiles import percentile
from search_core.gate.features import GATE_FEATURES
from search_core.gate.model import GateFitError, GateModel, best_balanced_threshold
from search_core.gate.threshold import threshold_from_labels
from tuner.gate.fit import fit_gate
# our users' rule to retire recall (p95 over 400 ms, or fewer than 20 % of calls injected): one definition,
# shared with `recall-log stats`
from search_core.recall.log import RETIRE_MIN_INJECTION, RETIRE_P95_MS, LoggedCall, feature_matrix, read_logged_calls

from search_core.recall.suggest import twin_labels

from tuner.gate.metrics import auroc, gate_scorecard, risk_coverage_curve
from tuner.gate.records import (MIN_LABELLED, Calibration, CosineThreshold, CrossValidation, CurrentGate,
                                Distributions, Flipped, Flips, GateOnLabels, KeptApart, LabelSuggestions, Labelled,
                                LabelsToDecide, MissingLabels, ModelSummary, Quantiles, Recommendation, Retirement,
                                ScoreGroups, SignTest, SkippedLabels, SourceScore, StoppedCall, ThresholdMove, Traffic,
                                Window)
from tuner.gate.proposal import write_proposal
from tuner.gate.threshold import THRESHOLD_RULE, THRESHOLD_RULES, decide_threshold, labels_to_decide_for  # noqa: F401
# every warning below is a value of this table (its wording and fix live there, not here)
from tuner.gate.verdicts import (CALIBRATION_WARNINGS as warning, CONFIG_OVERRIDES, EMPTY_WINDOW, FEW_LABELS,
                                 IN_SAMPLE, MISSING_WHAT, MOVE_UNDECIDED, NO_GATE_MODEL, NO_LABELS, NO_REFIT, ONE_KIND,
                                 OTHER_INDEX, SKIPPED_LABELS)
from tuner.gate.verdicts import (BEST_COSINE, CONSIDER_OFF, KEEP_RECALL, LABELS_FIT, MOVE_NOT_SHOWN, NO_CALLS,
                                 NOTHING_LABELLED, ONE_KIND_LABELLED, RECOMMENDATION_BASIS as basis,
                                 RECOMMENDATION_DECLINED as declined, REFIT_WEIGHTS, RETIREMENT_VERDICT,
                                 THRESHOLD_MOVED)

LABEL_ANSWERABLE, LABEL_PROBE = "relevant", "irrelevant"
FLIP_DELTA = 0.02
# the regression's L2 strength (sklearn's C) for every gate the tuner fits: the shipped default's. Fitted on a
# small tuning set (demo-tune, demo-gate-tune, johngrib-tune, half of AutoRAG-ko: 36-60 rows) and scored on the
# spent holdouts, the 23 scale-free features at C = 0.1 gave 0.801 mean balanced accuracy, the older 16 at C = 1
# 0.778 and at C = 0.1 0.792 (benchmarks/bench_gate_labels.py features; BENCHMARKS.md, the gate). That was
# measured before the four cross-script features joined the table; re-measured with them (the 27, as every fitted
# gate reads GATE_FEATURES) at C = 0.1: 0.780, and 0.786 at C = 0.3, 0.792 at C = 1: within the 2-3 questions per
# scored set that separate all of these.
CALIBRATION_C = 0.1
# Fifth round (BENCHMARKS.md, gate): a grid for fit_gate to choose C from by its own grouped out-of-fold
# balanced accuracy, on the fitting rows only. Measured (bench_gate.py `--also NAME|cv`), NOT used by any gate
# the product fits: on the shipped default's pool it picks C = 10, whose gate skips an obvious answer in a
# five-note vault (P 0.10; C = 1: 0.99).
CALIBRATION_C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)
MIN_PER_CLASS = MIN_LABELLED // 2   # with one kind of label missing: how many of it to ask for at least
# With a gate model in force, labels move only its threshold (tuner.gate.threshold) until
# there are enough of them for a refit of the weights to be measured: at least this many rows, this many of
# each kind, and then only if the refit's cross-validated balanced accuracy beats the moved threshold's by
# REFIT_MARGIN on the same folds. A few dozen labels (what a person gives in a sitting) stay below it.
REFIT_MIN_LABELS = 80
REFIT_MIN_PER_CLASS = 20
REFIT_MARGIN = 0.02
REFIT_FOLDS = 5
INTERVAL_LEVEL = 0.90


LogCall = LoggedCall      # a row of the recall log as calibrate reads it (search_core.recall.log)


@dataclass(frozen=True)
class LabelledRow:
    source: str            # "log" or the gold set's name
    id: str
    query: str
    features: dict[str, float]     # GATE_FEATURES name -> value
    answerable: bool


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
    return [c if c.id not in labels else dataclasses.replace(c, label=labels[c.id]) for c in calls]


PROGRESS_EVERY = 20       # questions between the calibration's progress lines


def gold_rows(searcher, gold, cfg, *, stop=None, progress=None) -> list[LabelledRow]:
    """Run a labelled set's questions through the search (features as the live gate sees them). `stop()`,
    asked before each question, ends the run with StopRequested (the daemon's weekly job: one search is the
    most a stop waits for); progress(line) after the first question and every PROGRESS_EVERY after it."""
    rows = []
    for i, q in enumerate(gold.questions):
        if stop is not None and stop():
            raise StopRequested(f"calibration stopped after {i} of {len(gold.questions)} questions of {gold.name}")
        if progress is not None and (i == 1 or (i and i % PROGRESS_EVERY == 0)):
            progress(f"calibrate: searched {i} of {len(gold.questions)} questions of {gold.name}")
        res = searcher.rank(searcher.retrieve(q.query, cfg.depth, keyword_index=cfg.keyword_index,
                                              pair_terms=cfg.pair_terms), cfg, snippets=False)
        rows.append(LabelledRow(gold.name, q.id, q.query, res.gate.features, not q.is_probe))
    return rows


def _quantiles(values) -> Quantiles:
    v = np.asarray([x for x in values if x is not None], dtype=np.float64)
    if not len(v):
        return Quantiles(0)
    return Quantiles(int(len(v)), *(round(percentile(v, k), 4) for k in (5, 25, 50, 75, 95)))


def probabilities(model: GateModel | None, feature_dicts: list[dict]) -> np.ndarray | None:
    """P(answerable) for many rows at once (the same arithmetic as GateModel.probability)."""
    if model is None or not feature_dicts:
        return None
    X = feature_matrix(feature_dicts, model.features)
    z = ((X - np.asarray(model.mean)) / np.asarray(model.scale)) @ np.asarray(model.coef) + model.intercept
    return 1.0 / (1.0 + np.exp(-(model.calib_a * z + model.calib_b)))


def _auroc(scores, labels) -> float | None:
    a = auroc(scores, labels)
    return None if np.isnan(a) else round(a, 4)


def calibrate(calls: list[LogCall], labelled: list[LabelledRow], *, model: GateModel | None, cos_threshold: float,
              fingerprint: dict, features=GATE_FEATURES,
              log_read: bool = True, fingerprint_key: str | None = None, p_threshold: float | None = None,
              threshold_rule: str = THRESHOLD_RULE) -> Calibration:
    """Everything the report and the proposal need. Log rows written against another index
    than `fingerprint_key` (their features came from another vault or model) are kept apart, with a warning;
    `p_threshold` is the model's threshold in force when a config overrides the model's own."""
    calls, apart = _same_index(calls, fingerprint_key)
    # a label on a call that never searched (timed out, failed, stopped before the search) has no gate features
    # to be evidence about: the call stays in the traffic, its label is left out
    unsearched = [c for c in calls if c.label in (LABEL_ANSWERABLE, LABEL_PROBE) and not c.searched]
    if unsearched:
        calls = [dataclasses.replace(c, label=None) if c.label and not c.searched else c for c in calls]
    if p_threshold is not None and model is not None:
        model = dataclasses.replace(model, threshold=float(p_threshold))
    labelled = list(labelled) + [LabelledRow("log", str(c.id), c.query or "", c.features, c.label == LABEL_ANSWERABLE)
                                 for c in calls if c.label in (LABEL_ANSWERABLE, LABEL_PROBE)]
    unlabelled = [c for c in calls if c.label not in (LABEL_ANSWERABLE, LABEL_PROBE)]
    lab_cos = [r.features.get("hit_cos", r.features.get("top_cos")) for r in labelled]
    ans = [r.answerable for r in labelled]
    p_log = probabilities(model, [c.features for c in calls])
    p_lab = probabilities(model, [r.features for r in labelled])
    out: dict = {"window": _window(calls),
                 "labelled": Labelled(sum(ans), len(ans) - sum(ans), tuple(sorted({r.source for r in labelled}))),
                 "current": CurrentGate("model" if model else "cosine", cos_threshold,
                                        model.threshold if model else None, model.provenance() if model else None),
                 "warnings": []}
    if unsearched:
        out["skipped_labels"] = SkippedLabels(len(unsearched), tuple(c.id for c in unsearched[:20]))
        out["warnings"].append(warning(SKIPPED_LABELS, count=len(unsearched),
                                       ids=", ".join(str(c.id) for c in unsearched[:10])))
    if apart:
        keys = sorted({c.index_fingerprint for c in apart})
        out["kept_apart"] = KeptApart(len(apart), sum(c.label in (LABEL_ANSWERABLE, LABEL_PROBE) for c in apart),
                                      tuple(keys))
        out["warnings"].append(warning(OTHER_INDEX, count=len(apart), labelled=out["kept_apart"].labelled,
                                       others=", ".join(k[:12] for k in keys[:3]), this=(fingerprint_key or "")[:12]))
    cosine = ScoreGroups(_quantiles(s for s, a in zip(lab_cos, ans) if a),
                         _quantiles(s for s, a in zip(lab_cos, ans) if not a),
                         _quantiles(c.top_score for c in unlabelled))
    probability = None
    if p_log is not None or p_lab is not None:      # a gate model in force: its P, also with labels alone
        lab_p = p_lab if p_lab is not None else np.zeros(0)
        ul = np.array([c.label not in (LABEL_ANSWERABLE, LABEL_PROBE) for c in calls], dtype=bool)
        probability = ScoreGroups(_quantiles(lab_p[np.asarray(ans, dtype=bool)] if len(lab_p) else []),
                                  _quantiles(lab_p[~np.asarray(ans, dtype=bool)] if len(lab_p) else []),
                                  _quantiles(p_log[ul] if p_log is not None else []))
    out["distributions"] = Distributions(cosine, probability)
    out["traffic"] = _traffic(calls, p_log, model, cos_threshold)
    out["gate_on_labels"] = _gate_on_labels(labelled, lab_cos, ans, p_lab, model, cos_threshold, out)
    out["recommendation"] = _recommend(labelled, lab_cos, ans, fingerprint, features, out,
                                       model=model, p_lab=p_lab, calls=calls, p_calls=p_log, rule=threshold_rule)
    out["retirement"] = _retirement(out["window"], out["traffic"])
    if not calls and log_read:
        out["warnings"].append(warning(EMPTY_WINDOW))
    return Calibration(**{**out, "warnings": tuple(out["warnings"])})


def _same_index(calls, fingerprint_key):
    """(calls logged against this index, or with no fingerprint recorded; calls logged against another)."""
    if not fingerprint_key:
        return list(calls), []
    mine = [c for c in calls if not c.index_fingerprint or c.index_fingerprint == fingerprint_key]
    return mine, [c for c in calls if c.index_fingerprint and c.index_fingerprint != fingerprint_key]


def fitted_sources(model: GateModel | None) -> set[str]:
    """The labelled sets (gold set names, "log") a gate model was fitted on, as its fitted_on records them."""
    if model is None:
        return set()
    fo = model.fitted_on or {}
    names = set(fo.get("sources") or ()) | set(fo.get("gold_sets") or ()) | set((fo.get("sets") or {}).keys())
    return {str(n) for n in names}


def _gate_on_labels(labelled, lab_cos, ans, p_lab, model, cos_threshold, out) -> GateOnLabels | None:
    """The gate in force scored on the labelled rows (a query-performance-prediction report): AUROC, balanced accuracy at its
    threshold, what it injects, risk-coverage, and the cosine gate at its threshold on the same rows. Rows
    from a set the gate was fitted on are in-sample: said, never hidden."""
    n_ans = sum(ans)
    if not labelled or not n_ans or n_ans == len(ans):
        return None
    y = [int(a) for a in ans]
    cos = [c if c is not None else -1.0 for c in lab_cos]
    sources = tuple(sorted({r.source for r in labelled}))
    curves = {"cosine gate": risk_coverage_curve(cos, y)}
    scored, seen = None, None
    if model is not None and p_lab is not None:
        scored = gate_scorecard(p_lab, y, model.threshold)
        curves = {"gate model": risk_coverage_curve(p_lab, y), **curves}
        seen = tuple(sorted(fitted_sources(model) & set(sources)))
        if seen:
            out["warnings"].append(warning(IN_SAMPLE, sets=", ".join(seen)))
    by_source = None
    if len(sources) > 1:          # e.g. the daemon's tuning set (in-sample) beside its holdout (not)
        by_source = {}
        for src in sources:
            idx = [i for i, r in enumerate(labelled) if r.source == src]
            ys = [y[i] for i in idx]
            if not 0 < sum(ys) < len(ys):
                by_source[src] = SourceScore(len(ys), len(ys) - sum(ys),
                                             note="one kind of row only: scored in the pooled rows above")
            else:
                by_source[src] = SourceScore(
                    len(ys), len(ys) - sum(ys), gate_scorecard([cos[i] for i in idx], ys, cos_threshold),
                    gate_scorecard(p_lab[idx], ys, model.threshold) if scored is not None else None,
                    src in seen if scored is not None else None)
    return GateOnLabels(len(y), n_ans, len(y) - n_ans, sources, gate_scorecard(cos, y, cos_threshold), curves,
                        scored, seen, by_source)


def _window(calls: list[LogCall]) -> Window:
    lat = [c.latency_ms for c in calls if c.latency_ms is not None]
    return Window(len(calls), len({c.session for c in calls}), min((c.ts for c in calls), default=None),
                  max((c.ts for c in calls), default=None), round(percentile(lat, 50), 2) if lat else None,
                  round(percentile(lat, 95), 2) if lat else None)


def _traffic(calls, p_log, model, cos_threshold) -> Traffic:
    """What the current gate did to the window's calls, and how many decisions flip at +/- 0.02."""
    if not calls:
        return Traffic(0, None, {}, (), None)
    injected = sum(c.injected for c in calls)
    stopped: dict[str, int] = {}
    for c in calls:
        if not c.injected:
            stopped[c.stopped_by or "gate"] = stopped.get(c.stopped_by or "gate", 0) + 1
    examples = tuple(StoppedCall(c.id, c.query, c.top_score, c.stopped_by) for c in calls if not c.injected)[-10:]
    if p_log is not None:
        scores, t, scale = p_log, model.threshold, "probability"
    else:
        scores = np.array([c.top_score if c.top_score is not None else -1.0 for c in calls])
        t, scale = cos_threshold, "cosine"
    now_in = scores >= t
    flips = Flips(scale, round(float(t), 4), FLIP_DELTA, int((scores >= t - FLIP_DELTA).sum() - now_in.sum()),
                  int(now_in.sum() - (scores >= t + FLIP_DELTA).sum()))
    return Traffic(injected, round(injected / len(calls), 4), stopped, examples, flips)


def _recommend(labelled, lab_cos, ans, fingerprint, features, out, *, model=None, p_lab=None,
               calls=(), p_calls=None, rule=None) -> Recommendation:
    n_ans, n_probe = sum(ans), len(ans) - sum(ans)
    rec: dict = {"basis": None}          # Recommendation's fields, as this function and _move_threshold set them
    if n_ans and n_probe:
        cos_rows = [(x, a) for x, a in zip(lab_cos, ans) if x is not None and math.isfinite(x)]
        cos_ans = sum(a for _, a in cos_rows)
        if 0 < cos_ans < len(cos_rows):
            t, bacc = best_balanced_threshold([x for x, _ in cos_rows], [int(a) for _, a in cos_rows])
            rec["cosine"] = CosineThreshold(round(t, 4), round(bacc, 4),
                                            _auroc([x for x, _ in cos_rows], [a for _, a in cos_rows]))
            rec["basis"] = basis(BEST_COSINE)
        if len(ans) < MIN_LABELLED:
            out["warnings"].append(warning(FEW_LABELS, rows=len(ans), need=MIN_LABELLED))
        elif model is not None and p_lab is not None:
            _move_threshold(rec, labelled, ans, fingerprint, features, out, model, p_lab, calls, rule or THRESHOLD_RULE,
                            p_calls)
        else:
            try:
                m = _refit(labelled, ans, fingerprint, features)
                rec["model"] = m.as_json()
                rec["model_summary"] = ModelSummary("refit", round(m.threshold, 4),
                                                    m.fitted_on.get("cv_balanced_accuracy"), tuple(m.features))
            except GateFitError as e:
                out["warnings"].append(warning(NO_GATE_MODEL, error=e))
    elif not n_ans and not n_probe:
        rec["missing"] = MissingLabels("both", 0, MIN_PER_CLASS, 0, 0)
        rec["declined"] = declined(NOTHING_LABELLED)
        out["warnings"].append(warning(NO_LABELS, need=MIN_PER_CLASS))
    else:
        missing, have = ("relevant", n_probe) if n_probe else ("irrelevant", n_ans)
        need = max(MIN_PER_CLASS, MIN_LABELLED - have)
        rec["missing"] = MissingLabels(missing, 0, need, n_ans, n_probe)
        rec["declined"] = declined(ONE_KIND_LABELLED, missing=missing, relevant=n_ans, irrelevant=n_probe,
                                   need=need)
        out["warnings"].append(warning(ONE_KIND, missing=missing, relevant=n_ans, irrelevant=n_probe, need=need,
                                       what=MISSING_WHAT[missing]))
    return Recommendation(**rec)


def _refit(labelled, ans, fingerprint, features) -> GateModel:
    n_ans = sum(ans)
    groups = [r.source for r in labelled] if len({r.source for r in labelled}) >= 5 else None
    return fit_gate([r.features for r in labelled], [int(a) for a in ans], fingerprint=fingerprint,
                    features=list(features), scope="index", groups=groups, C=CALIBRATION_C,
                    fitted_on={"labelled": {"answerable": n_ans, "probes": len(ans) - n_ans},
                               "sources": sorted({r.source for r in labelled})})


def _balanced_accuracy(p, y, t) -> float:
    y = np.asarray(y, dtype=bool)
    inj = np.asarray(p) >= t
    return float((inj[y].mean() + (~inj[~y]).mean()) / 2)


def _cross_validate(labelled, ans, p_lab, fingerprint, features) -> CrossValidation:
    """The moved threshold against a refit of the weights, on the same stratified folds of the labels:
    each fitted on the other folds, scored (balanced accuracy) on the held-out one."""
    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(ans, dtype=int)
    shift, refit = [], []
    for tr, te in StratifiedKFold(REFIT_FOLDS, shuffle=True, random_state=0).split(np.zeros(len(y)), y):
        t = threshold_from_labels(p_lab[tr], y[tr], resamples=100)[0]
        shift.append(_balanced_accuracy(p_lab[te], y[te], t))
        try:
            m = _refit([labelled[i] for i in tr], [bool(y[i]) for i in tr], fingerprint, features)
            refit.append(_balanced_accuracy(probabilities(m, [labelled[i].features for i in te]), y[te], m.threshold))
        except GateFitError:
            refit.append(0.0)
    return CrossValidation(REFIT_FOLDS, round(float(np.mean(shift)), 4), round(float(np.mean(refit)), 4))


def _flips(p_calls: np.ndarray, t_from: float, t_to: float) -> Flipped:
    before, after = p_calls >= t_from, p_calls >= t_to
    return Flipped(int((after & ~before).sum()), int((before & ~after).sum()), int(len(p_calls)))


def _labels_to_decide(dec, p_rest) -> LabelsToDecide:
    """How many more labels would let the rule decide the move the labels point to (the weekly report says it
    beside a declined move), by the rule's own count (tuner.gate.threshold.labels_to_decide_for)."""
    lo, hi = min(dec.current, dec.proposed), max(dec.current, dec.proposed)
    u = np.asarray(p_rest if p_rest is not None else [], dtype=np.float64)
    n_u = int(((u >= lo) & (u < hi)).sum())
    d = labels_to_decide_for(dec, n_u)
    text = d.text
    if d.more and d.more > n_u:     # a week of 60-75 calls holds 4-11 between two cuts 0.1 apart
        text += (f"; this window holds {n_u} unlabelled call{'' if n_u == 1 else 's'} between them, so the rest must "
                 "come from more traffic (a longer --since, or next week's calls)")
    return LabelsToDecide(d.more, None if d.win_share is None else round(d.win_share, 4), dec.wins, dec.losses, n_u,
                          text, d.of_kind)


def _move_threshold(rec, labelled, ans, fingerprint, features, out, model, p_lab, calls, rule, p_all=None) -> None:
    """With a gate model in force: move its threshold to where the labels put it (the feature weights stay),
    unless there are enough labels and a refit of the weights measures better on held-out folds. `p_all`: the
    model's P of every call in `calls`, when the caller has it (each subset below is a slice of it, not another
    pass over a week of features)."""
    y = [int(a) for a in ans]
    if p_all is None:
        p_all = probabilities(model, [c.features for c in calls])
    p_all = np.zeros(0) if p_all is None else np.asarray(p_all)
    searched = [i for i, c in enumerate(calls) if c.searched]
    p_calls = p_all[searched]
    # an unlabelled call that asks a labelled question again (a near-duplicate query, which `suggest` never
    # offers) is that question: it counts with its label among the decisions a move flips, and as nobody's
    # evidence only when no label covers it
    unl = [i for i in searched if calls[i].label not in (LABEL_ANSWERABLE, LABEL_PROBE)]
    twin = twin_labels([(r.query, a) for r, a in zip(labelled, ans)], [calls[i].query for i in unl])
    rep = [(i, t) for i, t in zip(unl, twin) if t is not None]
    rest = [i for i, t in zip(unl, twin) if t is None]
    p_rep = p_all[[i for i, _ in rep]] if rep else None
    p_rest = p_all[rest] if rest else None
    dec = decide_threshold(p_lab, y, model.threshold, rule=rule, level=INTERVAL_LEVEL,
                           traffic=p_calls if len(p_calls) else None,
                           unlabelled=p_rest if p_rest is not None else (),
                           repeats=(p_rep, [int(t) for _, t in rep]) if rep else None)
    t_new, (lo, hi) = dec.proposed, dec.interval
    enough = len(y) >= REFIT_MIN_LABELS and min(sum(y), len(y) - sum(y)) >= REFIT_MIN_PER_CLASS
    cv = _cross_validate(labelled, ans, p_lab, fingerprint, features) if enough else None
    move = ThresholdMove(
        round(model.threshold, 4), round(t_new, 4), (round(lo, 4), round(hi, 4)), INTERVAL_LEVEL, sum(y),
        len(y) - sum(y), round(_balanced_accuracy(p_lab, y, model.threshold), 4),
        round(_balanced_accuracy(p_lab, y, t_new), 4), _flips(p_calls, model.threshold, t_new),
        (_flips(p_calls, model.threshold, lo), _flips(p_calls, model.threshold, hi)),
        ("the cut past the band of labelled calls with the largest estimated gain; feature weights kept"
         if rule.startswith("scan-sign-test") else
         "the bagged best balanced-accuracy cut on the labels; feature weights kept"), rule,
        SignTest(dec.wins, dec.losses, round(dec.null_share, 4), round(dec.p_value, 4), dec.why, round(dec.alpha, 6)), cv,
        None if enough else (f"{REFIT_MIN_LABELS} labels with {REFIT_MIN_PER_CLASS} of each kind before a refit "
                             f"of the weights is tried (have {sum(y)} relevant, {len(y) - sum(y)} irrelevant)"),
        None if dec.move else _labels_to_decide(dec, p_rest))
    rec["threshold_move"] = move
    refit_better = cv and cv.refit > cv.threshold_only + REFIT_MARGIN
    if not dec.move and not refit_better:
        # the labels do not show the move decides better: a move on the noise of a few dozen labels is as likely
        # to make the gate worse as better (moving to the labels' cut whatever they say made 9 of 20 weeks worse on
        # johngrib; the scan held to alpha 0.20 moved in 3 of 100 synthetic weeks from the right cut; tuner.gate.threshold)
        rec["threshold_move"] = dataclasses.replace(move, kept=True,
                                                    flips=_flips(p_calls, model.threshold, model.threshold))
        rec["model_summary"] = ModelSummary("keep", round(model.threshold, 4), None, tuple(model.features))
        rec["basis"] = None
        if t_new == model.threshold:        # the labels point nowhere else: nothing undecided to warn of
            rec["declined"] = declined(LABELS_FIT, to=t_new)
            return
        rec["declined"] = declined(MOVE_NOT_SHOWN, to=t_new, why=dec.why, more=move.labels_to_decide.text)
        out["warnings"].append(warning(MOVE_UNDECIDED, to=t_new, level=INTERVAL_LEVEL, lo=lo, hi=hi, why=dec.why,
                                       from_=model.threshold, more=move.labels_to_decide.text))
        return
    if refit_better:
        try:
            m = _refit(labelled, ans, fingerprint, features)
            rec["model"] = m.as_json()
            rec["model_summary"] = ModelSummary("refit", round(m.threshold, 4), cv.refit, tuple(m.features))
            rec["basis"] = basis(REFIT_WEIGHTS, labels=len(y), refit=cv.refit, threshold_only=cv.threshold_only)
            return
        except GateFitError as e:
            out["warnings"].append(warning(NO_REFIT, error=e))
    last = max((c.ts for c in calls), default=None)
    moved_json = move.to_json()
    fo = {**(model.fitted_on or {}), "recalibrated": {**{k: moved_json[k] for k in ("from", "to", "interval", "labels")},
                                                      **({"at": _iso(last)} if last is not None else {})},
          "sources": sorted(fitted_sources(model) | {r.source for r in labelled})}
    moved = dataclasses.replace(model, threshold=float(t_new), fingerprint=dict(fingerprint), scope="index",
                                fitted_on=fo)
    rec["model"] = moved.as_json()
    rec["model_summary"] = ModelSummary("threshold", round(t_new, 4), cv.threshold_only if cv else None,
                                        tuple(model.features))
    rec["basis"] = basis(THRESHOLD_MOVED, labels=len(y), level=INTERVAL_LEVEL, lo=lo, hi=hi, why=dec.why)


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _retirement(window: Window, traffic: Traffic) -> Retirement:
    p95, rate = window.p95_ms, traffic.injection_rate
    slow = p95 is not None and p95 > RETIRE_P95_MS
    rare = rate is not None and rate < RETIRE_MIN_INJECTION
    kind = NO_CALLS if p95 is None and rate is None else CONSIDER_OFF if slow or rare else KEEP_RECALL
    return Retirement(f"p95 > {RETIRE_P95_MS:.0f} ms or injection < {RETIRE_MIN_INJECTION:.0%}", p95, rate, slow,
                      rare, RETIREMENT_VERDICT(kind), kind == CONSIDER_OFF)


def calibrate_index(db: str | Path, *, log_path: str | Path | None, since_s: float | None,
                    gold_paths=(), call_labels=(), gate_path: str | Path | None = None,
                    threshold_rule: str = THRESHOLD_RULE, stop=None, progress=None):
    """The whole calibration of one index: read the log window (`log_path` None: labels alone), label
    calls, search the labelled gold sets, calibrate against the gate in force. Returns
    (calibration, calls, labelled rows, gate choice); the `calibrate` verb and the daemon's weekly job
    both call this. stop, progress: as gold_rows takes them."""
    from search_core.config import SearchConfig, load_config
    from search_core.recall.config import active_config_path
    from search_core.recall.log import index_id
    from search_core.gate.request import GateRequest
    from search_core.search.pipeline import Searcher

    from tuner.data.gold import load_gold

    searcher = Searcher(db, gate=GateRequest(path=gate_path))
    try:
        choice = searcher.gate_for("none")
        cfg = SearchConfig(embedder=searcher.embedder_name)
        calls = [] if log_path is None else read_logged_calls(log_path, since_s)
        if call_labels:
            calls = apply_label_file(calls, list(call_labels))
        labelled = []
        for p in gold_paths:
            labelled += gold_rows(searcher, load_gold(p), cfg, stop=stop, progress=progress)
        active = load_config(active_config_path(None))
        cal = calibrate(calls, labelled, model=choice.model, cos_threshold=searcher.embedder.default_threshold,
                        fingerprint=searcher.fingerprint,
                        log_read=log_path is not None, fingerprint_key=index_id(searcher.fingerprint),
                        threshold_rule=threshold_rule)
        warnings = cal.warnings
        if active.gate_threshold is not None and choice.model is not None:
            warnings += (warning(CONFIG_OVERRIDES, threshold=active.gate_threshold),)
        cal = dataclasses.replace(cal, warnings=warnings, current=dataclasses.replace(
            cal.current, reason=choice.reason or choice.source, default_threshold=_default_threshold()))
        return cal, calls, labelled, choice
    finally:
        searcher.close()


def _default_threshold() -> float | None:
    """The shipped default gate's threshold, shown beside the vault's own (None when the file does not load)."""
    from search_core.gate.model import DEFAULT_GATE_FILE, GateFileError, load_gate
    try:
        return round(load_gate(DEFAULT_GATE_FILE).threshold, 4)
    except GateFileError:
        return None


def score_series(calls, labelled, choice) -> dict[str, dict[str, list[float]]]:
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
SUGGEST_N = 20            # calls the weekly report asks a person to label: a sitting's worth


@dataclass(frozen=True)
class CalibrationJob:
    """What the weekly `calibrate` job did, as the daemon's run table records it (`to_json`)."""
    db: str
    calls: int
    labelled: int
    report: str                 # the report's path
    proposal: str               # the proposal's path: the gate to install, or the record of a declined one
    retire: Retirement          # the retirement rule on the week (Calibration.retirement)
    suggested: int              # calls the report asks a person to label
    declined: str | None = None  # why the calibration proposed nothing (the proposal file's `declined`)

    def to_json(self) -> dict:
        return {"db": self.db, "calls": self.calls, "labelled": self.labelled, "report": self.report,
                "proposal": self.proposal, **({"declined": self.declined} if self.declined else {}),
                "retire": self.retire.to_json(), "suggested": self.suggested}


def daemon_job(cfg, *, stop=None, progress=None) -> CalibrationJob:
    """The daemon's weekly `calibrate` job: the last 7 days of the recall log (runs/recall-log.sqlite)
    plus the sweep's gold and holdout sets as labels, against the active index. It writes the report
    (with the calls to label next, as `recall-log suggest` picks them) and a proposal, or the record of a
    declined one with its reason (the daemon's run ends `declined`); applying it stays a person's decision
    (`autoresearch calibrate apply`). `stop()` is asked before each search and before
    anything is written: a stopped job writes no report and no proposal (StopRequested)."""
    from search_core.paths import recall_log_file
    from tuner.reports.calibration import calibration_report
    from tuner.promotion.promote import read_active
    from tuner.reports import emit

    runs = Path(cfg.runs)
    active = read_active(runs)
    db = Path(active.index) if active and active.index else Path(cfg.sweep.db)
    log_path = recall_log_file(runs)
    golds = [p for p in (cfg.sweep.gold, cfg.sweep.holdout) if p]
    cal, calls, labelled, _ = calibrate_index(db, log_path=log_path if log_path.exists() else None,
                                              since_s=WEEK_S, gold_paths=golds, stop=stop, progress=progress)
    if log_path.exists():                    # the calls to label next, for the week's report
        from search_core.recall.suggest import suggest_from_log
        picks, gate = suggest_from_log(log_path, since_s=WEEK_S, n=SUGGEST_N, db=db)
        cal = dataclasses.replace(cal, suggestions=LabelSuggestions(
            picks.picks, picks.pool, picks.labelled, picks.scale, round(picks.threshold, 4), gate.source,
            dict(picks.left_out)))
    if stop is not None and stop():
        raise StopRequested("calibration stopped before its report was written")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    proposal = str(runs / "reports" / f"gate-proposal-{stamp}.json")
    # written whether or not the calibration proposes a gate, as `calibrate` writes it: a declined week is a
    # record with its reason (`calibrate apply` of it says so), not an absence a person cannot tell from a
    # job that never ran
    written = write_proposal(cal, db, proposal)
    report = emit(calibration_report(cal, str(db), None if written.declined else proposal), "md",
                  runs / "reports" / f"calibrate-{stamp}.md")
    return CalibrationJob(str(db), len(calls), len(labelled), report, proposal, cal.retirement,
                          len(cal.suggestions.picks) if cal.suggestions is not None else 0, written.declined)
