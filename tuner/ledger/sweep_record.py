"""One sweep as the ledger keeps it: the only code that knows the `sweeps` table's columns.

A `SweepRecord` is read back by `Ledger.sweep` and `Ledger.sweeps`; everything else (resume, the daemon,
the reports, the audit, `ledger` and `best`) reads its fields. `params` is what the sweep recorded
(tuner.sweep.params.RecordedParams: its SweepParams, its pins; an older sweep's lacking keys take the value it
ran with), and the few settings a report shows have their own properties here. Every JSON column reads into
its record and writes back the text it was read from (`to_json` is `ledger --json`'s form).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from search_core.config import SearchConfig

from tuner.ledger.schema import SWEEP_COLUMNS
from tuner.stored_config import StoredConfig
from tuner.sweep.params import RecordedParams
from tuner.sweep.summary import RetestResult, RetestStopped, SweepSummary

JSON_COLUMNS = ("params", "start_config", "summary")
RETEST_ID = "-retest-"        # in the id of the sweep a re-test of rejected candidates appends


@dataclass(frozen=True)
class SweepRecord:
    id: str
    created: str
    params: RecordedParams        # the sweep's SweepParams, its pins (tuner.sweep.pins), as recorded
    start_config: StoredConfig    # the starting point
    status: str                   # running, finished, stopped, interrupted, "retest finished", ...
    finished: str | None = None
    summary: SweepSummary | RetestResult | RetestStopped | None = None   # None: while it runs, or interrupted

    @classmethod
    def from_columns(cls, values: dict) -> "SweepRecord":
        """A row of the `sweeps` table (column -> stored value) read back."""
        v = {k: values.get(k) for k in SWEEP_COLUMNS}
        for k in JSON_COLUMNS:
            v[k] = json.loads(v[k]) if v[k] else None
        return cls(**{**v, "params": RecordedParams.from_json(v["params"]), "summary": _summary(v["id"], v["summary"]),
                      "start_config": StoredConfig.from_json(v["start_config"])})

    def to_json(self) -> dict:
        """`ledger --json`'s form of a sweep: the columns, the JSON ones parsed."""
        return {**{k: getattr(self, k) for k in SWEEP_COLUMNS}, "params": self.params.to_json(),
                "summary": self.summary.to_json() if self.summary is not None else None,
                "start_config": self.start_config.to_json()}

    @property
    def start(self) -> SearchConfig:
        return self.start_config.search

    @property
    def is_retest(self) -> bool:
        return RETEST_ID in self.id

    @property
    def sweep_summary(self) -> SweepSummary | None:
        """The summary a tuning sweep stored when it ended; None while it runs, or for a re-test."""
        return self.summary if isinstance(self.summary, SweepSummary) else None

    # -- the settings reports show ----------------------------------------------------------------------------
    @property
    def objective(self) -> str:
        return self.params.sweep.objective

    @property
    def pins(self) -> dict[str, str | None] | None:
        return self.params.pins

    @property
    def db(self) -> str | None:
        return self.params.sweep.db

    @property
    def holds_out(self) -> bool:
        """Was a holdout set named (a file, or a split of the gold)?"""
        return bool(self.params.sweep.holdout or self.params.sweep.split)

    @property
    def score_config(self) -> str | None:
        return self.params.sweep.score_config


def _summary(sweep_id: str, d: dict | None) -> SweepSummary | RetestResult | RetestStopped | None:
    """The summary column read back: a re-test's result (or where it stopped), else a tuning sweep's summary."""
    if d is None:
        return None
    if RETEST_ID in sweep_id:
        return RetestStopped.from_json(d) if "of" in d else RetestResult.from_json(d)
    return SweepSummary.from_json(d)
