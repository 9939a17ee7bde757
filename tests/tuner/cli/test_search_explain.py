"""`search --explain` says which of the features it prints the gate in force reads, and how many."""

import re

from click.testing import CliRunner

from search_core.gate.model import DEFAULT_GATE_FILE, load_gate
from tuner.cli import main


def test_explain_marks_the_features_the_gate_model_reads(small_index_e5):
    r = CliRunner().invoke(main, ["search", "GraphRAG 커뮤니티 요약", "--db", str(small_index_e5), "--explain"])
    assert r.exit_code == 0, r.output
    model = load_gate(DEFAULT_GATE_FILE)           # the shipped default decides on a fresh index
    head = re.search(r"(\d+) features computed; \* marks the (\d+) the gate model reads", r.output)
    assert head, r.output
    marked = set(re.findall(r"^  \* (\w+)\s", r.output, re.MULTILINE))
    unmarked = set(re.findall(r"^    (\w+)\s+-?\d", r.output, re.MULTILINE))
    assert marked == set(model.features) and int(head.group(2)) == len(model.features)
    assert int(head.group(1)) == len(marked) + len(unmarked) and unmarked


def test_explain_names_the_calibration_and_what_it_was_made_from(small_index_e5, tmp_path):
    import dataclasses
    r = CliRunner().invoke(main, ["search", "GraphRAG 커뮤니티 요약", "--db", str(small_index_e5), "--explain"])
    assert r.exit_code == 0, r.output
    default = load_gate(DEFAULT_GATE_FILE)
    line = next(l for l in r.output.splitlines() if l.strip().startswith("calibration:"))
    assert f"{default.fitted_on['rows']} labelled questions of {', '.join(default.fitted_on['vaults'])}" in line
    assert f"threshold {default.threshold:.3f}, the fit's own" in line
    # a threshold labels moved for this vault (what `calibrate apply` installs): from where, to where, on what
    moved = dataclasses.replace(default, threshold=0.5, fitted_on={
        **default.fitted_on, "recalibrated": {"from": round(default.threshold, 4), "to": 0.5, "interval": [0.4, 0.6],
                                              "labels": {"answerable": 14, "probes": 6}, "at": "2026-12-01T09:00:00Z"}})
    gate = moved.save(tmp_path / "moved.gate.json")
    r = CliRunner().invoke(main, ["search", "GraphRAG 커뮤니티 요약", "--db", str(small_index_e5), "--explain",
                                  "--gate", str(gate)])
    assert r.exit_code == 0, r.output
    line = next(l for l in r.output.splitlines() if l.strip().startswith("calibration:"))
    assert (f"this vault's threshold 0.500, moved from {round(default.threshold, 4):.3f} by 14 relevant + 6 irrelevant labels "
            "(to 2026-12-01)") in line and "labelled questions of demo" in line
