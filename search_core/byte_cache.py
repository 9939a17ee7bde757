"""A dict kept within a byte budget: what a view keeps of the lists its queries read.

A view reads a term's posting list (the n-gram lists, FTS5's rows, a short token's chunks) the first time a
query asks for it and keeps it for the next queries. Each kind is bounded by the bytes of its arrays, and past
its budget everything it kept is let go at once: the lists a night's questions touch are a few per cent of a
vault's (docs/lab-notes/fastpath-2026-12.md), so one clear in a long-lived server costs a few cold queries,
where an eviction order would cost bookkeeping on every warm one.
"""

from __future__ import annotations


class ByteBudgetCache:
    """key -> value, with the bytes each value was put with summed; `put` past `budget` clears every entry first.
    A value may be None (a term nothing holds, 0 bytes): `in` tells a kept None from a key never put."""

    def __init__(self, budget: int):
        self.budget = budget
        self._values: dict = {}
        self.nbytes = 0

    def __contains__(self, key) -> bool:
        return key in self._values

    def __getitem__(self, key):
        return self._values[key]

    def __len__(self) -> int:
        return len(self._values)

    def keys(self):
        return self._values.keys()

    def get(self, key, default=None):
        return self._values.get(key, default)

    def put(self, key, value, nbytes: int):
        """Keep `value` under `key` (its arrays `nbytes`), and return it."""
        if self.nbytes + nbytes > self.budget:
            self.clear()
        self._values[key] = value
        self.nbytes += nbytes
        return value

    def clear(self) -> None:
        self._values.clear()
        self.nbytes = 0
