"""The ledger's schema in one place: its tables and triggers, the closed vocabulary of decisions, the
columns a round's hash covers, and the file's kind and version."""

from __future__ import annotations

from enum import StrEnum

LEDGER_KIND = "autoresearch-ledger"
LEDGER_SCHEMA = 2          # 1: rounds without chain; 2: chain columns, ledger_meta, sweeps triggers
ROUND_CONTENT = ("sweep", "round", "variable", "old", "new", "config", "config_hash", "baseline_hash",
                 "index_fingerprint", "metrics", "objective", "decision", "reason", "eval_s", "reindex_s", "created")
SWEEP_COLUMNS = ("id", "created", "params", "start_config", "status", "finished", "summary")
REAL_COLUMNS = {"objective", "eval_s", "reindex_s"}
INT_COLUMNS = {"round"}
TRIGGERS = ("rounds_append_only_update", "rounds_append_only_delete", "sweeps_identity_fixed", "sweeps_never_deleted")



class RoundDecision(StrEnum):
    """What became of a round; each value is the string the ledger stores (and its CHECK allows)."""
    KEPT = "kept"
    HIT5_REGRESSED = "rejected:hit5_regressed"
    NO_GAIN = "rejected:no_gain"
    LEVEL_GUARD = "rejected:level_guard"
    LATENCY_BUDGET = "rejected:latency_budget"
    UNAVAILABLE = "unavailable"          # the round's model cannot load here
    CRASHED = "crashed"                  # the round raised; the reason names the error

    @property
    def rejected(self) -> bool:
        return self.value.startswith("rejected:")

    @property
    def evaluated(self) -> bool:
        """Did an evaluation stand behind it (not a model that could not load, not a crash)?"""
        return self not in (RoundDecision.UNAVAILABLE, RoundDecision.CRASHED)


DECISIONS = tuple(d.value for d in RoundDecision)

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS sweeps (
    id TEXT PRIMARY KEY, created TEXT NOT NULL, params TEXT NOT NULL, start_config TEXT NOT NULL,
    status TEXT NOT NULL, finished TEXT, summary TEXT);
CREATE TABLE IF NOT EXISTS rounds (
    sweep TEXT NOT NULL REFERENCES sweeps(id), round INTEGER NOT NULL, variable TEXT NOT NULL,
    old TEXT, new TEXT, config TEXT NOT NULL, config_hash TEXT NOT NULL, baseline_hash TEXT NOT NULL,
    index_fingerprint TEXT, metrics TEXT NOT NULL, objective REAL,
    decision TEXT NOT NULL CHECK (decision IN ({", ".join(repr(d) for d in DECISIONS)})),
    reason TEXT NOT NULL, eval_s REAL, reindex_s REAL, created TEXT NOT NULL, chain TEXT,
    PRIMARY KEY (sweep, round));
CREATE TRIGGER IF NOT EXISTS rounds_append_only_update BEFORE UPDATE ON rounds
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: rounds are never changed'); END;
CREATE TRIGGER IF NOT EXISTS rounds_append_only_delete BEFORE DELETE ON rounds
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: rounds are never deleted'); END;
CREATE TABLE IF NOT EXISTS holdout (
    sweep TEXT PRIMARY KEY REFERENCES sweeps(id), result TEXT NOT NULL, created TEXT NOT NULL, chain TEXT);
"""
ROUND_TRIGGERS = [s for s in SCHEMA.split(";\n") if "CREATE TRIGGER" in s]

SWEEP_TRIGGERS = """
CREATE TRIGGER IF NOT EXISTS sweeps_identity_fixed BEFORE UPDATE OF id, created, params, start_config ON sweeps
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: a sweep''s id, params and start config never change'); END;
CREATE TRIGGER IF NOT EXISTS sweeps_never_deleted BEFORE DELETE ON sweeps
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only: sweeps are never deleted'); END
"""
