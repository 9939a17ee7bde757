"""The /label POST of `autoresearch serve` refuses a call that never searched (timed out, failed, stopped before
the search), with the library's message: the server labels through label_calls like `recall-log label`."""

import json
import urllib.error
import urllib.request

from search_core.config import SearchConfig
from search_core.recall.config import RecallConfig
from search_core.recall.backend import SearchBackend
from search_core.recall.engine import RecallEngine
from search_core.recall.log import RecallLog, read_calls
from tests.helpers.http import running

TOKEN = "label-unsearched-token"


def _post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_label_post_refuses_a_call_that_timed_out(small_index, tmp_path):
    log = RecallLog(tmp_path / "recall-log.sqlite")
    # what the engine writes for a search that ran out of time: no features, an error
    timed_out = log.write({"session": "s", "query": "느린 질문 하나", "injected": False, "stopped_by": "error",
                           "error": "timeout: the search took longer than 2.0 s"})
    engine = RecallEngine(SearchBackend(small_index, SearchConfig()), log, RecallConfig(timeout_s=60.0))
    with running(engine, token=TOKEN) as url:
        status, body = _post(url + "/label/calls", {"id": timed_out, "label": "relevant"})
        assert status == 400 and "no search to label" in body["error"]["message"], body
        assert f"call {timed_out}: it failed (timeout" in body["error"]["message"]
        status, body = _post(url + "/search", {"query": "김치찌개 레시피"})
        assert status == 200                                 # the server keeps serving
    assert [r["label"] for r in read_calls(log.path)] == [None]
