"""CLI verbs for the gate: `calibrate` (report + proposal), `calibrate apply`, `calibrate undo`, `probes make`.
Thin: each verb calls tuner.calibrate / tuner.gate_proposal / tuner.probes, which the tests call directly."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from search_core import SearchCoreError
from tuner.extras import require_extra

from .cli import _fail, main
from .durations import DurationError, parse_duration
from .reports import Para, Report, Section, Table, emit

DEFAULT_LOG = Path("runs/recall-log.sqlite")


def parse_window(text: str) -> float | None:
    """`7d`, `24h`, `90m`, `2w`, `3600s` -> seconds; `all` -> None (the whole log)."""
    try:
        return parse_duration(text, allow_all=True)
    except DurationError as e:
        raise click.BadParameter(str(e), param_hint="--since") from None


def _labels_arg(path: Path):
    """A gold set (YAML, KorQuAD JSON, BEIR folder) or a call-label file (ID relevant|irrelevant lines)."""
    if path.is_dir() or path.suffix in (".yaml", ".yml", ".json"):
        return "gold", path
    return "calls", path


def calibration_report(cal: dict, db: str, proposal_path: str | None, with_plots: bool = False,
                       series: dict | None = None) -> Report:
    rec, tr, ret = cal["recommendation"], cal["traffic"], cal["retirement"]
    cur = cal["current"]
    cur_text = (f"gate model, P(answerable) >= {cur['p_threshold']:.3f}" if cur["kind"] == "model"
                else f"cosine gate, top cosine >= {cur['cos_threshold']:.3f}")
    if rec.get("model_summary"):
        ms = rec["model_summary"]
        verdict = (f"recommend a gate model fitted on {cal['labelled']['answerable']} answerable + "
                   f"{cal['labelled']['probes']} probes: P >= {ms['p_threshold']:.3f} "
                   f"(cross-validated balanced accuracy {ms['cv_balanced_accuracy']})")
    elif rec.get("cosine", {}).get("threshold") is not None:
        verdict = f"recommend cosine threshold {rec['cosine']['threshold']:.4f} ({rec['basis']})"
    else:
        verdict = "no recommendation: " + (cal["warnings"][-1] if cal["warnings"] else "no labels")
    w = cal["window"]
    sections = [Section("Window", (Table(("calls", "sessions", "latency p50 ms", "latency p95 ms", "injected",
                                          "injection rate"),
                                         ((w["calls"], w["sessions"], w["latency_ms"]["p50"], w["latency_ms"]["p95"],
                                           tr["injected"], tr["injection_rate"]),)),
                                   Para(f"current gate: {cur_text}"))),
                Section("Distributions", tuple(
                    Table(("group", "n", "p5", "p25", "p50", "p75", "p95"),
                          tuple((g, q.get("n"), q.get("p5"), q.get("p25"), q.get("p50"), q.get("p75"), q.get("p95"))
                                for g, q in groups.items()), caption=scale)
                    for scale, groups in cal["distributions"].items()))]
    stopped = tr["stopped"]
    fl = tr["flips"]
    sections.append(Section("What the current gate did", (
        Para("stopped calls: " + (", ".join(f"{k} {v}" for k, v in stopped.items()) or "none")),
        Table(("id", "query", "top score", "stopped by"),
              tuple((e["id"], e["query"] or "(hashed)", e["top_score"], e["stopped_by"]) for e in tr["stopped_examples"]),
              caption="the last 10 stopped calls"),
        Para(f"decisions that flip if the {fl.get('scale', '')} threshold moves by 0.02: "
             f"-0.02 lets {fl.get('-0.02', 0)} more through, +0.02 stops {fl.get('+0.02', 0)} more"
             if fl else "no calls: no flips to count"))))
    sections.append(_gate_on_labels_section(cal.get("gate_on_labels")))
    rows = []
    if rec.get("cosine"):
        c = rec["cosine"]
        rows.append(("cosine", c.get("threshold"), c.get("balanced_accuracy"), c.get("auroc"), c.get("note", "")))
    if rec.get("model_summary"):
        ms = rec["model_summary"]
        rows.append(("model", ms["p_threshold"], ms["cv_balanced_accuracy"], None, "cross-validated, by source"))
    sections.append(Section("Recommendation", (Para(verdict, "good" if rows else "note"),
                                               Table(("gate", "threshold", "balanced accuracy", "AUROC", "how"),
                                                     tuple(rows)),
                                               Para(f"proposal written to {proposal_path}; install it with "
                                                    f"`autoresearch calibrate apply --db {db}`" if proposal_path
                                                    else "no proposal written"))))
    sections.append(Section("Retirement rule", (Para(f"{ret['rule']}: p95 {ret['p95_ms']} ms, injection "
                                                     f"{ret['injection_rate']} -> {ret['verdict']}",
                                                     "bad" if ret["verdict"].startswith("consider") else ""),)))
    curves = (cal.get("gate_on_labels") or {}).get("curves")
    if with_plots and curves:
        from .reports import Plot
        from .reports.plots import line_plot
        g = cal["gate_on_labels"]
        sections.append(Section("Risk-coverage", (Plot(
            "risk-coverage on the labelled rows",
            line_plot({k: [tuple(p) for p in v] for k, v in curves.items()},
                      xlabel="coverage (share of rows injected, most confident first)",
                      ylabel="risk (share of probes injected)"),
            alt=f"risk-coverage over {g['rows']} labelled rows ({g['probes']} probes): " + "; ".join(
                f"{k} risk {v[3][1]} at coverage 0.2, {v[-1][1]} at 1.0" for k, v in curves.items())),)))
    if with_plots and series:
        from .reports import Plot
        from .reports.plots import histograms
        sections.append(Section("Score histograms", tuple(
            Plot(f"{name} by group", histograms(s, xlabel=name),
                 alt=f"{name}: " + "; ".join(f"{g} n={len(v)}" for g, v in s.items()))
            for name, s in series.items())))
    if cal["warnings"]:
        sections.append(Section("Warnings", tuple(Para(x, "bad") for x in cal["warnings"])))
    return Report("calibration", f"Gate calibration for {db}", verdict, tuple(sections), data=cal)


def _gate_on_labels_section(g: dict | None) -> Section:
    """The gate in force scored on the labelled rows, beside the cosine gate on the same rows."""
    title = "The gate in force on the labelled rows"
    if not g:
        return Section(title, (Para("needs labelled rows of both kinds (answerable and probes): pass --labels"),))
    cards = [("gate model (P(answerable))", g["model"])] if g.get("model") else []
    cards.append(("cosine gate (top cosine)", g["cosine"]))
    one_kind = [f"{src} ({one['rows']} rows): {one['note']}" for src, one in (g.get("by_source") or {}).items()
                if "note" in one]
    for src, one in (g.get("by_source") or {}).items():     # each labelled set on its own
        if "note" in one:
            continue
        tag = f"{src}, {one['rows']} rows"
        if one.get("model"):
            cards.append((f"gate model on {tag}" + (" (in-sample)" if one.get("in_sample") else ""), one["model"]))
        cards.append((f"cosine gate on {tag}", one["cosine"]))
    pts = list(cards[0][1]["risk_coverage"])
    table = Table(("gate", "threshold", "AUROC", "balanced accuracy", "answerable injected", "probes injected",
                   *[f"risk at {p}" for p in pts]),
                  tuple((name, c["threshold"], c["auroc"], c["balanced_accuracy"], c["answerable_injected"],
                         c["probes_injected"], *[c["risk_coverage"][p] for p in pts]) for name, c in cards),
                  caption=f"{g['rows']} rows ({g['answerable']} answerable, {g['probes']} probes) from "
                          f"{', '.join(g['sources'])}; risk = share of probes among the injected when only the most "
                          "confident share of rows (the coverage) is injected")
    seen = g.get("in_sample") or []
    note = (Para(f"in-sample: the gate in force was fitted on {', '.join(seen)}; these numbers flatter it", "bad")
            if seen else Para("none of these sets is among those the gate in force was fitted on"
                              if g.get("model") else "no gate model in force: the cosine gate decides"))
    return Section(title, (table, note, *(Para(x) for x in one_kind)))


@main.group(invoke_without_command=True)
@click.option("--db", type=click.Path(path_type=Path), help="The index the gate serves.")
@click.option("--log", "log_path", type=click.Path(path_type=Path), default=DEFAULT_LOG, show_default=True,
              help="The recall log (SQLite).")
@click.option("--since", default="7d", show_default=True, help="Log window: 7d, 24h, 90m, or `all`.")
@click.option("--labels", "labels", multiple=True, type=click.Path(path_type=Path),
              help="A gold set with probes (YAML/KorQuAD/BEIR), or a file of `CALL_ID relevant|irrelevant` lines.")
@click.option("--no-log", is_flag=True, help="Calibrate from --labels alone.")
@click.option("--gate", "gate_path", type=click.Path(path_type=Path), default=None, help="The gate in force.")
@click.option("--target-probe-rate", type=float, default=0.10, show_default=True,
              help="With probes but no answerable labels: the share of probes the threshold may inject.")
@click.option("--format", "fmt", type=click.Choice(["md", "html", "json"]), default="md", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Write the report here.")
@click.option("--proposal", type=click.Path(path_type=Path), default=None,
              help="Where the proposal goes (default <db>.gate-proposal.json).")
@click.pass_context
def calibrate(ctx, db, log_path, since, labels, no_log, gate_path, target_probe_rate, fmt, out, proposal):
    """Recalibrate the gate from the recall log window and labelled sets; writes a report and a proposal."""
    if ctx.invoked_subcommand is not None:
        return
    require_extra("tune")
    from search_core.recall_log import parse_label_file

    from .calibrate import calibrate_index, probabilities
    from .gate_proposal import write_proposal

    if db is None:
        _fail(SearchCoreError("calibrate needs --db (the index the gate serves)"))
    try:
        window = parse_window(since)
        parsed = [_labels_arg(p) for p in labels]
        gold_paths = [p for kind, p in parsed if kind == "gold"]
        call_labels = [pair for kind, p in parsed if kind == "calls" for pair in parse_label_file(p)]
        cal, calls, labelled, choice = calibrate_index(
            db, log_path=None if no_log else log_path, since_s=window, gold_paths=gold_paths,
            call_labels=call_labels, gate_path=gate_path, target_probe_rate=target_probe_rate)
        proposal = proposal or Path(str(db) + ".gate-proposal.json")
        wrote = None
        if cal["recommendation"].get("basis"):
            write_proposal(cal, db, proposal)
            wrote = str(proposal)
        series = None
        if fmt == "html":
            cos = {"answerable": [r.features.get("hit_cos", 0.0) for r in labelled if r.answerable],
                   "probes": [r.features.get("hit_cos", 0.0) for r in labelled if not r.answerable],
                   "unlabelled log": [c.top_score for c in calls if c.top_score is not None and c.label is None]}
            series = {"top cosine": cos}
            p = probabilities(choice.model, [c.features for c in calls if c.label is None])
            if p is not None:
                series["P(answerable), log"] = {"unlabelled log": p.tolist()}
        path = emit(calibration_report(cal, str(db), wrote, fmt == "html", series), fmt, out)
    except SearchCoreError as e:
        _fail(e)
    if path:
        click.echo(f"report written to {path}" + (f"; proposal {wrote}" if wrote else ""), err=True)


@calibrate.command("apply")
@click.option("--db", required=True, type=click.Path(path_type=Path))
@click.option("--proposal", type=click.Path(path_type=Path), default=None)
def calibrate_apply(db, proposal):
    """Install the proposal's gate as <db>.gate.json (recorded in <db>.gate-history.jsonl)."""
    from .gate_proposal import apply_proposal
    try:
        r = apply_proposal(proposal or Path(str(db) + ".gate-proposal.json"), db)
    except SearchCoreError as e:
        _fail(e)
    click.echo(f"installed {r['installed']}" + (" (the previous gate is in the history)" if r["replaced"] else "")
               + f"; undo with `autoresearch calibrate undo --db {db}`")


