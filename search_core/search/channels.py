"""The four retrieval channels. Each returns a ranked list of ChannelHit: one per note, its best chunk."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from search_core.index import ngram_postings
from search_core.index import term_df as term_df_store
from search_core.ingest.graph import normalize_name
from search_core.search.fts_bm25 import FIELD_WEIGHTS
from search_core.search.view import matvec

TOKEN_RE = re.compile(r"\w+", re.UNICODE)
MAX_TRIGRAMS = 64          # a 100-character query has ~100 trigrams; BM25 over 64 keeps p95 in budget
# FTS5 phrases one sparse query may OR together. FTS5 reads every posting list of an OR query
# to rank by bm25, so the cost is the summed document frequency of its trigrams: a 37-trigram English
# question ("how", "the", "wha"...) read ~59,000 postings on the johngrib wiki, 47 ms. A query with more
# trigrams keeps the MAX_PHRASES rarest ones (highest idf, the ones bm25 ranks by); BENCHMARKS.md has the
# caps measured (time on johngrib, hit@5 and MRR on every shipped set).
MAX_PHRASES = 24
# ...and at most this many postings summed over them (term_df), the rarest first, at least one phrase (but none in
# half the chunks or more: floor_idf): the cost grows with the vault while a trigram's idf falls with it. At
# 255,000 chunks (text repeated in copies)
# the 24 rarest of a title summed 55,578 postings at p50 and 596,036 at most, the channel p50 563 ms (load
# 18); no question of the demo, johngrib or AutoRAG-ko sets reaches the bound (28,230 at most), so their
# lists are as without it.
MAX_POSTINGS = 65_536
# _fts_best's first query reads 1.25x the rows it keeps (at least one more), so a tie at its cut is mostly seen
# whole in one pass. FTS5 scores every matching row whatever the LIMIT, but each row kept costs the sort and a
# Python tuple: 4x read the same rows slower on every set measured (the check's 12-trigram query p50 1.76 -> 1.36
# ms on johngrib, 29.5 -> 27.7 ms at 250,000 chunks of repeated text, where ties are longest; the same rows on
# all 547 johngrib, 272 demo and 93 scale questions; docs/lab-notes/fastpath-2026-12.md).
TIE_ROOM = 1.25
# The fast path's check asks FTS5 only whether it puts the n-gram list's first note first, over the query's
# CHECK_PHRASES rarest trigrams: on the tuning parts 12 made every decision and answer that 24 made (one more
# probe of 48 on the path) and cut that query's p50 about 4x on the wikis (61 -> 14 ms johngrib-tune), 20x on
# AutoRAG-ko; 8 lost a tuning hit (docs/lab-notes/peers-2026-12.md).
CHECK_PHRASES = 12
# 0.05 is about the cosine gap between a right and a wrong note under e5 (0.88 vs 0.83): a note named
# outright in the query moves ahead of its neighbours, but a wrong name guess cannot bury a close chunk.
ENTITY_BONUS = 0.05
# How far a note's best cosine from one product over many rows may be from its own product's: a float32 sum of up
# to 1,024 products of unit vectors is within 1,024 x 2^-24 (6e-5) of the exact one whatever the kernel's order
ENTITY_ROUNDING = 1e-3
# "RAG와 GraphRAG", "A vs B", "A 및 B", "A, B", "A and B": a particle needs a 2+ character word before it,
# so "결과 분석" (result analysis) is not split on its own last syllable.
SPLIT_RE = re.compile(r"\s*(?:,|;|\bvs\.?\b|\band\b|및|그리고|(?<=[\w]{2})(?:와|과)(?=\s))\s*", re.I)


class ChannelHit(NamedTuple):
    """One note of a channel's list: its best chunk and its score. A named tuple, not a frozen dataclass: a list
    holds ~50 of them, a search builds one list on the fast path and four or more on the full path, and a frozen
    record took 420 ns to build against 230 (its fields are set one by one through object.__setattr__)."""
    note_id: str
    chunk_id: int | None
    score: float


@dataclass(frozen=True)
class NoteList:
    """A keyword list as arrays, best first: note numbers (the view's vault order, so ties by number are ties by
    note id), each note's chunk and score. The fast path's check and its "both" fusion read these; ChannelHit
    records are built where a list leaves the keyword channels (hits): a frozen record is ~1 us, and the path
    built three lists of 50 of them per search where the answer needs one."""
    notes: np.ndarray        # int64
    chunks: np.ndarray       # int64 chunk ids
    scores: np.ndarray       # float64
    note_ids: tuple          # note id by number

    @staticmethod
    def empty(note_ids: tuple = ()) -> "NoteList":
        return NoteList(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64), note_ids)

    def __len__(self) -> int:
        return len(self.notes)

    def hits(self) -> list[ChannelHit]:
        ids = self.note_ids
        return [ChannelHit(ids[n], c, s) for n, c, s in
                zip(self.notes.tolist(), self.chunks.tolist(), self.scores.tolist())]

    def head(self, n: int, skip=frozenset()) -> list[ChannelHit]:
        """The first `n` hits whose notes are not in `skip`: what the fast path's check reads of a list."""
        out = []
        for i, no in enumerate(self.notes.tolist()):
            if self.note_ids[no] not in skip:
                out.append(ChannelHit(self.note_ids[no], int(self.chunks[i]), float(self.scores[i])))
                if len(out) == n:
                    break
        return out


