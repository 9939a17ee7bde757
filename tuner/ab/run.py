"""Embedder / reranker A/B, the run: every candidate on the same questions, each embedder on an index built
only for it (embedding cache reused by content hash), the gate `search` would use on it (else one fitted on
the tuning questions), timed after a warm-up; the finished candidates are then compared pairwise by
tuner.ab.compare.

A candidate that cannot load, cannot build (disk full) or does not hold the gold ids is recorded with
the reason and the A/B goes on; Ctrl-C stops it and keeps every finished candidate.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from search_core import SearchCoreError
from search_core.files import atomic_write_text, is_disk_full
from search_core.config import ChunkConfig, SearchConfig
from search_core.hashing import hash_json, hash_text, stat_stamp
from search_core.index.indexer import index_vault
from search_core.paths import embed_cache_file
from search_core.models import ModelUnavailable
from search_core.models import check_model_name  # name check without loading
from search_core.gate.request import GateRequest
from search_core.search.pipeline import Searcher
from search_core.index.store import connect, get_meta

from tuner.ab.compare import PairComparison, compare_pair
from tuner.ab.records import ABError, ABParams, ABSetup, Candidate, CandidateLatency, CandidateResult, IndexBuild
from tuner.evaluation.evaluate import EvalResult, EvaluatedIndex, Percentiles, QuestionGate, build_result, run_queries
from tuner.data.gold import GoldSet
from tuner.sweep.workbench import fit_threshold, verify_index
from tuner.sweep.workbench import index_path as workbench_index_path

WARMUP_QUERIES = 5    # the first queries pay for lazy loads (BLAS threads, page cache); never timed


def canonical(name: str) -> str:
    """Two spellings of one model map to the same key: case, the st:/ce: prefix, a trailing slash."""
    n = name.strip().rstrip("/")
    for p in ("st:", "ce:"):
        if n.startswith(p):
            n = n[len(p):]
    return n.lower()


def parse_candidates(embedders: str, rerankers: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Check the names before any work: at least two candidates, known names, no model twice."""
    embs = tuple(e.strip() for e in embedders.split(",") if e.strip())
    rers = tuple(r.strip() for r in (rerankers or "none").split(",") if r.strip()) or ("none",)
    if not embs:
        raise ABError("--embedders is empty; give one or more names, e.g. --embedders e5-small,minilm-l6")
    for e in embs:
        check_model_name("embedder", e)   # unknown -> SearchCoreError listing the known names and forms
    for r in rers:
        check_model_name("reranker", r)
    for kind, names in (("embedder", embs), ("reranker", rers)):
        seen: dict[str, str] = {}
        for n in names:
            k = canonical(n)
            if k in seen:
                raise ABError(f"{seen[k]!r} and {n!r} are two spellings of the same {kind}; list it once")
            seen[k] = n
    if len(embs) > 1 and len(rers) > 1:
        raise ABError(f"compare rerankers on one embedder's index: got {len(embs)} embedders and {len(rers)} "
                      "rerankers; run one A/B for the embedders, then one with --embedders BEST --rerankers ...")
    if len(embs) * len(rers) < 2:
        from search_core.models import EMBEDDERS
        raise ABError(f"an A/B needs two candidates, got only {embs[0]!r}"
                      + (f" with reranker {rers[0]!r}" if rers != ("none",) else "")
                      + f"; add another, e.g. --embedders {embs[0]},{next(k for k in EMBEDDERS if k != embs[0])} "
                        f"(known embedders: {', '.join(EMBEDDERS)}) or --rerankers none,RERANKER")
    return embs, rers


def index_path(work: str | Path, vault: str, embedder: str, chunk_cfg: ChunkConfig) -> Path:
    """The tuner's naming (a readable prefix and a hash of the exact spec and chunking: a slug alone lets
    two model specs share, and overwrite, one index file), plus which vault it indexes."""
    vault_key = hash_text(str(Path(vault).resolve()), 8)
    own = workbench_index_path(Path(work) / "indexes", embedder, chunk_cfg)
    return own.with_name(f"{own.stem}-{vault_key}.sqlite")


