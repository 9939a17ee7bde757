import math

import pytest

from tuner.metrics import first_rank, hit_at_k, ndcg_at_k, precision_at_k, recall_at_k, reciprocal_rank

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
