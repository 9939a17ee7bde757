"""The daemon's TOML config, validated in full before anything is scheduled or written.

    [daemon]
    timezone = "Asia/Seoul"          # required: cron times mean nothing without a zone
    runs = "runs"                    # lock, log, run table, ledger, active config, reports
    [sweep]                          # what a nightly sweep tunes (the `sweep` verb's options)
    vault = "..."; gold = "..."; holdout = "..." (or split = 0.5)
    db = "..."                       # default: the user's index of this vault, else <runs>/index.sqlite
    space = "..."                    # default: the bundled default space
    [jobs.index]   cron = "0 1 * * *"                  # incremental reindex before the sweep
    [jobs.sweep]   cron = "5 1 * * *"; until = "07:00" # the window's end is the sweep's time budget
    [jobs.report]  cron = "5 7 * * *"
    [jobs.retest]  cron = "0 3 * * 6"                  # weekly re-test of rejected candidates
    [jobs.labels]  cron = "0 4 * * 0"                  # weekly: labelled recall calls become gold (gold from-log)
    [evidence]                       # what the night tunes on beside the hand-written gold set (every key optional)
    vault_questions = 600            # questions `gold make` cuts from the vault (0: the hand-written set alone)
    kinds = ["anchor", "heading", "alias"]; seed = 0
    cloze = 0                        # cloze questions (tuner.data.cloze); with any, the night runs on the vault's copy
    from_log = "..."                 # where the labels job writes; default: <gold>.from-log.yaml beside gold

A job's schedule is `cron` (five fields, in the daemon's time zone) or `every` (a duration such as
"30s" or "6h"; for tests and short cycles). `grace` is how late a run may still start (after a restart
or a clock jump); for the sweep it defaults to the window, for the rest to 6 hours.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import zoneinfo
from dataclasses import dataclass
from pathlib import Path

from search_core import SearchCoreError
from search_core.config import read_toml
from search_core.validate import Where

from tuner import durations
from tuner.daemon.jobs import JOBS
from tuner.data.vault_questions import MADE_N
from tuner.sweep.keep_rule import HIT5_GUARDS
from tuner.sweep.settings import SETTING_NAMES, SWEEP_SETTINGS, SWEEP_TABLE_PATHS, SweepTable

JOB_NAMES = tuple(JOBS)
DEFAULT_JOBS = {"index": {"cron": "0 1 * * *"}, "sweep": {"cron": "5 1 * * *", "until": "07:00"},
                "report": {"cron": "5 7 * * *"}, "labels": {"cron": "0 4 * * 0"}}
DEFAULT_GRACE_S = 6 * 3600
EVIDENCE_KEYS = ("vault_questions", "kinds", "seed", "from_log", "cloze")
# gold make's default (its recipe: anchors first, each without its link): a night tuned on 600 such questions
# recovered 61-83 % of johngrib's held-out hit@5 gap where 200 of every kind in turn recovered none
# (BENCHMARKS.md); on the demo vault they give the gain test the power the 24 hand-written ones lack
DEFAULT_VAULT_QUESTIONS = MADE_N
# cloze questions a night adds (tuner.data.cloze): none unless asked. They rank configs much as hand-written
# questions do on the johngrib wiki (Spearman 0.79-0.96) and less on sysmae (0.45), and they reward the keyword
# lists more than hand-written questions do: nights on them alone recovered more of sysmae's gap than anchors and
# headings, less of johngrib's on the mean, and lost a held-out question on 2 of 3 voyager003 seeds
# (BENCHMARKS.md, a night on questions the vault supplies)
DEFAULT_CLOZE = 0
MAX_VAULT_QUESTIONS = 100_000
SWEEP_KEYS = {"vault", "db", "gold", "holdout", "space", "score_config", "start_config", *SETTING_NAMES}


class DaemonConfigError(SearchCoreError):
    pass


DAEMON_KEYS = ("timezone", "runs", "ledger")
MIN_EVERY_S = 1.0       # `every = "1e-9s"` would spin the scheduler


def check_sweep_values(sweep: dict, v: Where) -> None:
    """The [sweep] values' types and ranges, here rather than when the night's sweep starts: the paths, then each
    setting by the one table the `sweep` verb's options are built from."""
    for k in SWEEP_TABLE_PATHS:
        if k in sweep:
            v.string(k, sweep[k], min_chars=1, max_chars=4096)
    for s in SWEEP_SETTINGS:
        if s.name in sweep:
            s.check(sweep[s.name], v)