def _dedup_notes(pairs, depth: int, view, skip_nav: bool = False) -> list[ChannelHit]:
    """(chunk_id, score) best-first -> one hit per note, its best chunk."""
    out, seen = [], set()
    for cid, score in pairs:
        nid = view.chunk_note.get(cid)
        if nid is None or nid in seen:
            continue
        seen.add(nid)
        out.append(ChannelHit(nid, cid, float(score)))
        if len(out) >= depth:
            break
    return out


def dense_product(view, qvec: np.ndarray) -> np.ndarray | None:
    """The query's cosine with every row of the view's matrix (append order), -inf on its dead rows (a removed
    chunk's, padding): what dense() ranks, and what the entity channel's note_maxima may read instead of a
    product of its own. None when a pgvector backend answers the dense channel or the matrix is empty."""
    if getattr(view, "dense_backend", None) is not None or view.matrix.shape[0] == 0:
        return None
    product = matvec(view.matrix, qvec)
    product[view.dead_rows] = -np.inf
    return product


def dense(view, qvec: np.ndarray, depth: int, product: np.ndarray | None = None) -> list[ChannelHit]:
    """The closest chunks, one per note. Every row tied with the last one kept comes along, and equal cosines
    are ordered by vault place (note id, ord; a vector without its chunk row after them, by id), never by
    row or chunk id: the rows are in append order, which an update and a fresh build order apart. An index
    with a pgvector backend (view.dense_backend) gets the same list from PostgreSQL. product:
    dense_product(view, qvec) when the caller has it."""
    backend = getattr(view, "dense_backend", None)
    if backend is not None:
        return _dedup_notes(backend.search(qvec, depth * 4), depth, view)
    if view.matrix.shape[0] == 0:
        return []
    scores = product if product is not None else dense_product(view, qvec)
    live = len(scores) - len(view.dead_rows)
    n = min(live, depth * 4)                  # 4 chunks a note on average before dedup leaves `depth` notes
    if n <= 0:
        return []
    cut = np.partition(scores, len(scores) - n)[len(scores) - n]         # the n-th largest
    top = np.flatnonzero(scores >= cut)
    top = top[view.vec_ids[top] >= 0]         # a dead row only ties at -inf, with nothing live left
    cids = view.vec_ids[top]
    place = np.full(len(top), -1, np.int64)
    known = cids < len(view.place_of)
    place[known] = view.place_of[cids[known]]
    place = np.where(place >= 0, place, len(view.place_of) + cids)
    top = top[np.lexsort((place, -scores[top]))]
    return _dedup_notes(((int(view.vec_ids[i]), scores[i]) for i in top), depth, view)


def query_terms(query: str) -> tuple[list[str], list[str]]:
    """(trigrams for FTS5 MATCH, short tokens of 1-2 characters for the LIKE fallback)."""
    trigrams, short = [], []
    for tok in TOKEN_RE.findall(query.lower()):
        if len(tok) < 3:
            short.append(tok)
            continue
        for i in range(len(tok) - 2):
            trigrams.append(tok[i:i + 3])
    return list(dict.fromkeys(trigrams))[:MAX_TRIGRAMS], list(dict.fromkeys(short))


def cut_by(view, conn, query: str, phrases: int) -> bool:
    """Whether sparse(..., phrases) reads other trigrams of `query` than the sparse channel's own query (the
    MAX_PHRASES rarest). Both bounds of select_trigrams cut: the phrase cap and the postings budget
    (MAX_POSTINGS). A query of more trigrams than `phrases` whose budget binds before either cap is cut to the
    same rarest trigrams both ways: counting trigrams against the cap alone called it cut, and the fast path
    then ran the same FTS5 query twice. So the two selections are compared (frequencies: the view's cache)."""
    trigrams = query_terms(query)[0]
    return fts_trigrams(view, conn, trigrams, phrases) != fts_trigrams(view, conn, trigrams, MAX_PHRASES)


