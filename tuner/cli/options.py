"""What every verb module shares: the options several verbs take (defined once here), durations, progress
bars, and how an error reaches the user. Parsing and printing only: the work is in the library."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict
from pathlib import Path

import click

from search_core import SearchCoreError
from search_core.paths import DB_ENV, LEDGER, RECALL_LOG, default_index, no_index_message, runs_path
from tuner.durations import EXAMPLES, DurationError, parse_duration
from tuner.progress import StageProgress
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


class RunsDefault(TypedDict):
    """click.option's keyword arguments for an option whose default is in the runs folder."""
    type: click.ParamType
    default: Callable[[], Path]
    show_default: str


def in_runs(name: str, type: click.ParamType | None = None) -> RunsDefault:
    """An option's default in the runs folder, read when the command runs (so $AUTORESEARCH_RUNS set after
    import counts) and shown as such in --help; `type` checks the value (default: a path to write)."""
    return RunsDefault(type=type or PathValue(output=True), default=lambda: runs_path(name),
                       show_default=f"$AUTORESEARCH_RUNS/{name}, else runs/{name}")


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


class PathValue(click.Path):
    """click.Path (as pathlib.Path) that refuses an empty value, which pathlib reads as the working folder
    (`index ""` indexed the whole working folder, `--db ""` failed with a traceback on a folder), and, for
    an `output`, a path below a file (`--out notes.txt/report.md`) before any work is done.

    What is wrong with a file that is there (a folder, not SQLite, not a vault) ends the command as the
    library's errors do (exit 1, the option and the file named); click's own checks stay usage errors (2)."""

    def __init__(self, *, output: bool = False, **kw):
        kw.setdefault("path_type", Path)
        super().__init__(**kw)
        self.output = output

    @staticmethod
    def refuse(param, message: str):
        name = param.opts[0] if param is not None and param.opts and param.opts[0].startswith("-") else \
            (param.human_readable_name if param is not None else "")
        raise click.ClickException(f"{name} {message}".strip())

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            self.fail("an empty path; give a file or folder name", param, ctx)
        rv = super().convert(value, param, ctx)
        if self.output:
            folder = Path(rv).absolute().parent
            while not folder.exists() and folder != folder.parent:
                folder = folder.parent
            if not folder.is_dir():
                self.refuse(param, f"{rv}: {folder} is a file, so nothing can be written below it; give a path "
                                   "in a folder")
        return rv


# The tables that make a SQLite file one of ours (each kind's own; no kind has another's set).
SQLITE_KINDS = {"an index": {"notes", "chunks", "meta"}, "a ledger": {"sweeps", "rounds"},
                "a recall log": {"recall_calls"}, "an embedding cache": {"vectors"}}


def sqlite_kind(tables: set[str]) -> str | None:
    return next((kind for kind, need in SQLITE_KINDS.items() if need <= tables), None)


class SqlitePath(PathValue):
    """A SQLite file option (an index, a ledger, a recall log, an embedding cache). A folder, a file that is
    not SQLite (a text file given as --ledger), or one of our SQLite files of another kind (an index given
    as --log: read as an empty log, "0 calls") is refused here with what it holds, instead of failing deep
    inside (a traceback on a folder) or being opened as an empty database; a `reading` option also refuses
    a 0-byte file, which SQLite would read as an empty database. `holds` is a key of SQLITE_KINDS."""

    def __init__(self, holds: str, *, reading: bool, fix: str = "", check_kind: bool = True, **kw):
        super().__init__(output=not reading, **kw)
        self.holds, self.reading, self.fix, self.check_kind = holds, reading, fix, check_kind

    def convert(self, value, param, ctx):
        from search_core.index.store import sqlite_file_problem
        rv = super().convert(value, param, ctx)
        p = Path(rv)
        fix = f"; {self.fix}" if self.fix else ""
        if p.is_dir():
            self.refuse(param, f"{p} is not {self.holds} (it is a folder){fix}")
        if p.is_file():
            # asked of SQLite, never by reading the bytes: the rule for live files (docs/architecture.md)
            try:
                empty = p.stat().st_size == 0
            except OSError as e:
                self.refuse(param, f"{p} cannot be read ({e.strerror})")
            if empty and self.reading:
                self.refuse(param, f"{p} is empty (0 bytes), not {self.holds}{fix}")
            if not empty:
                if sqlite_file_problem(p) is not None:
                    self.refuse(param, f"{p} is not {self.holds} (not a SQLite file){fix}")
                if self.check_kind:
                    self._check_kind(p, param, fix)
        return rv

    def _check_kind(self, p: Path, param, fix: str) -> None:
        from search_core.index.store import sqlite_tables
        try:
            tables = sqlite_tables(p)
        except db_error() as e:
            self.refuse(param, f"{p} cannot be read as SQLite ({e}){fix}")
        kind = sqlite_kind(tables)
        if tables and kind != self.holds:
            what = kind or f"a SQLite file with the tables {', '.join(sorted(tables)[:6])}"
            self.refuse(param, f"{p} is {what}, not {self.holds}{fix}")


