import dataclasses

import pytest
import sqlean

from search_core import SearchCoreError
from search_core.config import SearchConfig, load_config
from tuner.sweep.keep_rule import Rule, decide
from tuner.ledger.ledger import Ledger
from tuner.ledger.round import Round
from tuner.ledger.schema import DECISIONS, RoundDecision
from tuner.sweep.propose import propose
from tuner.sweep.space import Variable, load_space
from tuner.promotion.config_toml import config_toml
from tuner.evaluation.evaluate import EvalResult, QuestionResult
from tuner.sweep.workbench import fit_threshold
from tuner.stored_config import NO_CONFIG, StoredConfig
from tuner.sweep.params import RecordedParams


def summary(hits, mrr_values, score, levels=None, p95=30.0, gate=0.8):
    levels = levels or ["L1"] * len(hits)
    n = len(hits)
    return EvalResult.from_ledger({     # as a ledger row keeps an evaluation
        "overall": {"n": n, "hit@5": sum(hits) / n, "mrr": sum(mrr_values) / n, "ndcg@10": 0.5},
        "score100": {"quality": 0.0, "speed": 0.0, "total": score, "passed": False}, "gate": {"gate_accuracy": gate},
        "latency_ms": {"p95": p95},
        "per_query": [{"id": f"q{i}", "level": lv, "hit@5": h} for i, (h, lv) in enumerate(zip(hits, levels))]})


def test_composite_up_hit5_down_is_rejected():
    base = summary([1, 1, 1, 0], [1, 1, 1, 0], 70.0)
    cand = summary([1, 1, 0, 0], [1, 1, 0, 0], 75.0)    # the score rose, one question was lost
    d, b, c = decide(base, cand, Rule("score100", hit5_guard="count"))
    assert d.decision == "rejected:hit5_regressed"
    assert "hit@5 0.7500 -> 0.5000 (1 question(s) lost)" in d.reason and "score100 rose 70.0000 -> 75.0000" in d.reason
    assert (b, c) == (70.0, 75.0)
    d = decide(base, cand, Rule("score100"))[0]
    assert d.decision == "rejected:hit5_regressed"
    assert d.reason.startswith("hit@5 may have regressed: 1 question(s) out of the top 5, 0 in, of 4") and \
        "score100 rose 70.0000 -> 75.0000" in d.reason, d.reason


def test_keep_needs_a_gain_above_epsilon():
    base = summary([1, 1, 0], [1, 0.5, 0], 70.0)
    assert decide(base, summary([1, 1, 0], [1, 0.5, 0], 70.0), Rule())[0].decision == "rejected:no_gain"
    assert decide(base, summary([1, 1, 0], [1, 1, 0], 70.4), Rule(epsilon=0.5))[0].decision == "rejected:no_gain"
    assert decide(base, summary([1, 1, 0], [1, 1, 0], 70.6), Rule(epsilon=0.5))[0].decision == "kept"
    assert decide(base, summary([1, 1, 1], [1, 1, 1], 71.0), Rule())[0].decision == "kept"


def test_level_guard_and_latency_budget():
    lv = ["L0", "L0", "L0", "L2", "L2"]
    base = summary([1, 0, 0, 1, 1], [1, 0, 0, 1, 1], 70.0, lv)          # L0 1 hit, L2 2 hits
    one_lost = summary([1, 1, 0, 1, 0], [1, 1, 0, 1, 0], 72.0, lv)      # L2 loses 1: allowed
    count = "count"       # five questions: the count guard, so that only the level guard speaks
    assert decide(base, one_lost, Rule(level_guard=True, hit5_guard=count))[0].decision == "kept"
    two_lost = summary([1, 1, 1, 0, 0], [1, 1, 1, 0, 0], 72.0, lv)      # same hit@5, L2 loses 2
    d = decide(base, two_lost, Rule(level_guard=True, hit5_guard=count))[0]
    assert d.decision == "rejected:level_guard" and "L2 lost 2" in d.reason
    assert decide(base, two_lost, Rule(hit5_guard=count))[0].decision == "kept"          # the guard is optional
    slow = summary([1, 0, 0, 1, 1], [1, 0, 0, 1, 1], 75.0, lv, p95=300)
    d = decide(base, slow, Rule(latency_budget_ms=100))[0]
    assert d.decision == "rejected:latency_budget" and "300.0 ms" in d.reason


def test_threshold_rounds_are_judged_on_the_gate():
    base = summary([1, 1], [1, 1], 70.0, gate=0.7)
    cand = summary([1, 1], [1, 1], 70.0, gate=0.8)
    # the rule before: the recorded gate accuracy (these rows carry no decisions to recount)
    assert decide(base, cand, Rule(gate_measure="accuracy"), objective="gate_accuracy")[0].decision == "kept"


