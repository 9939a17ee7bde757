"""A calibration's proposal: written as a file, installed as `<db>.gate.json` by `calibrate apply` (the file
it replaces is kept in `<db>.gate-history.jsonl`), and put back by `calibrate undo`."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from search_core import SearchCoreError
from search_core.files import atomic_replace, atomic_write_text
from search_core.gate.model import load_gate, sidecar_path

from tuner.gate.verdicts import DECLINED, NO_RECOMMENDATION, RECOMMENDATION_DECLINED, VERDICTS

if TYPE_CHECKING:
    from tuner.gate.records import Calibration, Labelled, Retirement, Window


@dataclass(frozen=True)
class ProposalEvidence:
    """What a proposal stands on: the calibration's window, labelled rows and retirement rule, each in its
    calibration JSON's form."""
    window: Window
    labelled: Labelled
    retirement: Retirement

    def to_json(self) -> dict:
        return {"window": self.window.to_json(), "labelled": self.labelled.to_json(),
                "retirement": self.retirement.to_json()}


@dataclass(frozen=True)
class Proposal:
    """A calibration's proposal as its file holds it (`to_json`): the gate model to install, or why there is
    none (`declined`), with the evidence it stands on."""
    created: str
    db: str
    model: dict | None                 # the gate model's JSON (GateModel.as_json), as `apply` installs it
    cosine_threshold: float | None
    basis: str | None                  # why this gate; None when declined
    evidence: ProposalEvidence
    declined: str | None = None

    def to_json(self) -> dict:
        head = {"created": self.created, "db": self.db, "model": self.model,
                "cosine_threshold": self.cosine_threshold, "basis": self.basis}
        return {**head, **({"declined": self.declined} if self.declined else {}), "evidence": self.evidence.to_json()}


@dataclass(frozen=True)
class Applied:
    installed: str          # the gate file now in force
    replaced: bool          # a gate file was there before (it is in the history)
    history: str            # the history file


@dataclass(frozen=True)
class Undone:
    restored: bool          # the previous gate file is back (False: there was none, the file was removed)
    gate_file: str


def write_proposal(cal: Calibration, db: str | Path, path: str | Path) -> Proposal:
    """Write the calibration's proposal to `path`, replacing what was there in one step. A calibration that
    proposes nothing writes a declined record instead, with its reason: an older proposal left in place would
    be what `calibrate apply` installs next, though this run's labels did not support it."""
    rec = cal.recommendation
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    evidence = ProposalEvidence(cal.window, cal.labelled, cal.retirement)
    if rec.basis:
        prop = Proposal(created, str(db), rec.model, rec.cosine.threshold if rec.cosine is not None else None,
                        rec.basis.text(), evidence)
    else:
        prop = Proposal(created, str(db), None, None, None, evidence,
                        declined=(rec.declined or RECOMMENDATION_DECLINED(NO_RECOMMENDATION)).text())
    try:
        text = json.dumps(prop.to_json(), ensure_ascii=False, indent=1, allow_nan=False)
    except ValueError:
        raise SearchCoreError(f"the calibration produced a value that is not a number (NaN or inf); no proposal was "
                              f"written to {path} (the previous one is gone only if it was replaced)") from None
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    return prop