def _rss_mb() -> dict:
    """Resident memory of this process now and at its peak (VmHWM), in MB; Linux /proc only."""
    out = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return {"rss": out.get("VmRSS"), "peak": out.get("VmHWM")}


def _timed_rows(searcher, gold: GoldSet, cfg: SearchConfig, progress, desc: str) -> list:
    """Every question searched for real (no retrieval cache: latency is measured), after a warm-up."""
    for q in gold.questions[:WARMUP_QUERIES]:
        searcher.rank(searcher.retrieve(q.query, cfg.depth, keyword_index=cfg.keyword_index, pair_terms=cfg.pair_terms),
                      cfg, snippets=False)
    qs = progress.iter(gold.questions, desc) if progress else gold.questions
    return run_queries(searcher, SimpleNamespace(questions=qs), cfg)


def _regate(rows, choice, cfg: SearchConfig, cos_threshold: float) -> list:
    """The rows decided again by `choice` (the gate reads only the row's features and top cosine: no search)."""
    out = []
    for r in rows:
        d = choice.decide(r.gate_features, r.top_score, cos_threshold, bool(r.ranked), cfg.reranker,
                          p_threshold=cfg.gate_threshold)
        out.append(dataclasses.replace(r, inject=d.inject, gate_probability=d.probability,
                                       gate=QuestionGate.decided(d)))
    return out


def candidate_gate(searcher, cfg: SearchConfig, tune_rows, tune_name: str):
    """(the gate, its threshold, fitted here?) for one candidate: the gate `search` would use on its index
    (choose_gate: its .gate.json, else the shipped default), else a model fitted on the tuning questions'
    gate features, else the cosine gate at the threshold that best separates them (the embedder's default
    when they cannot: no probes). Each model has its own score scale, so no candidate is judged by another's cut."""
    from tuner.sweep.workbench import fit_gate_model
    choice = GateRequest().choose(searcher.fingerprint, cfg.reranker, searcher.db)
    if choice.model is None:
        model = fit_gate_model(tune_rows, searcher.fingerprint, cfg.reranker, tune_name)
        if model is not None:
            choice = GateRequest(fitted=model, fitted_source="fitted by the A/B on the tuning questions").choose(
                searcher.fingerprint, cfg.reranker, searcher.db)
            return choice, None, True
        fitted = fit_threshold(tune_rows)
        return choice, fitted if fitted is not None else searcher.embedder.default_threshold, fitted is not None
    return choice, None, False


def _latency(rows) -> CandidateLatency:
    stages = {}
    for stage in ("embed", "rerank", "total"):
        v = [r.timings_ms[stage] for r in rows if stage in r.timings_ms]
        if v:
            stages[stage] = Percentiles.of(v, counted=False)
    return CandidateLatency(len(rows), WARMUP_QUERIES, stages)


def build_candidate_index(p: ABParams, embedder: str, chunk_cfg: ChunkConfig, progress=None) -> tuple[Path, IndexBuild]:
    """The embedder's own index, from scratch the first time (a full build into a temp file swapped in
    when complete), afterwards brought up to date in place. Returns (db, build facts)."""
    db = index_path(p.work, p.vault, embedder, chunk_cfg)
    cache = embed_cache_file()         # the user's: a model's vectors any index computed are reused
    existed = db.exists()
    stamp = vault_stamp(p.vault)          # taken before the update: a note saved meanwhile forces the next one
    cb = progress.index_callback(f"build {embedder}") if progress else None
    try:
        rep = index_vault(p.vault, db, embedder=embedder, chunk_cfg=chunk_cfg, cache=cache, progress=cb)
    finally:
        if progress:
            progress.close()
    verify_index(db, embedder)
    conn = connect(db, readonly=True)    # SQLite's own library: a second one's close would drop our locks
    try:
        n_vec = conn.execute("SELECT count(*) FROM chunks WHERE has_vector").fetchone()[0]
        n_chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    finally:
        conn.close()
    side = db.with_name(db.name + ".build.json")
    facts = IndexBuild(str(db), existed, rep.seconds, rep.embedded, n_vec, n_chunks, rep.notes,
                       round(sum(f.stat().st_size for f in (db, Path(str(db) + "-wal")) if f.exists()) / 2**20, 2))
    first = {"seconds": rep.seconds, "embedded": rep.embedded}
    if existed and side.exists():
        first = json.loads(side.read_text())
        facts = dataclasses.replace(facts, first_build_seconds=first["seconds"], first_build_embedded=first["embedded"])
    side.write_text(json.dumps({"seconds": first["seconds"], "embedded": first["embedded"], "vectors": n_vec,
                                "chunks": n_chunks, "notes": rep.notes, "vault_stamp": stamp}))
    return db, facts


