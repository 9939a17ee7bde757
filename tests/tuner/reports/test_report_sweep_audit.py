"""The morning report and the rejected-candidate audit, from a real sweep's ledger."""

import json

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.config import SearchConfig
from search_core.index.store import connect
from tuner.sweep.rejected_audit import audit_data, audit_report, interaction_rules
from tuner.cli import main
from tuner.ledger.ledger import Ledger
from tuner.evaluation.evaluate import EvalResult
from tuner.ledger.round import Round
from tuner.ledger.schema import RoundDecision
from tuner.promotion.promote import decide_promotion
from tuner.reports.sweep import sweep_report
from tuner.reports import emit, render
from tuner.reports.browser import check_page
from tuner.sweep.loop import Sweep, SweepParams
from tests.helpers import DEMO_VAULT
from tests.helpers.sweeps import DEMO_HOLD as HOLD
from tests.helpers.sweeps import DEMO_TUNE as TUNE
from tests.helpers.sweeps import FUSION_SPACE, hand_set_calibrations, small_gold
from tuner.stored_config import NO_CONFIG


@pytest.fixture(scope="module")
def swept(demo_db, tmp_path_factory):
    """A real 14-round fusion sweep with a holdout, and its promotion decision."""
    root = tmp_path_factory.mktemp("swept")
    (root / "space.toml").write_text(FUSION_SPACE)
    lg = Ledger(root / "ledger.sqlite")
    tune, hold = small_gold(TUNE, root / "tune.yaml", 2), small_gold(HOLD, root / "hold.yaml", 3)
    p = SweepParams(db=str(demo_db), gold=str(tune), holdout=str(hold), space=str(root / "space.toml"), rounds=14,
                    vault=str(DEMO_VAULT), index_dir=str(demo_db.parent / "indexes"),
                    # the looser keep rule: on a tuning set this small no ranking gain passes the noise test,
                    # and the audit and the retest need rounds kept after rejected ones
                    hit5_guard="count", noise_alpha=None)
    # from the pre-2 default k = 60 without the n-gram list or the dense lead, where this space keeps changes
    # after rejecting others: the audit and the retest need rejected rounds whose interacting variables moved
    # later (from k = 2 nothing was marked; with the n-gram list at 0.10, one; with the dense lead, none)
    hand_set_calibrations(p.cost_folder())
    sw = Sweep(p, lg, start=SearchConfig(rrf_k=60, w_ngram=0.0, dense_lead_cos=None))
    s = sw.run()
    promo = decide_promotion(sw.id, s.start_config.search, s.final_config.search, s.holdout, demo_db, root / "runs")
    lg.close()
    return {"root": root, "ledger": root / "ledger.sqlite", "runs": root / "runs", "sweep": sw.id, "summary": s,
            "promo": promo}


def test_morning_report_says_what_happened(swept):
    rep = sweep_report(swept["ledger"], None, swept["runs"])
    s = swept["summary"]
    assert rep.verdict.startswith(f"tuning hit@5 {s.start.hit5:.3f} -> {s.final.hit5:.3f}")
    assert "holdout hit@5" in rep.verdict and "p=" in rep.verdict and "95% CI" in rep.verdict
    assert ("promoted (#" in rep.verdict) == swept["promo"].promoted
    if not swept["promo"].promoted:
        assert swept["promo"].reason in rep.verdict
    md = render(rep, "md")
    assert md.splitlines()[2].startswith("**tuning hit@5")           # the verdict is the first thing read
    heads = [s.heading for s in rep.sections]
    assert heads == ["Progress", "Kept changes, in order", "The evidence the night stood on",
                     "Rejected and failed rounds by reason",
                     "Per level on the tuning set, start vs final", "Questions that flipped on the holdout",
                     "Rounds that were unavailable or crashed", "Latency: the cost model and the stopwatch"]
    d = json.loads(render(rep, "json"))["data"]
    assert d["latency"]["calibrations"] and d["latency"]["median_ratio"] > 0
    assert d["rounds"] == 14 and sum(d["decisions"].values()) == 14 - len(d["kept"])
    assert [k["round"] for k in d["kept"]] == [p.round for p in s.path]
    assert d["holdout_flips"] == [f.to_json() for f in s.holdout.compare.flipped]


def test_a_threshold_round_in_a_set_with_probes_is_not_told_to_add_probes(swept):
    """The tuning set has probes and a gate model decides, so the cosine threshold is unavailable for that
    reason: its fix says so instead of asking for the probes the set already has."""
    d = sweep_report(swept["ledger"], None, swept["runs"]).data
    [threshold] = [f for f in d["failed"] if f["variable"] == "threshold"]
    assert "a gate model decides" in threshold["reason"]
    assert "add probes" not in threshold["fix"] and threshold["fix"].startswith("nothing to add: the tuning set has")
    assert d["evidence_gap"] is None          # changes were kept: the night needs no explaining


