"""Promotion: a sweep's winner becomes the active config (`runs/active.toml`) only if it held on the holdout.

`runs/active.toml` holds the config under [search] and, under [active], the index it must be searched
with, so that an embedder change is never active with the old embedder's index. The winner's index is
copied next to it first and the TOML is replaced in one `os.replace`: a reader sees the old pair or the
new pair, never a mix. Every decision (promoted, declined, rollback) is a row in `runs/promotions.sqlite`
with the previous config and index, so `config rollback` can undo any promotion.
"""

from __future__ import annotations

import dataclasses
import json
import os
from contextlib import contextmanager
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from search_core import SearchCoreError
from search_core.config import SearchConfig, load_config, read_toml
from search_core.gate.model import DEFAULT_GATE_FILE, load_gate, sidecar_path
from search_core.files import LockBusy, PidLock, atomic_replace, atomic_write_text
from search_core.index.store import atomic, backup_copy, connect, sqlite_file_problem
from search_core.paths import ACTIVE_CONFIG as ACTIVE
from search_core.paths import RUNS_ENV, default_index, no_index_message, runs_dir
from search_core.validate import Where

from tuner.promotion.config_toml import config_toml, toml_table
from tuner.promotion.verdicts import (GATE_NOT_PROMOTED, HELD, HELD_OBJECTIVE_FELL, HIT5_FELL, NO_CHANGE, NO_HOLDOUT,
                                      PROMOTION_VERDICTS as verdict, WORSE_ON_HOLDOUT)
from tuner.reasons import Reason
from tuner.stored_config import StoredConfig

if TYPE_CHECKING:      # annotations only: `search` reads the active config here and needs no evaluation code
    from tuner.sweep.summary import HoldoutCheck

HISTORY = "promotions.sqlite"
LOCK = "promotion.lock"        # one promotion or rollback at a time per runs folder (and recovery under it)

SCHEMA = """CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY, created TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('promoted', 'declined', 'rollback')),
    sweep TEXT, config TEXT, index_path TEXT, previous_config TEXT, previous_index TEXT,
    reason TEXT NOT NULL, undoes INTEGER, sidecar_before TEXT)"""
# sidecar_before: JSON {"text": ...} of the gate-model file (`<index>.gate.json`) at the promoted index's path
# just before the promotion wrote it (text null: there was none), so a rollback puts it back. Two promotions
# of one embedder install the same index file name: without it, undoing the second kept its gate model
# beside the first's config. NULL on rows written before the column existed: rollback leaves the file alone.
# pending: 1 from the moment a promotion or rollback is decided until active.toml says so. A process killed in
# between leaves a pending row; History.recover() (at every open, under the promotion lock) then finishes it
# (active.toml was written: the row stands) or undoes it (it was not: the row is marked interrupted and the
# gate-model file put back), and removes the temporary files such a kill leaves.


@dataclass(frozen=True)
class Active:
    config: SearchConfig
    index: Path | None
    source: str          # "sweep <id>" or "rollback of #<n>"


def read_active(runs: str | Path | None = None) -> Active | None:
    path = runs_dir(runs) / ACTIVE
    if not path.exists():
        return None
    data = read_toml(path, "active config")
    where = Where(str(path), "[active]")            # hand-edited: `active = 5`, `index = 5` were tracebacks
    meta = where.table_of(data.get("active", {}), "[active]")
    where.known_keys(meta, ("source", "index"))
    cfg = load_config(path)
    index = where.string("index", meta["index"], min_chars=1, max_chars=4096) if meta.get("index") is not None else None
    return Active(cfg, Path(index) if index else None, where.string("source", meta.get("source", ""), max_chars=4096))


def _write_active(runs: Path, cfg: SearchConfig, index: Path | None, source: str) -> None:
    body = config_toml(cfg, "the active config: read by `search` and `eval` when no --config is given; "
                            "written by promotion and `config rollback`, never by hand")
    head = toml_table("active", {"source": source, "index": None if index is None else str(index)})
    atomic_write_text(runs / ACTIVE, body + "\n" + head)


def _install_path(runs: Path, index: Path) -> Path:
    """Where _install_index puts `index` (one name per index file: promotions of one embedder share it)."""
    return runs / "active-indexes" / index.name


