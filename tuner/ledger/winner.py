"""A sweep's winner, read from the ledger: the config of its last kept round, as `best` prints it."""

from __future__ import annotations

from pathlib import Path

from search_core import SearchCoreError
from search_core.config import SearchConfig

from tuner.ledger.ledger import Ledger, require_intact
from tuner.ledger.sweep_record import SweepRecord


def open_intact(ledger_path: str | Path) -> Ledger:
    """An existing ledger whose hash chain verifies (opening a missing path would create an empty one)."""
    ledger_path = Path(ledger_path)
    if not ledger_path.exists():
        raise SearchCoreError(f"no ledger at {ledger_path}; run `autoresearch sweep` first")
    require_intact(ledger_path)
    return Ledger(ledger_path, create=False)


def sweep_winner(ledger_path: str | Path, sweep_id: str | None = None) -> tuple[SearchConfig, SweepRecord, int]:
    """(the winning config, the sweep's record, the round that kept it) of `sweep_id` (default: the latest)."""
    lg = open_intact(ledger_path)
    try:
        info = lg.sweep(sweep_id)
        if info is None:
            raise SearchCoreError(f"no sweep {sweep_id!r} in {ledger_path}")
        kept = [r for r in lg.rounds(info.id) if r.kept]
    finally:
        lg.close()
    if not kept:
        raise SearchCoreError(f"sweep {info.id} has no evaluated rounds yet")
    return kept[-1].search_config, info, kept[-1].round
