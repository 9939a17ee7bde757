"""Search latency from a cost model: counted work (search_core.work) times unit costs measured once.

A sweep's keep decision must not follow what else the machine is doing. A stopwatch during the round
does: on a fresh clone one round flipped between kept and rejected:no_gain on timing alone, and under
load an embedder round was rejected eight times out of eight that a quiet machine kept. So a round's
p50/p95 is predicted: every question's work is counted (texts embedded and their length, vectors
compared, FTS5 postings read, short-token postings, entity notes, fused entries, reranked pairs) and
charged with unit costs that a short calibration measured on this machine for this model. The
calibration is stored in the ledger with the rounds it charged, so a decision can be recomputed from
the ledger without a clock, and in `runs/cost-model/` so the daemon's nights are charged alike. The
measured latency is recorded beside the prediction and never decides.

How a search's stages add up (search_core.pipeline.retrieve): the query is embedded on a second thread
while the caller runs the FTS5 queries; sub-questions with vectors of their own are then embedded by
whichever thread is free, longest first; the rest (fusion, ranking, the gate, a reranker) runs after.
`predict` plays that schedule with the unit costs.

The unit costs (UNITS) are measured by timing each kind of work on its own, for the questions of a
set, interleaved and repeated (medians per question, then a least-squares line per kind).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import random
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from search_core import SearchCoreError, StopRequested
from search_core.search import channels as ch
from search_core.config import SearchConfig
from search_core.search.limits import cap_query
from search_core.models import get_reranker
from search_core.models.threads import QUERY_THREADS, SOLO_QUERY_THREADS, embed_with_threads
from search_core.files import atomic_write_text
from search_core.percentiles import percentile
from search_core.search.ranking import K_LIST
from search_core.search.work import SearchWork, ngram_work, search_work
from search_core.search.query_cache import uncached_queries

if TYPE_CHECKING:
    from search_core.search.pipeline import Retrieval

VERSION = 2          # bump when the schedule in predict() or the units change: old calibrations are refused
# 2 added the n-gram BM25 query's units (NGRAM_UNITS). A version-1 calibration is still read, to re-charge the
# rounds a ledger recorded with it (none of them ran an n-gram query); charging an n-gram query with it is
# refused, and every new calibration is version 2.
READABLE_VERSIONS = (1, 2)

# name -> what one unit is. Every figure is in milliseconds.
UNITS = {
    "embed_solo_ms": "per query embedded alone (no sub-question of its own), on the threads a quiet machine gives it",
    "embed_solo_per_unit": "per length unit (token or character) of such a query",
    "embed_ms": "per text embedded on one thread (a query with sub-questions, each sub-question)",
    "embed_per_unit": "per length unit of such a text",
    "dense_per_mrowdim": "per million multiply-adds of a dense search (chunk vectors x dimensions)",
    "entity_ms": "per entity-channel search",
    "entity_per_note": "per note the entity channel returns (its best chunk is found)",
    "sparse_ms": "per FTS5 query (the query, each sub-question)",
    "sparse_per_kposting": "per 1,000 trigram postings an FTS5 query reads",
    "short_per_kposting": "per 1,000 short-token postings (1-2 character tokens)",
    "ngram_ms": "per n-gram BM25 query (keyword_index ngram or both, the fast path's check)",
    "ngram_per_term": "per distinct term an n-gram BM25 query looks up (one primary-key read of its list)",
    "ngram_per_kposting": "per 1,000 chunk postings an n-gram BM25 query reads",
    "rank_ms": "per search: fusion, the final ranking and the gate's features",
    "rank_per_item": "per channel-list entry weighted RRF reads",
    "search_ms": "per search, beyond its parts: thread hand-offs, the index freshness check, Python between stages "
                 "(the median gap between whole searches timed in the calibration and the sum of their parts)",
}
NGRAM_UNITS = ("ngram_ms", "ngram_per_term", "ngram_per_kposting")
# Units only a calibration taken on an index whose dense channel searches elsewhere holds (its `dense_backend`
# says where). A pgvector query costs a round trip and a graph walk or a scan, not numpy's product: at 525,000
# vectors, HNSW p50 88 ms against numpy's 84 ms, at 100,000 93 ms against 15 ms (BENCHMARKS.md, scale: pgvector),
# so no per-row unit of numpy's can charge it. The entity channel stays numpy's (dense_per_mrowdim) either way.
BACKEND_UNITS = {
    "dense_backend_ms": "per dense search the index's dense backend answers (pgvector: one query to PostgreSQL)",
}


def units_of(version) -> tuple[str, ...]:
    """The units a calibration of `version` holds."""
    return tuple(u for u in UNITS if version != 1 or u not in NGRAM_UNITS)


# a calibration is short (it runs before a sweep's first round): at most this many questions, 3 passes each
CALIBRATION_QUESTIONS = 60
CALIBRATION_PASSES = 3


@dataclass(frozen=True)
class Machine:
    """What makes unit costs of one machine another's: the processor, its cores, the platform. `to_json` is
    its shape in a stored calibration and in the calibration key's hash."""
    cpu: str
    cores: int
    arch: str
    system: str

    def to_json(self) -> dict:
        return {"cpu": self.cpu, "cores": self.cores, "arch": self.arch, "system": self.system}

    @classmethod
    def from_json(cls, d: dict) -> "Machine":
        return cls(d["cpu"], d["cores"], d["arch"], d["system"])


