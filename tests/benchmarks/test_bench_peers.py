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
