"""The gate calibration as a Report (tuner.reports), for `calibrate` and the daemon's weekly job."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuner.gate.verdicts import CALIBRATION_ADVICE, NOT_SCORED, calibration_verdict, label_next
from tuner.reports import Para, Report, Section, Table

if TYPE_CHECKING:
    from tuner.gate.records import Calibration, GateOnLabels, LabelSuggestions, Retirement, ThresholdMove, Traffic


def calibration_report(cal: Calibration, db: str, proposal_path: str | None, with_plots: bool = False,
                       series: dict | None = None) -> Report:
    """The calibration (tuner.gate.calibrate's result) as a Report: window, distributions, what the current
    gate did, the gate on the labelled rows, the recommendation and the retirement rule; `series` (see
    score_series) adds histograms, `with_plots` the risk-coverage plot."""
    verdict = calibration_verdict(cal, db, proposal_path)
    sections = [window_section(cal), distributions_section(cal), traffic_section(cal.traffic),
                gate_on_labels_section(cal.gate_on_labels), recommendation_section(cal, verdict)]
    if cal.suggestions is not None:
        sections.append(suggestions_section(cal.suggestions))
    sections.append(retirement_section(cal.retirement))
    if with_plots and cal.gate_on_labels is not None and cal.gate_on_labels.curves:
        sections.append(risk_coverage_section(cal.gate_on_labels))
    if with_plots and series:
        sections.append(histograms_section(series))
    if cal.warnings:
        sections.append(Section("Warnings", tuple(Para(x, "bad") for x in cal.warning_lines())))
    return Report("calibration", f"Gate calibration for {db}", verdict.message(), tuple(sections),
                  data=cal.to_json())


def window_section(cal: Calibration) -> Section:
    """The calls the calibration read, their latency, and how many the gate in force let through."""
    w, tr = cal.window, cal.traffic
    return Section("Window", (Table(("calls", "sessions", "latency p50 ms", "latency p95 ms", "injected",
                                     "injection rate"),
                                    ((w.calls, w.sessions, w.p50_ms, w.p95_ms,
                                      tr.injected, tr.injection_rate),)),
                              Para(f"current gate: {cal.current.text()}")))


def distributions_section(cal: Calibration) -> Section:
    """Quantiles of each score, per group (answerable, probes, unlabelled calls)."""
    return Section("Distributions", tuple(
        Table(("group", "n", "p5", "p25", "p50", "p75", "p95"),
              tuple((g, q.n, q.p5, q.p25, q.p50, q.p75, q.p95) for g, q in groups.groups()), caption=scale)
        for scale, groups in cal.distributions.scales()))


def traffic_section(tr: Traffic) -> Section:
    """What the gate in force did to the window's calls: what stopped them, and how many flip at +-0.02."""
    fl = tr.flips
    return Section("What the current gate did", (
        Para("stopped calls: " + (", ".join(f"{k} {v}" for k, v in tr.stopped.items()) or "none")),
        Table(("id", "query", "top score", "stopped by"),
              tuple((e.id, e.query or "(hashed)", e.top_score, e.stopped_by) for e in tr.stopped_examples),
              caption="the last 10 stopped calls"),
        Para(f"decisions that flip if the {fl.scale} threshold moves by {fl.delta}: "
             f"-{fl.delta} lets {fl.let_through} more through, +{fl.delta} stops {fl.stopped} more"
             if fl else "no calls: no flips to count")))


def recommendation_section(cal: Calibration, verdict) -> Section:
    """The verdict (message and fix), the threshold move the labels support with its interval, and each gate's
    threshold and accuracy."""
    rec = cal.recommendation
    rows = []
    if rec.cosine is not None:
        c = rec.cosine
        rows.append(("cosine", c.threshold, c.balanced_accuracy, c.auroc, c.note))
    if rec.model_summary is not None:
        ms = rec.model_summary
        rows.append(("model", ms.p_threshold, ms.cv_balanced_accuracy, None, "cross-validated, by source"))
    mv = rec.threshold_move
    return Section("Recommendation", (Para(verdict.message(), "good" if rows else "note"),
                                      *(threshold_move_blocks(mv) if mv else ()),
                                      Table(("gate", "threshold", "balanced accuracy", "AUROC", "how"), tuple(rows)),
                                      Para(verdict.fix())))


def threshold_move_blocks(mv: ThresholdMove) -> tuple:
    """The threshold the labels give against the one in force, its bootstrap interval, and the cross-validation."""
    cv = mv.cross_validation
    lo_f, hi_f = mv.flips_at_interval
    return (Table(("threshold", "P", "balanced accuracy on the labels", "decisions that flip"),
                  (("now", mv.from_, mv.accuracy_from, 0),
                   ("from the labels" if mv.kept else "proposed", mv.to, mv.accuracy_to, mv.flips.total),
                   (f"interval low ({mv.level:.0%})", mv.interval[0], None, lo_f.total),
                   (f"interval high ({mv.level:.0%})", mv.interval[1], None, hi_f.total)),
                  caption=f"the threshold from the labels ({mv.method}); the interval is a bootstrap "
                          "over the labels"),
            Para(f"cross-validated on {cv.folds} folds of the labels: moved threshold "
                 f"{cv.threshold_only}, refit of the weights {cv.refit}" if cv
                 else f"no refit of the weights tried: it needs {mv.refit_needs}"))


def suggestions_section(sg: LabelSuggestions) -> Section:
    """The unlabelled calls whose labels would move the threshold most, and how to label them."""
    advice = label_next(sg)
    return Section("Calls to label next", (
        Para(f"{advice.message()}: {advice.fix()}"),
        Table(("id", "P", "top note", "query", "why"),
              tuple((x.id, None if x.probability is None else round(x.probability, 4), x.top_note, x.query, x.reason)
                    for x in sg.picks))))


def retirement_section(ret: Retirement) -> Section:
    """The rule to switch recall off, applied to this window."""
    return Section("Retirement rule", (Para(f"{ret.rule}: p95 {ret.p95_ms} ms, injection "
                                            f"{ret.injection_rate} -> {ret.verdict}", "bad" if ret.consider_off else ""),))


def risk_coverage_section(g: GateOnLabels) -> Section:
    """Risk against coverage of each gate on the labelled rows, drawn."""
    from tuner.reports import Plot
    from tuner.reports.plots import line_plot
    curves = g.curves
    return Section("Risk-coverage", (Plot(
        "risk-coverage on the labelled rows",
        line_plot({k: [tuple(p) for p in v] for k, v in curves.items()},
                  xlabel="coverage (share of rows injected, most confident first)",
                  ylabel="risk (share of probes injected)"),
        alt=f"risk-coverage over {g.rows} labelled rows ({g.probes} probes): " + "; ".join(
            f"{k} risk {v[3][1]} at coverage 0.2, {v[-1][1]} at 1.0" for k, v in curves.items())),))


def histograms_section(series: dict) -> Section:
    """Each score's histogram by group (score_series)."""
    from tuner.reports import Plot
    from tuner.reports.plots import histograms
    return Section("Score histograms", tuple(
        Plot(f"{name} by group", histograms(s, xlabel=name),
             alt=f"{name}: " + "; ".join(f"{g} n={len(v)}" for g, v in s.items()))
        for name, s in series.items()))


def gate_on_labels_section(g: GateOnLabels | None) -> Section:
    """The gate in force scored on the labelled rows, beside the cosine gate on the same rows."""
    title = "The gate in force on the labelled rows"
    if g is None:
        advice = CALIBRATION_ADVICE(NOT_SCORED)
        return Section(title, (Para(f"{advice.message()}: {advice.fix()}"),))
    cards = [("gate model (P(answerable))", g.model)] if g.model is not None else []
    cards.append(("cosine gate (top cosine)", g.cosine))
    by_source = g.by_source or {}
    one_kind = [f"{src} ({one.rows} rows): {one.note}" for src, one in by_source.items() if one.note is not None]
    for src, one in by_source.items():     # each labelled set on its own
        if one.note is not None:
            continue
        tag = f"{src}, {one.rows} rows"
        if one.model is not None:
            cards.append((f"gate model on {tag}" + (" (in-sample)" if one.in_sample else ""), one.model))
        cards.append((f"cosine gate on {tag}", one.cosine))
    pts = list(cards[0][1].risk_coverage)
    table = Table(("gate", "threshold", "AUROC", "balanced accuracy", "answerable injected", "probes injected",
                   *[f"risk at {p}" for p in pts]),
                  tuple((name, c.threshold, c.auroc, c.balanced_accuracy, c.answerable_injected,
                         c.probes_injected, *[c.risk_coverage[p] for p in pts]) for name, c in cards),
                  caption=f"{g.rows} rows ({g.answerable} answerable, {g.probes} probes) from "
                          f"{', '.join(g.sources)}; risk = share of probes among the injected when only the most "
                          "confident share of rows (the coverage) is injected")
    seen = g.in_sample or ()
    note = (Para(f"in-sample: the gate in force was fitted on {', '.join(seen)}; these numbers flatter it", "bad")
            if seen else Para("none of these sets is among those the gate in force was fitted on"
                              if g.model is not None else "no gate model in force: the cosine gate decides"))
    return Section(title, (table, note, *(Para(x) for x in one_kind)))
