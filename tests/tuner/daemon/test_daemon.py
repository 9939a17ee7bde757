"""The daemon: config validation, one instance, missed-run decisions, SIGTERM at a round boundary, and a
real subprocess that is killed with -9 mid-sweep and resumes the same sweep when restarted."""

import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from tuner.cli import main
from tuner.daemon.scheduler import Daemon, InstanceLock, LockHeld, RunTable, catch_up_plan, holder_pid, last_fire, status
from tuner.daemon.config import DaemonConfigError, load_daemon_config
from tuner.ledger.ledger import Ledger
from tests.helpers import DEMO_VAULT, ROOT
from tests.helpers.sweeps import DEMO_HOLD as HOLD
from tests.helpers.sweeps import DEMO_TUNE as TUNE
from tests.helpers.sweeps import FUSION_SPACE, small_gold

FAR = "0 0 1 1 *"     # 1 January: never inside a test's look-back


def write_config(tmp_path, db, *, rounds=30, jobs=None, extra_sweep="", daemon_extra=""):
    (tmp_path / "space.toml").write_text(FUSION_SPACE)
    tune = small_gold(TUNE, tmp_path / "tune.yaml", 3)
    hold = small_gold(HOLD, tmp_path / "hold.yaml", 5)
    jobs = jobs if jobs is not None else (
        f'[jobs.index]\ncron = "{FAR}"\ngrace = "1s"\n'
        '[jobs.sweep]\nevery = "1d"\nbudget = "30m"\n'
        f'[jobs.report]\ncron = "{FAR}"\ngrace = "1s"\n')
    text = (f'[daemon]\ntimezone = "Asia/Seoul"\nruns = "runs"\n{daemon_extra}\n'
            f'[sweep]\nvault = "{DEMO_VAULT}"\ndb = "{db}"\ngold = "{tune}"\nholdout = "{hold}"\n'
            f'space = "space.toml"\nrounds = {rounds}\n{extra_sweep}\n' + jobs)
    p = tmp_path / "daemon.toml"
    p.write_text(text)
    return p


@pytest.fixture
def db_copy_e5(demo_index_e5, tmp_path):
    """For a daemon in a process of its own: the test embedder is registered only in this one."""
    dst = tmp_path / "index.sqlite"
    shutil.copy(demo_index_e5, dst)
    return dst


# -- config ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("jobs, message", [
    ('[jobs.sweep]\ncron = "61 1 * * *"\n', r"cron '61 1 \* \* \*' is not a cron expression .*five fields"),
    ('[jobs.sweep]\ncron = "0 1 * *"\n', "Wrong number of fields"),
    ('[jobs.nightly]\ncron = "0 1 * * *"\n', r"unknown job\(s\) \['nightly'\]; jobs: index, sweep, report, retest, calibrate"),
    ('[jobs.sweep]\ncron = "0 1 * * *"\nevery = "1h"\n', "exactly one of cron"),
    ('[jobs.sweep]\ncron = "0 1 * * *"\nuntil = "25:00"\n', "not a time like"),
])
def test_bad_schedules_are_refused_naming_the_fix(tmp_path, demo_db, jobs, message):
    with pytest.raises(DaemonConfigError, match=message):
        load_daemon_config(write_config(tmp_path, demo_db, jobs=jobs))


