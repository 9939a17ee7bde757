"""The recall log: fields, privacy, retention, stats (exact JSON keys), the retirement rule, labels."""

import json
import time

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.recall.log import (RecallLog, label_calls, parse_label_file, query_hash, read_calls,
                                    recall_stats)
from tuner.cli import main

NOW = 1_800_000_000.0


def _week(log, latencies, injected_every=2, ts=NOW - 3600):
    """One call per latency: every `injected_every`-th injected with 700 chars, the rest stopped by threshold."""
    for i, ms in enumerate(latencies):
        inj = i % injected_every == 0
        log.write({"ts": ts, "session": f"s{i % 3}", "query": f"question {i}", "injected": inj,
                   "stopped_by": None if inj else "threshold", "chars_injected": 700 if inj else 0,
                   "latency_ms": ms, "top_scores": [{"note_id": "a", "score": 0.1, "cosine": 0.8}],
                   "features": {"top_score": 0.8, "threshold": 0.82}, "threshold": 0.82})


def test_stats_keys_numbers_and_verdicts(tmp_path):
    log = RecallLog(tmp_path / "log.sqlite", retention_days=None)
    _week(log, [float(ms) for ms in range(1, 101)])                   # 1..100 ms, half injected
    log.write({"ts": NOW - 60, "session": "x", "query": "ok", "injected": False, "stopped_by": "too_short"})
    log.write({"ts": NOW - 30 * 86400, "session": "old", "query": "q", "injected": False, "stopped_by": "small_talk"})
    s = recall_stats(log.path, since_s=7 * 86400, now=NOW)
    assert set(s) >= {"calls", "injected", "injection_rate", "latency_ms", "stopped_by", "mean_chars_injected", "retire"}
    assert s["calls"] == 101 and s["injected"] == 50 and s["injection_rate"] == round(50 / 101, 4)
    assert s["latency_ms"] == {"p50": 50.5, "p95": 95.05}            # the gate-stopped call has no latency
    assert s["stopped_by"] == {"threshold": 50, "too_short": 1}      # the 30-day-old call is outside --since
    assert s["mean_chars_injected"] == 700.0
    assert s["retire"] == {"verdict": "keep", "reasons": []}
    assert recall_stats(log.path, now=NOW)["calls"] == 102

    slow = RecallLog(tmp_path / "slow.sqlite", retention_days=None)
    _week(slow, [500.0] * 10, injected_every=10)                       # p95 500 ms, 10 % injected
    r = recall_stats(slow.path, now=NOW)["retire"]
    assert r["verdict"] == "retire" and len(r["reasons"]) == 2 and "p95 500 ms" in r["reasons"][0]
    empty = RecallLog(tmp_path / "empty.sqlite")
    assert recall_stats(empty.path)["retire"]["verdict"] == "no_data"


def test_privacy_hash_and_retention(tmp_path):
    log = RecallLog(tmp_path / "log.sqlite", privacy="hash", retention_days=7)
    log.write({"session": "s", "query": "내 비밀 메모", "injected": False, "stopped_by": "threshold"})
    log.write({"ts": time.time() - 8 * 86400, "session": "s", "query": "old", "injected": False})
    assert log.prune() == 1
    [row] = read_calls(log.path)
    assert row["query"] is None and row["query_hash"] == query_hash("내 비밀 메모") and row["query_chars"] == 7
    with pytest.raises(SearchCoreError, match="valid: text, hash"):
        RecallLog(tmp_path / "x.sqlite", privacy="none")
    with pytest.raises(SearchCoreError, match="unknown recall-log field"):
        log.write({"session": "s", "query": "q", "injected": False, "colour": "red"})


def test_labels_single_bulk_and_all_or_nothing(tmp_path):
    log = RecallLog(tmp_path / "log.sqlite")
    _week(log, [10.0] * 4, ts=time.time())
    assert label_calls(log.path, [(1, "relevant")])["totals"] == {"relevant": 1, "irrelevant": 0}
    f = tmp_path / "labels.txt"
    f.write_text("# id label\n2 irrelevant\n3,relevant\n{\"id\": 4, \"label\": \"irrelevant\"}\n", encoding="utf-8")
    assert parse_label_file(f) == [(2, "irrelevant"), (3, "relevant"), (4, "irrelevant")]
    assert label_calls(log.path, parse_label_file(f))["totals"] == {"relevant": 2, "irrelevant": 2}
    with pytest.raises(SearchCoreError, match="no recall call with id 99"):
        label_calls(log.path, [(1, "irrelevant"), (99, "relevant")])
    with pytest.raises(SearchCoreError, match="valid labels: relevant, irrelevant"):
        label_calls(log.path, [(1, "maybe")])
    assert [r["label"] for r in read_calls(log.path)] == ["relevant", "irrelevant", "relevant", "irrelevant"]
    f.write_text("1 relevant\nfive relevant\n", encoding="utf-8")
    with pytest.raises(SearchCoreError, match="line 2"):
        parse_label_file(f)