MAX_DURATION_S = 4 * 366 * 86400     # the horizon past which a cron counts as never firing, for every duration:
#                                      `every = "99999999999d"` loaded, then the scheduler's timedelta overflowed


def parse_duration(text, where: str = "", key: str = "") -> float:
    """Seconds for a job's duration; a bad one names the file, the table and the key."""
    at = f"{where} {key}: " if where else ""
    try:
        value = durations.parse_duration(text)
    except durations.DurationError as e:
        raise DaemonConfigError(f"{at}{e}") from None
    if value > MAX_DURATION_S:
        raise DaemonConfigError(f"{at}{text!r} is longer than {MAX_DURATION_S // 86400} days, the longest a job "
                                "duration may be")
    return value


@dataclass(frozen=True)
class JobSpec:
    name: str
    cron: str | None = None
    every_s: float | None = None
    until: str | None = None          # sweep: the window's end, HH:MM in the daemon's zone
    budget_s: float | None = None     # sweep: a fixed time budget instead of `until`
    grace_s: float = DEFAULT_GRACE_S

    def trigger(self, tz):
        from apscheduler.triggers.cron import CronTrigger
        from apscheduler.triggers.interval import IntervalTrigger
        if self.cron:
            return CronTrigger.from_crontab(self.cron, timezone=tz)
        return IntervalTrigger(seconds=self.every_s, timezone=tz)

    def schedule_text(self) -> str:
        s = f"cron {self.cron!r}" if self.cron else f"every {self.every_s:g}s"
        if self.until:
            s += f" until {self.until}"
        elif self.budget_s:
            s += f" for {self.budget_s:g}s"
        return s


@dataclass(frozen=True)
class EvidenceSpec:
    """What the night tunes on beside the hand-written gold set ([evidence]): questions the vault supplies
    (made again when the vault changed) and the labelled recall calls the weekly `labels` job turns into gold."""
    vault_questions: int = DEFAULT_VAULT_QUESTIONS
    kinds: tuple[str, ...] | None = None      # None: gold make's default kinds
    seed: int = 0
    from_log: str | None = None               # None: <gold>.from-log.yaml beside the gold set
    cloze: int = DEFAULT_CLOZE                # cloze questions (0: none, the night runs on the vault's own index)

    def from_log_path(self, gold: str) -> Path:
        if self.from_log:
            return Path(self.from_log)
        g = Path(gold)
        return g.with_name(g.stem + ".from-log.yaml")


def _bundled(path: str) -> bool:
    """A file inside the package's bundled experiments folder (the demo's gold sets)."""
    from tuner.data.bundled import EXPERIMENTS
    try:
        return Path(path).resolve().is_relative_to(EXPERIMENTS)
    except OSError:
        return False


@dataclass(frozen=True)
class DaemonConfig:
    path: str
    timezone: str
    runs: str
    ledger: str
    sweep: SweepTable
    jobs: tuple[JobSpec, ...]
    evidence: EvidenceSpec = EvidenceSpec()

    @property
    def tz(self):
        return zoneinfo.ZoneInfo(self.timezone)

    def job(self, name: str) -> JobSpec:
        for j in self.jobs:
            if j.name == name:
                return j
        raise DaemonConfigError(f"job {name!r} is not enabled in {self.path}; enabled jobs: "
                                f"{', '.join(j.name for j in self.jobs)} (known jobs: {', '.join(JOB_NAMES)})")

    def window_end(self, job: JobSpec, fired: dt.datetime) -> dt.datetime | None:
        """When a run fired at `fired` must stop (the sweep's window), or None."""
        if job.until:
            h, m = (int(x) for x in job.until.split(":"))
            end = fired.astimezone(self.tz).replace(hour=h, minute=m, second=0, microsecond=0)
            return end if end > fired else end + dt.timedelta(days=1)
        if job.budget_s:
            return fired + dt.timedelta(seconds=job.budget_s)
        return None


def index_vault_of(db: Path) -> str | None:
    """The vault an index records it was built from (absolute), or None when it is not a readable index."""
    from search_core.index.store import get_meta, peek
    try:
        conn = peek(db)
        try:
            return get_meta(conn, "vault")
        finally:
            conn.close()
    except Exception:      # not an index, or not readable: it is simply not the user's index of this vault
        return None


