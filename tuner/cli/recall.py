"""CLI verbs of the recall path: `recall-log stats|label|list|prune`, `serve`, `mcp`. Thin over search_core."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from search_core import SearchCoreError
from tuner.cli.extras import require_extra

from tuner.cli.options import (db_option, duration, duration_value, fail, FiniteFloat, json_option,
                               nonempty_token, options, PathValue, recall_log_option, search_config_value,
                               window_value)
from search_core.recall.config import MAX_TIMEOUT_S

_LOG_OPT = recall_log_option()


@click.group("recall-log")
def recall_log():
    """The recall log: stats and the retirement verdict, labels for calibration, retention."""


@recall_log.command("stats")
@_LOG_OPT
@click.option("--since", default=None, callback=duration_value, help="Only calls this recent, e.g. 7d, 12h (default: all).")
@json_option()
def recall_log_stats(log_path, since, as_json):
    """Calls, injection rate, p50/p95, calls stopped per gate, mean characters injected, retire verdict."""
    from search_core.recall.log import recall_stats

    try:
        s = recall_stats(log_path, duration(since, param_hint="--since"))
    except SearchCoreError as e:
        fail(e)
    if as_json:
        click.echo(json.dumps(s, ensure_ascii=False))
        return
    rate = f"{s['injection_rate']:.0%}" if s["injection_rate"] is not None else "-"
    lat = s["latency_ms"]
    fmt = lambda v: "-" if v is None else f"{v:.0f} ms"   # noqa: E731
    click.echo(f"{s['calls']} calls{' in the last ' + since if since else ''}, {s['injected']} injected ({rate}), "
               f"p50 {fmt(lat['p50'])}, p95 {fmt(lat['p95'])}, {s['mean_chars_injected']:.0f} chars per injected block")
    for gate, n in s["stopped_by"].items():
        click.echo(f"  stopped by {gate:<12} {n}")
    r = s["retire"]
    click.echo(f"retire rule (p95 > 400 ms or injection < 20%): {r['verdict']}"
               + (f" ({'; '.join(r['reasons'])})" if r["reasons"] else ""))


@recall_log.command("label")
@_LOG_OPT
@click.argument("call_id", required=False, type=click.IntRange(1, 2 ** 63 - 1))
@click.argument("label", required=False)
@click.option("--file", "label_file", type=PathValue(), default=None,
              help="Bulk: lines `ID relevant|irrelevant` (or JSON lines {\"id\", \"label\"}).")
@json_option()
def recall_log_label(log_path, call_id, label, label_file, as_json):
    """Label a call (ID relevant|irrelevant), or many from --file: calibration data for the gate."""
    from search_core.recall.log import label_calls, parse_label_file

    try:
        if label_file is not None:
            if call_id is not None:
                raise SearchCoreError("give either ID LABEL or --file, not both")
            pairs = parse_label_file(label_file)
        elif call_id is None or label is None:
            raise SearchCoreError("give ID and LABEL (e.g. `recall-log label 42 relevant`) or --file FILE")
        else:
            pairs = [(call_id, label)]
        out = label_calls(log_path, pairs)
    except SearchCoreError as e:
        fail(e)
    click.echo(json.dumps(out) if as_json else
               f"labelled {out['labelled']} call(s); totals: " + ", ".join(f"{k} {v}" for k, v in out["totals"].items()))


@recall_log.command("list")
@_LOG_OPT
@click.option("--since", default=None, callback=duration_value, help="e.g. 1d")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@json_option()
def recall_log_list(log_path, since, limit, as_json):
    """The latest calls with their ids (to label them)."""
    from search_core.recall.log import read_calls

    try:
        rows = read_calls(log_path, duration(since, param_hint="--since"))[-limit:]
    except SearchCoreError as e:
        fail(e)
    if as_json:
        click.echo(json.dumps(rows, ensure_ascii=False))
        return
    for r in rows:
        top = r["top_scores"][0]["cosine"] if r["top_scores"] else None
        what = "injected" if r["injected"] else f"stopped by {r['stopped_by']}"
        # which error stopped a call (a 2 s timeout on a busy machine, a model server down): "error" alone said none
        err = f"  [{r['error'][:80]}]" if r.get("error") else ""
        click.echo(f"{r['id']:>6}  {r['session'][:12]:<12} {what:<22} top {top if top is not None else '-':<6} "
                   f"{(r['label'] or ''):<10} {(r['query'] or '#' + r['query_hash'])[:60]}{err}")


@recall_log.command("suggest")
@_LOG_OPT
@click.option("--since", default="7d", show_default=True, callback=window_value, help="Log window: 7d, 24h, or `all`.")
@click.option("-n", "n", type=click.IntRange(min=1), default=20, show_default=True, help="How many calls to pick.")
@db_option("Score the calls with the gate in force on this index (default: the logged probabilities).",
           required=False)
@click.option("--config", "config_path", type=PathValue(), default=None, callback=search_config_value,
              help="A TOML config (its gate_threshold); default: the active config when it exists.")
@json_option()
def recall_log_suggest(log_path, since, n, db, config_path, as_json):
    """The calls whose label would most change the gate's threshold, and why each was picked."""
    from search_core.recall.suggest import suggest_from_log

    try:
        out, gate = suggest_from_log(log_path, since_s=duration(since, allow_all=True, param_hint="--since"), n=n,
                                     db=db, config_path=config_path)
    except SearchCoreError as e:
        fail(e)
    if as_json:
        click.echo(json.dumps([s.as_json() for s in out.picks], ensure_ascii=False))
        return
    click.echo(f"{len(out.picks)} of {out.pool} unlabelled calls ({out.labelled} labelled already); "
               f"{out.scale} threshold {out.threshold:.3f} ({gate.source})")
    for why, k in out.left_out.items():
        click.echo(f"  left out: {k} {why}")
    for s in out.picks:
        click.echo(f"{s.id:>6}  {s.score:.3f}  {(s.top_note or '-')[:28]:<28} {s.query[:60]}")
        click.echo(f"        {s.reason}")
    if out.picks:
        click.echo("label them with `autoresearch recall-log label ID relevant|irrelevant`, or on the /label "
                   "page of `autoresearch serve`")


