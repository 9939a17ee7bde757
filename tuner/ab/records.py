"""The records an A/B passes around: its parameters, a candidate, and a finished candidate's result."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from search_core import SearchCoreError
from search_core.config import SearchConfig

from tuner.data.gold import GoldSet
from tuner.evaluation.evaluate import EvalResult, Percentiles


class ABError(SearchCoreError):
    pass


@dataclass(frozen=True)
class Candidate:
    embedder: str
    reranker: str = "none"

    def label(self, reranker_ab: bool) -> str:
        if not reranker_ab:
            return self.embedder
        return f"{self.embedder} + {self.reranker}" if self.reranker != "none" else f"{self.embedder}, no reranker"


@dataclass(frozen=True)
class CandidateLatency:
    """A candidate's measured latency: p50/p95 per stage (embed, rerank, total: those its searches ran) over
    `samples` timed questions, after `warmup` untimed ones. `to_json` is its shape in the A/B's JSON and in
    the saved evaluation an A/B reuses: {"samples", "warmup", stage: {"p50", "p95"}}."""
    samples: int
    warmup: int
    stages: dict[str, Percentiles]       # stage -> p50/p95 (no n: `samples` is it)

    def to_json(self) -> dict:
        return {"samples": self.samples, "warmup": self.warmup, **{s: p.to_json() for s, p in self.stages.items()}}

    @classmethod
    def from_json(cls, d: dict) -> "CandidateLatency | None":
        """None for {} (a candidate that was never timed)."""
        if not d:
            return None
        return cls(d["samples"], d["warmup"],
                   {s: Percentiles.from_json(p) for s, p in d.items() if s not in ("samples", "warmup")})


@dataclass
class CandidateResult:
    candidate: Candidate
    label: str
    status: str                      # ok | unavailable | failed | cut | duplicate
    message: str = ""
    build: dict = field(default_factory=dict)
    latency: CandidateLatency | None = None     # None: not timed (unavailable, failed, a duplicate)
    memory_mb: dict[str, float | None] = field(default_factory=dict)   # rss_before, rss_after, ... -> MB
    threshold: float | None = None
    threshold_fitted: bool = False
    result: EvalResult | None = None   # the evaluation questions' (None: not evaluated, or a duplicate)
    seconds: float = 0.0
    reused_from: str = ""            # set when this evaluation was measured by an earlier A/B

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["candidate"] = dataclasses.asdict(self.candidate)
        d["latency"] = self.latency.to_json() if self.latency is not None else {}
        d["result"] = self.result.to_json() if self.result is not None else None
        return d


@dataclass(frozen=True)
class ABParams:
    embedders: tuple[str, ...]
    rerankers: tuple[str, ...] = ("none",)
    tune: GoldSet | None = None
    eval: GoldSet | None = None
    vault: str = ""
    work: str = "runs/ab"
    base_db: str | None = None
    config: SearchConfig = SearchConfig()
    split_note: str = ""
    fresh: bool = False              # re-measure even when this exact evaluation was saved before
