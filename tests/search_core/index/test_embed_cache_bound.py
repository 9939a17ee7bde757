"""The embedding cache is bounded: past its bound the texts used least recently are evicted, and two processes
writing it at once keep one exact total within the bound."""

import os
import subprocess
import sys

import numpy as np
import pytest

from search_core import SearchCoreError
from search_core.index.embed_cache import LOW_WATER, EmbeddingCache, row_key, text_hash
from search_core.index.store import connect
from search_core.paths import CACHE_MAX_ENV, CACHE_MAX_MB, embed_cache_max_bytes
from tests.helpers import ROOT

DIM = 384                       # e5-small's
ROW = DIM * 4                   # bytes of one vector


def _vectors(prefix: str, n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {text_hash(f"{prefix} {i}"): rng.standard_normal(DIM).astype(np.float32) for i in range(n)}


def _rows(vectors: dict) -> set:
    return {row_key("m", h) for h in vectors}


def _on_disk(path) -> tuple[int, set]:
    """The bytes of vectors in the file and its rows' ids."""
    c = connect(path, readonly=True)
    try:
        total = c.execute("SELECT coalesce(sum(length(vec)), 0) FROM vectors").fetchone()[0]
        return total, {r for (r,) in c.execute("SELECT key FROM vectors")}
    finally:
        c.close()


def test_eviction_keeps_the_bound_and_spares_the_texts_used_last(tmp_path):
    path = tmp_path / "cache.sqlite"
    cache = EmbeddingCache(path, max_bytes=100 * ROW)
    a, b, c = _vectors("a", 40, 1), _vectors("b", 40, 2), _vectors("c", 40, 3)
    cache.put_many("m", a)
    cache.put_many("m", b)
    assert len(cache.get_many("m", list(a))) == 40          # a is read again: b is now the least recently used
    cache.put_many("m", c)                                   # 120 rows: past the bound of 100
    total, have = _on_disk(path)
    assert total == cache.stored_bytes() == int(100 * LOW_WATER) * ROW
    assert _rows(a) <= have and _rows(c) <= have, "a text used recently was evicted"
    assert len(_rows(b) & have) == 10 and cache.evicted == 30
    for k in range(20):                                      # a vault indexed far past the bound
        cache.put_many("m", _vectors(f"more{k}", 25, 10 + k))
        total, have = _on_disk(path)
        assert total == cache.stored_bytes() <= 100 * ROW
    assert _rows(_vectors("more19", 25, 29)) <= have
    cache.close()


def test_a_cache_from_before_the_bound_is_opened_counted_and_kept(tmp_path):
    path = tmp_path / "cache.sqlite"
    old = connect(path)
    old.execute("CREATE TABLE vectors (model TEXT NOT NULL, text_hash TEXT NOT NULL, vec BLOB NOT NULL, "
                "PRIMARY KEY (model, text_hash)) WITHOUT ROWID")
    rows = _vectors("old", 5)
    old.executemany("INSERT INTO vectors VALUES ('m', ?, ?)", [(h, v.tobytes()) for h, v in rows.items()])
    old.commit()
    old.close()
    cache = EmbeddingCache(path, max_bytes=100 * ROW)
    assert cache.stored_bytes() == 5 * ROW
    got = cache.get_many("m", list(rows))
    assert all(np.array_equal(got[h], v) for h, v in rows.items())
    cache.close()


def test_the_bound_comes_from_the_environment_and_a_bad_value_says_what_to_set(monkeypatch):
    monkeypatch.delenv(CACHE_MAX_ENV, raising=False)
    assert embed_cache_max_bytes() == CACHE_MAX_MB * 2**20
    monkeypatch.setenv(CACHE_MAX_ENV, "0.5")
    assert embed_cache_max_bytes() == 2**19
    for bad in ("lots", "0", "-3", "inf", "nan"):
        monkeypatch.setenv(CACHE_MAX_ENV, bad)
        with pytest.raises(SearchCoreError, match=f"{CACHE_MAX_ENV}=.* is not a size; set it to .* in MB"):
            embed_cache_max_bytes()


WRITER = """
import os, sys, time
import numpy as np
from search_core.index.embed_cache import EmbeddingCache, text_hash
path, who, go, bound = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
cache = EmbeddingCache(path, max_bytes=bound)
cache.get_many("m", ["warm"])            # opened (schema, total) before the race begins
open(go + "." + who, "w").close()        # ready
while not os.path.exists(go):
    time.sleep(0.01)
rng = np.random.default_rng(len(who))
for b in range(300):
    cache.put_many("m", {text_hash(f"{who} {b} {i}"): rng.standard_normal(384).astype(np.float32) for i in range(4)})
print(cache.evicted)
"""


def test_two_processes_writing_at_once_keep_one_exact_total_within_the_bound(tmp_path):
    """Each writes 1,200 vectors in batches of 4, both released at once when both are ready, into a cache
    bounded at 500: the total in the cache's meta table is the bytes on disk, within the bound."""
    path, go, bound = tmp_path / "cache.sqlite", tmp_path / "go", 500 * ROW
    EmbeddingCache(path, max_bytes=bound).conn.close()          # created here, so neither makes the schema
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), who, str(go), str(bound)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for who in ("one", "two")]
    from tests.helpers.daemon_proc import wait_for
    assert wait_for(lambda: all((tmp_path / f"go.{who}").exists() or p.poll() is not None
                                for who, p in zip(("one", "two"), procs)), 600)
    go.touch()
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
    total, have = _on_disk(path)
    c = connect(path, readonly=True)
    meta = c.execute("SELECT value FROM meta WHERE key = 'bytes'").fetchone()[0]
    check = c.execute("PRAGMA quick_check").fetchone()[0]
    c.close()
    assert check == "ok"
    assert meta == total <= bound, (meta, total, bound)
    assert sum(int(out.strip()) for out, _ in outs) == 2400 - len(have), "a row went missing outside eviction"


def test_an_index_that_evicts_says_so(tmp_path, monkeypatch):
    from search_core.index.indexer import index_vault
    from tests.helpers import SMALL_VAULT, write_vault
    from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
    vault = write_vault(tmp_path / "vault", SMALL_VAULT)
    first = index_vault(vault, tmp_path / "a.sqlite", embedder=FAKE_EMBEDDER)
    assert not any("reached its bound" in w for w in first.warnings)
    monkeypatch.setenv(CACHE_MAX_ENV, "0.001")        # about 1 KB: less than the vault's vectors
    other = write_vault(tmp_path / "other", {k.replace(".md", "-2.md"): v + "\n\n다른 문단." for k, v in SMALL_VAULT.items()})
    rep = index_vault(other, tmp_path / "b.sqlite", embedder=FAKE_EMBEDDER)
    [note] = [w for w in rep.warnings if "reached its bound" in w]
    assert "text(s) used least recently were evicted" in note and CACHE_MAX_ENV in note
