"""A calibration's proposal: written as a file, installed as `<db>.gate.json` by `calibrate apply` (the file
it replaces is kept in `<db>.gate-history.jsonl`), and put back by `calibrate undo`."""

from __future__ import annotations

import json
import time
from pathlib import Path

from search_core import SearchCoreError
from search_core.files import atomic_write_text
from search_core.gate.model import load_gate, sidecar_path


def write_proposal(cal: dict, db: str | Path, path: str | Path) -> dict:
    rec = cal["recommendation"]
    prop = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "db": str(db),
            "model": rec.get("model"), "cosine_threshold": (rec.get("cosine") or {}).get("threshold"),
            "basis": rec.get("basis"), "evidence": {k: cal[k] for k in ("window", "labelled", "retirement")}}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(prop, ensure_ascii=False, indent=1), encoding="utf-8")
    return prop


def history_path(db: str | Path) -> Path:
    p = Path(db)
    return p.with_name(p.name + ".gate-history.jsonl")


def apply_proposal(proposal_path: str | Path, db: str | Path) -> dict:
    """Install the proposal's model as <db>.gate.json; the previous file goes into the history."""
    try:
        prop = json.loads(Path(proposal_path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SearchCoreError(f"no proposal at {proposal_path}; run `autoresearch calibrate` first") from None
    except json.JSONDecodeError as e:
        raise SearchCoreError(f"proposal {proposal_path} is not JSON ({e}); run `autoresearch calibrate` again") from None
    if not prop.get("model"):
        t = prop.get("cosine_threshold")
        raise SearchCoreError("this proposal holds no gate model (too few labels)" +
                              (f"; to use its cosine threshold put `threshold = {t}` in your config" if t else ""))
    side = sidecar_path(db)
    tmp = side.with_name(side.name + ".new")
    tmp.write_text(json.dumps(prop["model"], ensure_ascii=False, indent=1), encoding="utf-8")
    load_gate(tmp)                                   # a proposal that would not load is never installed
    previous = side.read_text(encoding="utf-8") if side.exists() else None
    entry = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "action": "apply",
             "proposal": str(proposal_path), "basis": prop.get("basis"), "previous": previous}
    with history_path(db).open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry, ensure_ascii=False) + "\n")
    tmp.replace(side)
    return {"installed": str(side), "replaced": previous is not None, "history": str(history_path(db))}


def undo_apply(db: str | Path) -> dict:
    """Put back the gate file that the last apply replaced (or remove it if there was none)."""
    h = history_path(db)
    lines = h.read_text(encoding="utf-8").splitlines() if h.exists() else []
    applies: list = []                  # applies not yet undone, oldest first
    for e in (json.loads(x) for x in lines if x.strip()):
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
    return {"restored": last["previous"] is not None, "gate_file": str(side)}
