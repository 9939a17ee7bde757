"""The in-memory view of an index: the entity matrix keeps one row per entity name."""

from search_core.index.store import connect
from search_core.search.view import IndexView


def test_an_entity_without_a_vector_gets_no_other_entitys_vector(small_index):
    c = connect(small_index)
    eid, norm = c.execute("SELECT id, norm FROM entities ORDER BY id DESC LIMIT 1").fetchone()
    c.execute("DELETE FROM entity_vec WHERE rowid = ?", (eid,))
    view = IndexView(c)
    row = view.entity_names.index(norm)
    assert not view.entity_matrix[row].any()
    assert view.entity_matrix[0].any() and row != 0
    c.close()
