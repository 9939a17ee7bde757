"""The ledger shows tampering: hash chain, --verify, reports verify first, foreign files refused."""

import hashlib
import json
import os

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.index.store import connect
from tuner.cli import main
from tuner.evaluation.evaluate import EvalResult
from tuner.ledger.ledger import Ledger
from tuner.ledger.round import Round
from tuner.ledger.schema import RoundDecision
from tuner.sweep.summary import Figures, HoldoutCheck, SweepSummary
from tuner.ledger.chain import verify_ledger
from tuner.stored_config import StoredConfig
from tuner.sweep.params import RecordedParams

COLS = ("sweep, round, variable, old, new, config, config_hash, baseline_hash, index_fingerprint, metrics, "
        "objective, decision, reason, eval_s, reindex_s, created")


def _row(i: int, decision: str = "rejected:no_gain", sweep: str = "s1") -> Round:
    return Round(sweep, i, "rrf_k", 60, 60 + i, StoredConfig.from_json({"rrf_k": 60 + i}), f"c{i}", "b0", "fp",
                 EvalResult.from_ledger({"overall": {"hit@5": 0.5}}), 50 + i if i % 2 else 50.25,
                 RoundDecision.KEPT if i == 0 else RoundDecision(decision), f"round {i}", 1 if i % 2 else 0.5, None)


HOLDOUT = HoldoutCheck.from_json({
    "gold": "hold", "start": {"hit@5": 0.4, "mrr": 0.3, "score100": 50.0}, "final": {"hit@5": 0.4, "mrr": 0.3, "score100": 50.0},
    "tuning_gain": 0.0, "holdout_gain": 0.0, "holdout_regressed": False, "within_noise": True,
    "compare": {"gold": "hold", "n": 10, "a": "c0", "b": "c0", "metrics": {}, "wins": 0, "ties": 10, "losses": 0,
                "flipped": [], "one_question_moves_hit5_by": 0.1}})


def make_ledger(path, n=8, sweep="s1") -> str:
    lg = Ledger(path)
    lg.new_sweep(sweep, RecordedParams.from_json({"db": "i", "gold": "g", "space": "s", "rounds": n, "seed": 0}), StoredConfig.from_json({"rrf_k": 60}))
    for i in range(n):
        lg.append_round(_row(i, sweep=sweep))
    lg.record_holdout(sweep, HOLDOUT)
    start = StoredConfig.from_json({"rrf_k": 60})
    lg.set_status(sweep, "finished", SweepSummary(sweep, n - 1, {}, start, start, Figures(None, "score100", None),
                                                  Figures(None, "score100", None), ()))
    # status and summary may change; that is no tampering
    lg.close()
    return sweep


def sql(path, *stmts):
    c = connect(path)
    try:
        for s in stmts:
            c.execute(s)
    finally:
        c.close()


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_an_untouched_ledger_verifies(tmp_path):
    led = tmp_path / "l.sqlite"
    make_ledger(led)
    v = verify_ledger(led)
    assert v.ok and (v.sweeps, v.rounds) == (1, 8)
    r = CliRunner().invoke(main, ["ledger", "--verify", "--ledger", str(led)])
    assert r.exit_code == 0 and "hash chain intact" in r.output
    # appending after a reopen (a resumed sweep) continues the same chain
    lg = Ledger(led)
    lg.append_round(_row(8))
    lg.close()
    assert verify_ledger(led).ok and verify_ledger(led).rounds == 9


TAMPER = {
    "insert or replace": ([f"INSERT OR REPLACE INTO rounds SELECT {COLS.replace('decision', chr(39) + 'kept' + chr(39))}, "
                           "chain FROM rounds WHERE round = 5"], "round 5"),
    "replace into": ([f"REPLACE INTO rounds SELECT {COLS.replace('reason', chr(39) + 'looks fine' + chr(39))}, chain "
                      "FROM rounds WHERE round = 5"], "round 5"),
    "forged round 999": ([f"INSERT INTO rounds({COLS}, chain) SELECT sweep, 999, variable, old, new, config, "
                          "config_hash, baseline_hash, index_fingerprint, metrics, 99.0, 'kept', reason, eval_s, "
                          "reindex_s, created, chain FROM rounds WHERE round = 7"], "round 999"),
    "dropped trigger then update": (["DROP TRIGGER rounds_append_only_update",
                                     "UPDATE rounds SET objective = 99 WHERE round = 3"], "round 3"),
    "deleted middle round": (["DROP TRIGGER rounds_append_only_delete", "DELETE FROM rounds WHERE round = 2"],
                             "round 3"),
    "changed sweep params": (["DROP TRIGGER sweeps_identity_fixed",
                              "UPDATE sweeps SET params = '{\"rounds\": 8, \"seed\": 1}'"], "round 0"),
    "deleted sweep": (["DROP TRIGGER sweeps_never_deleted", "PRAGMA foreign_keys = OFF", "DELETE FROM sweeps"],
                      "sweeps row was deleted"),
    "changed holdout": (["UPDATE holdout SET result = '{\"hit@5\": 0.9}'"], "holdout"),
}


