"""Fitting and calibrating the gate: probes, scorecards, calibration from the recall log, proposals and apply/undo."""

from search_core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "calibrate": ("calibrate", "calibrate_index"),
    "records": ("Calibration",),
    "fit": ("fit_gate",),
    "metrics": ("auroc", "balanced_accuracy", "risk_coverage", "gate_scorecard"),
    "proposal": ("write_proposal", "apply_proposal", "undo_apply", "Proposal"),
    "verdicts": ("calibration_verdict",),
    "probes": ("make_probes",),
})
