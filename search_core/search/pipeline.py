"""query -> 4 channels -> weighted RRF -> best chunk per note -> reranker -> top-k + threshold gate.

retrieve() runs the channels (the expensive part, cacheable per query); rank() fuses, reranks and
gates in memory, so the tuner can re-fuse cached channel lists under new weights without searching.
"""

from __future__ import annotations

import fnmatch
import re
import time
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from pathlib import Path

import numpy as np

from search_core import SearchCoreError
from search_core.ingest.term_pairs import expand_query
from search_core.search import channels as ch
from search_core.search import ranking, scripts
from search_core.config import CHANNELS, NGRAM_LIST, SearchConfig
from search_core.search.fusion import weighted_rrf
from search_core.gate.features import features_read, gate_features
from search_core.gate.model import GateChoice, GateDecision
from search_core.gate.request import GateRequest
from search_core.index.handle import IndexChangedError, IndexHandle  # noqa: F401  (IndexChangedError: callers import it here)
from search_core.search.limits import cap_query
from search_core.search.markup import clean_markup
from search_core.search.query_cache import QUERY_CACHE, QueryEmbeddingCache, SharedEmbedding
from search_core.search.rerank import RerankScorer

SNIPPET_CHARS = 220
SNIPPET_LEAD = 40          # characters shown before the first query word a snippet holds
_RETRIEVE_STAGES = ("embed", "fast_check", *CHANNELS)     # inside retrieve()'s own wall time ("retrieve")
# The fast path's gate decision: the keyword evidence decided, so the gate model did not (its features read
# the query's vector, which the fast path never computes); `search --json` names it by this kind.
FAST_PATH_GATE = "keyword"


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
    path: str | None = None   # inside the vault (`ai/rag.md`); None for a note read from no file
    abs_path: str | None = None   # on this machine, when the index knows its vault folder


@dataclass(frozen=True)
class Gate:
    """One search's gate: the decision (which gate, its cut, inject or not) and what it read."""
    decision: GateDecision
    top_score: float
    threshold: float                   # the cosine gate's threshold (the confidence label reads it too)
    features: dict = field(default_factory=dict)

    # the decision's parts, under the names every caller reads
    inject = property(lambda self: self.decision.inject)
    probability = property(lambda self: self.decision.probability)   # None when the cosine gate decided
    band = property(lambda self: self.decision.band)
    kind = property(lambda self: self.decision.kind)
    reason = property(lambda self: self.decision.reason)
    source = property(lambda self: self.decision.source)


@dataclass(frozen=True)
class Retrieval:
    query: str
    qvec: np.ndarray | None   # None: the fast path answered without embedding the query
    lists: dict               # channel -> list[ChannelHit], and NGRAM_LIST: the n-gram BM25 list the sparse channel ran
    timings_ms: dict
    subqueries: tuple = ()
    evidence: ch.KeywordEvidence | None = None   # the fast path's check, when the config asks for it
    read_as: str = ""         # the text the channels read when it is not `query` (the vault's paired terms added)

    @property
    def channel_text(self) -> str:
        return self.read_as or self.query

    @property
    def fast(self) -> bool:
        """Answered by the fast path: the keyword lists decided, nothing was embedded."""
        return self.qvec is None


