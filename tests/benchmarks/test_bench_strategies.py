"""The peer strategies of benchmarks/bench_strategies.py: AutoRAG's grid is every combination inside a
node and fits the budget, and the guarded selection never hands back a config that lost a tuning hit."""

from __future__ import annotations

import itertools

from benchmarks.bench_strategies import BUDGET, SPACES, _best_so_far, greedy_nodes, interior
from search_core.config import SearchConfig
from tuner.sweep.space import load_space


def _variables(space: str, drop=()):
    return [v for v in load_space(SPACES / space).variables if v.name not in drop]


def test_greedy_grid_is_every_combination_and_fits_the_budget():
    for space, drop in (("strategies.toml", ("threshold",)), ("strategies.toml", ("threshold", "gate_threshold")),
                        ("strategies-embedder.toml", ("threshold",))):
        nodes = greedy_nodes(_variables(space, drop))
        # each node holds one combination at the start's value at most (free: already evaluated)
        assert sum(len(c) for _, c, _ in nodes) - len(nodes) <= BUDGET
        fusion = next(c for n, c, _ in nodes if n == "fusion")
        keys = sorted(fusion[0])
        levels = [sorted({c[k] for c in fusion}) for k in keys]
        assert sorted(tuple(c[k] for k in keys) for c in fusion) == sorted(itertools.product(*levels))
        assert [n for n, _, _ in nodes][-1] == ("gate" if "gate_threshold" not in drop else "fusion")
        gate = [m for n, _, m in nodes if n == "gate"]
        assert gate in ([], ["gate_accuracy"])


def test_interior_values_lie_inside_the_range_on_the_grid():
    space = load_space(SPACES / "strategies.toml")
    for v in space.variables:
        for n in (1, 2, 3, 6):
            values = interior(v, n, log=v.name == "rrf_k")
            assert all(v.low <= x <= v.high for x in values), (v.name, values)
            if v.step:
                assert all(abs((x - v.low) / v.step - round((x - v.low) / v.step)) < 1e-6 for x in values)
    # a grid a user would write: the weights never at the extremes (0 or 1)
    assert interior(space.get("w_dense"), 3) == [0.15, 0.5, 0.85]


def test_the_guard_keeps_the_best_score_that_lost_no_tuning_hit():
    start = SearchConfig()
    start_b = {"score100": 90.0, "hits": 10}
    better_but_lost = (start.replace(rrf_k=7), {"score100": 95.0, "hits": 9})
    better_kept = (start.replace(rrf_k=9), {"score100": 92.0, "hits": 10})
    trials = [better_but_lost, better_kept]
    plain = _best_so_far(trials, start, start_b, guard=False)
    guarded = _best_so_far(trials, start, start_b, guard=True)
    assert [c.rrf_k for c, _ in plain] == [7, 7]
    assert [c.rrf_k for c, _ in guarded] == [start.rrf_k, 9]
    assert [s for _, s in guarded] == [90.0, 92.0]
