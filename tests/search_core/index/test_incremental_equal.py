"""An index updated note by note holds what a from-scratch build of the same vault holds: every derived
table (link resolution, entities and their vectors, tag co-occurrence, trigram and Latin-word document
frequencies, short-token postings) and, once recomputed, the communities. Chunk and link row ids differ
between the two by design (an update appends), so rows are compared by what they are (note id, ord).

The vault is the demo vault's ai/rag folder (22 notes, with links among them and to notes outside it);
the steps add, change, rename and delete notes and links, one update each. Vectors are compared as bytes,
not by what they mean, so the test embedder makes them."""

import shutil

import pytest

from search_core.index.indexer import index_vault
from search_core.index.store import connect, get_meta
from search_core.index.write import communities_state
from tests.helpers import DEMO_VAULT
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER


def derived_state(db) -> dict:
    """Everything an index holds, keyed by content rather than by row id."""
    c = connect(db)
    try:
        key = {cid: (nid, o) for cid, nid, o in c.execute("SELECT id, note_id, ord FROM chunks")}
        state = {
            "notes": sorted(c.execute("SELECT id, path, title, aliases, tags, summary, is_nav, content_hash, size, "
                                      "mtime_ns, warnings FROM notes")),
            "chunks": sorted(c.execute("SELECT note_id, ord, heading, context, text, text_hash, has_vector FROM chunks")),
            "fts": sorted((key[r[0]], *r[1:]) for r in
                          c.execute("SELECT rowid, title, aliases, tags, summary, body FROM chunks_fts")),
            "chunk_vec": sorted((key[r], v) for r, v in c.execute("SELECT rowid, embedding FROM chunk_vec")),
            "links": sorted(c.execute("SELECT src, target, anchor, kind, coalesce(dst, '') FROM links")),
            "belongs_to": sorted(c.execute("SELECT note_id, tag FROM belongs_to")),
            "entities": list(c.execute("SELECT id, name, norm, kind, note_id FROM entities ORDER BY id")),
            "entity_vec": sorted(c.execute("SELECT rowid, embedding FROM entity_vec")),
            "cooccurrence": sorted(c.execute("SELECT a, b, weight FROM cooccurrence")),
            "trigram_df": dict(c.execute("SELECT term, df FROM trigram_df")),
            "latin_word_df": dict(c.execute("SELECT word, df FROM latin_word_df")),
            "short_postings": {code: sorted(key[int(i)] for i in memoryview(blob).cast("i"))
                               for code, blob in c.execute("SELECT code, chunks FROM short_postings")},
            "ngram_postings": {term: sorted(zip((key[int(i)] for i in memoryview(ids).cast("i")),
                                                memoryview(tfs).cast("i")))
                               for term, ids, tfs in c.execute("SELECT term, chunks, tfs FROM ngram_postings")},
            "ngram_lengths": sorted((key[cid], n) for cid, n in c.execute("SELECT chunk_id, terms FROM ngram_lengths")),
            "fts_vocab_size": c.execute("SELECT count(*) FROM trigram_df").fetchone()[0],
            "meta_counts": ((get_meta(c, "trigram_df") or {}).get("terms"),
                            (get_meta(c, "latin_word_df") or {}).get("words")),
            "communities": dict(c.execute("SELECT note_id, community FROM communities")),
        }
        from search_core.index import ngram_postings, short_tokens, term_df, word_df
        state["current"] = (term_df.is_current(c), word_df.is_current(c), short_tokens.is_built(c),
                            ngram_postings.is_built(c))
        return state
    finally:
        c.close()


def edit(vault, rel, fn):
    p = vault / rel
    p.write_text(fn(p.read_text(encoding="utf-8")), encoding="utf-8")