def test_ledger_is_append_only_with_a_closed_vocabulary(tmp_path):
    lg = Ledger(tmp_path / "l.sqlite")
    lg.new_sweep("s1", RecordedParams.from_json({"db": "i", "gold": "g", "space": "s"}), StoredConfig.from_json({"w_dense": 0.3}))
    row = Round("s1", 1, "rrf_k", 60, 20, NO_CONFIG, "h", "b", None, None, None, RoundDecision.KEPT, "r")
    lg.append_round(row)
    with pytest.raises(ValueError, match="not one of"):
        lg.append_round(dataclasses.replace(row, round=2, decision="maybe"))
    with pytest.raises(sqlean.IntegrityError, match="append-only"):
        lg.conn.execute("UPDATE rounds SET decision = 'crashed'")
    with pytest.raises(sqlean.IntegrityError, match="append-only"):
        lg.conn.execute("DELETE FROM rounds")
    with pytest.raises(sqlean.IntegrityError, match="UNIQUE constraint failed: rounds.sweep, rounds.round"):
        lg.append_round(row)
    assert [r.new for r in lg.rounds("s1")] == [20]
    assert set(DECISIONS) == {"kept", "rejected:hit5_regressed", "rejected:no_gain", "rejected:level_guard",
                              "rejected:latency_budget", "unavailable", "crashed"}


@pytest.mark.parametrize("text, match", [
    ("[w_bogus]\nkind='float'\nlow=0\nhigh=1\n", "unknown variable; variables are SearchConfig fields"),
    ("[rrf_k]\nkind='int'\nlow=10\nhigh=1\n", "low 10.0 is above high 1.0"),
    ("[w_dense]\nkind='float'\nlow=-1\nhigh=1\n", "cannot be negative"),
    ("[rrf_k]\nkind='weird'\n", "kind 'weird' is not one of"),
    ("[embedder]\nkind='categorical'\nchoices=['e5-small','nope']\n", "unknown embedder 'nope'"),
    ("[reranker]\nkind='categorical'\nchoices=[]\n", "non-empty `choices`"),
    ("not toml = = \n", "not valid TOML"),
])
def test_space_file_is_checked_on_load(tmp_path, text, match):
    p = tmp_path / "s.toml"
    p.write_text(text)
    with pytest.raises(SearchCoreError, match=match):
        load_space(p)


def test_out_of_range_start_config_is_refused(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text("[rrf_k]\nkind='int'\nlow=10\nhigh=30\n")
    with pytest.raises(SearchCoreError, match="rrf_k = 2, outside the space"):
        load_space(p).check_config(SearchConfig())


def test_proposals_are_deterministic_and_never_repeat():
    v = Variable("w_sparse", "float", 0.0, 1.0, 0.05)
    kw = dict(seed=7, baseline_hash="b", baseline_value=0.4, baseline_objective=70.0)
    a = propose(v, history=[], tried=set(), **kw)
    assert a == propose(v, history=[], tried=set(), **kw) and a != 0.4
    tried, history = set(), []
    for i in range(21 - 1):                               # 21 grid values, one is the baseline
        x = propose(v, history=history, tried=tried, **kw)
        assert x is not None and x not in tried and x != 0.4
        tried.add(x)
        history.append((x, 70.0 + i % 3))
    assert propose(v, history=history, tried=tried, **kw) is None   # exhausted


def test_a_baseline_between_grid_points_gets_a_proposal_not_a_crash():
    """depth 50 in a 20..80 step 20 space (a starting config), threshold 0.8123 on a 0.005 grid (re-fitted
    after an embedder round): optuna refused them as trials with a ValueError that ended the sweep."""
    v = Variable("depth", "int", 20, 80, 20)
    kw = dict(seed=0, baseline_hash="b", baseline_value=50, baseline_objective=80.0)
    tried, history = set(), []
    for i in range(4):                                    # every grid value: the baseline is none of them
        x = propose(v, history=history, tried=tried, **kw)
        assert x in {20, 40, 60, 80} and x not in tried, (x, tried)
        tried.add(x)
        history.append((x, 80.0 + i))
    assert propose(v, history=history, tried=tried, **kw) is None
    t = Variable("threshold", "float", 0.4, 0.95, 0.005)
    x = propose(t, seed=0, baseline_hash="b", baseline_value=0.8123, baseline_objective=0.9, history=[], tried=set())
    k = (x - 0.4) / 0.005
    assert abs(k - round(k)) < 1e-6


def test_categorical_values_each_once_skipping_unavailable():
    v = Variable("reranker", "categorical", choices=("none", "a", "b"))
    kw = dict(seed=0, baseline_hash="b", baseline_value="none", baseline_objective=1.0, history=[])
    assert propose(v, tried=set(), **kw) == "a"
    assert propose(v, tried={"a"}, **kw) == "b"
    assert propose(v, tried=set(), unavailable={"a"}, **kw) == "b"
    assert propose(v, tried={"a", "b"}, **kw) is None


def test_fit_threshold_separates_probes():
    rows = [QuestionResult.from_json({"id": f"q{i}", "top_score": s, "level": lv}) for i, (s, lv) in
            enumerate([(0.91, "L0"), (0.88, "L1"), (0.86, "L1"), (0.83, "probe"), (0.80, "probe"), (0.87, "probe")])]
    t = fit_threshold(rows)
    assert 0.83 < t <= 0.86        # 5 of 6 right: the 0.87 probe cannot be separated
    assert fit_threshold([QuestionResult.from_json({"id": "q", "top_score": 0.9, "level": "L0"})]) is None


def test_best_config_toml_round_trips(tmp_path):
    cfg = SearchConfig(w_dense=0.55, rrf_k=17, threshold=0.845, reranker="none")
    p = tmp_path / "best.toml"
    p.write_text(config_toml(cfg, "test"))
    assert load_config(p) == cfg
