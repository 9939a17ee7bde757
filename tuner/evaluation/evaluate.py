"""evaluate(config) -> metrics: hit@k, MRR, P@5, R@5, nDCG@10, coverage, latency, per level, per question,
the gate on probes, the 100-point score, and the possible gold gaps among the misses.

Channel lists come through a RetrievalCache, so a weight, k or threshold change re-fuses in memory.
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from dataclasses import dataclass, field, replace
from pathlib import Path

from search_core.config import SearchConfig
from search_core.gate.model import WHICH_GATE, GateDecision
from search_core.gate.request import GateRequest
from search_core.search.query_cache import uncached_queries
from search_core.search.ranking import K_LIST  # the ranked list kept per question (10)
from search_core.search.work import SearchWork, search_work

from tuner.data.gold import LEVELS, GoldSet
from tuner.evaluation.discrimination import saturation
from tuner.evaluation.fake_miss import GoldGap
from tuner.evaluation.metrics import METRICS, first_rank, mean, question_metrics
from tuner.evaluation.score import Score100, ScoreConfig, score100
from tuner.stored_config import NO_CONFIG, StoredConfig
from search_core.percentiles import percentile



class RetrievalCache:
    """Channel lists per (index fingerprint, query, depth, keyword index). Memory only; the tuner adds a
    disk layer."""

    def __init__(self):
        self.store: dict = {}
        self.hits = self.misses = 0

    def get(self, searcher, query: str, depth: int, keyword_index: str = SearchConfig().keyword_index,
            cfg: SearchConfig | None = None, exclude=frozenset()):
        """cfg: retrieve as it asks (Searcher.retrieve_for, the fast path included); the fast path's lists
        depend on its margin and on the notes the search holds out, so those join the key."""
        pair_terms = cfg.pair_terms if cfg is not None else SearchConfig().pair_terms
        key = ((searcher.fingerprint_key, query, depth) + ((keyword_index,) if keyword_index != "fts5" else ())
               + (("pairs", pair_terms),))
        fast = cfg is not None and cfg.fast_path_margin is not None
        if fast:
            key += ("fast", cfg.fast_path_margin, cfg.exclude_nav, cfg.nav_globs, frozenset(exclude))
        r = self.store.get(key)
        if r is None:
            self.misses += 1
            r = self.store[key] = (searcher.retrieve_for(query, cfg, exclude=exclude) if fast
                                   else searcher.retrieve(query, depth, keyword_index=keyword_index, pair_terms=pair_terms))
        else:
            self.hits += 1
        return r


def run_queries(searcher, gold: GoldSet, cfg: SearchConfig, cache: RetrievalCache | None = None, *,
                gate: GateRequest | None = None) -> list[QuestionResult]:
    """Every question searched and ranked as `search` would (gate: the gate each search decides with; None:
    the searcher's own)."""
    rows = []
    with uncached_queries(searcher):
        for q in gold.questions:
            t0 = time.perf_counter()
            r = (cache.get(searcher, q.query, cfg.depth, cfg.keyword_index, cfg, q.exclude) if cache
                 else searcher.retrieve_for(q.query, cfg, exclude=q.exclude))
            res = searcher.rank(r, cfg, snippets=False, limit_fused=K_LIST, exclude=q.exclude, gate=gate)
            timings = dict(res.timings_ms)
            if cache is None:
                timings["wall"] = (time.perf_counter() - t0) * 1000
            ranked = res.ranked[:K_LIST]    # the system's own final order: its first top_k are the results
            work = search_work(searcher, r, cfg, res.fused)     # counted after the clock stopped
            decision = res.gate.decision
            rows.append(QuestionResult.searched(
                q, ranked, inject=res.gate.inject, top_score=res.gate.top_score, timings_ms=timings,
                gate_features=res.gate.features, gate_probability=res.gate.probability,
                gate=QuestionGate.decided(decision) if decision is not None else None, work=work))
    return rows


# A p95 over 32 questions is their 2nd-slowest timing: one stall decides it. Timed evaluations repeat
# passes over the questions until this many timings stand behind each percentile (a p95 of 100 stands
# on its 5 slowest); the demo tuning set (36 questions) then takes 3 passes, 108 timings.
TIMING_SAMPLES = 100


def timing_passes(n_questions: int, min_samples: int) -> int:
    """Passes over n questions for at least min_samples timings (1 when min_samples is 0 or met)."""
    if n_questions <= 0 or min_samples <= n_questions:
        return 1
    return -(-min_samples // n_questions)


def repeat_timings(searcher, gold: GoldSet, cfg: SearchConfig, passes: int, *, wall: bool = False,
                   gate: GateRequest | None = None) -> list[dict[str, float]]:
    """The stage timings (stage -> ms) of `passes` more passes over the questions, each one searched for real: the
    channel-list cache is bypassed (a cached list would repeat one measurement, not add a sample) and
    so is the query-vector cache."""
    out = []
    with uncached_queries(searcher):
        for _ in range(passes):
            for q in gold.questions:
                t0 = time.perf_counter()
                r = searcher.retrieve_for(q.query, cfg, exclude=q.exclude)
                t = dict(searcher.rank(r, cfg, snippets=False, limit_fused=K_LIST, exclude=q.exclude,
                                       gate=gate).timings_ms)
                if wall:                  # as run_queries does: only when the first pass timed it too
                    t["wall"] = (time.perf_counter() - t0) * 1000
                out.append(t)
    return out


def summarize(rows: list[QuestionResult]) -> dict[str, float]:
    """Mean of each per-question metric over the answerable questions (probes excluded), and `n`, how many
    there are: metric name -> value, the mapping an evaluation keeps as `overall` (and per level)."""
    answerable = [r for r in rows if r.level != "probe"]
    if not answerable:
        return {"n": 0}
    per = [r.metrics for r in answerable]
    out = {"n": len(answerable)}
    for m in per[0]:
        out[m] = round(mean(p[m] for p in per), 4)
    return out


@dataclass(frozen=True)
class ProbeResult:
    """What the gate did with one probe (a question whose answer is not in the vault)."""
    id: str
    query: str
    inject: bool
    top_score: float

    def to_json(self) -> dict:
        return {"id": self.id, "query": self.query, "inject": self.inject, "top_score": self.top_score}


@dataclass(frozen=True)
class GateMetrics:
    """How an evaluation's gate decided: probes held back, answerable questions let through. `to_json` is
    its shape in an evaluation; a ledger row keeps it without the probes' rows (`to_ledger`)."""
    probes: int
    probes_injected: int
    probe_false_inject_rate: float | None       # None without probes
    answerable_inject_rate: float | None        # None without answerable questions
    gate_accuracy: float | None                 # None without questions
    probe_results: tuple[ProbeResult, ...] = ()

    def to_ledger(self) -> dict:
        return {"probes": self.probes, "probes_injected": self.probes_injected,
                "probe_false_inject_rate": self.probe_false_inject_rate,
                "answerable_inject_rate": self.answerable_inject_rate, "gate_accuracy": self.gate_accuracy}

    def to_json(self) -> dict:
        return {**self.to_ledger(), "probe_results": [p.to_json() for p in self.probe_results]}

    @classmethod
    def from_json(cls, d: dict | None) -> "GateMetrics":
        """Either form read back (a ledger row's has no probes' rows; a row of an older ledger may have no gate)."""
        d = d or {}
        return cls(d.get("probes", 0), d.get("probes_injected", 0), d.get("probe_false_inject_rate"),
                   d.get("answerable_inject_rate"), d.get("gate_accuracy"),
                   tuple(ProbeResult(p["id"], p["query"], p["inject"], p["top_score"])
                         for p in d.get("probe_results", ())))


def gate_metrics(rows: list[QuestionResult]) -> GateMetrics:
    probes = [r for r in rows if r.level == "probe"]
    answerable = [r for r in rows if r.level != "probe"]
    false_inject = sum(r.inject for r in probes)
    inject_ok = sum(r.inject for r in answerable)
    n = len(probes) + len(answerable)
    return GateMetrics(len(probes), false_inject,
                       round(false_inject / len(probes), 4) if probes else None,
                       round(inject_ok / len(answerable), 4) if answerable else None,
                       round((inject_ok + len(probes) - false_inject) / n, 4) if n else None,
                       tuple(ProbeResult(r.id, r.query, r.inject, round(r.top_score, 4)) for r in probes))


@dataclass(frozen=True)
class Percentiles:
    """p50 and p95 of one stage's timings in milliseconds, and n: how many timings they stand on (the p95 of
    32 is the 2nd worst). None is not kept: an A/B candidate's latency keeps no n, and a ledger row's total
    only what was measured. `to_json` is its shape in every file: {"p50", "p95", "n"}."""
    p50: float | None = None
    p95: float | None = None
    n: int | None = None

    @classmethod
    def of(cls, values, counted: bool = True) -> "Percentiles":
        """Of these timings, to 2 places (counted: keep n)."""
        v = list(values)
        return cls(round(percentile(v, 50), 2), round(percentile(v, 95), 2), len(v) if counted else None)

    def to_json(self) -> dict:
        return {k: v for k, v in (("p50", self.p50), ("p95", self.p95), ("n", self.n)) if v is not None}

    @classmethod
    def from_json(cls, d: dict) -> "Percentiles":
        return cls(d.get("p50"), d.get("p95"), d.get("n"))


def _stages_to_json(stages: dict[str, Percentiles]) -> dict:
    """Stage -> Percentiles as an evaluation file keeps it (`latency_by_stage_ms`)."""
    return {s: p.to_json() for s, p in stages.items()}


def _stages_from_json(d: dict) -> dict[str, Percentiles]:
    return {s: Percentiles.from_json(p) for s, p in d.items()}


def latency(rows: list[QuestionResult], extra: list[dict[str, float]] = ()) -> dict[str, Percentiles]:
    """p50/p95 per stage, with n. extra: the timings of repeated passes (repeat_timings), counted with the
    rows' own. Stage -> Percentiles, the mapping an evaluation keeps as `latency_ms`."""
    timings = [r.timings_ms for r in rows] + list(extra)
    stages = sorted({k for t in timings for k in t})
    return {s: Percentiles.of(t[s] for t in timings if s in t) for s in stages}


# How a question's record is written, form by form, each key in the order the files and the ledger's hash
# chain hold: an evaluation (`eval --out`, an A/B candidate, `eval --json`) keeps what a report shows; a
# ledger row keeps what the keep rule, its replay and a re-fitted threshold read. A key ending in "?" is
# left out when its value is None; METRIC_KEYS stands for every metric the question has.
EVALUATION, LEDGER = "evaluation", "ledger"
METRIC_KEYS = "*metrics"
FORMS = {
    EVALUATION: ("id", "level", "query", "gold", "first_rank", "top5", "inject", "top_score", "latency_ms",
                 "gate_features", "gate_probability", "gate?", "work?", "predicted_ms?", "source?", METRIC_KEYS),
    # the keep rule's paired test reads each question's hit@5, MRR and nDCG@10 back from the ledger
    LEDGER: ("id", "level", "first_rank", "hit@5", "mrr?", "ndcg@10?", "inject", "top_score", "gate_probability?",
             "gate_which?", "work?", "predicted_ms?", "source?", "latency_ms"),
}
KEPT_RANKED = 5      # the notes an evaluation keeps of a question's ranked list (a report shows the top 5)


@dataclass(frozen=True)
class QuestionGate:
    """Which gate decided a question (its kind, the gate file or "cosine", the threshold it applied) and, in
    an evaluation, how: the search_core GateDecision's verdict, probability, band and reason. A ledger row
    keeps which gate alone (WHICH_GATE), so what it read back from one is None."""
    kind: str
    source: str
    threshold: float
    inject: bool | None = None
    probability: float | None = None
    band: str | None = None
    reason: str | None = None

    @classmethod
    def decided(cls, d: GateDecision) -> "QuestionGate":
        return cls(d.kind, d.source, d.threshold, d.inject, d.probability, d.band, d.reason)

    def rounded(self) -> "QuestionGate":
        """As an evaluation keeps it: the probability and the threshold to 4 places (GateDecision.to_json)."""
        return replace(self, threshold=round(self.threshold, 4),
                       probability=None if self.probability is None else round(self.probability, 4))

    def to_json(self, form: str = EVALUATION) -> dict:
        which = {k: getattr(self, k) for k in WHICH_GATE}       # kind, source, threshold
        if form == LEDGER or self.band is None:
            return which
        return {"inject": self.inject, "probability": self.probability, "band": self.band, **which,
                "reason": self.reason}

    @classmethod
    def from_json(cls, d: dict) -> "QuestionGate":
        return cls(d["kind"], d["source"], d["threshold"], d.get("inject"), d.get("probability"), d.get("band"),
                   d.get("reason"))


@dataclass(frozen=True)
class QuestionResult:
    """One question of an evaluation: what was asked, the notes ranked and where the gold landed, the gate's
    features and verdict, the counted work, the timings and every metric (none for a probe).

    `searched` makes it as the search ran (the top K_LIST notes, every stage's timing); `kept` is what an
    evaluation keeps of it (the top 5, the total time, rounded); `to_json(form)` writes it as an evaluation
    or a ledger row keeps it (FORMS) and `from_json` reads either back (what a form does not keep is empty)."""
    id: str
    level: str
    query: str = ""
    gold: tuple = ()
    ranked: tuple = ()                  # note ids, best first: K_LIST as searched, the top 5 once kept
    first_rank: int | None = None
    inject: bool = False
    top_score: float = 0.0
    timings_ms: dict[str, float] = field(default_factory=dict)   # per stage as searched; kept: the total
    gate_features: dict[str, float] = field(default_factory=dict)   # what the gate model reads
    gate_probability: float | None = None    # the gate model's P(answerable); None: the cosine gate
    gate: QuestionGate | None = None    # which gate decided (kind, file, threshold), and how
    work: dict | None = None            # SearchWork.to_json() as written (an older row's lacks newer counts)
    predicted_ms: float | None = None   # the cost model's total for this question
    metrics: dict[str, float] = field(default_factory=dict)      # METRICS name -> value; empty for a probe
    source: str = "hand"                # the gold question's (tuner.data.gold.SOURCES)

    @classmethod
    def searched(cls, question, ranked, *, inject: bool = False, top_score: float = 0.0, timings_ms=None,
                 gate_features=None, gate_probability: float | None = None, gate: QuestionGate | None = None,
                 work: SearchWork | None = None) -> "QuestionResult":
        """A question (a tuner.data.gold.Question) as one search ranked it: its gold's first rank and its
        metrics follow from `ranked`."""
        ranked, gold = tuple(ranked), tuple(question.gold)
        return cls(question.id, question.level, question.query, gold, ranked,
                   first_rank(ranked, gold) if gold else None, inject, top_score, dict(timings_ms or {}),
                   dict(gate_features or {}), gate_probability, gate, work.to_json() if work is not None else None, None,
                   question_metrics(ranked, gold) if question.level != "probe" else {},
                   getattr(question, "source", "hand"))

    @property
    def search_work(self) -> SearchWork | None:
        """What the search did, as the cost model reads it."""
        return SearchWork.from_json(self.work) if self.work is not None else None

    @property
    def latency_ms(self) -> float:
        return round(self.timings_ms.get("total", 0.0), 2)

    def kept(self, predicted_ms: float | None = None) -> "QuestionResult":
        """What an evaluation keeps of a searched question (and its JSON holds): the top 5, the total time,
        the top score and the gate's figures to 4 places, and the cost model's total when there is one."""
        return replace(self, ranked=self.ranked[:KEPT_RANKED], timings_ms={"total": self.latency_ms},
                       top_score=round(self.top_score, 4),
                       gate=self.gate.rounded() if self.gate is not None else None,
                       predicted_ms=round(predicted_ms, 3) if predicted_ms is not None else self.predicted_ms)

    def to_json(self, form: str = EVALUATION) -> dict:
        values = {"id": self.id, "level": self.level, "query": self.query, "gold": list(self.gold),
                  "first_rank": self.first_rank, "top5": list(self.ranked[:KEPT_RANKED]), "inject": self.inject,
                  "top_score": self.top_score, "latency_ms": self.latency_ms, "gate_features": self.gate_features,
                  "gate_probability": self.gate_probability,
                  "gate": self.gate.to_json(EVALUATION) if self.gate is not None else None,
                  "gate_which": self.gate.to_json(LEDGER) if self.gate is not None else None,
                  "work": self.work, "predicted_ms": self.predicted_ms,
                  "source": self.source if self.source != "hand" else None,      # older rows: all hand-written
                  "hit@5": self.metrics.get("hit@5", 0.0), **{m: v for m, v in self.metrics.items() if m != "hit@5"}}
        out = {}
        for key in FORMS[form]:
            if key == METRIC_KEYS:
                out.update(self.metrics)
                continue
            name = key.rstrip("?")
            if key.endswith("?") and values.get(name) is None:
                continue
            out["gate" if name == "gate_which" else name] = values[name]
        return out

    @classmethod
    def from_json(cls, d: dict) -> "QuestionResult":
        """Either form read back; rows of older ledgers lack some fields, and what a form does not keep (a
        ledger row's query, gold, ranked notes and gate features) is empty."""
        return cls(d["id"], d["level"], d.get("query", ""), tuple(d.get("gold", ())), tuple(d.get("top5", ())),
                   d.get("first_rank"), d.get("inject", False), d.get("top_score", 0.0),
                   {"total": d.get("latency_ms", 0.0)}, d.get("gate_features", {}), d.get("gate_probability"),
                   QuestionGate.from_json(d["gate"]) if d.get("gate") is not None else None, d.get("work"),
                   d.get("predicted_ms"), {m: d[m] for m in METRICS if m in d} if d["level"] != "probe" else {},
                   d.get("source", "hand"))


@dataclass(frozen=True)
class TotalLatency:
    """The total latency an evaluation is scored on: p50/p95 over n timings (None: not measured). With a cost
    model (`cost_model`) they are its prediction, and the calibration and the stopwatch's figures stand beside
    them (they never decide). `to_json` is its shape in an evaluation and a ledger row."""
    p50: float | None
    p95: float | None
    n: int | None
    cost_model: bool = False
    calibration: str | None = None          # the cost model's calibration key
    measured_p50: float | None = None
    measured_p95: float | None = None
    measured_n: int | None = None

    def to_json(self) -> dict:
        out = {k: v for k, v in (("p50", self.p50), ("p95", self.p95), ("n", self.n)) if v is not None}
        if not self.cost_model:
            return out
        return {**out, "source": "cost model", "calibration": self.calibration, "measured_p50": self.measured_p50,
                "measured_p95": self.measured_p95, "measured_n": self.measured_n}


@dataclass(frozen=True)
class LevelResult:
    """One level's questions in an evaluation: their metrics (`summarize`: METRICS name and n -> value) and
    their total latency. `to_json` is its shape in an evaluation and a ledger row: the metrics, then
    `latency_ms`."""
    metrics: dict[str, float]
    latency: Percentiles | None = None       # None: a row that kept none

    def to_json(self) -> dict:
        return {**self.metrics, **({"latency_ms": self.latency.to_json()} if self.latency is not None else {})}

    @classmethod
    def from_json(cls, d: dict) -> "LevelResult":
        return cls({k: v for k, v in d.items() if k != "latency_ms"},
                   Percentiles.from_json(d["latency_ms"]) if "latency_ms" in d else None)


@dataclass(frozen=True)
class EvaluatedIndex:
    """The index an evaluation searched: its file and the fingerprint it records (search_core's, as stored)."""
    db: str
    fingerprint: dict

    @classmethod
    def of(cls, searcher) -> "EvaluatedIndex":
        return cls(str(searcher.db), searcher.fingerprint)

    @property
    def embedder(self) -> str | None:
        return (self.fingerprint.get("embedder") or {}).get("name")

    def to_json(self) -> dict:
        return {"db": self.db, "fingerprint": self.fingerprint}

    @classmethod
    def from_json(cls, d: dict) -> "EvaluatedIndex | None":
        """None for an evaluation of no index ({}: one built from rows alone)."""
        return cls(d["db"], d["fingerprint"]) if d else None


@dataclass(frozen=True)
class LatencyCharge:
    """How a sweep round's latency was charged (tuner.sweep.rounds.charged), kept in its ledger row: by the
    cost model, for the variable's kind and reranker, with the calibration itself (so the row is re-scored
    without a clock: rounds.rescore) and the measured p95 beside the predicted one (it never decides)."""
    by: str
    kind: str
    rerank_model: str
    calibration: dict | None    # Calibration.to_json as the row stores it: Calibration.from_json checks it on use
    p95_predicted: float | None
    p95_measured: float | None
    measured_over_predicted: float | None

    @property
    def by_cost_model(self) -> bool:
        return self.by == "cost model"

    def to_json(self) -> dict:
        return {"by": self.by, "kind": self.kind, "rerank_model": self.rerank_model, "calibration": self.calibration,
                "p95_predicted": self.p95_predicted, "p95_measured": self.p95_measured,
                "measured_over_predicted": self.measured_over_predicted}

    @classmethod
    def from_json(cls, d: dict) -> "LatencyCharge":
        return cls(d.get("by", ""), d.get("kind", ""), d.get("rerank_model", "none"), d.get("calibration"),
                   d.get("p95_predicted"), d.get("p95_measured"), d.get("measured_over_predicted"))


@dataclass
class EvalResult:
    gold: str
    config: StoredConfig                       # as evaluated (an evaluation read from a ledger row: NO_CONFIG)
    config_hash: str
    index: EvaluatedIndex | None               # None: read from a ledger row, which keeps the index apart
    overall: dict[str, float]                  # METRICS name (and n, coverage) -> value
    by_level: dict[str, LevelResult]           # level name -> its questions' metrics and latency
    gate: GateMetrics
    latency_ms: dict[str, Percentiles]         # stage -> p50/p95/n
    score100: Score100 | None                  # None: no answerable question, no score
    per_query: list[QuestionResult]
    possible_gold_gaps: list[GoldGap] = field(default_factory=list)
    warnings: list = field(default_factory=list)
    seconds: float = 0.0
    # with a cost model, latency_ms is predicted and the stopwatch's figures are kept here (never decide)
    measured_latency_ms: dict[str, Percentiles] | None = None
    cost_calibration: str | None = None
    # a sweep round's: how its latency was charged (tuner.sweep.rounds.charged), kept in its ledger row
    latency_charge: LatencyCharge | None = None

    @property
    def p95_ms(self) -> float:
        """The total p95 that scores and budgets (the cost model's prediction when there is one)."""
        t = self.latency_ms.get("total")
        return t.p95 if t is not None and t.p95 is not None else 0.0

    @classmethod
    def from_json(cls, d: dict) -> "EvalResult":
        """What to_json wrote (an `eval --out` file, an A/B candidate's result), read back."""
        total = d["latency_ms"]
        cost = total.get("source") == "cost model"
        return cls(d["gold"], StoredConfig.from_json(d["config"]), d["config_hash"], EvaluatedIndex.from_json(d["index"]),
                   d["overall"], {lv: LevelResult.from_json(r) for lv, r in d["by_level"].items()},
                   GateMetrics.from_json(d["gate"]), _stages_from_json(d["latency_by_stage_ms"]),
                   Score100.from_json(d["score100"]),
                   [QuestionResult.from_json(q) for q in d["per_query"]],
                   [GoldGap.from_json(g) for g in d.get("possible_gold_gaps", [])], d.get("warnings", []),
                   d.get("seconds", 0.0),
                   _stages_from_json(d["measured_latency_by_stage_ms"]) if cost else None,
                   total.get("calibration") if cost else None)

    def total_latency(self) -> TotalLatency:
        """The total's p50/p95/n; with a cost model, marked so and with the stopwatch's figures beside."""
        t = self.latency_ms.get("total", Percentiles())
        if self.measured_latency_ms is None:
            return TotalLatency(t.p50, t.p95, t.n)
        m = self.measured_latency_ms.get("total", Percentiles())
        return TotalLatency(t.p50, t.p95, t.n, True, self.cost_calibration, m.p50, m.p95, m.n)

    @classmethod
    def read(cls, path) -> "EvalResult":
        """An `eval --out` file; ValueError (saying what is missing) for any other JSON."""
        d = json.loads(Path(path).read_text(encoding="utf-8"))
        try:
            return cls.from_json(d)
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"{path} is not an evaluation result (`eval --out` writes one): "
                             f"{'no field ' + repr(e.args[0]) if isinstance(e, KeyError) else e}") from None

    def to_json(self) -> dict:
        o = self.overall
        total = self.total_latency().to_json()
        extra = ({} if self.measured_latency_ms is None else
                 {"measured_latency_by_stage_ms": _stages_to_json(self.measured_latency_ms)})
        return {
            "gold": self.gold, "config": self.config.to_json(), "config_hash": self.config_hash,
            "index": self.index.to_json() if self.index is not None else {},
            "n": o.get("n", 0), "hit@5": o.get("hit@5"), "mrr": o.get("mrr"), "p@5": o.get("p@5"),
            "recall@5": o.get("recall@5"), "ndcg@10": o.get("ndcg@10"), "coverage": o.get("coverage"),
            "overall": o, "latency_ms": total, "latency_by_stage_ms": _stages_to_json(self.latency_ms), **extra,
            "score100": self.score100.to_json() if self.score100 else {},
            "by_level": {lv: r.to_json() for lv, r in self.by_level.items()},
            "per_query": [q.to_json() for q in self.per_query], "gate": self.gate.to_json(),
            "possible_gold_gaps": [g.to_json() for g in self.possible_gold_gaps], "warnings": self.warnings,
            "seconds": self.seconds,
        }

    def to_ledger(self) -> dict:
        """What a sweep's ledger row keeps: overall, per level, the gate (without the probes' rows), the total
        latency, the score, the questions (QuestionResult.to_json(LEDGER)) and how latency was charged."""
        return {"overall": self.overall, "by_level": {lv: r.to_json() for lv, r in self.by_level.items()},
                "gate": self.gate.to_ledger(),
                "latency_ms": self.total_latency().to_json(),
                "score100": self.score100.to_json() if self.score100 else {},
                "per_query": [q.to_json(LEDGER) for q in self.per_query],
                **({"latency_charge": self.latency_charge.to_json()} if self.latency_charge is not None else {})}

    @classmethod
    def from_ledger(cls, d: dict) -> "EvalResult":
        """A ledger row's metrics (to_ledger) read back, for the keep rule, the replay, the audit and the
        reports: the latency it keeps is the total's alone, and the row's config is the row's, not here."""
        total = dict(d.get("latency_ms") or {})
        cost = total.get("source") == "cost model"
        measured = Percentiles(total.get("measured_p50"), total.get("measured_p95"), total.get("measured_n"))
        lat = Percentiles.from_json(total)
        charge = d.get("latency_charge")
        return cls("", NO_CONFIG, "", None, d["overall"],
                   {lv: LevelResult.from_json(r) for lv, r in d.get("by_level", {}).items()},
                   GateMetrics.from_json(d.get("gate")),
                   {"total": lat} if lat.to_json() else {}, Score100.from_json(d.get("score100")),
                   [QuestionResult.from_json(q) for q in d.get("per_query", [])],
                   measured_latency_ms={"total": measured} if cost else None,
                   cost_calibration=total.get("calibration") if cost else None,
                   latency_charge=LatencyCharge.from_json(charge) if charge else None)


def predicted_latency(rows: list[QuestionResult], cost, reranker: str) -> tuple[dict[str, Percentiles],
                                                                               list[dict[str, float]]]:
    """(p50/p95 per stage, each row's predicted stage -> ms) from the rows' counted work and the calibration."""
    from tuner.evaluation.cost_model import predict
    per_row = [predict(r.search_work, cost, reranker) for r in rows]
    return {s: Percentiles.of(p[s] for p in per_row) for s in (per_row[0] if per_row else ())}, per_row


def build_result(gold: GoldSet, cfg: SearchConfig, index: EvaluatedIndex | None, rows: list[QuestionResult],
                 score_cfg: ScoreConfig = ScoreConfig(), gaps=None, warnings=None, seconds=0.0,
                 extra_timings: list[dict[str, float]] = (), cost=None) -> EvalResult:
    """cost: a cost_model.Calibration: latency is then predicted from each row's work (and decides the
    speed points); the measured latency is kept beside it."""
    overall = summarize(rows)
    measured = latency(rows, extra_timings)
    predicted_rows = None
    if cost is not None:
        lat, predicted_rows = predicted_latency(rows, cost, cfg.reranker)
    else:
        lat = measured

    def level_latency(lvl) -> Percentiles:
        if predicted_rows is None:
            return latency([r for r in rows if r.level == lvl]).get("total", Percentiles())
        return Percentiles.of(p["total"] for r, p in zip(rows, predicted_rows) if r.level == lvl)

    by_level = {lvl: LevelResult(summarize([r for r in rows if r.level == lvl]), level_latency(lvl))
                for lvl in LEVELS if lvl != "probe" and any(r.level == lvl for r in rows)}
    total = lat.get("total")
    p95 = total.p95 if total is not None else 0.0
    s100 = score100(overall, p95, score_cfg) if overall.get("n") else None
    per_query = [r.kept(predicted_rows[i]["total"] if predicted_rows else None) for i, r in enumerate(rows)]
    sat = saturation(rows)
    if sat.saturated:
        warnings = [*(warnings or []), sat.warning()]
    return EvalResult(gold.name, StoredConfig(cfg), cfg.config_hash(), index, overall, by_level, gate_metrics(rows),
                      lat, s100, per_query, gaps or [], warnings or [], round(seconds, 3),
                      measured if cost is not None else None, cost.key if cost is not None else None)


def _until_stopped(questions, stop, total: int):
    """The questions, with stop() asked before each: True raises StopRequested."""
    from search_core import StopRequested
    for i, q in enumerate(questions):
        if stop():
            raise StopRequested(f"the evaluation stopped after {i} of {total} questions")
        yield q


def evaluate(searcher, gold: GoldSet, cfg: SearchConfig, *, cache: RetrievalCache | None = None,
             score_cfg: ScoreConfig = ScoreConfig(), allow_missing: bool = False, audit: bool = True,
             min_timing_samples: int = 0, cost=None, progress=None, gate: GateRequest | None = None,
             stop=None) -> EvalResult:
    """min_timing_samples: time repeated passes until every latency percentile stands on at least this
    many timings; quality metrics come from the first pass, they do not vary. cost: a
    cost_model.Calibration, whose prediction then stands for latency (build_result). gate: the gate every
    search decides with (None: the searcher's own request). stop(): asked before each question of the first
    pass; True ends the evaluation with StopRequested (the daemon's stop)."""
    from tuner.evaluation.fake_miss import possible_gold_gaps

    t0 = time.perf_counter()
    warnings = gold.check_against(searcher.view.notes.keys(), allow_missing=allow_missing)
    getattr(searcher, "warm_up", lambda: None)()   # the model and view load are not a question's latency
    # progress (a tuner.progress.StageProgress): a line per few seconds over the questions' first pass
    asked = gold if progress is None else SimpleNamespace(questions=progress.iter(gold.questions, "questions"))
    if stop is not None:
        asked = SimpleNamespace(questions=_until_stopped(asked.questions, stop, len(gold.questions)))
    rows = run_queries(searcher, asked, cfg, cache, gate=gate)
    extra = repeat_timings(searcher, gold, cfg, timing_passes(len(rows), min_timing_samples) - 1,
                           wall=cache is None, gate=gate)
    gaps = possible_gold_gaps(searcher, rows, cfg) if audit else []
    return build_result(gold, cfg, EvaluatedIndex.of(searcher), rows, score_cfg, gaps, warnings, time.perf_counter() - t0, extra, cost)
