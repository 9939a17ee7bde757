"""Shared by the gate's tests: a recall log of real, labelled searches against the index they searched."""

import time

import pytest

from search_core.recall.log import log_search
from tests.helpers.logged_calls import label_of, searched_small_vault


@pytest.fixture
def labelled_log(tmp_path, shared_cache):
    """Real searches of the small vault logged with labels (6 answerable, 6 probes) against its index: (index,
    log, the index's fingerprint key). One per test: the tests may write to the log."""
    db, key, results = searched_small_vault(tmp_path, shared_cache)
    now = time.time()
    rows = [{"ts": now - 3600 + i, "session": "a", "query": q, "res": res, "index_fingerprint": key,
             "label": label_of(q)} for i, (q, res) in enumerate(results.items())]
    log = tmp_path / "recall-log.sqlite"
    log_search(log, rows)
    return db, log, key