def _install_index(runs: Path, index: Path) -> Path:
    """Copy an index into runs/active-indexes/ (temp file + rename), so the active pair never points
    into a sweep's scratch folder that a later sweep may rebuild."""
    dest = _install_path(runs, index)
    dest_dir = dest.parent
    dest_dir.mkdir(parents=True, exist_ok=True)
    if dest.resolve() == index.resolve():
        return dest
    if dest.exists() and sqlite_file_problem(dest) is None:
        # a server may be searching the installed copy: a file renamed over it would find the old file's
        # -wal and -shm still beside it, and the next process to open it would read the old index's pages
        # through them (seen: a fresh reader saw only the old file's tables). Copied into it through SQLite
        # instead (docs/architecture.md, "Live files"): one write transaction, seen by every reader as a
        # commit, and left as it was if the copy fails.
        return backup_copy(index, dest)
    fd, tmp = tempfile.mkstemp(prefix=f".{index.name}.", dir=dest_dir)
    os.close(fd)
    try:
        backup_copy(index, tmp)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return atomic_replace(tmp, dest)


@contextmanager
def promotion_lock(runs: Path):
    """One promotion or rollback at a time in a runs folder (a daemon's sweep and `config rollback`)."""
    lock = PidLock(Path(runs) / LOCK)
    try:
        lock.acquire()
    except LockBusy as e:
        raise SearchCoreError(f"another process (pid {e.holder}) is promoting or rolling back in {runs}; "
                              "retry when it is done") from None
    except OSError as e:
        raise SearchCoreError(f"cannot write to the runs folder {runs}: {e.strerror}; make it writable") from None
    try:
        yield
    finally:
        lock.release()


class History:
    def __init__(self, runs: str | Path | None = None):
        self.runs = runs_dir(runs)
        try:
            self.runs.mkdir(parents=True, exist_ok=True)
            self.conn = connect(self.runs / HISTORY)
            self.conn.execute(SCHEMA)
            cols = {r[1] for r in self.conn.execute("PRAGMA table_info(events)")}
            if "sidecar_before" not in cols:          # a history written before the column
                self.conn.execute("ALTER TABLE events ADD COLUMN sidecar_before TEXT")
            if "pending" not in cols:
                self.conn.execute("ALTER TABLE events ADD COLUMN pending INTEGER")
        except OSError as e:
            raise SearchCoreError(f"cannot write to the runs folder {self.runs}: {e.strerror}; "
                                  f"make it writable or point {RUNS_ENV} elsewhere") from None
        except Exception as e:   # sqlean's OperationalError on a read-only folder
            raise SearchCoreError(f"cannot open {self.runs / HISTORY}: {e}; make the runs folder writable, or, if "
                                  "the file is damaged, move it away (the active config stays as it is)") from None

        try:
            with promotion_lock(self.runs):
                self.recover()
        except SearchCoreError:
            pass                 # another process is promoting: it recovers; this one only reads

    def close(self):
        self.conn.close()

    def recover(self) -> list[str]:
        """Finish or undo what a killed promotion or rollback left (see `pending` above); returns what it did."""
        done = []
        active_path = self.runs / ACTIVE
        for eid, kind, sweep, cfg_json, undoes, side in self.conn.execute(
                "SELECT id, kind, sweep, config, undoes, sidecar_before FROM events WHERE pending = 1").fetchall():
            try:
                active = read_active(self.runs)
            except SearchCoreError:
                active = None
            source = f"sweep {sweep}" if kind == "promoted" else f"rollback of #{undoes}"
            if kind == "rollback" and cfg_json is None:
                written = not active_path.exists()
            else:
                written = active is not None and active.source == source and cfg_json is not None and \
                    StoredConfig.from_json(json.loads(cfg_json)).config_hash() == active.config.config_hash()
            with atomic(self.conn):
                if written:
                    self.conn.execute("UPDATE events SET pending = NULL WHERE id = ?", (eid,))
                    done.append(f"#{eid} {kind}: active.toml had been written; recorded")
                else:
                    self.conn.execute("UPDATE events SET pending = NULL, kind = CASE kind WHEN 'promoted' THEN "
                                      "'declined' ELSE kind END, undoes = CASE kind WHEN 'rollback' THEN NULL "
                                      "ELSE undoes END, reason = 'interrupted before active.toml was written "
                                      "(nothing changed): ' || reason WHERE id = ?", (eid,))
                    done.append(f"#{eid} {kind}: interrupted before active.toml was written; undone")
            if not written and kind == "promoted" and side is not None:
                _restore_sidecar(dataclasses.replace(self.event(eid), sidecar_before=SidecarBefore.from_json(json.loads(side))))
        for tmp in [*self.runs.glob(f".{ACTIVE}.*"), *(self.runs / "active-indexes").glob(".*")]:
            tmp.unlink(missing_ok=True)      # mkstemp leftovers of an atomic write or an index copy
            done.append(f"removed the temporary file {tmp.name}")
        return done

    def _add(self, kind, sweep, cfg: SearchConfig | None, index, prev: Active | None, reason, undoes=None,
             sidecar_before: SidecarBefore | None = None, pending: bool = False) -> int:
        with atomic(self.conn):
            cur = self.conn.execute(
                "INSERT INTO events(created, kind, sweep, config, index_path, previous_config, previous_index, "
                "reason, undoes, sidecar_before, pending) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (time.strftime("%Y-%m-%dT%H:%M:%S%z"), kind, sweep,
                 json.dumps(cfg.as_dict(), ensure_ascii=False) if cfg else None, str(index) if index else None,
                 json.dumps(prev.config.as_dict(), ensure_ascii=False) if prev else None,
                 str(prev.index) if prev and prev.index else None, reason, undoes,
                 None if sidecar_before is None else json.dumps(sidecar_before.to_json(), ensure_ascii=False),
                 1 if pending else None))
            return cur.lastrowid

    def _done(self, eid: int, index: Path | None = None) -> None:
        with atomic(self.conn):
            self.conn.execute("UPDATE events SET pending = NULL, index_path = COALESCE(?, index_path) WHERE id = ?",
                              (None if index is None else str(index), eid))

    def events(self) -> list[PromotionEvent]:
        cols = [f.name for f in dataclasses.fields(PromotionEvent)]
        out = []
        for r in self.conn.execute(f"SELECT {', '.join(cols)} FROM events ORDER BY id"):
            d = dict(zip(cols, r))
            for k, record in (("config", StoredConfig), ("previous_config", StoredConfig),
                              ("sidecar_before", SidecarBefore)):
                d[k] = record.from_json(json.loads(d[k])) if d[k] else None
            out.append(PromotionEvent(**d))
        return out

    def event(self, event_id: int) -> PromotionEvent | None:
        return next((e for e in self.events() if e.id == event_id), None)