def run_candidate(p: ABParams, cand: Candidate, label: str, chunk_cfg: ChunkConfig, searchers: dict,
                  progress=None) -> CandidateResult:
    t0 = time.perf_counter()
    mem0 = _rss_mb()
    res = CandidateResult(cand, label, "ok")
    try:
        if cand.embedder not in searchers and not p.fresh and _reuse_without_loading(p, cand, chunk_cfg, res):
            return res
        if cand.embedder not in searchers:
            try:
                db, res.build = build_candidate_index(p, cand.embedder, chunk_cfg, progress)
            except Exception as e:      # OSError, or sqlean's own OperationalError ("disk I/O error")
                if not is_disk_full(e):
                    raise
                db = index_path(p.work, p.vault, cand.embedder, chunk_cfg)
                left = sorted(x.name for x in db.parent.glob(db.name + ".building-*"))
                res.status, res.message = "failed", (
                    f"the disk filled (or refused a write) while building {db} ({e}); the partial build was removed"
                    + (f" (left: {left})" if left else "") + " and no index was put in place. Free space, or pass "
                    "--work DIR on a larger disk, then run the A/B again (finished candidates are reused)")
                return res
            # the default RerankScorer: rerank time is paid per question, never served from memory
            searchers[cand.embedder] = (Searcher(db), res.build)
        else:
            res.build = dataclasses.replace(searchers[cand.embedder][1], shared_with_previous_candidate=True)
        searcher = searchers[cand.embedder][0]
        missing = p.eval.check_against(searcher.view.notes.keys(), allow_missing=True) + \
            (p.tune.check_against(searcher.view.notes.keys(), allow_missing=True) if p.tune is not p.eval else [])
        if missing:
            res.status, res.message = "failed", f"gold ids missing from this candidate's index ({searcher.db}): " \
                + missing[0].split(" (ignored")[0]
            return res
        cfg = p.config.replace(embedder=cand.embedder, reranker=cand.reranker, threshold=None)
        saved = _saved_path(p, searcher.db, cfg)
        if saved.exists() and not p.fresh:
            prev = json.loads(saved.read_text(encoding="utf-8"))
            res.latency, res.threshold, res.threshold_fitted = (CandidateLatency.from_json(prev["latency"]), prev["threshold"],
                                                                prev["threshold_fitted"])
            res.result, res.reused_from = EvalResult.from_json(prev["result"]), prev["saved_at"]
            return res
        tune_rows = _timed_rows(searcher, p.tune, cfg, progress, f"tune {label}")
        choice, cos_t, res.threshold_fitted = candidate_gate(searcher, cfg, tune_rows, p.tune.name)
        if p.eval is p.tune:
            eval_rows = tune_rows
        else:
            eval_rows = _timed_rows(searcher, p.eval, cfg, progress, f"eval {label}")
        if cos_t is not None:
            cfg = cfg.replace(threshold=cos_t)
        eval_rows = _regate(eval_rows, choice, cfg, cos_t if cos_t is not None else searcher.embedder.default_threshold)
        res.threshold = eval_rows[0].gate.threshold if eval_rows else cos_t
        res.latency = _latency(eval_rows)
        res.result = build_result(p.eval, cfg, EvaluatedIndex.of(searcher), eval_rows)
        _save(saved, res)
    except ModelUnavailable as e:
        res.status, res.message = "unavailable", str(e)
    except SearchCoreError as e:
        res.status, res.message = "failed", str(e)
    except KeyboardInterrupt:
        res.status, res.message = "cut", "interrupted (Ctrl-C) before this candidate finished"
        raise _Cut(res) from None
    finally:
        res.seconds = round(time.perf_counter() - t0, 2)
        mem1 = _rss_mb()
        res.memory_mb = {"rss_before": mem0["rss"], "rss_after": mem1["rss"], "process_peak": mem1["peak"],
                         "growth": round((mem1["rss"] or 0) - (mem0["rss"] or 0), 1)}
    return res


