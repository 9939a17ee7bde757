"""SIGTERM stops a real daemon process at the running job's next step, for every job in the daemon's table: an
index build between two embedding batches (the next run resumes from the embedding cache), a sweep at its
next round, a re-test before its next round, the calibration before its next search, the labels job and the
report job before they write; no job queued behind it starts, and nothing is left half-written."""

import os
import shutil
import subprocess
import sys

import pytest

from search_core.index.embed_cache import STOPPABLE_BATCH
from search_core.index.store import backup_copy, connect
from search_core.paths import embed_cache_file
from tests.helpers import DEMO_VAULT, ROOT
from tests.helpers.daemon_proc import FAR, ran as _ran, spawn as _spawn, stop as _stop, wait_for as _wait, rows as _rows
from tests.helpers.sweeps import DEMO_TUNE, FUSION_SPACE
from tuner.ledger.ledger import Ledger


def _config(tmp_path, vault, db, *, rounds=400):
    (tmp_path / "space.toml").write_text(FUSION_SPACE)
    p = tmp_path / "daemon.toml"
    p.write_text(f'[daemon]\ntimezone = "UTC"\nruns = "runs"\n'
                 f'[sweep]\nvault = "{vault}"\ndb = "{db}"\ngold = "{DEMO_TUNE}"\nsplit = 0.5\n'
                 f'space = "space.toml"\nrounds = {rounds}\n'
                 f'[jobs.index]\ncron = "{FAR}"\ngrace = "1s"\n'
                 '[jobs.sweep]\nevery = "1d"\nbudget = "30m"\n'
                 f'[jobs.report]\ncron = "{FAR}"\ngrace = "1s"\n')
    return p


def _count(db, sql) -> int:
    if not db.exists():
        return 0
    c = connect(db, readonly=True)
    try:
        return c.execute(sql).fetchone()[0]
    except Exception:        # the file is there but its table not yet
        return 0
    finally:
        c.close()


