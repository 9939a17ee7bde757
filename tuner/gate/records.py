"""What a calibration of the gate hands on: the record `calibrate` returns, which the report renders and the
proposal is written from (its own module, so the report and the proposal read it without importing the
calibration itself)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from search_core.recall.suggest import Suggestion

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
    verdict: str                       # keep recall on, consider switching recall off, unknown (...)

    @property
    def consider_off(self) -> bool:
        return self.verdict.startswith("consider")

    def to_json(self) -> dict:
        return {"rule": self.rule, "p95_ms": self.p95_ms, "injection_rate": self.injection_rate,
                "p95_over": self.p95_over, "injection_under": self.injection_under, "verdict": self.verdict}


@dataclass(frozen=True)
class Calibration:
    """What a calibration measured and what it recommends: the report's and the proposal's one source. Each
    section is the JSON the report's `data` shows (the keys docs/examples and a user's scripts read), kept
    as that JSON because nothing but the report and the proposal reads inside it."""
    window: Window                     # the calls read
    labelled: Labelled
    current: CurrentGate               # the gate in force
    warnings: tuple[str, ...]
    distributions: dict                # scale -> group -> quantiles
    traffic: Traffic                   # what the gate in force did to the window's calls
    gate_on_labels: dict | None        # the gate in force scored on the labelled rows (None: one kind of row)
    recommendation: dict               # basis, cosine, model, model_summary, threshold_move, declined, missing
    retirement: Retirement             # the rule to switch recall off, on this window
    skipped_labels: SkippedLabels | None = None
    kept_apart: KeptApart | None = None
    suggestions: LabelSuggestions | None = None   # the calls to label next (the daemon's weekly job)

    def to_json(self) -> dict:
        out = {"window": self.window.to_json(), "labelled": self.labelled.to_json(), "current": self.current.to_json(),
               "warnings": list(self.warnings)}
        for name in ("skipped_labels", "kept_apart"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name).to_json()
        out.update(distributions=self.distributions, traffic=self.traffic.to_json(), gate_on_labels=self.gate_on_labels,
                   recommendation=self.recommendation, retirement=self.retirement.to_json())
        if self.suggestions is not None:
            out["suggestions"] = self.suggestions.to_json()
        return out
