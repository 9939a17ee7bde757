"""A running `serve` decides with the gate file `calibrate apply` installs (and `calibrate undo` takes back)
from its next search on, without a restart."""

import dataclasses
import json

import pytest
from click.testing import CliRunner

from search_core.config import SearchConfig
from search_core.gate.model import DEFAULT_GATE_FILE, DEFAULT_GATE_SOURCE, load_gate, sidecar_path
from search_core.recall.config import RecallConfig
from search_core.recall.backend import SearchBackend
from search_core.recall.engine import RecallEngine
from search_core.search.pipeline import Searcher
from tests.helpers import SMALL_VAULT, write_vault
from tests.helpers.http import post, running
from tuner.cli import main

QUESTION = "GraphRAG에서 커뮤니티 요약은 어떻게 만드나요?"


@pytest.fixture
def index_db(tmp_path, shared_cache):
    from search_core.index.indexer import index_vault
    db = tmp_path / "index.sqlite"
    index_vault(write_vault(tmp_path / "vault", SMALL_VAULT), db, cache=shared_cache)
    return db


def test_a_gate_applied_while_serve_runs_decides_the_next_search(index_db, tmp_path):
    s = Searcher(index_db)
    fp = s.fingerprint
    s.close()
    # the shipped model's weights at a cut nothing reaches: which file decides shows in the decision
    model = dataclasses.replace(load_gate(DEFAULT_GATE_FILE), fingerprint=fp["embedder"], threshold=0.999)
    proposal = tmp_path / "proposal.json"
    proposal.write_text(json.dumps({"model": model.as_json()}), encoding="utf-8")
    engine = RecallEngine(SearchBackend(index_db, SearchConfig(threshold=0.0)), None, RecallConfig(timeout_s=60.0))
    with running(engine) as url:
        status, before = post(url + "/search", {"query": QUESTION, "k": 3})
        assert status == 200 and before["gate"]["decided_by"]["source"] == DEFAULT_GATE_SOURCE   # no file yet
        r = CliRunner().invoke(main, ["calibrate", "apply", "--db", str(index_db), "--proposal", str(proposal)])
        assert r.exit_code == 0, r.output
        status, after = post(url + "/search", {"query": QUESTION, "k": 3})
        d = after["gate"]["decided_by"]
        assert status == 200 and d["kind"] == "model" and d["source"] == str(sidecar_path(index_db))
        assert d["threshold"] == 0.999 and not after["gate"]["inject"]
        r = CliRunner().invoke(main, ["calibrate", "undo", "--db", str(index_db)])
        assert r.exit_code == 0, r.output
        status, undone = post(url + "/search", {"query": QUESTION, "k": 3})
        assert status == 200 and undone["gate"]["decided_by"] == before["gate"]["decided_by"]
