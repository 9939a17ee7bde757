"""CLI verbs for the Hermes agent: `hermes install`, `hermes status`. Thin over search_core.recall.hermes_install."""

from __future__ import annotations

import json
import time

import click

from search_core import SearchCoreError

from tuner.cli.options import fail as _fail, http_url_value, output_folder

_HOME_OPT = click.option("--hermes-home", type=output_folder(), default=None,
                         help="The Hermes home (default: $HERMES_HOME, else ~/.hermes).")


@click.group("hermes")
def hermes():
    """The vault inside the Hermes agent: a memory provider that calls `autoresearch serve`."""


@hermes.command("install")
@_HOME_OPT
@click.option("--server", default=None, callback=http_url_value, help="The `autoresearch serve` URL (default http://127.0.0.1:8765).")
@click.option("--token", default=None, help="The server's --token (stored in config.json, mode 600).")
@click.option("--timeout-ms", type=click.IntRange(min=1), default=None, help="How long a turn may wait for the block (default 150).")
@click.option("--wrap", default=None, help='Hold Hermes\'s bundled "holographic" provider too ("" for none).')
@click.option("--json", "as_json", is_flag=True)
def hermes_install(hermes_home, server, token, timeout_ms, wrap, as_json):
    """Copy the provider into $HERMES_HOME/plugins/autoresearch/ and print the line that selects it."""
    from search_core.recall.hermes_install import RESTART_NOTE, SELECT_LINE, install

    try:
        r = install(hermes_home, server=server, token=token, timeout_ms=timeout_ms, wrap=wrap)
    except SearchCoreError as e:
        _fail(e)
    if as_json:
        click.echo(json.dumps({"plugin_dir": str(r.plugin_dir), "version": r.version,
                               "previous_version": r.previous_version, "config": r.config, "selected": r.selected,
                               "warnings": list(r.warnings), "select": SELECT_LINE}))
        return
    for w in r.warnings:
        click.echo(f"WARNING: {w}", err=True)
    was = f" (was {r.previous_version})" if r.previous_version else ""
    click.echo(f"installed the autoresearch provider {r.version}{was} in {r.plugin_dir}")
    click.echo(f"server {r.config['server']}, timeout {r.config['timeout_ms']} ms, token "
               f"{r.config['token'] or 'not set'}, wrap {r.config['wrap'] or 'none'}")
    if r.selected:
        click.echo("Hermes already selects it (memory.provider: autoresearch).")
    else:
        click.echo("Select it in Hermes:")
        click.echo(f"  {SELECT_LINE}")
    click.echo(RESTART_NOTE)


@hermes.command("status")
@_HOME_OPT
@click.option("--server", default=None, callback=http_url_value, help="Ask this URL instead of the one in the provider's config.")
@click.option("--calls", type=click.IntRange(min=0), default=10, show_default=True, help="How many of the last calls to show.")
@click.option("--json", "as_json", is_flag=True)
def hermes_status(hermes_home, server, calls, as_json):
    """Installed? Which version? Does the server answer? The last calls the provider logged."""
    from search_core.recall.hermes_install import status

    s = status(hermes_home, server=server, calls=calls)
    if as_json:
        click.echo(json.dumps(s.as_dict(), ensure_ascii=False))
        return
    click.echo(f"Hermes home   {s.hermes_home}")
    click.echo(f"provider      {'installed ' + str(s.version) if s.installed else 'not installed'}"
               f" (this checkout: {s.bundled_version})")
    click.echo(f"selected      memory.provider = {s.selected or '(none)'}")
    click.echo(f"server        {s.server}: {'answers' if s.server_ok else 'does not answer'} ({s.server_detail})")
    if s.last_calls:
        click.echo(f"last {len(s.last_calls)} call(s):")
        for c in s.last_calls:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c.get("ts", 0)))
            what = c.get("stopped_by") or ("ok" if c.get("ok") else "failed")
            extra = f" {c['chars']} chars" if c.get("chars") else ""
            err = f"  {c['error']}" if c.get("error") else ""
            click.echo(f"  {when}  {c.get('call', '?'):<10} {str(c.get('session', ''))[:20]:<20} {what}{extra}"
                       f"  {c.get('ms', '-')} ms{err}")
    else:
        click.echo("the provider logged no calls yet")
    if s.server_calls is not None:
        click.echo(f"server calls  {s.server_calls_text()}")
    for p in s.problems():
        click.echo(f"TODO: {p}")


COMMANDS = (hermes,)
