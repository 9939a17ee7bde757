"""The vault's cross-script pairs stored at index time, kept current by incremental updates, and read by a
search whose config asks for the expansion."""

from search_core.config import SearchConfig
from search_core.index import pair_table
from search_core.index.indexer import index_vault
from search_core.index.store import connect
from search_core.search.pipeline import Searcher
from tests.helpers import write_vault
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER

VAULT = {
    "net/glossary.md": "# 용어\n\n- 지연 시간(latency)\n",
    "net/latency.md": "# 지연 시간\n\n지연 시간은 요청에서 응답까지 걸린 시간이다.\n",
    "net/bandwidth.md": "# 대역폭\n\n대역폭은 단위 시간에 보낼 수 있는 양이다.\n",
    "cook/kimchi.md": "# 김치찌개\n\n묵은지와 돼지고기를 넣고 끓인다.\n",
}


def _pairs(db):
    conn = connect(db)
    try:
        return pair_table.load(conn)
    finally:
        conn.close()


def test_pairs_are_stored_at_index_time_and_follow_an_edit(tmp_path, shared_cache):
    vault = write_vault(tmp_path / "v", VAULT)
    db = tmp_path / "i.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    assert _pairs(db) == {"latency": ("지연 시간",)}
    (vault / "net" / "bandwidth.md").write_text("# 대역폭\n\n대역폭(bandwidth)은 단위 시간에 보낼 수 있는 양이다.\n",
                                                encoding="utf-8")
    (vault / "net" / "glossary.md").unlink()
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    assert _pairs(db) == {"bandwidth": ("대역폭",)}


def test_an_english_question_finds_the_korean_note_through_the_pair_only_when_asked(tmp_path, shared_cache):
    vault = write_vault(tmp_path / "v", VAULT)
    db = tmp_path / "i.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    s = Searcher(db)
    cfg = SearchConfig(embedder=s.embedder_name, w_dense=0.0, w_decomposed=0.0, w_entity=0.0)
    on = s.search("what is network latency", cfg)
    assert "net/latency" in on.ranked[:2] and on.query == "what is network latency"
    off = s.retrieve("what is network latency", cfg.depth, pair_terms=0)
    assert [h.note_id for h in off.lists["sparse"]] == ["net/glossary"]   # only the note with the English word


def test_an_index_written_before_the_table_searches_without_it(tmp_path, shared_cache):
    vault = write_vault(tmp_path / "v", VAULT)
    db = tmp_path / "i.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    conn = connect(db)
    conn.execute("DROP TABLE term_pairs")
    conn.execute("DELETE FROM meta WHERE key = ?", (pair_table.META_KEY,))
    conn.commit()
    conn.close()
    assert Searcher(db).search("what is network latency").query == "what is network latency"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)     # a no-op run adds it back
    assert _pairs(db) == {"latency": ("지연 시간",)}
