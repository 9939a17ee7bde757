"""Opening an index: a file another process holds locked is said to be locked, not broken."""

import pytest

from search_core import SearchCoreError
from search_core.index.store import connect, open_index


def test_a_locked_index_is_not_called_broken(small_index):
    w = connect(small_index)
    w.execute("PRAGMA locking_mode = EXCLUSIVE")
    w.execute("BEGIN EXCLUSIVE")
    w.execute("UPDATE meta SET value = value WHERE key = 'indexed_at'")
    try:
        with pytest.raises(SearchCoreError) as e:
            open_index(small_index)
        assert "locked by another process" in str(e.value) and "--full" not in str(e.value)
    finally:
        w.execute("ROLLBACK")
        w.close()
