"""index_vault(stop=...) stops between embedding batches: the index is left as it was, the vectors embedded
so far stay in the cache, and the next run embeds only the rest."""

import pytest

from search_core import StopRequested
from search_core.index.indexer import index_vault
from search_core.index.store import connect
from search_core.paths import embed_cache_file
from tests.helpers import SMALL_VAULT, write_vault
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER


def _notes(n: int) -> dict:
    return {f"n{i:02d}.md": f"# 노트 {i}\n\n검색 엔진 단락 {i}: 문장이 이어진다.\n" for i in range(n)}


def _cached() -> int:
    c = connect(embed_cache_file(), readonly=True)
    try:
        return c.execute("SELECT count(*) FROM vectors").fetchone()[0]
    finally:
        c.close()


def _after(batches: int):
    asked = []
    return lambda: asked.append(1) or len(asked) >= batches


def test_a_stopped_full_build_leaves_no_index_and_the_next_run_resumes(tmp_path):
    vault = write_vault(tmp_path / "vault", _notes(20))
    db = tmp_path / "idx" / "index.sqlite"
    with pytest.raises(StopRequested):
        index_vault(vault, db, embedder=FAKE_EMBEDDER, stop=_after(2))
    assert not db.exists() and not list(db.parent.glob("*.building-*"))
    kept = _cached()
    assert 0 < kept < 20
    rep = index_vault(vault, db, embedder=FAKE_EMBEDDER)
    assert rep.embedded == rep.vectors - kept, "the next run embedded again what the stopped one had"


def test_a_stopped_update_leaves_the_index_as_it_was(tmp_path):
    vault = write_vault(tmp_path / "vault", SMALL_VAULT)
    db = tmp_path / "index.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER)
    write_vault(vault, _notes(20))
    with pytest.raises(StopRequested):
        index_vault(vault, db, embedder=FAKE_EMBEDDER, stop=_after(1))
    c = connect(db, readonly=True)
    assert c.execute("SELECT count(*) FROM notes").fetchone()[0] == len(SMALL_VAULT)
    c.close()
    assert index_vault(vault, db, embedder=FAKE_EMBEDDER).added == 20