def machine() -> Machine:
    """This machine (Machine)."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return Machine(cpu, os.cpu_count() or 1, platform.machine(), platform.system())


def _dense_backend_of(view) -> dict:
    """What answers a view's dense searches, as a calibration records it: {} for numpy's product over the
    matrix, else the backend's own description (search_core.index.pgvector.PgvectorDense.cost_key)."""
    backend = getattr(view, "dense_backend", None)
    return dict(backend.cost_key()) if backend is not None else {}


def calibration_key(machine_info: Machine, embedder_fingerprint: dict, dense_backend: dict | None = None) -> str:
    """The key a calibration is stored and looked up under: an index searching pgvector gets its own (numpy's
    keys are as they were)."""
    parts = [VERSION, machine_info.to_json(), embedder_fingerprint] + ([dense_backend] if dense_backend else [])
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def calibration_key_for(searcher) -> str:
    """The key of the calibration that charges `searcher`'s searches on this machine: its embedder, and where its
    index's dense channel searches."""
    return calibration_key(machine(), searcher.fingerprint["embedder"], _dense_backend_of(searcher.view))


@dataclass(frozen=True)
class Calibration:
    """Unit costs of one embedder's searches on one machine (and per-pair costs of rerankers)."""
    key: str
    machine: Machine
    embedder: str
    embedder_fingerprint: dict
    length_unit: str
    units: dict[str, float]                    # UNITS name -> ms
    rerank_per_pair: dict[str, float] = field(default_factory=dict)   # reranker name -> ms per (query, passage) pair
    threads: dict[str, int] = field(default_factory=dict)   # {"solo": n, "one": 1}: what the embed units timed
    questions: int = 0
    passes: int = 0
    taken_at: str = ""
    seconds: float = 0.0
    version: int = VERSION
    dense_backend: dict = field(default_factory=dict)    # _dense_backend_of the index timed ({}: numpy)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Calibration":
        """A calibration read back (the store's file, a ledger row), checked: a NaN or negative unit cost would
        charge every search with it and no decision could stand on it."""
        if not isinstance(d, dict):
            raise SearchCoreError(f"a cost calibration is a JSON object, not {type(d).__name__}; take a new one "
                                  "(`autoresearch sweep --recalibrate`)")
        if d.get("version") not in READABLE_VERSIONS:
            raise SearchCoreError(f"cost calibration {d.get('key')!r} has version {d.get('version')!r}, this code "
                                  f"reads {' and '.join(map(str, READABLE_VERSIONS))}; take a new one "
                                  "(`autoresearch sweep --recalibrate`)")
        units = d.get("units")
        missing = [u for u in units_of(d.get("version")) if u not in (units if isinstance(units, dict) else {})]
        if missing:
            raise SearchCoreError(f"cost calibration {d.get('key')!r} lacks the units {', '.join(missing)}; "
                                  "take a new one (`autoresearch sweep --recalibrate`)")
        try:
            cal = cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d} | {"machine": Machine.from_json(d["machine"])})
        except (KeyError, TypeError) as e:
            raise SearchCoreError(f"cost calibration {d.get('key')!r} does not say which machine took it ({e}); take a "
                                  "new one (`autoresearch sweep --recalibrate`)") from None
        bad = cal.problems()
        if bad:
            raise SearchCoreError(f"cost calibration {d.get('key')!r} is damaged ({'; '.join(bad[:5])}); take a new "
                                  "one (`autoresearch sweep --recalibrate`)")
        return cal

    def problems(self) -> list[str]:
        """What makes this calibration unusable: a unit cost that is not a finite number >= 0, a field of the
        wrong type. Empty when it may charge searches."""
        out = []

        def cost(name, v):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                out.append(f"{name} is {v!r}, not a number")
            elif not math.isfinite(v) or v < 0:
                out.append(f"{name} is {v!r}, not a finite cost >= 0")

        for name in units_of(self.version):
            cost(f"units.{name}", self.units.get(name))
        for name in BACKEND_UNITS:
            if name in self.units:
                cost(f"units.{name}", self.units[name])
        extra = sorted(set(self.units) - set(units_of(self.version)) - set(BACKEND_UNITS))
        if extra:
            out.append(f"unknown units {', '.join(map(str, extra[:5]))}")
        if not isinstance(self.rerank_per_pair, dict):
            out.append("rerank_per_pair is not an object")
        else:
            for name, v in self.rerank_per_pair.items():
                cost(f"rerank_per_pair[{name!r}]", v)
        for name, want in (("key", str), ("embedder", str), ("length_unit", str), ("taken_at", str),
                           ("machine", Machine), ("embedder_fingerprint", dict), ("threads", dict),
                           ("dense_backend", dict)):
            if not isinstance(getattr(self, name), want):
                out.append(f"{name} is {type(getattr(self, name)).__name__}, not {want.__name__}")
        for name in ("questions", "passes"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                out.append(f"{name} is {v!r}, not a count")
        return out

    def with_reranker(self, name: str, ms_per_pair: float) -> "Calibration":
        return replace(self, rerank_per_pair={**self.rerank_per_pair, name: ms_per_pair})


# -- prediction -------------------------------------------------------------------------------------------

def predict(work: SearchWork, cal: Calibration, reranker: str = "none") -> dict[str, float]:
    """Predicted milliseconds of one search, per stage and in total (`total`: what a user waits): stage ->
    milliseconds, the mapping a question's measured `timings_ms` is (predicted_latency reads it as one)."""
    u = cal.units
    lengths = list(work.embed_lengths)

    def embed(length: int, solo: bool) -> float:
        if solo:
            return u["embed_solo_ms"] + u["embed_solo_per_unit"] * length
        return u["embed_ms"] + u["embed_per_unit"] * length

    if work.dense_backend and work.dense_rows:
        if "dense_backend_ms" not in u:
            raise SearchCoreError(f"the cost calibration {cal.key} timed numpy's dense search, and this search's dense "
                                  "channel went to the index's pgvector table; take a calibration on that index "
                                  "(`autoresearch sweep --recalibrate`)")
        dense = u["dense_backend_ms"]
    else:
        dense = u["dense_per_mrowdim"] * work.dense_rows * work.dim / 1e6
    entity = (u["entity_ms"] + u["entity_per_note"] * work.entity_notes
              + u["dense_per_mrowdim"] * work.entity_rows * work.dim / 1e6) if work.entity_rows else 0.0
    fts = [u["sparse_ms"] + u["sparse_per_kposting"] * p / 1000 + u["short_per_kposting"] * s / 1000
           for p, s in zip(work.fts_postings, work.short_postings)]
    if work.ngram_postings and "ngram_ms" not in u:
        raise SearchCoreError(f"the cost calibration {cal.key} (version {cal.version}) has no n-gram BM25 units; "
                              "take a new one (`autoresearch sweep --recalibrate`)")
    ngram = [u["ngram_ms"] + u["ngram_per_term"] * n + u["ngram_per_kposting"] * p / 1000
             for p, n in zip(work.ngram_postings, work.ngram_terms)]
    # the fast path's check: the query's keyword queries it ran before the embedding started
    ahead = (ngram[0] if work.ahead_ngram and ngram else 0.0) + (fts[0] if work.ahead_fts and fts else 0.0)
    q_embed = embed(lengths[0], work.solo) if lengths else 0.0
    worker = q_embed + dense + entity          # the query's vector, then its dense and entity searches
    caller = sum(fts) + sum(ngram) - ahead     # the keyword queries run beside the embedding
    parts = 0.0
    for length in lengths[1:]:                 # sub-questions, longest first, to whichever thread is free
        cost = embed(length, False) + dense
        parts += cost
        if caller <= worker:
            caller += cost
        else:
            worker += cost
    retrieve = ahead + max(worker, caller)
    rank = u["rank_ms"] + u["rank_per_item"] * work.fused_items
    rerank = 0.0
    if reranker != "none" and work.rerank_pairs:
        if reranker not in cal.rerank_per_pair:
            raise SearchCoreError(f"the cost calibration {cal.key} has no per-pair cost for reranker {reranker!r} "
                                  f"(it has: {', '.join(sorted(cal.rerank_per_pair)) or 'none'})")
        rerank = cal.rerank_per_pair[reranker] * work.rerank_pairs
    return {"embed": q_embed, "dense": dense, "entity": entity, "sparse": sum(fts) + sum(ngram), "ahead": ahead,
            "parts": parts,
            "retrieve": retrieve, "rank": rank, "rerank": rerank, "overhead": u["search_ms"],
            "total": retrieve + rank + rerank + u["search_ms"]}


def predicted_total(work: SearchWork, cal: Calibration, reranker: str = "none") -> float:
    """The predicted milliseconds a user waits for one search (predict's `total`)."""
    return predict(work, cal, reranker)["total"]


# -- calibration ------------------------------------------------------------------------------------------

def _ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def _line(x, y) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through (x, y), both >= 0: a negative slope (noise
    over too narrow a range of x) becomes 0 with the median as the intercept."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) >= 2 and np.ptp(x) > 0:
        slope, icpt = np.polyfit(x, y, 1)
        if slope >= 0 and icpt >= 0:
            return float(icpt), float(slope)
        if slope > 0:                          # through the origin
            return 0.0, float((x @ y) / (x @ x))
    return float(np.median(y)) if len(y) else 0.0, 0.0


def _plane(cols: list, y) -> list[float]:
    """Non-negative least squares of y on [1, *cols] by dropping negative columns and refitting."""
    y = np.asarray(y, float)
    keep = list(range(len(cols) + 1))
    X_all = np.column_stack([np.ones(len(y)), *[np.asarray(c, float) for c in cols]])
    while True:
        coef, *_ = np.linalg.lstsq(X_all[:, keep], y, rcond=None)
        neg = [k for k, c in zip(keep, coef) if c < 0]
        if not neg:
            out = [0.0] * (len(cols) + 1)
            for k, c in zip(keep, coef):
                out[k] = float(c)
            return out
        keep = [k for k in keep if k != neg[0]]
        if not keep:
            return [0.0] * (len(cols) + 1)


def solo_threads(embedder) -> int:
    """The threads a query embedded alone gets on a quiet machine (models.threads.solo_query_threads with
    nothing else runnable): the calibration times that, whatever the load is while it runs."""
    passive = os.environ.get("OMP_WAIT_POLICY", "").strip().upper() == "PASSIVE"
    return SOLO_QUERY_THREADS if getattr(embedder, "short_spin", False) or passive else QUERY_THREADS


class _NumpyDense:
    """A view whose dense searches are numpy's product over its matrix, whatever backend the view has."""
    dense_backend = None

    def __init__(self, view):
        self._view = view

    def __getattr__(self, name):
        return getattr(self._view, name)


@dataclass(frozen=True)
class TimedQuestion:
    """One calibration question, retrieved once: what each pass times again, and the work it counted."""
    query: str
    retrieved: Retrieval       # its channel lists and vectors (each pass reuses them)
    work: SearchWork
    capped: str                # the query as the embedder reads it
    own: tuple[str, ...]       # its sub-questions with a vector of their own, longest first


def calibrate(searcher, queries: list[str], *, depth: int = SearchConfig().depth, passes: int = CALIBRATION_PASSES,
              max_questions: int = CALIBRATION_QUESTIONS, seed: int = 0, progress=None, stop=None) -> Calibration:
    """Unit costs for `searcher`'s embedder and index on this machine, from `queries` (a tuning set's).
    Each pass times every kind of work of every question once, the questions in a new seeded order.
    `stop()`, asked before each question of each pass (the whole takes minutes on a busy machine: 156 s for
    60 questions x 3 passes at load 17), ends it with StopRequested and nothing stored."""

    def check(where: str):
        if stop is not None and stop():
            raise StopRequested(f"the cost calibration of {searcher.embedder_name} stopped {where}")

    if not queries:
        raise SearchCoreError("a cost calibration needs questions; the set has none")
    t_start = time.perf_counter()
    qs = list(dict.fromkeys(queries))
    if len(qs) > max_questions:               # evenly spread, not the first ones
        qs = [qs[int(i * len(qs) / max_questions)] for i in range(max_questions)]
    searcher.warm_up()
    has_ngram = searcher.view.ngram_index() is not None   # an index without the n-gram lists: its queries run FTS5
    solo_n = solo_threads(searcher.embedder)
    cfg = SearchConfig(embedder=searcher.embedder_name, depth=depth)
    backend = _dense_backend_of(searcher.view)
    prepared = prepare_questions(searcher, qs, cfg, check)
    med = time_passes(searcher, prepared, cfg, passes=passes, solo_n=solo_n, has_ngram=has_ngram,
                      rng=random.Random(seed), check=check, progress=progress, numpy_too=bool(backend))
    units = fit_units(searcher, prepared, med, has_ngram, backend=bool(backend))
    fp = searcher.fingerprint["embedder"]
    m = machine()
    cal = Calibration(calibration_key(m, fp, backend), m, searcher.embedder_name, fp,
                      getattr(searcher.embedder, "length_unit", "chars"),
                      {k: round(v, 6) for k, v in units.items()}, {}, {"solo": solo_n, "one": 1}, len(prepared),
                      passes, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      round(time.perf_counter() - t_start, 2), dense_backend=backend)
    bad = cal.problems()
    if bad:                 # e.g. a median over no timings: never charged, never stored
        raise SearchCoreError(f"the cost calibration of {searcher.embedder_name} measured unusable costs "
                              f"({'; '.join(bad[:5])}); take it again")
    return cal


def prepare_questions(searcher, qs: list[str], cfg: SearchConfig, check) -> list[TimedQuestion]:
    """Each question retrieved and ranked once, with the work it counts (what the units are fitted against)."""
    prepared = []
    for n, q in enumerate(qs):
        check(f"before question {n + 1} of {len(qs)}")
        r = searcher.retrieve(q, cfg.depth)
        res = searcher.rank(r, cfg, snippets=False, limit_fused=K_LIST)
        work = search_work(searcher, r, cfg, res.fused)
        capped = cap_query(r.query)
        own = sorted((p for p in r.subqueries if not ch.shares_query_vector(p, capped)), key=len, reverse=True)
        prepared.append(TimedQuestion(q, r, work, capped, tuple(own)))
    return prepared


def time_passes(searcher, prepared: list[TimedQuestion], cfg: SearchConfig, *, passes: int, solo_n: int,
                has_ngram: bool, rng: random.Random, check, progress=None, numpy_too: bool = False) -> dict[tuple, float]:
    """The median milliseconds of each kind of work of each question over `passes` passes, each pass in a new
    order: key ("solo", i), ("one", i, j) for the query's (j = 0) and its sub-questions' embeddings, ("dense",
    i), ("entity", i), ("sparse", i, j) and ("ngram", i, j) per text, ("rank", i), ("search", i) uncached."""
    emb, view, conn, depth = searcher.embedder, searcher.view, searcher.conn, cfg.depth
    numpy_view = _NumpyDense(view) if numpy_too else view
    samples: dict[tuple, list[float]] = {}

    def add(key, ms):
        samples.setdefault(key, []).append(ms)

    for p in range(passes):
        order = list(range(len(prepared)))
        rng.shuffle(order)
        for i in order:
            check(f"in pass {p + 1} of {passes}")
            t = prepared[i]
            q, r, capped = t.query, t.retrieved, t.capped
            vec = r.qvec
            add(("solo", i), _ms(lambda: embed_with_threads(emb, [capped], is_query=True, threads=solo_n)))
            add(("one", i, 0), _ms(lambda: embed_with_threads(emb, [capped], is_query=True, threads=1)))
            for j, part in enumerate(t.own, 1):
                add(("one", i, j), _ms(lambda: embed_with_threads(emb, [part], is_query=True, threads=1)))
            add(("dense", i), _ms(lambda: ch.dense(view, vec, depth)))
            if numpy_view is not view:           # numpy's product too: the entity channel's unit
                add(("numpy", i), _ms(lambda: ch.dense(numpy_view, vec, depth)))
            top = r.lists["dense"][0].score if r.lists.get("dense") else None
            add(("entity", i), _ms(lambda: ch.entity(view, r.query, vec, depth, emb.default_threshold, top)))
            for j, text in enumerate([r.query, *r.subqueries]):
                add(("sparse", i, j), _ms(lambda: ch.sparse(conn, view, text, depth)))
                if has_ngram:
                    add(("ngram", i, j), _ms(lambda: ch.ngram_sparse(conn, view, text, depth)))
            add(("rank", i), _ms(lambda: searcher.rank(r, cfg, snippets=False, limit_fused=K_LIST)))
            with uncached_queries(searcher):
                add(("search", i), _ms(lambda: searcher.rank(searcher.retrieve(q, depth), cfg, snippets=False,
                                                            limit_fused=K_LIST)))
        if progress:
            progress(f"cost calibration: pass {p + 1}/{passes} over {len(prepared)} questions")
    return {k: float(np.median(v)) for k, v in samples.items()}


def fit_units(searcher, prepared: list[TimedQuestion], med: dict[tuple, float], has_ngram: bool, *,
              backend: bool = False) -> dict[str, float]:
    """UNITS from the medians: a line (or plane) of each kind's time against the work it counted; `search_ms`
    is what a whole uncached search costs beyond the sum of its parts."""
    units: dict[str, float] = {}
    works = [t.work for t in prepared]
    units["embed_solo_ms"], units["embed_solo_per_unit"] = _line([w.embed_lengths[0] for w in works],
                                                                 [med[("solo", i)] for i in range(len(prepared))])
    xs, ys = [], []
    for i, t in enumerate(prepared):
        for j in range(len(t.own) + 1):
            xs.append(t.work.embed_lengths[j])
            ys.append(med[("one", i, j)])
    units["embed_ms"], units["embed_per_unit"] = _line(xs, ys)
    mrd = [w.dense_rows * w.dim / 1e6 for w in works]
    numpy_key = "numpy" if backend else "dense"
    units["dense_per_mrowdim"] = float(np.median([med[(numpy_key, i)] / m for i, m in enumerate(mrd) if m > 0])) if any(mrd) else 0.0
    if backend:       # the backend's own per-search cost (pgvector: one query to PostgreSQL)
        units["dense_backend_ms"] = float(np.median([med[("dense", i)] for i in range(len(prepared))]))
    ent_rows = [w.entity_rows * w.dim / 1e6 * units["dense_per_mrowdim"] for w in works]
    units["entity_ms"], units["entity_per_note"] = _line(
        [w.entity_notes for w in works],
        [max(med[("entity", i)] - ent_rows[i], 0.0) for i in range(len(prepared))])
    sp_p, sp_s, sp_y = [], [], []
    for i, t in enumerate(prepared):
        for j in range(1 + len(t.retrieved.subqueries)):
            sp_p.append(t.work.fts_postings[j] / 1000)
            sp_s.append(t.work.short_postings[j] / 1000)
            sp_y.append(med[("sparse", i, j)])
    units["sparse_ms"], units["sparse_per_kposting"], units["short_per_kposting"] = _plane([sp_p, sp_s], sp_y)
    ng_t, ng_p, ng_y = [], [], []
    if has_ngram:
        for i, t in enumerate(prepared):
            for j, text in enumerate([t.retrieved.query, *t.retrieved.subqueries]):
                postings, terms = ngram_work(searcher.conn, searcher.view, text)
                ng_t.append(terms)
                ng_p.append(postings / 1000)
                ng_y.append(med[("ngram", i, j)])
    # no lists to time: never charged, since search_work then counts those queries as FTS5's
    units["ngram_ms"], units["ngram_per_term"], units["ngram_per_kposting"] = (
        _plane([ng_t, ng_p], ng_y) if ng_y else [0.0, 0.0, 0.0])
    units["rank_ms"], units["rank_per_item"] = _line([w.fused_items for w in works],
                                                     [med[("rank", i)] for i in range(len(prepared))])
    units["search_ms"] = 0.0
    draft = Calibration("", Machine("", 0, "", ""), "", {}, "", units)
    gaps = [med[("search", i)] - predict(w, draft)["total"] for i, w in enumerate(works)]
    units["search_ms"] = max(float(np.median(gaps)), 0.0)
    return units


def calibrate_reranker(searcher, queries: list[str], name: str, *, window: int = 20, passes: int = CALIBRATION_PASSES,
                       max_questions: int = 20, seed: int = 0) -> float:
    """Milliseconds per (query, passage) pair of reranker `name`: each question's first `window` fused
    candidates scored in one call, interleaved over passes; the median of each pass's ms per pair."""
    model = get_reranker(name)
    qs = list(dict.fromkeys(queries))[:max_questions]
    cfg = SearchConfig(embedder=searcher.embedder_name, top_k=window)
    batches = []
    for q in qs:
        res = searcher.rank(searcher.retrieve(q, cfg.depth, keyword_index=cfg.keyword_index, pair_terms=cfg.pair_terms),
                            cfg, snippets=False)
        passages = [searcher.passage(h.chunk_id, h.note_id) for h in res.hits]
        if passages:
            batches.append((q, passages))
    if not batches:
        raise SearchCoreError(f"no passages to time reranker {name!r} on: the index returned nothing")
    model.score(batches[0][0], batches[0][1][:1])          # loading the model is not per pair
    rng = random.Random(seed)
    per_pass = []
    for _ in range(passes):
        rng.shuffle(batches)
        total_ms = sum(_ms(lambda: model.score(q, ps)) for q, ps in batches)
        per_pass.append(total_ms / sum(len(ps) for _, ps in batches))
    return round(float(np.median(per_pass)), 6)


# -- the store under runs/ --------------------------------------------------------------------------------

class DamagedCalibration(SearchCoreError):
    """A stored calibration file that cannot be used, with its path and why."""

    def __init__(self, path: Path, why: str):
        super().__init__(f"the stored cost calibration {path} cannot be used ({why})")
        self.path, self.why = path, why


def _no_constant(name: str):
    raise ValueError(f"{name} is not a cost")


class CostStore:
    """One calibration per machine and embedder (with its rerankers' per-pair costs), as JSON files in
    `folder`, reused sweep after sweep so nights compare; a new machine or model gets a new key."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def get(self, key: str) -> Calibration | None:
        """The stored calibration, or None when there is none. A file that is there but cannot be used (not
        JSON, another version, a NaN or negative unit cost, a missing unit) raises DamagedCalibration: the
        caller retakes the calibration, which replaces the file, and says so."""
        p = self.path(key)
        if not p.exists():
            return None
        try:
            cal = Calibration.from_json(json.loads(p.read_text(encoding="utf-8"), parse_constant=_no_constant))
        except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, SearchCoreError) as e:
            raise DamagedCalibration(p, str(e)) from None
        if cal.key != key:
            raise DamagedCalibration(p, f"it holds the calibration {cal.key!r}, not {key!r}")
        return cal

    def put(self, cal: Calibration) -> Path:
        bad = cal.problems()
        if bad:                               # never stored, so never read back by the next sweep
            raise SearchCoreError(f"the cost calibration {cal.key} measured unusable costs ({'; '.join(bad[:5])}); "
                                  "nothing was stored: take it again (`autoresearch sweep --recalibrate`)")
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path(cal.key), json.dumps(cal.to_json(), ensure_ascii=False, indent=1, sort_keys=True,
                                                         allow_nan=False))
        return self.path(cal.key)