def test_morning_report_html_draws_its_plot_in_chromium_and_fetches_nothing(swept, tmp_path):
    page = tmp_path / "sweep.html"
    emit(sweep_report(swept["ledger"], swept["sweep"], swept["runs"]), "html", page)
    text = page.read_text(encoding="utf-8")
    assert "<script" not in text and "http://" not in text.replace("http://www.w3.org", "")
    check = check_page(page, tmp_path / "sweep.png", height=1800)
    assert check.svg_count == 1 and check.rendered_svgs == 1
    assert check.requests == ()


def test_report_bad_inputs_name_the_fix(swept, tmp_path):
    with pytest.raises(SearchCoreError, match=f"no sweep 'nope'.*sweeps in it: {swept['sweep']}"):
        sweep_report(swept["ledger"], "nope")
    with pytest.raises(SearchCoreError, match="no ledger at .*run `autoresearch sweep`"):
        sweep_report(tmp_path / "absent.sqlite")
    old = tmp_path / "old.sqlite"
    c = connect(old)
    c.execute("CREATE TABLE sweeps (id TEXT, created TEXT, params TEXT, start_config TEXT, status TEXT, summary TEXT)")
    c.execute("CREATE TABLE rounds (sweep TEXT, round INT, variable TEXT, old TEXT, new TEXT, config TEXT, "
              "decision TEXT, reason TEXT, metrics TEXT)")
    c.commit()
    c.close()
    with pytest.raises(SearchCoreError, match="older ledger schema .*baseline_hash.*start a new ledger"):
        sweep_report(old)
    r = CliRunner().invoke(main, ["report", "sweep", "--ledger", str(swept["ledger"]), "--format", "pdf"])
    assert r.exit_code == 2 and "'md', 'html', 'json'" in r.output


def test_report_cli_writes_every_format(swept, tmp_path):
    cli = CliRunner()
    for fmt in ("md", "html", "json"):
        out = tmp_path / f"r.{fmt}"
        r = cli.invoke(main, ["report", "sweep", "--ledger", str(swept["ledger"]), "--runs", str(swept["runs"]),
                              "--format", fmt, "--out", str(out)])
        assert r.exit_code == 0, r.output
        assert r.output.strip() == str(out) and out.stat().st_size > 500
    r = cli.invoke(main, ["report", "sweep", "--ledger", str(swept["ledger"]), "--format", "json"])
    assert json.loads(r.output)["kind"] == "sweep"


def test_interaction_rules():
    assert interaction_rules("w_dense", "w_sparse") == ["fusion"]
    assert set(interaction_rules("threshold", "embedder")) == {"score scale"}
    assert interaction_rules("w_sparse", "w_sparse") == []       # superseded, not re-tested
    assert interaction_rules("threshold", "rrf_k") == []


def test_audit_lists_every_rejected_round_and_marks_retests(swept):
    lg = Ledger(swept["ledger"])
    rounds = lg.rounds(swept["sweep"])
    lg.close()
    rejected = [r for r in rounds if r.decision.startswith("rejected")]
    d = audit_data(swept["ledger"], swept["sweep"])
    assert [x.round for x in d.rejected] == [r.round for r in rejected]
    kept = [r for r in rounds if r.decision == "kept" and r.round > 0]
    for x in d.rejected:
        later = [k for k in kept if k.round > x.round and interaction_rules(x.variable, k.variable)]
        assert x.worth_retest == bool(later)
        # deltas and broken questions are against the baseline the round was judged on
        base = next(r for r in rounds if r.config_hash == x.baseline_hash and r.decision == "kept")
        cand = next(r for r in rounds if r.round == x.round)
        assert x.deltas["hit@5"] == round(cand.result.overall["hit@5"] - base.result.overall["hit@5"], 4)
        if "broke" in x.reason:
            assert x.broke
    rep = audit_report(swept["ledger"], swept["sweep"])
    assert rep.verdict.startswith(f"{len(rejected)} rejected rounds")
    assert {s.heading.split(" (")[0] for s in rep.sections[:-1]} == {r.variable for r in rejected}


def test_a_retest_asked_to_stop_ends_before_its_next_round_and_keeps_the_rounds_done(swept, tmp_path):
    import shutil
    from search_core import StopRequested
    ledger = tmp_path / "ledger.sqlite"
    shutil.copy(swept["ledger"], ledger)
    marked = [x for x in audit_data(ledger, swept["sweep"]).rejected if x.worth_retest]
    assert len(marked) >= 2, "the fixture sweep must leave two candidates worth re-testing"
    said = []          # asked before each round and each search of a gate fit: stop once a round was re-tested
    with pytest.raises(StopRequested, match=f"after 1 of {len(marked)} rounds"):
        audit_report(ledger, swept["sweep"], do_retest=True, runs=tmp_path / "runs", progress=said.append,
                     stop=lambda: any(line.startswith("retest ") for line in said))
    lg = Ledger(ledger)
    retest = [s for s in lg.sweeps() if s.is_retest]
    assert len(retest) == 1 and retest[0].status == "retest stopped"
    assert [r.round for r in lg.rounds(retest[0].id)] == [0, 1]
    lg.close()


