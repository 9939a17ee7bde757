"""What a sweep evaluates against: one searcher per embedder (each on its own index, never mixed),
the channel-list cache, the reranker-score cache, and the threshold fit for a new embedder."""

from __future__ import annotations

import re
import time
from pathlib import Path

from search_core import SearchCoreError
from search_core.config import ChunkConfig, SearchConfig
from search_core.gate.model import COSINE, GateChoice
from search_core.hashing import hash_json
from search_core.index.indexer import default_cache_path, index_vault
from search_core.search.pipeline import Searcher
from search_core.index.store import connect, get_meta

from tuner.evaluation.evaluate import RetrievalCache, evaluate
from tuner.data.gold import GoldSet
from tuner.evaluation.score import ScoreConfig, score100


class IndexVerificationError(SearchCoreError):
    pass


def verify_index(db: Path, embedder: str) -> dict:
    """Before a model round is evaluated: the index was built by `embedder` alone, and every chunk
    meant to have a vector has exactly one, of the right dimension."""
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
        return fp
    finally:
        conn.close()


def fit_threshold(per_query: list[dict], key: str = "top_score") -> float | None:
    """The gate threshold that best separates answerable questions (inject) from probes (hold back),
    on the tuning set: the midpoint of the best gap between sorted scores. `key`: the cosine gate's
    `top_score`, or the gate model's `gate_probability` (rows without it are left out)."""
    pts = sorted((q[key], q["level"] == "probe") for q in per_query if q.get(key) is not None)
    if not pts or all(p for _, p in pts) or not any(p for _, p in pts):
        return None
    scores = [s for s, _ in pts]
    cands = [scores[0] - 1e-3] + [(a + b) / 2 for a, b in zip(scores, scores[1:]) if b > a] + [scores[-1] + 1e-3]
    best, best_acc = None, -1.0
    for t in cands:
        acc = sum((s >= t) != probe for s, probe in pts)
        if acc > best_acc:
            best, best_acc = t, acc
    return round(best, 4)


def fit_gate_model(per_query: list[dict], fingerprint: dict, reranker: str = "none", gold_name: str | None = None):
    """The gate model re-fitted on the tuning set's gate features (a model swap changes every score),
    or None when the set cannot support one (too few probes, constant features). `gold_name` is recorded
    as the set it was fitted on, so `calibrate --labels` on that set says its scores are in-sample."""
    from search_core.gate.model import GateFitError, fit_gate
    from tuner.gate.calibrate import CALIBRATION_C, CALIBRATION_FEATURES
    rows = [q for q in per_query if q.get("gate_features")]
    try:
        return fit_gate([q["gate_features"] for q in rows], [int(q["level"] != "probe") for q in rows],
                        fingerprint=fingerprint, features=list(CALIBRATION_FEATURES), scope="index",
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
                 score_cfg: ScoreConfig = ScoreConfig()):
        self.base_db = Path(base_db)
        base = Searcher(self.base_db)
        self.searchers: dict[str, Searcher] = {base.embedder_name: base}
        self.base_embedder = base.embedder_name
        self.vault = vault or get_meta(base.conn, "vault")
        self.chunk_cfg = ChunkConfig(**base.fingerprint["chunking"])
        self.index_dir = Path(index_dir)
        self.embed_cache = default_cache_path(self.base_db)
        self.retrievals = RetrievalCache()
        self.rerank_cache: dict = {}
        self.rerank_cost: dict = {}      # reranker -> ms per pair, measured once per model (cold)
        # (embedder, reranker) -> the gate model fitted on the tuning set (None: the cosine gate decides).
        # Set by the sweep (fit_gate_for); evaluate() gates with it, never with a file's model.
        self.gate_models: dict[tuple[str, str], object] = {}
        self._arm(base)
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
            index_vault(self.vault, db, embedder=embedder, chunk_cfg=self.chunk_cfg, cache=self.embed_cache)
        except SearchCoreError as e:
            if "vectors from two models never share an index" not in str(e):
                raise
            # same name, other weights (a model updated in place): rebuild from scratch, never mix
            index_vault(self.vault, db, embedder=embedder, chunk_cfg=self.chunk_cfg, cache=self.embed_cache, full=True)
        seconds = time.perf_counter() - t0
        verify_index(db, embedder)
        s = Searcher(db)
        self._arm(s)
        self.searchers[embedder] = s
        return s, seconds

    def _arm(self, s: Searcher) -> None:
        """Share the rerank caches, and warm the searcher up: the first query of a process loads the model
        and the view (5,069 ms on the 974-note wiki), which must not become a round's p95."""
        s.rerank_cache = self.rerank_cache
        s.rerank_cost = self.rerank_cost
        s.warm_up()

    def rerank_charge(self, cfg: SearchConfig) -> dict:
        """How the reranker's latency was charged in an evaluation of `cfg` (for the ledger)."""
        if cfg.reranker == "none":
            return {"rerank": "none"}
        cost = self.rerank_cost.get(cfg.reranker)
        return {"rerank": cfg.reranker, "rerank_ms_per_pair": round(cost, 4) if cost is not None else None,
                "rerank_window": max(cfg.rerank_depth, cfg.top_k)}

    def fit_gate_for(self, cfg: SearchConfig, gold: GoldSet) -> tuple[float | None, object]:
        """Re-fit the gate on `gold` (the tuning set) for cfg's embedder and reranker: (the cosine
        threshold, the gate model or None). The run that reads the features gates by cosine."""
        s, _ = self.searcher_for(cfg.embedder)
        self.gate_models.pop((cfg.embedder, cfg.reranker), None)
        per_query = self.evaluate(cfg, gold)["per_query"]
        model = fit_gate_model(per_query, s.fingerprint, cfg.reranker, gold.name)
        self.gate_models[(cfg.embedder, cfg.reranker)] = model
        return fit_threshold(per_query), model

    def evaluate(self, cfg: SearchConfig, gold: GoldSet, *, fixed_p95: float | None = None,
                 timing_samples: int = 0) -> dict:
        """timing_samples: repeat timed passes until the p95 stands on at least this many timings
        (evaluate.TIMING_SAMPLES); pointless with fixed_p95, which replaces the measured p95."""
        s, _ = self.searcher_for(cfg.embedder)
        if s.rerank_cost is not self.rerank_cost:
            self._arm(s)
        model = self.gate_models.get((cfg.embedder, cfg.reranker))
        s.gate_choice = GateChoice(model, "fitted by the sweep on the tuning set") if model is not None else COSINE
        res = evaluate(s, gold, cfg, cache=self.retrievals, score_cfg=self.score_cfg, audit=False,
                       min_timing_samples=0 if fixed_p95 is not None else timing_samples).as_json()
        if fixed_p95 is not None:
            # in-memory variables cannot change search cost; re-using the baseline's p95 keeps
            # decisions deterministic instead of riding on millisecond jitter
            res = self.with_p95(res, fixed_p95)
        return res

    def with_p95(self, res: dict, p95: float) -> dict:
        """`res` scored as if its p95 were `p95` (the measured one is kept as measured_p95)."""
        measured = res["latency_ms"].get("measured_p95", res["latency_ms"].get("p95"))
        return {**res, "latency_ms": {**res["latency_ms"], "p95": p95, "measured_p95": measured},
                "score100": score100(res["overall"], p95, self.score_cfg)}
