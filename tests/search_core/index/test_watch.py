"""Following a vault: `serve --watch` re-indexes a saved note and the server finds its new text; a note
that cannot be parsed is reported and skipped, and the watch goes on. Every wait is a poll against a
generous deadline (the machine may be busy), never a sleep that stands in for an assertion."""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

from search_core.index.indexer import index_vault
from search_core.index.stats import index_stats
from search_core.index.watch import VaultWatcher
from search_core.search.pipeline import Searcher
from search_core.paths import embed_cache_file
from tests.helpers import DEMO_VAULT, ROOT, free_port
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
from search_core.index.store import backup_copy

DEADLINE_S = 120


def poll(fn, what: str, deadline_s: float = DEADLINE_S):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        got = fn()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not within {deadline_s} s: {what}")


def make_vault(tmp_path):
    vault = tmp_path / "vault"
    shutil.copytree(DEMO_VAULT / "ai" / "rag", vault)
    return vault


def found(db, query: str, note_id: str) -> bool:
    s = Searcher(db)
    try:
        return note_id in [h.note_id for h in s.search(query).hits]
    finally:
        s.close()


def test_the_watcher_indexes_saves_and_skips_a_note_it_cannot_parse(tmp_path, shared_cache):
    vault = make_vault(tmp_path)
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)   # the watcher runs in this process
    w = VaultWatcher(vault, db, cache=shared_cache).start()
    try:
        poll(lambda: w.status()["caught_up_at"], "the first catch-up")
        (vault / "broken.md").write_bytes(b"\x00\x01binary\x00" * 50)
        poll(lambda: any(s["path"].endswith("broken.md") for s in (w.status()["last_update"] or {}).get("skipped", [])),
             "the unparsable note reported as skipped")
        assert w.status()["running"] and w.status()["last_error"] is None
        with (vault / "bm25.md").open("a", encoding="utf-8") as f:
            f.write("\n\nQuarzelbrot 색인은 저장 직후에 갱신된다.\n")
        poll(lambda: found(db, "Quarzelbrot", "bm25"), "the saved text found by search")
        # a folder moved in raises one event, for the folder: its notes are indexed all the same
        shutil.copytree(DEMO_VAULT / "ai" / "agents", tmp_path / "outside")
        n_moved = len(list((tmp_path / "outside").rglob("*.md")))
        before = index_stats(db)["notes"]
        os.rename(tmp_path / "outside", vault / "agents")
        poll(lambda: index_stats(db)["notes"] == before + n_moved, "the notes of a folder moved into the vault")
        # the move may raise a second batch of events after the notes are in: caught up once it is indexed too
        state = poll(lambda: (lambda st: st if st["pending"] == 0 else None)(index_stats(db)["watch"]),
                     "the watch caught up with the move")
        assert state["running"] and state["caught_up_at"]
    finally:
        w.stop()
    assert not w.status()["running"]


SECRET = "root:x:0:0:Vorpalquin:/root:/bin/bash"


def holding(db, text: str) -> list:
    """The notes a search for `text` returns whose chunk holds it."""
    s = Searcher(db)
    try:
        return [h.note_id for h in s.search(text).hits if text in s.chunk_text(h.chunk_id)[1]]
    finally:
        s.close()


def indexed(db, note_id: str) -> bool:
    from search_core.index.store import connect
    c = connect(db)
    try:
        return c.execute("SELECT 1 FROM notes WHERE id = ?", (note_id,)).fetchone() is not None
    finally:
        c.close()


def test_the_watcher_skips_a_link_out_of_the_vault_and_says_so_once(tmp_path, shared_cache):
    """`ln -s /etc/passwd vault/passwd-link.md` while the watch runs: the file is never indexed, the update
    reports the link with the reason (once to on_skip, however many saves follow), and a link to a note
    inside the vault is indexed."""
    vault = make_vault(tmp_path)
    secret = tmp_path / "elsewhere" / "passwd"
    secret.parent.mkdir()
    secret.write_text(SECRET + "\n", encoding="utf-8")
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    told = []
    w = VaultWatcher(vault, db, cache=shared_cache, on_skip=told.append).start()
    try:
        poll(lambda: w.status()["caught_up_at"], "the first catch-up")
        os.symlink(secret, vault / "passwd-link.md")
        os.symlink("bm25.md", vault / "bm25-link.md")
        poll(lambda: indexed(db, "bm25-link"), "the link inside the vault indexed")
        skipped = poll(lambda: [s for s in (w.status()["last_update"] or {}).get("skipped", [])
                                if s["path"].endswith("passwd-link.md")], "the link out of the vault reported")
        assert f"symbolic link to a file outside the vault ({secret})" in skipped[0]["reason"]
        assert holding(db, SECRET) == []
        with (vault / "bm25.md").open("a", encoding="utf-8") as f:     # another save: reported, not told again
            f.write("\n\nGlimmerwhisk 저장.\n")
        poll(lambda: found(db, "Glimmerwhisk", "bm25"), "the next save indexed")
        assert [os.path.basename(s.path) for s in told] == ["passwd-link.md"]
        assert holding(db, SECRET) == [] and w.status()["last_error"] is None
    finally:
        w.stop()


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:      # /healthz answers 503 while degraded, with the same body
        return json.loads(e.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def _search(url, query):
    req = urllib.request.Request(url + "/search", data=json.dumps({"query": query, "k": 5}).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return [h["note_id"] for h in json.loads(r.read())["results"]]


def test_serve_watch_finds_the_new_text_of_a_saved_note(tmp_path, shared_cache):
    vault = make_vault(tmp_path)
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(vault, db, cache=shared_cache)
    backup_copy(shared_cache, embed_cache_file())    # the server's watcher uses the user's cache
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("threshold = 0.0\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "serve", "--db", str(db), "--port", str(port),
                             "--config", str(cfg), "--log", str(tmp_path / "log.sqlite"), "--timeout", "30",
                             "--watch", str(vault)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        health = poll(lambda: (_get(url + "/healthz") or {}).get("watch", {}).get("caught_up_at") and _get(url + "/healthz"),
                      "the server up and its watcher caught up")
        assert health["watch"]["vault"] == str(vault) and health["watch"]["pending"] == 0
        assert "bm25" not in _search(url, "Flibbertaxel 재색인")
        with (vault / "bm25.md").open("a", encoding="utf-8") as f:
            f.write("\n\nFlibbertaxel 재색인 확인용 문장.\n")
        poll(lambda: "bm25" in _search(url, "Flibbertaxel 재색인"), "the saved note's new text found by /search")
        health = _get(url + "/healthz")
        assert health["status"] == "ok" and health["watch"]["updates"] >= 2 and health["watch"]["last_error"] is None
        # a link to a file outside the vault, dropped in while the server watches: reported, never searchable
        secret = tmp_path / "elsewhere" / "passwd"
        secret.parent.mkdir()
        secret.write_text(SECRET + "\n", encoding="utf-8")
        os.symlink(secret, vault / "passwd-link.md")
        poll(lambda: any(s["path"].endswith("passwd-link.md") for s in
                         ((_get(url + "/healthz") or {}).get("watch", {}).get("last_update") or {}).get("skipped", [])),
             "the link out of the vault reported in /healthz")
        assert "passwd-link" not in _search(url, SECRET)
    finally:
        proc.terminate()
        out = proc.communicate(timeout=30)[0].decode(errors="replace")
    assert "watching" in out, out
    assert f"skipped {vault / 'passwd-link.md'}: symbolic link to a file outside the vault ({secret})" in out, out