def test_retest_appends_rounds_that_name_what_they_retest(swept, tmp_path):
    import shutil
    ledger = tmp_path / "ledger.sqlite"
    shutil.copy(swept["ledger"], ledger)
    marked = [x for x in audit_data(ledger, swept["sweep"]).rejected if x.worth_retest]
    assert marked, "the fixture sweep must leave candidates worth re-testing, or this test checks nothing"
    rep = audit_report(ledger, swept["sweep"], do_retest=True, runs=tmp_path / "runs")
    res = rep.data["retest"]
    assert res["tested"] == len(marked)
    lg = Ledger(ledger)
    new = lg.rounds(res["sweep"])
    lg.close()
    assert new[0].variable == "(start)"
    # gated as the sweep gates: by a model fitted on the tuning set, not by the cosine alone
    assert all(q.gate_probability is not None for q in new[0].result.per_query)
    assert [r.reason.split(":")[0] for r in new[1:]] == [f"retest of {swept['sweep']}#{x.round}" for x in marked]
    # re-tested candidates are no longer marked, and the audit says where they were re-tested
    again = audit_data(ledger, swept["sweep"]).rejected
    retested = {x.round for x in marked}
    assert not any(x.worth_retest for x in again if x.round in retested)
    # a candidate marked now is marked because of a change the re-test itself kept
    kept_now = {r.variable for r in new[1:] if r.decision == "kept"}
    for x in again:
        if x.worth_retest:
            assert any(f"kept in {res['sweep']}#" in w for w in x.retest_why) and kept_now, x
    assert {x.retested_in.split("#")[0] for x in again if x.retested_in} == {res["sweep"]}


def _charged_round(i: int, charge: dict | None) -> Round:
    """A ledger round evaluated with this latency charge (None: a round that was not evaluated)."""
    res = EvalResult.from_ledger({"overall": {"n": 1}, "latency_charge": charge}) if charge else None
    return Round("s", i, "rrf_k", 60, 61, NO_CONFIG, "c", "b", None, res, None, RoundDecision.NO_GAIN, "r")


def test_the_morning_report_flags_a_night_far_from_its_calibration():
    from tuner.reports.sweep import latency_drift
    cal = {"key": "k1", "embedder": "e5-small", "taken_at": "2026-12-01T00:00:00Z", "rerank_per_pair": {}}
    rows = [_charged_round(i, {"by": "cost model", "calibration": cal, "measured_over_predicted": r})
            for i, r in enumerate((2.4, 2.9, 3.1, 0.9))] + [_charged_round(4, None)]
    d = latency_drift(rows)
    assert d.drifted and d.median_ratio == 2.9 and d.rounds == 4
    assert [c.key for c in d.calibrations] == ["k1"]
    calm = latency_drift([_charged_round(i, {"by": "cost model", "calibration": cal, "measured_over_predicted": r})
                          for i, r in enumerate((0.9, 1.1, 1.2))])
    assert not calm.drifted


def test_the_latency_paragraphs_come_from_the_latency_table():
    """The latency section's reading and a drifted night's verdict clause are values of LATENCY_DRIFT, each
    kind rendered as the report shows it."""
    from tuner.reports.render import to_markdown
    from tuner.reports import Report
    from tuner.reports.sweep import LatencyDrift, latency_section
    from tuner.sweep.reasons import DRIFT_VERDICT, DRIFTED, LATENCY_DRIFT, WITHIN_CALIBRATION

    def reading(drift):
        return to_markdown(Report("sweep", "t", "v", (latency_section(drift),)))

    assert set(LATENCY_DRIFT) == {WITHIN_CALIBRATION, DRIFTED, DRIFT_VERDICT}
    assert ("measured / predicted p95, median over 4 evaluated rounds: 2.90 — DRIFT: the machine was not as at "
            "calibration") in reading(LatencyDrift((), 2.9, 4, True))
    calm = reading(LatencyDrift((), 1.1, 3, False))
    assert "measured / predicted p95, median over 3 evaluated rounds: 1.10" in calm and "DRIFT" not in calm
    assert "evaluated rounds: –" in reading(LatencyDrift((), None, 0, False))
    clause = LATENCY_DRIFT(DRIFT_VERDICT, ratio=2.9)
    assert clause.message() == ("LATENCY DRIFT: measured p95 ran 2.90x the cost model's prediction (the machine was "
                                "much busier or quieter than at calibration; decisions used the prediction)")
    assert all(LATENCY_DRIFT(k, rounds=1, ratio=1.0).fix() == "" for k in LATENCY_DRIFT)   # findings, no fix
