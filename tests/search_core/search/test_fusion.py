import pytest

from search_core.search.fusion import community_boost, weighted_rrf


def test_weighted_rrf_by_hand():
    lists = {"dense": ["a", "b", "c"], "sparse": ["b", "c"], "entity": ["c"]}
    w = {"dense": 0.3, "sparse": 0.4, "entity": 0.15}
    out = {f.id: f for f in weighted_rrf(lists, w, k=60)}
    # a: 0.3/61 = 0.00491803
    assert out["a"].score == pytest.approx(0.3 / 61)
    assert out["a"].score == pytest.approx(0.004918033)
    # b: 0.3/62 + 0.4/61 = 0.00483871 + 0.00655738 = 0.01139609
    assert out["b"].score == pytest.approx(0.011396086)
    # c: 0.3/63 + 0.4/62 + 0.15/61 = 0.00476190 + 0.00645161 + 0.00245902 = 0.01367253
    assert out["c"].score == pytest.approx(0.013672533)
    assert [f.id for f in weighted_rrf(lists, w, k=60)] == ["c", "b", "a"]
    assert out["a"].ranks == {"dense": 1, "sparse": None, "entity": None}


def test_k_changes_the_order():
    lists = {"dense": ["a", "b"], "sparse": ["b", "x", "y", "a"]}
    w = {"dense": 1.0, "sparse": 1.0}
    # k=0: a = 1/1 + 1/4 = 1.25, b = 1/2 + 1/1 = 1.5 -> b first
    assert [f.id for f in weighted_rrf(lists, w, k=0)][:2] == ["b", "a"]
    r = {f.id: f.score for f in weighted_rrf(lists, w, k=0)}
    assert r["a"] == pytest.approx(1.25) and r["b"] == pytest.approx(1.5)


def test_zero_weight_channel_contributes_nothing():
    out = weighted_rrf({"dense": ["a"], "entity": ["b"]}, {"dense": 1.0, "entity": 0.0}, k=60)
    assert [f.id for f in out] == ["a"]


def test_ties_break_by_best_rank_then_id():
    out = weighted_rrf({"dense": ["b", "a"], "sparse": ["a", "b"]}, {"dense": 1.0, "sparse": 1.0}, k=60)
    assert [f.id for f in out] == ["a", "b"]   # equal scores, equal best rank: id order


def test_duplicates_within_a_channel_count_once():
    out = weighted_rrf({"dense": ["a", "a", "b"]}, {"dense": 1.0}, k=60)
    assert {f.id: f.ranks["dense"] for f in out} == {"a": 1, "b": 3}


def test_negative_k_is_refused():
    with pytest.raises(ValueError):
        weighted_rrf({"dense": ["a"]}, {"dense": 1.0}, k=-1)


def test_community_boost_adds_to_same_community():
    fused = weighted_rrf({"dense": ["a", "b", "c"]}, {"dense": 1.0}, k=0)   # 1, 0.5, 0.333
    out = community_boost(fused, {"a": 1, "b": 2, "c": 1}, boost=0.2)
    assert [(f.id, round(f.score, 4)) for f in out] == [("a", 1.2), ("c", 0.5333), ("b", 0.5)]