@dataclass(frozen=True)
class SearchResult:
    query: str
    hits: tuple
    gate: Gate
    confidence: str
    timings_ms: dict
    fused: tuple = ()         # the fused list (for --explain), at least K_LIST deep; whole when a page is named
    retrieval: Retrieval | None = None
    ranked: tuple = ()        # the final ordered note ids (search_core.search.ranking), as deep as was asked
    held_out: tuple = ()      # (note id, why) of index pages the channels returned and the ranking left out
    named: tuple = ()         # index pages the query asks for by name: kept, and first

    def as_dict(self, explain: bool = True) -> dict:
        """What `search --json` prints. explain=False (the servers' default) leaves out the gate's features
        (a number per gate feature, ~2 KB per answer) and the timings: an agent reads the decision and its reason."""
        gate = {"inject": self.gate.inject, "top_score": round(self.gate.top_score, 4),
                "threshold": self.gate.threshold, "band": self.gate.band, "kind": self.gate.kind,
                "probability": None if self.gate.probability is None else round(self.gate.probability, 4),
                "reason": self.gate.reason, "decided_by": self.gate.decision.to_json()}
        out = {
            "query": self.query,
            "results": [{"note_id": h.note_id, "title": h.title, "path": h.path, "abs_path": h.abs_path,
                         "score": round(h.score, 6), "snippet": h.snippet, "channels": h.channels,
                         "cosine": round(h.cosine, 4)} for h in self.hits],
            "gate": gate,
            "confidence": self.confidence,
        }
        if explain:
            gate["features"] = {k: round(v, 4) for k, v in self.gate.features.items()}
            out["timings_ms"] = {k: round(v, 2) for k, v in self.timings_ms.items()}
        return out


# a hit's path on this machine: the same few strings over and over, and two pathlib parses each were ~4 % of a
# fast-path answer's profile on the demo. Bounded: a server sees every note of its vault in time.
@lru_cache(maxsize=1 << 16)
def _abs_path(vault: str, rel: str) -> str:
    return str(Path(vault) / rel)


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


def snippet_start(low: str, words: list[str]) -> int:
    """Where a snippet of `low` (a chunk's words, lower-cased) starts: SNIPPET_LEAD characters before the first
    place any of `words` begins at, else 0."""
    first = -1
    for word in words:
        # only a place before the first found can move it, so a later word is looked for up to there, and any
        # place up to SNIPPET_LEAD starts the snippet at 0: a Korean question's ~10 words each read a whole
        # 765-character chunk they were not in (~14 us a hit on AutoRAG-ko)
        at = low.find(word) if first < 0 else low.find(word, 0, first + len(word) - 1)
        if at >= 0:
            first = at
            if first <= SNIPPET_LEAD:
                break
    return max(first - SNIPPET_LEAD, 0)


def check_query(query: str) -> str:
    if query is None or not query.strip():
        raise SearchCoreError("the query is empty; type what you are looking for, e.g. "
                              "autoresearch search \"GraphRAG 커뮤니티 요약\" --db FILE")
    return query.strip()


