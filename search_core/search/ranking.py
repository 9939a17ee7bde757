"""Ranking as pure functions: channel lists + config (+ rerank scores) -> the final ordered note ids.

One function decides the order the system returns; `Searcher.rank` (and so `search`) returns its
first top_k, and evaluation scores its first K. Nothing else joins or re-sorts lists, so the list that
is scored is the list that is returned:

    fused      = weighted RRF over the channel lists (excluded notes dropped before ranking) + boost
    window     = fused[: max(rerank_depth, top_k)]          (what a reranker sees)
    final      = window re-sorted by rerank score (ties: fused order), then fused[len(window):]
    returned   = final[: top_k]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from search_core.config import SearchConfig
from search_core.search.fusion import Fused, community_boost, weighted_rrf

K_LIST = 10   # the ranked list evaluation keeps per question: enough for nDCG@10 and MRR@10


@dataclass(frozen=True)
class Ranking:
    fused: tuple            # Fused records in fused order (the --explain arithmetic)
    order: tuple            # Fused records in final order: the first top_k are the results
    scores: tuple           # per entry of `order`: the rerank score inside the window, else the fused score
    top_k: int
    reranked: int           # how many leading entries of `order` were re-sorted by a reranker

    @property
    def ids(self) -> tuple:
        """The final ordered note ids (as deep as was asked for)."""
        return tuple(f.id for f in self.order)

    @property
    def returned(self) -> tuple:
        """The ids `search` returns: the first top_k of the final order."""
        return self.ids[: self.top_k]


def fuse(lists: dict[str, list[str]], cfg: SearchConfig, *, exclude=frozenset(), community: dict | None = None,
         depth: int | None = None, ngram_lead: float = 0.0, cross_script: bool = False,
         alone_across: bool = False, dense_lead: float = 0.0) -> list[Fused]:
    """Weighted RRF + community boost. `depth`: how many fused records a caller will read; the boost can
    lift any candidate, so with a boost the whole list is built regardless. `ngram_lead`: the n-gram list's
    lead (channels.lead_margin), which picks its weight; `cross_script`: the question is asked across scripts
    (scripts.cross_script), which with a small lead picks the dense weight (SearchConfig.weights), as
    `alone_across` does with any lead (scripts.alone_across); `dense_lead`: the dense list's first note's cosine
    lead (channels.cosine_lead), which can raise its weight."""
    limit = None if cfg.community_boost or not depth else max(rerank_window(cfg), depth)
    fused = weighted_rrf(lists, cfg.weights(ngram_lead, cross_script, alone_across, dense_lead), cfg.rrf_k, limit=limit, exclude=exclude)
    return community_boost(fused, community or {}, cfg.community_boost)


# A query names an index page when one of its names (title, alias, file name, id), letters and digits
# only, is inside the query and is at least half of it: "root index" and "root-index page" name johngrib's
# root-index, "sidebar" names `_sidebar`; "RAG 파이프라인 설계" does not name a page titled "RAG" (3 of 11).
NAMED_SHARE = 0.5
_NOT_NAME_RE = re.compile(r"[\W_]+", re.UNICODE)


# named_in reads every index page's names on every search: the same strings each time, so each is normalised
# once (a regex sub each was 74 per search on the demo when it ran twice a search, ~7 % of a fast-path answer's
# profile). Bounded: a server's queries pass through here too.
@lru_cache(maxsize=1 << 16)
def _letters(text: str) -> str:
    return _NOT_NAME_RE.sub("", text.lower())


def named_in(query: str, names_of: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The ids whose names the query asks for (NAMED_SHARE): those with the longest name inside the query,
    by id ("ai index" asks for ai/index, not for every page whose file is called index)."""
    q = _letters(query)
    found = {}
    for nid, names in names_of.items():
        best = max((len(n) for n in map(_letters, names) if len(n) >= 2 and n in q), default=0)
        if best and best >= NAMED_SHARE * len(q):
            found[nid] = best
    longest = max(found.values(), default=0)
    return tuple(sorted(nid for nid, n in found.items() if n == longest))


def lead_with(fused: list[Fused], ids: tuple[str, ...]) -> list[Fused]:
    """`ids` first, scored as the head (the difference is their "named" term; a note no channel returned
    gets a record of its own), then the rest in fused order: an index page asked for by name is the answer."""
    if not ids:
        return fused
    have = {f.id: f for f in fused}
    top = fused[0].score if fused else 0.0
    channels = fused[0].ranks if fused else {}
    head = []
    for i in ids:
        f = have.get(i) or Fused(i, 0.0, {c: None for c in channels}, {})
        head.append(Fused(i, max(top, f.score), f.ranks, {**f.terms, "named": max(top - f.score, 0.0)}))
    return head + [f for f in fused if f.id not in set(ids)]


def rerank_window(cfg: SearchConfig) -> int:
    """How many fused candidates a reranker re-sorts (0 without a reranker)."""
    return max(cfg.rerank_depth, cfg.top_k) if cfg.reranker != "none" else 0


def window(fused: list[Fused], cfg: SearchConfig) -> list[Fused]:
    """The candidates a reranker must score, in fused order."""
    return list(fused[: rerank_window(cfg)])


def final_ranking(fused: list[Fused], cfg: SearchConfig, rerank_scores=None, *, depth: int = K_LIST) -> Ranking:
    """The final order, `max(depth, top_k)` deep. rerank_scores: one score per entry of window(fused, cfg)
    (None when the config has no reranker)."""
    fused = list(fused)
    n = len(window(fused, cfg))
    if n and rerank_scores is None:
        raise ValueError(f"the config reranks with {cfg.reranker!r}: pass one rerank score per window entry ({n})")
    if n:
        rs = [float(s) for s in rerank_scores]
        if len(rs) != n:
            raise ValueError(f"{len(rs)} rerank scores for a window of {n} candidates")
        idx = sorted(range(n), key=lambda i: (-rs[i], i))     # ties keep the fused order
        head, head_scores = [fused[i] for i in idx], [rs[i] for i in idx]
    else:
        head, head_scores = [], []
    want = max(depth, cfg.top_k)
    tail = fused[n:max(want, n)]
    order = (head + tail)[:want]
    scores = (head_scores + [f.score for f in tail])[:want]
    return Ranking(tuple(fused), tuple(order), tuple(scores), cfg.top_k, min(n, want))


def rank_lists(lists: dict[str, list[str]], cfg: SearchConfig, *, exclude=frozenset(), community=None,
               score=None, depth: int = K_LIST) -> Ranking:
    """Channel lists -> final ranking in one call. score(window: list[Fused]) -> rerank scores."""
    fused = fuse(lists, cfg, exclude=exclude, community=community, depth=depth)
    cands = window(fused, cfg)
    return final_ranking(fused, cfg, score(cands) if cands and score else None, depth=depth)
