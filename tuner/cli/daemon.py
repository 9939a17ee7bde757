"""The daemon's verbs: `daemon`, `status`, `config history|rollback`, `report sweep`, `audit`.
Thin: each calls a library function (tuner.daemon.scheduler, tuner.promotion.promote, tuner.reports.sweep, tuner.sweep.rejected_audit)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from search_core import SearchCoreError
from tuner.cli.extras import require_extra
from tuner.daemon.config import JOB_NAMES

from tuner.cli.options import (FiniteFloat, PathValue, emit_report, fail, format_option, json_option, ledger_option,
                               output_file, runs_option)

@click.command()
@click.option("--config", "config_path", default=None, type=PathValue(), help="The daemon's TOML config.  [required]")
@click.option("--once", "once", type=click.Choice(JOB_NAMES), default=None, help="Run this one job now and exit.")
@click.option("--start-in", type=FiniteFloat(min=0.0), default=None,
              help="Also run index, sweep and report once, this many seconds from now (cron has minute resolution).")
@click.option("--sample", is_flag=True,
              help="Print the sample config (the demo vault's night; every key with its default) and exit: "
                   "`autoresearch daemon --sample > my-daemon.toml`, then set vault, gold, holdout, timezone, runs.")
def daemon(config_path, once, start_in, sample):
    """Run the tuning jobs of --config on their schedule (APScheduler); one daemon per runs folder."""
    require_extra("tune")
    from tuner.daemon.config import load_daemon_config, sample_config_text
    from tuner.daemon.scheduler import Daemon, run_once

    if sample:
        try:
            click.echo(sample_config_text(), nl=False)
        except SearchCoreError as e:
            fail(e)
        return
    if config_path is None:
        raise click.UsageError("Missing option '--config': the daemon's TOML config (`autoresearch daemon --sample > "
                               "my-daemon.toml` writes one to fill in)")
    try:
        cfg = load_daemon_config(config_path)
        if once:
            res = run_once(cfg, once)
            click.echo(json.dumps(res.to_json(), ensure_ascii=False, default=str))
            sys.exit(0 if res.outcome in ("ok", "promoted", "declined", "stopped", "skipped") else 1)
        click.echo(f"daemon pid {__import__('os').getpid()}: runs {cfg.runs}, log {Path(cfg.runs) / 'daemon.log'}",
                   err=True)
        sys.exit(Daemon(cfg, start_in=start_in).serve())
    except SearchCoreError as e:
        fail(e)


@click.command()
@runs_option()
@json_option()
def status(runs, as_json):
    """The daemon's jobs: next and last runs, the last outcome, and whether a daemon holds the lock."""
    from tuner.daemon.scheduler import status as get_status
    from search_core.paths import runs_dir

    s = get_status(runs_dir(runs))
    if as_json:
        click.echo(json.dumps(s.to_json(), ensure_ascii=False, default=str))
        return
    click.echo(f"runs {s.runs}: " + (f"daemon running (pid {s.pid if s.pid and s.pid > 0 else 'unknown'}, holds "
                                     "the lock)" if s.running else "no daemon running"))
    for j in s.jobs:
        click.echo(f"  {j.job:<10} {j.schedule or '':<28} next {j.next_run or 'none':<26} "
                   f"last {j.last_run or '–'} {j.last_outcome or ''}")
        if j.next_why:
            click.echo(f"             next: {j.next_why}")
        if j.last_why and j.last_outcome not in ("ok", "running"):
            click.echo(f"             why: {j.last_why}")
        if j.last_report:
            click.echo(f"             report: {j.last_report}")
    for p in s.problems:
        click.echo(f"  problem: {p}", err=True)


@click.group("config")
def config_group():
    """The active config (runs/active.toml): its promotion history, and rollback."""


@config_group.command("history")
@runs_option()
@json_option()
def config_history(runs, as_json):
    """Every promotion, declined proposal and rollback, with the previous config."""
    from tuner.promotion.promote import History, read_active
    try:
        h = History(runs)
        events = h.events()
        h.close()
        active = read_active(runs)
    except SearchCoreError as e:
        fail(e)
    if as_json:
        click.echo(json.dumps({"active": active and {"config": active.config.as_dict(), "index": str(active.index),
                                                     "source": active.source}, "events": [e.to_json() for e in events]},
                              ensure_ascii=False, default=str))
        return
    click.echo("active: " + (f"{active.source} ({active.config.config_hash()}, index {active.index})" if active
                             else "none (built-in defaults)"))
    for e in events:
        click.echo(f"#{e.id:<3} {e.created}  {e.kind:<9} sweep {e.sweep or '–'}: {e.reason}")


@config_group.command("rollback")
@click.argument("event_id", type=click.IntRange(min=1), required=False)
@runs_option()
def config_rollback(event_id, runs):
    """Undo promotion ID (default: the latest not yet undone): its previous config and index become active."""
    from tuner.promotion.promote import rollback
    try:
        r = rollback(event_id, runs)
    except SearchCoreError as e:
        fail(e)
    click.echo(f"rolled back #{r.undid} (event #{r.event}); active: "
               + (json.dumps(r.active.as_dict(), ensure_ascii=False) if r.active else "none (built-in defaults)"))


@click.group("report")
def report():
    """Reports (Markdown, self-contained HTML, JSON) read from the ledger."""


@report.command("sweep")
@click.option("--sweep", "sweep_id", default=None, help="Default: the latest sweep.")
@ledger_option()
@runs_option("Where the promotion history is (default: $AUTORESEARCH_RUNS, else ./runs).")
@format_option()
@click.option("--out", type=output_file(), default=None, help="Write here and print the path.")
def report_sweep(sweep_id, ledger_path, runs, fmt, out):
    """The morning report of a sweep: verdict, progress plot, kept changes, rejections, levels, flips."""
    require_extra("tune")
    from tuner.reports.sweep import sweep_report
    try:
        rep = sweep_report(ledger_path, sweep_id, runs)
    except SearchCoreError as e:
        fail(e)
    emit_report(rep, fmt, out)


@click.command()
@click.option("--sweep", "sweep_id", default=None, help="Default: the latest sweep.")
@ledger_option()
@runs_option("Where the active config is (default: $AUTORESEARCH_RUNS, else ./runs).")
@click.option("--retest", is_flag=True, help="Re-run the candidates marked worth re-testing against today's baseline.")
@format_option()
@click.option("--out", type=output_file(), default=None)
def audit(sweep_id, ledger_path, runs, retest, fmt, out):
    """Every rejected candidate: baseline, index, deltas, broken/fixed questions, and whether to re-test it."""
    require_extra("tune")
    from tuner.sweep.rejected_audit import audit_report
    try:
        rep = audit_report(ledger_path, sweep_id, do_retest=retest, runs=runs,
                           progress=lambda line: click.echo(line, err=True))
    except SearchCoreError as e:
        fail(e)
    emit_report(rep, fmt, out)


COMMANDS = (daemon, status, config_group, report, audit)
