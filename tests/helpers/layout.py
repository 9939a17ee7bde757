"""Comparing dense layouts in tests."""
from __future__ import annotations

import numpy as np


def same_order(got, want) -> None:
    """The same vault order: note ids, each note's first place, and the chunk at every place (dtype included)."""
    assert got.note_ids == want.note_ids
    for name in ("note_start", "chunk_at"):
        x, y = getattr(got, name), getattr(want, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
