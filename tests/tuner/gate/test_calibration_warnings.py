"""What a calibration warns of is a value of one table (tuner.gate.verdicts.CALIBRATION_WARNINGS), its message
and fix rendered from there: calibrate emits no warning written as text, the Calibration refuses one, and
every kind of the table renders and is emitted somewhere in calibrate."""

import ast
import dataclasses
import inspect

import pytest

import tuner.gate.calibrate as calibrate_module
from tests.helpers.logged_calls import FP, cosine_call, gate_model, vault_with_boundary_at
from tuner.gate.calibrate import calibrate
from tuner.gate.verdicts import (CALIBRATION_WARNINGS, CONFIG_OVERRIDES, EMPTY_WINDOW, FEW_LABELS, IN_SAMPLE,
                                 MOVE_UNDECIDED, NO_GATE_MODEL, NO_LABELS, NO_REFIT, ONE_KIND, OTHER_INDEX,
                                 SKIPPED_LABELS)

# fields for each kind, as calibrate gives them (a kind added to the table needs a line here)
EXAMPLES = {
    SKIPPED_LABELS: dict(count=1, ids="7"),
    OTHER_INDEX: dict(count=3, labelled=2, others="other-index-", this="idx-A"),
    EMPTY_WINDOW: dict(),
    IN_SAMPLE: dict(sets="demo-tune, log"),
    FEW_LABELS: dict(rows=6, need=8),
    NO_GATE_MODEL: dict(error="every feature is constant over these 12 rows"),
    NO_LABELS: dict(need=4),
    ONE_KIND: dict(missing="relevant", relevant=0, irrelevant=6, need=4,
                   what="answerable calls (the vault had the answer)"),
    MOVE_UNDECIDED: dict(to=0.615, level=0.9, lo=0.58, hi=0.809, why="p = 0.059, over 0.05", from_=0.64,
                         more="about 3 more labels on calls between the two cuts would decide it"),
    NO_REFIT: dict(error="every feature is constant over these 30 rows"),
    CONFIG_OVERRIDES: dict(threshold=0.5),
}


def _scenarios():
    """Calibrations that between them emit most kinds: an empty log, one kind of label, few labels with a
    call that never searched and calls of another index, a declined move of a gate fitted on the log, labels a
    model cannot be fitted on."""
    yield calibrate([], [], model=None, cos_threshold=0.82, fingerprint=FP)
    yield calibrate([cosine_call(i, 0.70 + 0.01 * i, "relevant") for i in range(1, 7)], [], model=None,
                    cos_threshold=0.82, fingerprint=FP)
    calls = [cosine_call(i, 0.70 + 0.01 * i, "relevant" if i % 2 else "irrelevant") for i in range(1, 7)]
    calls.append(cosine_call(7, 0.0, "relevant", error="timeout"))
    calls += [dataclasses.replace(cosine_call(20 + i, 0.7, "relevant"), index_fingerprint="other-index-0000")
              for i in range(3)]
    yield calibrate(calls, [], model=None, cos_threshold=0.82, fingerprint=FP, fingerprint_key="idx-A")
    yield calibrate(vault_with_boundary_at(0.64, n_labels=24, seed=2), [],
                    model=dataclasses.replace(gate_model(), fitted_on={"sources": ["log"]}), cos_threshold=0.82,
                    fingerprint=FP)
    yield calibrate([cosine_call(i, 0.75, "relevant" if i % 2 else "irrelevant") for i in range(1, 13)], [],
                    model=None, cos_threshold=0.82, fingerprint=FP)


def test_every_warning_calibrate_emits_is_a_value_of_the_table():
    seen = set()
    for cal in _scenarios():
        assert cal.warnings
        for w in cal.warnings:
            assert w.table is CALIBRATION_WARNINGS, w
            seen.add(w.kind)
        # the JSON and the report show each warning as its message and its fix, in the order emitted
        assert cal.to_json()["warnings"] == [w.text() for w in cal.warnings] == list(cal.warning_lines())
    assert seen == {SKIPPED_LABELS, OTHER_INDEX, EMPTY_WINDOW, IN_SAMPLE, FEW_LABELS, NO_GATE_MODEL, NO_LABELS,
                    ONE_KIND, MOVE_UNDECIDED}


def test_a_calibration_refuses_a_warning_written_as_text():
    cal = calibrate([], [], model=None, cos_threshold=0.82, fingerprint=FP)
    with pytest.raises(TypeError, match="values of tuner.gate.verdicts.CALIBRATION_WARNINGS, not str"):
        dataclasses.replace(cal, warnings=(*cal.warnings, "the log window holds no calls"))


def test_every_kind_of_the_table_renders_its_message_and_fix():
    assert set(EXAMPLES) == set(CALIBRATION_WARNINGS)
    for kind, fields in EXAMPLES.items():
        w = CALIBRATION_WARNINGS(kind, **fields)
        text = w.text()
        assert w.message() and text.startswith(w.message()) and "{" not in text, kind
        assert text.endswith(w.fix())
    # a fix that is a sentence follows a full stop, a clause a semicolon; no fix, the message alone
    assert CALIBRATION_WARNINGS(NO_LABELS, need=4).text().startswith(
        "no labels: the gate cannot be calibrated, no proposal is written and the current gate stays. Label at "
        "least 4 calls of each kind")
    assert CALIBRATION_WARNINGS(EMPTY_WINDOW).text() == (
        "the log window holds no calls: traffic, latency and the retirement rule are unknown; widen --since or "
        "check that the recall path logs")
    assert CALIBRATION_WARNINGS(NO_REFIT, error="x").text() == "no refit: x"
    with pytest.raises(KeyError, match="no calibration warning 'slow'"):
        CALIBRATION_WARNINGS("slow")


