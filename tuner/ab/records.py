"""The records an A/B passes around: its parameters, a candidate, and a finished candidate's result."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from search_core import SearchCoreError
from search_core.config import ChunkConfig, SearchConfig

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


@dataclass(frozen=True)
class IndexBuild:
    """How a candidate's index came to be: built now, brought up to date, reused without loading the model
    (`model_loaded` False), or the index of the candidate before it (`shared_with_previous_candidate`).
    `to_json` is its shape in the A/B's JSON: the optional facts only when known."""
    db: str
    reused: bool
    seconds: float
    embedded_now: int
    vectors: int | None
    chunks: int | None
    notes: int | None
    size_mb: float
    model_loaded: bool | None = None          # False: reused without loading the model
    first_build_seconds: float | None = None  # an index built before: its first build's
    first_build_embedded: int | None = None
    shared_with_previous_candidate: bool = False

    def to_json(self) -> dict:
        return {"db": self.db, "reused": self.reused, "seconds": self.seconds, "embedded_now": self.embedded_now,
                **({"model_loaded": self.model_loaded} if self.model_loaded is not None else {}),
                "vectors": self.vectors, "chunks": self.chunks, "notes": self.notes, "size_mb": self.size_mb,
                **({"first_build_seconds": self.first_build_seconds,
                    "first_build_embedded": self.first_build_embedded} if self.first_build_seconds is not None else {}),
                **({"shared_with_previous_candidate": True} if self.shared_with_previous_candidate else {})}


@dataclass
class CandidateResult:
    candidate: Candidate
    label: str
    status: str                      # ok | unavailable | failed | cut | duplicate
    message: str = ""
    build: IndexBuild | None = None  # None: no index was reached (unavailable, failed before, cut)
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
        d["build"] = self.build.to_json() if self.build is not None else {}
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


@dataclass(frozen=True)
class ABSetup:
    """What an A/B compared, as its report shows it: the candidates' names, the vault and work folder, the
    question sets and their sizes, the config every candidate shares and the chunking of their indexes."""
    embedders: tuple[str, ...]
    rerankers: tuple[str, ...]
    vault: str
    work: str
    tune: str
    tune_n: int
    eval: str
    eval_n: int
    eval_probes: int
    tune_probes: int
    split: str
    same_questions: bool
    config: SearchConfig
    chunking: ChunkConfig

    @classmethod
    def of(cls, p: ABParams, chunking: ChunkConfig) -> ABSetup:
        return cls(tuple(p.embedders), tuple(p.rerankers), p.vault, p.work, p.tune.name, len(p.tune.questions),
                   p.eval.name, len(p.eval.questions), len(p.eval.probes()), len(p.tune.probes()), p.split_note,
                   p.eval is p.tune, p.config, chunking)

    def to_json(self) -> dict:
        return {"embedders": list(self.embedders), "rerankers": list(self.rerankers), "vault": self.vault,
                "work": self.work, "tune": self.tune, "tune_n": self.tune_n, "eval": self.eval, "eval_n": self.eval_n,
                "eval_probes": self.eval_probes, "tune_probes": self.tune_probes, "split": self.split,
                "same_questions": self.same_questions, "config": self.config.as_dict(),
                "chunking": self.chunking.as_dict()}