@pytest.mark.slow
def test_sigterm_during_an_index_build_stops_between_batches_and_the_next_run_resumes(tmp_path):
    vault = tmp_path / "vault"
    for f in sorted(DEMO_VAULT.rglob("*.md"))[:40]:
        dst = vault / f.relative_to(DEMO_VAULT)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, dst)
    runs, db = tmp_path / "runs", tmp_path / "runs" / "index.sqlite"
    cfg = _config(tmp_path, vault, db)
    cache = embed_cache_file()
    proc = _spawn(cfg, "--start-in", "0.5")        # the night's chain: index, then sweep, then report
    try:
        assert _wait(lambda: _count(cache, "SELECT count(*) FROM vectors") > 0, 600), \
            proc.stderr.read() if proc.poll() is not None else "no vector was ever cached"
        at_signal = _count(cache, "SELECT count(*) FROM vectors")
        _stop(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [r["outcome"] for r in _rows(runs, "index")] == ["stopped"]
    assert _ran(runs, "sweep") == [] and _ran(runs, "report") == [], "a job started after the stop"
    assert not db.exists() and not list(runs.glob("index.sqlite.building-*")), "a half-built index was left"
    cached = _count(cache, "SELECT count(*) FROM vectors")
    # stopped between batches: the batch under way when the count was read, and at most one more that began
    # before the signal landed (the build went on to embed all 40 notes before a stop was honoured)
    assert cached - at_signal <= 2 * STOPPABLE_BATCH, (at_signal, cached)

    resumed = subprocess.run([sys.executable, "-m", "tuner.cli", "daemon", "--config", str(cfg), "--once", "index"],
                             cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                             timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    last = _rows(runs, "index")[0]
    assert last["outcome"] == "ok", last
    vectors = _count(db, "SELECT count(*) FROM chunks WHERE has_vector")
    assert 0 < last["detail"]["indexes"][str(db)]["embedded"] < vectors, "the next run embedded everything again"
    assert _count(cache, "SELECT count(*) FROM vectors") > cached


@pytest.mark.slow
def test_sigterm_during_a_sweep_stops_at_the_next_round_and_no_later_job_starts(tmp_path, demo_index_e5):
    db = backup_copy(demo_index_e5, tmp_path / "index.sqlite")
    runs, ledger = tmp_path / "runs", tmp_path / "runs" / "ledger.sqlite"
    cfg = _config(tmp_path, DEMO_VAULT, db)

    def rounds():
        if not ledger.exists():
            return []
        lg = Ledger(ledger)
        try:
            info = lg.sweep()
            return lg.rounds(info.id) if info else []
        finally:
            lg.close()

    proc = _spawn(cfg, "--start-in", "0.5")
    try:
        assert _wait(lambda: len(rounds()) >= 3, 600), proc.stderr.read() if proc.poll() is not None else ""
        _stop(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    got = rounds()
    assert [r.round for r in got] == list(range(len(got))) and len(got) < 401   # whole rounds, none half
    lg = Ledger(ledger)
    assert lg.sweep().status == "stopped"
    lg.close()
    assert [r["outcome"] for r in _rows(runs, "sweep")] == ["stopped"]
    assert _ran(runs, "report") == [], "the report job started after the stop"
    assert not (runs / "reports").exists() or not list((runs / "reports").iterdir())


# -- the weekly jobs: each is held at a real read of its input (a named pipe in place of the gold file) while
# the signal lands, then let go: what it does after the stop is what the test reads
def _weekly_config(tmp_path, db, gold, hold, jobs, ledger="runs/ledger.sqlite"):
    (tmp_path / "space.toml").write_text(FUSION_SPACE)
    p = tmp_path / "daemon.toml"
    p.write_text(f'[daemon]\ntimezone = "UTC"\nruns = "runs"\nledger = "{ledger}"\n'
                 f'[sweep]\ndb = "{db}"\ngold = "{gold}"\nholdout = "{hold}"\nspace = "space.toml"\nrounds = 5\n'
                 + jobs)
    return p


def _held_then_stopped(proc, runs, job, fifo):
    """Wait until `job` runs (held at its read of the pipe), SIGTERM, wait until the daemon logged the signal
    (its flag is set from then on), then let the read go and wait for the exit."""
    import signal
    from tests.helpers.daemon_proc import log_has, running, wait_exit
    try:
        assert _wait(lambda: running(runs, job) or proc.poll() is not None, 300), f"{job} never started"
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        proc.send_signal(signal.SIGTERM)
        assert _wait(lambda: log_has(runs, "signal 15: stopping"), 300), "the signal was never logged"
        fifo.feed_in_background()
        wait_exit(proc)
    finally:
        fifo.release()
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
def test_sigterm_during_the_calibration_stops_before_its_next_search_and_writes_no_report(tmp_path, demo_mini_index):
    from tests.helpers.daemon_proc import CATCH_UP, FifoInput, log_has
    from tests.helpers.sweeps import DEMO_HOLD
    db = backup_copy(demo_mini_index, tmp_path / "index.sqlite")
    runs = tmp_path / "runs"
    gold = FifoInput(tmp_path / "tune.yaml", DEMO_TUNE.read_text(encoding="utf-8"))
    cfg = _weekly_config(tmp_path, db, gold.path, DEMO_HOLD, f"[jobs.calibrate]\n{CATCH_UP}[jobs.labels]\n{CATCH_UP}")
    _held_then_stopped(_spawn(cfg), runs, "calibrate", gold)
    [run] = _rows(runs, "calibrate")
    assert run["outcome"] == "stopped", run
    from tuner.data.gold import load_gold
    asked = len(load_gold(DEMO_TUNE).questions)
    assert f"after 0 of {asked} questions" in run["detail"]["note"], run["detail"]
    assert not log_has(runs, "calibrate: searched"), "the calibration searched after the stop"
    assert not (runs / "reports").exists() or not list((runs / "reports").iterdir()), "a report was written"
    assert _ran(runs, "labels") == [], "the labels job started after the stop"


@pytest.mark.slow
def test_sigterm_during_the_labels_job_leaves_the_labelled_set_unwritten(tmp_path, demo_mini_index):
    from tests.helpers.daemon_proc import CATCH_UP, FifoInput, labelled_log
    from tests.helpers.sweeps import DEMO_HOLD
    db = backup_copy(demo_mini_index, tmp_path / "index.sqlite")
    runs = tmp_path / "runs"
    gold = FifoInput(tmp_path / "tune.yaml", DEMO_TUNE.read_text(encoding="utf-8"))
    labelled_log(runs, [("리랭커 모델 비교한 결과 어디 적어뒀지", "ai/rag/reranker", "relevant"),
                        ("부대찌개 끓이는 법 알려줘", "life/cooking/bulgogi", "irrelevant")])
    # the night's chain queued one second after the catch-up: it must not start once the stop was asked
    cfg = _weekly_config(tmp_path, db, gold.path, DEMO_HOLD,
                         f'[jobs.sweep]\nevery = "1d"\nbudget = "30m"\n[jobs.report]\ncron = "{FAR}"\ngrace = "1s"\n'
                         f"[jobs.labels]\n{CATCH_UP}")
    _held_then_stopped(_spawn(cfg, "--start-in", "1"), runs, "labels", gold)
    [run] = _rows(runs, "labels")
    assert run["outcome"] == "stopped", run
    assert "stopped before 2 new question(s)" in run["detail"]["note"], run["detail"]
    assert not (tmp_path / "tune.from-log.yaml").exists(), "the labels job wrote after the stop"
    assert _ran(runs, "sweep") == [] and _ran(runs, "report") == [], "a job started after the stop"


@pytest.mark.slow
def test_sigterm_while_the_reports_render_writes_none_of_them(tmp_path, demo_db):
    """The report job reads and renders its six files before it writes any: frozen (SIGSTOP) as it starts,
    signalled, let go, it writes none, and the job queued behind it does not start. On a quiet machine the job
    can pass its last check before the freeze lands (then it rightly finishes): up to three tries, and the stop
    must be seen in one of them; with the checks gone it is seen in none."""
    from tests.helpers.daemon_proc import CATCH_UP, frozen_at_start_then_stopped
    from tests.helpers.sweeps import DEMO_HOLD, run_sweep
    outcomes = []
    for attempt in range(3):
        base = tmp_path / f"try{attempt}"
        base.mkdir()
        runs = base / "runs"
        run_sweep(base, demo_db, FUSION_SPACE, 6, ledger="ledger.sqlite")
        cfg = _weekly_config(base, demo_db, DEMO_TUNE, DEMO_HOLD, f"[jobs.report]\n{CATCH_UP}[jobs.labels]\n{CATCH_UP}",
                             ledger="ledger.sqlite")
        # held while the signal lands (loading the plotting library and reading the ledger take seconds)
        frozen_at_start_then_stopped(_spawn(cfg), runs, "report")
        [run] = _rows(runs, "report")
        assert _ran(runs, "labels") == [], "the labels job started after the stop"
        outcomes.append(run["outcome"])
        if run["outcome"] == "stopped":
            assert "were not written" in run["detail"]["note"], run
            assert not (runs / "reports").exists() or not list((runs / "reports").iterdir()), "a report was written"
            return
    raise AssertionError(f"the report job never stopped on SIGTERM in {len(outcomes)} tries: {outcomes}")


@pytest.mark.slow
def test_sigterm_during_a_retest_stops_before_its_next_round_and_writes_no_report(tmp_path, demo_db):
    """Frozen (SIGSTOP) as the weekly re-test starts, signalled, let go: it re-tests at most the round it
    was in, writes no report, and the job queued behind it does not start."""
    from search_core.config import SearchConfig
    from tests.helpers.daemon_proc import CATCH_UP, frozen_at_start_then_stopped, log_has
    from tests.helpers.sweeps import DEMO_HOLD, hand_set_calibrations, small_gold
    from tuner.sweep.loop import Sweep, SweepParams
    from tuner.sweep.rejected_audit import audit_data
    runs = tmp_path / "runs"
    (tmp_path / "space.toml").write_text(FUSION_SPACE)
    tune, hold = small_gold(DEMO_TUNE, tmp_path / "tune.yaml", 2), small_gold(DEMO_HOLD, tmp_path / "hold.yaml", 3)
    # as tests/tuner/reports' swept fixture: the looser rule from k = 60 without the n-gram list or the dense lead
    # leaves rejected rounds worth re-testing (from today's default with the n-gram list, none)
    p = SweepParams(db=str(demo_db), gold=str(tune), holdout=str(hold), space=str(tmp_path / "space.toml"),
                    rounds=14, vault=str(DEMO_VAULT), index_dir=str(tmp_path / "indexes"), hit5_guard="count",
                    noise_alpha=None)
    hand_set_calibrations(p.cost_folder())
    lg = Ledger(tmp_path / "ledger.sqlite")
    sweep_id = Sweep(p, lg, start=SearchConfig(rrf_k=60, w_ngram=0.0, dense_lead_cos=None)).run() and lg.sweeps()[-1].id
    lg.close()
    marked = [x for x in audit_data(tmp_path / "ledger.sqlite", sweep_id).rejected if x.worth_retest]
    assert len(marked) >= 2, "the sweep must leave two candidates worth re-testing, or this test checks nothing"
    cfg = _weekly_config(tmp_path, demo_db, tune, hold, f"[jobs.retest]\n{CATCH_UP}[jobs.labels]\n{CATCH_UP}",
                         ledger="ledger.sqlite")
    def not_ended():           # held while the signal lands (it loads the index first)
        assert not log_has(runs, "job retest: "), "the job ended before it could be held; nothing was tested"
    frozen_at_start_then_stopped(_spawn(cfg, test_embedder=True), runs, "retest", while_frozen=not_ended)
    [run] = _rows(runs, "retest")
    assert run["outcome"] == "stopped" and "stopped" in run["detail"]["note"], run
    lg = Ledger(tmp_path / "ledger.sqlite")
    try:
        # stopped in its gate fit (before its baseline: no re-test sweep) or before a round
        retests = [(s.status, len(lg.rounds(s.id)) - 1) for s in lg.sweeps() if "retest" in s.id]
    finally:
        lg.close()
    assert retests in ([], [("retest stopped", 0)], [("retest stopped", 1)]), (retests, len(marked))
    assert not list(runs.glob("reports/retest-*")), "a re-test report was written"
    assert _ran(runs, "labels") == [], "the labels job started after the stop"


@pytest.mark.slow
def test_a_stop_asked_while_the_plotting_library_loads_writes_no_report(tmp_path, demo_db, monkeypatch):
    """The report job's longest step on a busy machine was the morning report's first figure, most of it the
    import of matplotlib (3.1 of 4.8 s at load 18): it is a step of its own, and a stop asked during it ends
    the job before the ledger is read."""
    from tests.helpers.sweeps import DEMO_HOLD, run_sweep
    from tuner.daemon.config import load_daemon_config
    from tuner.daemon.jobs import write_reports
    from tuner.daemon.scheduler import Daemon
    from tuner.reports import plots
    from search_core import StopRequested
    run_sweep(tmp_path, demo_db, FUSION_SPACE, 3, ledger="ledger.sqlite")
    cfg = load_daemon_config(_weekly_config(tmp_path, demo_db, DEMO_TUNE, DEMO_HOLD,
                                            f'[jobs.report]\ncron = "{FAR}"\ngrace = "1s"\n', ledger="ledger.sqlite"))
    d = Daemon(cfg)
    real_load = plots.load

    def load_then_signalled():
        real_load()
        d.stop.set()                    # the SIGTERM handler's effect, as the library finishes loading
    monkeypatch.setattr(plots, "load", load_then_signalled)
    lg = Ledger(tmp_path / "ledger.sqlite")
    sid = lg.sweeps()[-1].id
    lg.close()
    with pytest.raises(StopRequested, match="were not written: stopped after loading the plotting library"):
        write_reports(d, sid)
    assert not (tmp_path / "runs" / "reports").exists()
