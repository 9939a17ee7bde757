"""`demo` is a library function the CLI prints."""

import pytest
from tuner.demo import format_evidence, format_summary, run_demo
from tuner.ledger.ledger import Ledger
from tuner.stored_config import NO_CONFIG, StoredConfig


@pytest.mark.slow
def test_run_demo_indexes_evaluates_and_sweeps(tmp_path, shared_cache):
    lines = []
    run = run_demo(tmp_path, rounds=3, echo=lines.append, cache=shared_cache, vault_questions=50)
    assert lines[0].startswith("1. indexed ") and lines[3].startswith("   demo-tune")
    # the sweep tunes on the hand-written set plus the vault's own questions; the holdout stays hand-written
    assert lines[1].startswith("2. the tuning questions: 24 hand-written (+12 probes), 50 from the vault's text (")
    assert {k.source: k.answerable for k in run.tuning.kinds} == {"hand": 24, "vault": 50}
    assert run.eval_start.overall["n"] == 24 and (tmp_path / "eval-start.json").exists()
    assert run.summary.rounds == 3 and run.summary.holdout.gold == "demo-holdout"
    assert format_evidence(run.evidence).startswith("evidence: 24 hand-written (+12 probes), 50 from the vault's text")
    assert len(run.evidence.kept) == len(run.summary.path)
    assert len(Ledger(tmp_path / "ledger.sqlite").rounds(run.summary.sweep)) == 4
    text = format_summary(run.summary)
    assert text.startswith(f"sweep {run.summary.sweep}: 3 rounds") and "holdout demo-holdout" in text
    # the morning report the demo ends on, in the two formats it names
    assert run.reports == {"md": tmp_path / "morning-report.md", "html": tmp_path / "morning-report.html"}
    assert run.summary.sweep in run.reports["md"].read_text(encoding="utf-8")
    assert "<svg" in run.reports["html"].read_text(encoding="utf-8")


def test_decisions_are_printed_as_words_not_enum_reprs():
    from tuner.demo import decision_counts
    from tuner.ledger.schema import RoundDecision
    from tuner.sweep.summary import Figures, SweepSummary
    s = SweepSummary("s1", 112, {RoundDecision.KEPT: 1, RoundDecision.NO_GAIN: 111}, NO_CONFIG, NO_CONFIG,
                     Figures(0.9, "score", 80.0), Figures(0.9, "score", 80.5), (), status="done")
    assert decision_counts(s.decisions) == "111 rejected:no_gain, 1 kept"
    first = format_summary(s).splitlines()[0]
    assert first == "sweep s1: 112 rounds, done; decisions: 111 rejected:no_gain, 1 kept"
    assert "RoundDecision" not in format_summary(s)


def test_a_sweeps_decisions_are_words_in_the_terminal_the_json_and_the_daemon(tmp_path):
    """The summary counts rounds by RoundDecision; wherever a person or a JSON reader sees them they are the
    ledger's words: the printed summary, its --json form and the daemon's run detail carry no enum repr."""
    import json
    import re
    from tuner.ledger.schema import RoundDecision
    from tuner.sweep.summary import Figures, KeptStep, SweepSummary
    s = SweepSummary("s1", 3, {RoundDecision.KEPT: 1, RoundDecision.NO_GAIN: 1, RoundDecision.CRASHED: 1},
                     StoredConfig.from_json({"rrf_k": 60}), StoredConfig.from_json({"rrf_k": 30}), Figures(0.9, "score", 80.0), Figures(0.9, "score", 80.5),
                     (KeptStep(1, "rrf_k", 60, 30, "score +0.5"),), status="done")
    text = format_summary(s, tmp_path / "ledger.sqlite") + json.dumps(s.to_json()) + json.dumps(s.decision_words())
    assert not re.search(r"<\w+\.\w+: '|RoundDecision", text), text
    assert s.to_json()["decisions"] == {"kept": 1, "rejected:no_gain": 1, "crashed": 1}
    back = SweepSummary.from_json(json.loads(json.dumps(s.to_json())))
    assert back.decisions == s.decisions and all(type(k) is RoundDecision for k in back.decisions)


def test_the_index_step_prints_what_the_index_said_beside_it(tmp_path):
    """A cache moved to its compact layout (or set aside, or past its bound) is said by `index`; the demo,
    whose first step is an index, said nothing of it."""
    from search_core.index.indexer import IndexReport
    from tuner.demo import index_lines
    said = "the embedding cache /c/embed-cache.sqlite was moved to its compact layout: 2403 vectors kept"
    rep = IndexReport(str(tmp_path / "index.sqlite"), "full", notes=138, chunks=603, embedded=0, warnings=[said])
    lines = index_lines(rep, "demo-vault")
    assert lines[0].startswith("1. indexed 138 notes / 603 chunks from demo-vault into ") and lines[1] == f"   {said}"
    assert index_lines(IndexReport("x", "full"), "v")[1:] == []


def test_the_next_steps_keep_the_demos_winner_in_its_own_folder():
    """`best --out best.toml`, as the demo said, replaced the winner of the user's own vault that the README
    puts in the same file."""
    from tuner.demo import next_steps
    text = next_steps("runs/demo", "runs/demo/index.sqlite")
    assert "best --ledger runs/demo/ledger.sqlite --out runs/demo/best.toml" in text
    assert "--config runs/demo/best.toml" in text and " best.toml" not in text.replace("runs/demo/best.toml", "")
