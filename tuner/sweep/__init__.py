"""The sweep: the search space, proposals, the round loop, the keep rule, what a change needs, and the rejected-round audit."""

from search_core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "loop": ("Sweep",),
    "keep_rule": ("decide", "Rule", "Decision", "objective_value"),
    "space": ("Space", "Variable", "load_space"),
    "propose": ("propose",),
    "variables": ("Kind", "kind_of"),
    "workbench": ("Workbench", "verify_index", "fit_threshold", "IndexVerificationError"),
    "pins": ("harness_pins", "check_pins"),
    "rejected_audit": ("audit_data", "audit_report", "retest", "AuditData", "RejectedRound"),
    "summary": ("SweepSummary", "HoldoutCheck", "Figures", "RetestResult", "RetestStopped"),
    "params": ("SweepParams", "RecordedParams"),
    "rounds": ("run_round", "replay_decisions", "ReplayedRound"),
})
