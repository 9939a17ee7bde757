"""Holding notes out of one search (Searcher.rank's exclude): the notes are gone from the ranked list, the
gate reads no channel entry of theirs, and the notes below move up into their places."""

import pytest

from search_core.config import SearchConfig
from search_core.index.indexer import index_vault
from search_core.search.pipeline import Searcher
from search_core.search.ranking import K_LIST
from tests.helpers import write_vault
from tests.helpers.fake_embedder import NAME
from tests.helpers.vault_questions import QUESTION_VAULT

QUERY = "그래프 RAG 파이프라인에서도 마지막 단계로 쓴다"


@pytest.fixture
def searcher(tmp_path, shared_cache):
    vault = write_vault(tmp_path / "vault", QUESTION_VAULT)
    index_vault(vault, tmp_path / "index.sqlite", embedder=NAME, cache=shared_cache)
    s = Searcher(tmp_path / "index.sqlite")
    yield s
    s.close()


def test_excluded_notes_leave_the_list_and_the_rest_move_up(searcher):
    cfg = SearchConfig(embedder=NAME, top_k=2)
    r = searcher.retrieve(QUERY, cfg.depth)
    full = searcher.rank(r, cfg, snippets=False, limit_fused=K_LIST)
    held = set(full.ranked[:2])                  # the sentence's own note and its draft lead
    assert held == {"ai/rrf", "ai/rrf-draft"}
    out = searcher.rank(r, cfg, snippets=False, limit_fused=K_LIST, exclude=held)
    assert not held & set(out.ranked) and not held & {h.note_id for h in out.hits}
    assert len(out.hits) == 2                     # refilled from deeper ranks
    assert list(out.ranked) == [n for n in full.ranked if n not in held]
    assert out.hits[0].note_id == full.ranked[2]
    # the gate read the search without them: its top dense score is the best of the notes left
    assert out.gate.features["top_cos"] == pytest.approx(next(h.score for h in r.lists["dense"] if h.note_id not in held))
    assert out.gate.features["top_cos"] != pytest.approx(full.gate.features["top_cos"])
    same = searcher.search(QUERY, cfg, exclude=held)
    assert same.ranked == out.ranked[:2]


def test_no_exclusion_is_the_search_as_before(searcher):
    cfg = SearchConfig(embedder=NAME)
    r = searcher.retrieve(QUERY, cfg.depth)
    a, b = searcher.rank(r, cfg, snippets=False), searcher.rank(r, cfg, snippets=False, exclude=())
    assert a.ranked == b.ranked and a.gate.features == b.gate.features
