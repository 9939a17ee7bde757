"""What several sweep, daemon and report tests share: the demo gold sets, a fusion-only space, a sweep
run in a temp folder, and a smaller gold set."""

from __future__ import annotations

from pathlib import Path

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

# two coupled fusion variables and one more (pair rounds, the move to the shipped default)
NGRAM_K_DECOMPOSED_SPACE = """
[w_ngram]
kind = "float"
low = 0.0
high = 0.6
step = 0.05
[rrf_k]
kind = "int"
low = 1
high = 120
[w_decomposed]
kind = "float"
low = 0.0
high = 0.6
step = 0.05
"""


# Unit costs (ms) as a quiet run of this 2-core machine measured them. Sweep tests charge latency with
# these instead of calibrating: a calibration taken while the machine is busy gives larger units, a
# search predicted past the 500 ms speed limit has no speed points left to lose, and a test's decisions
# would follow the load after all.
HAND_SET_UNITS = {
    "e5-small": {"embed_solo_ms": 16.5, "embed_solo_per_unit": 1.09, "embed_ms": 2.2, "embed_per_unit": 1.22,
                 "dense_per_mrowdim": 1.8, "entity_ms": 0.0, "entity_per_note": 0.033, "sparse_ms": 0.57,
                 "sparse_per_kposting": 2.1, "short_per_kposting": 0.76, "rank_ms": 0.54, "rank_per_item": 0.0013,
                 "search_ms": 0.0, "ngram_ms": 0.1, "ngram_per_term": 0.05, "ngram_per_kposting": 0.4},
    "minilm-l6": {"embed_solo_ms": 13.2, "embed_solo_per_unit": 0.34, "embed_ms": 13.1, "embed_per_unit": 0.34,
                  "dense_per_mrowdim": 1.9, "entity_ms": 0.0, "entity_per_note": 0.033, "sparse_ms": 0.55,
                  "sparse_per_kposting": 2.4, "short_per_kposting": 0.76, "rank_ms": 0.56, "rank_per_item": 0.0015,
                  "search_ms": 1.7, "ngram_ms": 0.1, "ngram_per_term": 0.05, "ngram_per_kposting": 0.4},
}
RERANK_MS_PER_PAIR = 0.5


def hand_set_calibrations(folder, rerankers=(), units_by_embedder=None) -> list[str]:
    """Store a calibration for every embedder above (or of `units_by_embedder`) under the key a sweep looks
    up, so the sweep reuses it instead of timing this machine. Returns the keys."""
    from search_core.models import get_embedder, unavailable_here
    from tuner.evaluation.cost_model import Calibration, CostStore, calibration_key, machine
    store, keys = CostStore(Path(folder)), []
    m = machine()
    for name, units in (units_by_embedder or HAND_SET_UNITS).items():
        if unavailable_here("embedder", name) is not None:
            continue                  # not installed here (no [models]): no round can search with it
        efp = get_embedder(name).fingerprint()
        key = calibration_key(m, efp)
        store.put(Calibration(key, m, name, efp, "tokens", dict(units), {r: RERANK_MS_PER_PAIR for r in rerankers},
                              {"solo": 1, "one": 1}, 0, 0, "hand-set (tests)"))
        keys.append(key)
    return keys


def run_sweep(tmp_path, db, space_text, rounds, *, gold=DEMO_TUNE, seed=0, ledger="l.sqlite", progress=None, start=None,
          index_dir=None, timing_samples=0, pairs=False, default_round=False):
    """timing_samples 0 (one timed pass) unless a test is about timed decisions: repeated passes cost
    72 more searches per timed evaluation and are tested where they matter. pairs: the sweep's pair rounds (off unless
    a test is about them, so a test's rounds stay the single-variable ones it was written for); default_round alike."""
    sp = tmp_path / f"space-{ledger}.toml"
    sp.write_text(space_text)
    lg = Ledger(tmp_path / ledger)
    p = SweepParams(db=str(db), gold=str(gold), space=str(sp), rounds=rounds, seed=seed, vault=str(DEMO_VAULT),
                    index_dir=str(index_dir or tmp_path / "indexes"), timing_samples=timing_samples, pairs=pairs,
                    default_round=default_round)
    hand_set_calibrations(p.cost_folder())
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
