import numpy as np
import pytest

from search_core.search.fusion import Fused, community_boost, rrf_order, weighted_rrf


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



def _reference_rrf(lists, weights, k=60, *, limit=None, exclude=frozenset()):
    """weighted_rrf written the straightforward way: each document's ranks, then its sum over them in the lists'
    order from 0.0, then one sort by (-score, best rank, id)."""
    ranks = {}
    for channel, ids in lists.items():
        pos = 0
        for doc in [d for d in ids if d not in exclude]:
            pos += 1
            ranks.setdefault(doc, {}).setdefault(channel, pos)
    scored = []
    for doc, r in ranks.items():
        weighted = [pos for c, pos in r.items() if weights.get(c, 0.0) != 0.0]
        if weighted:
            score = 0.0
            for c, pos in r.items():
                if weights.get(c, 0.0) != 0.0:
                    score += weights[c] / (k + pos)
            scored.append((-score, min(weighted), doc))
    scored.sort()
    return [Fused(doc, -neg, {c: ranks[doc].get(c) for c in lists},
                  {c: weights[c] / (k + pos) for c, pos in ranks[doc].items() if weights.get(c, 0.0) != 0.0})
            for neg, _, doc in scored[:limit]]


def _exactly(fused):
    """Records as comparable as they are printed: float reprs, and the ranks' and terms' key order."""
    return [(f.id, repr(f.score), list(f.ranks.items()), [(c, repr(t)) for c, t in f.terms.items()]) for f in fused]


def test_weighted_rrf_is_the_reference_on_random_lists():
    """The same records, floats and key order as the straightforward loop: repeats, held-out ids, zero weights,
    ties (small k, equal weights: runs of equal scores, cut by `limit` too) and limits."""
    rng = np.random.default_rng(7)
    ties = 0
    for trial in range(2000):
        names = [f"n{i:03d}" for i in rng.permutation(30)[: rng.integers(1, 30)]]
        channels = [c for c in ("dense", "sparse", "ngram", "entity", "decomposed") if rng.random() < 0.7] or ["dense"]
        lists = {c: [names[i] for i in rng.integers(0, len(names), rng.integers(0, 25))] for c in channels}
        weights = {c: float(rng.choice([0.0, 0.15, 0.3, 0.4, 1.0, 1.0])) for c in lists if rng.random() < 0.9}
        k = float(rng.choice([0, 1, 2, 60]))
        exclude = frozenset(rng.choice(names, rng.integers(0, 4))) if trial % 3 == 0 else frozenset()
        limit = None if trial % 2 else int(rng.integers(0, 15))
        want = _reference_rrf(lists, weights, k, limit=limit, exclude=exclude)
        assert _exactly(weighted_rrf(lists, weights, k, limit=limit, exclude=exclude)) == _exactly(want)
        scores = [f.score for f in want]
        ties += len(set(scores)) < len(scores)
    assert ties > 200          # the trials hold runs of equal scores, so the tie order is tested


def test_weighted_rrf_breaks_a_tie_at_the_limit_by_best_rank_then_id():
    # k 0, equal weights: a = 1/2 + 1/2 = 1.0 (best rank 2), b = 1/1 (rank 1), c = 1/1 (rank 1): b, c, a
    lists = {"dense": ["c", "a"], "sparse": ["b", "a"]}
    assert [f.id for f in weighted_rrf(lists, {"dense": 1.0, "sparse": 1.0}, k=0)] == ["b", "c", "a"]
    assert [f.id for f in weighted_rrf(lists, {"dense": 1.0, "sparse": 1.0}, k=0, limit=1)] == ["b"]
    assert [f.id for f in weighted_rrf(lists, {"dense": 1.0, "sparse": 1.0}, k=0, limit=2)] == ["b", "c"]


# -- rrf_order: the arithmetic weighted_rrf and the fast path's keyword lists (note numbers) share ----------------


def _numbered_as_records(lists, weights, k=60, *, limit=None, exclude=frozenset()):
    """rrf_order over the ids numbered in sorted order (as the view numbers notes), its answer as weighted_rrf's
    records: ids, floats (exactly) and ranks must be those of the ids themselves."""
    names = sorted({d for ids in lists.values() for d in ids})
    number = {d: i for i, d in enumerate(names)}
    ordered, places = rrf_order({c: [number[d] for d in ids] for c, ids in lists.items()}, weights, k, limit=limit,
                                exclude={number[d] for d in exclude if d in number})
    out = []
    for doc, score in ordered:
        ranks = {c: places[c].get(doc) for c in lists}
        out.append(Fused(names[doc], score, ranks, {c: weights[c] / (k + r) for c, r in ranks.items()
                                                    if r and weights.get(c, 0.0) != 0.0}))
    return out