class Searcher:
    """A warm searcher over one index file: retrieval (the channels) and ranking (search_core.search.ranking)
    over the view its IndexHandle keeps current. Reloads when the file is replaced or updated."""

    def __init__(self, db: str | Path, *, embedder: str | None = None, follow: bool = False,
                 query_cache: QueryEmbeddingCache | None = None, reranking: RerankScorer = RerankScorer(),
                 gate: GateRequest = GateRequest(), all_gate_features: bool = False):
        # open, verify the fingerprint, build the view; follow: later views are built off this thread
        self.index = IndexHandle(db, embedder=embedder, follow=follow)
        self.embedder = self.index.embedder
        # how reranker pairs are scored and charged (search_core/search/rerank.py): by default uncached, at the
        # stopwatch's time; the sweep's searchers share one cache and charge each model's per-pair cost
        self.reranking = reranking
        # query vectors (one thread per embedding, search_core/models/threads.py): the process's shared cache
        # unless the caller brings its own (the recall engine's bounded LRU, a benchmark's cache of size 0)
        self.query_cache = query_cache if query_cache is not None else QUERY_CACHE
        # the gate this searcher's searches decide with unless a search brings its own (rank(..., gate=));
        # the default is the one every path uses (choose_gate: <db>.gate.json, else the shipped default, else
        # cosine). _gate: the last choice made, (request, reranker, file stamp, choice); gate_for reuses it
        self.gate_request = gate
        # every gate feature on every search (a benchmark weighing candidate features), not only what
        # features_read says the gate and a later refit read
        self.all_gate_features = all_gate_features
        self._gate = (gate, "none", gate.stamp(self.db), gate.choose(self.fingerprint, "none", self.db))
        # the last query's index pages asked for by name: (the names read, the query, named_in's answer); _named
        self._named_last = None

    # the index handle's parts, under the names every caller (servers, tuner, tests) reads
    db = property(lambda self: self.index.db)
    conn = property(lambda self: self.index.view.conn)      # the view's snapshot (handle.py)
    view = property(lambda self: self.index.view)
    fingerprint = property(lambda self: self.index.fingerprint)

    @property
    def gate_choice(self) -> GateChoice:
        """The gate the last search decided with (before any search: this searcher's request, no reranker)."""
        return self._gate[3]

    def gate_for(self, reranker: str, request: GateRequest | None = None) -> GateChoice:
        """The gate for a search with `reranker` asking for `request` (None: this searcher's): the last choice
        when it answered the same request for the same reranker and its gate file is unchanged; else the
        request chosen again: for another reranker (a model fitted without a reranker never reads one's
        score), or because its gate file was installed, replaced or removed since (`calibrate apply` beside a
        running `serve`: the next search decides with the new file, no restart)."""
        request = self.gate_request if request is None else request
        last, last_reranker, last_stamp, choice = self._gate
        same = request is last or request == last
        if same and request.cosine_reason is not None:
            return choice
        stamp = request.stamp(self.db)
        if same and last_reranker == reranker and stamp == last_stamp:
            return choice
        choice = request.choose(self.fingerprint, reranker, self.db)
        self._gate = (request, reranker, stamp, choice)
        return choice

    @property
    def fingerprint_key(self) -> str:
        """Changes whenever the index content does: the key for caching channel lists."""
        return self.index.fingerprint_key

    @property
    def embedder_name(self) -> str:
        return self.fingerprint["embedder"]["name"]

    def _refresh(self):
        self.index.refresh()

    def close(self):
        self.index.close()

    def warm_up(self) -> None:
        """Load the embedder and the lazy parts of the view once, untimed: the first query of a process
        took 5,069 ms on the 974-note wiki, and must not be anyone's p95."""
        if not getattr(self, "_warm", False):
            self.retrieve("warm-up: 검색 준비 search", 10)
            self._warm = True

    # -- the expensive half: channels ----------------------------------------------------------------
    def retrieve_for(self, query: str, cfg: SearchConfig, *, exclude=frozenset()) -> Retrieval:
        """retrieve() as `cfg` asks for it, the fast path included: what search() and evaluation run. The fast
        path's check leaves out the notes rank() will (index pages not asked for by name, `exclude`)."""
        # one freshness check per search, not one here and one in retrieve() (a stat, a pragma and two meta reads:
        # 24 us warm on the demo, 47 on the johngrib subset): the index pages to leave out are then the view's the
        # channels read
        self._refresh()
        skip = frozenset()
        if cfg.fast_path_margin is not None:
            skip = self._held_out(check_query(query), cfg, frozenset(exclude))[0]
        return self._retrieve(query, cfg.depth, keyword_index=cfg.keyword_index, fast_margin=cfg.fast_path_margin,
                              skip=skip, pair_terms=cfg.pair_terms)

    def retrieve(self, query: str, depth: int = 50, *, channels=CHANNELS,
                 keyword_index: str = SearchConfig().keyword_index, fast_margin: float | None = None,
                 skip=frozenset(), pair_terms: int = SearchConfig().pair_terms) -> Retrieval:
        """The channel lists of `query`, `depth` notes each; the sparse and decomposed channels read the
        keyword index `keyword_index` (SearchConfig.keyword_index). fast_margin (SearchConfig.fast_path_margin):
        first run both keyword indexes; when they decide (channels.KeywordEvidence, with the notes in `skip`
        left out) return their "both" list as the sparse channel and embed nothing; otherwise run every
        channel, the keyword lists reused. pair_terms (SearchConfig.pair_terms): the channels read the query
        with up to that many Korean terms the vault pairs with its Latin phrases added (ingest/term_pairs.py)."""
        self._refresh()
        return self._retrieve(query, depth, channels=channels, keyword_index=keyword_index, fast_margin=fast_margin,
                              skip=skip, pair_terms=pair_terms)

    def _retrieve(self, query: str, depth: int = 50, *, channels=CHANNELS,
                  keyword_index: str = SearchConfig().keyword_index, fast_margin: float | None = None,
                  skip=frozenset(), pair_terms: int = SearchConfig().pair_terms) -> Retrieval:
        """retrieve() on the view the caller has just refreshed."""
        query = check_query(query)
        if keyword_index not in ch.KEYWORD_INDEXES:
            raise SearchCoreError(f"unknown keyword index {keyword_index!r}; one of {', '.join(ch.KEYWORD_INDEXES)}")
        for name in channels:
            if name not in CHANNELS:
                raise SearchCoreError(f"unknown channel {name!r}; channels: {', '.join(CHANNELS)}")
        asked = query                        # what the Retrieval records, and the gate and ranking read
        if pair_terms:
            query = expand_query(query, self.view.term_pairs(), max_terms=pair_terms)
        t: dict[str, float] = {}
        start = time.perf_counter()
        evidence, ngram, fts5 = None, None, None
        if fast_margin is not None and "sparse" in channels:
            # checked before the embedding starts, so a decided query embeds nothing. The n-gram list first
            # (~3 ms); the FTS5 list (~15-20 ms on the 8,417-chunk baekjungho wiki) only when the n-gram margin
            # holds: a query the margin turns away waits for the n-gram list alone before its embedding starts,
            # and its FTS5 query still runs beside the embedding
            # the lists as arrays (ch.NoteList): the check reads the n-gram list's first two notes and the FTS5
            # list's first, the answer is their fusion; records are built for that answer only
            ngram = ch.ngram_list(self.conn, self.view, query, depth)
            ngram_head = ngram.head(2, skip)
            evidence = ch.keyword_evidence(ngram_head, None, fast_margin, skip)
            if evidence.first is not None and evidence.margin >= fast_margin:
                fts5 = ch.sparse_list(self.conn, self.view, query, depth, ch.CHECK_PHRASES)
                evidence = ch.keyword_evidence(ngram_head, fts5.head(1, skip), fast_margin, skip)
                if not evidence.decided and ch.cut_by(self.view, self.conn, query, ch.CHECK_PHRASES):
                    fts5 = None          # the check's list read fewer trigrams: the sparse channel runs its own
            t["fast_check"] = (time.perf_counter() - start) * 1000
            if evidence.decided:
                t["retrieve"] = t["fast_check"]
                return Retrieval(asked, None, {"sparse": ch.both_keyword(ngram, fts5, depth)}, t, (), evidence,
                                 "" if query == asked else query)

        # the embedder reads at most 512 tokens: it sees the capped text (limits.cap_query); sub-questions
        # come from the capped query too: most are embedded (not one that is most of the query), so 100 KB would
        # be 100 KB again
        capped = cap_query(query)
        subqueries = tuple(ch.split_query(capped)) if "decomposed" in channels else ()
        own_vector = tuple(p for p in subqueries if not ch.shares_query_vector(p, capped))
        view, lists = self.view, {}

        def vector_searches(i: int, vec) -> dict:
            """Text i's dense list (the query's also feeds the entity channel), run on the thread that
            embedded it right after: for a compound question the query's searches then overlap the parts'
            embeddings instead of waiting for the join (~2-4 ms of the p95 questions, BENCHMARKS.md)."""
            t0 = time.perf_counter()
            product = ch.dense_product(view, vec)     # read again by the entity channel's note_maxima
            out = {"dense": ch.dense(view, vec, depth, product)}
            out["ms_dense"] = (time.perf_counter() - t0) * 1000
            if i == 0 and "entity" in channels:
                t0 = time.perf_counter()
                top = out["dense"][0].score if out["dense"] and "dense" in channels else None
                out["entity"] = ch.entity(view, query, vec, depth, self.embedder.default_threshold, top, product)
                out["ms_entity"] = (time.perf_counter() - t0) * 1000
            return out

        # The query and its sub-questions are embedded on a second thread while this one runs the keyword
        # channels, then both threads embed what is left (query_cache.SharedEmbedding): on two idle cores
        # a long question's one-thread embedding (~50 ms) and its FTS5 work overlap instead of adding up
        # (BENCHMARKS.md, latency). Same vectors and lists as one thread (tests/search_core/search/test_search_overlap.py).
        with SharedEmbedding(self.query_cache, self.embedder, capped, own_vector, then=vector_searches) as shared:
            if "sparse" in channels:          # the lists the fast path's check ran are not run again
                t0 = time.perf_counter()
                # the n-gram list, fused as a list of its own (SearchConfig.w_ngram) and the sparse channel's
                # under keyword_index ngram or both; an index written before the n-gram lists has none
                if ngram is None and view.ngram_index() is not None:
                    ngram = ch.ngram_list(self.conn, view, query, depth)
                if ngram is not None:
                    lists[NGRAM_LIST] = ngram.hits()
                if keyword_index == "ngram" and ngram is not None:
                    lists["sparse"] = lists[NGRAM_LIST]
                elif keyword_index == "fts5" and fts5 is not None:
                    lists["sparse"] = fts5.hits()
                elif keyword_index == "both" and ngram is not None:
                    lists["sparse"] = ch.both_keyword(ngram, fts5 if fts5 is not None else
                                                      ch.sparse_list(self.conn, view, query, depth), depth)
                else:
                    lists["sparse"] = ch.keyword(self.conn, view, query, depth, keyword_index)
                t["sparse"] = (time.perf_counter() - t0) * 1000
            part_sparse = []
            if "decomposed" in channels:       # the parts' keyword work, then their embeddings with the other thread
                t0 = time.perf_counter()
                part_sparse = [ch.keyword(self.conn, view, part, depth, keyword_index) for part in subqueries]
                shared.help()
                t["decomposed"] = (time.perf_counter() - t0) * 1000
            vecs = shared.result()
        t["embed"] = shared.ms
        qvec = vecs[0]
        # a vector that came from the query cache was not embedded here: its searches run now
        found = [a if a is not None else vector_searches(i, v) for i, (a, v) in enumerate(zip(shared.after, vecs))]
        if "dense" in channels:
            lists["dense"], t["dense"] = found[0]["dense"], found[0]["ms_dense"]
        if "decomposed" in channels:
            t0 = time.perf_counter()
            part_dense = dict(zip(own_vector, (f["dense"] for f in found[1:])))
            lists["decomposed"] = self._decomposed(
                part_sparse, [part_dense.get(p, found[0]["dense"]) for p in subqueries], depth)
            t["decomposed"] = t.get("decomposed", 0.0) + (time.perf_counter() - t0) * 1000
        if "entity" in channels:
            lists["entity"] = found[0]["entity"]
            t["entity"] = found[0]["ms_entity"]
        t["retrieve"] = (time.perf_counter() - start) * 1000     # what was waited: the stages overlap
        kept = {name: lists[name] for name in channels}
        if NGRAM_LIST in lists:
            kept[NGRAM_LIST] = lists[NGRAM_LIST]
        return Retrieval(asked, qvec, kept, t, subqueries, evidence, "" if query == asked else query)

    def _decomposed(self, part_sparse, part_dense, depth) -> list:
        """Each part's own sparse and dense lists, fused; none when the query has no parts (split_query
        gives two or more, or nothing: a single part would only repeat the sparse query). A part that is
        most of the query (ch.shares_query_vector) comes with the query's dense list."""
        if not part_sparse:
            return []
        per_part = []
        for s, d in zip(part_sparse, part_dense):
            best = {h.note_id: h for h in s + d}   # dense chunk wins: it was the better semantic match
            fused = weighted_rrf({"dense": [h.note_id for h in d], "sparse": [h.note_id for h in s]},
                                 {"dense": 1.0, "sparse": 1.0})
            per_part.append([ch.ChannelHit(f.id, best[f.id].chunk_id, f.score) for f in fused])
        return ch.merge_parts(per_part, depth)

    # -- the cheap half: fusion, rerank, gate ----------------------------------------------------------
    def rank(self, r: Retrieval, cfg: SearchConfig, *, snippets: bool = True,
             limit_fused: int | None = None, exclude=frozenset(), gate: GateRequest | None = None) -> SearchResult:
        """The final order comes from search_core.search.ranking (the same function evaluation scores);
        limit_fused: how deep the caller reads the final order (evaluation: K_LIST). exclude: note ids held
        out of this one search: dropped from every channel list before fusion (as nav notes are), so the
        notes below move up and the result is the search the index would give without them, gate included
        (a question the vault made from a note's own text is asked with that note held out). gate: the gate this
        one search decides with (None: the searcher's own request)."""
        t = dict(r.timings_ms)
        t0 = time.perf_counter()
        view = self.view
        held = frozenset(exclude)            # notes this one search holds out (a question's own source)
        r_lists = r.lists if not held else {c: [h for h in hits if h.note_id not in held] for c, hits in r.lists.items()}
        lists = {c: [h.note_id for h in hits] for c, hits in r_lists.items()}
        left_out, nav, named = self._held_out(r.query, cfg, held)
        nav_out = left_out - held
        lead = ch.lead_margin(r_lists.get(NGRAM_LIST, []))
        dense_hits = [h for h in r_lists.get("dense", []) if h.note_id not in left_out]   # none on the fast path
        first_dense = [h.note_id for h in dense_hits[:scripts.CROSS_SCRIPT_NOTES]]
        # the notes' scripts are read only where they can change the weights: the first three notes' for a
        # question the keywords leave undecided, the first note's for any other while the rule is on
        cross = cfg.crosses(lead, True) and scripts.cross_script(r.query, [view.hangul_share(n) for n in first_dense])
        alone = bool(first_dense) and not cross and cfg.weighs_across() and scripts.alone_across(
            r.query, view.hangul_share(first_dense[0]), any(
                first_dense[0] in [i for i in lists.get(c, []) if i not in left_out][:scripts.ALONE_DEPTH]
                for c in ("sparse", NGRAM_LIST)))
        dense_lead = ch.cosine_lead(dense_hits)
        # the fused records as deep as anything reads them: the caller's depth, else --explain's K_LIST (and the
        # reranker's window and top_k, which fuse adds); every candidate only when the query names an index page,
        # whose record lead_with takes from wherever it sits. A frozen record is ~1 us: a fast-path answer built
        # 50 for the 5 it returns
        depth = limit_fused or (None if named else max(cfg.top_k, ranking.K_LIST))
        fused = ranking.lead_with(ranking.fuse(lists, cfg, exclude=left_out, community=view.community,
                                               depth=depth, ngram_lead=lead, cross_script=cross,
                                               alone_across=alone, dense_lead=dense_lead), named)
        held_out = ()
        # a vault without index pages (AutoRAG-ko) skips the walk, and an answer whose lists hold none stops at the
        # set's own scan of the ids
        if nav_out and not nav_out.isdisjoint(chain.from_iterable(lists.values())):
            held_out = tuple((nid, nav[nid]) for nid in dict.fromkeys(chain.from_iterable(lists.values()))
                             if nid in nav_out)
        t["fusion"] = (time.perf_counter() - t0) * 1000
        chunk_of = {}
        for c in ("dense", "sparse", "decomposed", "entity", NGRAM_LIST):   # semantic match first for the snippet chunk
            for h in r_lists.get(c, []):
                chunk_of.setdefault(h.note_id, h.chunk_id)
        for nid in named:                                       # asked for by name, found by no channel
            if nid not in chunk_of:        # the fast path has no query vector: the note's first chunk
                chunk_of[nid] = view.best_chunk(r.qvec, nid) if not r.fast else (view.note_chunks.get(nid) or [None])[0]
        cands = ranking.window(fused, cfg)
        rs, t["rerank"] = None, 0.0          # no window, no rerank work: a stopwatch around nothing read 0.01 ms on a busy machine
        if cands:
            t0 = time.perf_counter()
            rs = self.reranking.scores(cfg.reranker, r.query, [(f.id, chunk_of.get(f.id)) for f in cands], self.passage)
            t["rerank"] = self.reranking.charged_ms(cfg.reranker, len(cands), (time.perf_counter() - t0) * 1000)
        final = ranking.final_ranking(fused, cfg, rs, depth=limit_fused or cfg.top_k)
        shown = list(zip(final.order, final.scores))[: cfg.top_k]
        texts = self.snippets([(chunk_of.get(f.id), f.id) for f, _ in shown], r.query) if snippets else [""] * len(shown)
        hits = []
        for (f, s), snippet in zip(shown, texts):
            cid = chunk_of.get(f.id)
            note = view.notes[f.id]
            rel = note.get("path")
            # the fast path embedded nothing: no cosine to report (0.0), its gate reads none
            hits.append(Hit(f.id, note["title"], s, snippet, f.ranks, cid,
                            view.cosine(r.qvec, f.id, cid) if not r.fast else 0.0, f.score, rel,
                            _abs_path(view.vault, rel) if rel and view.vault else None))
        threshold = cfg.threshold if cfg.threshold is not None else self.embedder.default_threshold
        top = hits[0].cosine if hits else 0.0
        t0 = time.perf_counter()
        # the fast path's decision reads none of the features, and they cost up to ~20 ms (unknown-word
        # lookups) of an answer that otherwise takes a few: a fast-path answer carries none
        choice = None if r.fast else self.gate_for(cfg.reranker, gate)
        only = None if self.all_gate_features or choice is None else \
            features_read(choice.model.features if choice.model is not None else ())
        feats = {} if r.fast else gate_features(r.query, r_lists, hits, view, conn=self.conn,
                                                reranked=cfg.reranker != "none", held=held, only=only)
        if r.fast:
            d = self._fast_path_decision(r.evidence, bool(hits))
        else:
            d = choice.decide(feats, top, threshold, bool(hits), cfg.reranker, p_threshold=cfg.gate_threshold)
        decided = Gate(d, top, threshold, feats)
        t["gate"] = (time.perf_counter() - t0) * 1000
        # retrieve() ran its stages on two threads: its wall time, not their sum, is what a user waited
        t["total"] = sum(v for k, v in t.items() if k not in _RETRIEVE_STAGES or "retrieve" not in t)
        # the label reads the top cosine, which a fast-path answer has none of: it says what the decision says
        confidence = confidence_label(top, threshold) if not r.fast else ("high" if d.inject else "very_low")
        return SearchResult(r.query, tuple(hits), decided, confidence, t, tuple(fused), r, final.ids, held_out, named)

    def _held_out(self, query: str, cfg: SearchConfig, held: frozenset) -> tuple[frozenset, dict, tuple]:
        """(every note this search leaves out of fusion, the index pages and why, the index pages the query
        asks for by name: kept, and first). `held`: the notes the caller holds out."""
        nav = self.nav_reasons(cfg.nav_globs) if cfg.exclude_nav else {}
        named = tuple(n for n in self._named(query, cfg.nav_globs) if n not in held) if nav else ()
        return frozenset(nav).difference(named) | held, nav, named

    def _named(self, query: str, globs) -> tuple[str, ...]:
        """ranking.named_in of `query` over the index pages of `globs`. A search asks twice with the same query and
        names, the fast path's check and the ranking, and so does evaluation (retrieve_for, then rank): the last
        answer is kept for its names and query (named_in was 7 us a call on the demo's 6 index pages, 36 names).
        The names are the view's (_nav_names), so a new view is a new key; one tuple, swapped whole."""
        names = self._nav_names(globs)
        last = self._named_last
        if last is not None and last[0] is names and last[1] == query:
            return last[2]
        found = ranking.named_in(query, names)
        self._named_last = (names, query, found)
        return found

    @staticmethod
    def _fast_path_decision(evidence: ch.KeywordEvidence, has_hits: bool) -> GateDecision:
        """The gate's decision on a fast-path answer. The gate model reads the query's vector (its cosine
        features), which the fast path never computes; feeding it zeros for them would be a decision on a
        query nobody asked. So the keyword evidence that chose the path decides, and says so: it injects.
        What that costs is measured, not assumed: the probes (questions the vault cannot answer) that take
        the fast path are injected where the gate model might have skipped them (BENCHMARKS.md, the fast
        path), which is why the path is off by default."""
        why = f"fast path: {evidence.reason()}; the query was not embedded and the gate model not asked"
        if not has_hits:
            return GateDecision(False, None, "skip", FAST_PATH_GATE, "fast path", evidence.cut, "no results")
        return GateDecision(True, None, "inject", FAST_PATH_GATE, "fast path", evidence.cut, why)

    def search(self, query: str, cfg: SearchConfig | None = None, *, exclude=frozenset(),
               gate: GateRequest | None = None) -> SearchResult:
        cfg = cfg or SearchConfig(embedder=self.embedder_name)
        return self.rank(self.retrieve_for(query, cfg, exclude=exclude), cfg, exclude=exclude, gate=gate)

    # -- helpers -------------------------------------------------------------------------------------
    def nav_reasons(self, globs=SearchConfig().nav_globs) -> dict[str, str]:
        """Index pages kept out of the answer lists, and why: the flag the index stored (the user's mark in
        the frontmatter, or a link page: search_core.ingest.parse.nav_reason), or an id matching one of the
        config's globs. Computed once per view."""
        cache = self.view.caches.nav
        if globs not in cache:
            out = {}
            # one pattern of every glob first (fnmatchcase's own translation): five fnmatchcase calls for each
            # of 92,000 notes were ~7 % of a cold search's CPU at 567,000 chunks
            any_glob = re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs)) if globs else None
            for nid, reason in self.view.notes.nav_flags().items():
                if reason:
                    out[nid] = reason
                elif any_glob is not None and any_glob.match(nid):
                    glob = next(g for g in globs if fnmatch.fnmatchcase(nid, g))
                    out[nid] = f"id matches nav_globs {glob!r}"
            cache[globs] = out
        return cache[globs]

    def _nav_names(self, globs) -> dict[str, tuple[str, ...]]:
        """Each index page's names a query may ask for it by: title, aliases, file name, id."""
        cache = self.view.caches.nav_names
        if globs not in cache:
            notes = self.view.notes
            cache[globs] = {nid: (notes[nid]["title"], *notes[nid]["aliases"], nid.rsplit("/", 1)[-1], nid)
                            for nid in self.nav_reasons(globs)}
        return cache[globs]

    def nav_notes(self, globs=SearchConfig().nav_globs) -> frozenset:
        """The ids of nav_reasons: index pages kept out of the answer lists."""
        return frozenset(self.nav_reasons(globs))

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

    def snippets(self, chunks: list[tuple[int | None, str]], query: str) -> list[str]:
        """Each (chunk id, note id)'s snippet for `query`: the words around the first of the query's words the
        chunk holds, else its start (a note without a chunk: its summary). The chunks' rows are read in one query,
        not one a hit, and the query's words found once (five rows one by one were 16 us on the demo, 11 at once)."""
        ids = [cid for cid, _ in chunks if cid is not None]
        text_of = dict(self.conn.execute(f"SELECT id, text FROM chunks WHERE id IN ({', '.join('?' * len(ids))})",
                                         ids)) if ids else {}
        words = [tok for tok in ch.TOKEN_RE.findall(query.lower()) if len(tok) >= 2]
        out = []
        for cid, note_id in chunks:
            # the words: link lines and markup spend the room; one line
            text = clean_markup(text_of.get(cid, ""), one_line=True)
            if not text:
                out.append(self.view.notes.get(note_id, {}).get("summary", "")[:SNIPPET_CHARS])
                continue
            start = snippet_start(text.lower(), words)
            piece = text[start:start + SNIPPET_CHARS]
            out.append(("…" if start else "") + piece + ("…" if start + SNIPPET_CHARS < len(text) else ""))
        return out
