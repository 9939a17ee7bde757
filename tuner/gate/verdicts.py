"""What a gate calibration recommends, as a value (tuner.reasons): a kind and its fields, whose message (the
report's verdict line) and fix (what to do next, as the report's Recommendation says it) come from one
table, so the fix fits the state: a calibration that kept the gate never says to install a proposal, one
whose proposal was written never says to run `calibrate` first.

What a calibration warns of is a value of the same kind (CALIBRATION_WARNINGS): calibrate emits only values
of that table, and the report shows each as its message and its fix.
"""

from __future__ import annotations

from pathlib import Path

from tuner.gate.records import MIN_LABELLED, Calibration, LabelSuggestions
from tuner.reasons import Reason, ReasonTable, Wording

MOVE = "move"                  # the gate model's threshold moves to fit the labels (weights kept)
REFIT = "refit"                # a gate model fitted on the labels (or refitted: it measured better)
COSINE = "cosine"              # no gate model: a cosine threshold from the labels
KEEP = "keep"                  # the labels do not show that moving the threshold decides better
FITS = "fits"                  # the labels show no better cut than the one in force: it stays, nothing to decide
ONE_KIND = "one_kind"          # the labels hold one kind only (no relevant, or no irrelevant)
NO_LABELS = "no_labels"        # no labelled calls and no labelled set
NONE = "none"                  # labels of both kinds, and still nothing to recommend (the warnings say why)
DECLINED = "declined"          # `calibrate apply` of a proposal that records a calibration which proposed nothing

_LABEL_MORE = ("`autoresearch recall-log suggest` picks the calls worth labelling; label them on the /label page "
               "of `autoresearch serve` or with `autoresearch recall-log label ID relevant|irrelevant`, then run "
               "`autoresearch calibrate --db {db}` again")