def test_cli_stats_label_list(tmp_path):
    path = tmp_path / "log.sqlite"
    log = RecallLog(path)
    _week(log, [20.0, 40.0, 60.0], ts=time.time())
    r = CliRunner().invoke(main, ["recall-log", "stats", "--log", str(path), "--since", "7d", "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.output)
    assert s["calls"] == 3 and s["latency_ms"] == {"p50": 40.0, "p95": 58.0} and s["stopped_by"] == {"threshold": 1}
    r = CliRunner().invoke(main, ["recall-log", "stats", "--log", str(path)])
    assert "3 calls, 2 injected (67%)" in r.output and "keep" in r.output
    r = CliRunner().invoke(main, ["recall-log", "label", "2", "relevant", "--log", str(path)])
    assert r.exit_code == 0 and "relevant 1" in r.output
    r = CliRunner().invoke(main, ["recall-log", "label", "2", "great", "--log", str(path)])
    assert r.exit_code != 0 and "valid labels" in r.output
    r = CliRunner().invoke(main, ["recall-log", "list", "--log", str(path)])
    assert r.exit_code == 0 and "question 2" in r.output
    busy = RecallLog(tmp_path / "busy.sqlite")
    busy.write({"ts": time.time(), "session": "busy", "query": "느린 검색", "injected": False, "stopped_by": "error",
                "error": "timeout: the search took longer than 2.0 s"})
    busy.close()
    r = CliRunner().invoke(main, ["recall-log", "list", "--log", str(tmp_path / "busy.sqlite")])
    [line] = [x for x in r.output.splitlines() if "느린 검색" in x]
    assert "stopped by error" in line and "[timeout: the search took longer than 2.0 s]" in line, line
    r = CliRunner().invoke(main, ["recall-log", "stats", "--log", str(tmp_path / "none.sqlite")])
    assert r.exit_code != 0 and "no recall log at" in r.output
    RecallLog(path, retention_days=None).write({"ts": time.time() - 40 * 86400, "session": "old", "query": "q",
                                                 "injected": False})
    r = CliRunner().invoke(main, ["recall-log", "prune", "--log", str(path), "--older-than", "30d"])
    assert r.exit_code == 0 and "pruned 1 call(s)" in r.output and len(read_calls(path)) == 3
    r = CliRunner().invoke(main, ["recall-log", "stats", "--log", str(path), "--since", "soon"])
    assert r.exit_code != 0 and "not a duration like" in r.output


def test_features_read_back_and_gathered_as_a_matrix(tmp_path):
    # read_logged_calls shares feature names between rows (Features); feature_matrix gathers a model's inputs
    # a block per layout: the same numbers as reading each row's dict
    import numpy as np

    from search_core.recall.log import feature_matrix, read_logged_calls
    log = RecallLog(tmp_path / "log.sqlite")
    log.write({"session": "s", "query": "a", "injected": True,
               "features": {"top_cos": 0.9, "hit_cos": 0.8, "kind": "model", "probability": None}})
    log.write({"session": "s", "query": "b", "injected": False, "features": {"hit_cos": 0.5, "n": 3, "flag": True}})
    log.write({"session": "s", "query": "c", "injected": False, "features": {"top_cos": 0.7, "hit_cos": 0.6,
                                                                             "kind": "model", "probability": None}})
    log.write({"session": "s", "query": "d", "injected": False, "features": {"top_cos": float("nan"), "hit_cos": 0.4}})
    log.close()
    calls = read_logged_calls(log.path)
    assert dict(calls[0].features) == {"top_cos": 0.9, "hit_cos": 0.8} and calls[0].gate["kind"] == "model"
    assert dict(calls[1].features) == {"hit_cos": 0.5, "n": 3.0} and calls[1].gate == {"flag": True}
    assert dict(calls[3].features) == {"hit_cos": 0.4}                      # NaN is no evidence
    names = ["top_cos", "n", "missing", "hit_cos"]
    rows = [c.features for c in calls] + [{"top_cos": 0.1, "hit_cos": 0.2}]
    want = np.array([[r.get(n, 0.0) for n in names] for r in rows])
    assert np.array_equal(feature_matrix(rows, names), want)


def test_recall_log_label_refuses_a_call_that_never_searched(tmp_path):
    log = RecallLog(tmp_path / "log.sqlite")
    searched = log.write({"session": "s", "query": "김치찌개 레시피", "injected": True,
                          "features": {"top_cos": 0.9, "probability": 0.8, "kind": "model"}})
    timed_out = log.write({"session": "s", "query": "느린 질문", "injected": False, "stopped_by": "error",
                           "error": "timeout: the search took longer than 2.0 s"})
    short = log.write({"session": "s", "query": "ㅇㅋ", "injected": False, "stopped_by": "too_short"})
    log.close()
    from search_core.recall.log import label_calls, read_calls
    for bad, why in ((timed_out, "it failed (timeout"), (short, "it was stopped by too_short before any search")):
        with pytest.raises(SearchCoreError, match="no search to label") as e:
            label_calls(log.path, [(searched, "relevant"), (bad, "irrelevant")])
        assert f"call {bad}: {why}" in str(e.value)
    assert [r["label"] for r in read_calls(log.path)] == [None, None, None]          # all or nothing
    r = CliRunner().invoke(main, ["recall-log", "label", str(timed_out), "relevant", "--log", str(log.path)])
    assert r.exit_code == 1 and "no search to label" in r.output and "Traceback" not in r.output, r.output
    assert label_calls(log.path, [(searched, "relevant")])["totals"] == {"relevant": 1, "irrelevant": 0}
