"""Weighted Reciprocal Rank Fusion, as pure functions.

score(d) = sum over channels c of  w_c / (k + rank_c(d)),  rank starting at 1 (Cormack et al. 2009).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_ABSENT = np.iinfo(np.int64).max      # "best rank" of a document no weighted channel holds


@dataclass(frozen=True)
class Fused:
    id: str
    score: float
    ranks: dict          # channel -> 1-based rank, or None where the channel did not return it
    terms: dict          # channel -> w_c / (k + rank_c): the arithmetic --explain shows


@dataclass(frozen=True)
class FusedArrays:
    """rrf_arrays' answer, in fused order: document numbers, their scores, and each channel's 1-based rank of
    them (0 where the channel did not return the document)."""
    docs: np.ndarray         # int64
    scores: np.ndarray       # float64
    ranks: np.ndarray        # int64, one row per channel, one column per entry of `docs`


def rrf_arrays(lists: list[np.ndarray], weights: list[float], k: float = 60, *, limit: int | None = None,
               exclude: np.ndarray | None = None) -> FusedArrays:
    """Weighted RRF over ranked lists of document numbers (non-negative ints), one weight per list. Ties break
    by the best single rank among the weighted lists, then by the smaller number, so numbers given in id order
    fuse in weighted_rrf's order. A list's repeats are ignored after its first (they still take their rank
    slot); `exclude` (a bool per document number, or None) drops documents before ranking, so the next ones
    move up. Each document's sum adds its lists' terms in list order from 0.0, as weighted_rrf's loop did:
    the same floats. `limit`: the best `limit` only.

    Why a second implementation beside weighted_rrf: the fast path fuses two 50-note keyword lists whose notes
    are already numbers (the view's vault order) and needs no Fused record for most of them; there this is
    ~35 us against ~210 us for weighted_rrf's records. weighted_rrf keeps its dict loop because its callers
    hand it id strings and read records: numbering the ids and building the records around this function was
    slower than the loop on every shape measured (one 50-id list 120 vs 96 us, two 81 vs 69 us at limit 10,
    four 439 vs 390 us). tests/search_core/search/test_fusion.py holds the two to the same ids and floats."""
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    lists = [np.asarray(a, np.int64) for a in lists]
    if exclude is not None:
        lists = [a[~_mask(exclude, a)] if len(a) else a for a in lists]
    # the documents renumbered 0..n-1 in their order (np.unique sorts): the arrays below are as long as the
    # documents the lists hold, not as the largest number (a note number of a 92,000-note vault)
    docs_in, slot = np.unique(np.concatenate(lists) if lists else np.zeros(0, np.int64), return_inverse=True)
    n = len(docs_in)
    score = np.zeros(n, np.float64)
    best = np.full(n, _ABSENT, np.int64)
    ranks = np.zeros((len(lists), n), np.int64)
    at = 0
    for c, (a, w) in enumerate(zip(lists, weights)):
        docs, at = slot[at:at + len(a)], at + len(a)
        pos = np.arange(1, len(docs) + 1, dtype=np.int64)
        ranks[c, docs] = pos
        if np.count_nonzero(ranks[c]) < len(docs):        # a repeat: keep each document's first rank only
            by_doc = np.argsort(docs, kind="stable")
            repeat = np.zeros(len(docs), bool)
            repeat[by_doc[1:]] = docs[by_doc[1:]] == docs[by_doc[:-1]]
            docs, pos = docs[~repeat], pos[~repeat]
            ranks[c, docs] = pos
        if w != 0.0:
            score[docs] += w / (k + pos)       # a list's documents are distinct now: one term each
            best[docs] = np.minimum(best[docs], pos)
    cand = np.flatnonzero(best != _ABSENT)     # ascending, so by document number
    order = cand[np.lexsort((cand, best[cand], -score[cand]))]
    if limit is not None:
        order = order[:limit]
    return FusedArrays(docs_in[order], score[order], ranks[:, order])


def _mask(exclude: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """exclude[docs], a document past the mask's end counted as not excluded."""
    out = np.zeros(len(docs), bool)
    inside = docs < len(exclude)
    out[inside] = exclude[docs[inside]]
    return out


def weighted_rrf(lists: dict[str, list[str]], weights: dict[str, float], k: float = 60, *,
                 limit: int | None = None, exclude=frozenset()) -> list[Fused]:
    """Fuse ranked id lists. Ties break by the best single rank, then by id, so output is deterministic.
    `exclude` drops ids before ranking; `limit` builds records for the best `limit` only (the tuner
    re-fuses 114 questions per round, and most of the 200 candidates per question are never read)."""
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    ranks: dict[str, dict[str, int]] = {}
    for channel, ids in lists.items():
        seen = set()
        pos = 0
        for doc in ids:
            if doc in exclude:      # dropped before ranking: the next document moves up into its slot
                continue
            pos += 1
            if doc in seen:         # a channel lists a document once; later repeats are ignored
                continue
            seen.add(doc)
            r = ranks.get(doc)
            if r is None:
                r = ranks[doc] = {}
            r[channel] = pos
    scored = []
    for doc, r in ranks.items():
        score, best = 0.0, None
        for c, pos in r.items():
            w = weights.get(c, 0.0)
            if w != 0.0:
                score += w / (k + pos)
                best = pos if best is None or pos < best else best
        if best is not None:
            scored.append((-score, best, doc))
    scored.sort()
    if limit is not None:
        scored = scored[:limit]
    channels = list(lists)
    out = []
    for neg, _, doc in scored:
        r = ranks[doc]
        terms = {c: weights[c] / (k + pos) for c, pos in r.items() if weights.get(c, 0.0) != 0.0}
        out.append(Fused(doc, -neg, {c: r.get(c) for c in channels}, terms))
    return out


def community_boost(fused: list[Fused], community_of: dict[str, int], boost: float) -> list[Fused]:
    """Add `boost` to every note that shares the top note's community (related notes travel together)."""
    if boost == 0 or not fused:
        return fused
    top = community_of.get(fused[0].id)
    if top is None:
        return fused
    out = [Fused(f.id, f.score + (boost if community_of.get(f.id) == top else 0.0), f.ranks,
                 {**f.terms, **({"community": boost} if community_of.get(f.id) == top else {})}) for f in fused]
    out.sort(key=lambda f: (-f.score, f.id))
    return out