def _warnings_added(tree):
    """Each expression calibrate adds to a warnings list: `....append(x)` on a name or subscript that says
    warnings, and `warnings += (x, ...)`."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
                and "warnings" in ast.unparse(node.func.value)):
            yield node.args[0]
        if isinstance(node, ast.AugAssign) and "warnings" in ast.unparse(node.target):
            yield from node.value.elts
        if isinstance(node, ast.Assign) and any("warnings" in ast.unparse(t) for t in node.targets) \
                and isinstance(node.value, (ast.List, ast.Tuple)):
            yield from node.value.elts


def test_calibrate_adds_only_values_of_the_table_and_emits_every_kind():
    """Read from the source: every warning calibrate adds is a call of the table with a kind it names, and
    each kind of the table is added somewhere (a kind nobody emits is a wording nobody sees)."""
    tree = ast.parse(inspect.getsource(calibrate_module))
    added = list(_warnings_added(tree))
    assert len(added) >= len(list(CALIBRATION_WARNINGS))
    kinds = set()
    for x in added:
        assert isinstance(x, ast.Call) and ast.unparse(x.func) == "warning", ast.unparse(x)
        kinds.add(getattr(calibrate_module, ast.unparse(x.args[0])))
    assert calibrate_module.warning is CALIBRATION_WARNINGS
    assert kinds == set(CALIBRATION_WARNINGS)


def test_the_calibration_reports_advice_comes_from_the_advice_table():
    """The section the daemon's weekly job fills (its paragraph is the advice's message, then how to label),
    and the gate-on-labels section with no rows of both kinds to score."""
    from tuner.gate.records import LabelSuggestions
    from tuner.gate.verdicts import CALIBRATION_ADVICE, LABEL_NEXT, NOT_SCORED, label_next
    from tuner.reports.calibration import calibration_report
    from tuner.reports.render import to_markdown
    assert list(CALIBRATION_ADVICE) == [LABEL_NEXT, NOT_SCORED]
    cal = calibrate([], [], model=None, cos_threshold=0.82, fingerprint=FP)
    sg = LabelSuggestions((), 12, 3, "probability", 0.64, "default", {})
    advice = label_next(sg)
    assert advice.table is CALIBRATION_ADVICE and advice.kind == LABEL_NEXT
    md = to_markdown(calibration_report(dataclasses.replace(cal, suggestions=sg), "idx.sqlite", None))
    assert ("0 of 12 unlabelled calls (3 labelled already), picked for how much their label would move the "
            "probability threshold 0.64: label them on the /label page of `autoresearch serve`, or with "
            "`autoresearch recall-log label ID relevant|irrelevant`, then run `autoresearch calibrate` again") in md
    assert "needs labelled rows of both kinds (answerable and probes): pass --labels" in md   # no labels: no score


def test_why_a_gate_is_recommended_or_none_and_the_retirement_verdict_are_values_of_their_tables():
    """The recommendation's basis and declined, and the retirement rule's verdict, are values of their tables in
    every scenario; read from the source, calibrate sets basis and declined only by a call of the table (or None),
    and every kind of those tables is set somewhere; the JSON shows each as its text."""
    from tuner.gate.verdicts import RECOMMENDATION_BASIS, RECOMMENDATION_DECLINED, RETIREMENT_VERDICT
    seen = {t.what: set() for t in (RECOMMENDATION_BASIS, RECOMMENDATION_DECLINED, RETIREMENT_VERDICT)}
    for cal in _scenarios():
        rec = cal.recommendation
        for value, table in ((rec.basis, RECOMMENDATION_BASIS), (rec.declined, RECOMMENDATION_DECLINED),
                             (cal.retirement.verdict, RETIREMENT_VERDICT)):
            if value is not None:
                assert value.table is table and value.kind in table, value
                seen[table.what].add(value.kind)
        js = cal.to_json()
        assert js["recommendation"].get("declined") == (rec.declined.text() if rec.declined else None)
        assert js["retirement"]["verdict"] == cal.retirement.verdict.text()
    assert seen[RECOMMENDATION_DECLINED.what] and seen[RETIREMENT_VERDICT.what]
    tree = ast.parse(inspect.getsource(calibrate_module))
    set_by = {"basis": set(), "declined": set()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            key = node.targets[0].slice
            if isinstance(key, ast.Constant) and key.value in set_by:
                v = node.value
                if isinstance(v, ast.Constant) and v.value is None:
                    continue
                assert isinstance(v, ast.Call) and ast.unparse(v.func) == key.value, ast.unparse(node)
                set_by[key.value].add(getattr(calibrate_module, ast.unparse(v.args[0])))
    assert calibrate_module.basis is RECOMMENDATION_BASIS and calibrate_module.declined is RECOMMENDATION_DECLINED
    assert set_by["basis"] == set(RECOMMENDATION_BASIS)
    # NO_RECOMMENDATION is the proposal's fallback (tuner.gate.proposal.write_proposal), not calibrate's
    assert set_by["declined"] | {"no_recommendation"} == set(RECOMMENDATION_DECLINED)
