"""The view of an index: the entity matrix keeps one row per entity name, mapped from the layout file or read
from SQLite."""

from search_core.index.layout import layout_path, refresh_layout
from search_core.index.store import atomic, bump_generation, connect
from search_core.search.view import IndexView


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


def test_the_names_a_query_holds_are_found_alike_by_a_loop_over_the_names_and_by_the_querys_substrings(demo_index):
    """channels.names_in loops over the vault's names when they are few against the query's substrings, and
    looks the substrings up when they are many: both give every name of 2+ characters the query holds, in
    the view's name order (the order the entity channel adds their notes' scores in)."""
    from search_core.ingest.graph import normalize_name
    from search_core.search.channels import names_in
    view = IndexView.open(demo_index)
    try:
        names = view.entity_names
        _, longest = view.entity_name_index()
        queries = [normalize_name(q) for n in names for q in (n, f"{n} 그리고 {names[len(n) % len(names)]} 비교", n[:3])]
        ways = set()
        for q in queries:
            ways.add(len(names) <= len(q) * min(longest, len(q)))     # True: the loop over the names
            assert names_in(view, q) == [n for n in names if len(n) >= 2 and n in q], q
        assert ways == {True, False}, "both ways were tried"
    finally:
        view.close()


def test_views_of_one_commit_share_one_mapped_layout_and_a_new_commit_maps_its_own(tmp_path, shared_cache):
    """`serve` holds a view per lane: two views of the same commit hold one mapping of the layout file and one
    copy of the arrays made from it, and answer alike; the notes and links each view reads itself (a commit
    that leaves the generation token as it was may change them); a view of a later commit maps its own."""
    import shutil

    from search_core.index.indexer import index_vault
    from search_core.search import channels as ch
    from tests.helpers import DEMO_VAULT
    from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
    vault = tmp_path / "vault"
    shutil.copytree(DEMO_VAULT / "ai", vault)
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    first, second = IndexView.open(db), IndexView.open(db)
    try:
        for name in ("layout", "matrix", "place_of", "row_of_chunk", "chunk_note", "note_chunks"):
            assert getattr(second, name) is getattr(first, name), name
        assert second.layout_source.mapped and second.notes is not first.notes
        q = "GraphRAG 커뮤니티 요약"
        assert ch.ngram_sparse(second.conn, second, q, 10) == ch.ngram_sparse(first.conn, first, q, 10)
    finally:
        first.close()
    note = vault / "rag" / "bm25.md"
    assert "rag/bm25" not in second.links_in.get("rag/hyde", set())
    note.write_text(note.read_text(encoding="utf-8") + "\n\n[[rag/hyde]] 새 링크.\n", encoding="utf-8")
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    third = IndexView.open(db)
    try:
        assert third.layout is not second.layout and third.place_of is not second.place_of
        assert "rag/bm25" in third.links_in["rag/hyde"]
        assert "rag/bm25" not in second.links_in.get("rag/hyde", set())
    finally:
        second.close()
        third.close()


def test_links_and_tag_members_read_grouped_are_the_tables_rows(demo_index):
    """links_in, links_out and tag_members, read as one row per target or tag and split on first use, hold
    what the tables hold row by row: every source of a link, every note of a tag (two spellings of a tag
    merged) in (note id, tag) order."""
    from collections import defaultdict

    from search_core.ingest.graph import normalize_name
    view = IndexView.open(demo_index)
    try:
        want_in, want_out, want_tags = defaultdict(set), defaultdict(set), defaultdict(list)
        for src, dst in view.conn.execute("SELECT src, dst FROM links WHERE dst IS NOT NULL AND dst != src"):
            want_in[dst].add(src)
            want_out[src].add(dst)
        for nid, tag in view.conn.execute("SELECT note_id, tag FROM belongs_to ORDER BY note_id, tag"):
            want_tags[normalize_name(tag)].append(nid)
        assert len(want_in) > 20 and len(want_tags) > 5
        assert {k: view.links_in[k] for k in view.links_in} == dict(want_in)
        assert dict(view.links_out) == dict(want_out)
        assert {k: view.tag_members[k] for k in view.tag_members} == dict(want_tags)
        assert view.links_in.get("no/such-note", ()) == () and view.tag_members.get("no-such-tag", []) == []
        assert "no-such-tag" not in view.tag_members
    finally:
        view.close()


def test_two_spellings_of_a_tag_are_one_list_in_note_order():
    from search_core.ingest.graph import normalize_name
    from search_core.search.view import TagMembers
    assert normalize_name("RAG") == normalize_name("rag")
    members = TagMembers([("RAG", "ai/c\x1fai/a"), ("rag", "ai/b\x1fai/a")])
    assert members[normalize_name("rag")] == ["ai/a", "ai/a", "ai/b", "ai/c"]   # as rows (note id, tag) ordered
    assert len(members) == 1


