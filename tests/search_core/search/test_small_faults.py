"""Smaller faults of search and evaluation, and the warm searcher after a swap."""

import tracemalloc

import numpy as np
import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.index.indexer import index_vault
from search_core.search.pipeline import IndexChangedError, Searcher
from search_core.index.layout import layout_path, refresh_layout
from search_core.index.store import atomic, bump_generation, connect, open_index
from search_core.search.view import IndexView
from tuner.evaluation import stats as stats_util
from tuner.cli import main


def test_a_commit_within_the_same_second_is_seen_by_a_warm_searcher(small_vault, small_index, shared_cache):
    s = Searcher(small_index)
    assert s.view.notes["ai/rrf"]["title"] == "Reciprocal Rank Fusion"
    key = s.fingerprint_key
    w = connect(small_index)
    with atomic(w):                                  # a commit that leaves indexed_at as it was
        w.execute("UPDATE notes SET title = 'RRF (renamed)' WHERE id = 'ai/rrf'")
    w.close()
    s.search("RRF 점수")
    assert s.view.notes["ai/rrf"]["title"] == "RRF (renamed)"
    (small_vault / "ai" / "new.md").write_text("# 새 노트\n\nRRF 메모.\n", encoding="utf-8")
    index_vault(small_vault, small_index, cache=shared_cache)     # an indexing commit bumps the counter
    s.search("RRF 점수")
    assert s.fingerprint_key != key


@pytest.mark.models
def test_a_warm_searcher_refuses_an_index_swapped_to_another_embedder(small_vault, small_index_e5, shared_cache):
    s = Searcher(small_index_e5)
    s.search("GraphRAG")
    index_vault(small_vault, small_index_e5, embedder="minilm-l6", full=True, cache=shared_cache)
    with pytest.raises(IndexChangedError, match="was e5-small, now minilm-l6"):
        s.search("GraphRAG")


def test_a_locked_index_is_not_called_broken(small_index):
    w = connect(small_index)
    w.execute("PRAGMA locking_mode = EXCLUSIVE")
    w.execute("BEGIN EXCLUSIVE")
    w.execute("UPDATE meta SET value = value WHERE key = 'indexed_at'")
    try:
        with pytest.raises(SearchCoreError) as e:
            open_index(small_index)
        assert "locked by another process" in str(e.value) and "--full" not in str(e.value)
    finally:
        w.execute("ROLLBACK")
        w.close()


def test_an_entity_without_a_vector_gets_no_other_entitys_vector(small_index):
    c = connect(small_index)
    eid, norm = c.execute("SELECT id, norm FROM entities ORDER BY id DESC LIMIT 1").fetchone()
    with atomic(c):                       # committed as a writer commits: the layout file beside it follows
        c.execute("DELETE FROM entity_vec WHERE rowid = ?", (eid,))
        bump_generation(c)
        refresh_layout(c, small_index)
    for mapped in (True, False):          # the vectors mapped from the layout file, then read from SQLite
        if not mapped:
            layout_path(small_index).unlink()
        view = IndexView(c)
        assert view.layout_source.mapped is mapped
        row = view.entity_names.index(norm)
        assert not view.entity_matrix[row].any()
        assert view.entity_matrix[0].any() and row != 0
    c.close()


def test_best_with_a_mistyped_ledger_path_creates_nothing(tmp_path):
    missing = tmp_path / "ledgr.sqlite"
    r = CliRunner().invoke(main, ["best", "--ledger", str(missing)])
    assert r.exit_code != 0 and "no ledger at" in r.output
    assert not missing.exists()


def test_the_bootstrap_memory_is_bounded_and_its_answer_unchanged():
    rng = np.random.default_rng(1)
    a, b = rng.random(5774), rng.random(5774)
    tracemalloc.start()
    lo, hi = stats_util.bootstrap_ci(a, b, n_resamples=2000, seed=0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 40e6, f"peak {peak / 1e6:.0f} MB"      # all at once: 2000 x 5774 x 8 x 2 = 185 MB
    d = b - a
    idx = np.random.default_rng(0).integers(0, d.size, size=(2000, d.size))
    means = d[idx].mean(axis=1)
    assert (lo, hi) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])), rel=1e-12)


def test_two_model_specs_never_share_an_index_file(tmp_path):
    from search_core.config import ChunkConfig
    from tuner.sweep.workbench import index_path
    c = ChunkConfig()
    a, b = index_path(tmp_path, "st:/models/bge-m3", c), index_path(tmp_path, "st:models/bge-m3", c)
    assert a != b and a.name.startswith("st_models_bge-m3-")
    long = "http://127.0.0.1:8080/v1?model=" + "x" * 80
    assert index_path(tmp_path, long + "a", c) != index_path(tmp_path, long + "b", c)
    assert index_path(tmp_path, "minilm-l6", c) != index_path(tmp_path, "minilm-l6", ChunkConfig(target_chars=300))
