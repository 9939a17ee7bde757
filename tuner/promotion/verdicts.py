"""Why a sweep's winner is promoted or not, as values of one table (tuner.reasons): the history row, the morning
report's headline and `config history` show each as its text()."""

from __future__ import annotations

from tuner.reasons import ReasonTable, Wording

NO_CHANGE = "no_change"                # the winner is the starting config: nothing to promote
NO_HOLDOUT = "no_holdout"              # no questions the sweep never tuned on to check the winner against
HIT5_FELL = "hit5_fell"                # the holdout lost questions from the top 5
WORSE_ON_HOLDOUT = "worse_on_holdout"  # a paired test calls the start better on a metric of the holdout
HELD = "held"                          # the winner held on the holdout: promoted
HELD_OBJECTIVE_FELL = "held_objective_fell"    # held by the rule, but the objective fell within noise: said
GATE_NOT_PROMOTED = "gate_not_promoted"    # a clause: the winner's gate_threshold stayed behind

PROMOTION_VERDICTS = ReasonTable("promotion verdict", {
    NO_CHANGE: Wording("no change was kept: the winner is the starting config", ""),
    NO_HOLDOUT: Wording(
        "the sweep had no holdout (--holdout or --split): a winner is promoted only when it held on questions it "
        "never tuned on", ""),
    HIT5_FELL: Wording("holdout hit@5 fell {start:.4f} -> {final:.4f} ({lost} of {n} questions lost)", ""),
    WORSE_ON_HOLDOUT: Wording("the holdout is significantly worse on {worse}", ""),
    HELD: Wording(
        "held on the holdout: hit@5 {start:.4f} -> {final:.4f} ({gained:+d} of {n} questions, p={p:.4f}); no "
        "metric significantly worse", ""),
    HELD_OBJECTIVE_FELL: Wording(
        "held on the holdout: hit@5 {start:.4f} -> {final:.4f} ({gained:+d} of {n} questions, p={p:.4f}); no "
        "metric significantly worse; the holdout {objective} fell {was:.2f} -> {now:.2f}, within noise: the tuning "
        "gain did not carry over", ""),
    GATE_NOT_PROMOTED: Wording(
        "its gate_threshold was not promoted: the gate model it was tuned on is not available, and on another gate "
        "the number means something else", ""),
})
