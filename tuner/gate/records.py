"""What a calibration of the gate hands on: the record `calibrate` returns, which the report renders and the
proposal is written from (its own module, so the report and the proposal read it without importing the
calibration itself)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tuner.reasons import Reason

if TYPE_CHECKING:
    from search_core.recall.suggest import Suggestion
    from tuner.gate.metrics import GateScorecard

MIN_LABELLED = 8          # fewer labelled rows than this: recommend a cosine threshold, never fit a model


@dataclass(frozen=True)
class Window:
    """The recall-log calls a calibration read: how many, over how many sessions, from when to when, and
    their latency. `to_json` is its shape in the calibration's JSON and the proposal's evidence."""
    calls: int
    sessions: int
    first: str | None                  # the earliest call's time (None: no calls)
    last: str | None
    p50_ms: float | None
    p95_ms: float | None

    def to_json(self) -> dict:
        return {"calls": self.calls, "sessions": self.sessions, "from": self.first, "to": self.last,
                "latency_ms": {"p50": self.p50_ms, "p95": self.p95_ms}}


@dataclass(frozen=True)
class Labelled:
    """The labelled rows a calibration scored: answerable ones, probes, and the sets they came from ("log",
    a gold set's name). `to_json` is its shape in the calibration's JSON and the proposal's evidence."""
    answerable: int
    probes: int
    sources: tuple[str, ...]

    def to_json(self) -> dict:
        return {"answerable": self.answerable, "probes": self.probes, "sources": list(self.sources)}


@dataclass(frozen=True)
class CurrentGate:
    """The gate in force when a calibration ran: a model (its P threshold and what it was made from) or the
    cosine gate. `reason` and `default_threshold` are known where the index's gate was chosen
    (`calibrate_index`): why this gate, and the shipped default's threshold beside it."""
    kind: str                          # "model" or "cosine"
    cos_threshold: float
    p_threshold: float | None
    provenance: str | None
    reason: str | None = None
    default_threshold: float | None = None

    def text(self) -> str:
        """The gate in force in one line: its kind and threshold, where a model's came from."""
        out = (f"gate model, P(answerable) >= {self.p_threshold:.3f}" if self.kind == "model"
               else f"cosine gate, top cosine >= {self.cos_threshold:.3f}")
        if self.kind == "model" and self.provenance:
            out += f" ({self.reason or 'gate file'}: {self.provenance})"
        if self.kind == "model" and self.default_threshold is not None:
            out += f"; the shipped default's threshold: {self.default_threshold:.3f}"
        return out

    def to_json(self) -> dict:
        out = {"kind": self.kind, "cos_threshold": self.cos_threshold, "p_threshold": self.p_threshold,
               "provenance": self.provenance}
        if self.reason is not None:
            out.update(reason=self.reason, default_threshold=self.default_threshold)
        return out


@dataclass(frozen=True)
class SkippedLabels:
    """Labels on calls that never searched (timed out, failed, stopped): a label needs the call's features."""
    no_search: int
    ids: tuple[int, ...]               # the first 20 of them

    def to_json(self) -> dict:
        return {"no_search": self.no_search, "ids": list(self.ids)}


@dataclass(frozen=True)
class KeptApart:
    """Calls logged against another index than the one calibrated: left out, their features are another vault's."""
    calls: int
    labelled: int
    fingerprints: tuple[str, ...]      # the other indexes' fingerprint keys

    def to_json(self) -> dict:
        return {"calls": self.calls, "labelled": self.labelled, "fingerprints": list(self.fingerprints)}


@dataclass(frozen=True)
class StoppedCall:
    id: int
    query: str | None                  # None: the log keeps only its hash
    top_score: float | None
    stopped_by: str | None

    def to_json(self) -> dict:
        return {"id": self.id, "query": self.query, "top_score": self.top_score, "stopped_by": self.stopped_by}


@dataclass(frozen=True)
class Flips:
    """How many of the window's decisions flip if the gate's threshold moves by `delta` either way."""
    scale: str                         # "probability" (a model decides) or "cosine"
    threshold: float
    delta: float
    let_through: int                   # more calls injected at threshold - delta
    stopped: int                       # more calls stopped at threshold + delta

    def to_json(self) -> dict:
        return {"scale": self.scale, "threshold": self.threshold, f"-{self.delta}": self.let_through,
                f"+{self.delta}": self.stopped}


@dataclass(frozen=True)
class Traffic:
    """What the gate in force did to the window's calls. `to_json` is its shape in the calibration's JSON."""
    injected: int
    injection_rate: float | None       # None: no calls
    stopped: dict[str, int]            # what stopped a call (the gate, a pre-search gate) -> calls
    stopped_examples: tuple[StoppedCall, ...]   # the last 10
    flips: Flips | None                # None: no calls

    def to_json(self) -> dict:
        return {"injected": self.injected, "injection_rate": self.injection_rate, "stopped": dict(self.stopped),
                "stopped_examples": [e.to_json() for e in self.stopped_examples],
                "flips": self.flips.to_json() if self.flips is not None else {}}


@dataclass(frozen=True)
class LabelSuggestions:
    """The unlabelled calls whose labels would move the gate's threshold most (the daemon's weekly job asks a
    person to label them). `to_json` is its shape in the calibration's JSON."""
    picks: tuple[Suggestion, ...]
    pool: int                          # calls that could be picked
    labelled: int                      # calls in the window already labelled
    scale: str                         # "probability" or "cosine"
    threshold: float                   # the gate's threshold in force, rounded to 4 places
    gate: str                          # where the gate in force came from
    left_out: dict[str, int]           # why other calls could not be picked -> calls

    def to_json(self) -> dict:
        return {"picks": [p.as_json() for p in self.picks], "pool": self.pool, "labelled": self.labelled,
                "scale": self.scale, "threshold": self.threshold, "gate": self.gate, "left_out": dict(self.left_out)}


@dataclass(frozen=True)
class Retirement:
    """The rule to switch recall off, applied to one window: too slow at p95, or injecting too rarely to pay
    for the latency it adds. `to_json` is its shape in the calibration's JSON and the weekly job's detail."""
    rule: str                          # the rule in words, with its two limits
    p95_ms: float | None               # the window's latency p95 (None: no calls)
    injection_rate: float | None
    p95_over: bool
    injection_under: bool
    verdict: Reason                    # a value of tuner.gate.verdicts.RETIREMENT_VERDICT
    consider_off: bool                 # the verdict says to consider switching recall off

    def to_json(self) -> dict:
        return {"rule": self.rule, "p95_ms": self.p95_ms, "injection_rate": self.injection_rate,
                "p95_over": self.p95_over, "injection_under": self.injection_under, "verdict": self.verdict.text()}


@dataclass(frozen=True)
class Quantiles:
    """One group's scores: how many, and p5 ... p95 to 4 places (None: no scores, written as {"n": 0})."""
    n: int
    p5: float | None = None
    p25: float | None = None
    p50: float | None = None
    p75: float | None = None
    p95: float | None = None

    def to_json(self) -> dict:
        if not self.n:
            return {"n": 0}
        return {"n": self.n, "p5": self.p5, "p25": self.p25, "p50": self.p50, "p75": self.p75, "p95": self.p95}


@dataclass(frozen=True)
class ScoreGroups:
    """One score's quantiles in each group of rows: the labelled answerable ones, the labelled probes and the
    window's unlabelled calls (the JSON's group names)."""
    answerable: Quantiles
    probes: Quantiles
    unlabelled_log: Quantiles

    def groups(self) -> tuple[tuple[str, Quantiles], ...]:
        return (("answerable", self.answerable), ("probes", self.probes), ("unlabelled log", self.unlabelled_log))

    def to_json(self) -> dict:
        return {name: q.to_json() for name, q in self.groups()}


@dataclass(frozen=True)
class Distributions:
    """The top cosine's quantiles per group, and the gate model's P(answerable) when a model is in force.
    `to_json` is its shape in the calibration's JSON: scale -> group -> quantiles."""
    cosine: ScoreGroups
    probability: ScoreGroups | None = None      # None: the cosine gate decides

    def scales(self) -> tuple[tuple[str, ScoreGroups], ...]:
        return (("cosine", self.cosine),) + ((("probability", self.probability),) if self.probability else ())

    def to_json(self) -> dict:
        return {scale: g.to_json() for scale, g in self.scales()}


@dataclass(frozen=True)
class SourceScore:
    """The gate on one labelled set's rows alone (`by_source`): both gates' scorecards, or, when the set holds
    one kind of row, a note saying it is scored only in the pooled rows."""
    rows: int
    probes: int
    cosine: GateScorecard | None = None        # None: one kind of row (the note says so)
    model: GateScorecard | None = None         # None: no gate model in force
    in_sample: bool | None = None              # the model was fitted on this set (None: no model)
    note: str | None = None

    def to_json(self) -> dict:
        out: dict = {"rows": self.rows, "probes": self.probes}
        if self.note is not None:
            return {**out, "note": self.note}
        out["cosine"] = self.cosine.to_json()
        if self.model is not None:
            out.update(model=self.model.to_json(), in_sample=self.in_sample)
        return out


@dataclass(frozen=True)
class GateOnLabels:
    """The gate in force scored on the labelled rows (a query-performance-prediction report): the cosine
    gate's scorecard and the model's when one is in force, their risk-coverage curves, the sets the model was
    fitted on among the rows (in-sample), and each set alone when there are several. `to_json` is its shape
    in the calibration's JSON."""
    rows: int
    answerable: int
    probes: int
    sources: tuple[str, ...]
    cosine: GateScorecard
    curves: dict[str, list[list[float]]]       # gate name -> [[coverage, risk], ...] (risk_coverage_curve)
    model: GateScorecard | None = None
    in_sample: tuple[str, ...] | None = None   # None: no model in force
    by_source: dict[str, SourceScore] | None = None    # set name -> its rows alone (None: one set)

    def to_json(self) -> dict:
        out = {"rows": self.rows, "answerable": self.answerable, "probes": self.probes,
               "sources": list(self.sources), "cosine": self.cosine.to_json(), "curves": dict(self.curves)}
        if self.model is not None:
            out["model"] = self.model.to_json()
        if self.in_sample is not None:
            out["in_sample"] = list(self.in_sample)
        if self.by_source is not None:
            out["by_source"] = {src: s.to_json() for src, s in self.by_source.items()}
        return out


@dataclass(frozen=True)
class CosineThreshold:
    """The cosine threshold with the best balanced accuracy on the labelled rows (in-sample, said so)."""
    threshold: float
    balanced_accuracy: float
    auroc: float | None
    note: str = "in-sample on the labelled rows"

    def to_json(self) -> dict:
        return {"threshold": self.threshold, "balanced_accuracy": self.balanced_accuracy, "auroc": self.auroc,
                "note": self.note}


@dataclass(frozen=True)
class ModelSummary:
    """The gate model a calibration ends with: how (`refit` of the weights, the `threshold` moved, or the one
    in force kept: `keep`), its P threshold, the cross-validated balanced accuracy behind it, its features."""
    method: str
    p_threshold: float
    cv_balanced_accuracy: float | None
    features: tuple[str, ...]

    def to_json(self) -> dict:
        return {"method": self.method, "p_threshold": self.p_threshold,
                "cv_balanced_accuracy": self.cv_balanced_accuracy, "features": list(self.features)}


@dataclass(frozen=True)
class MissingLabels:
    """Why no threshold could be recommended: the kind of label missing (`relevant`, `irrelevant`, `both`),
    how many the calibration needs, and the labels it had."""
    label: str
    have: int
    need: int
    relevant: int
    irrelevant: int

    def to_json(self) -> dict:
        return {"label": self.label, "have": self.have, "need": self.need,
                "labelled": {"relevant": self.relevant, "irrelevant": self.irrelevant}}


@dataclass(frozen=True)
class Flipped:
    """The window's searched calls whose decision a threshold move flips, out of `decisions`."""
    let_through: int
    stopped: int
    decisions: int

    @property
    def total(self) -> int:
        return self.let_through + self.stopped

    def to_json(self) -> dict:
        return {"let_through": self.let_through, "stopped": self.stopped, "decisions": self.decisions}


@dataclass(frozen=True)
class SignTest:
    """The labelled-call sign test behind a move (tuner.gate.threshold.decide_threshold): the flipped calls
    the move decides right (wins) and wrong (losses), the share expected by chance, the p-value and why."""
    wins: int
    losses: int
    null_share: float
    p_value: float
    why: str
    level: float | None = None      # what the p-value was held to (the scan's simulated per-band level)

    def to_json(self) -> dict:
        return {"wins": self.wins, "losses": self.losses, "null_share": self.null_share, "p_value": self.p_value,
                "level": self.level, "why": self.why}


@dataclass(frozen=True)
class CrossValidation:
    """The moved threshold against a refit of the weights on the same folds: each one's held-out balanced accuracy."""
    folds: int
    threshold_only: float
    refit: float

    def to_json(self) -> dict:
        return {"folds": self.folds, "threshold_only": self.threshold_only, "refit": self.refit}


@dataclass(frozen=True)
class LabelsToDecide:
    """How many more labels would let the rule decide a move it declined, and the calls the move flips: right
    and wrong by their labels, and unlabelled ones between the two cuts. `text` says it to a person."""
    more: int | None
    win_share: float | None
    right: int
    wrong: int
    unlabelled: int
    text: str
    of_kind: int | None = None      # how many of the `more` the move must decide right (answerable going down, probes up)

    def to_json(self) -> dict:
        return {"more": self.more, "win_share": self.win_share, "of_kind": self.of_kind,
                "flipped": {"right": self.right, "wrong": self.wrong, "unlabelled": self.unlabelled},
                "text": self.text}


@dataclass(frozen=True)
class ThresholdMove:
    """With a gate model in force: the threshold the labels put it at, from the one in force, its bootstrap
    interval, the labels' balanced accuracy at both, the decisions it flips, the sign test that decides
    whether it moves, and either the cross-validation against a refit or what a refit needs. `kept`: the
    labels did not show the move decides better, so the threshold in force stays (and `flips` is none)."""
    from_: float
    to: float
    interval: tuple[float, float]
    level: float
    answerable: int                     # the labels it stands on
    probes: int
    accuracy_from: float                # balanced accuracy on the labels at `from_` and at `to`
    accuracy_to: float
    flips: Flipped
    flips_at_interval: tuple[Flipped, Flipped]
    method: str
    rule: str
    sign_test: SignTest
    cross_validation: CrossValidation | None = None
    refit_needs: str | None = None      # set when there are too few labels to try a refit
    labels_to_decide: LabelsToDecide | None = None     # set when the rule did not move
    kept: bool = False

    def to_json(self) -> dict:
        out = {"from": self.from_, "to": self.to, "interval": list(self.interval), "level": self.level,
               "labels": {"answerable": self.answerable, "probes": self.probes},
               "balanced_accuracy_on_labels": {"from": self.accuracy_from, "to": self.accuracy_to},
               "flips": self.flips.to_json(), "flips_at_interval": [f.to_json() for f in self.flips_at_interval],
               "method": self.method, "rule": self.rule, "sign_test": self.sign_test.to_json()}
        if self.cross_validation is not None:
            out["cross_validation"] = self.cross_validation.to_json()
        if self.refit_needs is not None:
            out["refit_needs"] = self.refit_needs
        if self.labels_to_decide is not None:
            out["labels_to_decide"] = self.labels_to_decide.to_json()
        if self.kept:
            out["kept"] = True
        return out


@dataclass(frozen=True)
class Recommendation:
    """What a calibration recommends: a cosine threshold from the labels, a gate model (its JSON, as
    `apply` installs it) with its summary and, with a model in force, the threshold move; or why none
    (`declined`, and `missing`: which labels). `basis` says why the gate recommended; None: nothing to
    install. `to_json` is its shape in the calibration's JSON, each part present only when set."""
    basis: Reason | None = None        # a value of tuner.gate.verdicts.RECOMMENDATION_BASIS
    cosine: CosineThreshold | None = None
    missing: MissingLabels | None = None
    threshold_move: ThresholdMove | None = None
    model: dict | None = None           # GateModel.as_json, as the proposal carries it to `apply`
    model_summary: ModelSummary | None = None
    declined: Reason | None = None     # a value of tuner.gate.verdicts.RECOMMENDATION_DECLINED

    def to_json(self) -> dict:
        out: dict = {"basis": self.basis.text() if self.basis is not None else None}
        for name in ("cosine", "missing", "threshold_move"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name).to_json()
        if self.model is not None:
            out["model"] = self.model
        if self.model_summary is not None:
            out["model_summary"] = self.model_summary.to_json()
        if self.declined is not None:
            out["declined"] = self.declined.text()
        return out


@dataclass(frozen=True)
class Calibration:
    """What a calibration measured and what it recommends: the report's and the proposal's one source. Each
    section is the JSON the report's `data` shows (the keys docs/examples and a user's scripts read), kept
    as that JSON because nothing but the report and the proposal reads inside it."""
    window: Window                     # the calls read
    labelled: Labelled
    current: CurrentGate               # the gate in force
    warnings: tuple[Reason, ...]       # values of tuner.gate.verdicts.CALIBRATION_WARNINGS
    distributions: Distributions       # scale -> group -> quantiles
    traffic: Traffic                   # what the gate in force did to the window's calls
    gate_on_labels: GateOnLabels | None     # the gate in force scored on the labelled rows (None: one kind of row)
    recommendation: Recommendation
    retirement: Retirement             # the rule to switch recall off, on this window
    skipped_labels: SkippedLabels | None = None
    kept_apart: KeptApart | None = None
    suggestions: LabelSuggestions | None = None   # the calls to label next (the daemon's weekly job)

    def __post_init__(self):
        # a warning written as text would have no kind and no fix of its table: refused where it is made
        loose = [w for w in self.warnings if not isinstance(w, Reason)]
        if loose:
            raise TypeError(f"a calibration's warnings are values of tuner.gate.verdicts.CALIBRATION_WARNINGS, "
                            f"not {type(loose[0]).__name__}: {loose[0]!r}")

    def warning_lines(self) -> tuple[str, ...]:
        """Each warning as the report and the JSON show it: its message, then its fix."""
        return tuple(w.text() for w in self.warnings)

    def to_json(self) -> dict:
        out = {"window": self.window.to_json(), "labelled": self.labelled.to_json(), "current": self.current.to_json(),
               "warnings": list(self.warning_lines())}
        for name in ("skipped_labels", "kept_apart"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name).to_json()
        out.update(distributions=self.distributions.to_json(), traffic=self.traffic.to_json(),
                   gate_on_labels=self.gate_on_labels.to_json() if self.gate_on_labels is not None else None,
                   recommendation=self.recommendation.to_json(), retirement=self.retirement.to_json())
        if self.suggestions is not None:
            out["suggestions"] = self.suggestions.to_json()
        return out