def default_db(vault: str, runs: Path) -> Path:
    """[sweep] db when the config leaves it out: the index the user already built of this vault
    ($AUTORESEARCH_DB, else the index `autoresearch index` built last), so the daemon never embeds the vault
    a second time; an index of another vault is never taken. Else <runs>/index.sqlite, which the index job
    builds (texts already embedded come from the user's embedding cache)."""
    import os
    from search_core.paths import DB_ENV, default_index
    want = str(Path(vault).resolve())
    env = os.environ.get(DB_ENV)
    for db in (Path(env).expanduser() if env else None, default_index(), default_index(runs)):
        if db is not None and db.is_file() and index_vault_of(db) == want:
            return db
    return runs / "index.sqlite"


def _calibrate_available() -> bool:
    import importlib.util
    return importlib.util.find_spec("tuner.gate.calibrate") is not None


def _job(name: str, raw: dict, where: str) -> JobSpec:
    if not isinstance(raw, dict):
        raise DaemonConfigError(f"{where}: [jobs.{name}] must be a table with cron = \"...\" or every = \"...\"")
    unknown = set(raw) - {"cron", "every", "until", "budget", "grace"}
    if unknown:
        raise DaemonConfigError(f"{where}: [jobs.{name}] has unknown key(s) {sorted(unknown)}; "
                                "valid: cron, every, until, budget, grace")
    if ("cron" in raw) == ("every" in raw):
        raise DaemonConfigError(f"{where}: [jobs.{name}] needs exactly one of cron = \"0 1 * * *\" or every = \"6h\"")
    cron = raw.get("cron")
    if cron is not None:
        from apscheduler.triggers.cron import CronTrigger
        try:
            CronTrigger.from_crontab(str(cron), timezone=dt.timezone.utc)
        except ValueError as e:
            raise DaemonConfigError(f"{where}: [jobs.{name}] cron {cron!r} is not a cron expression ({e}); "
                                    "five fields: minute hour day month weekday, e.g. \"5 1 * * *\"") from None
    at = f"{where}: [jobs.{name}]"
    every = parse_duration(raw["every"], at, "every") if "every" in raw else None
    if every is not None and every < MIN_EVERY_S:
        raise DaemonConfigError(f"{where}: [jobs.{name}] every = {raw['every']!r} is shorter than {MIN_EVERY_S:g} s; "
                                "a job cannot start more often than that")
    if cron is not None:
        from apscheduler.triggers.cron import CronTrigger
        now = dt.datetime.now(dt.timezone.utc)
        nxt = CronTrigger.from_crontab(str(cron), timezone=dt.timezone.utc).get_next_fire_time(None, now)
        if nxt is None or (nxt - now).days > 4 * 366:
            raise DaemonConfigError(f"{where}: [jobs.{name}] cron {cron!r} never fires (a day that no month has, "
                                    "such as 31 April?)")
    until = raw.get("until")
    if until is not None:
        try:
            if not isinstance(until, str) or len(until.split(":")) != 2:
                raise ValueError(until)
            dt.time.fromisoformat(until)
        except (ValueError, TypeError):
            raise DaemonConfigError(f"{where}: [jobs.{name}] until {until!r} is not a time like \"07:00\" "
                                    "(hours and minutes)") from None
        if name != "sweep":
            raise DaemonConfigError(f"{where}: until is the sweep window's end; only [jobs.sweep] takes it")
    budget = parse_duration(raw["budget"], at, "budget") if "budget" in raw else None
    grace = parse_duration(raw["grace"], at, "grace") if "grace" in raw else None
    if grace is None:
        grace = DEFAULT_GRACE_S
        if name == "sweep" and budget:
            grace = budget
        elif name == "sweep" and until and cron:
            grace = 0.0     # filled in by the window: a late sweep may start until the window ends
    return JobSpec(name, cron, every, until, budget, grace)


