"""The tuning daemon: APScheduler 3.11 runs the jobs of a config; one instance per runs folder.

Choice: jobs live in memory (a BackgroundScheduler with a MemoryJobStore), and missed runs are decided
from our own run table (`runs/daemon.sqlite`), not from a pickled SQLite job store. The store's
pitfalls are then moot (re-adding with replace_existing loses a run missed during downtime; adding
before start() duplicates), and the rule is ours and testable: at start, for each job, the latest
scheduled time within its grace (the sweep's grace is its window) that has no finished run is run once
now (coalesced); a sweep whose process died (kill -9) is resumed, same sweep id and baseline.
While running, APScheduler's own misfire_grace_time is set to the same grace (its default of 1 s would
silently skip a run that is a few seconds late), coalesce=True and max_instances=1, and one worker
thread runs jobs one after another (index before sweep when both fire together).

A clock that jumps: forward, the jobs it skipped are late and run if within grace, else recorded as
missed; backward, a scheduled time that already has a finished run is never run twice.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import logging.handlers
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from search_core import SearchCoreError, StopRequested
from search_core.files import FolderLock, LockBusy, PidLock, atomic_write_text, folder_locked, lock_holder
from search_core.index.store import atomic, connect

from tuner.daemon.config import DaemonConfig
from tuner.daemon.jobs import NIGHT
from tuner.daemon.signals import SignalInbox

LOCK = "daemon.lock"
RUNS_DB = "daemon.sqlite"
STATE = "daemon-state.json"
LOG = "daemon.log"
LOG_BYTES, LOG_BACKUPS = 1_000_000, 5     # at most ~6 MB of log under runs/
STATE_EVERY_S = 5                         # the main thread refreshes next-run times this often after a job

RUNS_SCHEMA = """CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY, job TEXT NOT NULL, scheduled TEXT NOT NULL, started TEXT NOT NULL, finished TEXT,
    pid INTEGER NOT NULL, trigger TEXT NOT NULL, outcome TEXT, detail TEXT)"""

log = logging.getLogger("autoresearch.daemon")


class LockHeld(SearchCoreError):
    pass


def _iso(t: dt.datetime) -> str:
    return t.isoformat(timespec="seconds")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- one instance ---------------------------------------------------------------------------------------
class InstanceLock:
    """Two flocks, both released by the kernel when the process dies: on the runs folder itself (what makes
    one daemon per folder: `rm runs/daemon.lock` cannot take it away) and on runs/daemon.lock, which holds
    the pid for `status` and `kill`. `check()` tells a running daemon whether either was replaced."""

    def __init__(self, runs: str | Path):
        self.runs = Path(runs)
        self.path = self.runs / LOCK
        self.lock = PidLock(self.path)
        self.folder = FolderLock(self.runs)

    def _busy(self) -> LockHeld:
        holder = lock_holder(self.path)
        holder = holder if holder is not None and holder > 0 else "unknown"
        return LockHeld(f"another daemon (pid {holder}) holds {self.path}; stop it with `kill {holder}` "
                        "(it ends at a round boundary) or use another runs folder")

    def acquire(self) -> "InstanceLock":
        try:
            self.runs.mkdir(parents=True, exist_ok=True)
            self.folder.acquire()
        except LockBusy:
            raise self._busy() from None
        except OSError as e:
            raise SearchCoreError(f"cannot write to the runs folder {self.runs}: {e.strerror}; make it "
                                  "writable or set [daemon] runs to another folder") from None
        try:
            self.lock.acquire()
        except LockBusy:
            self.release()
            raise self._busy() from None
        except OSError as e:
            self.release()
            raise SearchCoreError(f"cannot write to the runs folder {self.runs}: {e.strerror}; make it "
                                  "writable or set [daemon] runs to another folder") from None
        return self

    def check(self) -> str | None:
        """None while both locks are ours; "file" when daemon.lock was deleted or replaced (rewritten here:
        the folder lock still keeps others out); "folder" when the runs folder itself is gone or replaced
        (then another daemon may already run there: the caller stops)."""
        if self.folder.replaced():
            return "folder"
        try:
            if os.stat(self.path).st_ino == os.fstat(self.lock.fd).st_ino:
                return None
        except FileNotFoundError:
            pass
        self.lock.release()
        self.lock.acquire()
        return "file"

    def release(self):
        self.lock.release()
        self.folder.release()


def holder_pid(runs: str | Path) -> int | None:
    """The pid of the daemon holding the lock (-1 when one holds the folder but its lock file is gone),
    or None when nobody holds it."""
    runs = Path(runs)
    pid = lock_holder(runs / LOCK)
    if pid is None and folder_locked(runs):
        return -1
    return pid


# -- the run table --------------------------------------------------------------------------------------
class RunTable:
    def __init__(self, runs: str | Path):
        self.new = not (Path(runs) / RUNS_DB).exists()    # no daemon ever ran in this runs folder
        self.conn = connect(Path(runs) / RUNS_DB)
        self.conn.execute(RUNS_SCHEMA)
        self.lock = threading.Lock()

    def close(self):
        self.conn.close()

    def start(self, job: str, scheduled: dt.datetime, trigger: str) -> int:
        with self.lock, atomic(self.conn):
            return self.conn.execute("INSERT INTO runs(job, scheduled, started, pid, trigger) VALUES (?,?,?,?,?)",
                                     (job, _iso(scheduled), _iso(dt.datetime.now(dt.timezone.utc)), os.getpid(),
                                      trigger)).lastrowid

    def finish(self, run_id: int, outcome: str, detail: dict) -> None:
        with self.lock, atomic(self.conn):
            self.conn.execute("UPDATE runs SET finished = ?, outcome = ?, detail = ? WHERE id = ?",
                              (_iso(dt.datetime.now(dt.timezone.utc)), outcome,
                               json.dumps(detail, ensure_ascii=False, default=str), run_id))

    def note(self, run_id: int, detail: dict) -> None:
        """Record what a run is working on (the sweep id) before it finishes, for a resume after kill -9."""
        with self.lock, atomic(self.conn):
            self.conn.execute("UPDATE runs SET detail = ? WHERE id = ?", (json.dumps(detail, default=str), run_id))

    def missed(self, job: str, scheduled: dt.datetime, why: str) -> None:
        rid = self.start(job, scheduled, "missed")
        self.finish(rid, "missed", {"why": why})

    def rows(self, job: str | None = None, limit: int = 1000) -> list["RunRow"]:
        """The job's runs (every job's without one), newest first."""
        q = f"SELECT {', '.join(RunRow.COLUMNS)} FROM runs" + (" WHERE job = ?" if job else "") + \
            " ORDER BY id DESC LIMIT ?"
        with self.lock:
            found = self.conn.execute(q, ((job, limit) if job else (limit,))).fetchall()
        return [RunRow.from_columns(r) for r in found]

    def finished_for(self, job: str, scheduled: dt.datetime) -> bool:
        with self.lock:
            return self.conn.execute("SELECT 1 FROM runs WHERE job = ? AND scheduled = ? AND finished IS NOT NULL "
                                     "AND outcome != 'missed'", (job, _iso(scheduled))).fetchone() is not None

    def dead_unfinished(self, job: str) -> list["RunRow"]:
        """Runs that started and never finished, whose process is gone: killed (kill -9, power loss)."""
        return [r for r in self.rows(job) if r.finished is None and not (r.pid == os.getpid() or pid_alive(r.pid))]


@dataclass(frozen=True)
class RunRow:
    """One row of the run table, the only code that knows its columns. `detail` is the JSON the job wrote
    (a job's own record through its to_json, or {"why": ...} for a missed slot), read back as written."""
    COLUMNS: ClassVar[tuple[str, ...]] = ("id", "job", "scheduled", "started", "finished", "pid", "trigger",
                                          "outcome", "detail")
    id: int
    job: str
    scheduled: str             # ISO time of the slot it ran for
    started: str
    finished: str | None       # None: running, or its process died
    pid: int
    trigger: str               # schedule, once, catch-up, missed, ...
    outcome: str | None
    detail: dict | None

    @classmethod
    def from_columns(cls, row) -> "RunRow":
        *head, detail = row
        return cls(*head, json.loads(detail) if detail else None)

    def to_json(self) -> dict:
        return {c: getattr(self, c) for c in self.COLUMNS}


# -- deciding missed runs (pure, given a trigger) ---------------------------------------------------------
def last_fire(trigger, now: dt.datetime, lookback_s: float) -> dt.datetime | None:
    """The latest fire time of `trigger` in (now - lookback, now]."""
    t = trigger.get_next_fire_time(None, now - dt.timedelta(seconds=lookback_s))
    last = None
    n = 0
    while t is not None and t <= now and n < 100_000:
        last, n = t, n + 1
        t = trigger.get_next_fire_time(t, t + dt.timedelta(microseconds=1))
    return last


def catch_up_plan(cfg: DaemonConfig, table: RunTable, now: dt.datetime,
                  first_start: bool = False) -> list[tuple[str, dt.datetime, str]]:
    """(job, scheduled time, why) to run once now, at start: a slot within its grace with no finished run,
    or a run whose process died. Slots outside the grace are recorded as missed, except at a runs folder's
    first start (`first_start`): a slot from before the daemon was ever set up was not missed, and `status`
    would show "missed" for every job a new user has not yet had a night of."""
    plan = []
    for j in cfg.jobs:
        trig = j.trigger(cfg.tz)
        slot = last_fire(trig, now, max(j.grace_s, 1.0) * 4 if j.every_s is None else max(j.grace_s, j.every_s) * 2)
        dead = table.dead_unfinished(j.name)
        if dead:
            for r in dead:   # close the dead run so it is not resumed twice
                table.finish(r.id, "killed", {**(r.detail or {}), "note": "the process died mid-run"})
            sched = dt.datetime.fromisoformat(dead[0].scheduled)
            if (now - sched).total_seconds() <= j.grace_s:
                plan.append((j.name, sched, f"resume: run #{dead[0].id} was killed"))
                continue
        if slot is None or table.finished_for(j.name, slot):
            continue
        late = (now - slot).total_seconds()
        if late <= j.grace_s:
            plan.append((j.name, slot, f"catch-up: scheduled {_iso(slot)}, {late:.0f}s ago"))
        elif not first_start and not any(r.scheduled == _iso(slot) for r in table.rows(j.name, 50)):
            table.missed(j.name, slot, f"the daemon was not running; {late:.0f}s late is past the grace of "
                                       f"{j.grace_s:.0f}s")
    return plan


# -- the daemon -----------------------------------------------------------------------------------------
def setup_log(runs: Path) -> logging.Handler:
    h = logging.handlers.RotatingFileHandler(runs / LOG, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8")
    h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("autoresearch", "apscheduler"):
        lg = logging.getLogger(name)
        lg.addHandler(h)
        lg.setLevel(logging.INFO)
    return h


class Daemon:
    def __init__(self, cfg: DaemonConfig, *, start_in: float | None = None):
        self.cfg = cfg
        self.runs = Path(cfg.runs)
        self.stop = threading.Event()
        self.start_in = start_in
        self.lock = InstanceLock(self.runs)
        self.table: RunTable | None = None
        self.scheduler = None
        self.state_dirty = False

    # one job, recorded ---------------------------------------------------------------------------------
    def run_job(self, name: str, scheduled: dt.datetime | None = None, trigger: str = "schedule") -> JobRun:
        from tuner.daemon.jobs import JOBS
        job = self.cfg.job(name)
        now = dt.datetime.now(self.cfg.tz)
        if scheduled is None:
            scheduled = last_fire(job.trigger(self.cfg.tz), now + dt.timedelta(seconds=1), max(job.grace_s, 3600)) \
                if trigger == "schedule" else now
            scheduled = scheduled or now
        if self.stop.is_set():
            # queued behind the job that was running when the stop came (--start-in queues the whole night):
            # left unrecorded, so the next start catches it up within its grace
            log.info("%s not started: the daemon is stopping", name)
            return JobRun(None, "skipped", {"why": "the daemon is stopping"})
        if trigger == "schedule" and self.table.finished_for(name, scheduled):
            log.warning("%s at %s already ran (did the clock jump back?); not running it twice", name, _iso(scheduled))
            return JobRun(None, "skipped", {"why": "already ran"})
        rid = self.table.start(name, scheduled, trigger)
        log.info("job %s started (%s, scheduled %s, run #%d)", name, trigger, _iso(scheduled), rid)
        try:
            outcome, detail = JOBS[name](self, job, scheduled, rid)
        except StopRequested as e:    # the stop flag, seen at a job's next step (a StopRequested says which)
            resume = ("; the next run resumes (embeddings already computed are in the embedding cache)"
                      if name == "index" else "; the next scheduled run does it again")
            outcome, detail = "stopped", {"note": f"stopped when asked ({e}){resume}"}
        except SearchCoreError as e:
            outcome, detail = "failed", {"error": str(e)}
        except Exception as e:   # a bug in one job must not end the daemon
            log.exception("job %s crashed", name)
            outcome, detail = "crashed", {"error": f"{type(e).__name__}: {e}"}
        self.table.finish(rid, outcome, detail)
        log.info("job %s: %s %s", name, outcome, json.dumps(detail, ensure_ascii=False, default=str)[:500])
        # the state file is written by the main thread: APScheduler 3's shutdown() holds the job-store lock
        # while it waits for running jobs, so a job calling get_jobs() at its end would deadlock the stop
        self.state_dirty = True
        return JobRun(rid, outcome, detail)

    def _stop_on_signal(self, signum: int) -> None:
        # the flag first: a line in the log means the running job sees the stop from then on
        self.stop.set()
        log.info("signal %d: stopping at the running job's next step (a sweep's round, an index build's batch "
                 "of embeddings, a search of the calibration, a report's render); no other job starts", signum)

    def write_state(self, *, stopped: bool = False):
        """The schedule `status` reads: each job's next run while this daemon runs; at a clean stop, when it
        stopped and no next runs (nothing is scheduled once the daemon is gone)."""
        jobs = []
        if self.scheduler is not None and not stopped:
            for j in self.scheduler.get_jobs():
                jobs.append({"id": j.id, "next_run": _iso(j.next_run_time) if j.next_run_time else None})
        now = _iso(dt.datetime.now(self.cfg.tz))
        state = {"pid": os.getpid(), "config": self.cfg.path, "timezone": self.cfg.timezone,
                 "written": now, "jobs": jobs, **({"stopped": now} if stopped else {}),
                 "schedule": {j.name: j.schedule_text() for j in self.cfg.jobs},
                 "triggers": {j.name: {"cron": j.cron} if j.cron else {"every_s": j.every_s} for j in self.cfg.jobs}}
        atomic_write_text(self.runs / STATE, json.dumps(state, indent=1))

    # the loop ------------------------------------------------------------------------------------------
    def open(self):
        self.lock.acquire()
        self.table = RunTable(self.runs)
        return self

    def close(self):
        if self.table:
            self.table.close()
        self.lock.release()

    def serve(self) -> int:
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.jobstores.memory import MemoryJobStore
        from apscheduler.schedulers.background import BackgroundScheduler

        self.open()                      # the lock first: a second instance writes nothing
        handler = setup_log(self.runs)
        exit_code = 0
        inbox = SignalInbox()            # a signal is taken by the loop below, never by code inside a handler
        try:
            sched = BackgroundScheduler(jobstores={"default": MemoryJobStore()},
                                        executors={"default": ThreadPoolExecutor(1)}, timezone=self.cfg.tz)
            self.scheduler = sched
            now = dt.datetime.now(self.cfg.tz)
            for j in self.cfg.jobs:
                trig = j.trigger(self.cfg.tz)
                if self.start_in is not None and j.name in NIGHT:
                    from apscheduler.triggers.date import DateTrigger
                    # --start-in: the night's chain once, N seconds from now, in order (one worker thread)
                    at = now + dt.timedelta(seconds=self.start_in + 0.01 * NIGHT.index(j.name))
                    sched.add_job(self.run_job, DateTrigger(at), args=[j.name, at, "start-in"], id=f"{j.name}-start-in",
                                  misfire_grace_time=int(max(j.grace_s, 60)), coalesce=True, max_instances=1)
                sched.add_job(self.run_job, trig, args=[j.name], id=j.name, misfire_grace_time=int(max(j.grace_s, 1)),
                              coalesce=True, max_instances=1)
            from apscheduler.events import EVENT_JOB_MISSED

            def on_missed(ev):
                name = ev.job_id.split("-")[0]
                self.table.missed(name, ev.scheduled_run_time, "later than its grace (clock jump or a long job before it)")
            sched.add_listener(on_missed, EVENT_JOB_MISSED)
            for i, (name, slot, why) in enumerate(catch_up_plan(self.cfg, self.table, now, self.table.new)):
                log.info("%s: %s", name, why)
                # in the config's order (index before sweep before report), as --start-in queues the night:
                # jobs due at one instant run in no set order
                at = now + dt.timedelta(seconds=0.01 * i)
                sched.add_job(self.run_job, "date", run_date=at, args=[name, slot, why.split(":")[0]],
                              id=f"{name}-catchup", misfire_grace_time=None, coalesce=True, max_instances=1)
            sched.start()
            self.write_state()
            log.info("daemon started, pid %d, config %s, jobs: %s", os.getpid(), self.cfg.path,
                     "; ".join(f"{j.name} {j.schedule_text()}" for j in self.cfg.jobs))
            while True:
                signum = inbox.wait(STATE_EVERY_S)
                if signum is not None:
                    self._stop_on_signal(signum)
                    break
                lost = self.lock.check()
                if lost == "folder":
                    msg = (f"the runs folder {self.runs} was deleted or replaced under this daemon; stopping (another "
                           "daemon may use the new folder, and every file this one writes would be lost)")
                    log.error(msg)
                    print(f"autoresearch daemon: {msg}", file=sys.stderr, flush=True)
                    self.stop.set()
                    exit_code = 1
                    break
                if lost == "file":
                    log.warning("%s was deleted or replaced; written again (the folder lock kept others out)",
                                self.lock.path)
                if self.state_dirty:
                    self.state_dirty = False
                    self.write_state()
            sched.shutdown(wait=True)     # the running job sees the stop flag; the queued ones see it and do not start
            if not exit_code:
                self.write_state(stopped=True)
            log.info("daemon stopped cleanly" if not exit_code else "daemon stopped: its runs folder is gone")
            return exit_code
        finally:
            inbox.close()
            self.close()
            for name in ("autoresearch", "apscheduler"):
                logging.getLogger(name).removeHandler(handler)
            handler.close()


@dataclass(frozen=True)
class JobRun:
    """One run of a job: its row in the run table (None: skipped, never recorded), how it ended, and the
    job's detail as the run table keeps it (JSON the job wrote: a job's own record, through its to_json)."""
    run: int | None
    outcome: str                # ok, promoted, declined, stopped, skipped, failed, crashed, unavailable, missed
    detail: dict

    def to_json(self) -> dict:
        return {**({"run": self.run} if self.run is not None else {}), "outcome": self.outcome, **self.detail}


@dataclass(frozen=True)
class JobStatus:
    job: str
    schedule: str | None
    next_run: str | None
    last_run: str | None
    last_outcome: str | None
    last_why: str | None        # the one line that says why the last run ended as it did
    last_report: str | None     # the Markdown report it wrote
    last_detail: dict | None    # its detail as the run table keeps it
    next_why: str | None = None  # when next_run is None: why nothing is scheduled, and what would run it

    def to_json(self) -> dict:
        return {"job": self.job, "schedule": self.schedule, "next_run": self.next_run, "next_why": self.next_why,
                "last_run": self.last_run, "last_outcome": self.last_outcome, "last_why": self.last_why,
                "last_report": self.last_report, "last_detail": self.last_detail}


@dataclass(frozen=True)
class DaemonStatus:
    """What `status` shows; `to_json` is its --json output."""
    runs: str
    running: bool               # a daemon holds the runs folder's lock
    pid: int | None
    config: str | None          # the config the running daemon was started with
    jobs: tuple[JobStatus, ...]
    problems: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"runs": self.runs, "daemon": {"running": self.running, "pid": self.pid}, "config": self.config,
                "jobs": [j.to_json() for j in self.jobs], **({"problems": list(self.problems)} if self.problems else {})}


def status(runs: str | Path) -> DaemonStatus:
    """Jobs, their next and last runs, the last outcome, and who holds the lock. A damaged state file or
    run table is reported in `problems` (status is what one runs when something is wrong)."""
    runs = Path(runs)
    holder = holder_pid(runs) if runs.exists() else None
    problems = []
    state = {}
    if (runs / STATE).exists():
        try:
            state = json.loads((runs / STATE).read_text(encoding="utf-8"))
            if not isinstance(state, dict):
                raise ValueError("not a JSON object")
        except (ValueError, OSError) as e:
            state = {}
            problems.append(f"{runs / STATE} is damaged ({e}); the daemon rewrites it (restart it if it is not running)")
    jobs = []
    table = None
    try:
        if (runs / RUNS_DB).exists():
            table = RunTable(runs)
        nxt = {j["id"]: j["next_run"] for j in state.get("jobs", [])} if schedule_running(state, holder) else {}
        names = list(state.get("schedule", {})) or sorted({r.job for r in (table.rows() if table else [])})
        tz = _zone(state.get("timezone"))
        now = dt.datetime.now(tz or dt.timezone.utc)
        for name in names:
            last = (table.rows(name, 1) if table else []) or [None]
            detail = last[0] and last[0].detail
            jobs.append(JobStatus(name, state.get("schedule", {}).get(name), _in_zone(nxt.get(name), tz),
                                  last[0] and _in_zone(last[0].started, tz),
                                  last[0] and (last[0].outcome or "running"), _why(detail), _report_path(detail),
                                  detail, None if nxt.get(name) else no_next_run(state, holder, name, now)))
    except Exception as e:     # sqlean's DatabaseError on a damaged file, a JSON detail cut short
        problems.append(f"{runs / RUNS_DB} cannot be read ({type(e).__name__}: {e}); move it away: the daemon starts "
                        "a new run table (missed runs before it are then not caught up)")
    finally:
        if table:
            table.close()
    return DaemonStatus(str(runs), holder is not None, holder, state.get("config"), tuple(jobs), tuple(problems))


def schedule_running(state: dict, holder: int | None) -> bool:
    """Whether the state file's next runs are a running daemon's: the lock's holder wrote them and has not
    stopped (a `daemon --once` run holds the lock too, under a state file an earlier daemon left)."""
    if holder is None or state.get("stopped"):
        return False
    return holder == -1 or state.get("pid") == holder      # -1: the folder is held, its lock file gone


def no_next_run(state: dict, holder: int | None, job: str, now: dt.datetime) -> str:
    """Why `status` shows no next run for `job`, and when it would run once a daemon runs the schedule."""
    start = f"`autoresearch daemon --config {state.get('config') or 'CONFIG'}`"
    if holder is None:
        stopped = f" since {_in_zone(state['stopped'], now.tzinfo)}" if state.get("stopped") else ""
        return (f"no daemon is running{stopped}, so nothing is scheduled; started with {start}, "
                + would_run(state.get("triggers", {}).get(job), state.get("schedule", {}).get(job), now))
    if state.get("stopped") and state.get("pid") == holder:
        return f"the daemon (pid {holder}) is stopping: nothing more is scheduled"
    if not schedule_running(state, holder):
        return (f"the process holding the lock (pid {holder}) runs no schedule (a `daemon --once` run, or a daemon "
                "still starting); the next runs show once a daemon runs it")
    return "the running daemon has no next run for it (its scheduler dropped the job: see daemon.log in the runs folder)"


def would_run(trigger: dict | None, schedule: str | None, now: dt.datetime) -> str:
    """When a job would run next once a daemon is started now (its state file's trigger; a state file
    written before it kept triggers has the schedule's text alone)."""
    trigger = trigger or {}
    if trigger.get("every_s"):
        return f"it runs every {trigger['every_s']:g}s from the daemon's start"
    if trigger.get("cron"):
        try:
            from apscheduler.triggers.cron import CronTrigger
            t = CronTrigger.from_crontab(trigger["cron"], timezone=now.tzinfo).get_next_fire_time(None, now)
            if t is not None:
                return f"it runs next at {_iso(t)}"
        except ImportError:       # status runs without the tune extra; the schedule still says when
            pass
        return f"it runs at cron {trigger['cron']!r}"
    return f"it runs on its schedule ({schedule})" if schedule else "it runs on its schedule"


def _zone(name):
    """The daemon's own time zone (its state file names it), so one status line never mixes two offsets."""
    try:
        return ZoneInfo(name) if name else None
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _in_zone(stamp, tz):
    if not stamp or tz is None:
        return stamp
    try:
        return _iso(dt.datetime.fromisoformat(str(stamp)).astimezone(tz))
    except ValueError:
        return stamp


def _why(detail) -> str | None:
    """The one line that says why a run ended as it did: its error, the promotion's reason, why a proposal was
    declined, or its note."""
    if not isinstance(detail, dict):
        return None
    promo = detail.get("promotion")
    for why in (detail.get("error"), promo.get("reason") if isinstance(promo, dict) else None,
                detail.get("declined"), detail.get("note"), detail.get("why")):
        if why:
            return str(why)
    return None


def _report_path(detail) -> str | None:
    """The Markdown report a run wrote (the sweep's morning report, a re-test's), if any."""
    reports = detail.get("reports") if isinstance(detail, dict) else None
    if isinstance(reports, dict):
        md = [p for k, p in reports.items() if str(k).endswith(".md") or str(p).endswith(".md")]
        return str(md[0]) if md else None
    return None


def run_once(cfg: DaemonConfig, job: str) -> JobRun:
    """`daemon --once JOB`: run one job now, under the same lock and run table as the daemon."""
    d = Daemon(cfg)
    cfg.job(job)    # an unknown or disabled job is refused before anything is written
    d.open()
    handler = setup_log(Path(cfg.runs))
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda s, f: d.stop.set())
        return d.run_job(job, trigger="once")
    finally:
        d.close()
        for name in ("autoresearch", "apscheduler"):
            logging.getLogger(name).removeHandler(handler)
        handler.close()


def wait_until(pred, timeout: float, step: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()
