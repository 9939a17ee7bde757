"""Weighted Reciprocal Rank Fusion, as pure functions.

score(d) = sum over channels c of  w_c / (k + rank_c(d)),  rank starting at 1 (Cormack et al. 2009).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fused:
    id: str
    score: float
    ranks: dict          # channel -> 1-based rank, or None where the channel did not return it
    terms: dict          # channel -> w_c / (k + rank_c): the arithmetic --explain shows


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
