"""One sweep as the ledger keeps it: the only code that knows the `sweeps` table's columns.

A `SweepRecord` is read back by `Ledger.sweep` and `Ledger.sweeps`; everything else (resume, the daemon,
the reports, the audit, `ledger` and `best`) reads its fields. `params` stays the mapping the sweep recorded
(its SweepParams, its pins; an older sweep may lack keys): `SweepParams.from_record(record.params)` reads it
as a sweep's settings, and the few settings a report shows have their own properties here, with the default
a sweep that did not record them ran with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from search_core.config import SearchConfig

from tuner.ledger.schema import SWEEP_COLUMNS
from tuner.sweep.summary import SweepSummary

JSON_COLUMNS = ("params", "start_config", "summary")
RETEST_ID = "-retest-"        # in the id of the sweep a re-test of rejected candidates appends


@dataclass(frozen=True)
class SweepRecord:
    id: str
    created: str
    params: dict[str, Any]        # as recorded: the sweep's SweepParams and its pins (tuner.sweep.pins)
    start_config: dict[str, Any]  # SearchConfig.as_dict() of the starting point
    status: str                   # running, finished, stopped, interrupted, "retest finished", ...
    finished: str | None = None
    summary: dict[str, Any] | None = None   # as stored: a SweepSummary's JSON, or a re-test's RetestResult JSON

    @classmethod
    def from_columns(cls, values: dict) -> "SweepRecord":
        """A row of the `sweeps` table (column -> stored value) read back."""
        v = {k: values.get(k) for k in SWEEP_COLUMNS}
        for k in JSON_COLUMNS:
            v[k] = json.loads(v[k]) if v[k] else None
        return cls(**v)

    def to_json(self) -> dict:
        """`ledger --json`'s form of a sweep: the columns, the JSON ones parsed."""
        return {k: getattr(self, k) for k in SWEEP_COLUMNS}

    @property
    def start(self) -> SearchConfig:
        return SearchConfig.from_stored(self.start_config)

    @property
    def is_retest(self) -> bool:
        return RETEST_ID in self.id

    @property
    def sweep_summary(self) -> SweepSummary | None:
        """The summary a tuning sweep stored when it ended; None while it runs, or for a re-test."""
        if not self.summary or self.is_retest:
            return None
        return SweepSummary.from_json(self.summary)

    # -- the settings reports show (SweepParams.from_record reads them all, for a resume or a replay) --------
    @property
    def objective(self) -> str:
        return self.params.get("objective", "score100")

    @property
    def pins(self) -> dict[str, str] | None:
        return self.params.get("pins")

    @property
    def db(self) -> str | None:
        return self.params.get("db")

    @property
    def holds_out(self) -> bool:
        """Was a holdout set named (a file, or a split of the gold)?"""
        return bool(self.params.get("holdout") or self.params.get("split"))

    @property
    def score_config(self) -> str | None:
        return self.params.get("score_config")