def _no_constants(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def history_path(db: str | Path) -> Path:
    p = Path(db)
    return p.with_name(p.name + ".gate-history.jsonl")


def apply_proposal(proposal_path: str | Path, db: str | Path) -> Applied:
    """Install the proposal's model as <db>.gate.json; the previous file goes into the history."""
    try:
        prop = json.loads(Path(proposal_path).read_text(encoding="utf-8"), parse_constant=_no_constants)
    except FileNotFoundError:
        raise SearchCoreError(f"no proposal at {proposal_path}; run `autoresearch calibrate` first") from None
    except ValueError as e:            # JSONDecodeError, or NaN / Infinity, which JSON does not allow
        raise SearchCoreError(f"proposal {proposal_path} is not valid JSON ({e}); run `autoresearch calibrate` "
                              "again") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SearchCoreError(f"proposal {proposal_path} cannot be read ({e}); run `autoresearch calibrate` again") from None
    if not isinstance(prop, dict):
        raise SearchCoreError(f"proposal {proposal_path} is not a calibration proposal (a JSON object with a "
                              "\"model\"); run `autoresearch calibrate` again")
    if prop.get("declined"):
        v = VERDICTS(DECLINED, created=prop.get("created", "?"), declined=prop["declined"], db=db)
        raise SearchCoreError(f"{v.message()}; {v.fix()}")
    if not prop.get("model"):
        t = prop.get("cosine_threshold")
        usable = isinstance(t, (int, float)) and not isinstance(t, bool) and -1.0 <= t <= 1.0
        raise SearchCoreError("this proposal holds no gate model (too few labels)" +
                              (f"; to use its cosine threshold put `threshold = {t}` in your config" if usable else
                               f"; its cosine threshold {t!r} is not a cosine, run `autoresearch calibrate` again"
                               if t is not None else ""))
    side = sidecar_path(db)
    tmp = side.with_name(side.name + ".new")
    try:
        text = json.dumps(prop["model"], ensure_ascii=False, indent=1, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise SearchCoreError(f"proposal {proposal_path} holds a gate that cannot be written as JSON ({e}); run "
                              "`autoresearch calibrate` again") from None
    atomic_write_text(tmp, text)                     # whole on disk before it can replace the gate in force
    try:
        model = load_gate(tmp)                       # a proposal that would not load is never installed
        why = model.mismatch(index_fingerprint(db), model.reranker)
        if why:     # installed, it would be passed over at every search: "installed" would be a lie
            raise SearchCoreError(f"proposal {proposal_path} cannot gate the index {db}: {why}; run "
                                  f"`autoresearch calibrate --db {db}` for a proposal made on it")
    except SearchCoreError:
        tmp.unlink(missing_ok=True)                  # nor left beside the index
        raise
    previous = side.read_text(encoding="utf-8") if side.exists() else None
    entry = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "action": "apply",
             "proposal": str(proposal_path), "basis": prop.get("basis"), "previous": previous}
    with history_path(db).open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry, ensure_ascii=False) + "\n")
    atomic_replace(tmp, side)
    return Applied(str(side), previous is not None, str(history_path(db)))


def index_fingerprint(db: str | Path) -> Mapping[str, Mapping[str, object]]:
    """The fingerprint an index records (its embedder and chunking), or a SearchCoreError naming the file. It is
    search_core's record (`search_core.index.indexer.index_fingerprint`), read here only to hand it back to
    `GateModel.mismatch`: the tuner reads no key of it."""
    from search_core.index.store import connect, get_meta, sqlite_file_problem
    p = Path(db)
    if not p.is_file() or sqlite_file_problem(p) is not None:
        raise SearchCoreError(f"no index at {db}; give --db the index the proposal was made for")
    try:
        conn = connect(p, readonly=True)
        try:
            fp = get_meta(conn, "fingerprint")
        finally:
            conn.close()
    except Exception as e:          # sqlean's DatabaseError, or a meta value that is not JSON
        raise SearchCoreError(f"{db} is not a readable autoresearch index ({type(e).__name__}: {e})") from None
    if not isinstance(fp, dict):
        raise SearchCoreError(f"{db} records no fingerprint; is it an autoresearch index?")
    return fp


def _history_entries(h: Path) -> list[dict]:
    """The gate history's entries, oldest first. A damaged line (cut short by a kill mid-write, or edited by
    hand) is refused by its number: undoing past it could put back the wrong gate."""
    try:
        lines = h.read_text(encoding="utf-8").splitlines() if h.exists() else []
    except (OSError, UnicodeDecodeError) as e:
        raise SearchCoreError(f"the gate history {h} cannot be read ({e})") from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            e = None
        ok = isinstance(e, dict) and (e.get("action") == "undo" or (
            e.get("action") == "apply" and "at" in e and (e.get("previous") is None or isinstance(e["previous"], str))))
        if not ok:
            raise SearchCoreError(f"the gate history {h} line {n} is damaged ({line[:60]!r}); nothing was undone. "
                                  "Fix or remove that line, or put the gate file back by hand")
        out.append(e)
    return out


def undo_apply(db: str | Path) -> Undone:
    """Put back the gate file that the last apply replaced (or remove it if there was none)."""
    h = history_path(db)
    applies: list = []                  # applies not yet undone, oldest first
    for e in _history_entries(h):
        if e["action"] == "apply":
            applies.append(e)
        elif e["action"] == "undo" and applies:
            applies.pop()
    if not applies:
        raise SearchCoreError(f"nothing to undo: {h} records no applied proposal")
    last = applies[-1]
    side = sidecar_path(db)
    if last["previous"] is None:
        side.unlink(missing_ok=True)
    else:                                            # never a half-written gate file
        atomic_write_text(side, last["previous"])
    with h.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "action": "undo",
                            "undoes": last["at"]}) + "\n")
    return Undone(last["previous"] is not None, str(side))
