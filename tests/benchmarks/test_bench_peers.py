"""The side-by-side benchmark's peers run from venvs of their own: a venv is made again when its install did
not finish, and a peer whose index holds other vectors than ours is refused, not scored."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.bench_peers import PeerVenv, held_cosine, peer_python


@pytest.mark.slow
def test_a_peer_venv_is_reused_once_complete_and_made_again_when_its_install_stopped(tmp_path):
    peer = PeerVenv("probe", (), "none.py")           # nothing to install: the venv and its marker only
    python = peer_python(peer, tmp_path)
    assert python.exists() and (tmp_path / "venv-probe" / "pinned.txt").exists()
    left = tmp_path / "venv-probe" / "left-by-this-run"
    left.write_text("x")
    assert peer_python(peer, tmp_path) == python and left.exists()        # complete: reused as it is
    (tmp_path / "venv-probe" / "pinned.txt").unlink()                     # an install that stopped midway
    assert peer_python(peer, tmp_path) == python and python.exists() and not left.exists()


def test_a_peer_holding_our_vectors_passes_and_one_holding_others_is_refused():
    rng = np.random.default_rng(0)
    ours = rng.normal(size=(20, 8)).astype(np.float32)
    ours /= np.linalg.norm(ours, axis=1, keepdims=True)
    has = np.ones(20, bool)
    has[3] = False                                    # a chunk the index did not embed: whatever the peer holds
    ours[3] = 0.0
    held = ours * 2.0                                 # a scale is the same vector
    held[3] = rng.normal(size=8)
    held[5] = np.nan                                  # a chunk the peer kept no vector for: counted, not compared
    cosine, not_kept = held_cosine("peer", held, ours, has)
    assert cosine == pytest.approx(1.0, abs=1e-6) and not_kept == 1
    other = held.copy()
    other[7] = np.roll(other[7], 1)                   # one chunk's vector not ours
    with pytest.raises(SystemExit, match="other vectors than ours"):
        held_cosine("peer", other, ours, has)
    with pytest.raises(SystemExit, match="holds 19 vectors"):
        held_cosine("peer", held[:19], ours, has)
    with pytest.raises(SystemExit, match="kept none"):
        held_cosine("peer", np.full_like(ours, np.nan), ours, has)


def test_the_table_means_each_system_over_the_sets_and_leaves_a_system_missing_a_set_unmeaned():
    from benchmarks.bench_peers import table
    ms = {"p50": 1.0, "p95": 2.0}
    got = table({"a": {"questions": 3, "systems": {"ours": {"hit@5": 1.0, "mrr@10": 0.5, "ms": ms},
                                                   "peer": {"skipped": "not installed"}}},
                 "b": {"questions": 40, "systems": {"ours": {"hit@5": 0.5, "mrr@10": 0.25, "ms": ms},
                                                    "peer": {"hit@5": 1.0, "mrr@10": 1.0, "ms": ms}}}})
    assert got.splitlines()[-1] == "| mean of the 2 | 0.750 / 0.375 | - |"    # each set weighs one


def _question(gold):
    from tuner.data.gold import Question
    return Question(id=gold, level="L0", query="q", gold=(gold,))


def test_ours_is_set_against_the_best_peer_on_each_metric_with_a_paired_interval():
    from benchmarks.bench_peers import versus_best_peer, versus_table
    qs = [_question(g) for g in ("a", "b", "c", "d")]
    systems = {
        "ours": {"hit@5": 0.75, "mrr@10": 0.625, "_ranked": [["a"], ["x", "b"], ["c"], ["x"]]},
        # our own list alone and a variant of ours are not peers, however well they score
        "ngram-alone": {"hit@5": 1.0, "mrr@10": 1.0, "_ranked": [["a"], ["b"], ["c"], ["d"]]},
        "ours-fast": {"hit@5": 1.0, "mrr@10": 1.0, "_ranked": [["a"], ["b"], ["c"], ["d"]]},
        "bm25s-char": {"hit@5": 0.5, "mrr@10": 0.5, "_ranked": [["a"], ["x"], ["c"], ["x"]]},
        "llamaindex": {"hit@5": 1.0, "mrr@10": 0.4375,
                       "_ranked": [["x", "x", "x", "a"], ["x", "x", "x", "b"], ["x", "x", "x", "c"], ["x", "d"]]},
    }
    vs = versus_best_peer(systems, qs, n_resamples=2000)
    # hit@5: llamaindex (1.0) is the best peer, ours 0.75: one question of four lost, -0.25
    assert vs["hit@5"]["peer"] == "llamaindex" and vs["hit@5"]["diff"] == -0.25
    # MRR@10: bm25s-char (0.5) beats llamaindex (0.4375); ours 1, 1/2, 1, 0 against 1, 0, 1, 0: +0.125
    assert vs["mrr@10"]["peer"] == "bm25s-char" and vs["mrr@10"]["diff"] == 0.125
    for v in vs.values():
        lo, hi = v["ci"]
        assert lo <= v["diff"] <= hi
    assert vs["hit@5"]["ci"][1] == 0.0                    # ours is never ahead on hit@5: no resample is above 0
    systems["ours"]["vs_best_peer"] = vs
    row = versus_table({"tiny": {"systems": systems}}).splitlines()[-1]
    assert row.startswith("| tiny | llamaindex | -0.2500 (") and row.count("within noise") == 2


def test_a_set_whose_peer_loses_every_question_reads_ahead_and_equal_sets_read_equal():
    from benchmarks.bench_peers import versus_best_peer, versus_table
    qs = [_question(g) for g in "abcdefgh"]
    ours = {"hit@5": 1.0, "mrr@10": 1.0, "_ranked": [[g] for g in "abcdefgh"]}
    lost = {"hit@5": 0.0, "mrr@10": 0.0, "_ranked": [["x"]] * 8}
    vs = versus_best_peer({"ours": ours, "dense": lost}, qs, n_resamples=500)
    assert vs["hit@5"]["ci"] == [1.0, 1.0]
    ours["vs_best_peer"] = vs
    assert versus_table({"s": {"systems": {"ours": ours}}}).splitlines()[-1].count("ahead") == 2
    ours["vs_best_peer"] = versus_best_peer({"ours": ours, "dense": dict(ours)}, qs, n_resamples=500)
    assert versus_table({"s": {"systems": {"ours": ours}}}).splitlines()[-1].count("equal") == 2


def test_a_real_vault_that_is_not_laid_out_is_refused_with_where_to_put_it(tmp_path):
    from benchmarks.bench_peers import VAULT_SETS, vault_set
    for name in VAULT_SETS:
        with pytest.raises(SystemExit, match="benchmarks/sets/README.md"):
            vault_set(name, tmp_path)
