"""A ledger written before decisions were typed still reads, verifies and replays alike.

data/schema2-demo-sweep.sqlite was written by the code of the commit before RoundDecision: a 6-round fusion
sweep on the demo vault (every third tuning question) with the test embedder. Its stored JSON is what that
code wrote; nothing here rewrites it."""

import json
import shutil
import sqlite3

from click.testing import CliRunner

from tests.helpers import ROOT
from tuner.cli import main
from tuner.evaluation.score import ScoreConfig
from tuner.ledger.ledger import Ledger, verify_or_seal
from tuner.ledger.schema import DECISIONS, RoundDecision
from tuner.sweep.rounds import replay_decisions

OLD = ROOT / "tests/tuner/ledger/data/schema2-demo-sweep.sqlite"


def test_decisions_are_one_enum_whose_values_are_the_ledger_strings():
    assert DECISIONS == ("kept", "rejected:hit5_regressed", "rejected:no_gain", "rejected:level_guard",
                         "rejected:latency_budget", "unavailable", "crashed")
    assert [d.value for d in RoundDecision] == list(DECISIONS)
    assert RoundDecision.NO_GAIN.rejected and not RoundDecision.KEPT.rejected
    assert not RoundDecision.CRASHED.evaluated and RoundDecision.HIT5_REGRESSED.evaluated


def test_a_ledger_written_before_typed_decisions_reads_verifies_and_replays(tmp_path):
    path = tmp_path / "ledger.sqlite"
    shutil.copy(OLD, path)
    before = _stored(path)
    assert verify_or_seal(path).ok
    lg = Ledger(path, create=False)
    info = lg.sweep()
    rounds = lg.rounds(info.id)
    assert [r.decision for r in rounds] == ["kept", "rejected:no_gain", "rejected:no_gain", "rejected:no_gain",
                                               "rejected:no_gain", "unavailable", "rejected:hit5_regressed"]
    assert all(type(r.decision) is RoundDecision for r in rounds)
    rule = info.params.sweep.rule()
    replayed = replay_decisions(rounds, rule, ScoreConfig())
    assert len(replayed) == 5 and all(r.agrees for r in replayed)
    lg.close()
    r = CliRunner().invoke(main, ["ledger", "--ledger", str(path), "--replay"])
    assert r.exit_code == 0 and "every decision recomputed alike" in r.output, r.output
    assert _stored(path) == before              # reading, verifying and replaying changed no stored row


def test_every_stored_round_reads_back_as_an_evaluation_that_writes_the_same_text():
    """A ledger row's metrics are EvalResult.to_ledger(); from_ledger reads them back without losing a byte."""
    from tuner.evaluation.evaluate import EvalResult
    with sqlite3.connect(OLD) as c:
        stored = [m for (m,) in c.execute("SELECT metrics FROM rounds ORDER BY round") if m != "{}"]
    assert len(stored) == 6
    for text in stored:
        assert json.dumps(EvalResult.from_ledger(json.loads(text)).to_ledger(), ensure_ascii=False) == text


def test_every_stored_round_reads_back_as_a_round_that_writes_the_same_columns(tmp_path):
    """Round is the one reader and writer of a ledger row: what it reads, it would write back byte for byte
    (so the hash chain of a row written today covers what the code before it wrote)."""
    from tuner.ledger.round import Round
    from tuner.ledger.schema import ROUND_CONTENT
    path = tmp_path / "ledger.sqlite"
    shutil.copy(OLD, path)
    lg = Ledger(path, create=False)
    rounds = lg.rounds(lg.sweep().id)
    lg.close()
    with sqlite3.connect(path) as c:
        stored = [dict(zip(ROUND_CONTENT, row)) for row in
                  c.execute(f"SELECT {', '.join(ROUND_CONTENT)} FROM rounds ORDER BY round")]
    assert len(rounds) == len(stored) == 7
    assert [r.columns() for r in rounds] == stored
    assert [Round.from_columns(s) for s in stored] == rounds


def test_a_stored_sweep_summary_reads_back_as_a_record_that_writes_the_same_text():
    from tuner.sweep.summary import SweepSummary
    with sqlite3.connect(OLD) as c:
        (text,) = c.execute("SELECT summary FROM sweeps").fetchone()
    s = SweepSummary.from_json(json.loads(text))
    assert s.rounds == 6 and s.decisions["rejected:no_gain"] == 4 and s.holdout is None and s.status is None
    assert json.dumps(s.to_json(), ensure_ascii=False) == text


def test_a_holdout_check_and_summary_written_before_the_records_read_back_into_the_same_text():
    """data/sweep-records-before-typed.json: the holdout row and the summary a 12-round sweep with a holdout
    wrote (demo vault, e5-small) with the code of the commit before SweepSummary and HoldoutCheck."""
    from tuner.sweep.summary import HoldoutCheck, SweepSummary
    old = json.loads((OLD.parent / "sweep-records-before-typed.json").read_text(encoding="utf-8"))
    h = HoldoutCheck.from_json(json.loads(old["holdout"]))
    assert h.gold == "demo-holdout" and h.start.objective == "score100" and h.compare.n == 48
    assert json.dumps(h.to_json(), ensure_ascii=False) == old["holdout"]
    s = SweepSummary.from_json(json.loads(old["summary"]))
    assert s.holdout == h and s.rounds == 12
    assert json.dumps(s.to_json(), ensure_ascii=False) == old["summary"]


def _stored(path):
    with sqlite3.connect(path) as c:
        return [c.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in ("sweeps", "rounds", "holdout")]


def test_a_stored_sweep_reads_back_as_a_record_whose_json_is_its_columns(tmp_path):
    """SweepRecord is the one reader of the sweeps table: `ledger --json` prints its columns as stored (the
    JSON ones parsed), its summary reads as a SweepSummary, and a re-test's summary is not taken for one."""
    from tuner.ledger.schema import SWEEP_COLUMNS
    from tuner.ledger.sweep_record import RETEST_ID, SweepRecord
    from tuner.sweep.summary import RetestResult
    path = tmp_path / "ledger.sqlite"
    shutil.copy(OLD, path)
    with sqlite3.connect(path) as c:
        stored = dict(zip(SWEEP_COLUMNS, c.execute(f"SELECT {', '.join(SWEEP_COLUMNS)} FROM sweeps").fetchone()))
    lg = Ledger(path, create=False)
    info = lg.sweep()
    assert lg.sweeps() == [info] and lg.sweep(info.id) == info and isinstance(info, SweepRecord)
    retest_id = "20261203-000000" + RETEST_ID + "abcd"
    lg.new_sweep(retest_id, info.params, info.start_config)
    lg.set_status(retest_id, "retest finished", RetestResult(retest_id, info.id, 0, 0, ()))
    retest = lg.sweep(retest_id)
    lg.close()
    assert info.to_json() == {k: json.loads(v) if k in ("params", "start_config", "summary") else v
                              for k, v in stored.items()}
    assert info.sweep_summary.rounds == 6 and info.start.config_hash() == _start_hash(path)
    assert info.objective == "score100" and set(info.pins) >= {"gold", "space"} and not info.is_retest
    assert retest.is_retest and retest.sweep_summary is None and retest.summary.retest_of == info.id
    r = CliRunner().invoke(main, ["ledger", "--ledger", str(path), "--sweep", info.id, "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["sweep"] == info.to_json(), r.output


def _start_hash(path):
    with sqlite3.connect(path) as c:
        return c.execute("SELECT baseline_hash FROM rounds WHERE round = 0").fetchone()[0]
