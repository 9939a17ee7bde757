"""No dict with string keys crosses a module boundary inside `tuner/`: records between modules are frozen
dataclasses, which become JSON only at the edges (their `to_json`, `to_ledger`, a ledger row's `columns`).

tests/helpers/string_keys.py finds the crossings a static check can see: public functions annotated to
return a loose dict (or a list of them), dataclass fields holding one, and `["key"]` reads on what a function
of another module returned. STILL_DICTS lists the ones not yet typed and only shrinks: a new crossing fails,
and so does an entry that is gone. JSON_FIELDS are the few fields that hold a file's JSON whole, with why.
A mapping (a name to a value of one type) is annotated as one (`dict[str, float]`) and is not a crossing.
"""

import textwrap

from tests.helpers import ROOT
from tests.helpers.string_keys import string_key_crossings

# Empty: every crossing the finder sees is typed. It stays as the one place an exception would be named.
STILL_DICTS: frozenset[str] = frozenset()

# Fields that hold JSON as a file or a table keeps it, written and read back whole, never read by key across
# modules except by the renderer of that JSON: not records to type.
JSON_FIELDS: frozenset[str] = frozenset({
    "tuner.reasons:Reason.fields: field is a dict",              # the kind's own fields, checked by its table
    "tuner.reports.doc:Report.data: field is a dict",           # a report's JSON form, what `--format json` writes
    "tuner.daemon.scheduler:RunRow.detail: field is a dict",    # the JSON a job wrote to the run table
    "tuner.daemon.scheduler:JobRun.detail: field is a dict",
    "tuner.daemon.scheduler:JobStatus.last_detail: field is a dict",
    "tuner.gate.proposal:Proposal.model: field is a dict",      # GateModel.as_json, as `apply` installs it
    "tuner.gate.records:Recommendation.model: field is a dict",     # the same model, as the proposal carries it
    "tuner.evaluation.evaluate:QuestionResult.work: field is a dict",   # SearchWork.to_json as a row wrote it
    "tuner.evaluation.cost_model:Calibration.embedder_fingerprint: field is a dict",   # the index's, as stored
    "tuner.evaluation.cost_model:Calibration.dense_backend: field is a dict",   # the backend's own description, as keyed
    "tuner.evaluation.evaluate:EvaluatedIndex.fingerprint: field is a dict",   # the index's, as search_core stores it
    # a round's calibration as its ledger row stores it, parsed (and checked) by Calibration.from_json where a
    # decision is recomputed: reading a ledger never refuses a row for a damaged calibration
    "tuner.evaluation.evaluate:LatencyCharge.calibration: field is a dict",
})


def test_no_new_dict_crosses_a_module_boundary_in_the_tuner():
    found = string_key_crossings(ROOT, "tuner") - JSON_FIELDS
    new = sorted(found - STILL_DICTS)
    assert not new, ("dicts with string keys crossing modules (return a frozen dataclass instead, with to_json "
                     "where it is written out):\n" + "\n".join(new))
    gone = sorted(STILL_DICTS - found)
    assert not gone, "typed now (or moved): delete from STILL_DICTS:\n" + "\n".join(gone)


def test_the_finder_sees_a_dict_return_and_a_read_by_key(tmp_path):
    """Guards the guard: a planted `-> dict`, `-> list[dict]`, a dataclass field holding a loose dict and a
    `["key"]` read on another module's return are found; a typed mapping, a private helper, a JSON edge, a plain
    class's attribute and a read of the module's own function are not."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(textwrap.dedent("""
        from dataclasses import dataclass
        from typing import Any
        def loose() -> dict: ...
        def rows() -> list[dict]: ...
        def typed_rows() -> list[dict[str, float]]: ...
        @dataclass(frozen=True)
        class Carried:
            result: dict | None
            build: dict[str, Any]
            counts: dict[str, int]
        class NotARecord:
            cache: dict
        def loose_any() -> dict[str, Any] | None: ...
        def typed() -> dict[str, int]: ...
        def _private() -> dict: ...
        class R:
            def to_json(self) -> dict: ...
    """))
    (pkg / "b.py").write_text(textwrap.dedent("""
        from pkg.a import loose
        def own() -> "dict[str, float]": ...
        def reads():
            x = loose()
            y = own()
            return x["k"], loose()["j"], [r["i"] for r in loose()], y["mine"]
    """))
    assert string_key_crossings(tmp_path, "pkg") == {
        "pkg.a:loose: returns a dict", "pkg.a:loose_any: returns a dict", "pkg.a:rows: returns a dict",
        "pkg.a:Carried.result: field is a dict", "pkg.a:Carried.build: field is a dict",
        "pkg.b:reads: reads ['k']", "pkg.b:reads: reads ['j']", "pkg.b:reads: reads ['i']"}
