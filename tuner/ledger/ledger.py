"""The append-only ledger: every sweep and every round, in one SQLite file under runs/.

A round is one INSERT in one transaction: `kill -9` loses at most the round in flight, never half a
row. Triggers refuse UPDATE and DELETE on rounds; decisions come from a closed vocabulary. Each round
also carries a hash chained to the previous one (tuner.ledger.chain), so a change that gets past the
triggers still shows in `autoresearch ledger --verify`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from search_core.index.store import atomic, connect

from tuner.ledger.chain import (LedgerError, LedgerVerdict, check_ledger_file, head, holdout_values, link, normalise_round,
                                sweep_genesis, upgrade, verify_ledger)
from tuner.evaluation.evaluate import EvalResult
from tuner.ledger.schema import DECISIONS, ROUND_TRIGGERS, SCHEMA, RoundDecision


def round_result(row: dict) -> EvalResult | None:
    """A round's evaluation as its ledger row keeps it (EvalResult.to_ledger), read back; None: the round
    was not evaluated (unavailable, crashed, provably unchanged)."""
    return EvalResult.from_ledger(row["metrics"]) if row.get("metrics") else None


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
        for stmt in SCHEMA.split(";\n"):
            if stmt.strip() and stmt not in ROUND_TRIGGERS:   # upgrade() creates them, noting any found missing
                self.conn.execute(stmt)
        upgrade(self.conn, ROUND_TRIGGERS)

    def close(self):
        self.conn.close()

    # -- sweeps ---------------------------------------------------------------------------------------
    def new_sweep(self, sweep_id: str, params: dict, start_config: dict) -> None:
        with atomic(self.conn):
            self.conn.execute("INSERT INTO sweeps(id, created, params, start_config, status) VALUES (?,?,?,?,?)",
                              (sweep_id, _now(), json.dumps(params, ensure_ascii=False),
                               json.dumps(start_config, ensure_ascii=False), "running"))

    def set_status(self, sweep_id: str, status: str, summary: dict | None = None) -> None:
        with atomic(self.conn):
            self.conn.execute("UPDATE sweeps SET status = ?, finished = ?, summary = COALESCE(?, summary) WHERE id = ?",
                              (status, _now(), json.dumps(summary, ensure_ascii=False) if summary else None, sweep_id))

    def sweep(self, sweep_id: str | None = None) -> dict | None:
        q = "SELECT id, created, params, start_config, status, finished, summary FROM sweeps "
        row = (self.conn.execute(q + "WHERE id = ?", (sweep_id,)).fetchone() if sweep_id else
               self.conn.execute(q + "ORDER BY created DESC, rowid DESC LIMIT 1").fetchone())
        if not row:
            return None
        return {"id": row[0], "created": row[1], "params": json.loads(row[2]), "start_config": json.loads(row[3]),
                "status": row[4], "finished": row[5], "summary": json.loads(row[6]) if row[6] else None}

    def sweeps(self) -> list[dict]:
        return [self.sweep(r[0]) for r in self.conn.execute("SELECT id FROM sweeps ORDER BY created, rowid")]

    # -- rounds ---------------------------------------------------------------------------------------
    def append_round(self, sweep_id: str, row: dict) -> None:
        if row["decision"] not in DECISIONS:
            raise ValueError(f"decision {row['decision']!r} is not one of {', '.join(DECISIONS)}")
        values = normalise_round({
            "sweep": sweep_id, "round": row["round"], "variable": row["variable"],
            "old": json.dumps(row.get("old"), ensure_ascii=False), "new": json.dumps(row.get("new"), ensure_ascii=False),
            "config": json.dumps(row["config"], ensure_ascii=False), "config_hash": row["config_hash"],
            "baseline_hash": row["baseline_hash"], "index_fingerprint": row.get("index_fingerprint"),
            "metrics": json.dumps(row.get("metrics", {}), ensure_ascii=False), "objective": row.get("objective"),
            "decision": RoundDecision(row["decision"]).value, "reason": row["reason"], "eval_s": row.get("eval_s"),
            "reindex_s": row.get("reindex_s"), "created": _now()})
        with atomic(self.conn):
            chain = link(head(self.conn, sweep_id), list(values.values()))
            self.conn.execute(
                f"INSERT INTO rounds({', '.join(values)}, chain) VALUES ({', '.join('?' * (len(values) + 1))})",
                (*values.values(), chain))

    def rounds(self, sweep_id: str) -> list[dict]:
        cols = ("round", "variable", "old", "new", "config", "config_hash", "baseline_hash", "index_fingerprint",
                "metrics", "objective", "decision", "reason", "eval_s", "reindex_s", "created")
        out = []
        for r in self.conn.execute(f"SELECT {', '.join(cols)} FROM rounds WHERE sweep = ? ORDER BY round", (sweep_id,)):
            d = dict(zip(cols, r))
            for k in ("old", "new", "config", "metrics"):
                d[k] = json.loads(d[k]) if d[k] is not None else None
            d["decision"] = RoundDecision(d["decision"])
            d["sweep"] = sweep_id
            out.append(d)
        return out

    def record_holdout(self, sweep_id: str, result: dict) -> None:
        text, created = json.dumps(result, ensure_ascii=False), _now()
        with atomic(self.conn):
            chain = link(sweep_genesis(self.conn, sweep_id), holdout_values(sweep_id, text, created))
            self.conn.execute("INSERT OR REPLACE INTO holdout(sweep, result, created, chain) VALUES (?,?,?,?)",
                              (sweep_id, text, created, chain))

    def holdout(self, sweep_id: str) -> dict | None:
        row = self.conn.execute("SELECT result FROM holdout WHERE sweep = ?", (sweep_id,)).fetchone()
        return json.loads(row[0]) if row else None


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
