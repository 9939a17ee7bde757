"""A real daemon process for the tests that signal it: start, wait for what it wrote, stop, read its run table."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.helpers import ROOT
from tuner.daemon.scheduler import wait_until

# The promise is 10 s from SIGTERM to exit; how long that takes depends on the machine's load, so the tests
# check the work done after the signal and poll for the exit with a bound no busy machine reaches
STOP_BOUND_S = 300
FAR = "0 0 1 1 *"        # 1 January: with a short grace never inside a test's look-back
CATCH_UP = f'cron = "{FAR}"\ngrace = "400d"\n'    # last 1 January is within the grace: run once at start


# the daemon's command line with the test embedder registered, for a daemon that searches an index it built
WITH_TEST_EMBEDDER = ("from search_core.models import register_embedder; "
                      "from tests.helpers.fake_embedder import NAME, HashedNgramEmbedder; "
                      "register_embedder(NAME, HashedNgramEmbedder); from tuner.cli import main; main()")


def spawn(config: Path, *extra, test_embedder: bool = False) -> subprocess.Popen:
    how = ["-c", WITH_TEST_EMBEDDER] if test_embedder else ["-m", "tuner.cli"]
    return subprocess.Popen([sys.executable, *how, "daemon", "--config", str(config), *extra],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


wait_for = wait_until       # the daemon's own poll with a bound (tuner.daemon.scheduler)


def rows(runs: Path, job: str) -> list[dict]:
    """The job's rows of the run table as their JSON (the columns by name), newest first."""
    from tuner.daemon.scheduler import RunTable
    if not (runs / "daemon.sqlite").exists():
        return []
    t = RunTable(runs)
    try:
        return [r.to_json() for r in t.rows(job)]
    finally:
        t.close()


def ran(runs: Path, job: str) -> list[dict]:
    """The job's runs that started, leaving out the slots recorded as missed: a slot queued behind a job that
    outlasted its grace (a first night's sweep at load 20 takes minutes) is recorded "missed" when that job
    ends, and never runs."""
    return [r for r in rows(runs, job) if r["outcome"] != "missed"]


def running(runs: Path, job: str) -> bool:
    """The job has a run started and not finished."""
    return any(r["finished"] is None for r in rows(runs, job))


def log_has(runs: Path, text: str) -> bool:
    p = runs / "daemon.log"
    return p.exists() and text in p.read_text(encoding="utf-8", errors="replace")


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then the daemon must exit, cleanly."""
    proc.send_signal(signal.SIGTERM)
    wait_exit(proc)


def wait_exit(proc: subprocess.Popen) -> None:
    exited = wait_for(lambda: proc.poll() is not None, STOP_BOUND_S)
    if not exited:
        proc.kill()
    out, err = proc.communicate(timeout=60)
    assert exited, f"the daemon was still running {STOP_BOUND_S} s after SIGTERM\n{err[-2000:]}"
    assert proc.returncode == 0, err[-2000:]


def frozen_at_start_then_stopped(proc: subprocess.Popen, runs: Path, job: str, *, while_frozen=None) -> None:
    """Wait until `job` logs its start, freeze the daemon there (SIGSTOP) so the job is at its first step when
    SIGTERM lands, signal it, let it go (SIGCONT) and wait for a clean exit. while_frozen(): a check of what
    the job had done before the freeze (it runs with the daemon held)."""
    try:
        assert wait_for(lambda: log_has(runs, f"job {job} started") or proc.poll() is not None, STOP_BOUND_S,
                        step=0.005), f"the {job} job never started"
        proc.send_signal(signal.SIGSTOP)
        if while_frozen is not None:
            while_frozen()
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGCONT)
        wait_exit(proc)
    finally:
        if proc.poll() is None:
            proc.kill()


class FifoInput:
    """A named pipe in place of an input file: whoever opens it to read waits until feed() writes `text`,
    so a job is held at that read for as long as a test needs (a real file's read, not a pause in the code)."""

    def __init__(self, path: Path, text: str):
        self.path, self.text = Path(path), text
        os.mkfifo(self.path)
        self.fed = threading.Event()

    def feed(self) -> None:
        """Give the text to the reader that waits (or the next one to open it)."""
        with open(self.path, "w", encoding="utf-8") as f:    # blocks until a reader opens the pipe
            f.write(self.text)
        self.fed.set()

    def feed_in_background(self) -> threading.Thread:
        t = threading.Thread(target=self.feed, daemon=True)
        t.start()
        return t

    def release(self) -> None:
        """Unblock a feed() that no reader ever came for (so a failed test does not hang)."""
        if not self.fed.is_set():
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass


def labelled_log(runs: Path, calls) -> list[int]:
    """A recall log under runs/ with these calls: (query, top note, label or None); returns the call ids."""
    from search_core.recall.log import RecallLog, label_calls
    runs.mkdir(parents=True, exist_ok=True)
    log = RecallLog(runs / "recall-log.sqlite", retention_days=None)
    now = time.time()
    ids = [log.write({"ts": now - 60, "session": "s", "query": q, "injected": True,
                      "top_scores": [{"note_id": top, "score": 0.03, "cosine": 0.8}],
                      "features": {"probability": 0.7, "top_cos": 0.8}}) for q, top, _ in calls]
    log.close()
    label_calls(runs / "recall-log.sqlite", [(i, lab) for i, (_, _, lab) in zip(ids, calls) if lab])
    return ids
