"""StoredConfig: a config as a record kept it reads as the SearchConfig it ran and writes back the same text;
ConfigChange: where one recorded config differs from another."""

import json
import sqlite3

import pytest

from search_core import SearchCoreError
from search_core.config import ADDED_LATER, SearchConfig
from tests.helpers import ROOT
from tuner.stored_config import NO_CONFIG, ConfigChange, StoredConfig

OLD = ROOT / "tests/tuner/ledger/data/schema2-demo-sweep.sqlite"


def test_a_config_recorded_before_later_keys_reads_as_what_it_ran_and_writes_the_same_text():
    """The old ledger's rows lack every key added since (the n-gram list, the keyword index, ...): each reads
    with the value it ran with, keeps the hash the row recorded, and writes back byte for byte."""
    with sqlite3.connect(OLD) as c:
        rows = c.execute("SELECT config, config_hash FROM rounds ORDER BY round").fetchall()
    assert len(rows) == 7
    for text, recorded_hash in rows:
        stored = StoredConfig.from_json(json.loads(text))
        assert "w_ngram" not in json.loads(text) and stored.search.w_ngram == ADDED_LATER["w_ngram"] == 0.0
        assert stored.search.keyword_index == "fts5" and stored.search.pair_terms == 0
        assert stored.config_hash() == recorded_hash
        assert json.dumps(stored.to_json(), ensure_ascii=False) == text


def test_a_config_recorded_today_writes_every_key_in_the_configs_order():
    cfg = SearchConfig(rrf_k=7, nav_globs=("a", "b"))
    assert StoredConfig(cfg).to_json() == cfg.as_dict()
    assert list(StoredConfig(cfg).to_json()) == list(cfg.as_dict())
    assert StoredConfig.from_json(cfg.as_dict()) == StoredConfig(cfg)
    assert NO_CONFIG.to_json() == {}


def test_a_recorded_key_this_version_does_not_know_is_named():
    with pytest.raises(SearchCoreError, match="dense_per_note"):
        StoredConfig.from_json({**SearchConfig().as_dict(), "dense_per_note": 10})


def test_a_change_is_the_keys_whose_value_moved_in_the_changed_configs_order():
    start = StoredConfig(SearchConfig(rrf_k=2))
    assert ConfigChange.between(start, start) == ConfigChange() and not ConfigChange()
    moved = ConfigChange.between(start, StoredConfig(SearchConfig(rrf_k=5, w_dense=0.5, nav_globs=("x",))))
    assert moved.to_json() == {"w_dense": 0.5, "rrf_k": 5, "nav_globs": ["x"]}
