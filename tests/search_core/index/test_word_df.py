"""The Latin-script word table (search_core.index.word_df): the word rule, hand-counted document frequencies after
a full build and after an incremental update, and a stale or missing table never read."""

import pytest

from search_core.index import word_df
from search_core.index.indexer import index_vault
from search_core.search.pipeline import Searcher
from search_core.search.view import ViewCaches
from search_core.index.store import atomic, bump_generation, connect
from tests.helpers import write_vault


def stored(conn):
    return dict(conn.execute("SELECT word, df FROM latin_word_df").fetchall())


def test_the_word_rule_by_hand():
    got = word_df.latin_words("LightRAG를 GPT-4o, sqlite-vec와 C++ e5-small 2024년 knowledge_graph LightRAG")
    assert got == ["lightrag", "gpt", "4o", "sqlite", "vec", "c", "e5", "small", "knowledge", "graph", "lightrag"]
    assert word_df.latin_words("김치찌개 300 레시피") == []


# The small vault's six FTS rows (title, aliases, tags, summary, body), counted by hand: Home's body lists
# "ai/graphrag ai/rrf life/kimchi"; GraphRAG's two chunks repeat its title, aliases "그래프 RAG graph rag"
# and tags "rag graph knowledge-graph", the first body naming entity, relation, community and "ai/rrf", the
# second Leiden; RRF's one chunk: "Reciprocal Rank Fusion", "RRF", tags "rag fusion", "1/(k+rank)";
# the kimchi note's two chunks: tags "cooking 한식", "300g" in one, "AI" in the other.
SMALL_VAULT_WORDS = {
    "ai": 3, "graphrag": 3, "rrf": 3, "rag": 3, "life": 1, "kimchi": 1, "home": 1,
    "graph": 2, "knowledge": 2, "entity": 1, "relation": 1, "community": 1, "leiden": 1,
    "reciprocal": 1, "rank": 1, "fusion": 1, "k": 1, "cooking": 2, "300g": 1,
}


def test_hand_counted_after_a_full_build_and_exact_after_an_update(small_vault, tmp_path, shared_cache):
    db = tmp_path / "idx.sqlite"
    index_vault(small_vault, db, cache=shared_cache)
    conn = connect(db)
    assert word_df.is_current(conn)
    assert stored(conn) == SMALL_VAULT_WORDS
    conn.close()
    (small_vault / "ai" / "rrf.md").write_text("---\ntitle: RRF\n---\n# RRF\n\nk 값은 60, 검색 실험.\n", encoding="utf-8")
    (small_vault / "life" / "kimchi.md").unlink()
    write_vault(small_vault, {"new/ml.md": "# ML\n\nAI 모델과 벡터 DB. 큐(queue)는 FIFO.\n"})
    index_vault(small_vault, db, cache=shared_cache)
    conn = connect(db)
    after = stored(conn)
    assert word_df.is_current(conn)
    # gone with the kimchi note and the old RRF text; "ai" lost the kimchi chunk and gained ml.md's
    assert {"cooking", "300g", "reciprocal", "rank", "fusion"}.isdisjoint(after)
    assert (after["ai"], after["fifo"], after["queue"], after["db"], after["ml"]) == (3, 1, 1, 1, 1)
    with atomic(conn):                          # a from-scratch recount of the updated index: the same table
        word_df.build(conn)
    assert stored(conn) == after
    assert word_df.lookup(conn, ["fifo", "cooking", "없는말"]) == {"fifo": 1, "cooking": 0, "없는말": 0}
    conn.close()


def test_a_stale_table_is_not_read_and_an_index_run_rebuilds_a_missing_one(small_vault, small_index, shared_cache):
    s = Searcher(small_index)
    assert word_df.counts(s.view, s.conn, ["graphrag", "unity"]) == {"graphrag": 3, "unity": 0}
    conn = connect(small_index)
    with atomic(conn):
        conn.execute("UPDATE latin_word_df SET df = 0")      # wrong values that must not be read
        bump_generation(conn)                                 # a write by code that does not keep the table
    conn.close()
    s = Searcher(small_index)
    assert not word_df.is_current(s.conn)
    assert word_df.counts(s.view, s.conn, ["graphrag"]) is None   # the caller falls back (and says so)
    conn = connect(small_index)
    with atomic(conn):                                        # an index written before the table existed
        conn.execute("DROP TABLE latin_word_df")
        conn.execute("DELETE FROM meta WHERE key = ?", (word_df.META_KEY,))
    conn.close()
    index_vault(small_vault, small_index, cache=shared_cache)   # nothing changed in the vault: the run adds it
    conn = connect(small_index)
    assert word_df.is_current(conn) and stored(conn) == SMALL_VAULT_WORDS
    conn.close()


def test_a_broken_table_never_fails_the_reader():
    import sqlean

    class View:
        caches = ViewCaches()

    conn = sqlean.connect(":memory:")          # no meta table at all: is_current fails inside
    assert word_df.counts(View(), conn, ["abc"]) is None
    assert word_df.counts(View(), None, ["abc"]) is None
