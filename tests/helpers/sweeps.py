"""What several sweep, daemon and report tests share: the demo gold sets, a fusion-only space, a sweep
run in a temp folder, and a smaller gold set."""

from __future__ import annotations

from tests.helpers import DEMO_VAULT, ROOT
from tuner.ledger.ledger import Ledger
from tuner.sweep.loop import Sweep, SweepParams

DEMO_TUNE = ROOT / "experiments/gold/demo-tune.yaml"
DEMO_HOLD = ROOT / "experiments/gold/demo-holdout.yaml"

FUSION_SPACE = """
[w_dense]
kind = "float"
low = 0.0
high = 1.0
step = 0.05
[w_sparse]
kind = "float"
low = 0.0
high = 1.0
step = 0.05
[w_entity]
kind = "float"
low = 0.0
high = 0.6
step = 0.05
[rrf_k]
kind = "int"
low = 1
high = 120
[threshold]
kind = "float"
low = 0.7
high = 0.95
step = 0.005
"""


def run_sweep(tmp_path, db, space_text, rounds, *, gold=DEMO_TUNE, seed=0, ledger="l.sqlite", progress=None, start=None,
          index_dir=None, timing_samples=0):
    """timing_samples 0 (one timed pass) unless a test is about timed decisions: repeated passes cost
    72 more searches per timed evaluation and are tested where they matter."""
    sp = tmp_path / f"space-{ledger}.toml"
    sp.write_text(space_text)
    lg = Ledger(tmp_path / ledger)
    p = SweepParams(db=str(db), gold=str(gold), space=str(sp), rounds=rounds, seed=seed, vault=str(DEMO_VAULT),
                    index_dir=str(index_dir or tmp_path / "indexes"), timing_samples=timing_samples)
    sw = Sweep(p, lg, progress=progress, start=start)
    summary = sw.run()
    return summary, lg.rounds(sw.id)


def small_gold(src, dst, every):
    """Every n-th question of a demo gold set: the daemon tests exercise the daemon, not the metrics, and
    round 0 and the holdout search each question once (a few seconds on a busy 2-core machine)."""
    import yaml
    g = yaml.safe_load(open(src, encoding="utf-8"))
    g["questions"] = g["questions"][::every]
    g["name"] = g["name"] + "-small"
    dst.write_text(yaml.safe_dump(g, allow_unicode=True), encoding="utf-8")
    return dst
