"""The /label page of `autoresearch serve`, in a real headless Chromium: it loads, shows a suggested call and
its block, a click and a key press write labels into the recall log, and a reload shows them labelled. A page
on another origin cannot write labels, and a DNS name pointed at the server cannot read the log."""

import http.server
import json
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager

import pytest

from search_core.config import SearchConfig
from search_core.recall.config import RecallConfig
from search_core.recall.backend import SearchBackend
from search_core.recall.engine import RecallEngine
from search_core.recall.log import RecallLog, read_calls
from tests.helpers import free_port
from tests.helpers.chromium import Chromium
from tests.helpers.http import running

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


@contextmanager
def _serving(index, tmp_path, token):
    log = RecallLog(tmp_path / "recall-log.sqlite")
    engine = RecallEngine(SearchBackend(index, SearchConfig()), log, RecallConfig(timeout_s=60.0))
    with running(engine, token=token) as url:
        for i, q in enumerate(QUERIES):                       # a little traffic: queue, then prefetch, per turn
            assert _request(url + "/queue", {"query": q, "session_id": f"s{i}"}, token=token)[0] == 200
            assert engine.wait_idle(60)
            assert _request(url + "/prefetch", {"session_id": f"s{i}"}, token=token)[0] == 200
        yield url, log.path


@pytest.fixture
def served(small_index, tmp_path):
    with _serving(small_index, tmp_path, TOKEN) as out:
        yield out


@pytest.fixture
def served_without_token(small_index, tmp_path):
    """The default: `serve` with no --token, which any web page the user opens could reach."""
    with _serving(small_index, tmp_path, None) as out:
        yield out


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


# A page on another origin (another port of 127.0.0.1) that tries to label two calls of a server with no
# token: a text/plain form post shaped into JSON by repeating a key, and a no-cors fetch; then a cors fetch
# with application/json, which the browser holds back unless the server grants its preflight.
ATTACK = """<!doctype html><html><body>
<iframe name="sink" id="sink"></iframe>
<form id="form" method="POST" action="TARGET/label/calls" enctype="text/plain" target="sink">
<input type="hidden" name='{"id": FORM_ID, "label": "' value='", "label": "relevant"}'></form>
<script>
async function attack() {
  const sink = document.getElementById("sink");
  const posted = new Promise(done => sink.addEventListener("load", done, {once: true}));
  document.getElementById("form").submit();
  await posted;
  await fetch("TARGET/label/calls", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
                                     body: JSON.stringify({id: FETCH_ID, label: "irrelevant"})});
  try {
    await fetch("TARGET/label/calls", {method: "POST", headers: {"Content-Type": "application/json"},
                                       body: JSON.stringify({id: FETCH_ID, label: "relevant"})});
    return "sent";
  } catch (e) { return "blocked"; }
}
</script></body></html>"""


@contextmanager
def _page_server(html: str):
    """A second server on 127.0.0.1 (another port: another origin) that serves one page."""
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Page)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/"
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(30)


def test_a_page_on_another_origin_cannot_label_calls(served_without_token):
    url, log_path = served_without_token
    form_id, fetch_id = sorted(_labels(log_path))[:2]
    page = ATTACK.replace("TARGET", url).replace("FORM_ID", str(form_id)).replace("FETCH_ID", str(fetch_id))
    with _page_server(page) as attacker, Chromium() as b:
        b.goto(attacker)
        assert b.evaluate("attack()") == "blocked"
    assert set(_labels(log_path).values()) == {None}
    # the server's own page, served without a token, still labels
    with Chromium() as b:
        b.goto(f"{url}/label")
        assert int(b.wait_for("document.body.dataset.loaded")) == len(QUERIES)
        first = int(b.evaluate("document.querySelector('#list div.cur').dataset.id"))
        b.press("r")
        assert int(b.wait_for("document.body.dataset.lastLabelled")) == first
    assert _labels(log_path)[first] == "relevant"


def test_a_dns_name_pointed_at_the_server_cannot_read_the_log(served_without_token):
    # DNS rebinding: the attacker's name answers with 127.0.0.1, so its page is same-origin with the server
    url, _ = served_without_token
    port = url.rsplit(":", 1)[1]
    with Chromium(flags=("--host-resolver-rules=MAP rebind.example 127.0.0.1",)) as b:
        b.goto(f"http://rebind.example:{port}/label")
        got = b.evaluate("fetch('/label/calls?since=all').then(async r => [r.status, await r.text()])")
    assert got[0] == 421 and "--allow-host rebind.example" in got[1], got
    assert not any(q in got[1] for q in QUERIES)


def test_the_browser_driver_starts_in_a_process_with_no_other_file_open():
    # a fresh process gets fds 3 and 4 for its first pipe: bash's `3<&3 ... 3<&-` closed the pipe it had just placed
    # on 3, and Chromium exited ("Remote debugging pipe file descriptors are not open"); the hostile rerun hit this
    import os
    import subprocess
    import sys
    from tests.helpers import ROOT
    code = ("from tests.helpers.chromium import Chromium\n"
            "with Chromium() as b:\n    b.goto('about:blank')\n    print(b.evaluate('6 * 7'))\n")
    got = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, close_fds=True)
    assert got.returncode == 0 and got.stdout.strip() == "42", got.stderr[-500:]
