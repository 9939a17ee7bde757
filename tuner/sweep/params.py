"""A sweep's inputs (SweepParams), and its params as the ledger records them (RecordedParams).

The settings a user may set take their defaults from the one table the `sweep` verb's options and the daemon's
[sweep] keys are built from (tuner/sweep/settings.py). A sweep's row in the ledger keeps them with its pins and,
with a time budget, its evidence step; a record from an older version may lack keys, or hold one this version
renamed: RecordedParams reads it as the SweepParams it ran with and writes back the text it read (the sweep's
genesis hash covers it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.evaluation.score import load_score_config
from tuner.sweep.evidence_budget import EvidenceStep
from tuner.sweep.keep_rule import Rule
from tuner.sweep.settings import default_of

PINS, EVIDENCE_STEP = "pins", "evidence_step"


@dataclass(frozen=True)
class SweepParams:
    """One sweep's inputs. The settings a user may set take their defaults from the one table the `sweep` verb's
    options and the daemon's [sweep] keys are built from (tuner/sweep/settings.py)."""
    db: str
    gold: str
    space: str
    holdout: str | None = None
    rounds: int = default_of("rounds")
    time_budget_s: float | None = None
    seed: int = default_of("seed")
    objective: str = default_of("objective")
    epsilon: float = default_of("epsilon")
    level_guard: bool = default_of("level_guard")
    latency_budget_ms: float | None = default_of("latency_budget_ms")
    gate_epsilon: float = default_of("gate_epsilon")     # gate rounds: the gate accuracy must rise by more than this
    gate_measure: str = default_of("gate_measure")       # keep_rule.GATE_MEASURES: what gate rounds are judged on
    hit5_guard: str = default_of("hit5_guard")           # keep_rule.HIT5_GUARDS: a test with a margin, the count, or each question
    noise_alpha: float | None = default_of("noise_alpha")   # a gain that moves the ranking must be beyond noise
    # (keep_rule.Rule); None or 1: any gain is kept
    hit5_margin: float = default_of("hit5_margin")       # noninferior: the true hit@5 drop (points) the guard rules out
    guard_alpha: float = default_of("guard_alpha")       # noninferior: its one-sided level
    vault: str | None = None
    index_dir: str = "runs/indexes"
    split: float | None = default_of("split")            # no --holdout: tune on this fraction of --gold, hold out the rest
    score_config: str | None = None  # a TOML file whose [score] table sets the 100-point rubric
    # measured latency never decides (the cost model does); more passes only steady the measured p95
    # recorded beside the predicted one
    timing_samples: int = default_of("timing_samples")
    cost_store: str | None = None   # folder of stored cost calibrations; None: <runs>/cost-model beside index_dir
    recalibrate: bool = False       # take a new cost calibration instead of the stored one
    # with a time budget and questions from the vault in the tuning set: grow the set before round 1 when it
    # cannot detect the gains the rounds will see (tuner/sweep/evidence_budget.py)
    grow_evidence: bool = True
    # once a full cycle of single-variable rounds kept nothing, move coupled pairs together (tuner/sweep/variables.py)
    pairs: bool = default_of("pairs")
    # round 1 moves every search variable that differs from the shipped default to it (tuner/sweep/variables.py)
    default_round: bool = default_of("default_round")
    # keep_rule.PRIOR_HIT5: how that move meets hit@5 (a sweep recorded without the key ran under "guard")
    prior_hit5: str = "shown_worse"

    def cost_folder(self) -> Path:
        return Path(self.cost_store) if self.cost_store else Path(self.index_dir).parent / "cost-model"

    def rule(self) -> Rule:
        return Rule(objective=self.objective, epsilon=self.epsilon, level_guard=self.level_guard,
                    latency_budget_ms=self.latency_budget_ms, gate_epsilon=self.gate_epsilon, hit5_guard=self.hit5_guard,
                    noise_alpha=None if self.noise_alpha is None or self.noise_alpha >= 1 else self.noise_alpha,
                    quality_weights=load_score_config(self.score_config).quality_weights,
                    hit5_margin=self.hit5_margin, guard_alpha=self.guard_alpha, gate_measure=self.gate_measure,
                    prior_hit5=self.prior_hit5)

    @classmethod
    def from_record(cls, params: dict, **changes) -> "SweepParams":
        """The params a ledger recorded for a sweep (which also hold its `pins` and may come from an
        older version with other keys), as SweepParams, with `changes` applied: what a resume starts from.
        A record from before a keep-rule key existed was decided without that check (RULE_BEFORE_RECORDED);
        one from before `hit5_guard` recorded its guard as `question_guard` (true: per question, else the count)."""
        known = {f.name for f in dataclasses.fields(cls)}
        legacy = {} if "hit5_guard" in params else {"hit5_guard": "question" if params.get("question_guard") else "count"}
        return cls(**{**RULE_BEFORE_RECORDED, **legacy, **{k: v for k, v in params.items() if k in known}, **changes})


# keys a ledger's params may lack, with the value its rounds ran under (its decisions, its proposals)
RULE_BEFORE_RECORDED = {"noise_alpha": None, "pairs": False, "default_round": False, "gate_measure": "accuracy",
                        "prior_hit5": "guard"}


@dataclass(frozen=True)
class RecordedParams:
    """A sweep's params as its ledger row keeps them: the SweepParams it ran with, its pins (what each input
    hashed to: tuner.sweep.pins), the evidence step a time budget bought, and the keys as recorded (in order,
    with those no field of this version holds, such as an older `question_guard`) so `to_json` writes back the
    same text."""
    sweep: SweepParams
    pins: dict[str, str | None] | None = None
    evidence_step: EvidenceStep | None = None
    keys: tuple[str, ...] | None = None          # None: every field, then the pins and the step given
    older: tuple[tuple[str, Any], ...] = ()      # keys of an older version, as recorded

    @classmethod
    def from_json(cls, d: dict) -> RecordedParams:
        known = {f.name for f in dataclasses.fields(SweepParams)} | {PINS, EVIDENCE_STEP}
        step = d.get(EVIDENCE_STEP)
        return cls(SweepParams.from_record(d), d.get(PINS), EvidenceStep.from_json(step) if step else None,
                   tuple(d), tuple((k, v) for k, v in d.items() if k not in known))

    def to_json(self) -> dict:
        values = {**dataclasses.asdict(self.sweep), **dict(self.older)}
        if self.pins is not None:
            values[PINS] = self.pins
        if self.evidence_step is not None:
            values[EVIDENCE_STEP] = self.evidence_step.to_json()
        return values if self.keys is None else {k: values.get(k) for k in self.keys}
