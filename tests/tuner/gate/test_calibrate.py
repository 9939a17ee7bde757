import json
import sqlite3
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.gate.model import sidecar_path
from search_core.search.pipeline import Searcher
from search_core.recall.log import log_search
from search_core.recall.log import read_logged_calls
from tuner.gate.calibrate import _retirement, apply_label_file, calibrate, calibrate_index
from tuner.cli import main
from tuner.gate.probes import make_probes, questions_without
from tuner.data.gold import GoldSet, Question
from tests.helpers.logged_calls import label_of, searched_small_vault

@pytest.fixture(scope="module")
def logged(tmp_path_factory, shared_cache):
    """A recall log of real searches over the small vault's index: 12 labelled calls, 24 unlabelled, over 3 days.
    Built once for the module (the tests only read it; the apply test undoes what it installs)."""
    small_index, _, results = searched_small_vault(tmp_path_factory.mktemp("logged"), shared_cache)
    now = time.time()
    rows = [{"ts": now - 3 * 86400 + i, "session": "a", "query": q, "res": res, "label": label_of(q)}
            for i, (q, res) in enumerate(results.items())]
    rows += [{"ts": now - 3600 + i, "session": f"b{i % 3}", "query": q, "res": results[q]}
             for i, q in enumerate(list(results) * 2)]
    log = small_index.parent.parent / "recall-log.sqlite"
    log_search(log, rows)
    return small_index, log


def test_read_log_window(logged):
    _, log = logged
    assert len(read_logged_calls(log)) == 36
    recent = read_logged_calls(log, since_s=2 * 86400)
    assert len(recent) == 24 and all(c.label is None for c in recent)
    assert all("top_cos" in c.features and c.top_score is not None for c in recent)