def select_trigrams(trigrams: list[str], df: dict[str, int], cap: int = MAX_PHRASES,
                    budget: int = MAX_POSTINGS, chunks: int | None = None) -> list[str]:
    """The trigrams one FTS5 query ORs together: those in no chunk dropped (they match nothing, so the
    result is the same), then, past `cap` phrases or `budget` summed postings, the rarest (lowest df; a tie
    goes to the earlier one) up to both bounds, at least one, in query order. Past a bound, a trigram in at
    least half of the index's `chunks` is not read at all (floor_idf), even as the one."""
    present = [t for t in trigrams if df.get(t, 0) > 0]
    if len(present) <= cap and sum(df[t] for t in present) <= budget:
        return present
    if chunks is not None:
        present = [t for t in present if not floor_idf(df[t], chunks)]
    keep, total = set(), 0
    for t in sorted(present, key=lambda t: (df[t], present.index(t)))[:cap]:
        if keep and total + df[t] > budget:
            break
        keep.add(t)
        total += df[t]
    return [t for t in present if t in keep]


def floor_idf(df: int, chunks: int) -> bool:
    """Whether FTS5's bm25 gives a term in `df` of `chunks` rows its floor idf: ln((N - df + .5) / (df + .5))
    is <= 0 from half the rows on, and bm25 then uses 1e-6, so the term ranks nothing, while its postings are
    still read and scored. "wik" of a vault whose notes are tagged "wiki" sits in 513,726 of 567,010 chunks:
    the query "wiki 3" read them all, 0.40 s of CPU, over the budget as the one trigram kept."""
    return 2 * df >= chunks


def fts_trigrams(view, conn, trigrams: list[str], phrases: int = MAX_PHRASES) -> list[str]:
    """The trigrams the sparse channel sends to FTS5 for a query's `trigrams` (select_trigrams). Their
    frequencies are looked up only when a bound may bind: more than MAX_PHRASES phrases, or a vault where
    they could sum past MAX_POSTINGS; else the query runs as written (no lookups, the same result)."""
    if len(trigrams) > phrases or len(trigrams) * len(view.chunk_at) > MAX_POSTINGS:
        return select_trigrams(trigrams, term_df(view, conn, trigrams), phrases, MAX_POSTINGS, len(view.chunk_at))
    return trigrams


def term_df(view, conn, terms: list[str]) -> dict[str, int]:
    """Chunks holding each trigram: the table the index writer stores (search_core.term_df, one
    primary-key read per term), else FTS5's own vocabulary; one cache on the view, shared with the gate's
    features (a view is rebuilt whenever the index changes, and so is its cache)."""
    return term_df_store.counts(view, conn, terms)


def fts_match_expr(trigrams: list[str]) -> str:
    """Every term is a quoted string ("" escapes a quote), so user text never acts as FTS syntax."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in trigrams)


def _like_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def sparse(conn, view, query: str, depth: int, phrases: int | None = None) -> list[ChannelHit]:
    """sparse_list's hits."""
    return sparse_list(conn, view, query, depth, phrases).hits()


def sparse_list(conn, view, query: str, depth: int, phrases: int | None = None) -> NoteList:
    """BM25 over FTS5 trigrams, plus a LIKE scan for tokens too short for trigrams ("AI", "팀", "검색").
    Short-token matches score like BM25 terms: idf = ln(1 + (N - df + .5)/(df + .5)), no tf saturation.
    phrases: the most trigrams one query ORs (the rarest kept), MAX_PHRASES when None; the fast path's check
    asks CHECK_PHRASES."""
    phrases = MAX_PHRASES if phrases is None else phrases
    trigrams, short = query_terms(query)
    trigrams = fts_trigrams(view, conn, trigrams, phrases)
    places: list[np.ndarray] = []          # vault places (view.place_of) of the chunks each source matched
    weights: list[np.ndarray] = []
    if trigrams:
        ids, bm25 = fts_best(view, conn, trigrams, depth * 4)
        if len(ids):
            p, keep = _placed(view, ids)
            places.append(p)
            weights.append(-bm25[keep])
    for tok in short:
        got = short_token(conn, view, tok)
        if got is not None:
            places.append(got[0])
            weights.append(got[1])
    return best_chunk_per_note(places, weights, depth, view.place_note(), view.chunk_at, view.note_ids)


