"""FTS5's bm25 computed in memory (search_core.search.fts_bm25) against FTS5's own bm25(), on the demo vault's
real index and questions: the same rows in the same order (ties included) and the same floats."""

import shutil

import numpy as np
import pytest

from search_core.search import channels as ch
from search_core.search import fts_bm25
from search_core.search.fts_bm25 import FtsBm25
from search_core.search.view import IndexView
from tests.helpers import DEMO_VAULT, ROOT
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER


def _questions() -> list[str]:
    from tuner.data.gold import load_gold
    out = []
    for name in ("demo-tune", "demo-holdout", "demo-probes"):
        out += [q.query for q in load_gold(ROOT / "experiments" / "gold" / f"{name}.yaml").questions]
    return list(dict.fromkeys(out))


def _fts5(conn, trigrams, limit) -> list[tuple[int, float]]:
    return ch._fts_best(conn, ch.fts_match_expr(trigrams), limit)


def _mine(scorer, trigrams, limit) -> list[tuple[int, float]]:
    ids, bm25 = scorer.best(trigrams, limit)
    return list(zip(ids.tolist(), bm25.tolist()))


def _same(got, want) -> bool:
    """The same rowids in the same order, each score FTS5's within 1e-9 of itself."""
    return [r for r, _ in got] == [r for r, _ in want] and all(
        abs(a - b) <= 1e-9 * abs(b) for (_, a), (_, b) in zip(got, want))


def _cases(view, conn):
    """(trigrams, limit) of the demo's questions and note titles as the sparse channel and the fast path's
    check send them (12 and 24 rarest trigrams), at the limits the channel asks (depth x 4) and short ones,
    where a cut through tied rows is likelier."""
    titles = [r[0] for r in conn.execute("SELECT title FROM notes ORDER BY id")]
    for text in _questions() + titles:
        all_trigrams = ch.query_terms(text)[0]
        for phrases in (ch.CHECK_PHRASES, ch.MAX_PHRASES):
            trigrams = ch.fts_trigrams(view, conn, all_trigrams, phrases)
            if trigrams:
                for limit in (1, 3, 20, 200):
                    yield trigrams, limit


def test_the_scores_and_their_order_are_fts5s_own(demo_index):
    view = IndexView.open(demo_index)
    scorer = FtsBm25(view.conn)
    cases = differ = 0
    ties = 0
    for trigrams, limit in _cases(view, view.conn):
        want = _fts5(view.conn, trigrams, limit)
        got = _mine(scorer, trigrams, limit)
        cases += 1
        differ += not _same(got, want)
        ties += len({s for _, s in want}) < len(want)
    view.close()
    assert cases > 1000 and ties > 50          # the sets are real, and tied rows are among them
    assert differ == 0


@pytest.mark.parametrize("constant, value", [("K1", 1.25), ("B", 0.7), ("FLOOR_IDF", 1.0)])
def test_a_changed_constant_is_seen(demo_index, monkeypatch, constant, value):
    """The comparison above has teeth: a scorer with another k1, b or floor gives other lists or floats."""
    monkeypatch.setattr(fts_bm25, constant, value)
    view = IndexView.open(demo_index)
    scorer = FtsBm25(view.conn)
    differ = sum(not _same(_mine(scorer, t, n), _fts5(view.conn, t, n)) for t, n in _cases(view, view.conn))
    view.close()
    assert differ > 0


def test_a_phrase_folded_otherwise_is_left_to_fts5(demo_index):
    """'é' or a Greek letter may fold in FTS5 otherwise than lower() does: the scorer declines, and the channel's
    list is FTS5's."""
    view = IndexView.open(demo_index)
    scorer = view.fts_bm25()
    assert scorer.best(["caf", "afé"], 10) is None
    assert scorer.best(["ab"], 10) is None                                        # not a trigram
    with pytest.raises(ValueError):                                               # a weight not whole
        FtsBm25(view.conn, (3.5, 3.0, 2.0, 2.0, 1.0))
    ids, bm25 = ch.fts_best(view, view.conn, ["caf", "afé"], 10)
    want = _fts5(view.conn, ["caf", "afé"], 10)
    view.close()
    assert list(zip(ids.tolist(), bm25.tolist())) == want


def test_the_sparse_channel_gives_the_same_hits_with_fts5_or_the_scorer(demo_index, monkeypatch):
    view = IndexView.open(demo_index)
    assert view.fts_bm25() is not None
    queries = _questions()
    mine = [ch.sparse(view.conn, view, q, 50, p) for q in queries for p in (ch.CHECK_PHRASES, None)]
    monkeypatch.setattr(IndexView, "fts_bm25", lambda self: None)
    fts5 = [ch.sparse(view.conn, view, q, 50, p) for q in queries for p in (ch.CHECK_PHRASES, None)]
    view.close()
    assert mine == fts5 and sum(map(len, mine)) > 1000


def test_an_updated_index_is_scored_as_fts5_scores_it(tmp_path, shared_cache):
    """FTS5 keeps the counts the scorer reads current: after an incremental update (a note edited, one added,
    one deleted) a new view's scorer still gives FTS5's lists."""
    from search_core.index.indexer import index_vault
    vault = tmp_path / "vault"
    shutil.copytree(DEMO_VAULT, vault)
    db = tmp_path / "index.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    notes = sorted(vault.rglob("*.md"))
    notes[0].write_text(notes[0].read_text(encoding="utf-8") + "\n크로스 인코더 재순위 rerank 추가 문단\n",
                        encoding="utf-8")
    notes[1].unlink()
    (vault / "new-note.md").write_text("---\ntitle: 새 노트\n---\n하이브리드 검색 hybrid search 재순위\n",
                                       encoding="utf-8")
    report = index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    assert report.mode == "incremental"
    view = IndexView.open(db)
    scorer = view.fts_bm25()
    for query in ("크로스 인코더 재순위", "hybrid search 재순위", "하이브리드 검색"):
        trigrams = ch.query_terms(query)[0]
        for limit in (1, 5, 200):
            assert _same(_mine(scorer, trigrams, limit), _fts5(view.conn, trigrams, limit)), (query, limit)
    view.close()


def test_varint_sums_reads_sqlite_varints():
    blobs = [bytes([5, 0x81, 0x00]), bytes([0x7F, 0x83, 0xFF, 0x7F])]       # 5 + 128; 127 + (3 << 14 | 127 << 7 | 127)
    assert fts_bm25.varint_sums(blobs, 2).tolist() == [133, 127 + ((3 << 14) | (127 << 7) | 127)]
    assert fts_bm25.varint_sums([], 5).tolist() == []
    with pytest.raises(ValueError):
        fts_bm25.varint_sums([bytes([1, 2, 3])], 2)
    assert np.array_equal(fts_bm25.varint_sums([bytes([0])], 1), [0])
    assert fts_bm25.varints(bytes([5, 0x81, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])) == \
        [5, 128, (((1 << 56) - 1) << 8) | 1]                     # the ninth byte counts all its 8 bits
