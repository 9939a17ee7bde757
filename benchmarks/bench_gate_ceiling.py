"""What the gate's features allow on each vault at best: the shipped recipe fitted on the vault's own labels.

A gate that ships is fitted on other vaults (bench_gate_lovo.py). This asks the opposite question: if a vault's
own labelled questions were all there were, and the gate were fitted and cut on them, how far would the same
features go? Per vault, the shipped recipe's features (bench_gate_lovo.CURRENT_RECIPE) fitted with the
product's fit_gate (L2 logistic regression, Platt-calibrated) on four fifths of the vault's labelled rows,
scored on the fifth left (stratified 5 folds, `--seeds` shufflings), for each C of GRID; and the same with
every other vault's rows in the fit beside the four fifths (`with the others`: the shipped default's pool
with this vault's labels added, as a gate fitted on everything would be):

  own cut   balanced accuracy on the held fold at the cut the fit chose: what labels on the vault can teach a
            gate, judged on labels it did not see
  best cut  balanced accuracy of all out-of-fold probabilities at the one cut that separates them best: an
            upper bound (the cut is chosen on the rows it is scored on), the features' ceiling on that vault

A vault whose best cut stays below a target is one where no threshold and no refit of these features
reaches it, whatever the gate is fitted on. Rows: the cache bench_gate_lovo.py fills (rows-VAULT.pkl under
--cache; each vault searched through `Searcher.search`). Nothing is written but --out.

    PYTHONPATH=$PWD python benchmarks/bench_gate_ceiling.py [--cache DIR] [--vaults a,b] [--seeds 3]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gate_lovo import CURRENT_RECIPE, LABELLED, RECIPES, SETS, collect, fit_rows, shares  # noqa: E402
from common import DATA, write_result  # noqa: E402

from search_core.gate.model import best_balanced_threshold  # noqa: E402
from tuner.gate.fit import fit_gate  # noqa: E402

GRID = (0.03, 0.1, 0.3, 1.0)
POOLED_C = RECIPES[CURRENT_RECIPE][1]        # the shipped recipe's C, as the default is fitted


def folds(y: np.ndarray, k: int, seed: int) -> list[np.ndarray]:
    """Stratified folds: each class shuffled with `seed` and dealt round-robin, so every fold holds both."""
    rng = np.random.default_rng(seed)
    out = [[] for _ in range(k)]
    for label in (0, 1):
        idx = rng.permutation(np.flatnonzero(y == label))
        for i, j in enumerate(idx):
            out[i % k].append(j)
    return [np.array(sorted(f)) for f in out]


def ceiling(rows: list[dict], features, C: float, seeds: int, k: int = 5, others: list[dict] = ()) -> dict:
    """{own cut, best cut}: means over `seeds` shufflings of k folds (see the module's text); `others`: rows of
    other vaults fitted beside each four fifths."""
    y = np.array([r["y"] for r in rows], dtype=int)
    extra_f, extra_y = [r["f"] for r in others], [r["y"] for r in others]
    own, best = [], []
    for seed in range(seeds):
        p = np.full(len(rows), np.nan)
        inject = np.zeros(len(rows), bool)
        for held in folds(y, k, seed):
            fit = np.setdiff1d(np.arange(len(rows)), held)
            m = fit_gate([rows[i]["f"] for i in fit] + extra_f, [*y[fit], *extra_y], fingerprint={},
                         features=list(features), C=C)
            p[held] = [m.probability(rows[i]["f"]) for i in held]
            inject[held] = p[held] >= m.threshold
        own.append(float(shares(inject, y).mean()))
        best.append(best_balanced_threshold(p, y)[1])
    return {"own cut": round(float(np.mean(own)), 3), "best cut": round(float(np.mean(best)), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/gate/lovo"))
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("AUTORESEARCH_DATA", DATA)))
    ap.add_argument("--sets", type=Path, default=SETS)
    ap.add_argument("--vaults", default=",".join(LABELLED))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", default="gate-ceiling")
    a = ap.parse_args()
    a.recollect = False            # collect()'s flag: the rows are searched only where the cache lacks them
    features = RECIPES[CURRENT_RECIPE][0]
    results = {"recipe": CURRENT_RECIPE, "grid": GRID, "seeds": a.seeds, "vaults": {}}
    print(f"{CURRENT_RECIPE}'s features fitted on each vault's own labels, 5 folds x {a.seeds} seeds; "
          "own cut / best cut per C\n")
    print("| vault (rows) | " + " | ".join(f"C {c}" for c in GRID) + f" | with the others, C {POOLED_C} |\n|---|"
          + "---|" * (len(GRID) + 1))
    vaults = a.vaults.split(",")
    data = {v: collect(v, a) for v in LABELLED}
    for vault in vaults:
        rows = data[vault]["labelled"]
        per_c = {str(c): ceiling(rows, features, c, a.seeds) for c in GRID}
        pooled = ceiling(rows, features, POOLED_C, a.seeds, others=fit_rows(data, [v for v in LABELLED if v != vault]))
        results["vaults"][vault] = {"rows": len(rows), "by_C": per_c, "with_the_others": pooled}
        cells = " | ".join(f"{v['own cut']:.3f} / {v['best cut']:.3f}" for v in [*per_c.values(), pooled])
        print(f"| {vault} ({len(rows)}) | {cells} |", flush=True)
    print("\nwritten", write_result(a.out, results))


if __name__ == "__main__":
    main()
