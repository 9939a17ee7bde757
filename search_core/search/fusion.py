"""Weighted Reciprocal Rank Fusion, as pure functions.

score(d) = sum over channels c of  w_c / (k + rank_c(d)),  rank starting at 1 (Cormack et al. 2009).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter

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
    ~35 us against ~210 us for weighted_rrf's records. weighted_rrf keeps its dicts because its callers
    hand it id strings and read records: numbering the ids and building the records around this function was
    slower than its dicts on every shape measured (one 50-id list 120 vs 96 us, two 81 vs 69 us at limit 10,
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
    re-fuses 114 questions per round, and most of the 200 candidates per question are never read).

    Each list's places are one dict built in C, and each weighted list adds its terms to one flat score dict: a
    document's sum still adds its lists' terms from 0.0 in the lists' order (the same floats as a loop over each
    document's own ranks), without a dict per document. The documents are sorted by score alone, and only a run
    of equal scores among those kept is ordered by best rank and id: no question of the demo and AutoRAG-ko
    sets has one in its first 10 on the fast path, 18 of 591 with every channel. On those sets' real lists this
    is 22 us against 29 for the per-document loop it replaced (the fast path's one list, limit 10) and 50
    against 66 (every channel, limit 10: the tuner's re-fusion), the same records."""
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    places: dict[str, dict[str, int]] = {}
    for channel, ids in lists.items():
        if exclude:                 # dropped before ranking: the next document moves up into its slot
            ids = [doc for doc in ids if doc not in exclude]
        # reversed, so a repeat's later place is overwritten by its first: a channel lists a document once,
        # and a later repeat still takes its slot
        places[channel] = dict(zip(reversed(ids), range(len(ids), 0, -1)))
    weighted = [(c, weights.get(c, 0.0)) for c in places]
    weighted = [(c, w) for c, w in weighted if w != 0.0]
    score: dict[str, float] = {}
    for c, w in weighted:
        if not score:               # the first list with documents: every sum starts here, from 0.0
            score = {doc: 0.0 + w / (k + pos) for doc, pos in places[c].items()}
            continue
        for doc, pos in places[c].items():
            score[doc] = score.get(doc, 0.0) + w / (k + pos)
    ordered = sorted(score.items(), key=itemgetter(1), reverse=True)
    end = len(ordered) if limit is None else min(limit, len(ordered))
    head = [s for _, s in ordered[:end + 1]]
    if len(set(head)) < len(head):
        _break_ties(ordered, end, lambda doc: min(pos for c, _ in weighted if (pos := places[c].get(doc))))
    out = []
    for doc, s in ordered[:end]:
        ranks = {c: place.get(doc) for c, place in places.items()}
        out.append(Fused(doc, s, ranks, {c: w / (k + pos) for c, w in weighted if (pos := ranks[c])}))
    return out


def _break_ties(ordered: list[tuple[str, float]], end: int, best_rank) -> None:
    """Orders each run of equal scores in `ordered` (id, score; by score, best first) that reaches into its first
    `end` entries by best_rank(id), then by id, in place."""
    i = 0
    while i < end:
        j = i + 1
        while j < len(ordered) and ordered[j][1] == ordered[i][1]:
            j += 1
        if j > i + 1:
            ordered[i:j] = sorted(ordered[i:j], key=lambda item: (best_rank(item[0]), item[0]))
        i = j


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
