"""Label files, recall logs, gate files and calibration proposals as a hostile user writes them: other
encodings, a folder, ids that are not call ids, contradicting duplicates, a file that is not a log; a gate
with NaN or overflowing weights, a proposal for another index, a damaged gate history."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.gate.model import DEFAULT_GATE_FILE, GateFileError, load_gate
from search_core.recall.log import RecallLog, label_calls, parse_label_file
from tuner.cli import main


@pytest.mark.parametrize("raw, message", [
    ("1 relevant\n2 irrelevant\n".encode("utf-16"), "is UTF-16"),
    ("1 relevant # caf\u00e9\n".encode("latin-1"), r"not UTF-8 \(line 1"),
])
def test_a_label_file_in_another_encoding_is_a_clear_error(tmp_path, raw, message):
    f = tmp_path / "labels.txt"
    f.write_bytes(raw)
    with pytest.raises(SearchCoreError, match=message):
        parse_label_file(f)


def test_a_bom_is_dropped_and_a_folder_is_refused(tmp_path):
    f = tmp_path / "labels.txt"
    f.write_bytes("\ufeff1 relevant\n".encode("utf-8"))
    assert parse_label_file(f) == [(1, "relevant")]
    with pytest.raises(SearchCoreError, match="is a folder"):
        parse_label_file(tmp_path)


@pytest.mark.parametrize("line", ['{"id": 1.9, "label": "relevant"}', '{"id": true, "label": "relevant"}',
                                  '{"id": 1e400, "label": "relevant"}', "100000000000000000000 relevant",
                                  "0 relevant", "-3 relevant", '{"id": 1, "label": 5}'])
def test_an_id_that_cannot_name_a_call_is_refused(tmp_path, line):
    f = tmp_path / "labels.txt"
    f.write_text(line + "\n")
    with pytest.raises(SearchCoreError, match="line 1"):
        parse_label_file(f)


def test_contradicting_duplicates_are_refused_and_repeats_count_once(tmp_path):
    log = tmp_path / "log.sqlite"
    lg = RecallLog(log)
    for i in range(2):
        lg.write({"session": "s", "query": f"q{i}", "injected": False, "features": {"top_cos": 0.8}})
    lg.close()
    f = tmp_path / "labels.txt"
    f.write_text("1 relevant\n2 irrelevant\n1 irrelevant\n")
    with pytest.raises(SearchCoreError, match="call 1 is labelled 'irrelevant' here and 'relevant' on line 1"):
        parse_label_file(f)
    f.write_text("1 relevant\n1 relevant\n2 irrelevant\n2 irrelevant\n1 relevant\n")
    assert label_calls(log, parse_label_file(f))["labelled"] == 2
    r = CliRunner().invoke(main, ["recall-log", "label", "--log", str(log), "100000000000000000000", "relevant"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["recall-log", "list", "--log", str(log), "--limit", "0"])
    assert r.exit_code == 2


def test_a_gate_file_with_nan_coefficients_is_refused(tmp_path):
    d = json.loads(DEFAULT_GATE_FILE.read_text())
    d["coef"][0] = float("nan")
    f = tmp_path / "gate.json"
    f.write_text(json.dumps(d))                       # json writes NaN, and reads it back
    with pytest.raises(GateFileError, match="coef must be finite"):
        load_gate(f)
    d["coef"][0], d["intercept"] = 0.5, float("inf")
    f.write_text(json.dumps(d))
    with pytest.raises(GateFileError, match="intercept must be finite"):
        load_gate(f)


def test_calibrate_apply_refuses_a_proposal_with_nan_coefficients_and_leaves_nothing(tmp_path):
    # It used to answer "installed": every search then reported P = NaN and injected, off-topic probes too.
    db = tmp_path / "index.sqlite"
    model = json.loads(DEFAULT_GATE_FILE.read_text())
    model["coef"][1] = float("nan")
    proposal = tmp_path / "proposal.json"
    proposal.write_text(json.dumps({"model": model, "basis": "labels"}))    # NaN, as json writes it
    r = CliRunner().invoke(main, ["calibrate", "apply", "--db", str(db), "--proposal", str(proposal)])
    assert r.exit_code == 1 and "NaN is not a number JSON allows" in r.output and "Traceback" not in r.output, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proposal.json"]     # no gate, no history, no .new
    proposal.write_text("[1, 2]")
    r = CliRunner().invoke(main, ["calibrate", "apply", "--db", str(db), "--proposal", str(proposal)])
    assert r.exit_code == 1 and "is not a calibration proposal" in r.output, r.output


def _default_gate_proposal(tmp_path):
    proposal = tmp_path / "proposal.json"
    proposal.write_text(json.dumps({"model": json.loads(DEFAULT_GATE_FILE.read_text()), "basis": "labels"}))
    return proposal


def test_calibrate_apply_refuses_a_gate_that_cannot_gate_the_index(small_index, tmp_path):
    # An e5-small gate beside a test-embedder index was "installed", then passed over at every search.
    proposal = _default_gate_proposal(tmp_path)
    for db, message in ((small_index, "cannot gate the index"), (tmp_path / "typo.sqlite", "no index at")):
        r = CliRunner().invoke(main, ["calibrate", "apply", "--db", str(db), "--proposal", str(proposal)])
        assert r.exit_code == 1 and message in r.output and "Traceback" not in r.output, r.output
    assert not list(small_index.parent.glob("*.gate*")) and not list(tmp_path.glob("typo*"))


def test_calibrate_undo_over_a_damaged_history_line_is_a_clear_error(small_index_e5, tmp_path):
    db = small_index_e5
    r = CliRunner().invoke(main, ["calibrate", "apply", "--db", str(db), "--proposal", str(_default_gate_proposal(tmp_path))])
    assert r.exit_code == 0, r.output
    history = db.with_name(db.name + ".gate-history.jsonl")
    with history.open("a") as f:
        f.write('{"at": "2026-12-02T01:00:00Z", "action": "app')          # a kill in the middle of a line
    r = CliRunner().invoke(main, ["calibrate", "undo", "--db", str(db)])
    assert r.exit_code == 1 and "line 2 is damaged" in r.output and "Traceback" not in r.output, r.output
    assert db.with_name(db.name + ".gate.json").exists()                    # nothing was undone


@pytest.mark.parametrize("damage", ["text", "folder", "garbage after the header"])
@pytest.mark.parametrize("verb", [["list"], ["stats"], ["label", "1", "relevant"], ["suggest"], ["prune"]])
def test_every_recall_log_verb_over_a_file_that_is_not_a_log_is_a_clear_error(tmp_path, damage, verb):
    log = tmp_path / "recall-log.sqlite"
    if damage == "folder":
        log.mkdir()
    else:
        log.write_bytes(b"not a log\n" if damage == "text" else b"SQLite format 3\x00" + bytes(range(256)) * 12)
    r = CliRunner().invoke(main, ["recall-log", *verb, "--log", str(log)])
    assert r.exit_code == 1 and "is not a" in r.output and str(log) in r.output, r.output
    assert "Traceback" not in r.output


def test_a_gate_file_with_weights_that_overflow_is_refused_and_a_nan_probability_never_injects(tmp_path):
    # Finite weights of 1e308 summed to inf - inf: P = NaN, which compared false to the threshold, and the
    # band fell through to "inject" for every search.
    import dataclasses

    from search_core.gate.model import GateChoice
    d = json.loads(DEFAULT_GATE_FILE.read_text())
    d["coef"][1], d["coef"][2] = -1e308, 1e308
    f = tmp_path / "gate.json"
    f.write_text(json.dumps(d))
    with pytest.raises(GateFileError, match="coef out of range"):
        load_gate(f)
    d["coef"][1], d["coef"][2] = 0.5, 0.5
    d["scale"][0] = 1e-300
    f.write_text(json.dumps(d))
    with pytest.raises(GateFileError, match="scale out of range"):
        load_gate(f)
    shipped = load_gate(DEFAULT_GATE_FILE)
    coef = list(shipped.coef)
    coef[1], coef[2] = -1e308, 1e308
    overflowing = dataclasses.replace(shipped, coef=tuple(coef))     # what a file that skipped the check holds
    feats = {n: 1.0 for n in shipped.features}
    with np.errstate(over="ignore", invalid="ignore"):
        decision = GateChoice(overflowing, "gate.json").decide(feats, 0.99, 0.5, True)
    assert not decision.inject and decision.probability is None and decision.band == "skip"
    assert json.loads(json.dumps(decision.to_json()))["probability"] is None     # valid JSON, no NaN
