"""The search behind the recall path: one warm Searcher opened lazily, with query vectors from a
small cache behind a two-method interface (get/put), so the engine's own cache can replace it."""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from . import SearchCoreError
from .config import SearchConfig, load_config


# -- the query-embedding cache behind a small interface ------------------------------------------------
class QueryVectorCache:
    """get(text) -> vector | None, put(text, vector). A tiny thread-safe LRU; the engine's own cache
    (issue 11) can replace it: anything with these two methods plugs into SearchBackend."""

    def __init__(self, maxsize: int = 2048):
        self.maxsize, self.hits, self.misses = maxsize, 0, 0
        self._d: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            v = self._d.get(key)
            if v is None:
                self.misses += 1
                return None
            self._d.move_to_end(key)
            self.hits += 1
            return v

    def put(self, key, value) -> None:
        with self._lock:
            self._d[key] = value
            self._d.move_to_end(key)
            while len(self._d) > self.maxsize:
                self._d.popitem(last=False)


class _CachedQueryEmbedder:
    """The searcher's embedder with query vectors served from a cache; passages pass through."""

    def __init__(self, inner, cache):
        self._inner, self._cache = inner, cache

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def embed(self, texts, *, is_query=False):
        import numpy as np
        if not is_query or len(texts) != 1:
            return self._inner.embed(texts, is_query=is_query)
        key = (self._inner.name, texts[0])     # a reopened index may bring another embedder
        v = self._cache.get(key)
        if v is None:
            v = self._inner.embed(texts, is_query=True)[0]
            self._cache.put(key, v)
        return np.asarray([v])


class SearchBackend:
    """One warm Searcher over `db`, opened lazily (a missing or locked index fails this call, not the
    process) and reopened after a failure. Not thread-safe by itself: RecallEngine serializes calls."""

    def __init__(self, db: str | Path, cfg: SearchConfig | None = None, *, config_path: str | Path | None = None,
                 query_cache: QueryVectorCache | None = None):
        self.db = Path(db)
        self._cfg = cfg
        self._config_path = config_path
        self.query_cache = query_cache if query_cache is not None else QueryVectorCache()
        self.searcher = None
        self.cfg: SearchConfig | None = None

    def _open(self):
        if self.searcher is None:
            from .pipeline import Searcher
            s = Searcher(self.db)
            base = self._cfg or load_config(self._config_path)
            self.cfg = base.replace(embedder=s.embedder_name)
            s.embedder = _CachedQueryEmbedder(s.embedder, self.query_cache)
            self.searcher = s
        return self.searcher

    def search(self, query: str, top_k: int | None = None):
        try:
            s = self._open()
            cfg = self.cfg if top_k is None else self.cfg.replace(top_k=top_k)
            return s.search(query, cfg)
        except SearchCoreError as e:
            if "query is empty" not in str(e):
                self.reset()
            raise
        except Exception:
            self.reset()          # a locked/replaced file or a dead model server: start clean next call
            raise

    @property
    def fingerprint_key(self) -> str | None:
        return self.searcher.fingerprint_key if self.searcher is not None else None

    def reset(self):
        s, self.searcher = self.searcher, None
        if s is not None:
            try:
                s.close()
            except Exception:
                pass