def _index_meta(db: Path) -> tuple[dict, str]:
    conn = connect(db)
    try:
        return get_meta(conn, "fingerprint"), get_meta(conn, "indexed_at")
    finally:
        conn.close()


def vault_stamp(vault: str | Path) -> str:
    """Path, size and mtime of every file of the vault (or of the corpus file): changes when a note does."""
    return stat_stamp(vault)


def _saved_path(p: ABParams, db: Path, cfg: SearchConfig) -> Path:
    """Where the evaluation of this exact index content (fingerprint + when it was last written), config
    and question sets is kept: an A/B that finds its candidates measured (say, to add a candidate C) reuses them."""
    fp, indexed_at = _index_meta(db)
    qs = [[q.id, q.level, q.query, list(q.gold)] for g in (p.tune, p.eval) for q in g.questions]
    from search_core.gate.model import choose_gate
    gate = choose_gate(fp, cfg.reranker, db=db)        # another gate file decides otherwise: measure again
    gate_key = [gate.source, gate.model.as_json() if gate.model is not None else None]
    key = hash_json([fp, indexed_at, cfg.as_dict(), qs, WARMUP_QUERIES, gate_key])
    return Path(p.work) / "results" / f"{key}.json"


def _reuse_without_loading(p: ABParams, cand: Candidate, chunk_cfg: ChunkConfig, res: CandidateResult) -> bool:
    """Warm A/B: the index exists, the vault has not changed since it was last brought up to date, and
    this candidate was measured on it with this config and these questions: reuse all of it without
    loading the model (its weights hash is in the index's fingerprint; --fresh re-checks everything)."""
    db = index_path(p.work, p.vault, cand.embedder, chunk_cfg)
    side = db.with_name(db.name + ".build.json")
    if not db.exists() or not side.exists():
        return False
    facts = json.loads(side.read_text(encoding="utf-8"))
    if facts.get("vault_stamp") != vault_stamp(p.vault):
        return False
    saved = _saved_path(p, db, p.config.replace(embedder=cand.embedder, reranker=cand.reranker, threshold=None))
    if not saved.exists():
        return False
    prev = json.loads(saved.read_text(encoding="utf-8"))
    res.build = IndexBuild(str(db), True, 0.0, 0, facts.get("vectors"), facts.get("chunks"), facts.get("notes"),
                           round(db.stat().st_size / 2**20, 2), model_loaded=False,
                           first_build_seconds=facts["seconds"], first_build_embedded=facts["embedded"])
    res.latency, res.threshold, res.threshold_fitted = (CandidateLatency.from_json(prev["latency"]), prev["threshold"],
                                                                prev["threshold_fitted"])
    res.result, res.reused_from = EvalResult.from_json(prev["result"]), prev["saved_at"]
    return True


def _save(path: Path, res: CandidateResult) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"latency": res.latency.to_json() if res.latency else {}, "threshold": res.threshold,
                                            "threshold_fitted": res.threshold_fitted, "result": res.result.to_json(),
                                            "saved_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
                                           ensure_ascii=False))
    except OSError:
        pass                       # a cache: the A/B's own result is already in memory


class _Cut(Exception):
    def __init__(self, res):
        self.res = res