@pytest.mark.parametrize("case", list(TAMPER))
def test_tampering_is_named_by_verify_and_refused_by_reports(tmp_path, case):
    led = tmp_path / "l.sqlite"
    make_ledger(led)
    stmts, where = TAMPER[case]
    sql(led, *stmts)
    v = verify_ledger(led)
    assert not v.ok and where in v.problems[0], v.problems
    r = CliRunner().invoke(main, ["ledger", "--verify", "--ledger", str(led)])
    assert r.exit_code == 1 and "FAILED verification" in r.output and where in r.output
    for verb in (["ledger"], ["best"]):
        r = CliRunner().invoke(main, verb + ["--ledger", str(led)])
        assert r.exit_code == 1 and "cannot be trusted" in r.output and where in r.output, (verb, r.output)


def test_the_triggers_still_refuse_plain_updates(tmp_path):
    led = tmp_path / "l.sqlite"
    make_ledger(led)
    for stmt in ("UPDATE sweeps SET params = '{}'", "DELETE FROM sweeps", "UPDATE rounds SET reason = 'x'"):
        with pytest.raises(Exception, match="append-only"):
            sql(led, stmt)
    assert verify_ledger(led).ok


def test_a_restored_trigger_is_reported_not_hidden(tmp_path):
    led = tmp_path / "l.sqlite"
    make_ledger(led)
    sql(led, "DROP TRIGGER rounds_append_only_delete")
    assert any("rounds_append_only_delete has been dropped" in p for p in verify_ledger(led).problems)
    Ledger(led).close()                                     # reopening restores it, and records that it did
    v = verify_ledger(led)
    assert v.ok and any("rounds_append_only_delete were found dropped and restored" in n for n in v.notes)


@pytest.mark.parametrize("verb", ["sweep", "ledger", "best"])
def test_a_search_index_as_ledger_is_refused_before_anything_is_written(small_index, tmp_path, verb):
    before = digest(small_index)
    files_before = sorted(os.listdir(small_index.parent))
    args = {"sweep": ["sweep", "--db", str(small_index), "--gold", str(tmp_path / "g.yaml")],
            "ledger": ["ledger"], "best": ["best"]}[verb]
    r = CliRunner().invoke(main, args + ["--ledger", str(small_index)])
    assert r.exit_code == 1, r.output
    assert "is not an autoresearch ledger" in r.output and "looks like a search index" in r.output
    assert digest(small_index) == before and sorted(os.listdir(small_index.parent)) == files_before


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_bytes(b"just some text, not a database\n" * 10)
    before = digest(junk)
    with pytest.raises(SearchCoreError, match="not a SQLite file"):
        Ledger(junk)
    assert digest(junk) == before


def test_resume_with_a_missing_ledger_creates_nothing(tmp_path):
    led = tmp_path / "sub" / "missing.sqlite"
    r = CliRunner().invoke(main, ["sweep", "--db", str(tmp_path / "x.sqlite"), "--gold", str(tmp_path / "g.yaml"),
                                  "--ledger", str(led), "--resume", "abc"])
    assert r.exit_code == 1 and "no ledger at" in r.output and "nothing was created" in r.output
    assert not led.exists() and not led.parent.exists()
    r = CliRunner().invoke(main, ["best", "--ledger", str(led)])
    assert r.exit_code == 1 and not led.parent.exists()


V1_SCHEMA = [
    "CREATE TABLE sweeps (id TEXT PRIMARY KEY, created TEXT NOT NULL, params TEXT NOT NULL, start_config TEXT NOT NULL,"
    " status TEXT NOT NULL, finished TEXT, summary TEXT)",
    "CREATE TABLE rounds (sweep TEXT NOT NULL REFERENCES sweeps(id), round INTEGER NOT NULL, variable TEXT NOT NULL,"
    " old TEXT, new TEXT, config TEXT NOT NULL, config_hash TEXT NOT NULL, baseline_hash TEXT NOT NULL,"
    " index_fingerprint TEXT, metrics TEXT NOT NULL, objective REAL, decision TEXT NOT NULL, reason TEXT NOT NULL,"
    " eval_s REAL, reindex_s REAL, created TEXT NOT NULL, PRIMARY KEY (sweep, round))",
    "CREATE TRIGGER rounds_append_only_update BEFORE UPDATE ON rounds BEGIN SELECT RAISE(ABORT, 'no'); END",
    "CREATE TABLE holdout (sweep TEXT PRIMARY KEY REFERENCES sweeps(id), result TEXT NOT NULL, created TEXT NOT NULL)",
]


