"""What a sweep evaluates against: one searcher per embedder (each on its own index, never mixed),
the channel-list cache, the reranker-score cache, the cost calibration per embedder (cost_model), and
the threshold fit for a new embedder."""

from __future__ import annotations

import re
import time
from pathlib import Path

from search_core import SearchCoreError
from search_core.config import ChunkConfig, SearchConfig
from search_core.hashing import hash_json
from search_core.index.indexer import index_vault
from search_core.paths import embed_cache_file
from search_core.gate.request import GateRequest
from search_core.search.pipeline import Searcher
from search_core.search.rerank import RerankScorer
from search_core.index.store import connect, get_meta

from tuner.data.gold import GoldSet
from tuner.evaluation.evaluate import EvalResult, QuestionResult, RetrievalCache, evaluate
from tuner.evaluation.score import ScoreConfig
from tuner.ledger.round import Round
from tuner.evaluation.cost_model import (Calibration, CostStore, DamagedCalibration, calibrate, calibrate_reranker,
                                        calibration_key_for)


class IndexVerificationError(SearchCoreError):
    pass


def verify_index(db: Path, embedder: str) -> None:
    """Before a model round is evaluated: the index was built by `embedder` alone, and every chunk
    meant to have a vector has exactly one, of the right dimension (IndexVerificationError otherwise)."""
    conn = connect(db)
    try:
        fp = get_meta(conn, "fingerprint")
        if fp["embedder"]["name"] != embedder:
            raise IndexVerificationError(f"{db} was built by {fp['embedder']['name']}, not {embedder}")
        n_vec = conn.execute("SELECT count(*) FROM chunk_vec").fetchone()[0]
        n_want = conn.execute("SELECT count(*) FROM chunks WHERE has_vector").fetchone()[0]
        orphans = conn.execute("SELECT count(*) FROM chunk_vec v LEFT JOIN chunks c ON c.id = v.rowid "
                               "WHERE c.id IS NULL OR NOT c.has_vector").fetchone()[0]
        missing = conn.execute("SELECT count(*) FROM chunks c LEFT JOIN chunk_vec v ON v.rowid = c.id "
                               "WHERE c.has_vector AND v.rowid IS NULL").fetchone()[0]
        if n_vec != n_want or orphans or missing:
            raise IndexVerificationError(f"{db}: {n_vec} vectors for {n_want} chunks ({missing} missing, "
                                         f"{orphans} orphaned); rebuild with --full")
        dim = len(conn.execute("SELECT embedding FROM chunk_vec LIMIT 1").fetchone()[0]) // 4 if n_vec else fp["embedder"]["dim"]
        if dim != fp["embedder"]["dim"]:
            raise IndexVerificationError(f"{db}: vectors have {dim} dimensions, the fingerprint says {fp['embedder']['dim']}")
    finally:
        conn.close()


def fit_threshold(per_query: list[QuestionResult], key: str = "top_score", balanced: bool = False) -> float | None:
    """The gate threshold that best separates answerable questions (inject) from probes (hold back),
    on the tuning set: the midpoint of the best gap between sorted scores. `key`: the cosine gate's
    `top_score`, or the gate model's `gate_probability` (rows without it are left out). Rows: an
    evaluation's questions, kept or as searched (the A/B's). balanced: the best balanced accuracy (each
    class weighed by one over its size), else the most rows decided right."""
    pts = sorted((getattr(q, key), q.level == "probe") for q in per_query if getattr(q, key) is not None)
    if not pts or all(p for _, p in pts) or not any(p for _, p in pts):
        return None
    scores = [s for s, _ in pts]
    cands = [scores[0] - 1e-3] + [(a + b) / 2 for a, b in zip(scores, scores[1:]) if b > a] + [scores[-1] + 1e-3]
    n_probes = sum(p for _, p in pts)
    # a row decided right weighs one, or (balanced) the other class's size: integers, so ties stay exact
    weight = {True: len(pts) - n_probes, False: n_probes} if balanced else {True: 1, False: 1}
    best, best_acc = None, -1.0
    for t in cands:
        acc = sum(weight[probe] for s, probe in pts if (s >= t) != probe)
        if acc > best_acc:
            best, best_acc = t, acc
    return round(best, 4)


def fit_gate_cut(per_query: list[QuestionResult], measure: str, key: str = "top_score") -> float | None:
    """The threshold a keep rule's gate measure (keep_rule.GATE_MEASURES) judges best on these rows: "balanced",
    the best balanced cut over the rows a threshold round reads (keep_rule.gate_rows); "accuracy", the cut
    deciding the most rows right."""
    from tuner.sweep.keep_rule import gate_rows
    balanced = measure == "balanced"
    return fit_threshold(gate_rows(per_query) if balanced else per_query, key, balanced=balanced)


