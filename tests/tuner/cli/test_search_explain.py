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
