"""What a gate calibration recommends, as a value (tuner.reasons): a kind and its fields, whose message (the
report's verdict line) and fix (what to do next, as the report's Recommendation says it) come from one
table, so the fix fits the state: a calibration that kept the gate never says to install a proposal, one
whose proposal was written never says to run `calibrate` first.
"""

from __future__ import annotations

from pathlib import Path

from tuner.gate.records import MIN_LABELLED, Calibration
from tuner.reasons import Reason, ReasonTable, Wording

MOVE = "move"                  # the gate model's threshold moves to fit the labels (weights kept)
REFIT = "refit"                # a gate model fitted on the labels (or refitted: it measured better)
COSINE = "cosine"              # no gate model: a cosine threshold from the labels
KEEP = "keep"                  # the labels do not show that moving the threshold decides better
ONE_KIND = "one_kind"          # the labels hold one kind only (no relevant, or no irrelevant)
NO_LABELS = "no_labels"        # no labelled calls and no labelled set
NONE = "none"                  # labels of both kinds, and still nothing to recommend (the warnings say why)
DECLINED = "declined"          # `calibrate apply` of a proposal that records a calibration which proposed nothing

_LABEL_MORE = ("`autoresearch recall-log suggest` picks the calls worth labelling; label them on the /label page "
               "of `autoresearch serve` or with `autoresearch recall-log label ID relevant|irrelevant`, then run "
               "`autoresearch calibrate --db {db}` again")

VERDICTS = ReasonTable("calibration verdict", {
    MOVE: Wording(
        "recommend moving the gate's threshold from {from_:.3f} to {to:.3f} ({level:.0%} interval {lo:.3f}-{hi:.3f}, "
        "from {relevant} relevant + {irrelevant} irrelevant labels; weights kept): {flipped} of {decisions} past "
        "decisions flip ({let_through} let through, {stopped} stopped); {why}",
        "{install}"),
    REFIT: Wording(
        "recommend a gate model fitted on {answerable} answerable + {probes} probes: P >= {p_threshold:.3f} "
        "(cross-validated balanced accuracy {cv})",
        "{install}"),
    COSINE: Wording(
        "recommend cosine threshold {threshold:.4f} ({basis})",
        "no gate model to install (too few labels to fit one): to use this cut, put `threshold = {threshold:.4f}` "
        "in your config; {more_for_model}"),
    KEEP: Wording(
        "keep the gate's threshold {from_:.3f}: the {relevant} relevant + {irrelevant} irrelevant labels point to "
        "{to:.3f} ({level:.0%} interval {lo:.3f}-{hi:.3f}) but do not show the move decides better: {why}{more}",
        "nothing to apply: the gate in force stays (no proposal written). To decide the move, label more calls: " + _LABEL_MORE),
    ONE_KIND: Wording(
        "no recommendation: the labels hold no {missing!r} rows ({relevant} relevant, {irrelevant} irrelevant)",
        "nothing to apply: the gate in force stays. Label at least {need} calls as {missing} (a threshold needs "
        "both kinds), or pass a labelled set with them via --labels; " + _LABEL_MORE),
    NO_LABELS: Wording(
        "no recommendation: no labels",
        "nothing to apply: the gate in force stays. Label at least {need} calls of each kind, relevant and "
        "irrelevant, or pass a labelled set with probes via --labels; " + _LABEL_MORE),
    NONE: Wording(
        "no recommendation: {why}",
        "nothing to apply: the gate in force stays; the warnings below say what is missing"),
    DECLINED: Wording(
        "nothing to apply: the calibration of {created} proposed no change ({declined})",
        "the gate in force stays. To move it, label more calls: " + _LABEL_MORE),
})


def _install(db: str, proposal: str | None) -> str:
    """How to install a proposal that was written (or how to write one, when the report names none)."""
    if proposal is None:
        return (f"no proposal was written with this report: run `autoresearch calibrate --db {db}` to write one, "
                f"then `autoresearch calibrate apply --db {db}`")
    default = str(db) + ".gate-proposal.json"
    where = "" if Path(proposal) == Path(default) else f" --proposal {proposal}"
    return (f"proposal written to {proposal}; install it with `autoresearch calibrate apply --db {db}{where}` "
            f"(undo with `autoresearch calibrate undo --db {db}`)")


def calibration_verdict(cal: Calibration, db: str, proposal: str | None) -> Reason:
    """What `cal` recommends, for the index `db`, with the proposal written to `proposal` (None: none)."""
    rec = cal.recommendation
    mv, ms = rec.threshold_move, rec.model_summary
    method = ms.method if ms is not None else None
    if method in ("keep", "threshold"):
        move = dict(from_=mv.from_, to=mv.to, level=mv.level, lo=mv.interval[0], hi=mv.interval[1],
                    relevant=mv.answerable, irrelevant=mv.probes, why=mv.sign_test.why)
        if method == "keep":
            more = mv.labels_to_decide
            return VERDICTS(KEEP, **move, more=f"; {more.text}" if more else "", db=db)
        f = mv.flips
        return VERDICTS(MOVE, **move, flipped=f.total, decisions=f.decisions,
                        let_through=f.let_through, stopped=f.stopped, install=_install(db, proposal))
    if method:
        return VERDICTS(REFIT, answerable=cal.labelled.answerable, probes=cal.labelled.probes,
                        p_threshold=ms.p_threshold, cv=ms.cv_balanced_accuracy, install=_install(db, proposal))
    if rec.cosine is not None and rec.cosine.threshold is not None:
        return VERDICTS(COSINE, threshold=rec.cosine.threshold, basis=rec.basis,
                        more_for_model=(f"a gate model needs at least {MIN_LABELLED} labelled rows with both kinds; "
                                        + _LABEL_MORE.format(db=db)))
    missing = rec.missing
    if missing and missing.label == "both":
        return VERDICTS(NO_LABELS, need=missing.need, db=db)
    if missing:
        return VERDICTS(ONE_KIND, missing=missing.label, relevant=missing.relevant,
                        irrelevant=missing.irrelevant, need=missing.need, db=db)
    return VERDICTS(NONE, why=cal.warnings[-1] if cal.warnings else "no labels")