@dataclass(frozen=True)
class SidecarBefore:
    """The gate file beside a promoted index before the promotion wrote its own (None: there was none), so
    that an interrupted promotion puts it back."""
    text: str | None

    def to_json(self) -> dict:
        return {"text": self.text}

    @classmethod
    def from_json(cls, d: dict) -> "SidecarBefore":
        return cls(d["text"])


@dataclass(frozen=True)
class PromotionEvent:
    """One row of the promotion history (the `events` table, whose columns these are, in order); `to_json` is
    the row as `config history --json` prints it."""
    id: int
    created: str
    kind: str                       # promoted | declined | rollback
    sweep: str | None
    config: StoredConfig | None     # the config made active; None: the built-in defaults
    index_path: str | None
    previous_config: StoredConfig | None
    previous_index: str | None
    reason: str
    undoes: int | None              # a rollback: the promotion it undid
    sidecar_before: SidecarBefore | None   # None: a row from before the column, or not a promotion
    pending: int | None             # 1 while its files are being written (recover() finishes or undoes it)

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for k in ("config", "previous_config", "sidecar_before"):
            out[k] = out[k].to_json() if out[k] is not None else None
        return out


@dataclass(frozen=True)
class Promotion:
    """What decide_promotion decided and recorded (`event`: its row in the history)."""
    event: int
    promoted: bool
    reason: str
    index: str | None = None        # the installed copy of the winner's index, when promoted

    def to_json(self) -> dict:
        return {"event": self.event, "promoted": self.promoted, "reason": self.reason,
                **({"index": self.index} if self.promoted else {})}


@dataclass(frozen=True)
class Rollback:
    event: int                      # the rollback's own row
    undid: int                      # the promotion it undid
    active: SearchConfig | None     # the config active again; None: the built-in defaults


# -- the promotion rule (pure) -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    promote: bool
    reason: Reason                     # a value of tuner.promotion.verdicts.PROMOTION_VERDICTS


