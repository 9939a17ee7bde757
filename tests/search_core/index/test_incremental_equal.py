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
from tests.helpers.index_state import derived_state
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER


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
    # the index-page flag follows a note's text: hyde.md becomes a page of links only, then a note again
    ("a note becomes a link page", lambda v: (v / "hyde.md").write_text(
        "# 검색 목록\n\n" + "".join(f"- [[{n}]]\n" for n in (
            "bm25", "chunking", "citation-grounding", "contextual-retrieval", "graphrag", "hnsw", "hybrid-search",
            "korean-search", "metadata-filtering", "query-rewriting", "rrf", "sqlite-vec")), encoding="utf-8")),
    ("a link page becomes a note again", lambda v: edit(v, "hyde.md", lambda t: t + "\nHyDE는 가상의 답변 문서를 "
                                                        "먼저 생성하고 그 문서의 임베딩으로 검색하는 기법이다. " * 6)),
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
