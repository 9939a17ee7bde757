"""A gold question says where it came from (hand-written by default), and its evaluation row carries that
into the ledger, so the keep rule can read the kinds apart and a replay sees what the decision saw."""

import pytest

from tuner.data.gold import GoldError, load_gold
from tuner.evaluation.evaluate import LEDGER, EvalResult, QuestionResult


def write(tmp_path, extra):
    p = tmp_path / "g.yaml"
    p.write_text("name: g\nquestions:\n"
                 "  - {id: a, level: L1, query: 첫 질문, gold: [n1]}\n"
                 f"  - {{id: b, level: L0, query: 둘째 질문, gold: [n2]{extra}}}\n", encoding="utf-8")
    return p


def test_a_question_is_hand_written_unless_it_says_otherwise(tmp_path):
    g = load_gold(write(tmp_path, ", source: vault"))
    assert [q.source for q in g.questions] == ["hand", "vault"]
    assert load_gold(write(tmp_path, ", source: log")).questions[1].source == "log"


def test_an_unknown_source_is_refused_with_the_known_ones(tmp_path):
    with pytest.raises(GoldError, match=r"line 4: question b has unknown source 'wiki'; sources: hand, log, vault"):
        load_gold(write(tmp_path, ", source: wiki"))


def test_the_source_travels_through_the_ledger_and_older_rows_read_as_hand_written():
    row = {"id": "b", "level": "L1", "first_rank": 2, "hit@5": 1.0, "mrr": 0.5, "ndcg@10": 0.63,
           "inject": True, "top_score": 0.8, "source": "vault", "latency_ms": 3.0}
    q = QuestionResult.from_json(row)
    assert q.source == "vault" and q.to_json(LEDGER) == row
    old = {k: v for k, v in row.items() if k != "source"}
    assert QuestionResult.from_json(old).source == "hand"
    assert "source" not in QuestionResult.from_json(old).to_json(LEDGER)     # an old row writes back byte for byte
    res = EvalResult.from_ledger({"overall": {"n": 1}, "per_query": [row]})
    assert res.per_query[0].source == "vault"


def test_an_evaluation_row_says_where_its_question_came_from(demo_index):
    from search_core.config import SearchConfig
    from search_core.search.pipeline import Searcher
    from tuner.data.gold import GoldSet, Question
    from tuner.evaluation.evaluate import evaluate
    gold = GoldSet("g", "mem", (Question("a", "L0", "김치찌개 레시피", ("life/cooking/kimchi-jjigae",)),
                                Question("b", "L0", "김치찌개 레시피", ("life/cooking/kimchi-jjigae",), source="vault")))
    res = evaluate(Searcher(demo_index), gold, SearchConfig(), audit=False)
    assert [q.source for q in res.per_query] == ["hand", "vault"]
    assert [q.to_json(LEDGER).get("source") for q in res.per_query] == [None, "vault"]