def test_bad_config_files_are_refused(tmp_path, demo_db):
    p = write_config(tmp_path, demo_db)
    p.write_text(p.read_text().replace('timezone = "Asia/Seoul"', 'timezone = "Mars/Olympus"'))
    with pytest.raises(DaemonConfigError, match="unknown time zone 'Mars/Olympus'"):
        load_daemon_config(p)
    p.write_text(p.read_text().replace('timezone = "Mars/Olympus"', ""))
    with pytest.raises(DaemonConfigError, match="timezone is required"):
        load_daemon_config(p)
    p = write_config(tmp_path, demo_db)
    p.write_text(p.read_text().replace(str(tmp_path / "tune.yaml"), "/nope/tune.yaml").replace(str(DEMO_VAULT), "/nope/vault"))
    with pytest.raises(DaemonConfigError, match=r"vault = /nope/vault does not exist; \[sweep\] gold = /nope/tune.yaml does not exist; fix the paths"):
        load_daemon_config(p)
    r = CliRunner().invoke(main, ["daemon", "--config", str(tmp_path / "absent.toml")])
    assert r.exit_code == 1 and "daemon config" in r.output and "does not exist" in r.output
    cfg = load_daemon_config(write_config(tmp_path, demo_db))
    with pytest.raises(DaemonConfigError, match="job 'retest' is not enabled.*enabled jobs: index, sweep, report"):
        cfg.job("retest")
    with pytest.raises(SearchCoreError, match=r"\[sweep\] objective = 'hit5' is not one of score100, mrr, hit@5, ndcg@10 "
                                              r"\(did you mean 'hit@5'\?\)"):
        load_daemon_config(write_config(tmp_path, demo_db, extra_sweep='objective = "hit5"'))
    r = CliRunner().invoke(main, ["daemon", "--config", str(p), "--once", "nightly"])
    assert r.exit_code == 2 and "'nightly' is not one of 'index', 'sweep', 'report', 'retest', 'calibrate'" in r.output


def test_the_nights_keep_rule_is_the_noninferior_test_unless_the_config_names_another(tmp_path, demo_db):
    from tuner.daemon.jobs import sweep_params
    cfg = load_daemon_config(write_config(tmp_path, demo_db))
    rule = sweep_params(cfg.sweep, cfg.sweep.db, Path(cfg.runs), None).rule()
    assert (rule.hit5_guard, rule.hit5_margin, rule.guard_alpha, rule.noise_alpha) == ("noninferior", 2.0, 0.05, 0.05)
    cfg = load_daemon_config(write_config(tmp_path, demo_db, extra_sweep='hit5_guard = "count"\nhit5_margin = 3'))
    rule = sweep_params(cfg.sweep, cfg.sweep.db, Path(cfg.runs), None).rule()
    assert (rule.hit5_guard, rule.hit5_margin) == ("count", 3.0)
    with pytest.raises(SearchCoreError, match=r"\[sweep\] hit5_guard = 'veto' is not one of noninferior, count, question"):
        load_daemon_config(write_config(tmp_path, demo_db, extra_sweep='hit5_guard = "veto"'))
    with pytest.raises(DaemonConfigError, match=r'question_guard is now hit5_guard: write hit5_guard = "question"'):
        load_daemon_config(write_config(tmp_path, demo_db, extra_sweep="question_guard = true"))
    with pytest.raises(SearchCoreError, match="guard_alpha = 0.9 .* at most 0.5"):
        load_daemon_config(write_config(tmp_path, demo_db, extra_sweep="guard_alpha = 0.9"))


def test_default_sweep_window_is_its_grace(tmp_path, demo_db):
    cfg = load_daemon_config(write_config(tmp_path, demo_db, jobs='[jobs.sweep]\ncron = "0 1 * * *"\nuntil = "07:00"\n'))
    j = cfg.job("sweep")
    assert j.grace_s == 6 * 3600
    fired = dt.datetime(2026, 11, 30, 1, 0, tzinfo=cfg.tz)
    assert cfg.window_end(j, fired) == dt.datetime(2026, 11, 30, 7, 0, tzinfo=cfg.tz)


# -- one instance -----------------------------------------------------------------------------------------
def test_second_instance_is_refused_naming_the_pid(tmp_path):
    lock = InstanceLock(tmp_path).acquire()
    try:
        code = ("from tuner.daemon.scheduler import InstanceLock, LockHeld\nimport sys\ntry:\n InstanceLock(sys.argv[1]).acquire()\n"
                "except LockHeld as e:\n print(e); sys.exit(3)\n")
        r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert r.returncode == 3 and f"another daemon (pid {os.getpid()}) holds" in r.stdout and "kill" in r.stdout
        assert holder_pid(tmp_path) == os.getpid()
    finally:
        lock.release()
    assert holder_pid(tmp_path) is None       # released: the next daemon may start
    InstanceLock(tmp_path).acquire().release()


