"""Make tampering with the ledger visible: a hash chain over rounds, a file-kind check, and the verifier.

SQLite cannot stop a determined writer (`INSERT OR REPLACE` skips DELETE triggers, triggers can be
dropped), so each round stores chain = sha256(previous chain + canonical content); the first link of a
sweep hashes its immutable fields (id, created, params, start_config). `verify_ledger` recomputes every
link and names the first round whose stored hash does not match. What a chain cannot show: a writer who
recomputes the hashes with this code, and removal of a sweep's last rounds (the rest still verifies).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from search_core import SearchCoreError
from search_core.index.store import connect, peek, sqlite_file_problem

from tuner.ledger.schema import (INT_COLUMNS, LEDGER_KIND, LEDGER_SCHEMA, REAL_COLUMNS, ROUND_CONTENT, SWEEP_TRIGGERS,
                                 TRIGGERS)

class LedgerError(SearchCoreError):
    pass


def _canonical(values) -> bytes:
    return json.dumps(list(values), ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def link(prev: str, values) -> str:
    return hashlib.sha256(prev.encode("ascii") + b"\n" + _canonical(values)).hexdigest()


def genesis(sweep_id, created, params, start_config) -> str:
    return link("", ("sweep", sweep_id, created, params, start_config))


SQLiteValue = str | int | float | None


def normalise_round(values: dict) -> dict[str, SQLiteValue]:
    """The values exactly as SQLite will give them back (column affinity), so the hash of what was
    written equals the hash of what is read: an int objective is stored as REAL and read as a float.
    Column -> stored value: the row's columns, as Round.columns hands them over."""
    out = {}
    for k in ROUND_CONTENT:
        v = values.get(k)
        if v is not None:
            v = float(v) if k in REAL_COLUMNS else int(v) if k in INT_COLUMNS else str(v)
        out[k] = v
    return out


def holdout_values(sweep_id, result, created) -> tuple:
    return ("holdout", sweep_id, result, created)


# -- what kind of file is this ------------------------------------------------------------------------
def check_ledger_file(path: Path, *, create: bool) -> None:
    """Refuse, before anything is written, a path that is missing (unless creating) or any SQLite file
    that is not a ledger: connect() for writing would switch its journal mode and add our tables."""
    if not path.exists():
        if create:
            return
        raise LedgerError(f"no ledger at {path}; nothing was created. Check the path, or start a sweep "
                          "without --resume to create it")
    if path.is_dir():
        raise LedgerError(f"--ledger {path} is a folder; pass a file such as {path / 'ledger.sqlite'}")
    if path.stat().st_size == 0:
        return
    problem = sqlite_file_problem(path)
    if problem is not None:
        raise LedgerError(f"{path} is not a SQLite file ({problem}), so not an autoresearch ledger; nothing was "
                          "written to it. Pass a ledger path, e.g. --ledger runs/ledger.sqlite")
    conn = peek(path)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        kind = None
        if "ledger_meta" in tables:
            row = conn.execute("SELECT value FROM ledger_meta WHERE key = 'kind'").fetchone()
            kind = json.loads(row[0]) if row else None
    finally:
        conn.close()
    if not tables or ({"sweeps", "rounds"} <= tables and kind in (None, LEDGER_KIND)):
        return
    looks = "; it looks like a search index" if {"chunks", "notes"} <= tables else ""
    raise LedgerError(f"{path} is not an autoresearch ledger (its tables: {', '.join(sorted(tables)[:8])}){looks}; "
                      "nothing was written to it. Pass a ledger path, e.g. --ledger runs/ledger.sqlite")


# -- schema upgrade -------------------------------------------------------------------------------------
def _meta(conn, key, default=None):
    row = conn.execute("SELECT value FROM ledger_meta WHERE key = ?", (key,)).fetchone()
    return json.loads(row[0]) if row else default


