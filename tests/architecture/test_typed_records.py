"""No dict with string keys crosses a module boundary inside `tuner/`: records between modules are frozen
dataclasses, which become JSON only at the edges (their `to_json`, `to_ledger`, a ledger row's `columns`).

tests/helpers/string_keys.py finds the crossings a static check can see: public functions annotated to
return a loose dict, and `["key"]` reads on what a function of another module returned. STILL_DICTS lists
the ones not yet typed; it only shrinks: a new crossing fails, and so does an entry that is gone (delete it).
"""

import textwrap

from tests.helpers import ROOT
from tests.helpers.string_keys import string_key_crossings

STILL_DICTS = frozenset({
    "tuner.ab.run:run_ab: returns a dict",
    "tuner.cli.ab:ab: reads ['candidates']",
    "tuner.cli.ab:ab: reads ['cut']",
    "tuner.cli.ab:ab: reads ['interrupted']",
    "tuner.cli.daemon:config_rollback: reads ['active']",
    "tuner.cli.daemon:config_rollback: reads ['event']",
    "tuner.cli.daemon:config_rollback: reads ['undid']",
    "tuner.cli.daemon:daemon: reads ['outcome']",
    "tuner.cli.daemon:status: reads ['daemon']",
    "tuner.cli.daemon:status: reads ['jobs']",
    "tuner.cli.daemon:status: reads ['runs']",
    "tuner.cli.gate:calibrate: reads ['declined']",
    "tuner.cli.gate:calibrate_apply: reads ['installed']",
    "tuner.cli.gate:calibrate_apply: reads ['replaced']",
    "tuner.cli.gate:calibrate_undo: reads ['gate_file']",
    "tuner.cli.gate:calibrate_undo: reads ['restored']",
    "tuner.cli.gate:probes_make: reads ['answerable']",
    "tuner.cli.gate:probes_make: reads ['db']",
    "tuner.cli.gate:probes_make: reads ['documents']",
    "tuner.cli.gate:probes_make: reads ['gold']",
    "tuner.cli.gate:probes_make: reads ['held_out_documents']",
    "tuner.cli.gate:probes_make: reads ['probes']",
    "tuner.cli.options:in_runs: returns a dict",
    "tuner.daemon.jobs:decide_undecided: reads ['reason']",
    "tuner.daemon.jobs:decide_undecided: returns a dict",
    "tuner.daemon.jobs:job_sweep: reads ['promoted']",
    "tuner.daemon.jobs:write_reports: returns a dict",
    "tuner.daemon.scheduler:Daemon.run_job: returns a dict",
    "tuner.daemon.scheduler:run_once: returns a dict",
    "tuner.daemon.scheduler:status: returns a dict",
    "tuner.data.vault_questions:VaultQuestions.by_kind: returns a dict",
    "tuner.data.vault_questions:make_probes_for: returns a dict",
    "tuner.evaluation.compare:answerable: returns a dict",
    "tuner.evaluation.cost_model:latency_summary: returns a dict",
    "tuner.evaluation.cost_model:machine: returns a dict",
    "tuner.evaluation.cost_model:predict: returns a dict",
    "tuner.evaluation.evaluate:EvalResult.total_latency: returns a dict",
    "tuner.evaluation.evaluate:gate_metrics: returns a dict",
    "tuner.evaluation.evaluate:latency: returns a dict",
    "tuner.evaluation.evaluate:summarize: returns a dict",
    "tuner.evaluation.score:score100: returns a dict",
    "tuner.gate.calibrate:calibrate: returns a dict",
    "tuner.gate.calibrate:daemon_job: returns a dict",
    "tuner.gate.calibrate:score_series: returns a dict",
    "tuner.gate.metrics:gate_scorecard: returns a dict",
    "tuner.gate.probes:make_probes: returns a dict",
    "tuner.gate.proposal:apply_proposal: returns a dict",
    "tuner.gate.proposal:index_fingerprint: returns a dict",
    "tuner.gate.proposal:undo_apply: returns a dict",
    "tuner.gate.proposal:write_proposal: returns a dict",
    "tuner.ledger.chain:normalise_round: returns a dict",
    "tuner.promotion.promote:History.event: returns a dict",
    "tuner.promotion.promote:decide_promotion: returns a dict",
    "tuner.promotion.promote:rollback: returns a dict",
    "tuner.sweep.pins:harness_pins: returns a dict",
    "tuner.sweep.rounds:rescore: reads ['total']",
    "tuner.sweep.workbench:verify_index: returns a dict",
})


def test_no_new_dict_crosses_a_module_boundary_in_the_tuner():
    found = string_key_crossings(ROOT, "tuner")
    new = sorted(found - STILL_DICTS)
    assert not new, ("dicts with string keys crossing modules (return a frozen dataclass instead, with to_json "
                     "where it is written out):\n" + "\n".join(new))
    gone = sorted(STILL_DICTS - found)
    assert not gone, "typed now (or moved): delete from STILL_DICTS:\n" + "\n".join(gone)


def test_the_finder_sees_a_dict_return_and_a_read_by_key(tmp_path):
    """Guards the guard: a planted `-> dict` and a `["key"]` read on another module's return are found; a typed
    mapping, a private helper, a JSON edge and a read of the module's own function are not."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(textwrap.dedent("""
        from typing import Any
        def loose() -> dict: ...
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
        "pkg.a:loose: returns a dict", "pkg.a:loose_any: returns a dict",
        "pkg.b:reads: reads ['k']", "pkg.b:reads: reads ['j']", "pkg.b:reads: reads ['i']"}
