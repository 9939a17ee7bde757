"""Which gate a search decides with, as a value: a GateRequest is given to a Searcher when it is made (the
gate `search`, the servers and recall use) or to one search (`rank(..., gate=...)`: the sweep's model fitted
for a pair no gate file fits), and choose_gate turns it into a GateChoice for an index and a reranker."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from search_core.gate.model import GateChoice, GateModel, choose_gate, gate_file_stamp


@dataclass(frozen=True)
class GateRequest:
    """`path`: that gate file; else `<db>.gate.json`; else the shipped default (when `default`); else
    `fitted` (a model fitted in this process, named `fitted_source`); else the cosine gate with the reason
    (choose_gate). `cosine_reason` set: the cosine gate alone, for that reason, no file read (a caller that
    sets the cosine threshold itself); build it with GateRequest.cosine."""
    path: str | Path | None = None
    default: bool = True
    fitted: GateModel | None = None
    fitted_source: str = "fitted on the tuning set"
    cosine_reason: str | None = None

    @classmethod
    def cosine(cls, reason: str) -> "GateRequest":
        return cls(cosine_reason=reason)

    def choose(self, fingerprint: dict, reranker: str = "none", db: str | Path | None = None) -> GateChoice:
        """The gate for a search with `reranker` over the index `db` with `fingerprint`."""
        if self.cosine_reason is not None:
            return GateChoice(None, "cosine", self.cosine_reason)
        return choose_gate(fingerprint, reranker, path=self.path, db=db, default=self.default, fitted=self.fitted,
                           fitted_source=self.fitted_source)

    def stamp(self, db: str | Path | None) -> tuple | None:
        """The stamp of the file the choice reads first (gate_file_stamp); None for the cosine gate alone."""
        return gate_file_stamp(self.path, db) if self.cosine_reason is None else None
