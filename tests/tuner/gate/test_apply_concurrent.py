"""`calibrate apply` while `serve` searches, and `kill -9` in the middle of `apply`: the gate file a search reads is
whole, the old one or the new one, never a mix and never an error."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from search_core.config import SearchConfig
from search_core.gate.model import DEFAULT_GATE_FILE, DEFAULT_GATE_SOURCE, load_gate, sidecar_path
from search_core.recall.config import RecallConfig
from search_core.recall.backend import SearchBackend
from search_core.recall.engine import RecallEngine
from search_core.search.pipeline import Searcher
from tests.helpers import ROOT, SMALL_VAULT, write_vault
from tests.helpers.http import post, running
from tuner.gate.proposal import apply_proposal, history_path, undo_apply

QUESTION = "GraphRAG에서 커뮤니티 요약은 어떻게 만드나요?"


@pytest.fixture
def index_and_proposal(tmp_path, shared_cache):
    from search_core.index.indexer import index_vault
    db = tmp_path / "index.sqlite"
    index_vault(write_vault(tmp_path / "vault", SMALL_VAULT), db, cache=shared_cache)
    s = Searcher(db)
    fp = s.fingerprint
    s.close()
    # the shipped weights at a cut nothing reaches: which file decided shows in the decision
    model = dataclasses.replace(load_gate(DEFAULT_GATE_FILE), fingerprint=fp["embedder"], threshold=0.999)
    proposal = tmp_path / "proposal.json"
    proposal.write_text(json.dumps({"model": model.as_json(), "basis": "test"}), encoding="utf-8")
    return db, proposal, model


def test_apply_and_undo_while_serve_searches(index_and_proposal):
    db, proposal, model = index_and_proposal
    engine = RecallEngine(SearchBackend(db, SearchConfig(threshold=0.0)), None, RecallConfig(timeout_s=60.0))
    seen, failures, stop = [], [], threading.Event()

    def search_loop(url):
        while not stop.is_set():
            status, body = post(url + "/search", {"query": QUESTION, "k": 3})
            if status != 200:
                failures.append((status, body))
                continue
            d = body["gate"]["decided_by"]
            seen.append((d["source"], d.get("threshold")))

    torn = []

    def read_loop():           # what any reader of the file sees between two swaps: nothing, or a whole gate
        side = sidecar_path(db)
        while not stop.is_set():
            try:
                text = side.read_bytes()
            except FileNotFoundError:
                continue
            try:
                json.loads(text)
            except ValueError:
                torn.append(len(text))

    with running(engine) as url:
        threads = [threading.Thread(target=search_loop, args=(url,)) for _ in range(2)]
        threads.append(threading.Thread(target=read_loop))
        for t in threads:
            t.start()
        try:
            for i in range(16):
                before = len(seen)
                apply_proposal(proposal, db) if i % 2 == 0 else undo_apply(db)
                deadline = time.monotonic() + 120        # searches run between two swaps (polled, no fixed sleep)
                while len(seen) < before + 3 and not failures and time.monotonic() < deadline:
                    time.sleep(0.01)
        finally:
            stop.set()
            for t in threads:
                t.join(120)
    assert not failures, failures[:3]
    assert not torn, f"{len(torn)} reads saw a gate file cut short (sizes {torn[:5]})"
    assert len(seen) >= 48
    sources = {src for src, _ in seen}
    assert sources == {DEFAULT_GATE_SOURCE, str(sidecar_path(db))}          # both decided, and nothing else
    assert {t for src, t in seen if src == str(sidecar_path(db))} == {0.999}


CHILD = """
import sys
from tuner.gate.proposal import apply_proposal, undo_apply
db, proposal = sys.argv[1], sys.argv[2]
while True:
    apply_proposal(proposal, db)
    undo_apply(db)
"""


@pytest.mark.parametrize("after_lines", [3, 8, 15])
def test_kill_9_during_apply_leaves_the_old_gate_file_or_the_new_one(index_and_proposal, after_lines):
    db, proposal, model = index_and_proposal
    side, hist = sidecar_path(db), history_path(db)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(proposal)], env=env, cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and p.poll() is None:
            lines = hist.read_text(encoding="utf-8").count("\n") if hist.exists() else 0
            if lines >= after_lines:
                break
            time.sleep(0.005)
        assert p.poll() is None, p.stderr.read().decode()[-2000:]
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.wait(60)
    if side.exists():                                   # whole: it loads, and it is the proposal's gate
        assert load_gate(side).threshold == model.threshold
    s = Searcher(db)                                    # a search decides with the old gate or the new one
    try:
        d = s.search(QUESTION).gate.decision.to_json()
        assert d["source"] in (DEFAULT_GATE_SOURCE, str(side))
    finally:
        s.close()
    # the next apply and undo work over whatever the kill left (a .new file, a last history line cut short is
    # refused by undo with its number: then the history is what a person fixes)
    r = apply_proposal(proposal, db)
    assert r.installed == str(side) and load_gate(side).threshold == model.threshold


def test_a_reader_never_sees_a_gate_file_cut_short(index_and_proposal):
    # many swaps, one reader reading as fast as it can: a gate file written in place would be seen half-written
    db, proposal, _ = index_and_proposal
    side, stop, torn, reads = sidecar_path(db), threading.Event(), [], [0]

    def read_loop():
        while not stop.is_set():
            try:
                text = side.read_bytes()
            except FileNotFoundError:
                continue
            reads[0] += 1
            try:
                json.loads(text)
            except ValueError:
                torn.append(len(text))

    t = threading.Thread(target=read_loop)
    t.start()
    try:
        for _ in range(150):
            apply_proposal(proposal, db)
            undo_apply(db)
    finally:
        stop.set()
        t.join(60)
    assert reads[0] > 0 and not torn, f"{len(torn)} of {reads[0]} reads saw a gate file cut short"
