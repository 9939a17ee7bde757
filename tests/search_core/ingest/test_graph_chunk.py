from search_core.ingest.chunk import chunk_note, dense_selection
from search_core.config import ChunkConfig
from search_core.ingest.graph import LinkResolver, communities, cooccurrence, entities_for
from search_core.ingest.parse import parse_note


def test_link_resolution_forms():
    r = LinkResolver(["java/thread", "cmd", "ai/rag/graphrag", "ai/rag/chunking", "life/graphrag"])
    assert r.resolve("x/y", "/java/thread") == "java/thread"       # absolute
    assert r.resolve("ai/rag/rrf", "chunking") == "ai/rag/chunking"  # relative to the note's folder
    assert r.resolve("z", "ai/rag/chunking.md") == "ai/rag/chunking"  # vault path, .md tolerated
    assert r.resolve("java/x", "cmd") == "cmd"                        # by file name
    assert r.resolve("q", "graphrag") == "life/graphrag"              # name clash: fewest folders wins (Obsidian)
    assert r.resolve("q", "Java/Thread") == "java/thread"             # case-insensitive last resort
    assert r.resolve("q", "나중에-쓸-노트") is None                      # unresolved stays unresolved
    assert r.resolve("q", "") == "q"                                  # [[#heading]] is the note itself


def test_chunks_respect_size_keep_heading_and_never_frontmatter():
    body = "\n\n".join(f"문단 {i}. " + "검색 품질을 측정한다. " * 12 for i in range(8))
    n = parse_note("n", f"---\ntitle: 긴 노트\nsecret_key: FRONTMATTER\n---\n## 섹션 A\n{body}\n## 섹션 B\n짧은 글\n")
    cfg = ChunkConfig()
    chunks = chunk_note(n, cfg)
    assert all(len(c.text) <= cfg.max_chars for c in chunks)
    assert all("FRONTMATTER" not in c.text and "secret_key" not in c.embed_text() for c in chunks)
    assert chunks[0].context == "긴 노트 > 섹션 A"
    assert chunks[-1].heading_path == ("섹션 B",) and chunks[-1].text == "짧은 글"
    assert [c.ord for c in chunks] == list(range(len(chunks)))
    assert 3 <= len(chunks) <= 10


def test_endless_line_is_hard_split():
    n = parse_note("n", "x" * 3000)
    assert all(len(c.text) <= 800 for c in chunk_note(n))
    assert sum(len(c.text) for c in chunk_note(n)) == 3000


def test_note_without_body_still_has_a_title_chunk():
    chunks = chunk_note(parse_note("n", "---\ntitle: 빈 노트\n---\n"))
    assert len(chunks) == 1 and chunks[0].text == "" and chunks[0].embed_text() == "빈 노트"


def test_dense_selection():
    assert dense_selection(5, 10) == [0, 1, 2, 3, 4]
    assert dense_selection(30, 10) == [0, 1, 2, 3, 4, 5, 11, 17, 23, 29]
    assert dense_selection(30, 0) == list(range(30))


def test_entities_cooccurrence_communities():
    a = parse_note("a", "---\ntitle: A\naliases: [에이]\ntags: [x, y]\n---\n[[b]]")
    b = parse_note("b", "---\ntitle: B\ntags: [x]\n---\n[[a]]")
    c = parse_note("c", "---\ntitle: C\ntags: [z]\n---\nalone")
    ents = entities_for([a, b, c])
    assert ("에이", "alias", "a") in ents and ("x", "tag", None) in ents
    assert len([e for e in ents if e[0] == "x"]) == 1
    assert cooccurrence({"a": ["x", "y"], "b": ["x"]}) == {("x", "y"): 1}
    comm = communities(["a", "b", "c"], [("a", "b")], {"a": ["x"], "b": ["x"], "c": ["z"]})
    assert comm["a"] == comm["b"] != comm["c"]
    assert communities(["a", "b", "c"], [("a", "b")], {}, seed=0) == communities(["a", "b", "c"], [("a", "b")], {}, seed=0)
