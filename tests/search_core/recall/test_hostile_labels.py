"""Label files and gate files as a hostile user writes them: other encodings, a folder, ids that are not
call ids, contradicting duplicates; a gate file with NaN coefficients."""

import json

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
        lg.write({"session": "s", "query": f"q{i}", "injected": False})
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