def fit_gate_model(per_query: list[QuestionResult], fingerprint: dict, reranker: str = "none", gold_name: str | None = None):
    """The gate model re-fitted on the tuning set's gate features (a model swap changes every score),
    or None when the set cannot support one (too few probes, constant features). `gold_name` is recorded
    as the set it was fitted on, so `calibrate --labels` on that set says its scores are in-sample."""
    from search_core.gate.model import GateFitError
    from tuner.gate.fit import fit_gate
    from search_core.gate.features import GATE_FEATURES
    from tuner.gate.calibrate import CALIBRATION_C
    rows = [q for q in per_query if q.gate_features]
    try:
        return fit_gate([q.gate_features for q in rows], [int(q.level != "probe") for q in rows],
                        fingerprint=fingerprint, features=list(GATE_FEATURES), scope="index",
                        reranker=reranker, C=CALIBRATION_C,
                        fitted_on={"by": "sweep, on the tuning set", "gold_sets": [gold_name] if gold_name else []})
    except GateFitError:
        return None


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")[:60]


def index_path(index_dir: str | Path, embedder: str, chunk_cfg: ChunkConfig) -> Path:
    """The index file of one embedder spec: a readable prefix, then a hash of the exact spec and chunking.
    The slug alone maps `st:/models/bge-m3` and `st:models/bge-m3` (or two long URLs cut at 60
    characters) to one file, and two models would overwrite each other's index."""
    key = hash_json([embedder, chunk_cfg.as_dict()], 16, ascii=True)   # ascii: existing index file names
    return Path(index_dir) / f"{slug(embedder)[:40]}-{key}.sqlite"


