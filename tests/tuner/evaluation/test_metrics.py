import math

import pytest

from tuner.evaluation.metrics import first_rank, hit_at_k, ndcg_at_k, precision_at_k, recall_at_k, reciprocal_rank

RANKED = ["a", "b", "c", "d", "e", "f"]


def test_hit_and_rank():
    assert first_rank(RANKED, {"c", "f"}) == 3
    assert hit_at_k(RANKED, {"f"}, 5) == 0.0 and hit_at_k(RANKED, {"e"}, 5) == 1.0
    assert first_rank(RANKED, {"z"}) is None


def test_mrr_by_hand():
    assert reciprocal_rank(RANKED, {"c", "f"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(RANKED, {"f"}, k=5) == 0.0
    assert reciprocal_rank(RANKED, {"z"}) == 0.0


def test_precision_recall_by_hand():
    assert precision_at_k(RANKED, {"a", "c", "z"}, 5) == pytest.approx(2 / 5)
    assert recall_at_k(RANKED, {"a", "c", "z"}, 5) == pytest.approx(2 / 3)
    assert recall_at_k(RANKED, set(), 5) == 0.0


def test_ndcg_by_hand():
    # relevant at ranks 2 and 4 of two relevant: DCG = 1/log2(3) + 1/log2(5) = 0.630930 + 0.430677 = 1.061606
    # IDCG = 1/log2(2) + 1/log2(3) = 1 + 0.630930 = 1.630930  ->  0.650921
    assert ndcg_at_k(RANKED, {"b", "d"}, 10) == pytest.approx(0.650921, abs=1e-6)
    assert ndcg_at_k(RANKED, {"a"}, 10) == 1.0
    assert ndcg_at_k(RANKED, {"f"}, 5) == 0.0
    assert ndcg_at_k(RANKED, {"c"}, 10) == pytest.approx(1 / math.log2(4))


def test_metrics_agree_with_trec_eval_via_ir_measures():
    """Our pure functions against trec_eval's (pytrec_eval through ir-measures) on 300 random rankings."""
    import random
    import ir_measures
    from ir_measures import P, R, RR, Success, nDCG

    from tuner.evaluation.metrics import mean

    rng = random.Random(1)
    docs = [f"d{i}" for i in range(30)]
    qrels, run, ours = [], [], {"ndcg": [], "rr": [], "p": [], "r": [], "hit": []}
    for qi in range(300):
        q = f"q{qi}"
        rel = set(rng.sample(docs, rng.randint(1, 4)))
        ranked = rng.sample(docs, 12)
        qrels += [ir_measures.Qrel(q, d, 1) for d in rel]
        run += [ir_measures.ScoredDoc(q, d, float(100 - i)) for i, d in enumerate(ranked)]
        ours["ndcg"].append(ndcg_at_k(ranked, rel, 10))
        ours["rr"].append(reciprocal_rank(ranked, rel, 10))
        ours["p"].append(precision_at_k(ranked, rel, 5))
        ours["r"].append(recall_at_k(ranked, rel, 5))
        ours["hit"].append(hit_at_k(ranked, rel, 5))
    ref = ir_measures.calc_aggregate([nDCG @ 10, RR @ 10, P @ 5, R @ 5, Success @ 5], qrels, run)
    assert mean(ours["ndcg"]) == pytest.approx(ref[nDCG @ 10], abs=1e-9)
    assert mean(ours["rr"]) == pytest.approx(ref[RR @ 10], abs=1e-9)
    assert mean(ours["p"]) == pytest.approx(ref[P @ 5], abs=1e-9)
    assert mean(ours["r"]) == pytest.approx(ref[R @ 5], abs=1e-9)
    assert mean(ours["hit"]) == pytest.approx(ref[Success @ 5], abs=1e-9)
