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


def test_while_a_stop_may_be_asked_each_batch_is_one_text_and_a_stop_keeps_what_was_embedded(tmp_path):
    """A stop waits for the batches already in the model (one per worker): at load 22 on 2 cores a text costs
    1.3-2.1 s, so batches of one text keep SIGTERM to exit near 4 s where batches of 4 took up to 19.9 s. A stop
    asked after the first batch keeps exactly that batch: one text, never a worker's batch of 16."""
    vault = write_vault(tmp_path / "vault", _notes(20))
    db = tmp_path / "idx" / "index.sqlite"
    with pytest.raises(StopRequested, match="stopped after 1 of"):
        index_vault(vault, db, embedder=FAKE_EMBEDDER, stop=_after(1))
    assert _cached() == 1
    rep = index_vault(vault, db, embedder=FAKE_EMBEDDER)
    assert rep.embedded == rep.vectors - 1, "the rerun embedded again the text the stopped one had cached"
