"""benchmarks/bench_gate_lovo.py: the interval of the mean over left-out vaults draws each vault's questions again
within that vault and weighs the vaults equally; an unknown vault name is refused with the known ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks import bench_gate_lovo as lovo

ROOT = Path(__file__).resolve().parents[2]


def test_each_vault_is_drawn_within_itself_and_weighs_the_same():
    # a vault whose every question differs by the same amount cannot move when drawn again within itself; pooled,
    # the 10 questions of the first would outweigh the 2 of the second (10/12) and the draws would spread
    assert lovo.stratified_bootstrap_ci([[1.0] * 10, [0.0] * 2]) == (0.5, 0.5)
    lo, hi = lovo.stratified_bootstrap_ci([[0.2] * 100, [0.0] * 5, [0.4] * 7])
    assert abs(lo - 0.2) < 1e-12 and abs(hi - 0.2) < 1e-12


def test_a_vault_with_spread_gives_an_interval_around_the_mean():
    diffs = [[1.0, -1.0] * 20, [0.5] * 10]
    lo, hi = lovo.stratified_bootstrap_ci(diffs)
    assert lo < 0.25 < hi and hi - lo < 1.0


def test_an_unknown_vault_is_refused_with_the_known_ones():
    script = ROOT / "benchmarks" / "bench_gate_lovo.py"
    res = subprocess.run([sys.executable, str(script), "--vaults", "demo,nowhere"], capture_output=True, text=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 2
    assert "unknown vault(s) nowhere; known: demo, autorag, johngrib" in res.stderr


def test_a_recipe_ships_only_when_better_on_the_mean_beyond_noise_and_worse_on_no_vault():
    outer = {"current": {"mean": 0.888, "mean_diff_ci95": [0.0, 0.0], "worse_beyond_noise": []},
             "noise": {"mean": 0.894, "mean_diff_ci95": [-0.0046, 0.0174], "worse_beyond_noise": []},
             "better": {"mean": 0.910, "mean_diff_ci95": [0.004, 0.040], "worse_beyond_noise": []},
             "better but worse on one": {"mean": 0.920, "mean_diff_ci95": [0.010, 0.050],
                                         "worse_beyond_noise": ["aegis1920"]}}
    assert lovo.shippable_recipes(outer, "current") == ["current", "better"]
    del outer["better"]
    assert lovo.shippable_recipes(outer, "current") == ["current"]
