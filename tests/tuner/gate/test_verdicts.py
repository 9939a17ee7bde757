"""What a calibration recommends is a value (tuner.gate.verdicts) whose message and fix come from one table:
one test per kind that the fix fits the state it is given in (a kept gate is never told to install or to run
`calibrate` first; a written proposal is installed from where it was written)."""

import pytest

from search_core.recall.log import LoggedCall
from tests.helpers.logged_calls import FP, gate_model as _model, vault_labelled_near as _vault_labelled_near, \
    vault_with_boundary_at as _vault_with_boundary_at
from tuner.gate.calibrate import LabelledRow, calibrate
from tuner.gate.verdicts import (COSINE, DECLINED, FITS, KEEP, MOVE, NO_LABELS, NONE, ONE_KIND, REFIT, VERDICTS,
                                 calibration_verdict)

DB = "/vault/index.sqlite"
ELSEWHERE = "/runs/reports/gate-proposal-20261203.json"


def _cos_call(i, cos, label):
    return LoggedCall(i, 1000.0 + i, "s", "default", f"q{i}", "h", (), {"top_cos": cos, "hit_cos": cos}, {}, 0.82,
                      "idx-A", cos >= 0.82, None if cos >= 0.82 else "threshold", 20.0, None, label, None)


def _answers_and_probes(n):
    """n answerable calls (cosine 0.80-0.89) and n probes (0.60-0.69), labelled: the cosine separates them."""
    return [_cos_call(i, 0.80 + 0.01 * (i % 10), "relevant") for i in range(n)] + \
        [_cos_call(100 + i, 0.60 + 0.01 * (i % 10), "irrelevant") for i in range(n)]


def _says_run_calibrate_first(text):
    return "calibrate` first" in text or "run `autoresearch calibrate` first" in text


def test_keep_says_nothing_to_apply_and_how_to_decide_the_move():
    cal = calibrate(_vault_with_boundary_at(0.64, n_labels=24, seed=2), [], model=_model(), cos_threshold=0.82,
                    fingerprint=FP)
    v = calibration_verdict(cal, DB, None)
    assert v.kind == KEEP and v.message().startswith("keep the gate's threshold 0.640")
    assert cal.recommendation.threshold_move.to != 0.64 and any(w.kind == "move_undecided" for w in cal.warnings)
    fix = v.fix()
    assert fix.startswith("nothing to apply: the gate in force stays (no proposal written)")
    assert "calibrate apply" not in fix and not _says_run_calibrate_first(fix)
    assert "recall-log suggest" in fix and f"autoresearch calibrate --db {DB}` again" in fix


def test_labels_that_fit_the_cut_in_force_say_so_and_ask_for_no_move():
    """Every labelled call above the cut in force (0.64) relevant, every one below irrelevant: no move has a win
    to show, so the verdict is not "the labels point to 0.640 but do not show the move" and no warning is raised."""
    cal = calibrate(_vault_labelled_near(0.64), [], model=_model(), cos_threshold=0.82, fingerprint=FP)
    v = calibration_verdict(cal, DB, None)
    assert v.kind == FITS
    assert v.message().startswith("keep the gate's threshold 0.640: the ") and "show no better cut" in v.message()
    assert "balanced accuracy on them 1.000" in v.message() and "point to" not in v.message()
    assert v.fix().startswith("nothing to apply: the threshold in force fits the labels")
    assert "calibrate apply" not in v.fix() and not _says_run_calibrate_first(v.fix())
    assert not any(w.kind == "move_undecided" for w in cal.warnings)
    assert cal.recommendation.declined.kind == "labels_fit"


def test_move_says_where_its_proposal_is_and_installs_it_from_there():
    cal = calibrate(_vault_labelled_near(0.3), [], model=_model(), cos_threshold=0.82, fingerprint=FP)
    v = calibration_verdict(cal, DB, DB + ".gate-proposal.json")
    assert v.kind == MOVE and v.message().startswith("recommend moving the gate's threshold from 0.640")
    assert v.fix() == (f"proposal written to {DB}.gate-proposal.json; install it with `autoresearch calibrate apply "
                       f"--db {DB}` (undo with `autoresearch calibrate undo --db {DB}`)")
    # the daemon's weekly job writes its proposal under runs/reports: apply must be told where
    assert f"`autoresearch calibrate apply --db {DB} --proposal {ELSEWHERE}`" in \
        calibration_verdict(cal, DB, ELSEWHERE).fix()
    # a report rendered without a proposal says how to write one, never that one was written
    none = calibration_verdict(cal, DB, None).fix()
    assert "proposal written to" not in none and f"run `autoresearch calibrate --db {DB}` to write one" in none


