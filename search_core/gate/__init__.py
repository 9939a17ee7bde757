"""The gate: features of one search, the model over them, and which gate an index uses (engine side; fitting and calibration live in tuner.gate)."""

from search_core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "features": ("gate_features",),
    "model": ("GateModel", "GateChoice", "GateDecision", "load_gate", "choose_gate", "sidecar_path", "GateFileError", "GateFitError"),
    "request": ("GateRequest",),
})
