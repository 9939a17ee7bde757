"""Why a round was not judged, as a value: a kind and its fields, which render both the reason the ledger
keeps and the fix the morning report gives, from one table (REASONS), so the two cannot disagree (a set with
probes was told to "add probes" when the fix was derived from the variable's kind apart from the reason).

Why a night kept nothing (EMPTY_NIGHT) is a value of this kind too: the morning report's headline is its
message and its fix, what the evidence-gap section (tuner/reports/evidence_gap.py) found.
How the night's measured latency compared with the cost model (LATENCY_DRIFT) is one too: the morning
report's latency reading and a drifted night's verdict clause.

The ledger keeps a round's reason as text (its `reason` column, under the hash chain); `read_reason` finds
the value again by rendering each kind's message for the round's variable and matching the text, so a
report gives the fix of the reason that was recorded. A model that cannot load and a crash keep their
error's own words.
"""

from __future__ import annotations

from tuner.ledger.schema import RoundDecision
from tuner.reasons import Reason, ReasonTable, Wording  # noqa: F401  (Reason: the value the sweep hands on)

NO_PROBES = "no_probes"                  # a gate variable, and the tuning set has no probes
NO_GATE_MODEL = "no_gate_model"          # the model's threshold, and no gate model could be fitted
MODEL_DECIDES = "model_decides"          # the cosine threshold, and a gate model decides
MODEL_UNAVAILABLE = "model_unavailable"  # the round's model cannot load here (its error says why)
CRASHED = "crashed"                      # the round raised (its error says what)


# a Wording's message is the reason as the ledger keeps it; its fix is what the morning report says to do
REASONS = ReasonTable("reason", {
    NO_PROBES: Wording(
        "{name} is judged on gate accuracy, and the tuning set has no probes (questions whose answer is not in "
        "the vault): on answerable questions alone every lower threshold looks better. Add questions with "
        "`level: probe` and no gold to the tuning set",
        "add probes to the tuning set (`level: probe`, no gold; `autoresearch probes make` holds out whole "
        "documents to make them), or remove the variable from the space"),
    NO_GATE_MODEL: Wording(
        "no gate model could be fitted on the tuning set (it needs 2 answerable questions, 2 probes and features "
        "that vary): the cosine gate decides, so {name} moves nothing",
        "the tuning set has {probes} probes, but no gate model could be fitted on it (it needs at least 2 "
        "answerable questions, 2 probes and gate features that vary between them): make them look like real "
        "questions (`autoresearch probes make` cuts them from held-out documents), or give the index a gate "
        "file (`autoresearch calibrate` from labelled recall calls)"),
    MODEL_DECIDES: Wording(
        "a gate model decides (the index's gate file or the shipped default, else one fitted on the tuning set), "
        "so {name} (the cosine gate's) moves nothing (it decides only where no model fits); {model_field} "
        "rounds tune the model's threshold",
        "nothing to add: the tuning set has {probes} probes and a gate model decides, so the cosine `{name}` "
        "moves no decision; `{model_field}` rounds tune the model's threshold. Remove `{name}` from the space "
        "to skip these rounds"),
    MODEL_UNAVAILABLE: Wording(
        "{error}",
        "make the model loadable offline (a pip package with its weights, a local folder, or a local server), "
        "or remove the value from the space"),
    CRASHED: Wording(
        "{error}",
        "a bug or bad input, named in the reason: fix it, then `autoresearch sweep --resume SWEEP`"),
})
# the kinds a variable's own facts render (matched against a recorded reason), in the order they are tried
VARIABLE_KINDS = (NO_PROBES, NO_GATE_MODEL, MODEL_DECIDES)


def reason(kind: str, **fields) -> Reason:
    """A reason of REASONS; its fields: name, probes, model_field (a variable's), error (the round's)."""
    return REASONS(kind, **fields)


def read_reason(decision: RoundDecision, variable: str, text: str, *, probes: int, model_field: str,
                gate_variable: bool) -> Reason:
    """The reason a round that was not judged (unavailable or crashed) recorded, as a value: the kind whose
    message for this variable is the recorded text, else, for a gate variable whose text an older version
    worded, the kind its evidence gives, else the error the round met (a model that cannot load). `probes`:
    how many the tuning set has (the fixes say so)."""
    if decision == RoundDecision.CRASHED:
        return reason(CRASHED, error=text)
    facts = dict(name=variable, probes=probes, model_field=model_field)
    for kind in VARIABLE_KINDS:
        r = reason(kind, **facts)
        if r.message() == text:
            return r
    if gate_variable:
        return reason(NO_PROBES if probes == 0 else NO_GATE_MODEL if variable == model_field else MODEL_DECIDES,
                      **facts)
    return reason(MODEL_UNAVAILABLE, error=text)


# -- why a night kept nothing --------------------------------------------------------------------------------
# Each kind names the strongest reason the ledger's rows give; its message begins with how many questions no
# config could improve, its fix names the harder questions to add (`levels`: the levels the set lacks, probes
# when it has none). The numbers arrive formatted (a delta with its sign, a p-value as "< 0.001").
TOO_FEW_CAN_RISE = "too_few_can_rise"    # fewer questions have room to rise than the paired test needs
UNTESTED_GAINS = "untested_gains"        # the rows predate the per-question metrics the test reads
NOTHING_MOVED = "nothing_moved"          # no config tried moved any question
BELOW_DETECTABLE = "below_detectable"    # the best gain is smaller than this set can detect
WITHIN_NOISE = "within_noise"            # the best gain's paired p is what it is, no detectable size to compare