def short_token(conn, view, tok: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(the vault places of the chunks holding the 1-2 character token `tok`, its idf at each), None when no chunk
    does: what sparse_list adds beside FTS5's rows. Kept on the view (ViewCaches.short_places): the same few
    tokens come back query after query ("AI", "팀", "검색"), and reading and placing a token's chunks again was
    ~5.5 us a token, 3.5 tokens a question on the demo."""
    kept = view.caches.short_places
    if tok in kept:
        return kept[tok]
    index = view.short_index()
    if index is not None:
        got = index.chunks_containing(tok)
    else:   # a corpus too large for the in-memory index: the LIKE scan itself
        pat = f"%{_like_escape(tok)}%"
        got = np.array([r[0] for r in conn.execute(
            "SELECT id FROM chunks WHERE text LIKE ? ESCAPE '\\' OR context LIKE ? ESCAPE '\\'", (pat, pat))],
            np.int64)
    found = None
    if len(got):
        n = max(len(view.chunk_note), 1)
        idf = math.log(1 + (n - len(got) + 0.5) / (len(got) + 0.5))
        p, _ = _placed(view, got)
        found = p, np.full(len(p), idf)
        for a in found:
            a.flags.writeable = False       # shared by every later query's list
    return kept.put(tok, found, found[0].nbytes + found[1].nbytes if found is not None else 0)


# BM25's saturation and length normalisation: Lucene's and bm25s' defaults, the values the n-gram peer
# measured with (BENCHMARKS.md, peers)
BM25_K1 = 1.5
BM25_B = 0.75
KEYWORD_INDEXES = ("ngram", "fts5", "both")
# "both": the two keyword lists fused by plain RRF with the usual k (Cormack et al.), as sub-question lists are
BOTH_RRF_K = 60
BOTH_WEIGHTS = {"ngram": 1.0, "fts5": 1.0}


def keyword(conn, view, query: str, depth: int, index: str = "ngram") -> list[ChannelHit]:
    """The sparse channel over the keyword index a config names (SearchConfig.keyword_index)."""
    if index == "ngram":
        return ngram_sparse(conn, view, query, depth)
    if index == "fts5":
        return sparse(conn, view, query, depth)
    if index == "both":
        return both_keyword(ngram_list(conn, view, query, depth), sparse_list(conn, view, query, depth), depth)
    raise ValueError(f"unknown keyword index {index!r}; one of {', '.join(KEYWORD_INDEXES)}")


def both_keyword(ngram: NoteList, fts5: NoteList, depth: int) -> list[ChannelHit]:
    """The "both" keyword list: the n-gram and FTS5 lists fused by plain RRF (BOTH_RRF_K), on their note numbers
    (fusion.rrf_order: weighted_rrf's order and floats, the numbers' order being the ids'), each note with the
    n-gram list's chunk, else FTS5's. No Fused record is built: the answer needs the notes, chunks and scores
    (61 against 82 us a demo fast-path answer through numpy, whose dozen small-array calls cost more than two
    dicts of 50 notes)."""
    from search_core.search.fusion import rrf_order
    fused, places = rrf_order({"ngram": ngram.notes.tolist(), "fts5": fts5.notes.tolist()}, BOTH_WEIGHTS, BOTH_RRF_K,
                              limit=depth)
    in_ngram, in_fts5 = places["ngram"], places["fts5"]     # 1-based places: a list holds a note once
    ngram_chunks, fts5_chunks = ngram.chunks.tolist(), fts5.chunks.tolist()
    ids = ngram.note_ids or fts5.note_ids
    return [ChannelHit(ids[n], ngram_chunks[p - 1] if (p := in_ngram.get(n)) else fts5_chunks[in_fts5[n] - 1], score)
            for n, score in fused]


@dataclass(frozen=True)
class KeywordEvidence:
    """Whether the keyword lists alone decide a query (the fast path, SearchConfig.fast_path_margin): the
    n-gram BM25 top score leads the second by at least `cut` of itself, and the FTS5 list puts the same note
    first. Notes a search holds out (index pages, a question's own source) are left out first. The FTS5 list
    is asked only when the margin holds (fts5_ran): it costs several times the n-gram list."""
    first: str | None          # the n-gram list's first note
    margin: float              # (top - second) / top of the n-gram scores; 1.0 with one note, 0.0 with none
    cut: float
    fts5_ran: bool = False
    agree: bool = False        # the FTS5 list's first note is the n-gram list's

    @property
    def decided(self) -> bool:
        return self.first is not None and self.margin >= self.cut and self.agree

    def reason(self) -> str:
        if self.first is None:
            return "the n-gram keyword list found nothing"
        if self.margin < self.cut:
            return f"n-gram BM25 margin {self.margin:.2f} < {self.cut:g}"
        if not self.agree:
            return f"n-gram BM25 margin {self.margin:.2f} >= {self.cut:g}, but FTS5 puts another note first"
        return f"n-gram BM25 margin {self.margin:.2f} >= {self.cut:g} and FTS5 agrees on {self.first}"


def cosine_lead(hits: list[ChannelHit]) -> float:
    """How far the dense list's first note leads the second, in cosine: top - second; 1.0 with one note, 0.0
    with none."""
    if not hits:
        return 0.0
    return float(1.0 if len(hits) == 1 else hits[0].score - hits[1].score)


def lead_margin(hits: list[ChannelHit]) -> float:
    """How far a list's first note leads the second, as a share of its score: (top - second) / top; 1.0 with
    one note, 0.0 with none (or a top score of 0)."""
    if not hits:
        return 0.0
    top = hits[0].score
    return float(1.0 if len(hits) == 1 else ((top - hits[1].score) / top if top > 0 else 0.0))


def keyword_evidence(ngram: list[ChannelHit], fts5: list[ChannelHit] | None, cut: float,
                     skip=frozenset()) -> KeywordEvidence:
    """KeywordEvidence of the two lists; fts5=None: the n-gram margin alone (agree stays False)."""
    ng = [h for h in ngram if h.note_id not in skip]
    if not ng:
        return KeywordEvidence(None, 0.0, cut)
    margin = lead_margin(ng)
    if fts5 is None:
        return KeywordEvidence(ng[0].note_id, margin, cut)
    fs = next((h.note_id for h in fts5 if h.note_id not in skip), None)
    return KeywordEvidence(ng[0].note_id, margin, cut, True, fs == ng[0].note_id)


def ngram_sparse(conn, view, query: str, depth: int) -> list[ChannelHit]:
    """ngram_list's hits."""
    return ngram_list(conn, view, query, depth).hits()


def ngram_list(conn, view, query: str, depth: int) -> NoteList:
    """BM25 over character n-grams (search_core.index.ngram_postings), one document per note: a note's
    term counts and length are its chunks' summed, so a question whose words sit in different chunks of
    one note still finds it whole. idf = ln(1 + (N - df + .5) / (df + .5)) over notes. The note's chunk
    is the one whose own terms score best (saturated counts times idf). Equal scores come in vault order
    (note id), the best chunk's tie goes to the earlier chunk. An index written before the lists existed
    runs the FTS5 channel instead."""
    index = view.ngram_index()
    if index is None:
        return sparse_list(conn, view, query, depth)
    n = len(index.note_ids)
    if n == 0:
        return NoteList.empty(index.note_ids)
    # each term's list with its BM25 parts per note and per chunk (NgramIndex.bm25_lists)
    found = index.bm25_lists(list(dict.fromkeys(ngram_postings.terms_of(query))), BM25_K1, BM25_B)
    if not found:
        return NoteList.empty(index.note_ids)
    # every found term's note list and chunk list, one after another in query order: each note's and each
    # chunk's sum then adds the same floats in the same order as a loop over the terms would
    notes = np.concatenate([t.note_no for t, _, _ in found])
    score = np.bincount(notes, weights=np.concatenate([w for _, w, _ in found]), minlength=n)
    cand = np.flatnonzero(score > 0)                       # ascending: vault order, kept by the stable sort
    # the first `depth` of a stable sort without sorting the rest: AutoRAG-ko's fast-path questions score ~640 of its
    # 720 notes, and their whole sort was 25 us against 8
    order = cand[top_stable(score[cand], depth)]
    if not len(order):
        return NoteList.empty(index.note_ids)
    # the returned notes' chunks only: a chunk's own terms (saturated counts times idf) pick the note's chunk
    places = np.concatenate([t.chunk_place for t, _, _ in found])
    wanted = np.zeros(n, bool)
    wanted[order] = True
    mine = wanted[index.note_of_place[places]]
    chunk_score = np.bincount(places[mine], weights=np.concatenate([w for _, _, w in found])[mine],
                              minlength=len(index.chunk_len))
    place = _first_best_in_segments(chunk_score, index.start[order], index.start[order + 1])
    return NoteList(order.astype(np.int64), view.chunk_at[place].astype(np.int64), score[order], index.note_ids)


def _first_best_in_segments(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each non-empty segment values[lo[j]:hi[j]], the index of its largest value, the first of equal ones
    (what lo[j] + np.argmax(values[lo[j]:hi[j]]) gives), in a few array operations instead of an argmax and
    three int() calls per segment: that loop over the 50 notes of an n-gram list was ~40 % of it."""
    lens = hi - lo
    offsets = np.cumsum(lens) - lens                     # where each segment starts in the gathered values
    idx = np.arange(int(lens.sum())) + np.repeat(lo - offsets, lens)
    got = values[idx]
    best = got == np.repeat(np.maximum.reduceat(got, offsets), lens)
    first = np.flatnonzero(best)                         # ascending, so each segment's first maximum leads
    segment = np.repeat(np.arange(len(lo)), lens)[first]
    # where the segment changes, not np.unique: its sort was a third of this function (~10 us a call)
    return idx[first[np.flatnonzero(np.concatenate(([True], segment[1:] != segment[:-1])))]]


def _placed(view, chunk_ids) -> tuple[np.ndarray, np.ndarray]:
    """(vault places of the chunk ids this view holds, mask of those ids among `chunk_ids`)."""
    ids = np.asarray(chunk_ids, np.int64)
    keep = (ids >= 0) & (ids < len(view.place_of))
    keep[keep] = view.place_of[ids[keep]] >= 0
    return view.place_of[ids[keep]], keep


def fts_best(view, conn, trigrams: list[str], limit: int) -> tuple[np.ndarray, np.ndarray]:
    """(rowids, bm25) of the `limit` best FTS5 rows of the OR of `trigrams`, and every row tied with the last,
    best first: computed in memory from FTS5's own counts (search_core.search.fts_bm25: the same floats and
    order; the check's 12-trigram query 1.44 ms p50 on johngrib by FTS5) where it can be, else by FTS5 itself
    (_fts_best), which stays the reference."""
    scorer = view.fts_bm25()
    got = scorer.best(trigrams, limit) if scorer is not None else None
    if got is not None:
        return got
    rows = _fts_best(conn, fts_match_expr(trigrams), limit)
    return np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.float64)


def _fts_best(conn, match: str, limit: int) -> list[tuple[int, float]]:
    """(rowid, bm25) of the `limit` best FTS5 rows, and every row tied with the last of them: which of
    equal scores LIMIT keeps is FTS5's row order (row ids), so the cut takes them all and the caller
    orders them by the vault. FTS5 scores every row the query matches whatever the LIMIT, so the first
    query asks for tie_room(limit) rows: a tie at the cut is then seen whole in the same pass, and
    only a tie running past them costs a second query, for every row scoring at least the tie. (A vault
    that repeats its text ties often: at 255,000 chunks the second query was half the channel's time.)"""
    score = f"bm25(chunks_fts, {', '.join(map(str, FIELD_WEIGHTS))})"
    if limit <= 0:
        return []
    room = tie_room(limit)
    rows = conn.execute(f"SELECT rowid, {score} AS s FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s LIMIT ?",
                        (match, room)).fetchall()
    if len(rows) <= limit:
        return rows
    cut = rows[limit - 1][1]
    within = limit + next((i for i, r in enumerate(rows[limit:]) if r[1] != cut), len(rows) - limit)
    if within < len(rows) or len(rows) < room:
        return rows[:within]
    return conn.execute(f"SELECT rowid, {score} AS s FROM chunks_fts WHERE chunks_fts MATCH ? AND {score} <= ? "
                        "ORDER BY s", (match, cut)).fetchall()


def tie_room(limit: int) -> int:
    """How many rows _fts_best's first query reads to keep `limit`: TIE_ROOM times, at least one more."""
    return max(limit + 1, int(limit * TIE_ROOM))


def best_chunk_per_note(places: list[np.ndarray], weights: list[np.ndarray], depth: int, place_note: np.ndarray,
                        chunk_at: np.ndarray, note_ids: tuple) -> NoteList:
    """The `depth` best notes of chunks scored by several sources, each note at its best chunk: `places` are vault
    places (view.place_of), one array per source with its `weights`; a chunk's score is its sources' weights
    summed in source order (FTS5's score, then each short token's idf: the same floats as a dict loop). A note's
    score is its best chunk's, a tie to the earlier chunk; notes by score, ties in vault order. That is the
    first chunk of each note in a best-first walk of the chunks, ties by place, which the list was before: here
    each note's maximum over its run of the ascending places (place_note: each place's note number, in vault
    order), the best `depth` notes of those, and only their runs searched for the place at the maximum, instead
    of a sort and a walk in Python (johngrib's fast path: 0.28 ms for the walk, 5,312 postings at the median).

    An English question's short tokens ("i", "a", "is", "on") sit in most chunks of a large wiki (one johngrib
    question summed 58,000 postings; a short token ties 500,000 places at 567,010 chunks), so only the places
    scoring at least the `depth` x 8-th best are read when they hold `depth` notes: a note with none of them
    scores below every note that has one, and a note's best place is among them when any of its places is."""
    if not places or not any(len(a) for a in places):
        return NoteList.empty(note_ids)
    every = np.concatenate(places) if len(places) > 1 else places[0]
    size = int(every.max()) + 1
    # one bincount over every source's places: it adds each place's weights in input order from 0.0, so in source
    # order, the floats of adding the sources one by one (np.add.at, or a bincount each), in one pass over the place
    # range instead of one per large source (42 us against 49 on the demo's check lists, 75 against 90 on AutoRAG-ko)
    score = np.bincount(every, weights=np.concatenate(weights) if len(weights) > 1 else weights[0], minlength=size)
    seen = np.zeros(size, bool)
    seen[every] = True
    cand = np.flatnonzero(seen)                          # ascending: each note's places are one run
    notes = None
    head = depth * 8
    if len(cand) > head:
        sc = score[cand]
        top = cand[sc >= -np.partition(-sc, head - 1)[head - 1]]
        notes = place_note[top]
        if np.count_nonzero(notes[1:] != notes[:-1]) + 1 >= depth:
            cand = top
        else:
            notes = None
    if notes is None:
        notes = place_note[cand]
    sc = score[cand]
    # each note's run of `cand`: its maximum, the best `depth` notes by it (ties by index: by note number, vault
    # order), then the first place at the maximum in those notes' runs only (the runs of every note compared
    # whole were 47 against 59 us a search on the johngrib subset's fast path)
    starts = np.flatnonzero(np.concatenate(([True], notes[1:] != notes[:-1])))
    best = np.maximum.reduceat(sc, starts)
    order = top_stable(best, depth)
    first = _first_best_in_segments(sc, starts[order], np.append(starts[1:], len(cand))[order])
    return NoteList(notes[starts[order]].astype(np.int64), chunk_at[cand[first]].astype(np.int64), best[order],
                    note_ids)


def split_query(query: str) -> list[str]:
    parts = [p.strip(" ?!.") for p in SPLIT_RE.split(query)]
    parts = [p for p in parts if len(p) >= 2]
    return parts if len(parts) >= 2 else []


# A sub-question holding at least half of the query's characters is searched with the query's own vector
# instead of one of its own: its e5-small vector is the query's in all but name (cosine with the query's
# vector p50 0.969, p5 0.923 over the 117 such parts of bench_latency's 566 questions, against p50 0.913
# for the other parts), and a vector costs ~1.4 ms a token on one thread. Compound questions set the
# search's p95; without these passes their embedding work falls by a fifth (21 %), and hit@5 and MRR stay
# the same on the shipped sets (BENCHMARKS.md, latency). At most one part can be that long. A one-word
# part is a name, and its vector is its own (cosine with the query 0.906 for "GraphRAG" in "GraphRAG와
# RRF 점수"): it is embedded, and in a short query that costs little.
DOMINANT_PART = 0.5


def shares_query_vector(part: str, query: str) -> bool:
    """Is this sub-question most of the query (searched with the query's vector, not embedded)?"""
    return len(part) >= DOMINANT_PART * len(query) and len(part.split()) >= 2


def merge_parts(lists: list[list[ChannelHit]], depth: int) -> list[ChannelHit]:
    """Sub-question lists fused by plain RRF (k=60): a note that answers several parts rises, and
    each part's best notes still come early."""
    from search_core.search.fusion import weighted_rrf
    names = [f"part{i}" for i in range(len(lists))]
    fused = weighted_rrf({n: [h.note_id for h in l] for n, l in zip(names, lists)}, {n: 1.0 for n in names})
    chunk = {}
    for l in lists:
        for h in l:
            chunk.setdefault(h.note_id, h.chunk_id)
    return [ChannelHit(f.id, chunk[f.id], f.score) for f in fused[:depth]]


def names_in(view, qnorm: str) -> list[str]:
    """The entity names of 2+ characters inside the normalised query, in the view's name order. A vault's
    names outnumber a query's substrings past a few thousand notes (92,000 names at 555,000 chunks: a loop
    over them ~20 ms a query), so then the query's substrings up to the longest name are looked up instead."""
    names = view.entity_names
    if not names:
        return []
    position, longest = view.entity_name_index()
    n = len(qnorm)
    if len(names) <= n * min(longest, n):
        return [norm for norm in names if len(norm) >= 2 and norm in qnorm]
    found = {position[qnorm[i:j]] for i in range(n) for j in range(i + 2, min(n, i + longest) + 1)
             if qnorm[i:j] in position}
    return [names[i] for i in sorted(found)]


def entity(view, query: str, qvec: np.ndarray, depth: int, min_cosine: float,
           dense_top: float | None = None, product: np.ndarray | None = None) -> list[ChannelHit]:
    """Entities (titles, aliases, tags) named in the query or close to it in embedding space,
    then the notes they stand for: the note itself, notes linking to it, notes carrying the tag.

    A name shared by many notes (a tag, or a PDF title over 30 passages) says little about each one:
    its weight is divided by log2(1 + notes); and when every candidate holds the same evidence, nothing tells
    them apart but their cosine, which the dense list already gives: the list is then empty. The graph picks the candidates; their order is the
    query's cosine with their best chunk plus ENTITY_BONUS per unit of graph evidence.

    A name counts as matched by embedding only when it is at least as close to the query as the best
    chunk in the index (dense_top): the query then reads like the name itself, not like content that
    happens to sit near a title. The test is scale-free, so it holds for every embedder. product: the dense
    channel's dense_product of the same qvec, when the caller has it (rank_entity_notes reads it)."""
    qnorm = normalize_name(query)
    strength: dict[str, float] = {}
    for norm in names_in(view, qnorm):
        strength[norm] = 1.0 + min(len(norm), 20) / 20           # longer names are more specific
    if view.entity_matrix.shape[0]:
        sims = matvec(view.entity_matrix, qvec)
        floor = max(min_cosine, dense_top if dense_top is not None else -1.0)
        for i in top_stable(sims, 5):                       # entity rows are in note order: ties too
            if sims[i] >= floor:
                norm = view.entity_names[int(i)]
                strength[norm] = max(strength.get(norm, 0.0), float(sims[i]))
    note_score: dict[str, float] = {}

    def add(nid, s):
        if nid in view.notes:
            note_score[nid] = note_score.get(nid, 0.0) + s

    for norm, s in strength.items():
        target = view.entity_targets[norm]
        notes = target["notes"]
        for nid in notes:
            w = s / math.log2(1 + len(notes))                     # 1 note: full weight; 30 notes: /5
            add(nid, w)
            for src in view.links_in.get(nid, ()):
                add(src, 0.3 * w)
        if target["tag"]:
            members = view.tag_members.get(norm, [])
            for m in members:
                add(m, 0.5 * s / math.log2(2 + len(members)))   # a tag on 100 notes says little about each
    if len(note_score) >= 2 and len(set(note_score.values())) == 1:
        # Two or more notes with one and the same graph evidence (a name every paragraph of an article
        # carries): ranked by their cosine alone, the list is the dense list's order over them, and fused it
        # counts the dense evidence twice. On the KorQuAD dev sample (200 questions) 48 of the 49 non-empty lists
        # were that, and fused they put the article's paragraph the dense list prefers above the one the
        # keyword lists found. By the default rule: KorQuAD MRR@10 tune 0.978 -> 0.980, holdout 0.965 -> 0.967,
        # johngrib 0.9213 -> 0.9215, demo, AutoRAG-ko, baekjungho, hoonti06, voyager003 unchanged
        # (docs/lab-notes/peers-2026-12.md).
        return []
    return rank_entity_notes(view, qvec, note_score, depth, product)


def top_stable(values: np.ndarray, k: int) -> np.ndarray:
    """The indices of the k largest values, as np.argsort(-values, kind="stable")[:k] gives them (ties by index),
    without sorting the rest: the entity names' cosines are 92,000 at 567,010 chunks, and their full sort was
    3.8 % of a warm search's samples."""
    if len(values) <= k:
        return np.argsort(-values, kind="stable")
    cut = -np.partition(-values, k - 1)[k - 1]
    near = np.flatnonzero(values >= cut)                # ascending index: the stable sort keeps ties so
    return near[np.argsort(-values[near], kind="stable")][:k]


def rank_entity_notes(view, qvec: np.ndarray, note_score: dict[str, float], depth: int,
                      product: np.ndarray | None = None) -> list[ChannelHit]:
    """The first `depth` notes by the query's cosine with their best chunk plus ENTITY_BONUS per unit of graph
    evidence (ties by note id). Every note's best cosine is first taken from one product (view.note_maxima,
    within ENTITY_ROUNDING of the note's own), and only the notes within twice that of the depth-th are scored
    note by note: those scores, and so the list, are what scoring every note gives. product: the query's
    dense_product, which note_maxima then reads instead of gathering rows (IndexView.note_maxima)."""
    ids = list(note_score)
    if len(ids) > depth > 0:
        approx = view.note_maxima(qvec, ids, product) + ENTITY_BONUS * np.fromiter(note_score.values(), np.float64, len(ids))
        cut = np.partition(approx, len(ids) - depth)[len(ids) - depth]        # the depth-th highest
        ids = [ids[i] for i in np.flatnonzero(approx >= cut - 2 * ENTITY_ROUNDING).tolist()]
    scored = []
    for nid in ids:
        cid = view.best_chunk(qvec, nid)
        scored.append((view.cosine(qvec, nid, cid) + ENTITY_BONUS * note_score[nid], nid, cid))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [ChannelHit(nid, cid, sc) for sc, nid, cid in scored[:depth]]
