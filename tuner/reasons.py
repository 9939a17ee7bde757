"""A reason or verdict as a value: a kind and its fields, which render both the message (what happened) and
the fix (what a person does about it) from one table of wordings, so the two cannot disagree (a report told
a user whose set had probes to "add probes" when the fix was derived apart from the reason).

Each table (ReasonTable) names its kinds; its `__call__` makes a value of one kind, refusing a kind it does
not have. Tables: why a sweep round was not judged (tuner.sweep.reasons), what a gate calibration
recommends and what it warns of (tuner.gate.verdicts), what an A/B found (tuner.ab.verdicts).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Wording:
    message: str                # what happened, with {field} slots
    fix: str                    # what a person does about it, with {field} slots


@dataclass(frozen=True)
class ReasonTable:
    what: str                               # what the table's values are about (its errors name it)
    wordings: Mapping[str, Wording]

    def __call__(self, kind: str, **fields: Any) -> Reason:
        if kind not in self.wordings:
            raise KeyError(f"no {self.what} {kind!r}; kinds: {', '.join(self.wordings)}")
        return Reason(kind, fields, self)

    def __getitem__(self, kind: str) -> Wording:
        return self.wordings[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self.wordings)


@dataclass(frozen=True)
class Reason:
    kind: str                               # a key of its table
    fields: dict[str, Any] = field(default_factory=dict)    # what its wording names
    table: ReasonTable | None = field(default=None, compare=False, repr=False)

    def message(self) -> str:
        return self.table[self.kind].message.format(**self.fields)

    def fix(self) -> str:
        return self.table[self.kind].fix.format(**self.fields)

    def __str__(self) -> str:
        return self.text()

    def text(self) -> str:
        """The message and its fix as one line (a warning's): a fix that is a sentence of its own (it begins
        with a capital) follows a full stop, a clause a semicolon; no fix, the message alone."""
        message, fix = self.message(), self.fix()
        if not fix:
            return message
        return f"{message}{'. ' if fix[0].isupper() else '; '}{fix}"