def test_refit_installs_the_fitted_model():
    cal = calibrate(_answers_and_probes(8), [], model=None, cos_threshold=0.82, fingerprint=FP,
                    features=("top_cos", "hit_cos"))
    v = calibration_verdict(cal, DB, ELSEWHERE)
    assert v.kind == REFIT and v.message().startswith("recommend a gate model fitted on 8 answerable + 8 probes")
    assert v.fix().startswith(f"proposal written to {ELSEWHERE}; install it with `autoresearch calibrate apply")


def test_cosine_says_there_is_no_model_to_install_and_where_the_cut_goes():
    cal = calibrate(_answers_and_probes(3), [], model=None, cos_threshold=0.82, fingerprint=FP)
    v = calibration_verdict(cal, DB, ELSEWHERE)
    t = cal.recommendation.cosine.threshold
    assert v.kind == COSINE and v.message().startswith(f"recommend cosine threshold {t:.4f}")
    assert f"put `threshold = {t:.4f}` in your config" in v.fix() and "calibrate apply" not in v.fix()
    assert "at least 8 labelled rows" in v.fix()


@pytest.mark.parametrize("missing", ["relevant", "irrelevant"])
def test_one_kind_asks_for_the_missing_kind(missing):
    have = "irrelevant" if missing == "relevant" else "relevant"
    cal = calibrate([_cos_call(i, 0.7, have) for i in range(5)], [], model=None, cos_threshold=0.82, fingerprint=FP)
    v = calibration_verdict(cal, DB, None)
    assert v.kind == ONE_KIND and f"no {missing!r} rows" in v.message()
    fix = v.fix()
    assert fix.startswith("nothing to apply: the gate in force stays") and f"calls as {missing}" in fix
    assert "calibrate apply" not in fix and not _says_run_calibrate_first(fix)


def test_no_labels_asks_for_labels_of_each_kind():
    cal = calibrate([_cos_call(i, 0.7, None) for i in range(5)], [], model=None, cos_threshold=0.82, fingerprint=FP)
    v = calibration_verdict(cal, DB, None)
    assert v.kind == NO_LABELS and v.message() == "no recommendation: no labels"
    assert "calls of each kind" in v.fix() and "calibrate apply" not in v.fix()


def test_none_points_to_the_warnings():
    """Labels of both kinds but no cosine among them and too few to fit a model: nothing to recommend."""
    rows = [LabelledRow("set", str(i), f"q{i}", {}, i % 2 == 0) for i in range(4)]
    cal = calibrate([], rows, model=None, cos_threshold=0.82, fingerprint=FP, log_read=False)
    v = calibration_verdict(cal, DB, None)
    assert v.kind == NONE and "only 4 labelled rows" in v.message()
    assert v.fix() == "nothing to apply: the gate in force stays; the warnings below say what is missing"


def test_apply_of_a_declined_proposal_says_so_and_how_to_move_the_gate(tmp_path):
    """`calibrate apply` after a calibration that proposed nothing: the declined record's reason, the gate in
    force stays, label more; never "run calibrate first" (it ran)."""
    from search_core import SearchCoreError
    from tuner.gate.proposal import apply_proposal, write_proposal
    cal = calibrate(_vault_with_boundary_at(0.64, n_labels=24, seed=2), [], model=_model(), cos_threshold=0.82,
                    fingerprint=FP)
    proposal = tmp_path / "proposal.json"
    write_proposal(cal, tmp_path / "index.sqlite", proposal)
    with pytest.raises(SearchCoreError) as e:
        apply_proposal(proposal, tmp_path / "index.sqlite")
    text = str(e.value)
    assert text.startswith("nothing to apply: the calibration of ") and "do not show that moving there" in text
    assert "the gate in force stays. To move it, label more calls" in text and not _says_run_calibrate_first(text)


def test_every_kind_renders_and_an_unknown_one_is_refused():
    assert set(VERDICTS) == {MOVE, REFIT, COSINE, KEEP, FITS, ONE_KIND, NO_LABELS, NONE, DECLINED}
    with pytest.raises(KeyError, match="no calibration verdict 'drop'; kinds: move, refit"):
        VERDICTS("drop")
