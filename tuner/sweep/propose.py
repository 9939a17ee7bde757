"""Propose the next value of one variable with optuna, every other variable held at the baseline.

A proposal is a pure function of (seed, variable, baseline, history): a fresh study is built from the
ledger's earlier trials for this variable and baseline, so a resumed sweep proposes exactly what the
uninterrupted one would have. Categorical values are tried once each per baseline, in order.
"""

from __future__ import annotations

import hashlib

import optuna

from tuner.sweep.space import Variable

optuna.logging.set_verbosity(optuna.logging.WARNING)
MAX_ASKS = 12   # duplicate proposals before falling back to the nearest untried grid value


def _seed(*parts) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def _distribution(v: Variable):
    if v.kind == "int":
        return optuna.distributions.IntDistribution(int(v.low), int(v.high), step=int(v.step or 1))
    return optuna.distributions.FloatDistribution(float(v.low), float(v.high), step=v.step)


def _norm(v: Variable, value):
    if value is None or v.kind == "categorical":
        return value
    return int(round(value)) if v.kind == "int" else round(float(value), 6)


def _on_grid(v: Variable, value) -> bool:
    """Whether optuna's stepped distribution can hold `value`. A baseline can sit between grid points:
    a starting config (depth 50 in a 10..90 step 20 space) or a threshold re-fitted after an embedder
    round (0.8123 on a 0.005 grid); optuna refuses such a trial with a ValueError that ended the sweep."""
    if value is None or not v.contains(value):
        return False
    step = v.step or (1 if v.kind == "int" else None)
    if step is None:
        return True
    k = (float(value) - v.low) / step
    return abs(k - round(k)) < 1e-6


def propose(v: Variable, *, seed: int, baseline_hash: str, baseline_value, baseline_objective: float,
            history: list[tuple[object, float]], tried: set, unavailable: set = frozenset()):
    """Next value for `v`, or None when the variable is exhausted for this baseline.
    history: (value, objective) of earlier candidates for this variable against this baseline."""
    if v.kind == "categorical":
        for c in v.choices:
            if c not in tried and c != baseline_value and c not in unavailable:
                return c
        return None
    on_grid_base = {_norm(v, baseline_value)} if _on_grid(v, baseline_value) else set()
    if len(tried | on_grid_base) >= v.grid_size():
        return None
    dist = _distribution(v)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(
        seed=_seed(seed, v.name, baseline_hash, len(history)), n_startup_trials=4))
    known = [(baseline_value, baseline_objective)] + list(history)
    for value, obj in known:
        if not _on_grid(v, value):
            continue
        study.add_trial(optuna.trial.create_trial(params={v.name: _norm(v, value)}, distributions={v.name: dist},
                                                  value=float(obj)))
    taken = tried | {_norm(v, baseline_value)}
    last = None
    for _ in range(MAX_ASKS):
        trial = study.ask({v.name: dist})
        value = _norm(v, trial.params[v.name])
        if value not in taken:
            return value
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        last = value
    return _nearest_untried(v, last, taken)


def _nearest_untried(v: Variable, near, taken: set):
    grid = _grid(v)
    if grid is None:
        return None
    free = [g for g in grid if g not in taken]
    if not free:
        return None
    return min(free, key=lambda g: (abs(g - near), g))


def propose_pair(a: Variable, b: Variable, *, seed: int, baseline_hash: str, baseline_values: tuple,
                 baseline_objective: float, history: list[tuple[tuple, float]], tried: set):
    """Next values (a list, in the pair's order) for a round that moves `a` and `b` together over their 2-D grid,
    or None when the pair is exhausted for this baseline. Both must move: a point that keeps either at the
    baseline's value is a single-variable round, which the cycle before has had. Like `propose`, a pure function
    of (seed, pair, baseline, history): a resumed sweep proposes what the uninterrupted one would.
    history: (values, objective) of earlier pair rounds against this baseline; tried: their values as tuples."""
    grids = [_grid(v) for v in (a, b)]
    if any(g is None for g in grids):
        return None
    base = tuple(_norm(v, x) for v, x in zip((a, b), baseline_values))
    free = [(x, y) for x in grids[0] for y in grids[1]
            if x != base[0] and y != base[1] and (x, y) not in tried]
    if not free:
        return None
    dists = {a.name: _distribution(a), b.name: _distribution(b)}
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(
        seed=_seed(seed, a.name, b.name, baseline_hash, len(history)), n_startup_trials=4))
    for values, obj in [(baseline_values, baseline_objective)] + list(history):
        if all(_on_grid(v, x) for v, x in zip((a, b), values)):
            study.add_trial(optuna.trial.create_trial(
                params={v.name: _norm(v, x) for v, x in zip((a, b), values)}, distributions=dists, value=float(obj)))
    free_set, last = set(free), None
    for _ in range(MAX_ASKS):
        trial = study.ask(dists)
        point = (_norm(a, trial.params[a.name]), _norm(b, trial.params[b.name]))
        if point in free_set:
            return list(point)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        last = point
    # the nearest free point, in grid steps (ties: the grid's order)
    steps = [v.step or 1 for v in (a, b)]
    return list(min(free, key=lambda p: sum(abs(p[i] - last[i]) / steps[i] for i in range(2))))


def _grid(v: Variable) -> list | None:
    """Every value of a stepped (or integer) variable's grid; None for a continuous one (no 2-D grid to walk)."""
    if v.kind == "categorical":
        return None
    step = v.step or (1 if v.kind == "int" else None)
    if step is None:
        return None
    n = int(round((v.high - v.low) / step))
    return [_norm(v, v.low + i * step) for i in range(n + 1)]
