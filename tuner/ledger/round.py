"""One round of a sweep as the ledger keeps it: the only code that knows the `rounds` table's columns.

A `Round` is written by `Ledger.append_round` and read back by `Ledger.rounds`; everything else (the sweep
loop, the replay, the audit, the reports) reads its fields. `columns()` gives the values exactly as SQLite
stores them (the hash chain covers those), `from_columns` reads them back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from search_core.config import SearchConfig

from tuner.evaluation.evaluate import EvalResult
from tuner.ledger.chain import normalise_round
from tuner.ledger.schema import DECISIONS, ROUND_CONTENT, RoundDecision
from tuner.stored_config import StoredConfig

START = "(start)"        # round 0's variable: the starting point, measured before any change
JSON_COLUMNS = ("old", "new", "config", "metrics")


@dataclass(frozen=True)
class Round:
    sweep: str
    round: int
    variable: str                 # START for round 0
    old: Any                      # the baseline's value of the variable (JSON: a number, a string or null)
    new: Any                      # the candidate's value (None: round 0)
    config: StoredConfig          # the candidate's config, as evaluated
    config_hash: str
    baseline_hash: str
    index_fingerprint: str | None
    result: EvalResult | None     # the evaluation as the row keeps it (EvalResult.to_ledger); None: not evaluated
    objective: float | None
    decision: RoundDecision
    reason: str
    eval_s: float | None = None
    reindex_s: float | None = None
    created: str | None = None    # set when the ledger appends it

    @property
    def search_config(self) -> SearchConfig:
        return self.config.search

    @property
    def kept(self) -> bool:
        return self.decision == RoundDecision.KEPT

    @property
    def is_start(self) -> bool:
        return self.variable == START

    def columns(self) -> dict:
        """Column -> value as the `rounds` table stores it (JSON text for the structured ones)."""
        if self.decision not in DECISIONS:
            raise ValueError(f"decision {self.decision!r} is not one of {', '.join(DECISIONS)}")
        values = {"sweep": self.sweep, "round": self.round, "variable": self.variable,
                  "old": json.dumps(self.old, ensure_ascii=False), "new": json.dumps(self.new, ensure_ascii=False),
                  "config": json.dumps(self.config.to_json(), ensure_ascii=False), "config_hash": self.config_hash,
                  "baseline_hash": self.baseline_hash, "index_fingerprint": self.index_fingerprint,
                  "metrics": json.dumps(self.result.to_ledger() if self.result is not None else {}, ensure_ascii=False),
                  "objective": self.objective, "decision": RoundDecision(self.decision).value, "reason": self.reason,
                  "eval_s": self.eval_s, "reindex_s": self.reindex_s, "created": self.created}
        return normalise_round(values)

    @classmethod
    def from_columns(cls, values: dict) -> "Round":
        """A row of the `rounds` table (column -> stored value) read back."""
        v = {k: values.get(k) for k in ROUND_CONTENT}
        for k in JSON_COLUMNS:
            v[k] = json.loads(v[k]) if v[k] is not None else None
        metrics = v.pop("metrics")
        return cls(**{**v, "decision": RoundDecision(v["decision"]), "config": StoredConfig.from_json(v["config"]),
                      "result": EvalResult.from_ledger(metrics) if metrics else None})

    def to_json(self) -> dict:
        """`ledger --json`'s form of a round."""
        return {"sweep": self.sweep, "round": self.round, "variable": self.variable, "old": self.old, "new": self.new,
                "decision": self.decision, "reason": self.reason,
                "metrics": self.result.to_ledger() if self.result is not None else {},
                "config_hash": self.config_hash, "baseline_hash": self.baseline_hash,
                "index_fingerprint": self.index_fingerprint, "eval_s": self.eval_s, "reindex_s": self.reindex_s}
