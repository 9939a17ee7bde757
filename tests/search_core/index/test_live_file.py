"""A live index file is opened only through SQLite. A process that holds connections to the index (a
server, a watcher, a sweep) and also opened the file any other way (a raw open() to read its header, a
second SQLite library) loses its POSIX locks on it at that descriptor's close; the next process to close
a connection then believes itself the last, checkpoints and unlinks the -wal and -shm, and the server's
later commits go to an unlinked WAL: the update is lost and every later search fails with "disk I/O error".

Real processes throughout: `autoresearch serve --watch` applies saves, and an ordinary `autoresearch
search` and `autoresearch index` run beside it. Every wait is a poll against a generous deadline."""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from search_core.index.check import check_before_update, check_index
from search_core.index.embed_cache import EmbeddingCache
from search_core.index.indexer import index_vault
from search_core.index.store import sqlite_file_problem
from tests.helpers import SMALL_VAULT, child_env, free_port, write_vault
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
from tests.helpers.live_file import assert_look_keeps_the_locks, wal_of

DEADLINE_S = 120


def poll(fn, what: str):
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        got = fn()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not within {DEADLINE_S} s: {what}")


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "tuner.cli", *map(str, args)], env=child_env(), cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def cli_search(db, cfg, query, cwd) -> list[str]:
    r = cli("search", query, "--db", db, "--config", cfg, "--json", cwd=cwd)
    assert r.returncode == 0, r.stdout + r.stderr
    return [h["note_id"] for h in json.loads(r.stdout)["results"]]


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:      # /healthz answers 503 while degraded, with the same body
        return json.loads(e.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def serve_search(url, query) -> tuple[int, list[str] | str]:
    req = urllib.request.Request(url + "/search", data=json.dumps({"query": query, "k": 5}).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, [h["note_id"] for h in json.loads(r.read())["results"]]
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def append(path, text):
    with path.open("a", encoding="utf-8") as f:
        f.write(text)


class ServingWatcher:
    """`autoresearch serve --db DB --watch VAULT` on 127.0.0.1 over the small vault indexed by e5-small (the
    default cache beside the index, as the watcher uses it), and what the other processes of a test run."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.vault = write_vault(tmp_path / "vault", SMALL_VAULT)
        self.db = tmp_path / "idx" / "w.sqlite"
        index_vault(self.vault, self.db)
        self.cfg = tmp_path / "cfg.toml"
        self.cfg.write_text("threshold = 0.0\n")
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "serve", "--db", str(self.db), "--port",
                                      str(port), "--config", str(self.cfg), "--log", str(tmp_path / "log.sqlite"),
                                      "--timeout", "30", "--watch", str(self.vault)],
                                     env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_path)
        self.updates = poll(lambda: self._updated(1), "the server up and its watcher caught up")["updates"]

    def _updated(self, n):
        w = (get(self.url + "/healthz") or {}).get("watch") or {}
        return w.get("updates", 0) >= n and w.get("pending") == 0 and w

    def save(self, rel, text):
        """Append to a note and wait until the server's watcher has applied it."""
        append(self.vault / rel, text)
        self.updates += 1
        poll(lambda: self._updated(self.updates), f"the save of {rel} applied by the server's watcher")

    def search(self, query):
        return serve_search(self.url, query)

    def cli_search(self, query):
        return cli_search(self.db, self.cfg, query, self.tmp)

    def cli(self, *args):
        r = cli(*args, cwd=self.tmp)
        assert r.returncode == 0, r.stdout + r.stderr

    def stop(self):
        health = get(self.url + "/healthz")
        self.proc.terminate()
        out = self.proc.communicate(timeout=30)[0].decode(errors="replace")
        assert "Traceback" not in out, out
        assert health["status"] == "ok" and health["watch"]["last_error"] is None, health


@pytest.fixture
def serving(tmp_path):
    s = ServingWatcher(tmp_path)
    try:
        yield s
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.communicate(timeout=30)


def test_another_process_searching_and_indexing_loses_no_update_of_a_serving_watcher(serving):
    s = serving
    s.save("ai/rrf.md", "\n\nFlibbertaxel 재색인 확인용 문장.\n")
    status, hits = s.search("Flibbertaxel 재색인")
    assert status == 200 and "ai/rrf" in hits, (status, hits)

    # an ordinary search and the daemon's nightly index run, from other processes
    assert "ai/rrf" in s.cli_search("Flibbertaxel 재색인")
    wal_after_search = wal_of(s.db).exists()
    s.cli("index", s.vault, "--db", s.db, "--json")
    wal_after_index = wal_of(s.db).exists()

    # the server's next update must land in the file every process reads
    s.save("life/kimchi.md", "\n\nZorblequint 두번째 저장 문장.\n")
    status, hits = s.search("Zorblequint 두번째")
    assert status == 200, f"the server cannot search after another process used its index: {hits}"
    assert "life/kimchi" in hits, hits
    assert "life/kimchi" in s.cli_search("Zorblequint 두번째"), \
        "the server's update is not in the index a fresh process reads: it went to an unlinked WAL"
    assert "ai/rrf" in s.cli_search("Flibbertaxel 재색인")
    assert wal_after_search and wal_after_index, \
        "another process's close unlinked the -wal under the server's live connections"
    s.stop()


# Every look at a file that may be live, in the process that may hold it: none may drop the locks.
LOOKS = {
    "sqlite_file_problem": sqlite_file_problem,
    "check_before_update": check_before_update,
    "check_index quick": lambda db: check_index(db, quick=True),
}


@pytest.mark.parametrize("name", sorted(LOOKS))
def test_looking_at_a_live_file_keeps_this_process_s_locks(name, small_index):
    assert_look_keeps_the_locks(small_index, LOOKS[name])


def test_the_embedding_cache_checked_while_another_cache_connection_is_live(tmp_path, small_vault):
    cache = tmp_path / "cache" / "embed-cache.sqlite"
    index_vault(small_vault, tmp_path / "idx" / "index.sqlite", embedder=FAKE_EMBEDDER, cache=cache)
    held = EmbeddingCache(cache)
    try:
        held.conn
        assert_look_keeps_the_locks(cache, lambda p: EmbeddingCache(p).conn.close())
    finally:
        held.close()


@pytest.mark.parametrize("content, why", [(b"", "empty"), (b"hello, not a database\n" * 40, "not a database"),
                                          (b"SQLite format 3\x00" + b"\xff" * 200, "")])
def test_a_file_that_is_not_a_database_is_named_by_sqlite(tmp_path, content, why):
    p = tmp_path / "x.sqlite"
    p.write_bytes(content)
    problem = sqlite_file_problem(p)
    assert problem and why in problem, problem
    assert sorted(x.name for x in tmp_path.iterdir()) == ["x.sqlite"], "a look leaves no -wal, -shm or journal"


def test_a_database_has_no_problem_and_a_folder_or_missing_file_has_one(tmp_path, small_index):
    assert sqlite_file_problem(small_index) is None
    assert "folder" in sqlite_file_problem(tmp_path)
    assert "no such file" in sqlite_file_problem(tmp_path / "missing.sqlite")


def test_a_path_with_uri_characters_is_read_as_a_path(tmp_path, small_index):
    """The read-only and no-trace connections use `file:` URIs: "#", "?" and "%" in a folder name are part of
    the path, not a fragment or a query string."""
    from search_core.index.store import connect, get_meta
    folder = tmp_path / "노트 #2 ?100%"
    folder.mkdir()
    db = folder / "index.sqlite"
    src, dst = connect(small_index), connect(db)
    src.backup(dst)
    src.close()
    dst.close()
    assert sqlite_file_problem(db) is None
    c = connect(db, readonly=True)
    try:
        assert get_meta(c, "fingerprint")["embedder"]["name"] == FAKE_EMBEDDER
    finally:
        c.close()