@recall_log.command("prune")
@_LOG_OPT
@click.option("--older-than", default="30d", show_default=True, callback=duration_value, help="Delete calls older than this.")
def recall_log_prune(log_path, older_than):
    """Retention by age (the server also prunes by its --retention as it writes)."""
    from search_core.recall.log import RecallLog

    if not log_path.exists():
        fail(SearchCoreError(f"no recall log at {log_path}"))
    days = duration(older_than, param_hint="--older-than") / 86400
    try:
        log = RecallLog(log_path, retention_days=None)
    except SearchCoreError as e:
        fail(e)
    log.retention_days = days
    n = log.prune()
    log.close()
    click.echo(f"pruned {n} call(s) older than {older_than} from {log_path}")


def _engine(db, config_path, log_path, retention, privacy, timeout):
    # Before the model loads: OpenMP threads that spin while waiting starve when the cores are shared
    # (an index run beside the server, other jobs). Measured here at load average 22 on 2 cores: one e5
    # query embedding took 3,500-5,600 ms with the default policy and 43-78 ms with PASSIVE.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from search_core.recall.engine import open_engine
    if not Path(db).exists():      # the engine opens the index on its first call: a server would start on nothing
        raise SearchCoreError(f"no index at {db}; build one with `autoresearch index VAULT --db {db}`")
    return open_engine(db, config_path=config_path, log_path=log_path,
                       retention_days=duration(retention, param_hint="--retention") / 86400, privacy=privacy,
                       timeout_s=timeout)


_SERVE_OPTS = [
    db_option(),
    click.option("--config", "config_path", type=PathValue(), default=None, callback=search_config_value,
                 help="A TOML config ([search] and [recall]); default: the active config ($AUTORESEARCH_RUNS/active.toml, else runs/active.toml) when it exists."),
    recall_log_option(reading=False),
    click.option("--retention", default="30d", show_default=True, callback=duration_value,
                 help="Recall-log rows older than this are pruned."),
    click.option("--privacy", type=click.Choice(["text", "hash"]), default=None,
                 help="hash: log only the query's sha256, never its text."),
    click.option("--timeout", type=FiniteFloat(min=0, min_open=True, max=MAX_TIMEOUT_S), default=None,
                 help="Seconds that bound every call (default 2)."),
]


@click.command()
@options(*_SERVE_OPTS)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True)
@click.option("--allow-remote", is_flag=True, help="Required to listen on anything but loopback.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Also answer requests whose Host header is NAME (a reverse proxy's name; repeatable). "
                   "Other names are refused (a web page could reach the server through DNS rebinding).")
@click.option("--token", envvar="AUTORESEARCH_TOKEN", default=None, callback=nonempty_token,
              help="Require `Authorization: Bearer TOKEN` (or set AUTORESEARCH_TOKEN).")
@click.option("--watch", "watch_vault", type=PathValue(exists=True, file_okay=False), default=None, metavar="VAULT",
              help="Keep --db current with VAULT: notes are re-indexed shortly after they are saved.")
def serve(db, config_path, log_path, retention, privacy, timeout, host, port, allow_remote, allow_hosts, token,
          watch_vault):
    """HTTP server: /search, /queue, /prefetch, /healthz, /metrics, /label (Starlette on uvicorn)."""
    require_extra("serve")
    from search_core.recall.server import check_allowed_hosts, check_host, run_server

    try:
        warning = check_host(host, allow_remote)
        check_allowed_hosts(host, allow_hosts)
        engine, cfg_path = _engine(db, config_path, log_path, retention, privacy, timeout)
    except SearchCoreError as e:
        fail(e)
    if warning:
        click.echo(f"WARNING: {warning}", err=True)
    if not token and warning:
        click.echo("WARNING: no --token: anyone who can reach this address can read your notes", err=True)
    click.echo(f"serving {db} on http://{host}:{port} (config {cfg_path or 'defaults'}, log {log_path})", err=True)
    click.echo(f"label calls at http://{host}:{port}/label" + ("#token=TOKEN" if token else ""), err=True)
    watcher = None
    if watch_vault is not None:
        from search_core.index.watch import VaultWatcher
        watcher = VaultWatcher(watch_vault, db, on_skip=lambda s: click.echo(f"skipped {s.path}: {s.reason}",
                                                                              err=True)).start()
        click.echo(f"watching {watch_vault}: saved notes are re-indexed into {db}", err=True)
    try:
        run_server(engine, host=host, port=port, token=token, watcher=watcher, allow_hosts=allow_hosts)
    finally:
        if watcher is not None:
            watcher.stop()


@click.command()
@options(*_SERVE_OPTS)
def mcp(db, config_path, log_path, retention, privacy, timeout):
    """Model Context Protocol server over stdio: tools search_notes and recall."""
    require_extra("serve")
    from search_core.recall.mcp import run_stdio

    try:
        engine, _ = _engine(db, config_path, log_path, retention, privacy, timeout)
    except SearchCoreError as e:
        fail(e)
    print(f"autoresearch mcp: {db} over stdio (log {log_path})", file=sys.stderr)
    run_stdio(engine)


COMMANDS = (recall_log, serve, mcp)
