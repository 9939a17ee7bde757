"""The gate proposal (tuner.gate.proposal): what `calibrate` writes and `calibrate apply` installs, when the
labels hold one kind only, when a value is not a number, and when a later run declines."""

import dataclasses
import json

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.gate.model import sidecar_path
from tests.helpers.logged_calls import FP, cosine_call
from tuner.cli import main
from tuner.gate.calibrate import calibrate, calibrate_index
from tuner.gate.proposal import apply_proposal, write_proposal


@pytest.mark.parametrize("kind", ["relevant", "irrelevant"])
def test_labels_of_one_kind_write_no_proposal_and_say_what_is_missing(tmp_path, kind):
    # Probes alone used to propose a cosine threshold from np.quantile over None -> NaN: the proposal held
    # "cosine_threshold": NaN (not JSON) and `calibrate apply` advised `threshold = nan`.
    calls = [cosine_call(i, 0.7 + 0.01 * i, kind) for i in range(1, 6)]
    calls.append(cosine_call(6, 0.0, kind, error="timeout: 2 s"))
    cal = calibrate(calls, [], model=None, cos_threshold=0.82, fingerprint=FP, fingerprint_key="idx-A")
    other = "irrelevant" if kind == "relevant" else "relevant"
    rec = cal.recommendation
    assert rec.basis is None and rec.missing.label == other and rec.missing.need == 4
    assert any(f"hold no {other!r} rows" in w and f"Label at least 4" in w for w in cal.warning_lines())
    proposal = tmp_path / "proposal.json"
    write_proposal(cal, tmp_path / "index.sqlite", proposal)
    text = proposal.read_text()
    assert "NaN" not in text and json.loads(text)["declined"].startswith(f"no {other!r} labels")
    with pytest.raises(SearchCoreError, match="nothing to apply") as e:
        apply_proposal(proposal, tmp_path / "index.sqlite")
    assert "nan" not in str(e.value).lower()


def test_a_proposal_is_never_written_with_nan_and_apply_never_advises_nan(tmp_path):
    cal = calibrate([cosine_call(i, 0.7 + 0.01 * i, "relevant" if i % 2 else "irrelevant") for i in range(1, 5)], [],
                    model=None, cos_threshold=0.82, fingerprint=FP)
    rec = cal.recommendation
    cal = dataclasses.replace(cal, recommendation=dataclasses.replace(
        rec, cosine=dataclasses.replace(rec.cosine, threshold=float("nan"))))
    proposal = tmp_path / "proposal.json"
    with pytest.raises(SearchCoreError, match="not a number"):
        write_proposal(cal, tmp_path / "index.sqlite", proposal)
    assert not proposal.exists()
    # a proposal written by an older version, NaN and all: refused, and no advice with nan in it
    proposal.write_text('{"model": null, "cosine_threshold": NaN, "basis": "probes only"}')
    r = CliRunner().invoke(main, ["calibrate", "apply", "--db", str(tmp_path / "index.sqlite"),
                                  "--proposal", str(proposal)])
    assert r.exit_code == 1 and "not valid JSON" in r.output and "threshold =" not in r.output, r.output
    proposal.write_text('{"model": null, "cosine_threshold": 7.5, "basis": "labels"}')
    with pytest.raises(SearchCoreError, match="7.5 is not a cosine") as e:
        apply_proposal(proposal, tmp_path / "index.sqlite")
    assert "threshold = 7.5" not in str(e.value)


def test_a_run_that_declines_replaces_the_older_proposal_so_apply_has_nothing_to_apply(labelled_log, tmp_path):
    db, log, _ = labelled_log
    data, _, _, _ = calibrate_index(db, log_path=log, since_s=None, threshold_rule="always")
    proposal = tmp_path / "proposal.json"
    write_proposal(data, db, proposal)                  # last week's proposal, never applied
    assert json.loads(proposal.read_text())["model"]
    r = CliRunner().invoke(main, ["calibrate", "--db", str(db), "--log", str(log), "--since", "all",
                                  "--format", "json", "--out", str(tmp_path / "cal.json"), "--proposal", str(proposal)])
    assert r.exit_code == 0, r.output                  # this week's labels show no better cut than the one in force
    assert "no proposal:" in r.output and "show no better cut" in r.output
    r = CliRunner().invoke(main, ["calibrate", "apply", "--db", str(db), "--proposal", str(proposal)])
    assert r.exit_code == 1 and "nothing to apply" in r.output and "show no better cut" in r.output, r.output
    assert not sidecar_path(db).exists()
