"""The /label page of `autoresearch serve`, in a real headless Chromium: it loads, shows a suggested call and
its block, a click and a key press write labels into the recall log, and a reload shows them labelled."""

import json
import urllib.error
import urllib.request

import pytest

from search_core.config import SearchConfig
from search_core.recall.engine import RecallConfig, RecallEngine, SearchBackend
from search_core.recall.log import RecallLog, read_calls
from tests.helpers.http import running
from tests.helpers.chromium import Chromium

TOKEN = "label-page-token"
QUERIES = ["김치찌개 레시피 알려줘", "GraphRAG 커뮤니티 요약은 어떻게 하나", "RRF 점수에서 k 값은 얼마", "Leiden 알고리즘 커뮤니티",
           "양자 컴퓨터 큐비트 오류 정정", "축구 월드컵 우승국이 어디야", "파리 에펠탑 높이는", "비트코인 반감기 주기"]


def _request(url, body=None, token=TOKEN):
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(), headers=headers,
                                 method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture
def served(small_index, tmp_path):
    log = RecallLog(tmp_path / "recall-log.sqlite")
    engine = RecallEngine(SearchBackend(small_index, SearchConfig()), log, RecallConfig(timeout_s=60.0))
    with running(engine, token=TOKEN) as url:
        for i, q in enumerate(QUERIES):                       # a little traffic: queue, then prefetch, per turn
            assert _request(url + "/queue", {"query": q, "session_id": f"s{i}"})[0] == 200
            assert engine.wait_idle(60)
            assert _request(url + "/prefetch", {"session_id": f"s{i}"})[0] == 200
        yield url, log.path


def _labels(log_path):
    return {r["id"]: r["label"] for r in read_calls(log_path)}


def test_the_page_in_chromium_labels_calls_into_the_log(served):
    url, log_path = served
    assert _request(url + "/label/calls", token=None)[0] == 401          # the data needs the server's token
    status, data = _request(url + "/label/calls?n=20")
    assert status == 200 and len(data["suggested"]) == len(QUERIES)
    with Chromium() as b:
        b.goto(f"{url}/label#token={TOKEN}")
        assert int(b.wait_for("document.body.dataset.loaded")) == len(QUERIES)
        first = int(b.evaluate("document.querySelector('#list div.cur').dataset.id"))
        shown = b.evaluate("document.getElementById('query').textContent")
        assert shown == next(s["query"] for s in data["suggested"] if s["id"] == first)
        assert b.wait_for("document.getElementById('block').textContent.startsWith('Related notes')")
        assert b.evaluate("document.getElementById('reason').textContent")       # why it was picked
        assert _labels(log_path)[first] is None
        b.click("#irr")                                                     # a real mouse click
        assert int(b.wait_for("document.body.dataset.lastLabelled")) == first
        assert _labels(log_path)[first] == "irrelevant"
        second = int(b.evaluate("document.querySelector('#list div.cur').dataset.id"))
        assert second != first
        b.press("r")                                                        # the keyboard
        b.wait_for(f"document.body.dataset.lastLabelled === '{second}'")
        assert _labels(log_path)[second] == "relevant"
        b.reload()
        b.wait_for("document.body.dataset.loaded")
        row = f"document.querySelector('#list div[data-id=\"{first}\"] .label').textContent"
        assert "irrelevant" in b.evaluate(row)
        assert "relevant" in b.evaluate(f"document.querySelector('#list div[data-id=\"{second}\"] .label').textContent")
        b.click(f'#list div[data-id="{first}"]')
        assert b.wait_for("(document.getElementById('current-label') || {}).textContent") == "irrelevant"
    labels = _labels(log_path)
    assert sorted(v for v in labels.values() if v) == ["irrelevant", "relevant"]


def test_bad_label_requests_are_refused_and_change_nothing(served):
    url, log_path = served
    before = _labels(log_path)
    assert _request(url + "/label/calls", {"id": 1, "label": "maybe"})[1]["error"]["code"] == "bad_label"
    assert _request(url + "/label/calls", {"id": "1", "label": "relevant"})[1]["error"]["code"] == "bad_id"
    status, body = _request(url + "/label/calls", {"id": 99999, "label": "relevant"})
    assert status == 404 and "99999" in body["error"]["message"]
    assert _request(url + "/label/calls?n=0")[0] == 400
    assert _request(url + "/label/calls?since=soon")[1]["error"]["code"] == "bad_parameter"
    assert _request(url + "/label/block?id=99999")[0] == 404
    assert _labels(log_path) == before
