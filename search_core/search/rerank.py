"""How a Searcher scores a reranker's (query, passage) pairs and what time it charges for them: a
RerankScorer, given to the Searcher when it is made, so every search through it is cached and timed alike.

The default caches nothing and charges the stopwatch's time (`search`, the servers, the A/B, which times
each question's reranking). The sweep gives all its searchers one shared scorer: a round re-ranks the same
windows as the last (cached scores), and every pair is charged the reranker's per-pair cost, measured once
per model, cold, so a cached reranker never looks free.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from search_core.models import get_reranker


@dataclass(frozen=True)
class RerankScorer:
    # (reranker, query, note id, chunk id) -> score; None: every pair is scored again
    cache: dict | None = None
    # reranker -> ms per pair, taken on the model's first window (after a warm-up call); None: the
    # stopwatch's time is charged
    cost: dict | None = None

    @classmethod
    def shared(cls) -> "RerankScorer":
        """Scores cached and time charged per pair: the sweep's, one for all its searchers."""
        return cls(cache={}, cost={})

    def scores(self, name: str, query: str, items: list[tuple], passage: Callable[[int | None, str], str]) -> list[float]:
        """Reranker `name`'s score of `query` against each (note id, chunk id) in `items`; `passage(chunk id,
        note id)` is the text it reads. Only the pairs not cached are scored, in one call."""
        cache = self.cache if self.cache is not None else {}
        keys = [(name, query, nid, cid) for nid, cid in items]
        todo = [i for i, k in enumerate(keys) if k not in cache]
        if todo:
            model = get_reranker(name)
            passages = [passage(items[i][1], items[i][0]) for i in todo]
            if self.cost is not None and name not in self.cost:
                model.score(query, passages[:1])               # warm-up: loading the model is not per pair
                t0 = time.perf_counter()
                scores = model.score(query, passages)
                self.cost[name] = (time.perf_counter() - t0) * 1000 / len(passages)
            else:
                scores = model.score(query, passages)
            for i, sc in zip(todo, scores):
                cache[keys[i]] = float(sc)
        return [cache[k] for k in keys]

    def charged_ms(self, name: str, pairs: int, measured_ms: float) -> float:
        """The time a search is charged for reranking `pairs` pairs with `name`: its per-pair cost when
        this scorer keeps one, else what the stopwatch measured."""
        if self.cost is not None and name in self.cost:
            return pairs * self.cost[name]
        return measured_ms
