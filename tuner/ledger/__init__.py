"""The append-only ledger of sweeps and rounds, and the hash chain that makes tampering visible."""

from search_core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "ledger": ("Ledger", "verify_or_seal", "require_intact"),
    "round": ("Round",),
    "sweep_record": ("SweepRecord",),
    "chain": ("LedgerError", "LedgerVerdict", "verify_ledger"),
    "schema": ("DECISIONS", "SCHEMA"),
    "winner": ("sweep_winner", "open_intact"),
})
