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
from tuner.sweep.loop import SweepParams
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
    rounds = lg.rounds(info["id"])
    assert [r.decision for r in rounds] == ["kept", "rejected:no_gain", "rejected:no_gain", "rejected:no_gain",
                                               "rejected:no_gain", "unavailable", "rejected:hit5_regressed"]
    assert all(type(r.decision) is RoundDecision for r in rounds)
    rule = SweepParams.from_record(info["params"]).rule()
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


def test_a_stored_sweep_summary_reads_back_as_a_record_that_writes_the_same_text():
    from tuner.sweep.summary import SweepSummary
    with sqlite3.connect(OLD) as c:
        (text,) = c.execute("SELECT summary FROM sweeps").fetchone()
    s = SweepSummary.from_json(json.loads(text))
    assert s.rounds == 6 and s.decisions["rejected:no_gain"] == 4 and s.holdout is None and s.status is None
    assert json.dumps(s.to_json(), ensure_ascii=False) == text


def _stored(path):
    with sqlite3.connect(path) as c:
        return [c.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in ("sweeps", "rounds", "holdout")]
