"""What a sweep's decisions stand on, pinned by hash: the gold set, holdout set, space file, score rubric
and index fingerprint. A resumed sweep that would stand on anything else is refused, naming what moved."""

from __future__ import annotations

import dataclasses

from search_core import SearchCoreError
from search_core.hashing import hash_json
from search_core.hashing import hash_tree as hash_path   # a file, or every file under a folder


def harness_pins(params, score_cfg, index_fingerprint_key: str) -> dict[str, str | None]:
    """Pin name (a key of PIN_NAMES) -> the hash it stands on (None: no holdout): a mapping, recorded as it is
    in the sweep's ledger row."""
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