class VaultPath(PathValue):
    """A vault: a folder of .md notes or a BEIR corpus folder, or a file that holds a corpus (BEIR .jsonl,
    KorQuAD .json). Any other file is refused here (a sweep took `--vault notes.txt` and failed only at its
    first model round, hours later)."""

    WHAT = "give the folder of .md notes (or a BEIR folder or .jsonl corpus, or a KorQuAD .json file)"

    def convert(self, value, param, ctx):
        from search_core.ingest.vault import is_beir, is_korquad
        rv = super().convert(value, param, ctx)
        if not Path(rv).exists():
            self.refuse(param, f"{rv} does not exist; {self.WHAT}")
        if Path(rv).is_file() and not (is_beir(rv) or is_korquad(rv)):
            self.refuse(param, f"{rv} is a file, not a vault; {self.WHAT}")
        return rv


def index_path(*, reading: bool = True, **kw) -> SqlitePath:
    return SqlitePath("an index", reading=reading, fix="build one with `autoresearch index VAULT --db FILE --full`",
                      **kw)


def input_file(**kw) -> PathValue:
    """A file the verb reads: it must exist and not be a folder."""
    return PathValue(exists=True, dir_okay=False, **kw)


def output_file() -> PathValue:
    return PathValue(dir_okay=False, output=True)


def output_folder() -> PathValue:
    return PathValue(file_okay=False, output=True)


def search_config_value(ctx, param, value):
    """A click callback: a --config TOML read and checked now (a wrong type for a key such as
    `top_k = "five"` was accepted by `serve` and `mcp` and failed every later call)."""
    if value is not None:
        from search_core.config import load_config
        try:
            load_config(value)
        except SearchCoreError as e:
            raise click.ClickException(f"--config: {e}") from None
    return value


def gate_file_value(ctx, param, value):
    """A click callback: an explicit --gate must load (a search passes over a gate file that does not, to
    the cosine gate, which turned a mistyped --gate into a silent change of gate)."""
    if value is not None:
        from search_core.gate.model import GateFileError, load_gate
        try:
            load_gate(value)
        except GateFileError as e:
            raise click.ClickException(f"--gate: {e}") from None
    return value


def nonempty_value(ctx, param, value):
    """A click callback: an empty name (--embedder "") is refused rather than read as "not given"."""
    if value is not None and not value.strip():
        raise click.BadParameter("an empty value; give a name or leave the option out", param=param)
    return value


def http_url_value(ctx, param, value):
    """A click callback: a server URL must be http(s)://HOST[:PORT]."""
    if value is None:
        return None
    from urllib.parse import urlsplit
    try:
        u = urlsplit(value.strip())
        u.port                                      # raises on a port that is not a number
    except ValueError as e:
        raise click.BadParameter(f"{value!r} is not a URL ({e}); give one like http://127.0.0.1:8765",
                                 param=param) from None
    if u.scheme not in ("http", "https") or not u.hostname:
        raise click.BadParameter(f"{value!r} is not an http(s) URL; give one like http://127.0.0.1:8765", param=param)
    return value