def test_unwritable_runs_folder_is_a_clear_error(tmp_path):
    # root writes through chmod 555, so the folder is made unwritable by putting it under a plain file
    (tmp_path / "file").write_text("")
    with pytest.raises(SearchCoreError, match="cannot write to the runs folder .*make it writable"):
        InstanceLock(tmp_path / "file" / "runs").acquire()
    with pytest.raises(SearchCoreError, match="cannot write to the runs folder"):
        from tuner.promotion.promote import History
        History(tmp_path / "file" / "runs")


# -- missed runs ----------------------------------------------------------------------------------------
def test_catch_up_plan_runs_a_recent_missed_slot_once_and_records_old_ones(tmp_path, demo_db):
    jobs = ('[jobs.index]\ncron = "0 1 * * *"\ngrace = "2h"\n'
            '[jobs.sweep]\ncron = "5 1 * * *"\nuntil = "07:00"\n'
            '[jobs.report]\ncron = "5 7 * * *"\ngrace = "1h"\n')
    cfg = load_daemon_config(write_config(tmp_path, demo_db, jobs=jobs))
    (tmp_path / "runs").mkdir()
    t = RunTable(tmp_path / "runs")
    now = dt.datetime(2026, 11, 30, 4, 0, tzinfo=cfg.tz)          # restarted at 04:00, mid-window
    plan = catch_up_plan(cfg, t, now)
    # the sweep window (01:05-07:00) is still open: run it now; the 01:00 index is 3 h late, past its 2 h
    # grace: recorded as missed; the report's 07:05 slot is yesterday's, beyond its look-back: not run
    assert [(j, s.hour, s.minute) for j, s, _ in plan] == [("sweep", 1, 5)]
    missed = {r.job: r for r in t.rows() if r.outcome == "missed"}
    assert set(missed) == {"index"} and "past the grace of 7200s" in missed["index"].detail["why"]
    # the slot ran to the end: a second restart (or a clock that jumped back) does not run it again
    rid = t.start("sweep", plan[0][1], "catch-up")
    t.finish(rid, "promoted", {})
    assert catch_up_plan(cfg, t, now + dt.timedelta(minutes=5)) == []
    # the next day at 07:30: the sweep window closed at 07:00 (missed, not run late); the 07:05 report is
    # 25 min late, within its 1 h grace: it runs
    plan = catch_up_plan(cfg, t, dt.datetime(2026, 12, 1, 7, 30, tzinfo=cfg.tz))
    assert [j for j, _, _ in plan] == ["report"]
    assert t.rows("sweep", 1)[0].outcome == "missed"
    t.close()


def test_a_first_start_records_no_slot_from_before_it_as_missed(tmp_path, demo_db):
    """A new user's first start at 16:00: the night's 01:05-07:00 sweep window (within its look-back) was not
    missed, no daemon was set up, so `status` shows no "missed"; the window is closed, nothing runs late."""
    jobs = ('[jobs.index]\ncron = "0 1 * * *"\ngrace = "2h"\n'
            '[jobs.sweep]\ncron = "5 1 * * *"\nuntil = "07:00"\n'
            '[jobs.report]\ncron = "5 7 * * *"\ngrace = "1h"\n')
    cfg = load_daemon_config(write_config(tmp_path, demo_db, jobs=jobs))
    (tmp_path / "runs").mkdir()
    t = RunTable(tmp_path / "runs")
    assert t.new
    assert catch_up_plan(cfg, t, dt.datetime(2026, 11, 30, 16, 0, tzinfo=cfg.tz), t.new) == []
    t.close()
    assert not any(j.last_outcome == "missed" for j in status(tmp_path / "runs").jobs)
    t = RunTable(tmp_path / "runs")
    assert not t.new                        # the next start knows a daemon ran here: a slot it sleeps through is missed
    catch_up_plan(cfg, t, dt.datetime(2026, 11, 30, 16, 0, tzinfo=cfg.tz), t.new)
    assert {r.job for r in t.rows() if r.outcome == "missed"} == {"sweep"}
    t.close()