STEPS = [
    # a new note that links to others, and that three links of the vault wanted ([[bge-m3]] is dangling)
    ("add a note", lambda v: (v / "bge-m3.md").write_text(
        "---\ntitle: BGE-M3\naliases: [bge m3]\ntags: [embedding, rag]\n---\n# BGE-M3\n\n"
        "[[bm25]], [[hybrid-search]], [[rrf|RRF]] 과 Zyxquartz 검색을 묶는다.\n", encoding="utf-8")),
    ("change a note's text", lambda v: edit(v, "bm25.md", lambda t: t + "\n\nOkapi Quuxbert 변형도 있다. 검색 팀.\n")),
    ("add and remove links", lambda v: edit(v, "hnsw.md", lambda t: t.replace("[[vector-db]]", "[[reranker]]")
                                            + "\n\n[[chunking]] 과 [[not-a-note-yet]] 참고.\n")),
    ("change tags and title", lambda v: edit(v, "rrf.md", lambda t: t.replace("---\n", "---\ntags: [fusion, rank, rag]\n", 1)
                                             .replace("title:", "title: RRF 융합 -", 1))),
    ("rewrite a note's title, aliases, tags and links", lambda v: (v / "index.md").write_text(
        "---\ntitle: RAG 목차\naliases: [RAG index]\ntags: [rag, moc]\n---\n# 목차\n\n"
        "[[bm25]], [[hybrid-search]], [[rrf|RRF]] 과 Zyxquartz 검색을 묶는다.\n", encoding="utf-8")),
    ("add the note a dangling link wanted", lambda v: (v / "sub").mkdir() or (v / "sub" / "not-a-note-yet.md").write_text(
        "# 새 노트\n\n[[hnsw]] 로 돌아간다.\n", encoding="utf-8")),
    ("rename a note", lambda v: (v / "fts5.md").rename(v / "sqlite-fts5.md")),
    ("delete a note", lambda v: (v / "reranker.md").unlink()),
    ("delete a linked-to note and change another", lambda v: ((v / "sub" / "not-a-note-yet.md").unlink(),
                                                              edit(v, "chunking.md", lambda t: t + "\n[[index]]\n"))),
]


@pytest.fixture
def rag_vault(tmp_path):
    vault = tmp_path / "vault"
    shutil.copytree(DEMO_VAULT / "ai" / "rag", vault)
    return vault


def test_every_derived_table_after_each_update_equals_a_fresh_build(rag_vault, tmp_path, shared_cache):
    db = tmp_path / "updated" / "index.sqlite"
    index_vault(rag_vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    for i, (step, change) in enumerate(STEPS):
        change(rag_vault)
        report = index_vault(rag_vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
        assert report.mode == "incremental" and (report.added or report.changed or report.deleted), step
        fresh = tmp_path / f"fresh-{i}" / "index.sqlite"
        index_vault(rag_vault, fresh, embedder=FAKE_EMBEDDER, cache=shared_cache)
        got, want = derived_state(db), derived_state(fresh)
        assert got["current"] == (True, True, True, True), step
        # communities may be stale after an update (recomputed on a budget): they cover exactly the notes,
        # the state says whether they are current, and once recomputed they equal the fresh build's
        assert set(got["communities"]) == set(want["communities"]), step
        if communities_state(connect(db))["current"]:
            assert got["communities"] == want["communities"], f"{step}: communities said current"
        for name in want:
            if name != "communities":
                assert got[name] == want[name], f"{step}: {name} differs from a fresh build"
        index_vault(rag_vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache, communities=True)
        assert communities_state(connect(db))["current"], step
        assert derived_state(db)["communities"] == want["communities"], f"{step}: communities"


def test_a_no_op_update_writes_nothing(rag_vault, tmp_path, shared_cache):
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(rag_vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    c = connect(db)
    gen = get_meta(c, "generation")
    c.close()
    report = index_vault(rag_vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    assert (report.added, report.changed, report.deleted) == (0, 0, 0)
    c = connect(db)
    assert get_meta(c, "generation") == gen
    c.close()