def holdout_verdict(start: SearchConfig, final: SearchConfig, holdout: HoldoutCheck | None) -> Verdict:
    """Promote only when the winner differs from the start and held on the holdout: hit@5 (in questions)
    not lower, and no paired test says the start was significantly better."""
    if start.config_hash() == final.config_hash():
        return Verdict(False, verdict(NO_CHANGE))
    if not holdout:
        return Verdict(False, verdict(NO_HOLDOUT))
    c = holdout.compare
    n = c.n
    start_h, final_h = holdout.start, holdout.final
    a_q, b_q = round(start_h.hit5 * n), round(final_h.hit5 * n)
    if b_q < a_q:
        return Verdict(False, verdict(HIT5_FELL, start=start_h.hit5, final=final_h.hit5, lost=a_q - b_q, n=n))
    from tuner.evaluation.compare import A_BETTER     # here, not at the top: `search` imports this module
    worse = [f"{m} (delta {v.delta:+.4f}, p={v.p_value:.4f})" for m, v in c.metrics.items() if v.verdict_key == A_BETTER]
    if worse:
        return Verdict(False, verdict(WORSE_ON_HOLDOUT, worse=", ".join(worse)))
    hm = c.metrics["hit@5"]
    held = dict(start=start_h.hit5, final=final_h.hit5, gained=b_q - a_q, n=n, p=hm.p_value)
    # The rule is hit@5 in questions and paired tests; a fall of the objective that no paired test
    # calls significant does not decline, but the reader must see it, not only a green "promoted".
    obj = start_h.objective if start_h.objective not in ("hit@5", "mrr") else None
    if obj and final_h.value is not None and final_h.value < start_h.value:
        return Verdict(True, verdict(HELD_OBJECTIVE_FELL, **held, objective=obj, was=start_h.value,
                                     now=final_h.value))
    return Verdict(True, verdict(HELD, **held))


def decide_promotion(sweep_id: str, start: SearchConfig, final: SearchConfig, holdout: HoldoutCheck | None, index: str | Path | None,
                     runs: str | Path | None = None, *, gate_model=None) -> Promotion:
    """Apply the rule and record the outcome; on success the winner (with its index) becomes active.
    `gate_model`: the gate model the sweep decided with for the winner's embedder and reranker (the index's
    gate file, the shipped default, or one the sweep fitted). It is installed beside the promoted index (its
    `.gate.json`, which `search` and recall read) unless it is the shipped default with no gate_threshold
    (_gate_to_install). A probability threshold (`gate_threshold`) means something only with the model it
    was tuned on: without a model, the threshold is not promoted and the reason says so."""
    v = holdout_verdict(start, final, holdout)
    hist = History(runs)
    try:
        with promotion_lock(hist.runs):
            hist.recover()
            return _decide_locked(hist, sweep_id, v, final, index, gate_model)
    finally:
        hist.close()


def _gate_to_install(cfg: SearchConfig, gate_model) -> bool:
    """Whether the promoted index gets the sweep's gate model as its `.gate.json`: whenever the sweep decided
    with a model that `search` would not find beside the installed copy by itself (one it fitted for an
    index no gate file fits, or the source index's own calibrated file: the copy in active-indexes/ has no
    sidecar, so without it the promoted config would be gated by the shipped default or the cosine gate,
    not by the gate it was measured with), and whenever a gate_threshold is promoted (the number means
    something only on that model). The shipped default with no threshold is not copied: the index then
    follows the default a later release ships, as every index without a file does."""
    if gate_model is None:
        return False
    if cfg.gate_threshold is not None:
        return True
    try:
        return gate_model != load_gate(DEFAULT_GATE_FILE)
    except SearchCoreError:
        return True


def _decide_locked(hist: History, sweep_id, v: Verdict, cfg: SearchConfig, index, gate_model) -> Promotion:
    prev = read_active(hist.runs)
    if not v.promote:
        eid = hist._add("declined", sweep_id, cfg, None, prev, v.reason.text())
        return Promotion(eid, False, v.reason.text())
    if index is None:
        raise SearchCoreError(f"cannot promote sweep {sweep_id}: no index for embedder {cfg.embedder}")
    reason = v.reason.text()
    if cfg.gate_threshold is not None and gate_model is None:
        cfg = cfg.replace(gate_threshold=None)
        reason += "; " + verdict(GATE_NOT_PROMOTED).text()
    side = sidecar_path(_install_path(hist.runs, Path(index)))
    before = SidecarBefore(side.read_text(encoding="utf-8") if side.exists() else None)
    # the row first (pending), then the files, then the row is done: a kill anywhere is recovered
    eid = hist._add("promoted", sweep_id, cfg, _install_path(hist.runs, Path(index)), prev, reason,
                    sidecar_before=before, pending=True)
    try:
        installed = _install_index(hist.runs, Path(index))
        if _gate_to_install(cfg, gate_model):
            gate_model.save(sidecar_path(installed))
        _write_active(hist.runs, cfg, installed, f"sweep {sweep_id}")
    except BaseException:
        hist.recover()             # whatever was not written is undone now, not at the next open
        raise
    hist._done(eid, installed)
    return Promotion(eid, True, reason, str(installed))


