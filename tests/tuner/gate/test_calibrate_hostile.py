"""`calibrate` and `calibrate apply` under hostile use: a label on a call that never searched, labels of one kind
only, a later run that declines, a proposal holding NaN, a label for a call of another index."""

import dataclasses
import json
import math
import sqlite3
import time

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from search_core.gate.model import sidecar_path
from search_core.recall.log import LoggedCall, RecallLog, index_id, log_search, read_logged_calls
from search_core.search.pipeline import Searcher
from tuner.cli import main
from tuner.gate.calibrate import calibrate, calibrate_index
from tuner.gate.proposal import apply_proposal, write_proposal

FP = {"embedder": {"name": "e5-small", "dim": 384}}
ANSWERABLE = ["김치찌개 레시피", "GraphRAG 커뮤니티 요약", "RRF 점수 k 값", "그래프 RAG 엔티티 추출", "돼지 앞다리살 두부",
              "Leiden 알고리즘 커뮤니티"]
PROBES = ["양자 컴퓨터 큐비트 오류 정정", "LightRAG 설치", "축구 월드컵 우승국", "파리 에펠탑 높이", "주식 배당금 세금",
          "비트코인 반감기"]


def _call(i, cos, label=None, error=None):
    feats = {} if error else {"top_cos": cos, "hit_cos": cos}
    return LoggedCall(i, 1000.0 + i, "s", "default", f"q{i}", "h", (), feats, {}, 0.82, "idx-A", False,
                      "error" if error else "threshold", 20.0, error, label, None)


def test_a_label_on_a_call_that_timed_out_is_skipped_and_counted():
    # It made calibrate die: the call has no cosine, None became NaN, and AUROC raised "Input contains NaN".
    calls = [_call(i, 0.70 + 0.01 * i, "relevant" if i % 2 else "irrelevant") for i in range(1, 7)]
    calls.append(_call(7, 0.0, "relevant", error="timeout: the search took longer than 2.0 s"))
    cal = calibrate(calls, [], model=None, cos_threshold=0.82, fingerprint=FP, fingerprint_key="idx-A")
    assert cal.skipped_labels.to_json() == {"no_search": 1, "ids": [7]}
    assert any("1 labelled call(s) have no search" in w for w in cal.warnings)
    assert cal.labelled.answerable == 3 and cal.labelled.probes == 3
    assert math.isfinite(cal.recommendation.cosine.threshold)
    assert cal.window.calls == 7                  # the call stays in the traffic


@pytest.mark.parametrize("kind", ["relevant", "irrelevant"])
def test_labels_of_one_kind_write_no_proposal_and_say_what_is_missing(tmp_path, kind):
    # Probes alone used to propose a cosine threshold from np.quantile over None -> NaN: the proposal held
    # "cosine_threshold": NaN (not JSON) and `calibrate apply` advised `threshold = nan`.
    calls = [_call(i, 0.7 + 0.01 * i, kind) for i in range(1, 6)]
    calls.append(_call(6, 0.0, kind, error="timeout: 2 s"))
    cal = calibrate(calls, [], model=None, cos_threshold=0.82, fingerprint=FP, fingerprint_key="idx-A")
    other = "irrelevant" if kind == "relevant" else "relevant"
    rec = cal.recommendation
    assert rec.basis is None and rec.missing.label == other and rec.missing.need == 4
    assert any(f"hold no {other!r} rows" in w and f"Label at least 4" in w for w in cal.warnings)
    proposal = tmp_path / "proposal.json"
    write_proposal(cal, tmp_path / "index.sqlite", proposal)
    text = proposal.read_text()
    assert "NaN" not in text and json.loads(text)["declined"].startswith(f"no {other!r} labels")
    with pytest.raises(SearchCoreError, match="nothing to apply") as e:
        apply_proposal(proposal, tmp_path / "index.sqlite")
    assert "nan" not in str(e.value).lower()


def test_a_proposal_is_never_written_with_nan_and_apply_never_advises_nan(tmp_path):
    cal = calibrate([_call(i, 0.7 + 0.01 * i, "relevant" if i % 2 else "irrelevant") for i in range(1, 5)], [],
                    model=None, cos_threshold=0.82, fingerprint=FP)
    rec = cal.recommendation
    cal = dataclasses.replace(cal, recommendation=dataclasses.replace(
        rec, cosine=dataclasses.replace(rec.cosine, threshold=float("nan"))))
    proposal = tmp_path / "proposal.json"
    with pytest.raises(SearchCoreError, match="not a number"):
        write_proposal(cal, tmp_path / "index.sqlite", proposal)
    assert not proposal.exists()
    # a proposal written by an older version, NaN and all: refused, and no advice with nan in it
    proposal.write_text('{"model": null, "cosine_threshold": NaN, "basis": "probes only"}')
    r = CliRunner().invoke(main, ["calibrate", "apply", "--db", str(tmp_path / "index.sqlite"),
                                  "--proposal", str(proposal)])
    assert r.exit_code == 1 and "not valid JSON" in r.output and "threshold =" not in r.output, r.output
    proposal.write_text('{"model": null, "cosine_threshold": 7.5, "basis": "labels"}')
    with pytest.raises(SearchCoreError, match="7.5 is not a cosine") as e:
        apply_proposal(proposal, tmp_path / "index.sqlite")
    assert "threshold = 7.5" not in str(e.value)