def duration_value(ctx, param, value, allow_all: bool = False):
    """A click callback: a duration option's text, refused at parse time when it is not one (an empty
    `--retention ""` used to end in a traceback after the model had loaded)."""
    if value is None:
        return None
    if not value.strip():
        raise click.BadParameter(f"an empty value is not a duration; give one like {EXAMPLES}", param=param)
    duration(value, allow_all=allow_all, param_hint=f"--{param.name.replace('_', '-')}")
    return value


def window_value(ctx, param, value):
    """duration_value for a log window, where `all` is a value too."""
    return duration_value(ctx, param, value, allow_all=True)


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


def db_option(help: str = "The index file (SQLite).", *, required: bool = True, exists: bool = False,
              reading: bool = True):
    """The one --db option. Every verb reads $AUTORESEARCH_DB when --db is not given; a verb that needs an
    index (`required`) then takes the default index the last `index` recorded, and says what to do when
    there is none. Not required: the verb has its own default (the active config's index, or none)."""
    if required:
        help = f"{help} Default: ${DB_ENV}, else the index `index` built last."
    else:
        help = f"{help} ${DB_ENV} when set."
    return click.option("--db", type=index_path(reading=reading, exists=exists), default=None, envvar=DB_ENV,
                        callback=_db_or_default if required else None, help=help)


def ledger_option(help: str | None = None, *, reading: bool = True):
    # the ledger's own check (tuner.ledger.chain) says which kind of file it was given, and seals old ledgers
    ledger = SqlitePath("a ledger", reading=reading, fix="give the ledger `autoresearch sweep` wrote", check_kind=False)
    return click.option("--ledger", "ledger_path", **in_runs(LEDGER, ledger), help=help or "The ledger file (SQLite).")


def recall_log_option(*, reading: bool = True):
    log = SqlitePath("a recall log", reading=reading, fix="give the log `autoresearch serve` or `mcp` wrote")
    return click.option("--log", "log_path", **in_runs(RECALL_LOG, log), help="The recall log (SQLite).")


def runs_option(help: str = "The runs folder (default: $AUTORESEARCH_RUNS, else ./runs)."):
    return click.option("--runs", type=output_folder(), default=None, help=help)


def format_option(show_default: bool = False):
    return click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="md", show_default=show_default,
                        help="Report format.")


def json_option(help: str = "Print JSON instead of text."):
    return click.option("--json", "as_json", is_flag=True, help=help)


def sweep_setting_options():
    """The `sweep` verb's settings, one option each from the table the daemon's [sweep] keys also come from
    (tuner/sweep/settings.py); each defaults to None, "not given", so the library's default applies."""
    from tuner.sweep.settings import SWEEP_SETTINGS
    opts = []
    for s in SWEEP_SETTINGS:
        default = s.default
        said = "" if default is None or s.kind is bool or s.choice_flags else f" Default: {default}."
        if s.choice_flags:
            opts += [click.option(c.flag, s.name, flag_value=c.value, default=None, help=c.help)
                     for c in s.choice_flags]
        elif s.kind is bool and s.off_flag:
            opts.append(click.option(s.option, s.name, default=None, help=s.help + f" Default: {s.option.split('/')[not s.default]}."))
        elif s.kind is bool:
            opts.append(click.option(s.option, s.name, is_flag=True, default=False, help=s.help))
        elif s.kind is int:
            opts.append(click.option(s.option, s.name, type=click.IntRange(s.lo, s.hi), default=None,
                                     help=s.help + said))
        elif s.kind is float:
            opts.append(click.option(s.option, s.name, type=FiniteFloat(s.lo, s.hi, min_open=s.lo_open,
                                                                       max_open=s.hi_open),
                                     default=None, help=s.help + said))
        else:
            opts.append(click.option(s.option, s.name, type=click.Choice(s.choices), default=None,
                                     help=s.help + said))
    return options(*opts)


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


class Progress(StageProgress):
    """Progress on stderr for `--progress/--no-progress` (None: on): bars on a terminal, lines otherwise."""

    def __init__(self, enabled: bool | None = None):
        super().__init__(enabled is not False)