def rollback(event_id: int | None = None, runs: str | Path | None = None) -> Rollback:
    """Undo a promotion (default: the latest one not yet undone): its previous config and index become
    active again; with no previous config, active.toml is removed (the built-in defaults apply)."""
    hist = History(runs)
    try:
        with promotion_lock(hist.runs):
            hist.recover()
            return _rollback_locked(hist, event_id)
    finally:
        hist.close()


def _rollback_locked(hist: History, event_id: int | None) -> Rollback:
    events = hist.events()
    undone = {e.undoes for e in events if e.kind == "rollback"}
    cands = [e for e in events if e.kind == "promoted" and e.id not in undone]
    if event_id is None:
        if not cands:
            raise SearchCoreError(f"nothing to roll back: {hist.runs / HISTORY} has no promotion left to undo; "
                                  "`autoresearch config history` lists them")
        ev = cands[-1]
    else:
        ev = hist.event(event_id)
        ids = [e.id for e in events if e.kind == "promoted"]
        if ev is None or ev.kind != "promoted":
            raise SearchCoreError(f"#{event_id} is not a promotion; promotions that can be rolled back: "
                                  f"{', '.join(f'#{i}' for i in ids) or 'none'}")
        if event_id in undone:
            raise SearchCoreError(f"promotion #{event_id} was already rolled back")
        # Rollbacks undo promotions newest first, like a stack: undoing #1 while #2 (made on top of it)
        # is active would either drop #2 or bring back a config that was rolled back.
        if ev.id != cands[-1].id:
            raise SearchCoreError(f"promotion #{cands[-1].id} is active and was made after #{event_id}; roll "
                                  f"back #{cands[-1].id} first (`autoresearch config rollback`), then "
                                  f"#{event_id}")
    prev_active = read_active(hist.runs)
    path = hist.runs / ACTIVE
    restored = None if ev.previous_config is None else ev.previous_config.search
    idx = Path(ev.previous_index) if ev.previous_index else None
    if restored is not None and idx is not None and not idx.exists():
        raise SearchCoreError(f"cannot roll back #{ev.id}: its previous index {idx} is gone; "
                              "rebuild it with `autoresearch index`")
    eid = hist._add("rollback", ev.sweep, restored, ev.previous_index, prev_active,
                    f"rolled back promotion #{ev.id}", undoes=ev.id, pending=True)
    if restored is None:
        path.unlink(missing_ok=True)
    else:
        _write_active(hist.runs, restored, idx, f"rollback of #{ev.id}")
    _restore_sidecar(ev)            # the gate model the restored config was promoted with (or none)
    hist._done(eid)
    return Rollback(eid, ev.id, restored)


def _restore_sidecar(ev: PromotionEvent) -> None:
    """Put back the gate-model file the promotion `ev` replaced beside its index (or remove the one it
    added). Rows from before `sidecar_before` existed carry no record: their file is left as it is."""
    if ev.sidecar_before is None or not ev.index_path:
        return
    side = sidecar_path(ev.index_path)
    text = ev.sidecar_before.text
    if text is None:
        side.unlink(missing_ok=True)
    else:
        atomic_write_text(side, text)


# -- what `search` and `eval` use when no --config is given ---------------------------------------------------
def resolve_search_config(db: Path | None, config_path: Path | None,
                          runs: str | Path | None = None) -> tuple[Path, SearchConfig]:
    """--config wins; else runs/active.toml (its index when --db is not given); else the defaults.
    A --db built by another embedder than the active config's is refused rather than silently mixed."""
    if config_path is not None:
        db = db if db is not None else default_index(runs)
        if db is None:
            raise SearchCoreError(f"--config names no index: {no_index_message(runs)}")
        return db, load_config(config_path)
    active = read_active(runs)
    if active is None:
        if db is None:
            db = default_index(runs)
        if db is None:
            raise SearchCoreError(f"{no_index_message(runs)}; there is no active config ({runs_dir(runs) / ACTIVE}) "
                                  "naming an index")
        return db, SearchConfig()
    if db is None:
        if active.index is not None:
            return active.index, active.config
        db = default_index(runs)         # checked against the active config's embedder below
        if db is None:
            raise SearchCoreError(f"{runs_dir(runs) / ACTIVE} names no index: {no_index_message(runs)}")
    from search_core.index.store import get_meta
    conn = connect(db, readonly=True)
    try:
        emb = get_meta(conn, "fingerprint")["embedder"]["name"]
    finally:
        conn.close()
    if emb != active.config.embedder:
        raise SearchCoreError(f"the active config ({runs_dir(runs) / ACTIVE}, {active.source}) uses embedder "
                              f"{active.config.embedder} but {db} was built by {emb}; drop --db to use "
                              f"{active.index}, or pass --config to search with another config")
    return db, active.config