def test_a_views_load_leaves_the_cyclic_collector_as_it_found_it(demo_index, monkeypatch):
    """The load pauses the collector (what it builds is kept, so a pass finds nothing) and resumes it after,
    also when the load fails; a collector the caller had paused stays paused."""
    import gc

    import pytest

    from search_core.search import view as view_module
    assert gc.isenabled()
    IndexView.open(demo_index).close()
    assert gc.isenabled()
    seen = []
    monkeypatch.setattr(view_module, "get_meta", lambda *a: (seen.append(gc.isenabled()), 1 / 0))
    with pytest.raises(ZeroDivisionError):
        IndexView.open(demo_index)
    assert seen == [False] and gc.isenabled()
    monkeypatch.undo()
    gc.disable()
    try:
        IndexView.open(demo_index).close()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_each_notes_best_cosine_from_one_product_is_its_own_within_a_rounding(small_index):
    """IndexView.note_maxima, from the rows gathered and from the whole matrix, against best_chunk and cosine
    note by note; a note whose vectors were deleted and an unknown id get 0, as cosine gives them."""
    import numpy as np
    from search_core.search import view as view_module
    from search_core.search.channels import ENTITY_ROUNDING
    c = connect(small_index)
    bare = c.execute("SELECT note_id FROM chunks GROUP BY note_id HAVING count(*) > 1 ORDER BY note_id LIMIT 1").fetchone()[0]
    with atomic(c):
        c.execute("DELETE FROM chunk_vec WHERE rowid IN (SELECT id FROM chunks WHERE note_id = ?)", (bare,))
        c.execute("UPDATE chunks SET has_vector = 0 WHERE note_id = ?", (bare,))
        bump_generation(c)
        refresh_layout(c, small_index)
    view = IndexView(c)
    notes = list(view.note_chunks) + ["no/such/note"]
    rng = np.random.default_rng(0)
    mixed = rng.standard_normal(view.matrix.shape[1]).astype(np.float32)
    live = view.matrix[view.vec_ids >= 0]          # the last rows are padding (layout.ROW_BLOCK)
    for q in (live[0], live[-1], mixed / np.linalg.norm(mixed)):
        own = np.array([view.cosine(q, n, view.best_chunk(q, n)) for n in notes])
        assert own[notes.index(bare)] == 0.0 and own[-1] == 0.0 and own.max() > 0
        for share in (1.0, 0.0):            # the rows gathered; one product over the whole matrix
            view_module.GATHER_SHARE = share
            try:
                got = view.note_maxima(q, notes)
                picked = view.note_maxima(q, notes[::3])
            finally:
                view_module.GATHER_SHARE = 0.25
            assert np.abs(got - own).max() <= ENTITY_ROUNDING / 10
            assert got[notes.index(bare)] == 0.0 and got[-1] == 0.0
            assert np.abs(picked - got[::3]).max() <= ENTITY_ROUNDING / 10
        read = view.note_maxima(q, notes, view_module.matvec(view.matrix, q))    # the dense channel's product
        assert np.abs(read - own).max() <= ENTITY_ROUNDING / 10
        assert read[notes.index(bare)] == 0.0 and read[-1] == 0.0
    c.close()


def test_the_entity_ranking_pruned_by_one_product_is_the_ranking_of_every_note_scored(demo_index):
    """rank_entity_notes scores note by note only the notes near the depth-th: its list is the full scoring's,
    note, chunk and score, for graph scores with many ties and depths from 1 to every note."""
    import numpy as np
    from search_core.search.channels import ENTITY_BONUS, ChannelHit, dense_product, rank_entity_notes
    view = IndexView.open(demo_index)
    try:
        notes = list(view.note_chunks)
        rng = np.random.default_rng(1)
        for trial in range(6):
            q = view.matrix[int(rng.integers(len(view.matrix)))]
            chosen = [notes[i] for i in rng.choice(len(notes), size=min(len(notes), 40 + 20 * trial), replace=False)]
            score = {n: float(rng.choice([0.0, 0.5, 1.0, rng.random()])) for n in chosen}
            full = sorted(((view.cosine(q, n, cid) + ENTITY_BONUS * score[n], n, cid)
                           for n in chosen for cid in [view.best_chunk(q, n)]), key=lambda t: (-t[0], t[1]))
            for depth in (1, 3, 10, len(chosen), len(chosen) + 5):
                want = [ChannelHit(n, cid, s) for s, n, cid in full[:depth]]
                assert rank_entity_notes(view, q, score, depth) == want
                assert rank_entity_notes(view, q, score, depth, dense_product(view, q)) == want
    finally:
        view.close()


def test_an_opened_view_knows_its_notes_without_sqlite_and_reads_a_notes_row_when_asked(demo_index):
    """The entity channel asks which notes exist on the query-embedding thread, where no SQLite read may run
    (two threads on one connection deadlocked): an opened view answers that, and the index-page flags, from the
    ids it read when it loaded; a note's row is read when asked for, and is the row a whole read gives."""
    view = IndexView.open(demo_index)
    whole = connect(demo_index)
    try:
        statements = []
        view.conn.set_trace_callback(statements.append)
        flags = view.notes.nav_flags()
        assert len(flags) == len(view.notes) == whole.execute("SELECT count(*) FROM notes").fetchone()[0]
        assert all(nid in view.notes for nid in flags) and "no/such/note" not in view.notes
        assert "no/such/note" not in view.notes and view.notes.get("no/such/note") is None
        assert statements == []
        every = IndexView(whole).notes
        assert flags == {nid: row["nav_reason"] for nid, row in every.items()} and any(flags.values())
        for nid in list(flags)[::7]:
            assert dict(view.notes[nid]) == dict(every[nid])
        assert statements
    finally:
        view.close()
        whole.close()