def test_rrf_order_by_hand():
    # list a: 4 2 7; list b: 2 9 (weight 0.5); k 1
    ordered, places = rrf_order({"a": [4, 2, 7], "b": [2, 9]}, {"a": 1.0, "b": 0.5}, k=1)
    # 2: 1/(1+2) + 0.5/(1+1) = 0.333333 + 0.25 = 0.583333; 4: 1/2 = 0.5; 7: 1/4 = 0.25; 9: 0.5/3 = 0.166667
    assert [d for d, _ in ordered] == [2, 4, 7, 9]
    assert [s for _, s in ordered] == pytest.approx([0.5833333, 0.5, 0.25, 0.1666667])
    assert places == {"a": {4: 1, 2: 2, 7: 3}, "b": {2: 1, 9: 2}}
    # equal scores (k 0: 4 = 1/1, 9 = 1/1) and equal best rank: the smaller number first
    assert [d for d, _ in rrf_order({"a": [9, 4], "b": [4, 9]}, {"a": 1.0, "b": 1.0}, k=0)[0]] == [4, 9]
    # k 0: 1 = 1/2 + 1/2 = 1.0 (best rank 2); 6 and 3 = 1/1 (rank 1); 0 only in a zero-weight list
    ordered, places = rrf_order({"a": [6, 1], "b": [3, 1], "c": [0]}, {"a": 1.0, "b": 1.0, "c": 0.0}, k=0)
    assert [d for d, _ in ordered] == [3, 6, 1] and places["c"] == {0: 1}


def test_rrf_order_repeats_exclusion_limit_and_k():
    ordered, places = rrf_order({"a": [5, 5, 2]}, {"a": 1.0}, k=60)
    assert [d for d, _ in ordered] == [5, 2] and places["a"] == {5: 1, 2: 3}      # a repeat keeps its slot
    ordered, _ = rrf_order({"a": [5, 2, 7]}, {"a": 1.0}, k=0, exclude={5})
    assert ordered == [(2, 1.0), (7, 0.5)]                                          # 5 takes no slot
    assert [d for d, _ in rrf_order({"a": [1, 2, 3]}, {"a": 1.0}, limit=2)[0]] == [1, 2]
    assert rrf_order({"a": []}, {"a": 1.0}) == ([], {"a": {}})
    with pytest.raises(ValueError):
        rrf_order({"a": [1]}, {"a": 1.0}, k=-1)


def test_rrf_order_on_numbers_is_weighted_rrf_on_their_ids():
    """Ids, floats (exactly), ranks and terms as weighted_rrf gives them for the ids, ties and repeats included."""
    rng = np.random.default_rng(3)
    for trial in range(300):
        names = [f"n{i:03d}" for i in rng.permutation(40)[: rng.integers(1, 40)]]
        lists = {c: [names[i] for i in rng.integers(0, len(names), rng.integers(0, 30))]
                 for c in ("dense", "sparse", "ngram", "entity")[: rng.integers(1, 5)]}
        weights = {c: float(rng.choice([0.0, 0.1, 0.3, 0.4, 1.0])) for c in lists}
        k = float(rng.choice([0, 1, 2, 60]))
        exclude = frozenset(names[:2]) if trial % 3 == 0 else frozenset()
        limit = None if trial % 2 else int(rng.integers(1, 20))
        assert _exactly(_numbered_as_records(lists, weights, k, limit=limit, exclude=exclude)) == \
            _exactly(weighted_rrf(lists, weights, k, limit=limit, exclude=exclude))


def test_rrf_order_on_numbers_is_weighted_rrf_on_the_demo_questions_lists(demo_index):
    """Every demo tuning question's real channel lists, under the default weights and the fast path's "both"."""
    from search_core.config import SearchConfig
    from search_core.search.pipeline import Searcher
    from tests.helpers import ROOT
    from tuner.data.gold import load_gold
    s = Searcher(demo_index)
    cfg = SearchConfig(embedder=s.embedder_name)
    try:
        for q in load_gold(ROOT / "experiments/gold/demo-tune.yaml").questions:
            r = s.retrieve(q.query, cfg.depth)
            lists = {c: [h.note_id for h in hits] for c, hits in r.lists.items()}
            for weights, k in ((cfg.weights(), cfg.rrf_k), ({c: 1.0 for c in lists}, 60)):
                assert _exactly(_numbered_as_records(lists, weights, k)) == _exactly(weighted_rrf(lists, weights, k))
    finally:
        s.close()
