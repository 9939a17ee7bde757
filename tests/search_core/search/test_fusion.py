import numpy as np
import pytest

from search_core.search.fusion import Fused, community_boost, rrf_arrays, weighted_rrf


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


# -- rrf_arrays: the arithmetic weighted_rrf and the fast path's keyword lists share ----------------------------


def _arrays_as_records(lists, weights, k=60, *, limit=None, exclude=frozenset()):
    """rrf_arrays over the ids numbered in sorted order, its answer as weighted_rrf's records: what the two
    implementations must agree on, ids, floats (exactly), ranks and terms."""
    names = sorted({d for ids in lists.values() for d in ids})
    number = {d: i for i, d in enumerate(names)}
    mask = np.array([d in exclude for d in names], bool)
    got = rrf_arrays([np.array([number[d] for d in ids], np.int64) for ids in lists.values()],
                     [weights.get(c, 0.0) for c in lists], k, limit=limit, exclude=mask)
    out = []
    for doc, score, col in zip(got.docs.tolist(), got.scores.tolist(), got.ranks.T.tolist()):
        ranks = {c: r or None for c, r in zip(lists, col)}
        out.append(Fused(names[doc], score, ranks, {c: weights[c] / (k + r) for c, r in ranks.items()
                                                    if r and weights.get(c, 0.0) != 0.0}))
    return out


def test_rrf_arrays_by_hand():
    # list 0: 4 2 7; list 1: 2 9 (weight 0.5); k 1
    got = rrf_arrays([np.array([4, 2, 7]), np.array([2, 9])], [1.0, 0.5], k=1)
    # 2: 1/(1+2) + 0.5/(1+1) = 0.333333 + 0.25 = 0.583333; 4: 1/2 = 0.5; 7: 1/4 = 0.25; 9: 0.5/3 = 0.166667
    assert got.docs.tolist() == [2, 4, 7, 9]
    assert got.scores.tolist() == pytest.approx([0.5833333, 0.5, 0.25, 0.1666667])
    assert got.ranks.tolist() == [[2, 1, 3, 0], [1, 0, 0, 2]]
    # equal scores (k 0: 4 = 1/1 = 1, 9 = 1/1 = 1) and equal best rank: the smaller number first
    assert rrf_arrays([np.array([9, 4]), np.array([4, 9])], [1.0, 1.0], k=0).docs.tolist() == [4, 9]
    # k 2: 3 = 1/(2+2) + 1/(2+2) = 0.5; 5 = 1/(2+1) = 0.333333 and 8 = 1/3 tie, both at rank 1: 5 first
    got = rrf_arrays([np.array([5, 3]), np.array([8, 3])], [1.0, 1.0], k=2)
    assert got.docs.tolist() == [3, 5, 8]
    assert got.scores.tolist() == pytest.approx([0.5, 0.3333333, 0.3333333])


def test_rrf_arrays_ties_break_by_best_rank_then_number():
    # k 0: 1 = 1/2 + 1/2 = 1.0 (best rank 2); 6 = 1/1 (best rank 1): equal scores, 6's rank is better
    got = rrf_arrays([np.array([6, 1]), np.array([3, 1]), np.array([0])], [1.0, 1.0, 0.0], k=0)
    assert got.docs.tolist() == [3, 6, 1]          # 3 and 6 tie at 1.0 with rank 1: the smaller number first
    assert 0 not in got.docs.tolist()              # only a zero-weight list holds it
    assert got.ranks[2].tolist() == [0, 0, 0]


def test_rrf_arrays_repeats_exclusion_limit_and_k():
    got = rrf_arrays([np.array([5, 5, 2])], [1.0], k=60)
    assert got.docs.tolist() == [5, 2] and got.ranks.tolist() == [[1, 3]]   # a repeat keeps its slot
    exclude = np.zeros(10, bool)
    exclude[5] = True
    got = rrf_arrays([np.array([5, 2, 7])], [1.0], k=0, exclude=exclude)
    assert got.docs.tolist() == [2, 7] and got.scores.tolist() == [1.0, 0.5]    # 5 takes no slot
    assert rrf_arrays([np.array([1, 2, 3])], [1.0], limit=2).docs.tolist() == [1, 2]
    assert rrf_arrays([np.array([], np.int64)], [1.0]).docs.tolist() == []
    with pytest.raises(ValueError):
        rrf_arrays([np.array([1])], [1.0], k=-1)


def test_rrf_arrays_is_weighted_rrf_on_random_lists():
    """Ids, floats (exactly), ranks and terms as weighted_rrf's dict loop gives them, ties and repeats included."""
    rng = np.random.default_rng(3)
    for trial in range(300):
        names = [f"n{i:03d}" for i in rng.permutation(40)[: rng.integers(1, 40)]]
        lists = {c: [names[i] for i in rng.integers(0, len(names), rng.integers(0, 30))]
                 for c in ("dense", "sparse", "ngram", "entity")[: rng.integers(1, 5)]}
        weights = {c: float(rng.choice([0.0, 0.1, 0.3, 0.4, 1.0])) for c in lists}
        k = float(rng.choice([0, 1, 2, 60]))
        exclude = frozenset(names[:2]) if trial % 3 == 0 else frozenset()
        limit = None if trial % 2 else int(rng.integers(1, 20))
        assert _arrays_as_records(lists, weights, k, limit=limit, exclude=exclude) == \
            weighted_rrf(lists, weights, k, limit=limit, exclude=exclude)


def test_rrf_arrays_is_weighted_rrf_on_the_demo_questions_lists(demo_index):
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
                assert _arrays_as_records(lists, weights, k) == weighted_rrf(lists, weights, k)
    finally:
        s.close()