def test_calibrate_report_and_proposal(logged, tmp_path):
    db, log = logged
    for fmt in ("json", "md", "html"):
        out = tmp_path / f"cal.{fmt}"
        r = CliRunner().invoke(main, ["calibrate", "--db", str(db), "--log", str(log), "--since", "7d",
                                      "--format", fmt, "--out", str(out)])
        assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "cal.json").read_text())["data"]
    assert data["window"]["calls"] == 36 and data["window"]["sessions"] == 4
    assert data["labelled"] == {"answerable": 6, "probes": 6, "sources": ["log"]}
    # 12 labels with the shipped gate in force, none of which a move of its threshold would decide better (the
    # scan over the labelled calls next to the cut finds no gain): it stays, no proposal is written, and nothing
    # is left undecided to warn of
    rec = data["recommendation"]
    assert rec["basis"] is None and rec["model_summary"]["method"] == "keep"
    assert rec["model_summary"]["features"] and rec["threshold_move"]["sign_test"]["p_value"] > 0.05
    assert rec["threshold_move"]["to"] == rec["threshold_move"]["from"]
    assert not any("do not show that moving there" in w for w in data["warnings"])
    declined = json.loads(sidecar_path(db).with_name(db.name + ".gate-proposal.json").read_text())
    assert declined["model"] is None and "the labels show no better cut than the threshold in force" in declined["declined"]
    r = CliRunner().invoke(main, ["calibrate", "apply", "--db", str(db)])
    assert r.exit_code == 1 and "nothing to apply" in r.output and not sidecar_path(db).exists(), r.output
    assert set(data["distributions"]["cosine"]) == {"answerable", "probes", "unlabelled log"}
    assert data["retirement"]["rule"] == "p95 > 400 ms or injection < 20%"
    assert set(data["traffic"]["flips"]) >= {"-0.02", "+0.02", "scale", "threshold"}
    md = (tmp_path / "cal.md").read_text()
    assert "Retirement rule" in md and "Recommendation" in md
    html = (tmp_path / "cal.html").read_text()
    assert "<svg" in html and "risk-coverage on the labelled rows" in html
    assert "no proposal written" in md and "show no better cut" in md and "fits the labels" in md
    # a proposal that moves the threshold (the rule that always moves): apply installs it next to the index,
    # undo takes it away again
    from tuner.gate.calibrate import calibrate_index
    from tuner.gate.proposal import write_proposal
    data, _, _, _ = calibrate_index(db, log_path=log, since_s=7 * 86400, threshold_rule="always")
    assert data.recommendation.basis.text().startswith("the gate's threshold moved to fit 12 labels")
    assert data.recommendation.model_summary.method == "threshold"
    proposal_path = sidecar_path(db).with_name(db.name + ".gate-proposal.json")
    write_proposal(data, db, proposal_path)
    md = (tmp_path / "cal-moved.md")
    from tuner.reports import emit
    from tuner.reports.calibration import calibration_report
    md = Path(emit(calibration_report(data, str(db), str(proposal_path)), "md", md)).read_text()
    prop = json.loads(proposal_path.read_text())
    assert prop["model"]["scope"] == "index"
    assert prop["evidence"] == {k: data.to_json()[k] for k in ("window", "labelled", "retirement")}
    r = CliRunner().invoke(main, ["calibrate", "apply", "--db", str(db)])
    assert r.exit_code == 0, r.output
    assert sidecar_path(db).exists()
    s = Searcher(db)
    assert s.gate_for("none").source == str(sidecar_path(db))
    assert s.search("김치찌개 레시피").gate.kind == "model"
    # the installed gate is the shipped default with its threshold moved: same weights, the proposal's threshold
    from search_core.gate.model import DEFAULT_GATE_FILE, load_gate
    installed, default = load_gate(sidecar_path(db)), load_gate(DEFAULT_GATE_FILE)
    assert installed.coef == default.coef and installed.intercept == default.intercept
    assert installed.threshold == pytest.approx(data.recommendation.threshold_move.to, abs=1e-4)
    assert "past decisions flip" in md and "interval" in md
    # calibrated again with the moved gate in force, the report names it, what it was made from, and the default's cut
    again, _, _, _ = calibrate_index(db, log_path=log, since_s=7 * 86400)
    cur = Path(emit(calibration_report(again, str(db), None), "md", tmp_path / "cal-again.md")).read_text()
    assert f"P(answerable) >= {installed.threshold:.3f} ({sidecar_path(db)}: this vault's threshold" in cur
    # the report carries cuts to 4 decimals (0.65551 -> 0.6555, printed 0.655)
    assert f"moved from {round(default.threshold, 4):.3f} by 6 relevant + 6 irrelevant labels" in cur
    assert f"the shipped default's threshold: {round(default.threshold, 4):.3f}" in cur
    r = CliRunner().invoke(main, ["calibrate", "undo", "--db", str(db)])
    assert r.exit_code == 0 and not sidecar_path(db).exists()
    r = CliRunner().invoke(main, ["calibrate", "undo", "--db", str(db)])
    assert r.exit_code != 0 and "nothing to undo" in r.output