def _set_meta(conn, key, value) -> None:
    conn.execute("INSERT OR REPLACE INTO ledger_meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))


def upgrade(conn, round_triggers_sql: list[str], tables_sql: list[str] = ()) -> None:
    """Bring a ledger to LEDGER_SCHEMA inside one transaction, its tables (`tables_sql`, each IF NOT EXISTS) made
    first in it. A v1 ledger's rounds are sealed now (their chain is computed from what they hold today) and
    ledger_meta says so; a newer ledger is refused. Triggers found missing on a chained ledger are restored and
    the restore is recorded, never hidden."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for stmt in tables_sql:
            conn.execute(stmt)
        conn.execute("CREATE TABLE IF NOT EXISTS ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        version = _meta(conn, "schema", 1)
        if version > LEDGER_SCHEMA:
            raise LedgerError(f"this ledger has schema v{version}, newer than this autoresearch (v{LEDGER_SCHEMA}); "
                              "upgrade autoresearch to read it")
        present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        missing = [t for t in TRIGGERS if t not in present]
        if version == LEDGER_SCHEMA and missing:
            _set_meta(conn, "triggers_restored", _meta(conn, "triggers_restored", []) +
                      [{"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "missing": missing}])
        for table in ("rounds", "holdout"):
            cols = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
            if "chain" not in cols:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN chain TEXT")
        if version < LEDGER_SCHEMA:
            n = _seal_unchained(conn, round_triggers_sql)
            _set_meta(conn, "sealed_from_v1", {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "rounds": n})
        for stmt in round_triggers_sql + SWEEP_TRIGGERS.split(";\n"):
            if stmt.strip():
                conn.execute(stmt)
        if version < LEDGER_SCHEMA or _meta(conn, "kind") != LEDGER_KIND:
            _set_meta(conn, "kind", LEDGER_KIND)
            _set_meta(conn, "schema", LEDGER_SCHEMA)
    except BaseException:
        if conn.in_transaction:          # SQLite may have rolled back itself (SQLITE_FULL, an I/O error)
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _seal_unchained(conn, round_triggers_sql) -> int:
    rows = conn.execute("SELECT count(*) FROM rounds WHERE chain IS NULL").fetchone()[0]
    if not rows:
        return 0
    conn.execute("DROP TRIGGER IF EXISTS rounds_append_only_update")   # restored right after, same transaction
    for sweep_id, first in _genesis_by_sweep(conn).items():
        prev = first
        for values in _rounds(conn, sweep_id):
            prev = link(prev, values[:-1])
            conn.execute("UPDATE rounds SET chain = ? WHERE sweep = ? AND round = ?", (prev, sweep_id, values[1]))
        h = conn.execute("SELECT result, created FROM holdout WHERE sweep = ?", (sweep_id,)).fetchone()
        if h:
            conn.execute("UPDATE holdout SET chain = ? WHERE sweep = ?",
                         (link(first, holdout_values(sweep_id, *h)), sweep_id))
    return rows


def _genesis_by_sweep(conn) -> dict[str, str]:
    return {r[0]: genesis(*r) for r in conn.execute(
        "SELECT id, created, params, start_config FROM sweeps ORDER BY created, rowid")}


def _rounds(conn, sweep_id):
    return conn.execute(f"SELECT {', '.join(ROUND_CONTENT)}, chain FROM rounds WHERE sweep = ? ORDER BY round",
                        (sweep_id,)).fetchall()


def head(conn, sweep_id: str) -> str:
    """The chain value the next round of this sweep links to."""
    row = conn.execute("SELECT chain FROM rounds WHERE sweep = ? ORDER BY round DESC LIMIT 1", (sweep_id,)).fetchone()
    if row and row[0]:
        return row[0]
    return sweep_genesis(conn, sweep_id)


def sweep_genesis(conn, sweep_id: str) -> str:
    """The first link of a sweep; the holdout links here too, so a resumed sweep can add rounds after it."""
    s = conn.execute("SELECT id, created, params, start_config FROM sweeps WHERE id = ?", (sweep_id,)).fetchone()
    if s is None:
        raise LedgerError(f"no sweep {sweep_id!r} in this ledger")
    return genesis(*s)


# -- the verifier -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LedgerVerdict:
    path: str
    sweeps: int
    rounds: int
    problems: tuple[str, ...]          # the first broken round of each broken sweep, then other findings
    notes: tuple[str, ...]             # not tampering, but worth knowing (sealed at upgrade, restored triggers)
    needs_upgrade: bool = False        # a v1 ledger: opening it with Ledger() seals it

    @property
    def ok(self) -> bool:
        return not self.problems

    def message(self) -> str:
        if self.ok:
            head_ = f"ledger {self.path}: {self.sweeps} sweep(s), {self.rounds} round(s); hash chain intact"
        else:
            head_ = (f"ledger {self.path} FAILED verification: {self.problems[0]}" +
                     (f" (and {len(self.problems) - 1} more finding(s))" if len(self.problems) > 1 else ""))
        return "\n".join([head_] + [f"  - {p}" for p in self.problems[1:]] + [f"  note: {n}" for n in self.notes])


def verify_ledger(path: str | Path) -> LedgerVerdict:
    """Recompute every sweep's chain from a read-only connection; name the first round that does not match."""
    path = Path(path)
    check_ledger_file(path, create=False)
    conn = connect(path, readonly=True)
    try:
        return _verify(conn, str(path))
    finally:
        conn.close()


def _verify(conn, name: str) -> LedgerVerdict:
    problems, notes = [], []
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "ledger_meta" not in tables or "chain" not in {r[1] for r in conn.execute("PRAGMA table_info(rounds)")}:
        return LedgerVerdict(name, 0, 0, (f"{name} is a v1 ledger without a hash chain; open it once with this "
                                          "version (e.g. `autoresearch ledger`) to seal it, then verify",), (),
                             needs_upgrade=True)
    for ev in _meta(conn, "triggers_restored", []):
        notes.append(f"append-only triggers {', '.join(ev['missing'])} were found dropped and restored at {ev['at']}")
    sealed = _meta(conn, "sealed_from_v1")
    if sealed and sealed.get("rounds"):
        notes.append(f"{sealed['rounds']} round(s) were written before hash chaining and sealed when the ledger "
                     f"was upgraded at {sealed['at']}; they are verified only from then on")
    starts = _genesis_by_sweep(conn)
    n_rounds = conn.execute("SELECT count(*) FROM rounds").fetchone()[0]
    for sweep_id, first in starts.items():
        prev, expected_round = first, None
        for values in _rounds(conn, sweep_id):
            want = link(prev, values[:-1])
            rnd = values[1]
            if values[-1] != want:
                why = ("has no hash (inserted by hand)" if values[-1] is None else
                       "does not match its content or the round before it (changed, replaced, inserted or a "
                       "round before it removed after it was written)")
                if expected_round is None:   # the first round links to the sweep row itself
                    why += "; or the sweep's params or start config were changed"
                problems.append(f"sweep {sweep_id} round {rnd}: stored hash {why}")
                break
            if expected_round is not None and rnd != expected_round:
                problems.append(f"sweep {sweep_id} round {rnd}: follows round {expected_round - 1} (rounds missing)")
                break
            expected_round, prev = rnd + 1, want
        h = conn.execute("SELECT result, created, chain FROM holdout WHERE sweep = ?", (sweep_id,)).fetchone()
        if h and h[2] != link(first, holdout_values(sweep_id, h[0], h[1])):
            problems.append(f"sweep {sweep_id} holdout: stored hash does not match its result")
    orphans = conn.execute("SELECT DISTINCT sweep FROM rounds WHERE sweep NOT IN (SELECT id FROM sweeps)").fetchall()
    for (sweep_id,) in orphans:
        problems.append(f"sweep {sweep_id}: has rounds but its sweeps row was deleted")
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    problems += [f"the append-only trigger {t} has been dropped" for t in TRIGGERS if t not in present]
    return LedgerVerdict(name, len(starts), n_rounds, tuple(problems), tuple(notes))
