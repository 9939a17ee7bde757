"""The near-topic gate measured through the product path (BENCHMARKS.md, gate, sixth round).

What a user does, with the library functions the `calibrate` verb calls:

    autoresearch calibrate --db DB --no-log --labels FIT.yaml          # fit a gate on labelled questions
    autoresearch calibrate apply --db DB                               # install it beside the index
    autoresearch calibrate --db DB --no-log --labels MEASURE.yaml ...  # "the gate in force on the labelled rows"

on a copy of DB (the copy's gate file is the only thing written). Beside the fitted gate, on the same
measured rows: the shipped default gate (no calibration), the cosine gate at the embedder's threshold, and
the cosine at the threshold fitted on FIT; and a stratified bootstrap interval of the fitted gate's
balanced accuracy at its own threshold (the rows are few: one probe in 30 is 1.7 points).

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=$PWD python benchmarks/bench_gate_product.py --db runs/demo.sqlite \
        --fit experiments/gold/demo-tune.yaml --measure experiments/gold/demo-gate-holdout.yaml --out gate-product
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from tuner.gate.calibrate import calibrate_index, probabilities  # noqa: E402
from tuner.gate.proposal import apply_proposal, write_proposal  # noqa: E402
from tuner.gate.metrics import balanced_accuracy, gate_scorecard  # noqa: E402


def bootstrap_bacc(scores, labels, threshold, reps=2000, seed=0) -> dict:
    """Resample answerable rows and probes separately (their counts stay fixed): the 2.5 / 97.5 % points
    of the balanced accuracy at a fixed threshold."""
    rng = np.random.default_rng(seed)
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    pos, neg = s[y], s[~y]
    vals = []
    for _ in range(reps):
        p, n = rng.choice(pos, len(pos)), rng.choice(neg, len(neg))
        vals.append(balanced_accuracy(np.concatenate([p, n]) >= threshold,
                                      np.concatenate([np.ones(len(p), bool), np.zeros(len(n), bool)])))
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return {"reps": reps, "low": round(float(lo), 4), "high": round(float(hi), 4)}


def measure(db: Path, fit_sets: list[Path], measure_sets: list[Path]) -> dict:
    work = Path(tempfile.mkdtemp(prefix="gate-product-"))
    try:
        copy = work / db.name
        shutil.copy(db, copy)
        # the shipped default, before anything is installed beside the copy
        dflt, _, _, dchoice = calibrate_index(copy, log_path=None, since_s=None, gold_paths=measure_sets)
        fitted, _, _, _ = calibrate_index(copy, log_path=None, since_s=None, gold_paths=fit_sets)
        if not fitted.recommendation.model:
            raise SystemExit(f"no gate was fitted on {fit_sets}: {fitted.warning_lines()}")
        write_proposal(fitted, copy, work / "proposal.json")
        apply_proposal(work / "proposal.json", copy)
        cal, _, labelled, choice = calibrate_index(copy, log_path=None, since_s=None, gold_paths=measure_sets)
        y = [int(r.answerable) for r in labelled]
        p = probabilities(choice.model, [r.features for r in labelled])
        cos = [r.features.get("hit_cos", -1.0) for r in labelled]
        t_fit = fitted.recommendation.cosine.threshold
        g = cal.gate_on_labels.to_json()             # written out as the calibration's JSON holds it
        return {"fit": [str(x) for x in fit_sets], "measure": [str(x) for x in measure_sets],
                "rows": g["rows"], "answerable": g["answerable"], "probes": g["probes"],
                "fitted_gate": {**g["model"], "features": len(choice.model.features),
                                "bootstrap_bacc": bootstrap_bacc(p, y, choice.model.threshold),
                                "in_sample": g["in_sample"], "fitted_on": choice.model.fitted_on},
                "default_gate": {**dflt.gate_on_labels.model.to_json(), "source": dchoice.source,
                                 "in_sample": list(dflt.gate_on_labels.in_sample)},
                "cosine_default": g["cosine"],
                "cosine_fitted_on_fit_sets": gate_scorecard(cos, y, t_fit).to_json(),
                "warnings": list(cal.warning_lines() + dflt.warning_lines())}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True, type=Path)
    ap.add_argument("--fit", action="append", required=True, type=Path)
    ap.add_argument("--measure", action="append", required=True, type=Path)
    ap.add_argument("--out", default="gate-product")
    args = ap.parse_args()
    out = {"load_average_start": os.getloadavg(), **measure(args.db, args.fit, args.measure)}
    out["load_average_end"] = os.getloadavg()
    f, d = out["fitted_gate"], out["default_gate"]
    print(f"fitted on {', '.join(x.name for x in args.fit)}: AUROC {f['auroc']} balanced accuracy "
          f"{f['balanced_accuracy']} (bootstrap 95 % {f['bootstrap_bacc']['low']}-{f['bootstrap_bacc']['high']}); "
          f"default {d['auroc']} / {d['balanced_accuracy']}; cosine 0.82 {out['cosine_default']['balanced_accuracy']}; "
          f"cosine fitted {out['cosine_fitted_on_fit_sets']['threshold']} "
          f"{out['cosine_fitted_on_fit_sets']['balanced_accuracy']}", file=sys.stderr)
    print(write_result(args.out, out))


if __name__ == "__main__":
    main()
