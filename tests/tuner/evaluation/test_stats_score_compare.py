import json

import pytest
from scipy import stats

from tuner.evaluation.compare import Comparison, compare
from tuner.evaluation.evaluate import EvalResult, GateMetrics, QuestionResult
from tuner.evaluation.score import ScoreConfig, score100
from search_core.percentiles import percentile
from tuner.evaluation.stats import bootstrap_ci, paired_randomization
from tuner.stored_config import NO_CONFIG


def test_score100_by_hand():
    m = {"hit@5": 0.9, "mrr": 0.7, "ndcg@10": 0.8}
    # quality = 60 * (0.5*0.9 + 0.3*0.7 + 0.2*0.8) = 60 * 0.82 = 49.2
    # speed: p95 140 ms -> 40 * (500-140)/(500-50) = 40 * 0.8 = 32.0
    s = score100(m, 140.0)
    assert s.to_json() == {"quality": 49.2, "speed": 32.0, "total": 81.2, "passed": True}
    assert score100(m, 20.0).speed == 40.0 and score100(m, 900.0).speed == 0.0
    assert not score100(m, 400.0).passed        # 49.2 + 8.89 = 58.1
    custom = ScoreConfig(quality_weights=(("mrr", 1.0),), pass_line=50)
    assert score100(m, 50.0, custom).quality == pytest.approx(42.0)


def test_percentile():
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile([10, 20], 95) == pytest.approx(19.5)


def test_randomization_test_agrees_with_scipy():
    a = [1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 1]
    b = [1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1]
    ours = paired_randomization(a, b, n_resamples=20_000)
    ref = stats.permutation_test((a, b), lambda x, y: (x - y).mean(), permutation_type="samples",
                                 n_resamples=20_000, random_state=0).pvalue
    assert ours == pytest.approx(ref, abs=0.02)
    assert paired_randomization(a, a) == 1.0


def test_bootstrap_ci_contains_the_mean_difference():
    a, b = [0, 0, 1, 1, 0] * 4, [1, 0, 1, 1, 1] * 4
    lo, hi = bootstrap_ci(a, b)
    assert lo <= 0.4 <= hi


def _run(hits, rr, gold="g"):
    return EvalResult(gold, NO_CONFIG, "x", None, {}, {}, GateMetrics.from_json({}), {}, None, [
        QuestionResult(f"q{i}", "L1", f"q{i}", (f"n{i}",), first_rank=None if not h else 1, inject=bool(h),
                       top_score=0.9, timings_ms={"total": 1.0}, metrics={"hit@1": h, "hit@5": h, "mrr": r, "ndcg@10": r, "p@5": h / 5, "recall@5": h})
        for i, (h, r) in enumerate(zip(hits, rr))])


def test_compare_flips_and_noise():
    a = _run([1, 1, 0, 1], [1, 0.5, 0, 1])
    b = _run([1, 1, 1, 0], [1, 1.0, 0.2, 0])
    c = compare(a, b)
    assert c.metrics["hit@5"].delta == 0.0
    assert c.metrics["hit@5"].verdict == "within noise"
    assert (c.wins, c.ties, c.losses) == (2, 1, 1)
    assert [f.id for f in c.flipped] == ["q2", "q3"]
    assert c.one_question_moves_hit5_by == 0.25
    # its JSON form (`compare --json`, a holdout check in the ledger) reads back into the same text
    text = json.dumps(c.to_json(), ensure_ascii=False)
    assert json.dumps(Comparison.from_json(json.loads(text)).to_json(), ensure_ascii=False) == text
    d = c.to_json()                     # each verdict reads back as itself
    d["metrics"]["mrr"].update(delta=0.2, p_value=0.01, verdict="B better")
    d["metrics"]["p@5"].update(delta=-0.05, p_value=0.01, verdict="A better")
    assert Comparison.from_json(d).to_json() == d
    assert list(c.to_json()) == ["gold", "n", "a", "b", "metrics", "wins", "ties", "losses", "flipped",
                                 "one_question_moves_hit5_by"]
    with pytest.raises(ValueError, match="different gold sets"):
        compare(a, _run([1, 1, 1, 0], [1, 1.0, 0.2, 0], gold="other"))


def test_score_rubric_from_the_config_file(tmp_path):
    from search_core import SearchCoreError
    from search_core.config import SearchConfig, load_config
    from tuner.evaluation.score import load_score_config
    p = tmp_path / "c.toml"
    p.write_text('[search]\nrrf_k = 20\n[score]\npass_line = 70\nquality_weights = { mrr = 1.0 }\n')
    cfg = load_score_config(p)
    assert cfg.pass_line == 70 and cfg.quality_weights == (("mrr", 1.0),)
    assert load_config(p) == SearchConfig(rrf_k=20)
    assert score100({"mrr": 0.5}, 50.0, cfg).to_json() == {"quality": 30.0, "speed": 40.0, "total": 70.0,
                                                             "passed": True}
    p.write_text('[score]\nbogus = 1\n')
    with pytest.raises(SearchCoreError, match="unknown keys"):
        load_score_config(p)


def test_compare_and_the_ab_share_one_paired_comparison():
    """`compare` (and so the holdout check) and the A/B report the same numbers for the same two runs."""
    from tuner.ab.compare import compare_pair
    from tuner.ab.records import Candidate, CandidateResult
    a = _run([1, 1, 0, 1, 0, 1], [1, 0.5, 0, 1, 0.2, 1])
    b = _run([1, 1, 1, 0, 1, 1], [1, 1.0, 0.2, 0, 1, 0.5])
    c = compare(a, b, seed=3).to_json()
    pr = compare_pair(*(CandidateResult(Candidate(x), x, "ok", result=r) for x, r in (("A", a), ("B", b))),
                      seed=3).to_json()
    for m in ("hit@5", "mrr"):
        shared = ("a", "b", "delta", "p_value", "ci95")
        assert {k: c["metrics"][m][k] for k in shared} == {k: pr["metrics"][m][k] for k in shared}
        assert pr["metrics"][m]["within_noise"] == (c["metrics"][m]["verdict"] == "within noise")


def test_every_metric_list_comes_from_the_one_table():
    from tuner.evaluation.metrics import METRICS, metric_names, question_metrics
    assert set(question_metrics(["a", "b"], {"b"})) == set(METRICS)
    with pytest.raises(ValueError, match=r"unknown metric\(s\) \['hit@7'\]; metrics: hit@1, hit@3"):
        metric_names("hit@5", "hit@7")