def test_a_v1_ledger_is_sealed_on_upgrade_and_then_verified(tmp_path):
    led = tmp_path / "old.sqlite"
    rows = [f"INSERT INTO rounds VALUES ('old', {i}, 'rrf_k', '60', '{61 + i}', '{{}}', 'c', 'b', NULL, '{{}}', "
            f"{50 + i}, 'rejected:no_gain', 'r', 1.0, NULL, '2026-01-01')" for i in range(4)]
    sql(led, *V1_SCHEMA, "INSERT INTO sweeps VALUES ('old', '2026-01-01', '{}', '{}', 'finished', NULL, NULL)", *rows,
        "INSERT INTO holdout VALUES ('old', '{}', '2026-01-01')")
    assert verify_ledger(led).needs_upgrade
    r = CliRunner().invoke(main, ["ledger", "--verify", "--ledger", str(led)])
    assert r.exit_code == 0 and "hash chain intact" in r.output and "4 round(s) were written before hash chaining" in r.output
    lg = Ledger(led)
    assert [x.round for x in lg.rounds("old")] == [0, 1, 2, 3]
    lg.append_round(_row(4, sweep="old"))
    lg.close()
    assert verify_ledger(led).ok
    sql(led, "DROP TRIGGER rounds_append_only_update", "UPDATE rounds SET decision = 'kept' WHERE round = 1")
    assert "round 1" in verify_ledger(led).problems[0]


SMALL_GOLD = """name: small
questions:
  - id: Q1
    level: L0
    query: "GraphRAG 커뮤니티 요약"
    gold: ["ai/graphrag"]
    why: "title"
  - id: Q2
    level: L1
    query: "김치찌개 재료"
    gold: ["life/kimchi"]
    why: "recipe"
  - id: Q3
    level: L1
    query: "순위 융합 점수"
    gold: ["ai/rrf"]
    why: "paraphrase"
  - id: P1
    level: probe
    query: "부대찌개 끓이는 법"
    gold: []
    why: "no note"
"""


def test_a_real_sweep_and_its_resume_keep_the_chain_intact(small_index, tmp_path):
    from tests.helpers.sweeps import FUSION_SPACE
    gold = tmp_path / "gold.yaml"
    gold.write_text(SMALL_GOLD, encoding="utf-8")
    sp = tmp_path / "space.toml"
    sp.write_text(FUSION_SPACE)
    led = tmp_path / "ledger.sqlite"
    base = ["sweep", "--db", str(small_index), "--gold", str(gold), "--ledger", str(led)]
    r = CliRunner().invoke(main, base + ["--space", str(sp), "--rounds", "3", "--holdout", str(gold), "--json"])
    assert r.exit_code == 0, r.output
    sid = json.loads(r.output[r.output.index("{"):])["sweep"]
    r = CliRunner().invoke(main, base + ["--resume", sid, "--rounds", "5"])
    assert r.exit_code == 0, r.output
    v = verify_ledger(led)
    assert v.ok and v.rounds == 6, v.message()              # the baseline round 0, then rounds 1-5
    r = CliRunner().invoke(main, ["best", "--ledger", str(led)])
    assert r.exit_code == 0 and "[" in r.output


def test_a_second_look_at_a_ledger_this_process_holds_keeps_its_locks(tmp_path):
    """A daemon holds the ledger (a sweep) while a report in the same process opens and verifies it: the
    check that it is a ledger goes through SQLite, so its close drops none of the sweep's locks."""
    from tests.helpers.live_file import assert_look_keeps_the_locks
    path = tmp_path / "ledger.sqlite"
    make_ledger(path, n=2)

    def look(p):
        Ledger(p, create=False).close()
        verify_ledger(p)
    assert_look_keeps_the_locks(path, look)


def test_a_reader_never_sees_a_ledger_half_made(tmp_path, monkeypatch):
    """The tables are made in one transaction: a second process opening the file between two of the creating
    process's statements (the daemon's first sweep while `status` or a report reads) sees no table or all of
    them. Made one statement at a time, it saw `sweeps` without `rounds` and refused the file as not a ledger."""
    import tuner.ledger.ledger as ledger_module
    from search_core.index.store import connect
    from tuner.ledger.chain import check_ledger_file
    path = tmp_path / "ledger.sqlite"
    seen = []

    class Between:
        """The creating connection, which lets another reader in after each statement."""
        def __init__(self, conn):
            self._conn = conn

        def execute(self, sql, *args):
            out = self._conn.execute(sql, *args)
            if sql.lstrip().upper().startswith("CREATE"):
                check_ledger_file(path, create=True)      # raises LedgerError on a half-made ledger
                seen.append(sql.split("(")[0].strip())
            return out

        def __getattr__(self, name):
            return getattr(self._conn, name)

    monkeypatch.setattr(ledger_module, "connect", lambda p: Between(connect(p)))
    ledger_module.Ledger(path).close()
    assert any("sweeps" in s for s in seen) and any("rounds" in s for s in seen)
