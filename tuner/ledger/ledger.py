"""The append-only ledger: every sweep and every round, in one SQLite file under runs/.

A round is one INSERT in one transaction: `kill -9` loses at most the round in flight, never half a
row. Triggers refuse UPDATE and DELETE on rounds; decisions come from a closed vocabulary. Each round
also carries a hash chained to the previous one (tuner.ledger.chain), so a change that gets past the
triggers still shows in `autoresearch ledger --verify`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from search_core.index.store import atomic, connect

from tuner.ledger.chain import (LedgerError, LedgerVerdict, check_ledger_file, head, holdout_values, link, sweep_genesis,
                                upgrade, verify_ledger)
from tuner.ledger.round import Round
from tuner.ledger.schema import ROUND_CONTENT, ROUND_TRIGGERS, SCHEMA, SWEEP_COLUMNS
from tuner.ledger.sweep_record import SweepRecord
from tuner.stored_config import StoredConfig
from tuner.sweep.params import RecordedParams
from tuner.sweep.summary import HoldoutCheck, RetestResult, RetestStopped, SweepSummary


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class Ledger:
    def __init__(self, path: str | Path, *, create: bool = True):
        """create=False: a missing file is an error and nothing is created (`sweep --resume`, reports).
        Any existing file that is not a ledger is refused before it is opened for writing."""
        self.path = Path(path)
        check_ledger_file(self.path, create=create)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = connect(self.path)
        # the tables in upgrade()'s transaction: a reader opening the file meanwhile (`status`, a report, another
        # process's Ledger) sees no table or all of them, never sweeps without rounds (once refused as "not a ledger")
        upgrade(self.conn, ROUND_TRIGGERS,
                [s for s in SCHEMA.split(";\n") if s.strip() and s not in ROUND_TRIGGERS])  # it makes the triggers

    def close(self):
        self.conn.close()

    # -- sweeps ---------------------------------------------------------------------------------------
    def new_sweep(self, sweep_id: str, params: RecordedParams, start: StoredConfig) -> None:
        with atomic(self.conn):
            self.conn.execute("INSERT INTO sweeps(id, created, params, start_config, status) VALUES (?,?,?,?,?)",
                              (sweep_id, _now(), json.dumps(params.to_json(), ensure_ascii=False),
                               json.dumps(start.to_json(), ensure_ascii=False), "running"))

    def set_status(self, sweep_id: str, status: str,
                   summary: SweepSummary | RetestResult | RetestStopped | None = None) -> None:
        with atomic(self.conn):
            self.conn.execute("UPDATE sweeps SET status = ?, finished = ?, summary = COALESCE(?, summary) WHERE id = ?",
                              (status, _now(), json.dumps(summary.to_json(), ensure_ascii=False) if summary is not None else None, sweep_id))

    def sweep(self, sweep_id: str | None = None) -> SweepRecord | None:
        """The sweep `sweep_id` (default: the latest), or None."""
        q = f"SELECT {', '.join(SWEEP_COLUMNS)} FROM sweeps "
        row = (self.conn.execute(q + "WHERE id = ?", (sweep_id,)).fetchone() if sweep_id else
               self.conn.execute(q + "ORDER BY created DESC, rowid DESC LIMIT 1").fetchone())
        return SweepRecord.from_columns(dict(zip(SWEEP_COLUMNS, row))) if row else None

    def sweeps(self) -> list[SweepRecord]:
        """Every sweep, oldest first."""
        cur = self.conn.execute(f"SELECT {', '.join(SWEEP_COLUMNS)} FROM sweeps ORDER BY created, rowid")
        return [SweepRecord.from_columns(dict(zip(SWEEP_COLUMNS, r))) for r in cur]

    # -- rounds ---------------------------------------------------------------------------------------
    def append_round(self, rnd: Round) -> Round:
        """Append one round (its `created` stamped now) in one transaction; returns it as it now reads back."""
        values = dataclasses.replace(rnd, created=_now()).columns()
        with atomic(self.conn):
            chain = link(head(self.conn, rnd.sweep), list(values.values()))
            self.conn.execute(
                f"INSERT INTO rounds({', '.join(values)}, chain) VALUES ({', '.join('?' * (len(values) + 1))})",
                (*values.values(), chain))
        return Round.from_columns(values)

    def rounds(self, sweep_id: str) -> list[Round]:
        cur = self.conn.execute(f"SELECT {', '.join(ROUND_CONTENT)} FROM rounds WHERE sweep = ? ORDER BY round",
                                (sweep_id,))
        return [Round.from_columns(dict(zip(ROUND_CONTENT, r))) for r in cur]

    def first_round_named(self, prefix: str) -> tuple[str, int, str] | None:
        """(sweep, round, created) of the earliest round whose variable starts with `prefix`, or None."""
        return self.conn.execute("SELECT sweep, round, created FROM rounds WHERE substr(variable, 1, ?) = ? "
                                 "ORDER BY created, rowid LIMIT 1", (len(prefix), prefix)).fetchone()

    def record_holdout(self, sweep_id: str, result: HoldoutCheck) -> None:
        text, created = json.dumps(result.to_json(), ensure_ascii=False), _now()
        with atomic(self.conn):
            chain = link(sweep_genesis(self.conn, sweep_id), holdout_values(sweep_id, text, created))
            self.conn.execute("INSERT OR REPLACE INTO holdout(sweep, result, created, chain) VALUES (?,?,?,?)",
                              (sweep_id, text, created, chain))

    def holdout(self, sweep_id: str) -> HoldoutCheck | None:
        row = self.conn.execute("SELECT result FROM holdout WHERE sweep = ?", (sweep_id,)).fetchone()
        return HoldoutCheck.from_json(json.loads(row[0])) if row else None


def verify_or_seal(path: str | Path) -> LedgerVerdict:
    """verify_ledger, read-only first (so dropped triggers are seen before anything restores them); a v1
    ledger is sealed by opening it once, then verified."""
    v = verify_ledger(path)
    if v.needs_upgrade:
        Ledger(path, create=False).close()
        v = verify_ledger(path)
    return v


def require_intact(path: str | Path) -> LedgerVerdict:
    """What every report runs first: a broken chain is an error that names the round and the verifier."""
    v = verify_or_seal(path)
    if not v.ok:
        raise LedgerError(f"{v.message()}\nThe ledger's history cannot be trusted; see "
                          f"`autoresearch ledger --verify --ledger {path}`")
    return v
