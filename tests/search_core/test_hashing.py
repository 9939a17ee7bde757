"""One helper for config and file hashes (search_core/hashing.py), and not one stored value moved.

The literals below were computed by the five separate hashing sites before they shared the helper
(main at 0834985): ledger rows (config_hash, baseline_hash), sweep pins, embedding-cache keys, index
file names and A/B stamps written by that code must still match, or a resume, a cache or a promotion
silently starts over.
"""

import os
from types import SimpleNamespace

import pytest

from search_core import SearchCoreError
from search_core.config import SUPERSEDED_NAV_GLOBS, ChunkConfig, SearchConfig
from search_core.index.embed_cache import model_key
from search_core.hashing import hash_file, hash_json, hash_tree
from search_core.search.query_cache import fingerprint_key
from tuner.ab import run as ab
from tuner.sweep.pins import check_pins, harness_pins
from tuner.evaluation.score import ScoreConfig
from tuner.sweep.workbench import index_path

# a fingerprint with Korean in it: json.dumps escapes it (ascii) or not, and the two spellings differ
FP = {"name": "st:/모델/bge", "dim": 384, "query_prefix": "query: "}
MTIME_NS = 1_700_000_000_000_000_000


@pytest.fixture
def tree(tmp_path):
    g = tmp_path / "g"
    (g / "sub").mkdir(parents=True)
    (g / "a.txt").write_bytes("가나 abc\n".encode())
    (g / "sub" / "b.txt").write_bytes(b"xyz")
    for f in (g / "a.txt", g / "sub" / "b.txt"):
        os.utime(f, ns=(MTIME_NS, MTIME_NS))
    return g


def test_config_hashes_are_the_ones_old_ledgers_hold():
    # the default before rrf_k became 2, before the n-gram list was fused (and weighed more when it leads) and
    # before the query expansion and the dense lead, with the nav globs of then: old ledgers hold its hash with
    # rrf_k = 60 and the globs spelled out; a config recorded without the later keys reads back so
    then = list(SUPERSEDED_NAV_GLOBS[0])
    old = SearchConfig(rrf_k=60, w_ngram=0.0, pair_terms=0, ngram_lead_margin=None, cross_lead_margin=None,
                       dense_lead_cos=None, nav_globs=tuple(then))
    recorded = SearchConfig.from_stored({"rrf_k": 60, "nav_globs": then})
    assert old.config_hash() == "1e7dcc90ca36" == recorded.config_hash()
    assert old.replace(nav_globs=("색인*",), reranker="ce:/모델").config_hash() == "ffdbc2189fa1"


def test_fingerprint_keys_are_the_ones_old_caches_and_index_files_hold():
    assert model_key(FP) == "c15ac62e38698522"                             # embedding-cache rows
    assert fingerprint_key(SimpleNamespace(fingerprint=lambda: FP)) == "c15ac62e38698522"
    assert index_path("/x", "st:/모델/bge-m3", ChunkConfig()).name == "st_bge-m3-49f075c6b97962bd.sqlite"
    assert ab.index_path("/w", "/vault/한", "e5-small", ChunkConfig()).name == \
        "e5-small-4f7a286c07a921d0-6b818176.sqlite"
    assert hash_json({"b": [1, "한"], "a": 0.5}) == "4597f6062e52a0fe"
    assert hash_json(FP, ascii=True) != hash_json(FP)        # why the helper keeps both spellings


def test_file_hashes_are_the_ones_old_pins_and_fingerprints_hold(tree):
    assert hash_tree(tree) == "1269433af57ab2a0"
    assert hash_tree(tree / "a.txt") == "47c4baedaf51de6c"
    assert hash_tree(None) is None
    assert hash_file(tree / "a.txt") == "9daa05139b2d36c7"                # weights hash in fingerprints
    assert hash_file(tree / "a.txt", 64) == "9daa05139b2d36c710339ad9eaa4862af592837a55f672867459dbd22ba0b5a8"
    assert ab.vault_stamp(tree) == "3181c584cf960ae8"                       # A/B "vault unchanged" check


def test_pins_recorded_before_the_helper_still_verify_and_a_moved_file_is_named(tree):
    params = SimpleNamespace(gold=tree, holdout=None, space=tree / "a.txt")
    old = {"gold": "1269433af57ab2a0", "holdout": None, "space": "47c4baedaf51de6c",
           "score_rubric": "3bd50fe0b75d0416", "index": "idx"}
    check_pins("s1", old, harness_pins(params, ScoreConfig(), "idx"))     # no error: nothing moved
    (tree / "sub" / "b.txt").write_bytes(b"xyZ")
    with pytest.raises(SearchCoreError, match="the gold \\(tuning\\) set"):
        check_pins("s1", old, harness_pins(params, ScoreConfig(), "idx"))


def test_a_gold_folder_holding_a_live_index_hashes_as_without_it_and_keeps_its_locks(tree):
    """An index built into a BEIR folder (and its WAL, shared memory, embedding cache) is not the gold set's
    content: the pin does not move when it is written. And a sweep that hashes the folder while it searches
    that index must not read the file's bytes: that close would drop the sweep's SQLite locks."""
    from search_core.index.store import connect
    from tests.helpers.live_file import assert_look_keeps_the_locks
    db = tree / "index.sqlite"
    c = connect(db)
    try:
        c.execute("CREATE TABLE t (x)")
        c.execute("INSERT INTO t VALUES (1)")
        assert (tree / "index.sqlite-wal").exists()
        assert_look_keeps_the_locks(db, lambda _: hash_tree(tree))
        assert hash_tree(tree) == "1269433af57ab2a0"
    finally:
        c.close()
