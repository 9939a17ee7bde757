"""Pair rounds: once a full cycle of single-variable rounds against the baseline kept nothing, a round moves a coupled
pair of fusion variables together (tuner/sweep/variables.py, COUPLED_PAIRS), proposed over its 2-D grid and judged by
the same rule; its ledger row names both variables and keeps both values, and every reader takes it."""

import dataclasses

import pytest

from search_core.config import SearchConfig
from tests.helpers import DEMO_VAULT
from tests.helpers.sweeps import (DEMO_TUNE, NGRAM_K_DECOMPOSED_SPACE, hand_set_calibrations, run_sweep,
                                  small_gold)
from tuner.ledger.ledger import Ledger
from tuner.sweep.loop import Sweep, SweepParams, replay_sweep
from tuner.sweep.propose import propose_pair
from tuner.sweep.rejected_audit import interaction_rules
from tuner.sweep.space import Variable
from tuner.sweep.variables import (COUPLED_PAIRS, with_change, describe_change, is_pair, kind_of, moved_variables,
                                   pair_of, value_in)

# two coupled variables and one more: the single cycle is 3 rounds, so pairs come early
PAIR_SPACE = NGRAM_K_DECOMPOSED_SPACE


def _pair_due_before(rows, i) -> bool:
    """Whether rows[i] should move a pair: before it, every variable of PAIR_SPACE had a round against its baseline
    (the cycle stalled), and pair rounds against it are no more than its single rounds beyond each variable's first
    (after a stalled cycle pair and single rounds take turns)."""
    against = [r.variable for r in rows[1:i] if r.baseline_hash == rows[i].baseline_hash]
    singles = [v for v in against if not is_pair(v)]
    pairs = len(against) - len(singles)
    return {"w_ngram", "rrf_k", "w_decomposed"} <= set(singles) and pairs <= len(singles) - len(set(singles))


