"""Promotion and rollback under kills and out-of-order rollbacks: a promotion and its history row are one
step (a process killed between them is recovered at the next open), temporary files do not outlive a
kill, and rollbacks undo promotions newest first."""

import os
import sqlite3
import subprocess
import sys

import pytest

from search_core import SearchCoreError
from search_core.config import SearchConfig
from tuner.sweep.summary import HoldoutCheck
from tuner.promotion.promote import History, decide_promotion, read_active, rollback
from tests.helpers import ROOT

START = SearchConfig(threshold=0.8)
WIN = SearchConfig(threshold=0.8, w_sparse=0.9)
THIRD = SearchConfig(threshold=0.8, w_sparse=0.9, rrf_k=10)


def _holdout(a_hit=0.8, b_hit=0.85, n=20):
    metrics = {m: {"a": 0.5, "b": 0.5, "delta": 0.0, "p_value": 0.9, "ci95": [-0.1, 0.1], "verdict": "within noise"}
               for m in ("hit@5", "mrr")}
    return HoldoutCheck.from_json(_holdout_json(a_hit, b_hit, n, metrics))


def _holdout_json(a_hit, b_hit, n, metrics) -> dict:
    return {"gold": "hold", "start": {"hit@5": a_hit, "mrr": 0.5}, "final": {"hit@5": b_hit, "mrr": 0.5},
            "tuning_gain": 0.0, "holdout_gain": 0.0, "holdout_regressed": False, "within_noise": True,
            "compare": {"gold": "hold", "n": n, "a": "a", "b": "b", "metrics": metrics, "wins": 0, "ties": n,
                        "losses": 0, "flipped": [], "one_question_moves_hit5_by": round(1 / n, 4)}}


@pytest.fixture
def index(tmp_path):
    p = tmp_path / "scratch" / "index.sqlite"
    p.parent.mkdir()
    conn = sqlite3.connect(p)
    conn.execute("CREATE TABLE t (x)")
    conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(1000)])
    conn.commit()
    conn.close()
    return p


def test_rolling_back_an_older_promotion_while_a_newer_is_active_is_refused(tmp_path, index):
    runs = tmp_path / "runs"
    p1 = decide_promotion("s1", START, WIN, _holdout(), index, runs)
    p2 = decide_promotion("s2", WIN, THIRD, _holdout(), index, runs)
    with pytest.raises(SearchCoreError, match=rf"promotion #{p2.event} is active and was made after "
                                              rf"#{p1.event}; roll back #{p2.event} first"):
        rollback(p1.event, runs)
    assert read_active(runs).config.rrf_k == 10               # nothing changed
    assert rollback(None, runs).undid == p2.event and read_active(runs).config.w_sparse == 0.9
    assert rollback(None, runs).undid == p1.event and read_active(runs) is None


KILLED = """
import os, sys
import tuner.promotion.promote as pr
from search_core.config import SearchConfig
where = sys.argv[3]
if where == "after_active":
    original = pr._write_active
    def write_then_die(*a, **k):
        original(*a, **k)
        os._exit(9)
    pr._write_active = write_then_die
else:   # both renames go through search_core.files: die at the index copy's or at active.toml's
    import types
    import search_core.files as files
    files.os = types.SimpleNamespace(**{n: getattr(os, n) for n in dir(os) if not n.startswith("__")})
    copy = where == "index_copy"
    files.os.replace = lambda src, dst: os._exit(9) if ("active-indexes" in str(dst)) == copy else os.replace(src, dst)
start = SearchConfig(threshold=0.8)
win = SearchConfig(threshold=0.8, w_sparse=0.9)
m = {k: {"a": .5, "b": .5, "delta": 0.0, "p_value": .9, "ci95": [0, 0], "verdict": "within noise"} for k in ("hit@5", "mrr")}
from tuner.sweep.summary import HoldoutCheck
hold = HoldoutCheck.from_json({"gold": "h", "start": {"hit@5": .8, "mrr": .5}, "final": {"hit@5": .85, "mrr": .5},
                               "tuning_gain": 0.0, "holdout_gain": 0.0, "holdout_regressed": False, "within_noise": True,
                               "compare": {"gold": "h", "n": 20, "a": "a", "b": "b", "metrics": m, "wins": 0, "ties": 20,
                                           "losses": 0, "flipped": [], "one_question_moves_hit5_by": 0.05}})
pr.decide_promotion("killed", start, win, hold, sys.argv[1], sys.argv[2])
"""


def _promote_and_die(index, runs, where):
    r = subprocess.run([sys.executable, "-c", KILLED, str(index), str(runs), where], cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    assert r.returncode == 9, r.stderr


def test_killed_after_writing_active_toml_the_promotion_is_recorded_and_can_be_rolled_back(tmp_path, index):
    runs = tmp_path / "runs"
    _promote_and_die(index, runs, "after_active")
    assert read_active(runs).source == "sweep killed"
    events = History(runs).events()
    assert [(e.kind, e.sweep, e.pending) for e in events] == [("promoted", "killed", None)]
    assert rollback(None, runs).undid == events[0].id
    assert read_active(runs) is None


@pytest.mark.parametrize("where, folder", [("index_copy", "active-indexes"), ("atomic_write", ".")])
def test_killed_inside_a_copy_or_a_write_leaves_no_temporary_file_and_no_promotion(tmp_path, index, where, folder):
    runs = tmp_path / "runs"
    _promote_and_die(index, runs, where)
    leftovers = [p.name for p in (runs / folder).glob(".*")]
    assert leftovers, f"the kill did not happen inside the {where}"
    h = History(runs)                                         # any next open recovers
    events = h.events()
    h.close()
    assert not list((runs / folder).glob(".*"))
    assert read_active(runs) is None
    assert [e.kind for e in events] in ([], ["declined"])
    assert all("interrupted" in e.reason for e in events)
    with pytest.raises(SearchCoreError, match="nothing to roll back"):
        rollback(None, runs)


@pytest.mark.parametrize("active, message", [
    ("active = 5\n", "active.toml: [active] = 5"),
    ('[active]\nindex = 5\nsource = "x"\n', "[active] index = 5"),
    ('[active]\nindx = "runs/x.sqlite"\n', "did you mean 'index'"),
])
def test_a_hand_edited_active_section_is_refused_by_name(tmp_path, active, message):
    from click.testing import CliRunner

    from tuner.cli import main
    (tmp_path / "active.toml").write_text(active + "[search]\ntop_k = 5\n" if active.startswith("active")
                                          else "[search]\ntop_k = 5\n" + active)
    with pytest.raises(SearchCoreError) as e:
        read_active(tmp_path)
    assert message in str(e.value) and "active.toml" in str(e.value)
    r = CliRunner().invoke(main, ["config", "history", "--runs", str(tmp_path)])
    assert r.exit_code == 1 and message in r.output, r.output
