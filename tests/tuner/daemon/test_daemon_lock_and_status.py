"""The daemon under hostile use: its lock file deleted under two real daemons, its runs folder removed,
`status` over a truncated state file or a damaged run table."""

import os
import shutil
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from tuner.cli import main
from tuner.daemon.scheduler import InstanceLock, LockHeld, holder_pid, status
from tests.helpers import ROOT

FAR = "0 0 1 1 *"


def _config(tmp_path):
    p = tmp_path / "daemon.toml"
    p.write_text(f'[daemon]\ntimezone = "UTC"\nruns = "runs"\n[jobs.report]\ncron = "{FAR}"\ngrace = "1s"\n')
    return p


def _spawn(config):
    return subprocess.Popen([sys.executable, "-m", "tuner.cli", "daemon", "--config", str(config)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def test_deleting_the_lock_file_does_not_let_a_second_lock_in(tmp_path):
    first = InstanceLock(tmp_path).acquire()
    try:
        (tmp_path / "daemon.lock").unlink()
        code = ("from tuner.daemon.scheduler import InstanceLock, LockHeld\nimport sys\ntry:\n InstanceLock(sys.argv[1]).acquire()\n"
                "except LockHeld as e:\n print(e); sys.exit(3)\n")
        r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert r.returncode == 3 and "another daemon" in r.stdout
        assert first.check() == "file" and (tmp_path / "daemon.lock").read_text().strip() == str(os.getpid())
        assert first.check() is None
    finally:
        first.release()
    InstanceLock(tmp_path).acquire().release()


@pytest.mark.slow
def test_two_real_daemons_when_the_lock_file_is_deleted_then_the_folder(tmp_path):
    cfg = _config(tmp_path)
    runs = tmp_path / "runs"
    a = _spawn(cfg)
    try:
        assert _wait(lambda: holder_pid(runs) == a.pid, 120), a.stderr.read() if a.poll() is not None else ""
        (runs / "daemon.lock").unlink()
        b = _spawn(cfg)
        out, err = b.communicate(timeout=120)
        assert b.returncode == 1 and "another daemon" in err, err
        assert _wait(lambda: holder_pid(runs) == a.pid, 60)        # the first wrote its lock file again
        shutil.rmtree(runs)
        assert a.wait(120) == 1, "a daemon whose runs folder was removed kept running"
        assert "was deleted or replaced" in a.stderr.read()
    finally:
        for p in (a,):
            if p.poll() is None:
                p.kill()


def test_status_survives_a_truncated_state_file_and_a_damaged_run_table(tmp_path):
    (tmp_path / "daemon-state.json").write_text('{"pid": 12, "jobs": [{"id": "sw')
    (tmp_path / "daemon.sqlite").write_bytes(b"SQLite format 3\x00" + b"\xff" * 3000)
    st = status(tmp_path)
    assert st.running is False
    assert any("daemon-state.json is damaged" in p for p in st.problems)
    assert any("daemon.sqlite cannot be read" in p for p in st.problems)
    r = CliRunner().invoke(main, ["status", "--runs", str(tmp_path)])
    assert r.exit_code == 0 and "no daemon running" in r.output


def test_status_says_why_a_run_ended_where_its_report_is_and_one_time_zone(tmp_path):
    """A declined sweep: `status` names the reason and the morning report, and shows the next and the last
    run in the daemon's own zone (the run table keeps UTC, the scheduler the daemon's zone)."""
    import datetime as dt
    import json
    from tuner.daemon.scheduler import RunTable
    (tmp_path / "daemon-state.json").write_text(json.dumps({
        "pid": 0, "timezone": "Asia/Seoul", "schedule": {"sweep": "every 1d"},
        "jobs": [{"id": "sweep", "next_run": "2026-12-04T01:05:00+09:00"}]}))
    table = RunTable(tmp_path)
    rid = table.start("sweep", dt.datetime(2026, 12, 2, 16, 5, tzinfo=dt.timezone.utc), "schedule")
    table.finish(rid, "declined", {"sweep": "s1", "promotion": {"promoted": False, "reason": "holdout regressed: hit@5 "
                                   "0.95 -> 0.90"}, "reports": {"sweep.md": "runs/reports/sweep-s1.md",
                                                                "sweep.html": "runs/reports/sweep-s1.html"}})
    table.close()
    [job] = status(tmp_path).jobs
    assert job.last_why == "holdout regressed: hit@5 0.95 -> 0.90"
    assert job.last_report == "runs/reports/sweep-s1.md"
    assert job.last_run.endswith("+09:00")
    r = CliRunner().invoke(main, ["status", "--runs", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "why: holdout regressed: hit@5 0.95 -> 0.90" in r.output and "report: runs/reports/sweep-s1.md" in r.output
    assert "+00:00" not in r.output


@pytest.mark.slow
def test_a_sweep_killed_before_its_promotion_is_decided_on_restart(tmp_path, db_copy):
    from tests.helpers import DEMO_VAULT
    from tests.helpers.sweeps import DEMO_HOLD, DEMO_TUNE, FUSION_SPACE, small_gold
    from tuner.ledger.ledger import Ledger
    from tuner.promotion.promote import History
    (tmp_path / "space.toml").write_text(FUSION_SPACE)
    tune, hold = small_gold(DEMO_TUNE, tmp_path / "tune.yaml", 3), small_gold(DEMO_HOLD, tmp_path / "hold.yaml", 5)
    cfg = tmp_path / "daemon.toml"
    cfg.write_text(f'[daemon]\ntimezone = "UTC"\nruns = "runs"\n[sweep]\nvault = "{DEMO_VAULT}"\ndb = "{db_copy}"\n'
                   f'gold = "{tune}"\nholdout = "{hold}"\nspace = "space.toml"\nrounds = 3\n'
                   '[jobs.sweep]\nevery = "1d"\nbudget = "30m"\n')
    runs = tmp_path / "runs"
    r = CliRunner().invoke(main, ["daemon", "--config", str(cfg), "--once", "sweep"])
    assert r.exit_code == 0, r.output
    # what a kill between the sweep's end and its decision leaves: a finished sweep, no decision
    (runs / "promotions.sqlite").unlink()
    (runs / "active.toml").unlink(missing_ok=True)
    lg = Ledger(runs / "ledger.sqlite")
    first = lg.sweep().id
    lg.close()
    r = CliRunner().invoke(main, ["daemon", "--config", str(cfg), "--once", "sweep"])
    assert r.exit_code == 0, r.output
    lg = Ledger(runs / "ledger.sqlite")
    sweeps = [s.id for s in lg.sweeps()]
    lg.close()
    assert sweeps == [first], "a new sweep started over the undecided one"
    h = History(runs)
    assert [e.sweep for e in h.events()] == [first]
    h.close()


def test_a_report_before_the_first_sweep_is_skipped_saying_why_not_failed(tmp_path):
    """A first start whose report slot is caught up before the night's first sweep: nothing to report yet is
    no failure, and status says why."""
    r = CliRunner().invoke(main, ["daemon", "--config", str(_config(tmp_path)), "--once", "report"])
    assert r.exit_code == 0, r.output
    assert '"outcome": "skipped"' in r.output, r.output
    [job] = [j for j in status(tmp_path / "runs").jobs if j.job == "report"]
    assert job.last_outcome == "skipped"
    assert job.last_why == f"no sweep in {tmp_path / 'runs' / 'ledger.sqlite'} yet; the report follows the first sweep"


def test_status_after_a_daemon_stops_says_why_there_is_no_next_run_and_when_one_would_be(tmp_path):
    """A real daemon shows its job's next run; once it stopped (SIGTERM), nothing is scheduled: status says so,
    since when, and the time the job runs once a daemon is started again, instead of a bare dash."""
    import signal
    cfg = _config(tmp_path)
    runs = tmp_path / "runs"
    proc = _spawn(cfg)
    try:
        assert _wait(lambda: holder_pid(runs) == proc.pid and any(j.next_run for j in status(runs).jobs), 120), \
            proc.stderr.read() if proc.poll() is not None else ""
        [job] = status(runs).jobs
        assert job.next_run.startswith("20") and job.next_run.endswith("-01-01T00:00:00+00:00") and job.next_why is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    [job] = status(runs).jobs
    assert job.next_run is None
    assert job.next_why.startswith("no daemon is running since ") and f"--config {cfg}" in job.next_why, job.next_why
    assert job.next_why.endswith("-01-01T00:00:00+00:00"), job.next_why       # the cron's next slot, computed
    r = CliRunner().invoke(main, ["status", "--runs", str(runs)])
    assert r.exit_code == 0 and "next –" not in r.output and "next: no daemon is running since" in r.output, r.output


def test_a_lock_held_by_a_once_run_shows_no_earlier_daemons_next_runs(tmp_path):
    """`daemon --once` holds the lock under the state file an earlier daemon left: those next runs are no
    schedule (nobody runs it), so status says none, and why."""
    import json
    (tmp_path / "daemon-state.json").write_text(json.dumps({
        "pid": 2 ** 22 + 7, "config": "daemon.toml", "timezone": "UTC", "schedule": {"report": f"cron {FAR!r}"},
        "triggers": {"report": {"cron": FAR}}, "jobs": [{"id": "report", "next_run": "2026-01-01T00:00:00+00:00"}]}))
    lock = InstanceLock(tmp_path).acquire()          # this process, as a --once run
    try:
        [job] = status(tmp_path).jobs
    finally:
        lock.release()
    assert job.next_run is None and f"(pid {os.getpid()}) runs no schedule" in job.next_why, job