@pytest.fixture
def logged(tmp_path, shared_cache):
    """Real searches of the small vault logged with labels (6 answerable, 6 probes), against its index."""
    from search_core.index.indexer import index_vault
    from tests.helpers import SMALL_VAULT, write_vault
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(write_vault(tmp_path / "vault", SMALL_VAULT), db, cache=shared_cache)
    s = Searcher(db)
    key = index_id(s.fingerprint)
    now = time.time()
    rows = [{"ts": now - 3600 + i, "session": "a", "query": q, "res": s.search(q), "index_fingerprint": key,
             "label": "relevant" if q in ANSWERABLE else "irrelevant"} for i, q in enumerate(ANSWERABLE + PROBES)]
    s.close()
    log = tmp_path / "recall-log.sqlite"
    log_search(log, rows)
    return db, log, key


def test_a_run_that_declines_replaces_the_older_proposal_so_apply_has_nothing_to_apply(logged, tmp_path):
    db, log, _ = logged
    data, _, _, _ = calibrate_index(db, log_path=log, since_s=None, threshold_rule="always")
    proposal = tmp_path / "proposal.json"
    write_proposal(data, db, proposal)                  # last week's proposal, never applied
    assert json.loads(proposal.read_text())["model"]
    r = CliRunner().invoke(main, ["calibrate", "--db", str(db), "--log", str(log), "--since", "all",
                                  "--format", "json", "--out", str(tmp_path / "cal.json"), "--proposal", str(proposal)])
    assert r.exit_code == 0, r.output                  # this week's labels do not show a move decides better
    assert "no proposal:" in r.output and "do not show" in r.output
    r = CliRunner().invoke(main, ["calibrate", "apply", "--db", str(db), "--proposal", str(proposal)])
    assert r.exit_code == 1 and "nothing to apply" in r.output and "do not show" in r.output, r.output
    assert not sidecar_path(db).exists()


def test_labels_for_calls_of_another_index_are_left_out_with_a_message(logged, tmp_path):
    db, log, key = logged
    conn = sqlite3.connect(log)                         # the same calls, logged against another index
    with conn:
        conn.execute("INSERT INTO recall_calls (ts, session, profile, query, query_hash, query_chars, top_scores, "
                     "features, threshold, index_fingerprint, injected, stopped_by, latency_ms, label) "
                     "SELECT ts, session, profile, query, query_hash, query_chars, top_scores, features, threshold, "
                     "'other-index-0000', injected, stopped_by, latency_ms, "
                     "CASE label WHEN 'relevant' THEN 'irrelevant' ELSE 'relevant' END FROM recall_calls")
    conn.close()
    cal, calls, _, _ = calibrate_index(db, log_path=log, since_s=None)
    assert cal.labelled.answerable == 6 and cal.labelled.probes == 6    # only this index's labels
    assert cal.kept_apart.to_json() == {"calls": 12, "labelled": 12, "fingerprints": ["other-index-0000"]}
    assert any("another index" in w and "left out" in w for w in cal.warnings)
    # a label file naming them: applied in memory, then left out the same way
    other_ids = [c.id for c in read_logged_calls(log) if c.index_fingerprint != key]
    f = tmp_path / "labels.txt"
    f.write_text("".join(f"{i} relevant\n" for i in other_ids))
    r = CliRunner().invoke(main, ["calibrate", "--db", str(db), "--log", str(log), "--since", "all", "--labels",
                                  str(f), "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output[r.output.index("{"):])["data"]
    assert data["labelled"]["answerable"] == 6 and data["kept_apart"]["labelled"] == 12


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


def test_the_sign_test_holds_over_a_week_of_100000_calls():
    # calibrate over a 100,000-call week died in the sign test: math.comb(n, i) * p ** i overflowed a float
    from fractions import Fraction

    from search_core.gate.threshold import binomial_tail
    n = 2000
    for k in (1000, 1050, 1200):                     # p = 1/2: the exact tail is a ratio of integers
        exact = float(Fraction(sum(math.comb(n, i) for i in range(k, n + 1)), 2 ** n))
        assert binomial_tail(k, n, 0.5) == pytest.approx(exact, rel=1e-9)
    assert binomial_tail(3, 4, 0.5) == 5 / 16                               # a few labels: summed as before
    p = binomial_tail(30_500, 100_000, 0.3)
    assert 0.0 < p < 0.001 and binomial_tail(29_000, 100_000, 0.3) > 0.99