def same_model(a: Searcher, b: Searcher) -> bool:
    fa = {k: v for k, v in a.fingerprint["embedder"].items() if k != "name"}
    fb = {k: v for k, v in b.fingerprint["embedder"].items() if k != "name"}
    return fa == fb


@dataclass(frozen=True)
class ABRun:
    """An A/B as it ran: what it compared (`params`, as the report shows it), each candidate, each pair
    against the first candidate measured; `to_json` is the report's data (and `ab --format json`'s)."""
    params: ABSetup
    candidates: tuple[CandidateResult, ...]
    pairs: tuple[PairComparison, ...]
    interrupted: bool                   # cut short by a signal: the candidates after it are "cut"
    seconds: float

    @property
    def cut(self) -> list[str]:
        return [r.label for r in self.candidates if r.status == "cut"]

    def to_json(self) -> dict:
        return {"params": self.params.to_json(), "candidates": [r.to_json() for r in self.candidates],
                "pairs": [p.to_json() for p in self.pairs], "interrupted": self.interrupted, "cut": self.cut,
                "seconds": self.seconds}


def nothing_compared(run: ABRun) -> str | None:
    """Why an A/B compared nothing (fewer than two candidates measured), or None when it compared a pair:
    the CLI exits 1 then, so a script does not take an empty report for a result. The report's verdict and
    its fix, from the one table (tuner.ab.verdicts)."""
    from tuner.ab.verdicts import NOTHING_COMPARED, ab_verdict
    v = ab_verdict(run.to_json())
    return f"{v.message()}: {v.fix()}" if v.kind == NOTHING_COMPARED else None


def not_runnable_here(p) -> dict[str, str]:
    """{embedder or reranker name: why it cannot run on this machine} among the A/B's candidates, found
    before any model loads (a package not installed, hub weights not cached)."""
    from search_core.models import unavailable_here
    out = {}
    for kind, names in (("embedder", p.embedders), ("reranker", p.rerankers)):
        for n in names:
            why = unavailable_here(kind, n)
            if why is not None:
                out[n] = why
    return out


def run_ab(p: ABParams, progress=None) -> ABRun:
    """All candidates, then the pairwise comparisons."""
    t0 = time.perf_counter()
    if p.base_db:
        s = Searcher(p.base_db)
        chunk_cfg = ChunkConfig(**s.fingerprint["chunking"])
        s.close()
    else:
        chunk_cfg = ChunkConfig()
    cands = [Candidate(e, r) for e in p.embedders for r in p.rerankers]
    labels = {c: c.label(len(p.rerankers) > 1) for c in cands}
    results: list[CandidateResult] = []
    searchers: dict = {}
    interrupted = False
    gone = not_runnable_here(p)
    for i, c in enumerate(cands):
        why = gone.get(c.embedder) or gone.get(c.reranker)
        if why is not None:                  # said up front; nothing is built for it
            results.append(CandidateResult(c, labels[c], "unavailable", why))
            continue
        try:
            r = run_candidate(p, c, labels[c], chunk_cfg, searchers, progress)
        except _Cut as cut:
            results.append(cut.res)
            results += [CandidateResult(x, labels[x], "cut", "not started: the A/B was interrupted") for x in cands[i + 1:]]
            interrupted = True
            break
        if r.status == "ok" and c.reranker == "none" and c.embedder in searchers:
            twin = next((o for o in results if o.status == "ok" and o.candidate.reranker == "none"
                         and o.candidate.embedder in searchers
                         and same_model(searchers[o.candidate.embedder][0], searchers[c.embedder][0])), None)
            if twin is not None:
                r.status, r.message = "duplicate", (f"{c.embedder!r} is the same model as {twin.label!r} "
                                                    "(same weights and prefixes): two spellings of one model")
                r.result = None
        results.append(r)
    ok = [r for r in results if r.status == "ok"]
    pairs = [compare_pair(ok[0], o) for o in ok[1:]] if len(ok) > 1 else []
    return ABRun(ABSetup.of(p, chunk_cfg), tuple(results), tuple(pairs), interrupted, round(time.perf_counter() - t0, 2))