def test_bad_inputs_are_explained(logged, tmp_path):
    db, log = logged
    # an empty window: a report with the reason, no crash
    r = CliRunner().invoke(main, ["calibrate", "--db", str(db), "--log", str(log), "--since", "1m",
                                  "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)["data"]
    assert data["window"]["calls"] == 0 and any("no calls" in w for w in data["warnings"])
    # a label file naming calls that are not in the window
    lab = tmp_path / "labels.tsv"
    lab.write_text("1 relevant\n99999 irrelevant\n")
    r = CliRunner().invoke(main, ["calibrate", "--db", str(db), "--log", str(log), "--labels", str(lab)])
    assert r.exit_code != 0 and "99999" in r.output and "not in this log window" in r.output
    lab.write_text("1 maybe\n")
    r = CliRunner().invoke(main, ["calibrate", "--db", str(db), "--log", str(log), "--labels", str(lab)])
    assert r.exit_code != 0 and "valid labels: relevant, irrelevant" in r.output
    # no log at all
    r = CliRunner().invoke(main, ["calibrate", "--db", str(db), "--log", str(tmp_path / "none.sqlite")])
    assert r.exit_code != 0 and "no recall log" in r.output


def test_labels_without_probes_or_answerable(logged):
    db, log = logged
    calls = read_logged_calls(log)
    only_ans = [c for c in calls if c.label != "irrelevant"]
    fp = Searcher(db).fingerprint
    cal = calibrate(only_ans, [], model=None, cos_threshold=0.82, fingerprint=fp)
    assert cal.recommendation.basis is None and any("hold no 'irrelevant' rows" in w for w in cal.warning_lines())
    only_probes = [c for c in calls if c.label != "relevant"]
    cal = calibrate(only_probes, [], model=None, cos_threshold=0.82, fingerprint=fp)
    assert cal.recommendation.basis is None and cal.recommendation.cosine is None
    relabelled = apply_label_file(calls, [(calls[-1].id, "irrelevant")])
    assert relabelled[-1].label == "irrelevant" and calls[-1].label is None


def test_retirement_rule():
    from tuner.gate.records import Traffic, Window

    def injecting(rate):
        return Traffic(round(rate * 10), rate, {}, (), None)
    w = Window(10, 2, None, None, 80.0, 450.0)
    assert _retirement(w, injecting(0.5)).verdict.text() == "consider switching recall off"
    w = Window(10, 2, None, None, 80.0, 120.0)
    assert _retirement(w, injecting(0.1)).verdict.text() == "consider switching recall off"
    assert _retirement(w, injecting(0.5)).verdict.text() == "keep recall on"


def test_questions_without_held_out_documents_become_probes():
    g = GoldSet("g", "g.yaml", (Question("1", "L1", "q1", ("001-00",)), Question("2", "L2", "q2", ("001-01", "002-00")),
                                Question("3", "probe", "q3", ()), Question("4", "L0", "q4", ("003-00",))))
    out = {q.id: q for q in questions_without(g, {"001", "002"}, korquad=True)}
    assert out["1"].is_probe and out["2"].is_probe and out["3"].is_probe
    assert out["1"].why == "gold 001-00 held out" and out["1"].gold == ()
    assert out["4"].level == "L0" and out["4"].gold == ("003-00",)
    out = {q.id: q for q in questions_without(g, {"001-01"}, korquad=False)}
    assert out["2"].level == "L2" and out["2"].gold == ("002-00",)


def test_probes_make_on_a_vault(small_vault, tmp_path, shared_cache):
    gold = tmp_path / "gold.yaml"
    gold.write_text(yaml.safe_dump({"name": "small", "questions": [
        {"id": "a", "level": "L0", "query": "김치찌개", "gold": ["life/kimchi"]},
        {"id": "b", "level": "L1", "query": "RRF", "gold": ["ai/rrf"]},
        {"id": "c", "level": "L1", "query": "GraphRAG", "gold": ["ai/graphrag"]},
        {"id": "p", "level": "probe", "query": "LightRAG"}]}, allow_unicode=True))
    out = tmp_path / "probes"
    m = make_probes(small_vault, gold, out, fraction=0.25, seed=1, cache=shared_cache)
    assert m.documents == 4 and m.held_out_documents == 1
    held = m.held_out[0]
    s = Searcher(out / "index.sqlite")
    assert held not in s.view.notes and len(s.view.notes) == 3
    made = yaml.safe_load((out / "gold.yaml").read_text())["questions"]
    probes = {q["id"] for q in made if q["level"] == "probe"}
    assert {tuple(q) for q in made} == {("id", "level", "query", "gold", "why")}     # the file's form, key for key
    expected = {"p"} | {q for q, g in (("a", "life/kimchi"), ("b", "ai/rrf"), ("c", "ai/graphrag")) if g == held}
    assert probes == expected
    with pytest.raises(SearchCoreError, match="not empty"):
        make_probes(small_vault, gold, out)
    with pytest.raises(SearchCoreError, match="between 0 and 1"):
        make_probes(small_vault, gold, tmp_path / "x", fraction=1.5)


def test_probes_make_on_a_beir_folder_holds_out_whole_documents(tmp_path, shared_cache):
    """A BEIR corpus (AutoRAG-ko's layout): passages sharing a title are one document; held-out
    documents leave the index whole, and questions with gold only there become probes."""
    import json
    beir = tmp_path / "beir"
    beir.mkdir()
    docs = {"finance - 은행.pdf": ["예비인가 요건은 자본금과 대주주 적격성이다.", "본인가는 예비인가 뒤에 신청한다."],
            "commerce - B2B.pdf": ["B2B e커머스는 비용을 줄인다.", "B2B 매출 증가 사례 세 가지."],
            "travel - 교토.pdf": ["교토 료칸 예약은 두 달 전에 한다."],
            "health - 달리기.pdf": ["풀코스 서브4 훈련은 주 4회 달린다."]}
    rows = [{"_id": f"{t} - {i + 1}", "title": t, "text": x} for t, xs in docs.items() for i, x in enumerate(xs)]
    (beir / "corpus.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    qs = {"q1": ("예비인가 요건", ["finance - 은행.pdf - 1"]), "q2": ("B2B 비용 절감", ["commerce - B2B.pdf - 1"]),
          "q3": ("료칸 예약", ["travel - 교토.pdf - 1"]), "q4": ("서브4 훈련", ["health - 달리기.pdf - 1"]),
          "q5": ("본인가와 B2B 매출", ["finance - 은행.pdf - 2", "commerce - B2B.pdf - 2"])}
    (beir / "queries.jsonl").write_text("\n".join(json.dumps({"_id": k, "text": v[0]}, ensure_ascii=False)
                                                  for k, v in qs.items()) + "\n", encoding="utf-8")
    (beir / "qrels_test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{k}\t{g}\t1\n" for k, v in qs.items() for g in v[1]), encoding="utf-8")
    out = tmp_path / "probes"
    m = make_probes(beir, beir, out, fraction=0.5, seed=3, cache=shared_cache)
    assert m.documents == 4 and m.held_out_documents == 2
    held = set(m.held_out)
    assert held <= set(docs)                                   # documents (titles), not passages
    s = Searcher(out / "index.sqlite")
    kept_passages = {r["_id"] for r in rows if r["title"] not in held}
    assert set(s.view.notes) == kept_passages                  # every passage of a held document is gone
    made = {q["id"]: q for q in yaml.safe_load((out / "gold.yaml").read_text())["questions"]}
    for k, (_, gold) in qs.items():
        left = [g for g in gold if g.rsplit(" - ", 1)[0] not in held]
        assert made[k]["level"] == ("probe" if not left else "L1") and made[k]["gold"] == left, k
    assert m.probes >= 1 and m.answerable >= 1
    # the verb, as a user runs it on a BEIR folder
    r = CliRunner().invoke(main, ["probes", "make", str(beir), "--gold", str(beir), "--out", str(tmp_path / "cli"),
                                  "--fraction", "0.5", "--seed", "3", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["held_out"] == list(m.held_out)


def test_gate_scorecard_by_hand():
    """Scores 0.9 0.8 0.7 0.6 0.5, labels 1 0 1 1 0, threshold 0.65: injected 0.9 0.8 0.7. Answerable
    injected 2/3, probes injected 1/2, balanced accuracy (2/3 + 1/2) / 2 = 0.58333; AUROC: 4 of the 6
    (answerable, probe) pairs in order = 0.66667; risk at coverage 0.2..1.0 (top 1..5 rows): 0, 1/2, 1/3,
    1/4, 2/5."""
    from tuner.gate.metrics import gate_scorecard
    c = gate_scorecard([0.9, 0.8, 0.7, 0.6, 0.5], [1, 0, 1, 1, 0], 0.65)
    assert c.answerable_injected == 0.6667 and c.probes_injected == 0.5
    assert c.balanced_accuracy == pytest.approx(0.5833, abs=1e-4) and c.auroc == pytest.approx(0.6667, abs=1e-4)
    assert c.risk_coverage == {"0.2": 0.0, "0.4": 0.5, "0.6": 0.3333, "0.8": 0.25, "1.0": 0.4}
    assert gate_scorecard([0.9, 0.8], [1, 1], 0.5).auroc is None      # one class: no AUROC


def test_calibrate_scores_the_gate_in_force_on_the_labelled_rows(logged, tmp_path):
    """The gate in force, scored on the labelled rows beside the cosine gate on the same rows; a gate
    fitted on those rows is flagged in-sample."""
    from tuner.gate.fit import fit_gate
    db, log = logged
    calls = read_logged_calls(log)
    fp = Searcher(db).fingerprint
    lab = [c for c in calls if c.label]
    cal = calibrate(calls, [], model=None, cos_threshold=0.85, fingerprint=fp)
    g = cal.gate_on_labels
    assert (g.rows, g.answerable, g.probes, g.sources) == (12, 6, 6, ("log",)) and g.model is None
    assert "model" not in g.to_json() and "in_sample" not in g.to_json()
    ans_in = sum(c.features["hit_cos"] >= 0.85 for c in lab if c.label == "relevant") / 6
    probe_in = sum(c.features["hit_cos"] >= 0.85 for c in lab if c.label == "irrelevant") / 6
    assert g.cosine.answerable_injected == round(ans_in, 4) and g.cosine.probes_injected == round(probe_in, 4)
    assert g.cosine.threshold == 0.85
    curve = g.curves["cosine gate"]                 # 20 points; all injected: the probes' share, 6 of 12
    assert len(curve) == 20 and curve[-1] == [1.0, 0.5] and curve[3][0] == 0.2
    assert curve[3][1] == g.cosine.risk_coverage["0.2"]
    m = fit_gate([c.features for c in lab], [int(c.label == "relevant") for c in lab], fingerprint=fp,
                 features=["top_cos", "term_overlap"], fitted_on={"sources": ["log"]})
    cal = calibrate(calls, [], model=m, cos_threshold=0.85, fingerprint=fp)
    g = cal.gate_on_labels
    assert g.model.threshold == round(m.threshold, 4) and g.in_sample == ("log",)
    assert list(g.to_json()) == ["rows", "answerable", "probes", "sources", "cosine", "curves", "model", "in_sample"]
    assert list(g.curves) == ["gate model", "cosine gate"]
    assert any("in-sample" in w for w in cal.warning_lines())
    m2 = fit_gate([c.features for c in lab], [int(c.label == "relevant") for c in lab], fingerprint=fp,
                  features=["top_cos", "term_overlap"], fitted_on={"sources": ["demo-tune"]})
    cal = calibrate(calls, [], model=m2, cos_threshold=0.85, fingerprint=fp)
    assert cal.gate_on_labels.in_sample == () and not any("in-sample" in w for w in cal.warning_lines())
    # no probes among the labels: nothing to score, said in the report
    cal = calibrate([c for c in calls if c.label != "irrelevant"], [], model=None, cos_threshold=0.85, fingerprint=fp)
    assert cal.gate_on_labels is None
    r = CliRunner().invoke(main, ["calibrate", "--db", str(db), "--log", str(log), "--format", "md"])
    assert r.exit_code == 0, r.output
    assert "The gate in force on the labelled rows" in r.output and "cosine gate (top cosine)" in r.output


def test_calibrate_from_labels_alone_scores_a_gold_set(logged, tmp_path):
    """--no-log: a gold set with probes is scored by the gate in force, and the report does not complain
    about an empty log window it was told not to read."""
    db, _ = logged
    gold = tmp_path / "small-gold.yaml"
    gold.write_text(yaml.safe_dump({"name": "small-gold", "questions": [
        {"id": "a1", "level": "L0", "query": "김치찌개 레시피", "gold": ["life/kimchi"]},
        {"id": "a2", "level": "L0", "query": "GraphRAG 커뮤니티 요약", "gold": ["ai/graphrag"]},
        {"id": "p1", "level": "probe", "query": "비트코인 반감기"},
        {"id": "p2", "level": "probe", "query": "파리 에펠탑 높이"}]}, allow_unicode=True), encoding="utf-8")
    r = CliRunner().invoke(main, ["calibrate", "--db", str(db), "--no-log", "--labels", str(gold), "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)["data"]
    g = data["gate_on_labels"]
    assert (g["rows"], g["answerable"], g["probes"], g["sources"]) == (4, 2, 2, ["small-gold"])
    assert not any("log window" in w for w in data["warnings"])
    assert set(data["distributions"]["probability"]) == {"answerable", "probes", "unlabelled log"}   # P, no log
    # two sets, one holding probes only: that one is scored in the pooled rows, and the report says so
    probes = tmp_path / "small-probes.yaml"
    probes.write_text(yaml.safe_dump({"name": "small-probes", "questions": [
        {"id": "p3", "level": "probe", "query": "양자 컴퓨터 큐비트"}]}, allow_unicode=True), encoding="utf-8")
    r = CliRunner().invoke(main, ["calibrate", "--db", str(db), "--no-log", "--labels", str(gold), "--labels",
                                  str(probes), "--format", "md"])
    assert r.exit_code == 0, r.output
    assert "small-probes (1 rows): one kind of row only" in r.output and "gate model on small-gold, 4 rows" in r.output


def test_each_labelled_set_is_scored_on_its_own(logged):
    """Two labelled sets (a tuning set the gate was fitted on, a holdout it was not): the pooled scorecard,
    and one per set with its own in-sample flag; the per-set figures are the pooled arithmetic on its rows."""
    from tuner.gate.fit import fit_gate
    from tuner.gate.calibrate import LabelledRow
    from tuner.gate.metrics import gate_scorecard
    db, log = logged
    lab = [c for c in read_logged_calls(log) if c.label]
    fp = Searcher(db).fingerprint
    rows = [LabelledRow("tune" if i % 2 else "holdout", str(c.id), c.query, c.features, c.label == "relevant")
            for i, c in enumerate(lab)]
    m = fit_gate([r.features for r in rows], [int(r.answerable) for r in rows], fingerprint=fp,
                 features=["top_cos", "term_overlap"], fitted_on={"sources": ["tune"]})
    g = calibrate([], rows, model=m, cos_threshold=0.85, fingerprint=fp, log_read=False).gate_on_labels
    assert g.in_sample == ("tune",) and set(g.by_source) == {"tune", "holdout"}
    assert g.by_source["tune"].in_sample is True and g.by_source["holdout"].in_sample is False
    hold = [r for r in rows if r.source == "holdout"]
    from tuner.gate.calibrate import probabilities
    want = gate_scorecard(probabilities(m, [r.features for r in hold]), [int(r.answerable) for r in hold],
                          m.threshold)
    assert g.by_source["holdout"].model == want and g.by_source["holdout"].rows == len(hold)
    assert list(g.to_json()["by_source"]["holdout"]) == ["rows", "probes", "cosine", "model", "in_sample"]
    from tuner.reports.calibration import gate_on_labels_section
    table = gate_on_labels_section(g).blocks[0]
    names = [row[0] for row in table.rows]
    n_tune = len(rows) - len(hold)
    assert f"gate model on tune, {n_tune} rows (in-sample)" in names and f"cosine gate on tune, {n_tune} rows" in names
    assert f"gate model on holdout, {len(hold)} rows" in names     # a set the gate never saw: no flag


def test_reading_the_fingerprint_of_an_index_this_process_holds_keeps_its_locks(small_index):
    """`calibrate --apply` in a process that serves the index reads its fingerprint through SQLite only."""
    from tests.helpers.live_file import assert_look_keeps_the_locks
    from tuner.gate.proposal import index_fingerprint
    assert_look_keeps_the_locks(small_index, index_fingerprint)


def test_apply_after_a_calibration_that_kept_the_gate_says_there_is_nothing_to_apply(logged, tmp_path):
    db, log = logged
    # the module's index is shared: a proposal another test wrote by hand is not this calibration's
    sidecar_path(db).with_name(db.name + ".gate-proposal.json").unlink(missing_ok=True)
    r = CliRunner().invoke(main, ["calibrate", "--db", str(db), "--log", str(log), "--since", "7d",
                                  "--format", "md", "--out", str(tmp_path / "cal.md")])
    assert r.exit_code == 0, r.output            # 12 labels: the gate in force is kept, no proposal written
    r = CliRunner().invoke(main, ["calibrate", "apply", "--db", str(db)])
    assert r.exit_code != 0 and "nothing to apply" in r.output and "the gate in force stays" in r.output, r.output
    assert "calibrate` first" not in r.output and "recall-log suggest" in r.output
    fresh = tmp_path / "never-calibrated.sqlite"
    r = CliRunner().invoke(main, ["calibrate", "apply", "--db", str(fresh)])
    assert r.exit_code != 0 and "first" in r.output       # no calibration has run on this one


def test_auroc_is_sklearn_s_on_ties_and_two_label_codes():
    # the rank form must give roc_auc_score's area, ties counted half, whatever the two label values are
    import numpy as np
    from sklearn.metrics import roc_auc_score
    from tuner.gate.metrics import auroc
    rng = np.random.default_rng(3)
    for trial in range(200):
        n = int(rng.integers(2, 60))
        y = rng.integers(0, 2, n)
        if len(set(y)) < 2:
            continue
        s = np.round(rng.random(n) + 0.3 * y, int(rng.integers(1, 3)))      # one or two decimals: many ties
        assert auroc(s, y) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        assert auroc(s, y.astype(bool)) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert np.isnan(auroc([0.2, 0.3], [1, 1]))
    with pytest.raises(ValueError, match="finite"):
        auroc([0.2, float("nan")], [0, 1])


def test_labels_for_calls_of_another_index_are_left_out_with_a_message(labelled_log, tmp_path):
    db, log, key = labelled_log
    conn = sqlite3.connect(log)                         # the same calls, logged against another index
    with conn:
        conn.execute("INSERT INTO recall_calls (ts, session, profile, query, query_hash, query_chars, top_scores, "
                     "features, threshold, index_fingerprint, injected, stopped_by, latency_ms, label) "
                     "SELECT ts, session, profile, query, query_hash, query_chars, top_scores, features, threshold, "
                     "'other-index-0000', injected, stopped_by, latency_ms, "
                     "CASE label WHEN 'relevant' THEN 'irrelevant' ELSE 'relevant' END FROM recall_calls")
    conn.close()
    cal, calls, _, _ = calibrate_index(db, log_path=log, since_s=None)
    assert cal.labelled.answerable == 6 and cal.labelled.probes == 6    # only this index's labels
    assert cal.kept_apart.to_json() == {"calls": 12, "labelled": 12, "fingerprints": ["other-index-0000"]}
    assert any("another index" in w and "left out" in w for w in cal.warning_lines())
    # a label file naming them: applied in memory, then left out the same way
    other_ids = [c.id for c in read_logged_calls(log) if c.index_fingerprint != key]
    f = tmp_path / "labels.txt"
    f.write_text("".join(f"{i} relevant\n" for i in other_ids))
    r = CliRunner().invoke(main, ["calibrate", "--db", str(db), "--log", str(log), "--since", "all", "--labels",
                                  str(f), "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output[r.output.index("{"):])["data"]
    assert data["labelled"]["answerable"] == 6 and data["kept_apart"]["labelled"] == 12
