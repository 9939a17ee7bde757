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


def weighted_rrf(lists: dict[str, list[str]], weights: dict[str, float], k: float = 60) -> list[Fused]:
    """Fuse ranked id lists. Ties break by the best single rank, then by id, so output is deterministic."""
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    ranks: dict[str, dict[str, int]] = {}
    for channel, ids in lists.items():
        seen = set()
        for pos, doc in enumerate(ids, 1):
            if doc in seen:          # a channel lists a document once; later repeats are ignored
                continue
            seen.add(doc)
            ranks.setdefault(doc, {})[channel] = pos
    fused = []
    for doc, r in ranks.items():
        terms = {c: weights.get(c, 0.0) / (k + pos) for c, pos in r.items() if weights.get(c, 0.0) != 0.0}
        if not terms:
            continue
        fused.append(Fused(doc, sum(terms.values()), {c: r.get(c) for c in lists}, terms))
    fused.sort(key=lambda f: (-f.score, min(f.ranks[c] for c in f.terms), f.id))
    return fused


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
