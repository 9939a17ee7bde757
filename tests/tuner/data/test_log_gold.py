"""`gold from-log`: labelled recall calls become gold questions (relevant) and probes (irrelevant), near-duplicates
of an existing set or of each other left out, each with its origin."""

import time

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.recall.log import RecallLog, label_calls
from tests.helpers.gold import write
from tuner.data.gold import load_gold
from tuner.data.log_gold import gold_from_log, write_gold_from_log

NOW = time.time()
EXISTING = """name: hand
questions:
  - id: Q1
    level: L0
    query: "김치찌개 레시피"
    gold: ["life/kimchi"]
"""


def _log(tmp_path, calls, privacy="text"):
    """calls: (query, top note or None, injected, hours ago)."""
    log = RecallLog(tmp_path / "log.sqlite", privacy=privacy, retention_days=None)
    ids = [log.write({"ts": NOW - hours * 3600, "session": "s", "query": q, "injected": inj,
                      "top_scores": [{"note_id": top, "score": 0.03, "cosine": 0.8}] if top else [],
                      "features": {"probability": 0.7, "top_cos": 0.8}})
           for q, top, inj, hours in calls]
    log.close()
    return tmp_path / "log.sqlite", ids


CALLS = [("GraphRAG 커뮤니티 요약은 어떻게 만들어?", "ai/graphrag", True, 2),     # relevant: a question
         ("부대찌개 끓이는 법", "life/kimchi", True, 3),                           # irrelevant: a probe
         ("김치찌개 레시피 알려줘", "life/kimchi", True, 4),                        # relevant, but the existing set asks it
         ("GraphRAG 커뮤니티 요약은 어떻게 만들어", "ai/graphrag", True, 5),       # relevant, a repeat of the first
         ("RRF 가중치 k 값", "ai/rrf", False, 6),                                  # unlabelled: nothing
         ("RRF k 값은 보통 얼마?", "ai/rrf", False, 24 * 10)]                      # relevant, outside a 7-day window


def test_labelled_calls_become_questions_and_probes(tmp_path):
    log, ids = _log(tmp_path, CALLS)
    label_calls(log, [(ids[0], "relevant"), (ids[1], "irrelevant"), (ids[2], "relevant"), (ids[3], "relevant"),
                      (ids[5], "relevant")], now=NOW)
    lg = gold_from_log(log, since_s=7 * 86400, existing=[write(tmp_path, EXISTING)], now=NOW)
    got = [(q.id, q.level, q.query, q.gold) for q in lg.questions]
    assert got == [(f"log-{ids[0]}", "L1", "GraphRAG 커뮤니티 요약은 어떻게 만들어?", ("ai/graphrag",)),
                   (f"log-{ids[1]}", "probe", "부대찌개 끓이는 법", ())]
    assert lg.left_out == {"asks what an existing gold set asks": 1, "asks what an earlier labelled call asks": 1}
    when = time.strftime("%Y-%m-%d", time.gmtime(NOW))
    assert lg.questions[0].why.startswith(f"recall-log call {ids[0]}, labelled {when}") and "relevant" in lg.questions[0].why
    everything = gold_from_log(log, now=NOW)           # no window, no existing set: the old call and the twin count
    assert {q.query for q in everything.questions} >= {"RRF k 값은 보통 얼마?", "김치찌개 레시피 알려줘"}


def test_the_file_loads_as_gold(tmp_path):
    log, ids = _log(tmp_path, CALLS)
    label_calls(log, [(ids[0], "relevant"), (ids[1], "irrelevant")], now=NOW)
    out = tmp_path / "from-log.yaml"
    write_gold_from_log(log, out, now=NOW)
    g = load_gold(out)
    assert [q.level for q in g.questions] == ["L1", "probe"] and g.questions[0].gold == ("ai/graphrag",)
    assert {q.source for q in g.questions} == {"log"}
    r = CliRunner().invoke(__import__("tuner.cli", fromlist=["main"]).main,
                           ["gold", "from-log", "--log", str(log), "--out", str(tmp_path / "cli.yaml")])
    assert r.exit_code == 0, r.output
    assert "wrote 1 questions and 1 probes from 2 labelled calls" in r.output


def test_no_label_says_how_to_label(tmp_path):
    log, _ = _log(tmp_path, CALLS)
    with pytest.raises(SearchCoreError, match="recall-log label"):
        gold_from_log(log, now=NOW)


def test_a_hashed_query_is_left_out(tmp_path):
    log, ids = _log(tmp_path, CALLS[:2], privacy="hash")
    label_calls(log, [(ids[0], "relevant"), (ids[1], "irrelevant")], now=NOW)
    with pytest.raises(SearchCoreError, match=r"privacy = hash\) 2"):
        gold_from_log(log, now=NOW)