def test_a_killed_run_is_resumed_and_closed(tmp_path, demo_db):
    cfg = load_daemon_config(write_config(tmp_path, demo_db))
    (tmp_path / "runs").mkdir()
    t = RunTable(tmp_path / "runs")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    now = dt.datetime.now(cfg.tz)
    t.conn.execute("INSERT INTO runs(job, scheduled, started, pid, trigger, detail) VALUES "
                   "('sweep', ?, ?, ?, 'start-in', '{\"sweep\": \"S1\"}')",
                   ((now - dt.timedelta(minutes=2)).isoformat(timespec="seconds"), now.isoformat(), dead.pid))
    plan = catch_up_plan(cfg, t, now)
    assert [(j, why.split(":")[0]) for j, _, why in plan] == [("sweep", "resume")]
    row = t.rows("sweep")[0]
    assert row.outcome == "killed" and row.detail["sweep"] == "S1"
    assert catch_up_plan(cfg, t, now) == []       # resumed once, not on every restart
    t.close()


def test_last_fire_of_a_cron_trigger(tmp_path, demo_db):
    cfg = load_daemon_config(write_config(tmp_path, demo_db))
    from apscheduler.triggers.cron import CronTrigger
    trig = CronTrigger.from_crontab("5 1 * * *", timezone=cfg.tz)
    now = dt.datetime(2026, 11, 30, 3, 0, tzinfo=cfg.tz)
    assert last_fire(trig, now, 86400) == dt.datetime(2026, 11, 30, 1, 5, tzinfo=cfg.tz)
    assert last_fire(trig, now, 3600) is None


