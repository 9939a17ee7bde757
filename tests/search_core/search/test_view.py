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