def _evidence(raw, where: str, base: Path, sweep: dict) -> EvidenceSpec:
    from tuner.data.vault_questions import KINDS
    v = Where(where, "[evidence]")
    e = v.table_of(raw, "[evidence]")
    v.known_keys(e, EVIDENCE_KEYS)
    n = v.integer("vault_questions", e["vault_questions"], lo=0, hi=MAX_VAULT_QUESTIONS) \
        if "vault_questions" in e else DEFAULT_VAULT_QUESTIONS
    kinds = None
    if "kinds" in e:
        kinds = v.string_list("kinds", e["kinds"])
        bad = [k for k in kinds if k not in KINDS]
        if bad or not kinds:
            raise DaemonConfigError(f"{where}: [evidence] kinds {list(kinds)} must be one or more of "
                                    f"{', '.join(KINDS)}")
    seed = v.integer("seed", e["seed"], lo=0, hi=2 ** 32 - 1) if "seed" in e else int(sweep.get("seed", 0))
    from_log = None
    if "from_log" in e:
        p = Path(v.string("from_log", e["from_log"], min_chars=1, max_chars=4096)).expanduser()
        from_log = str(p if p.is_absolute() else base / p)
        hand = {sweep.get("gold"), sweep.get("holdout")} - {None}
        if from_log in hand or (Path(from_log).exists() and any(Path(from_log).samefile(h) for h in hand
                                                                  if Path(h).exists())):
            raise DaemonConfigError(f"{where}: [evidence] from_log = {from_log} is the hand-written gold set; the "
                                    "labels job would overwrite it: name another file, or leave the key out "
                                    "(<gold>.from-log.yaml beside it)")
    cloze = v.integer("cloze", e["cloze"], lo=0, hi=MAX_VAULT_QUESTIONS) if "cloze" in e else DEFAULT_CLOZE
    return EvidenceSpec(n, kinds, seed, from_log, cloze)


def sample_config_text() -> str:
    """The sample config (the packaged experiments/daemon.toml) to save anywhere (`autoresearch daemon --sample >
    my-daemon.toml`): its demo paths made absolute and its runs folder put beside the copy, so the copy runs the
    demo vault as it is, and a user sets vault, gold, holdout, timezone and runs in it. The shipped file's paths
    are relative to the package's folder, which a user outside a checkout never sees."""
    import re
    from tuner.data.bundled import experiments_dir
    folder = experiments_dir()
    text = (folder / "daemon.toml").read_text(encoding="utf-8")

    def absolute(m):
        return f'{m.group(1)} = "{(folder / m.group(2)).resolve()}"'

    text, n = re.subn(r'(?m)^(vault|gold|holdout) = "([^"~/][^"]*)"', absolute, text)
    text, r = re.subn(r'(?m)^runs = "\.\./runs/daemon-demo"', 'runs = "runs/daemon-demo"', text)
    assert n == 3 and r == 1, "the packaged daemon.toml lost a line the sample rewrites"
    return text


