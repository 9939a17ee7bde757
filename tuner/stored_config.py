"""A search config as the tuner's records keep it (a ledger row, a sweep, its summary, a promotion, an
evaluation): a `SearchConfig`, read from the recorded JSON at the edge and written back to the same JSON.

A config recorded before a key existed lacks that key; `SearchConfig.from_stored` gives it the value it ran
with (ADDED_LATER), and `StoredConfig` remembers which keys the record held, in what order, so that `to_json`
writes back the very bytes it read: the ledger's hash chain covers them, and `ledger --json` prints them.
A config recorded today holds every key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from search_core.config import SearchConfig

EVERY_KEY: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SearchConfig))


@dataclass(frozen=True)
class StoredConfig:
    search: SearchConfig
    keys: tuple[str, ...] = EVERY_KEY      # the keys the record holds, in its order

    @classmethod
    def from_json(cls, d: dict) -> StoredConfig:
        """A recorded config; a key this version does not know is a SearchCoreError naming it."""
        return cls(SearchConfig.from_stored(d), tuple(d))

    def to_json(self) -> dict:
        every = self.search.as_dict()
        return {k: every[k] for k in self.keys}

    def config_hash(self) -> str:
        return self.search.config_hash()


# What a record that kept no config holds (an evaluation read back from a ledger row, whose config is the
# row's): it writes `{}`.
NO_CONFIG = StoredConfig(SearchConfig.from_stored({}), ())


@dataclass(frozen=True)
class ConfigChange:
    """Where one config differs from another: (key, value) in the changed config's key order; `to_json` is
    the `{key: value}` the reports print."""
    changes: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def between(cls, base: StoredConfig, changed: StoredConfig) -> ConfigChange:
        """The keys of `changed` (as it was recorded) whose value is not `base`'s."""
        before, after = base.search.as_dict(), changed.to_json()
        return cls(tuple((k, v) for k, v in after.items() if before.get(k) != v))

    def to_json(self) -> dict:
        return dict(self.changes)

    def __bool__(self) -> bool:
        return bool(self.changes)
