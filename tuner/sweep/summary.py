"""What a sweep hands back when it ends: its summary and the holdout check, as records; a re-test of rejected
rounds ends with a RetestResult (or RetestStopped), the summary its sweep keeps.

Both become JSON only at the edges: the ledger stores the summary with the sweep and the holdout check in
its own chained row (so `to_json` writes exactly the text the chain covers), `sweep --json` prints the
summary, and `from_json` reads either back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tuner.evaluation.compare import Comparison
from tuner.ledger.schema import RoundDecision
from tuner.stored_config import StoredConfig

HIT5 = "hit@5"


@dataclass(frozen=True)
class Figures:
    """One config's figures on one question set: hit@5, the sweep's objective, and (on the holdout) MRR."""
    hit5: float | None
    objective: str
    value: float | None               # the objective's value
    mrr: float | None = None
    with_mrr: bool = False            # the holdout's figures carry MRR; the tuning set's do not

    def to_json(self) -> dict:
        return {HIT5: self.hit5, **({"mrr": self.mrr} if self.with_mrr else {}), self.objective: self.value}

    @classmethod
    def from_json(cls, d: dict) -> "Figures":
        # the objective is the key that is neither hit@5 nor MRR; a sweep that maximised one of those wrote
        # it under that key, with the same value (promotion reads the objective the same way)
        objective = next((k for k in d if k not in (HIT5, "mrr")), "mrr" if "mrr" in d else HIT5)
        return cls(d.get(HIT5), objective, d.get(objective), d.get("mrr"), "mrr" in d)


@dataclass(frozen=True)
class HoldoutCheck:
    """The starting and the final config on the holdout set, with the paired test: did the gain carry over?"""
    gold: str
    start: Figures
    final: Figures
    tuning_gain: float
    holdout_gain: float
    holdout_regressed: bool
    within_noise: bool                # every metric's difference is within noise
    compare: Comparison

    def to_json(self) -> dict:
        return {"gold": self.gold, "start": self.start.to_json(), "final": self.final.to_json(),
                "tuning_gain": self.tuning_gain, "holdout_gain": self.holdout_gain,
                "holdout_regressed": self.holdout_regressed, "within_noise": self.within_noise,
                "compare": self.compare.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> "HoldoutCheck":
        return cls(d["gold"], Figures.from_json(d["start"]), Figures.from_json(d["final"]), d["tuning_gain"],
                   d["holdout_gain"], d["holdout_regressed"], d["within_noise"], Comparison.from_json(d["compare"]))


@dataclass(frozen=True)
class KeptStep:
    """One kept round on the way from the start to the final config."""
    round: int
    variable: str
    old: Any
    new: Any
    reason: str

    def to_json(self) -> dict:
        return {"round": self.round, "variable": self.variable, "old": self.old, "new": self.new,
                "reason": self.reason}


@dataclass(frozen=True)
class SweepSummary:
    sweep: str
    rounds: int                       # rounds after the starting point
    decisions: dict[RoundDecision, int]   # what became of the rounds -> how many; words in to_json
    start_config: StoredConfig
    final_config: StoredConfig
    start: Figures                    # on the tuning set
    final: Figures
    path: tuple[KeptStep, ...]
    holdout: HoldoutCheck | None = None
    status: str | None = None         # how the run ended; the ledger keeps it beside the summary, not in it
    not_here: dict[str, str] = field(default_factory=dict)   # a space's choice that cannot run here -> why

    @property
    def objective(self) -> str:
        return self.start.objective

    def to_json(self) -> dict:
        return {"sweep": self.sweep, "rounds": self.rounds, "decisions": self.decision_words(),
                "start_config": self.start_config.to_json(), "final_config": self.final_config.to_json(),
                "start": self.start.to_json(), "final": self.final.to_json(), "path": [s.to_json() for s in self.path],
                **({"holdout": self.holdout.to_json()} if self.holdout is not None else {}),
                **({"status": self.status} if self.status is not None else {}),
                **({"not_here": dict(self.not_here)} if self.not_here else {})}

    @classmethod
    def from_json(cls, d: dict) -> "SweepSummary":
        return cls(d["sweep"], d["rounds"], {RoundDecision(k): n for k, n in d["decisions"].items()},
                   StoredConfig.from_json(d["start_config"]), StoredConfig.from_json(d["final_config"]),
                   Figures.from_json(d["start"]), Figures.from_json(d["final"]),
                   tuple(KeptStep(**s) for s in d["path"]),
                   HoldoutCheck.from_json(d["holdout"]) if d.get("holdout") else None, d.get("status"),
                   dict(d.get("not_here") or {}))

    def decision_words(self) -> dict[str, int]:
        """The counts keyed by the word the ledger stores ("rejected:no_gain"), as a person or a JSON reader
        sees them: never the enum's repr."""
        return {d.value: n for d, n in self.decisions.items()}

    def ended(self, status: str) -> "SweepSummary":
        return replace(self, status=status)


@dataclass(frozen=True)
class RetestRound:
    of: str                          # SWEEP#ROUND it re-tests
    variable: str
    new: Any
    decision: RoundDecision
    reason: str

    def to_json(self) -> dict:
        return {"of": self.of, "variable": self.variable, "new": self.new, "decision": self.decision,
                "reason": self.reason}


@dataclass(frozen=True)
class RetestResult:
    sweep: str                       # the new sweep the re-tests were appended as
    retest_of: str
    tested: int
    kept: int
    rounds: tuple[RetestRound, ...]

    def to_json(self) -> dict:
        """Also the re-test sweep's summary in the ledger."""
        return {"sweep": self.sweep, "retest_of": self.retest_of, "tested": self.tested, "kept": self.kept,
                "rounds": [r.to_json() for r in self.rounds]}

    @classmethod
    def from_json(cls, d: dict) -> "RetestResult":
        return cls(d["sweep"], d["retest_of"], d["tested"], d["kept"],
                   tuple(RetestRound(**{**r, "decision": RoundDecision(r["decision"])}) for r in d["rounds"]))


@dataclass(frozen=True)
class RetestStopped:
    """A re-test stopped before its last round: the summary its sweep keeps."""
    tested: int
    of: int

    def to_json(self) -> dict:
        return {"tested": self.tested, "of": self.of}

    @classmethod
    def from_json(cls, d: dict) -> "RetestStopped":
        return cls(d["tested"], d["of"])