@calibrate.command("undo")
@click.option("--db", required=True, type=click.Path(path_type=Path))
def calibrate_undo(db):
    """Put back the gate file the last `calibrate apply` replaced."""
    from .gate_proposal import undo_apply
    try:
        r = undo_apply(db)
    except SearchCoreError as e:
        _fail(e)
    click.echo(f"restored the previous gate at {r['gate_file']}" if r["restored"]
               else f"removed {r['gate_file']}: the default gate is back")


@main.group()
def probes():
    """Make unanswerable questions you can trust: hold whole documents out of an index built for it."""


@probes.command("make")
@click.argument("vault", type=click.Path(path_type=Path))
@click.option("--gold", "gold_path", required=True, type=click.Path(path_type=Path),
              help="The gold set whose questions become probes when their gold documents are held out.")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="A new folder for the index and sets.")
@click.option("--fraction", type=float, default=0.2, show_default=True, help="Share of documents held out.")
@click.option("--seed", type=int, default=0)
@click.option("--json", "as_json", is_flag=True)
def probes_make(vault, gold_path, out, fraction, seed, as_json):
    """Hold out a share of VAULT's documents; questions answered only there become probes."""
    from .probes import make_probes
    try:
        r = make_probes(vault, gold_path, out, fraction=fraction, seed=seed)
    except SearchCoreError as e:
        _fail(e)
    if as_json:
        click.echo(json.dumps(r, ensure_ascii=False, indent=1))
        return
    click.echo(f"held out {r['held_out_documents']} of {r['documents']} documents; {r['probes']} probes and "
               f"{r['answerable']} answerable questions in {r['gold']}; index {r['db']}", file=sys.stdout)