VERDICTS = ReasonTable("calibration verdict", {
    MOVE: Wording(
        "recommend moving the gate's threshold from {from_:.3f} to {to:.3f} (the best cut on {level:.0%} of "
        "resampled labels {lo:.3f}-{hi:.3f}, from {relevant} relevant + {irrelevant} irrelevant labels; weights "
        "kept): {flipped} of {decisions} past "
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
        "{to:.3f} (the best cut on {level:.0%} of resampled labels {lo:.3f}-{hi:.3f}) but do not show the move "
        "decides better: {why}{more}",
        "nothing to apply: the gate in force stays (no proposal written). To decide the move, label more calls: " + _LABEL_MORE),
    FITS: Wording(
        "keep the gate's threshold {from_:.3f}: the {relevant} relevant + {irrelevant} irrelevant labels show no "
        "better cut ({why}; balanced accuracy on them {accuracy:.3f})",
        "nothing to apply: the threshold in force fits the labels (no proposal written). Each week's new labels are "
        "checked again the same way; " + _LABEL_MORE),
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


# -- what a calibration warns of ------------------------------------------------------------------------------
# Each warning calibrate emits is a value of this table; the report's Warnings section and the calibration's JSON
# (`warnings`, a list of strings) show its text(): the message, then its fix when it has one. NO_LABELS and
# ONE_KIND are kinds here too, as the verdicts name the same states.
SKIPPED_LABELS = "skipped_labels"      # labelled calls that never searched: no gate features to be evidence
OTHER_INDEX = "other_index"            # log calls logged against another index, left out
EMPTY_WINDOW = "empty_window"          # the log was read and its window holds no calls
IN_SAMPLE = "in_sample"                # the gate in force was fitted on some of the labelled sets
FEW_LABELS = "few_labels"              # fewer labelled rows than a gate model needs: a cosine threshold only
NO_GATE_MODEL = "no_gate_model"        # fitting a gate model on the labels failed (its error says why)
MOVE_UNDECIDED = "move_undecided"      # the labels point to another threshold but do not show it decides better
NO_REFIT = "no_refit"                  # a refit measured better, and fitting it on all the labels failed
CONFIG_OVERRIDES = "config_overrides"  # the active config's gate_threshold overrides any installed gate file's

CALIBRATION_WARNINGS = ReasonTable("calibration warning", {
    SKIPPED_LABELS: Wording(
        "{count} labelled call(s) have no search (timed out, failed or stopped before it: {ids}): their labels "
        "were skipped, a label needs the call's gate features", ""),
    OTHER_INDEX: Wording(
        "{count} log call(s) ({labelled} labelled) were logged against another index ({others}), not this one "
        "({this}): left out, their features are another vault's", ""),
    EMPTY_WINDOW: Wording(
        "the log window holds no calls: traffic, latency and the retirement rule are unknown",
        "widen --since or check that the recall path logs"),
    IN_SAMPLE: Wording(
        "the gate in force was fitted on {sets}: its scores on those rows are in-sample and flatter it",
        "score it on a labelled set it was not fitted on"),
    FEW_LABELS: Wording(
        "only {rows} labelled rows (< {need}): a cosine threshold is recommended, no model is fitted", ""),
    NO_GATE_MODEL: Wording("no gate model: {error}", ""),
    NO_LABELS: Wording(
        "no labels: the gate cannot be calibrated, no proposal is written and the current gate stays",
        "Label at least {need} calls of each kind, relevant and irrelevant (`autoresearch recall-log suggest` "
        "picks them), or pass a labelled set with probes via --labels"),
    ONE_KIND: Wording(
        "the labels hold no {missing!r} rows ({relevant} relevant, {irrelevant} irrelevant): a threshold needs "
        "both kinds, so no proposal is written and the current gate stays",
        "Label at least {need} {what} as {missing} (`autoresearch recall-log suggest` picks calls to label; "
        "`recall-log label ID {missing}`), or pass a labelled set with them via --labels"),
    MOVE_UNDECIDED: Wording(
        "the labels point to a threshold of {to:.3f} (the best cut on {level:.0%} of resampled labels "
        "{lo:.3f}-{hi:.3f}) but do not show that moving there decides better: {why}. The current {from_:.3f} stays, "
        "no proposal is written",
        "{more} (`recall-log suggest` picks them)"),
    NO_REFIT: Wording("no refit: {error}", ""),
    CONFIG_OVERRIDES: Wording(
        "the active config sets gate_threshold = {threshold}, which overrides the threshold of any gate file "
        "`calibrate apply` installs",
        "remove it from the config for the proposal to take effect"),
})
# what a missing kind of label is, as ONE_KIND's fix names it
MISSING_WHAT = {"relevant": "answerable calls (the vault had the answer)",
                "irrelevant": "probes (calls the vault could not answer)"}


# -- what a calibration report advises beside its verdict ------------------------------------------------------
# The section "Calls to label next" (the daemon's weekly job picks them): its message says which calls were
# picked and why, its fix how to label them; the gate-on-labels section with nothing to score says what it
# needs. The report shows each as "message: fix".
LABEL_NEXT = "label_next"              # the unlabelled calls whose labels would move the threshold most
NOT_SCORED = "not_scored"              # the gate in force cannot be scored: the labelled rows lack a kind

CALIBRATION_ADVICE = ReasonTable("calibration advice", {
    LABEL_NEXT: Wording(
        "{picks} of {pool} unlabelled calls ({labelled} labelled already), picked for how much their label would "
        "move the {scale} threshold {threshold}",
        "label them on the /label page of `autoresearch serve`, or with `autoresearch recall-log label ID "
        "relevant|irrelevant`, then run `autoresearch calibrate` again"),
    NOT_SCORED: Wording("needs labelled rows of both kinds (answerable and probes)", "pass --labels"),
})


def label_next(sg: LabelSuggestions) -> Reason:
    """What the calls picked to label next are, and how to label them."""
    return CALIBRATION_ADVICE(LABEL_NEXT, picks=len(sg.picks), pool=sg.pool, labelled=sg.labelled, scale=sg.scale,
                              threshold=sg.threshold)


# -- why a calibration recommends a gate, or none, and the retirement rule's verdict ------------------------------
# The recommendation's `basis` (why this gate), its `declined` (why no gate) and the retirement rule's verdict are
# values of these tables; the calibration's JSON, the proposal file and the report show each as its text().
BEST_COSINE = "best_cosine"            # a cosine threshold: the best balanced accuracy on the labelled rows
REFIT_WEIGHTS = "refit_weights"        # the gate's weights refitted: cross-validated better than moving its threshold
THRESHOLD_MOVED = "threshold_moved"    # the gate's threshold moved to the labels' cut, its weights kept

RECOMMENDATION_BASIS = ReasonTable("recommendation basis", {
    BEST_COSINE: Wording("best balanced accuracy on labelled data", ""),
    REFIT_WEIGHTS: Wording(
        "a refit of the weights on {labels} labels (cross-validated balanced accuracy {refit} vs {threshold_only} "
        "for the moved threshold)", ""),
    THRESHOLD_MOVED: Wording(
        "the gate's threshold moved to fit {labels} labels (the best cut on {level:.0%} of resampled labels "
        "{lo:.3f}-{hi:.3f}; {why}); feature weights kept", ""),
})

NOTHING_LABELLED = "nothing_labelled"  # no labelled row at all
ONE_KIND_LABELLED = "one_kind_labelled"    # labelled rows of one kind only: a threshold needs both
MOVE_NOT_SHOWN = "move_not_shown"      # the labels point elsewhere but do not show the move decides better
LABELS_FIT = "labels_fit"              # the labels show no better cut than the one in force
NO_RECOMMENDATION = "no_recommendation"    # nothing recommended for another reason (the warnings name it)

RECOMMENDATION_DECLINED = ReasonTable("declined recommendation", {
    NOTHING_LABELLED: Wording("no labels", ""),
    ONE_KIND_LABELLED: Wording("no {missing!r} labels ({relevant} relevant, {irrelevant} irrelevant)",
                               "label at least {need} calls as {missing}"),
    MOVE_NOT_SHOWN: Wording(
        "the labels point to a threshold of {to:.3f} but do not show that moving there decides better ({why})",
        "{more}"),
    LABELS_FIT: Wording("the labels show no better cut than the threshold in force, {to:.3f}", ""),
    NO_RECOMMENDATION: Wording("the calibration made no recommendation", "its report's warnings say why"),
})

KEEP_RECALL = "keep_recall"            # fast enough and injecting often enough to pay for its latency
CONSIDER_OFF = "consider_off"          # p95 over the limit or injecting too rarely
NO_CALLS = "no_calls"                  # the window holds no calls: the rule cannot be applied

RETIREMENT_VERDICT = ReasonTable("retirement verdict", {
    KEEP_RECALL: Wording("keep recall on", ""),
    CONSIDER_OFF: Wording("consider switching recall off", ""),
    NO_CALLS: Wording("unknown (no calls in the window)", ""),
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
        if method == "keep" and mv.to == mv.from_:       # no move the labels tell apart gains: nothing to decide
            return VERDICTS(FITS, from_=mv.from_, relevant=mv.answerable, irrelevant=mv.probes,
                            why=mv.labels_to_decide.text if mv.labels_to_decide else mv.sign_test.why,
                            accuracy=mv.accuracy_from, db=db)
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
        return VERDICTS(COSINE, threshold=rec.cosine.threshold, basis=rec.basis.text(),
                        more_for_model=(f"a gate model needs at least {MIN_LABELLED} labelled rows with both kinds; "
                                        + _LABEL_MORE.format(db=db)))
    missing = rec.missing
    if missing and missing.label == "both":
        return VERDICTS(NO_LABELS, need=missing.need, db=db)
    if missing:
        return VERDICTS(ONE_KIND, missing=missing.label, relevant=missing.relevant,
                        irrelevant=missing.irrelevant, need=missing.need, db=db)
    return VERDICTS(NONE, why=cal.warnings[-1].text() if cal.warnings else "no labels")
