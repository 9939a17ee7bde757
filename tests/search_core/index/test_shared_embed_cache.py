"""One embedding cache per user, shared by every index on the machine: a vault is embedded once."""

import os
import subprocess
import sys
import threading

from click.testing import CliRunner

from search_core.index.embed_cache import EmbeddingCache, model_key
from search_core.index.indexer import index_vault
from search_core.index.store import connect
from search_core.models import get_embedder
from search_core.paths import CACHE_ENV, cache_dir, embed_cache_file
from tests.helpers import ROOT, SMALL_VAULT, write_vault
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
from tuner.cli import main


def _count_texts_embedded(monkeypatch, name: str) -> list:
    """Every text the real model is asked to embed, appended as it is asked (the model still embeds it)."""
    emb = get_embedder(name)
    real, seen, lock = emb.embed, [], threading.Lock()

    def counting(texts, **kw):
        with lock:
            seen.extend(texts)
        return real(texts, **kw)

    monkeypatch.setattr(emb, "embed", counting)
    return seen


def _vectors(db) -> dict:
    c = connect(db, readonly=True)
    try:
        return {r[0]: bytes(r[1]) for r in c.execute(
            "SELECT c.text_hash, v.embedding FROM chunks c JOIN chunk_vec v ON v.rowid = c.id")}
    finally:
        c.close()


def test_a_second_index_of_the_same_vault_embeds_no_text(tmp_path, monkeypatch):
    vault = write_vault(tmp_path / "vault", SMALL_VAULT)
    embedded = _count_texts_embedded(monkeypatch, "e5-small")
    first = index_vault(vault, tmp_path / "mine" / "index.sqlite", embedder="e5-small")
    assert first.embedded > 0 and len(embedded) >= first.embedded     # chunks, then the graph's entities
    assert first.cache == str(embed_cache_file()) and embed_cache_file().parent == tmp_path / "user-cache"

    embedded.clear()
    second = index_vault(vault, tmp_path / "daemon-runs" / "index.sqlite", embedder="e5-small")
    assert embedded == [] and second.embedded == 0, "the second index embedded what the first already had"
    assert second.vectors == first.vectors > 0
    assert _vectors(tmp_path / "daemon-runs" / "index.sqlite") == _vectors(tmp_path / "mine" / "index.sqlite")


def test_the_cache_folder_is_per_user_and_can_be_moved(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "autoresearch"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "autoresearch"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "elsewhere"))
    assert embed_cache_file() == tmp_path / "elsewhere" / "embed-cache.sqlite"


def test_index_says_how_many_chunks_get_a_vector_and_why(tmp_path):
    long_note = "# 긴 노트\n\n" + "\n\n".join(f"## 절 {i}\n\n" + f"검색 엔진의 {i}번째 단락은 길게 이어진다. " * 12
                                            for i in range(12))
    vault = write_vault(tmp_path / "vault", {**SMALL_VAULT, "long.md": long_note})
    db = tmp_path / "index.sqlite"
    out = CliRunner().invoke(main, ["index", str(vault), "--db", str(db), "--embedder", FAKE_EMBEDDER,
                                    "--dense-per-note", "2", "--no-progress"])
    assert out.exit_code == 0, out.output
    c = connect(db, readonly=True)
    chunks, vectors = c.execute("SELECT count(*), sum(has_vector) FROM chunks").fetchone()
    c.close()
    assert vectors < chunks
    assert (f"{vectors} of {chunks} chunks have a vector: at most 2 per note (dense_per_note" in out.output), out.output
    assert "user-cache" in out.output and "embed-cache.sqlite" in out.output

    every = CliRunner().invoke(main, ["index", str(vault), "--db", str(tmp_path / "all.sqlite"), "--embedder",
                                      FAKE_EMBEDDER, "--dense-per-note", "0", "--no-progress"])
    assert "every chunk has a vector" in every.output, every.output


def test_two_processes_index_into_one_cache_at_once(tmp_path):
    """Two `index` runs (two vaults, two indexes) write the one user cache at the same time; both finish
    and every vector of both is in it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), CACHE_ENV: str(tmp_path / "shared")}
    vaults = []
    for k in range(2):
        files = {f"{k}-{path}": text.replace("GraphRAG", f"GraphRAG{k}") for path, text in SMALL_VAULT.items()}
        vaults.append(write_vault(tmp_path / f"vault{k}", files))
    procs = [subprocess.Popen([sys.executable, "-m", "tuner.cli", "index", str(v), "--db",
                               str(tmp_path / f"db{k}" / "index.sqlite"), "--no-progress"],
                              env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k, v in enumerate(vaults)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out + err
    cache = EmbeddingCache(tmp_path / "shared" / "embed-cache.sqlite")
    for k in range(2):
        db = tmp_path / f"db{k}" / "index.sqlite"
        want = list(_vectors(db))
        assert want and cache.has(model_key(get_embedder("e5-small").fingerprint()), want) == set(want)
    cache.close()