@pytest.fixture(scope="module")
def pair_night(demo_index, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pairs")
    gold = small_gold(DEMO_TUNE, tmp / "small.yaml", 2)
    summary, rows = run_sweep(tmp, demo_index, PAIR_SPACE, 10, gold=gold, pairs=True)
    return tmp, gold, rows


def test_after_a_stalled_cycle_the_rounds_move_a_coupled_pair(pair_night):
    _, _, rows = pair_night
    pair_rows = [r for r in rows[1:] if is_pair(r.variable)]
    assert pair_rows, [(r.round, r.variable, r.decision) for r in rows]
    for i, r in enumerate(rows[1:], 1):
        # a pair round only after a full single cycle against its baseline, then in turn with single ones
        assert is_pair(r.variable) == _pair_due_before(rows, i), (r.round, r.variable)
    first = pair_rows[0].round
    assert any(not is_pair(r.variable) for r in rows[first + 1:]), "single rounds go on between the pairs"
    for r in pair_rows:
        assert r.variable in ("w_ngram+rrf_k",)        # the only pair whose two variables this space turns
        assert isinstance(r.old, list) and isinstance(r.new, list) and len(r.new) == 2
        assert r.new[0] != r.old[0] and r.new[1] != r.old[1]      # both move
        cfg = r.search_config
        assert [cfg.w_ngram, cfg.rrf_k] == r.new
        assert r.decision.evaluated and r.result is not None


def test_the_replay_recomputes_every_pair_row(pair_night):
    tmp, _, rows = pair_night
    lg = Ledger(tmp / "l.sqlite", create=False)
    try:
        info = lg.sweeps()[-1]
        replayed = {x.round: x for x in replay_sweep(info, lg.rounds(info.id))}
    finally:
        lg.close()
    pair_rounds = [r.round for r in rows[1:] if is_pair(r.variable) and r.result is not None]
    assert pair_rounds and all(n in replayed for n in pair_rounds)
    assert all(replayed[n].agrees and replayed[n].variable == "w_ngram+rrf_k" for n in pair_rounds)


def test_a_resumed_sweep_proposes_the_pairs_the_uninterrupted_one_did(demo_index, tmp_path, pair_night):
    _, gold, rows = pair_night
    sp = tmp_path / "space.toml"
    sp.write_text(PAIR_SPACE)
    p = SweepParams(db=str(demo_index), gold=str(gold), space=str(sp), rounds=6, seed=0, vault=str(DEMO_VAULT),
                    index_dir=str(tmp_path / "indexes"), timing_samples=0, pairs=True)
    hand_set_calibrations(p.cost_folder())
    lg = Ledger(tmp_path / "resumed.sqlite")
    try:
        sid = Sweep(p, lg).run().sweep
        Sweep(dataclasses.replace(p, rounds=10), lg, sweep_id=sid).run()
        resumed = lg.rounds(sid)
    finally:
        lg.close()
    assert [(r.variable, r.new) for r in resumed] == [(r.variable, r.new) for r in rows]


def test_no_pairs_keeps_one_variable_a_round(demo_index, tmp_path, pair_night):
    _, gold, _ = pair_night
    _, rows = run_sweep(tmp_path, demo_index, PAIR_SPACE, 6, gold=gold, pairs=False)
    assert not any(is_pair(r.variable) for r in rows)


def test_the_pair_table_and_its_values():
    assert set(COUPLED_PAIRS) == {"w_ngram+rrf_k", "w_sparse+rrf_k", "w_dense+rrf_k", "w_ngram+w_sparse"}
    assert kind_of("w_ngram+rrf_k").name == "fusion"
    assert moved_variables("w_sparse+rrf_k") == ("w_sparse", "rrf_k") and moved_variables("rrf_k") == ("rrf_k",)
    base = SearchConfig(w_ngram=0.0, rrf_k=60)
    moved = with_change(base, "w_ngram+rrf_k", [0.1, 20])
    assert (moved.w_ngram, moved.rrf_k) == (0.1, 20) and moved.replace(w_ngram=0.0, rrf_k=60) == base
    assert with_change(base, "rrf_k", 20) == base.replace(rrf_k=20)
    with pytest.raises(ValueError, match="list of 2 values"):
        with_change(base, "w_ngram+rrf_k", 0.1)
    with pytest.raises(KeyError) as e:
        pair_of("w_entity+rrf_k")
    assert "w_ngram+rrf_k" in str(e.value) and "w_ngram+w_sparse" in str(e.value)
    cfg = SearchConfig().replace(w_ngram=0.0, rrf_k=60)
    assert value_in(cfg, "w_ngram+rrf_k") == [0.0, 60] and value_in(cfg, "rrf_k") == 60
    assert describe_change("w_ngram+rrf_k", [0.0, 60], [0.1, 20]) == "w_ngram 0.0 -> 0.1, rrf_k 60 -> 20"
    # the audit reads a pair's variables one by one
    assert interaction_rules("w_sparse+rrf_k", "w_dense") == ["fusion"]
    assert interaction_rules("w_sparse+rrf_k", "w_sparse+rrf_k") == []


def test_a_pair_proposal_moves_both_stays_on_the_grid_and_runs_out():
    a, b = Variable("w_ngram", "float", 0.0, 0.1, 0.05), Variable("rrf_k", "int", 1, 3)
    tried, history = set(), []
    for _ in range(4):       # (0.05, 0.1) x (2, 3) off the baseline (0.0, 1): 4 points, then none
        v = propose_pair(a, b, seed=0, baseline_hash="h", baseline_values=(0.0, 1), baseline_objective=1.0,
                         history=history, tried=tried)
        assert v is not None and v[0] in (0.05, 0.1) and v[1] in (2, 3) and tuple(v) not in tried
        tried.add(tuple(v))
        history.append((tuple(v), 0.5))
    assert propose_pair(a, b, seed=0, baseline_hash="h", baseline_values=(0.0, 1), baseline_objective=1.0,
                        history=history, tried=tried) is None
    same = [propose_pair(a, b, seed=3, baseline_hash="h", baseline_values=(0.0, 1), baseline_objective=1.0,
                         history=[], tried=set()) for _ in range(2)]
    assert same[0] == same[1]


def test_pairs_go_on_when_the_single_variables_have_no_value_left(demo_index, tmp_path, pair_night):
    """A space whose single variables run out (rrf_k 1..3) still has pair points: the sweep goes on with them instead
    of ending as exhausted."""
    _, gold, _ = pair_night
    small = ('[w_ngram]\nkind = "float"\nlow = 0.0\nhigh = 0.1\nstep = 0.05\n'
             '[rrf_k]\nkind = "int"\nlow = 1\nhigh = 3\n')
    summary, rows = run_sweep(tmp_path, demo_index, small, 12, gold=gold, pairs=True, ledger="small.sqlite",
                              start=SearchConfig().replace(w_ngram=0.0, rrf_k=1))
    singles = [r for r in rows[1:] if not is_pair(r.variable)]
    assert len(singles) >= 4 and any(is_pair(r.variable) for r in rows[1:])
    if not any(r.kept for r in rows[1:]):      # one baseline: its 4 single values and 4 pair points, all tried
        assert len(rows) - 1 == 8 and summary.status == "finished: space exhausted"
