"""What every verb module shares: the options several verbs take (defined once here), durations, progress
bars, and how an error reaches the user. Parsing and printing only: the work is in the library."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from search_core import SearchCoreError
from search_core.paths import DB_ENV, LEDGER, RECALL_LOG, default_index, no_index_message, runs_path
from tuner.durations import EXAMPLES, DurationError, parse_duration
from tuner.reports.render import FORMATS


def fail(e: Exception | str):
    """End the command with the error's message (exit 1): our errors say what is wrong and what to do."""
    raise click.ClickException(str(e))


def db_error():
    """The exception class a damaged SQLite file raises (sqlean is imported only when a verb needs it)."""
    import sqlean
    return sqlean.DatabaseError


def sigterm_as_interrupt():
    """`kill PID` ends a run the way Ctrl-C does: transaction rolled back, temp file removed."""
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def duration(text: str | None, *, allow_all: bool = False, param_hint: str | None = None) -> float | None:
    """A duration option's text in seconds (tuner.durations' grammar); None when not given, or for `all`
    where `allow_all` (a log window)."""
    if not text:
        return None
    try:
        return parse_duration(text, allow_all=allow_all)
    except DurationError as e:
        raise click.BadParameter(str(e), param_hint=param_hint) from None


def in_runs(name: str) -> dict:
    """An option's default in the runs folder, read when the command runs (so $AUTORESEARCH_RUNS set after
    import counts) and shown as such in --help."""
    return {"type": click.Path(path_type=Path), "default": lambda: runs_path(name),
            "show_default": f"$AUTORESEARCH_RUNS/{name}, else runs/{name}"}


class FiniteFloat(click.FloatRange):
    """A FloatRange that also refuses nan and inf (a comparison with nan is always false, so FloatRange
    lets it through: `--timeout nan` made every call fail)."""

    name = "finite number"

    def convert(self, value, param, ctx):
        import math
        if isinstance(value, str) and value.strip().lower() in ("nan", "inf", "+inf", "-inf", "infinity", "-infinity"):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return rv


def duration_value(ctx, param, value):
    """A click callback: a duration option's text, refused at parse time when it is not one (an empty
    `--retention ""` used to end in a traceback after the model had loaded)."""
    if value is None:
        return None
    if not value.strip():
        raise click.BadParameter(f"an empty value is not a duration; give one like {EXAMPLES}", param=param)
    duration(value, param_hint=f"--{param.name.replace('_', '-')}")
    return value


def nonempty_token(ctx, param, value):
    """--token "" would turn authentication off without a word: an empty token is refused."""
    if value is not None and not value.strip():
        raise click.BadParameter("the token is empty; give a secret (e.g. `openssl rand -hex 16`) or leave "
                                 "the option (and AUTORESEARCH_TOKEN) out", param=param)
    return value


def _db_or_default(ctx, param, value):
    """--db, else $AUTORESEARCH_DB (click reads it), else the default index `index` recorded; else a usage
    error naming all three."""
    if value is not None:
        return value
    recorded = default_index()
    if recorded is None:
        raise click.UsageError(no_index_message(), ctx=ctx)
    return recorded


def db_option(help: str = "The index file (SQLite).", *, required: bool = True, exists: bool = False):
    """The one --db option. Every verb reads $AUTORESEARCH_DB when --db is not given; a verb that needs an
    index (`required`) then takes the default index the last `index` recorded, and says what to do when
    there is none. Not required: the verb has its own default (the active config's index, or none)."""
    if required:
        help = f"{help} Default: ${DB_ENV}, else the index `index` built last."
    else:
        help = f"{help} ${DB_ENV} when set."
    return click.option("--db", type=click.Path(path_type=Path, exists=exists), default=None, envvar=DB_ENV,
                        callback=_db_or_default if required else None, help=help)


def ledger_option(help: str | None = None):
    return click.option("--ledger", "ledger_path", **in_runs(LEDGER), help=help or "The ledger file (SQLite).")


def recall_log_option():
    return click.option("--log", "log_path", **in_runs(RECALL_LOG), help="The recall log (SQLite).")


def runs_option(help: str = "The runs folder (default: $AUTORESEARCH_RUNS, else ./runs)."):
    return click.option("--runs", type=click.Path(path_type=Path), default=None, help=help)


def format_option(show_default: bool = False):
    return click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="md", show_default=show_default,
                        help="Report format.")


def json_option(help: str = "Print JSON instead of text."):
    return click.option("--json", "as_json", is_flag=True, help=help)


def options(*opts):
    """Apply several click options as one decorator, in the order given."""
    def deco(f):
        for o in reversed(opts):
            f = o(f)
        return f
    return deco


def emit_report(report, fmt: str, out: Path | None):
    """Render a report to --out (printing the path) or to stdout."""
    from tuner.reports import emit
    try:
        path = emit(report, fmt, out)
    except SearchCoreError as e:
        fail(e)
    if path:
        click.echo(path)


class Progress:
    """tqdm bars per stage on stderr; silent when stderr is not a terminal unless forced."""

    def __init__(self, enabled: bool | None = None):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.bars = {}

    def __call__(self, stage, done, total):
        if not self.enabled:
            return
        from tqdm import tqdm
        bar = self.bars.get(stage)
        if bar is None:
            bar = self.bars[stage] = tqdm(total=total, desc=f"{stage:<8}", unit=" items", file=sys.stderr,
                                          leave=True, dynamic_ncols=True)
        if stage != "parse":
            bar.total = total
        bar.n = done
        bar.refresh()

    def close(self):
        for b in self.bars.values():
            b.close()
