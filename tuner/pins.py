"""What a sweep's decisions stand on, pinned by hash: the gold set, holdout set, space file, score rubric
and index fingerprint. A resumed sweep that would stand on anything else is refused, naming what moved."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from search_core import SearchCoreError


def hash_json(obj) -> str:
    """sha256 (16 hex) of a JSON-able value, keys sorted: the one helper for config-like hashes."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()[:16]


def hash_path(path: str | Path | None) -> str | None:
    """sha256 (16 hex) of a file, or of every file under a folder (BEIR gold sets are folders)."""
    if path is None:
        return None
    p = Path(path)
    h = hashlib.sha256()
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    for f in files:
        h.update(str(f.relative_to(p) if p.is_dir() else f.name).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def harness_pins(params, score_cfg, index_fingerprint_key: str) -> dict:
    return {"gold": hash_path(params.gold), "holdout": hash_path(params.holdout), "space": hash_path(params.space),
            "score_rubric": hash_json(dataclasses.asdict(score_cfg)), "index": index_fingerprint_key}


PIN_NAMES = {"gold": "the gold (tuning) set", "holdout": "the holdout set", "space": "the space file",
             "score_rubric": "the score rubric ([score] table)", "index": "the index (fingerprint or content)"}


def check_pins(sweep_id: str, recorded: dict | None, now: dict) -> None:
    if not recorded:
        return                     # a sweep from before pins: nothing to compare
    moved = [k for k in now if recorded.get(k) != now[k]]
    if moved:
        what = "; ".join(f"{PIN_NAMES[k]} ({recorded.get(k)} -> {now[k]})" for k in moved)
        raise SearchCoreError(f"cannot resume sweep {sweep_id}: what its decisions stand on changed: {what}. "
                              "Restore the files, or start a new sweep (without --resume)")
