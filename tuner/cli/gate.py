"""CLI verbs for the gate: `calibrate` (report + proposal), `calibrate apply`, `calibrate undo`, `probes make`.
Thin: each verb calls tuner.gate.calibrate / tuner.gate.proposal / tuner.gate.probes, which the tests call directly."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from search_core import SearchCoreError
from search_core.paths import default_index, no_index_message

from tuner.cli.options import (db_option, duration, fail, FiniteFloat, format_option, gate_file_value, json_option,
                               output_file, output_folder, PathValue, recall_log_option, VaultPath,
                               window_value)
from tuner.cli.extras import require_extra
from tuner.reports import emit



def _labels_arg(path: Path):
    """A gold set (YAML, KorQuAD JSON, BEIR folder) or a call-label file (ID relevant|irrelevant lines)."""
    if path.is_dir() or path.suffix in (".yaml", ".yml", ".json"):
        return "gold", path
    return "calls", path


@click.group(invoke_without_command=True)
@db_option("The index the gate serves (else the index `index` built last).", required=False)
@recall_log_option()
@click.option("--since", default="7d", show_default=True, callback=window_value, help="Log window: 7d, 24h, 90m, or `all`.")
@click.option("--labels", "labels", multiple=True, type=PathValue(),
              help="A gold set with probes (YAML/KorQuAD/BEIR), or a file of `CALL_ID relevant|irrelevant` lines.")
@click.option("--no-log", is_flag=True, help="Calibrate from --labels alone.")
@click.option("--gate", "gate_path", type=PathValue(dir_okay=False), default=None, callback=gate_file_value,
              help="The gate in force.")
@format_option(show_default=True)
@click.option("--out", type=output_file(), default=None, help="Write the report here.")
@click.option("--proposal", type=output_file(), default=None,
              help="Where the proposal goes (default <db>.gate-proposal.json).")
@click.pass_context
def calibrate(ctx, db, log_path, since, labels, no_log, gate_path, fmt, out, proposal):
    """Recalibrate the gate from the recall log window and labelled sets; writes a report and a proposal."""
    if ctx.invoked_subcommand is not None:
        return
    require_extra("tune")
    from search_core.recall.log import parse_label_file

    from tuner.gate.calibrate import calibrate_index, score_series
    from tuner.reports.calibration import calibration_report
    from tuner.gate.proposal import write_proposal

    db = db or default_index()
    if db is None:
        fail(SearchCoreError(f"calibrate needs the index the gate serves: {no_index_message()}"))
    try:
        window = duration(since, allow_all=True, param_hint="--since")
        parsed = [_labels_arg(p) for p in labels]
        gold_paths = [p for kind, p in parsed if kind == "gold"]
        call_labels = []
        for kind, p in parsed:
            if kind == "calls":
                pairs = parse_label_file(p)
                if not pairs:
                    raise SearchCoreError(f"--labels {p} holds no labels; give lines `CALL_ID relevant|irrelevant` "
                                          "(`autoresearch recall-log list` shows the ids), or a gold set")
                call_labels += pairs
        cal, calls, labelled, choice = calibrate_index(
            db, log_path=None if no_log else log_path, since_s=window, gold_paths=gold_paths,
            call_labels=call_labels, gate_path=gate_path)
        proposal = proposal or Path(str(db) + ".gate-proposal.json")
        written = write_proposal(cal, db, proposal)      # a declined run replaces an older proposal with its reason
        wrote = None if written.declined else str(proposal)
        series = score_series(calls, labelled, choice) if fmt == "html" else None
        path = emit(calibration_report(cal, str(db), wrote, fmt == "html", series), fmt, out)
    except SearchCoreError as e:
        fail(e)
    if path:          # (a report on stdout carries the same in its warnings)
        click.echo(f"report written to {path}" + (f"; proposal {wrote}" if wrote else
                                                  f"; no proposal: {written.declined} ({proposal} records "
                                                  "this, so `calibrate apply` says so)"), err=True)


@calibrate.command("apply")
@db_option()
@click.option("--proposal", type=PathValue(dir_okay=False), default=None)
def calibrate_apply(db, proposal):
    """Install the proposal's gate as <db>.gate.json (recorded in <db>.gate-history.jsonl)."""
    from tuner.gate.proposal import apply_proposal
    try:
        r = apply_proposal(proposal or Path(str(db) + ".gate-proposal.json"), db)
    except SearchCoreError as e:
        fail(e)
    click.echo(f"installed {r.installed}" + (" (the previous gate is in the history)" if r.replaced else "")
               + f"; undo with `autoresearch calibrate undo --db {db}`")


@calibrate.command("undo")
@db_option()
def calibrate_undo(db):
    """Put back the gate file the last `calibrate apply` replaced."""
    from tuner.gate.proposal import undo_apply
    try:
        r = undo_apply(db)
    except SearchCoreError as e:
        fail(e)
    click.echo(f"restored the previous gate at {r.gate_file}" if r.restored
               else f"removed {r.gate_file}: the default gate is back")


@click.group()
def probes():
    """Make unanswerable questions you can trust: hold whole documents out of an index built for it."""


@probes.command("make")
@click.argument("vault", type=VaultPath())
@click.option("--gold", "gold_path", required=True, type=PathValue(),
              help="The gold set whose questions become probes when their gold documents are held out.")
@click.option("--out", required=True, type=output_folder(), help="A new folder for the index and sets.")
@click.option("--fraction", type=FiniteFloat(0.0, 1.0, min_open=True, max_open=True), default=0.2, show_default=True,
              help="Share of documents held out.")
@click.option("--seed", type=click.IntRange(min=0), default=0)
@json_option()
def probes_make(vault, gold_path, out, fraction, seed, as_json):
    """Hold out a share of VAULT's documents; questions answered only there become probes."""
    from tuner.gate.probes import make_probes
    try:
        r = make_probes(vault, gold_path, out, fraction=fraction, seed=seed)
    except SearchCoreError as e:
        fail(e)
    if as_json:
        click.echo(json.dumps(r.to_json(), ensure_ascii=False, indent=1))
        return
    click.echo(f"held out {r.held_out_documents} of {r.documents} documents; {r.probes} probes and "
               f"{r.answerable} answerable questions in {r.gold}; index {r.db}", file=sys.stdout)


COMMANDS = (calibrate, probes)