class Workbench:
    def __init__(self, base_db: str | Path, *, vault: str | None = None, index_dir: str | Path = "runs/indexes",
                 score_cfg: ScoreConfig = ScoreConfig(), cost_store: CostStore | None = None,
                 calibration_queries: list[str] = (), recalibrate: bool = False, progress=None):
        self.base_db = Path(base_db)
        # one reranker-score cache for every searcher here, each pair charged its model's per-pair cost
        # (measured once per model, cold): a round that re-ranks the last round's windows reads the cache
        # and is charged like a cold one
        self.reranking = RerankScorer.shared()
        base = Searcher(self.base_db, reranking=self.reranking)
        self.searchers: dict[str, Searcher] = {base.embedder_name: base}
        self.base_embedder = base.embedder_name
        self.vault = vault or get_meta(base.conn, "vault")
        self.chunk_cfg = ChunkConfig(**base.fingerprint["chunking"])
        self.index_dir = Path(index_dir)
        self.embed_cache = embed_cache_file()     # the user's: texts any index embedded are not embedded again
        self.retrievals = RetrievalCache()
        # (embedder, reranker) -> the gate model that decides for the pair (None: the cosine gate): the one
        # `search` would choose on that index, else one fitted on the tuning set. Set by fit_gate_for.
        self.gate_models: dict[tuple[str, str], object] = {}
        self.gate_fitted: set = set()      # the pairs whose model was fitted here (no gate file fits them)
        # embedder -> the unit costs its searches are charged with (cost_model); filled from the ledger
        # by a resumed sweep, else from `cost_store`, else by a calibration on `calibration_queries`
        self.costs: dict[str, Calibration] = {}
        self.cost_store = cost_store
        self.calibration_queries = list(calibration_queries)
        self.recalibrate = recalibrate         # a new calibration for each model, replacing the stored one
        self.cost_events: list[str] = []       # what was calibrated or reused, for the morning report
        self.progress = progress or (lambda line: None)
        self.stop = None                       # asked between a model round's embedding batches (the daemon's stop)
        base.warm_up()
        self.score_cfg = score_cfg

    def searcher_for(self, embedder: str) -> tuple[Searcher, float]:
        """The searcher for `embedder`, building its own index from scratch if needed.
        Returns (searcher, seconds spent indexing)."""
        if embedder in self.searchers:
            return self.searchers[embedder], 0.0
        if not self.vault or not Path(self.vault).exists():
            raise SearchCoreError(f"cannot build an index for {embedder}: the vault {self.vault!r} is not here; "
                                  "pass --vault")
        db = index_path(self.index_dir, embedder, self.chunk_cfg)
        t0 = time.perf_counter()
        try:
            index_vault(self.vault, db, embedder=embedder, chunk_cfg=self.chunk_cfg, cache=self.embed_cache,
                        stop=self.stop)
        except SearchCoreError as e:
            if "vectors from two models never share an index" not in str(e):
                raise
            # same name, other weights (a model updated in place): rebuild from scratch, never mix
            index_vault(self.vault, db, embedder=embedder, chunk_cfg=self.chunk_cfg, cache=self.embed_cache, full=True,
                        stop=self.stop)
        seconds = time.perf_counter() - t0
        verify_index(db, embedder)
        s = Searcher(db, reranking=self.reranking)
        s.warm_up()
        self.searchers[embedder] = s
        return s, seconds

    def use_recorded_costs(self, rows: list[Round]) -> None:
        """Charge with the calibrations these ledger rows were charged with (a resumed sweep, a re-test),
        instead of the store's or a new one."""
        for r in rows:
            charge = r.result.latency_charge if r.result is not None else None
            recorded = charge.calibration if charge is not None else None
            if recorded is not None:
                try:
                    cal = Calibration.from_json(recorded)
                except SearchCoreError as e:
                    raise SearchCoreError(f"round {r.round} of this sweep records a cost calibration that "
                                          f"cannot be used ({e}); its decisions cannot be charged alike. Check the "
                                          "ledger (`autoresearch ledger --verify`), or start a new sweep") from None
                self.costs[cal.embedder] = cal

    def _event(self, line: str) -> None:
        self.cost_events.append(line)
        self.progress(line)

    def cost_for(self, cfg: SearchConfig) -> Calibration:
        """The calibration cfg's searches are charged with: its embedder's unit costs on this machine and,
        with a reranker, that reranker's per-pair cost. Taken once per model (or reused from the store)."""
        s, _ = self.searcher_for(cfg.embedder)
        cal = self.costs.get(cfg.embedder)
        if cal is None:
            key = calibration_key_for(s)
            try:
                stored = None if self.recalibrate or self.cost_store is None else self.cost_store.get(key)
            except DamagedCalibration as e:   # retaken below; the new one replaces the file
                stored = None
                self._event(f"cost model: warning: {e}; taking a new calibration of {cfg.embedder} to replace it")
            if stored is not None:
                cal = stored
                self._event(f"cost model: {cfg.embedder} charged with the stored calibration {key} "
                            f"(taken {cal.taken_at}; --recalibrate takes a new one)")
            else:
                if not self.calibration_queries:
                    raise SearchCoreError("no questions to calibrate the cost model on (the tuning set is empty)")
                cal = calibrate(s, self.calibration_queries, progress=self.progress, stop=self.stop)
                self._event(f"cost model: calibrated {cfg.embedder} on this machine in {cal.seconds:.1f} s "
                            f"({cal.questions} questions x {cal.passes} passes), key {cal.key}"
                            + (" (--recalibrate)" if self.recalibrate else ""))
                if self.cost_store is not None:
                    self.cost_store.put(cal)
            self.costs[cfg.embedder] = cal
        if cfg.reranker != "none" and cfg.reranker not in cal.rerank_per_pair:
            ms = calibrate_reranker(s, self.calibration_queries, cfg.reranker,
                                    window=max(cfg.rerank_depth, cfg.top_k))
            cal = self.costs[cfg.embedder] = cal.with_reranker(cfg.reranker, ms)
            self._event(f"cost model: reranker {cfg.reranker} timed at {ms:.3f} ms per pair")
            if self.cost_store is not None:
                self.cost_store.put(cal)
        return cal

    def fit_gate_for(self, cfg: SearchConfig, gold: GoldSet):
        """The gate for cfg's embedder and reranker: the one `search` would use on that index (choose_gate:
        its .gate.json, else the shipped default), else a model fitted on `gold` (the tuning set), which a
        promotion installs with the index. Returns the model, or None (the cosine gate decides). The cosine
        threshold is fitted where a round needs it (rounds.run_round, under the keep rule's gate measure)."""
        s, _ = self.searcher_for(cfg.embedder)
        pair = (cfg.embedder, cfg.reranker)
        self.gate_models.pop(pair, None)
        self.gate_fitted.discard(pair)
        model = GateRequest().choose(s.fingerprint, cfg.reranker, s.db).model
        if model is None:        # no gate file fits this index: fit one on the tuning set's gate features
            # the whole tuning set searched once (a minute at load 20 on 295 questions): the daemon's stop is asked
            # before each question; the retrievals are cached for the rounds that follow
            per_query = self.evaluate(cfg, gold, stop=self.stop).per_query
            model = fit_gate_model(per_query, s.fingerprint, cfg.reranker, gold.name)
            if model is not None:
                self.gate_fitted.add(pair)
        self.gate_models[pair] = model
        return model

    def evaluate(self, cfg: SearchConfig, gold: GoldSet, *, timing_samples: int = 0, stop=None) -> EvalResult:
        """Latency (and the speed points) predicted by the cost model from each question's counted work
        (cost_for); the stopwatch's figures ride along as measured_*. timing_samples: repeat timed
        passes until the measured p95 stands on at least this many timings (it never decides)."""
        s, _ = self.searcher_for(cfg.embedder)
        if not self.calibration_queries:     # a bench made without a tuning set: the first set it evaluates
            self.calibration_queries = [q.query for q in gold.questions]
        cost = self.cost_for(cfg)
        pair = (cfg.embedder, cfg.reranker)
        gate = GateRequest(fitted=self.gate_models.get(pair) if pair in self.gate_fitted else None,
                           fitted_source="fitted by the sweep on the tuning set")
        return evaluate(s, gold, cfg, cache=self.retrievals, score_cfg=self.score_cfg, audit=False,
                        min_timing_samples=timing_samples, cost=cost, gate=gate, stop=stop)