_SATURATED = "Nothing kept: {saturated} of {n} tuning questions are at rank 1 under every config tried; "
_ADD = "add harder questions ({levels})"
EMPTY_NIGHT = ReasonTable("reason a night kept nothing", {
    TOO_FEW_CAN_RISE: Wording(
        _SATURATED + "only {headroom} have room to rise in {objective}, and the paired test needs {min_rising} to "
        "rise (none falling) for p < {alpha}", _ADD),
    UNTESTED_GAINS: Wording(
        _SATURATED + "{untested} gain(s) could not be tested: the ledger's rows predate the per-question metrics "
        "the paired test reads", _ADD),
    NOTHING_MOVED: Wording(_SATURATED + "no config tried moved any question", _ADD),
    BELOW_DETECTABLE: Wording(
        _SATURATED + "the best gain that moved any question, {delta} {objective} (paired p = {p}), is below the "
        "{smallest} this set of {n} can detect", _ADD),
    WITHIN_NOISE: Wording(
        _SATURATED + "the best gain that moved any question, {delta} {objective}, has paired p = {p}", _ADD),
})


# -- what evidence would decide a night that kept nothing ----------------------------------------------------
# The morning report's advice, one paragraph per kind: its message is what the ledger's rows show, its fix what
# to add; a paragraph is the two in that order (`advice_paragraph`), and a kind that is all finding or all
# action has the other empty.
SATURATED_QUESTIONS = "saturated_questions"  # questions at rank 1 under every config: they only dilute a gain
ADD_LEVEL = "add_level"                      # a harder level, with how many of it the set has
ADD_PROBES = "add_probes"                    # the set has no probes
WHERE_CONFIGS_DISAGREED = "where_configs_disagreed"    # the questions whose rank the configs moved most
MIN_RISING = "min_rising"                    # how many must rise for the paired test, and how many can
GAIN_OUT_OF_REACH = "gain_out_of_reach"      # the best gain would need more questions than were searched
GAIN_NEEDS_QUESTIONS = "gain_needs_questions"    # the best gain would be told from noise at about this many
HOW_TO_WRITE = "how_to_write"                # where the guide to writing questions is

NIGHT_ADVICE = ReasonTable("advice on a night's evidence", {
    SATURATED_QUESTIONS: Wording(
        "{saturated} of {n} tuning questions are at rank 1 under every config tried: no config can improve them, "
        "so they only dilute a gain.",
        "Keep a few as a guard; the others are better spent on harder questions."),
    ADD_LEVEL: Wording("", "Add {level} questions ({name}: {what}): {now}."),
    ADD_PROBES: Wording(
        "",
        "Add probes, questions whose answer is not in the vault: write a few, or let `autoresearch probes make VAULT "
        "--gold TUNE.yaml --out FOLDER` hold out whole notes so the questions about them become probes. Without "
        "probes the gate's thresholds are never tuned."),
    WHERE_CONFIGS_DISAGREED: Wording("", "Write questions about where the configs disagreed: {questions}{notes}."),
    MIN_RISING: Wording(
        "At {n} questions the paired test needs at least {min_rising} questions to rise, none falling, for "
        "p < {alpha}; {headroom} have room to rise in {objective} and could.", ""),
    GAIN_OUT_OF_REACH: Wording(
        "The best gain seen ({delta} {objective}) would need more than {searched_up_to} questions like these to be "
        "told from noise:",
        "it is too small to chase with more of the same questions."),
    GAIN_NEEDS_QUESTIONS: Wording(
        "The best gain seen ({delta} {objective}) would be told from noise at about {needed} questions like these "
        "(now {n}).", ""),
    HOW_TO_WRITE: Wording("", "How to write them: {guide}."),
})


# -- how the night's stopwatch compared with the cost model ------------------------------------------------------
# The morning report's latency section says the median measured / predicted p95 (`ratio`, formatted) over the
# evaluated rounds, flagged when it left [1 / DRIFT, DRIFT] (tuner/reports/sweep.py); a drifted night's verdict
# says so too (DRIFT_VERDICT, `ratio` a number). Each is all finding: decisions used the prediction, so there is
# nothing to fix.
WITHIN_CALIBRATION = "within_calibration"    # the ratio stayed within the band (or no round was charged)
DRIFTED = "drifted"                          # the ratio left the band: the machine was not as at calibration
DRIFT_VERDICT = "drift_verdict"              # the same, as the verdict's clause

LATENCY_DRIFT = ReasonTable("latency reading", {
    WITHIN_CALIBRATION: Wording("measured / predicted p95, median over {rounds} evaluated rounds: {ratio}", ""),
    DRIFTED: Wording(
        "measured / predicted p95, median over {rounds} evaluated rounds: {ratio} — DRIFT: the machine was not as "
        "at calibration", ""),
    DRIFT_VERDICT: Wording(
        "LATENCY DRIFT: measured p95 ran {ratio:.2f}x the cost model's prediction (the machine was much busier or "
        "quieter than at calibration; decisions used the prediction)", ""),
})


def advice_paragraph(advice: Reason) -> str:
    """One paragraph of the morning report's advice: what the rows show, then what to add."""
    return " ".join(part for part in (advice.message(), advice.fix()) if part)