def load_daemon_config(path: str | Path) -> DaemonConfig:
    path = Path(path)
    raw = read_toml(path, "daemon config")
    where = str(path)
    unknown = set(raw) - {"daemon", "sweep", "jobs", "evidence"}
    if unknown:
        raise DaemonConfigError(f"{where}: unknown table(s) {sorted(unknown)}; valid: [daemon], [sweep], [evidence], "
                                "[jobs.NAME]")
    d = raw.get("daemon", {})
    v = Where(where, "[daemon]")
    d = v.table_of(d, "[daemon]")
    v.known_keys(d, DAEMON_KEYS)
    for k in ("timezone", "runs", "ledger"):
        if k in d:
            v.string(k, d[k], min_chars=1, max_chars=4096)
    tzname = d.get("timezone")
    if not tzname:
        raise DaemonConfigError(f"{where}: [daemon] timezone is required (an IANA name such as \"Asia/Seoul\" or "
                                "\"UTC\"): a cron time means nothing without its zone")
    try:
        zoneinfo.ZoneInfo(tzname)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise DaemonConfigError(f"{where}: unknown time zone {tzname!r}; use an IANA name such as \"Asia/Seoul\"") from None
    base = path.parent.resolve()
    runs = Path(d.get("runs", "runs")).expanduser()
    runs = runs if runs.is_absolute() else base / runs
    ledger = Path(d.get("ledger", runs / "ledger.sqlite")).expanduser()
    ledger = ledger if ledger.is_absolute() else base / ledger

    sweep = dict(Where(where, "[sweep]").table_of(raw.get("sweep", {}), "[sweep]"))
    if "question_guard" in sweep:
        was = "question" if sweep["question_guard"] is True else "count"
        raise DaemonConfigError(f"{where}: [sweep] question_guard is now hit5_guard: write hit5_guard = \"{was}\" "
                                f"for the same rule, or drop it for the default, {HIT5_GUARDS[0]!r} (a test with a margin)")
    bad = set(sweep) - SWEEP_KEYS
    if bad:
        raise DaemonConfigError(f"{where}: [sweep] has unknown key(s) {sorted(bad)}; valid: {sorted(SWEEP_KEYS)}")
    check_sweep_values(sweep, Where(where, "[sweep]"))
    for k in SWEEP_TABLE_PATHS:
        if k in sweep:
            p = Path(sweep[k]).expanduser()
            sweep[k] = str(p if p.is_absolute() else base / p)
    if "space" not in sweep:
        from tuner.data.bundled import default_space
        sweep["space"] = str(default_space())
    if "db" not in sweep and "vault" in sweep:
        sweep["db"] = str(default_db(sweep["vault"], runs))
    jobs_raw = Where(where).table_of(raw.get("jobs", DEFAULT_JOBS), "[jobs]")
    unknown_jobs = set(jobs_raw) - set(JOB_NAMES)
    if unknown_jobs:
        raise DaemonConfigError(f"{where}: unknown job(s) {sorted(unknown_jobs)}; jobs: {', '.join(JOB_NAMES)}")
    if not jobs_raw:      # a daemon that schedules nothing would sit there looking healthy
        raise DaemonConfigError(f"{where}: [jobs] enables no job; add one, e.g. [jobs.sweep] cron = \"5 1 * * *\" "
                                f"(jobs: {', '.join(JOB_NAMES)}), or leave [jobs] out for the default night")
    jobs = tuple(_job(n, jobs_raw[n], where) for n in JOB_NAMES if n in jobs_raw)
    if any(j.name == "calibrate" for j in jobs) and not _calibrate_available():
        raise DaemonConfigError(f"{where}: [jobs.calibrate] needs the gate calibration (tuner.gate.calibrate), which "
                                "this build does not have; remove the job or update autoresearch")

    if "holdout" in sweep and "split" in sweep:
        # the sample ships with a holdout line: a user who sets split and leaves it would be told the demo's
        # holdout file is missing, or (when it exists) have split ignored without a word
        raise DaemonConfigError(f"{where}: [sweep] sets both holdout = {sweep['holdout']} and split = {sweep['split']}; "
                                "keep one: holdout = FILE checks each night's winner on that file, split = 0.5 holds "
                                "out half of gold instead (delete the other line)")
    needs_sweep = any(j.name in ("sweep", "retest", "index", "labels") for j in jobs)
    missing = []
    if needs_sweep:
        for k in ("gold", "space") + (("vault",) if any(j.name == "index" for j in jobs) else ()):
            if k not in sweep:
                missing.append(f"[sweep] {k} is not set")
        if "db" not in sweep:
            missing.append("[sweep] db is not set")
        if "holdout" not in sweep and "split" not in sweep:
            missing.append("[sweep] needs holdout = FILE or split = 0.5 (a winner is promoted only if it holds there)")
    for k in ("vault", "gold", "holdout", "space", "score_config", "start_config"):
        if k in sweep and not Path(sweep[k]).exists():
            missing.append(f"[sweep] {k} = {sweep[k]} does not exist")
    if "db" in sweep and not Path(sweep["db"]).exists() and not any(j.name == "index" for j in jobs):
        missing.append(f"[sweep] db = {sweep['db']} does not exist and no [jobs.index] builds it")
    if missing:
        raise DaemonConfigError(f"{where}: " + "; ".join(missing) + "; fix the paths (relative ones are read from "
                                f"{base})")
    evidence = _evidence(raw.get("evidence", {}), where, base, sweep)
    if evidence.from_log is None and "gold" in sweep and _bundled(sweep["gold"]):
        # the demo's gold set ships inside the package: the labels job keeps its calls in the runs folder
        evidence = dataclasses.replace(evidence, from_log=str(Path(runs) / f"{Path(sweep['gold']).stem}.from-log.yaml"))
    cfg = DaemonConfig(str(path), tzname, str(runs), str(ledger), SweepTable.of(sweep), jobs, evidence)
    # a cron sweep with `until` may start late until its window closes
    fixed = []
    for j in jobs:
        if j.name == "sweep" and j.grace_s == 0.0 and j.until:
            first = j.trigger(cfg.tz).get_next_fire_time(None, dt.datetime.now(cfg.tz))
            j = dataclasses.replace(j, grace_s=(cfg.window_end(j, first) - first).total_seconds())
        fixed.append(j)
    return dataclasses.replace(cfg, jobs=tuple(fixed))