def test_the_weekly_calibrate_job_writes_a_report_and_a_proposal_from_the_log_and_the_gold_sets(tmp_path, db_copy):
    """`calibrate`, run as the daemon's job: a real recall log of real searches plus the
    sweep's gold sets as labels; the proposal is written, never applied by the daemon."""
    from search_core.recall.log import log_search
    jobs = '[jobs.calibrate]\ncron = "0 3 * * 0"\n'
    write_config(tmp_path, db_copy, jobs=jobs)
    runs = tmp_path / "runs"
    runs.mkdir()
    from search_core.config import SearchConfig
    from search_core.search.pipeline import Searcher
    s = Searcher(db_copy)
    rows = []
    for q in ("GraphRAG 커뮤니티 요약은 어떻게 만들지", "리랭커 비교 결과 정리", "오늘 저녁 김치찌개 레시피"):
        res = s.search(q, SearchConfig(embedder=s.embedder_name))
        rows.append({"ts": time.time(), "session": "s1", "query": q, "res": res})
    s.close()
    log_search(runs / "recall-log.sqlite", rows)
    r = CliRunner().invoke(main, ["daemon", "--config", str(tmp_path / "daemon.toml"), "--once", "calibrate"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["outcome"] == "ok" and out["calls"] == 3 and out["labelled"] > 10, out
    report = Path(out["report"]).read_text(encoding="utf-8")
    assert "retire" in report.lower() or "retirement" in report.lower()
    # the calls to label next: all three (none labelled), each with its reason
    assert out["suggested"] == 3 and "## Calls to label next" in report
    assert all(q in report for q in ("GraphRAG 커뮤니티 요약은 어떻게 만들지", "리랭커 비교 결과 정리"))
    assert report.count("threshold belongs") + report.count("stratum") >= 3
    assert out["proposal"] is None or Path(out["proposal"]).exists()
    assert not Path(str(db_copy) + ".gate.json").exists()          # proposed, not applied


def test_a_weekly_calibration_that_declines_records_its_proposal_declined_with_the_reason(tmp_path, db_copy):
    """Gold sets of answerable questions alone (no probe, no log): the calibration proposes nothing. The job
    writes the declined record where it writes a proposal, ends `declined`, and status and the report say why;
    `calibrate apply` of that record says there is nothing to apply."""
    import yaml
    write_config(tmp_path, db_copy, jobs='[jobs.calibrate]\ncron = "0 3 * * 0"\n')
    for name in ("tune.yaml", "hold.yaml"):           # the config's gold sets, their probes left out
        g = yaml.safe_load((tmp_path / name).read_text(encoding="utf-8"))
        g["questions"] = [q for q in g["questions"] if q.get("gold")]
        (tmp_path / name).write_text(yaml.safe_dump(g, allow_unicode=True), encoding="utf-8")
    runs = tmp_path / "runs"
    r = CliRunner().invoke(main, ["daemon", "--config", str(tmp_path / "daemon.toml"), "--once", "calibrate"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["outcome"] == "declined" and "irrelevant" in out["declined"], out
    record = json.loads(Path(out["proposal"]).read_text(encoding="utf-8"))
    assert Path(out["proposal"]).parent == runs / "reports" and record["model"] is None
    assert record["declined"] == out["declined"]
    [job] = [j for j in status(runs).jobs if j.job == "calibrate"]
    assert job.last_outcome == "declined" and job.last_why == out["declined"]
    assert "no recommendation: the labels hold no 'irrelevant' rows" in Path(out["report"]).read_text(encoding="utf-8")
    r = CliRunner().invoke(main, ["calibrate", "apply", "--db", str(db_copy), "--proposal", out["proposal"]])
    assert r.exit_code == 1 and "nothing to apply" in r.output and "proposed no change" in r.output, r.output
    assert not Path(str(db_copy) + ".gate.json").exists()


def test_once_runs_a_job_and_a_clock_jumped_back_does_not_repeat_it(tmp_path, db_copy):
    cfg = load_daemon_config(write_config(tmp_path, db_copy))
    r = CliRunner().invoke(main, ["daemon", "--config", str(tmp_path / "daemon.toml"), "--once", "index"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["outcome"] == "ok" and str(db_copy) in out["indexes"]
    r = CliRunner().invoke(main, ["daemon", "--config", str(tmp_path / "daemon.toml"), "--once", "calibrate"])
    assert r.exit_code == 1 and "job 'calibrate' is not enabled" in r.output
    d = Daemon(cfg).open()
    try:
        slot = dt.datetime(2026, 11, 30, 1, 0, tzinfo=cfg.tz)
        rid = d.table.start("index", slot, "schedule")
        d.table.finish(rid, "ok", {})
        assert d.run_job("index", slot, "schedule").to_json() == {"outcome": "skipped", "why": "already ran"}
    finally:
        d.close()
    s = status(tmp_path / "runs")
    assert (s.running, s.pid) == (False, None)


# -- real processes ----------------------------------------------------------------------------------------
def _spawn(config, *extra):
    return subprocess.Popen([sys.executable, "-c", "from tuner.cli import main; main()", "daemon", "--config", str(config), *extra],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _rounds(ledger, sweep=None):
    if not ledger.exists():
        return []
    lg = Ledger(ledger)
    try:
        info = lg.sweep(sweep)
        return lg.rounds(info.id) if info else []
    finally:
        lg.close()


def _sweep_outcome(runs):
    t = RunTable(runs)
    try:
        rows = t.rows("sweep", 1)
        return rows[0].outcome if rows else None
    finally:
        t.close()


def _wait(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_daemon_sigterm_ends_at_a_round_boundary_and_a_second_instance_is_refused(tmp_path, db_copy_e5):
    db_copy = db_copy_e5
    cfg = write_config(tmp_path, db_copy, rounds=400,
                       jobs='[jobs.sweep]\nevery = "1d"\nbudget = "30m"\n')
    runs, ledger = tmp_path / "runs", tmp_path / "runs" / "ledger.sqlite"
    proc = _spawn(cfg, "--start-in", "0.5")
    try:
        assert _wait(lambda: len(_rounds(ledger)) >= 4, 600), proc.stderr.read() if proc.poll() is not None else ""
        st = json.loads(CliRunner().invoke(main, ["status", "--runs", str(runs), "--json"]).output)
        assert st["daemon"] == {"running": True, "pid": proc.pid}
        assert st["jobs"][0]["job"] == "sweep" and st["jobs"][0]["last_outcome"] == "running"
        second = _spawn(cfg)
        out, err = second.communicate(timeout=60)
        assert second.returncode == 1 and f"another daemon (pid {proc.pid}) holds" in err
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=600) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    rounds = _rounds(ledger)
    assert [r.round for r in rounds] == list(range(len(rounds))) and len(rounds) < 401
    lg = Ledger(ledger)
    assert lg.sweep().status == "stopped"
    lg.close()
    st = status(runs)
    assert st.running is False and st.jobs[0].last_outcome == "stopped"
    assert "signal 15: stopping at the running job's next step" in (runs / "daemon.log").read_text()


@pytest.mark.slow
def test_kill_9_mid_sweep_then_restart_resumes_the_same_sweep_and_promotes_or_declines(tmp_path, db_copy_e5):
    db_copy = db_copy_e5
    cfg = write_config(tmp_path, db_copy, rounds=40)
    runs, ledger = tmp_path / "runs", tmp_path / "runs" / "ledger.sqlite"
    proc = _spawn(cfg, "--start-in", "0.5")
    try:
        assert _wait(lambda: len(_rounds(ledger)) >= 6, 600)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = _rounds(ledger)
    sweep_id = before[0].sweep
    assert len(before) < 41
    proc = _spawn(cfg)          # no --start-in: the run table says the sweep was killed mid-window
    try:
        assert _wait(lambda: _sweep_outcome(runs) in ("promoted", "declined"), 900), \
            (runs / "daemon.log").read_text()[-3000:]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=600) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    after = _rounds(ledger, sweep_id)
    assert [r.round for r in after] == list(range(41))             # one sweep, every round once
    assert after[:len(before)] == before                               # nothing before the kill changed
    t = RunTable(runs)
    rows = t.rows("sweep")
    t.close()
    assert [r.outcome for r in rows][::-1] == ["killed", rows[0].outcome]
    assert rows[0].detail["how"] == "resumed" and rows[0].detail["sweep"] == sweep_id
    for kind in ("sweep", "audit"):
        for fmt in ("md", "html", "json"):
            assert (runs / "reports" / f"{kind}-{sweep_id}.{fmt}").stat().st_size > 200
    if rows[0].outcome == "promoted":
        assert f"sweep {sweep_id}" in (runs / "active.toml").read_text()
    else:
        assert not (runs / "active.toml").exists()


def test_a_failing_job_is_recorded_and_does_not_end_the_daemon(tmp_path, db_copy):
    conf = write_config(tmp_path, db_copy)
    vault = tmp_path / "vault"
    shutil.copytree(DEMO_VAULT, vault)
    conf.write_text(conf.read_text().replace(f'vault = "{DEMO_VAULT}"', f'vault = "{vault}"'))
    cfg = load_daemon_config(conf)
    shutil.rmtree(vault)                                # gone after the daemon started: the index job fails
    d = Daemon(cfg).open()
    try:
        res = d.run_job("index", trigger="once")
        assert res.outcome == "failed" and str(vault) in res.detail["error"], res.detail
        assert d.table.rows("index", 1)[0].outcome == "failed"
        # the next job still runs; a report before the first sweep has nothing to read: skipped, not failed
        res = d.run_job("report", trigger="once")
        assert res.outcome == "skipped" and "the report follows the first sweep" in res.detail["why"], res.detail
    finally:
        d.close()
