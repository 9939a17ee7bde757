"""What a night's first gate_threshold round keeps, under each gate measure of the keep rule, and how the
gate it leaves does on the vault's held-out hand-written sets.

Per vault: the night's tuning set as the daemon combines it (the hand-written tune set with its probes, and
`gold make`'s 600 questions unless they are lookups alone, tuner.data.night_gold), evaluated at the shipped
default; the round's closed-form value under each measure (`fit_threshold` over the rows the measure reads);
the keep rule's decision on it (`decide`, noise_alpha 0.05, as a night runs); then every held-out set searched
with the threshold the round leaves, balanced accuracy (answerable injected, probes held back). Only the first
proposal: a night's later threshold rounds are optuna's values around it, judged by the same rule.

    python benchmarks/bench_threshold_rounds.py [--vaults demo,johngrib,sysmae,syshin0116,voyager003,...]

Vaults: the demo, the johngrib subset of bench_gold_make.py, and each wiki of benchmarks.common.VAULT_SETS with a
tune set. The indexes: --db NAME=PATH (default: this machine's caches, below; a wiki's built by `autoresearch index
../vaults/FOLDER --db /work/cache/idx/NAME.sqlite`); the made sets are written under runs/bench/threshold-rounds/.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import ROOT, VAULT_SETS, write_result  # noqa: E402

SETS, GOLD = ROOT / "benchmarks" / "sets", ROOT / "experiments" / "gold"
VAULTS_DIR = ROOT.parent / "vaults"          # the wikis of VAULT_SETS (benchmarks/sets/README.md)
INDEX_DIR = Path("/work/cache/idx")          # their indexes on this machine (`autoresearch index ... --db`)


def vault_table() -> dict:
    """name -> (vault folder, index, hand-written tune set, held-out sets): the demo (its tune set, and every set
    with probes it was not tuned on), the johngrib subset of bench_gold_make.py, and each wiki of VAULT_SETS with a
    tune set (the rest of its sets held out)."""
    table = {
        "demo": (ROOT / "experiments" / "demo-vault", "/work/cache/goldmake/demo/index.sqlite", GOLD / "demo-tune.yaml",
                 [GOLD / f"{s}.yaml" for s in ("demo-holdout", "demo-gate-holdout", "demo-gate-holdout2",
                                              "demo-probes")]),
        "johngrib": (Path("/work/cache/goldmake/johngrib-subset/vault"),
                     "/work/cache/goldmake/johngrib-subset/index.sqlite", SETS / "johngrib-tune.yaml",
                     [SETS / f"johngrib-{s}.yaml" for s in ("holdout", "final", "blind")]),
    }
    for name, (folder, sets) in VAULT_SETS.items():
        tune = [s for s in sets if s.endswith("-tune")]
        if tune:
            table[name] = (VAULTS_DIR / folder, str(INDEX_DIR / f"{name}.sqlite"), SETS / f"{tune[0]}.yaml",
                           [SETS / f"{s}.yaml" for s in sets if s != tune[0]])
    return table


VAULTS = vault_table()
DEFAULT_VAULTS = ("demo", "johngrib", "sysmae", "syshin0116", "voyager003")    # those with an index here
ALPHA = 0.05       # the sweep's noise_alpha default


def held_out(searcher, cfg, holdouts) -> dict[str, float | None]:
    from tuner.data.gold import load_gold
    from tuner.evaluation.evaluate import evaluate
    from tuner.sweep.keep_rule import balanced_gate_accuracy
    out = {}
    for h in holdouts:
        rows = evaluate(searcher, load_gold(h), cfg, audit=False, allow_missing=True).per_query
        answerable = [q for q in rows if q.level != "probe"]
        out[h.stem] = (balanced_gate_accuracy(rows) if answerable else
                       round(sum(not q.inject for q in rows) / len(rows), 4))    # a probes-only set: held back
    return out


def run_vault(name: str, db: str, folder: Path) -> dict:
    from search_core.config import SearchConfig
    from search_core.search.pipeline import Searcher
    from tuner.data.gold import load_gold
    from tuner.data.night_gold import refresh_vault_questions, write_night_gold
    from tuner.evaluation.evaluate import evaluate
    from tuner.sweep.keep_rule import GATE_MEASURES, Rule, decide, gate_rows
    from tuner.sweep.workbench import fit_threshold
    vault, _, tune, holdouts = VAULTS[name]
    made = refresh_vault_questions(vault, folder / name)
    parts = [tune] + ([] if made.lookups_only else [made.path])
    night = write_night_gold(parts, folder / name, name="night-gold")
    searcher = Searcher(db)
    try:
        cfg = SearchConfig()
        base = evaluate(searcher, load_gold(night.path), cfg, audit=False, allow_missing=True)
        shipped = next(q.gate.threshold for q in base.per_query if q.gate is not None)
        out = {"vault": name, "tuning": night.describe(), "made_left_out": made.lookups_only, "shipped_cut": shipped,
               "shipped": held_out(searcher, cfg, holdouts), "measures": {}}
        for measure in GATE_MEASURES:
            balanced = measure == "balanced"
            rows = gate_rows(base.per_query) if balanced else base.per_query
            cut = fit_threshold(rows, "gate_probability", balanced=balanced)
            if cut is None:
                raise SystemExit(f"{name}: no cut to fit (the tuning set needs answerable questions and probes)")
            cand_cfg = cfg.replace(gate_threshold=cut)
            cand = evaluate(searcher, load_gold(night.path), cand_cfg, audit=False, allow_missing=True)
            d, b_obj, c_obj = decide(base, cand, Rule(gate_measure=measure, noise_alpha=ALPHA), objective="gate_accuracy")
            left = cand_cfg if d.decision == "kept" else cfg
            out["measures"][measure] = {"cut": cut, "decision": str(d.decision), "reason": d.reason,
                                        "tune": [b_obj, c_obj], "held_out": held_out(searcher, left, holdouts)}
            print(f"{name} {measure}: cut {cut} {d.decision} ({d.reason[:160]}); held out "
                  f"{out['measures'][measure]['held_out']}", flush=True)
        print(f"{name} shipped cut {shipped}: held out {out['shipped']}", flush=True)
        return out
    finally:
        searcher.close()


def table(results: list[dict]) -> str:
    lines = ["| vault (tuning set) | held-out set | shipped cut | every question (`accuracy`): cut, decision, held out "
             "| `balanced`: cut, decision, held out |", "|---|---|---|---|---|"]
    for r in results:
        for i, h in enumerate(r["shipped"]):
            cells = []
            for m in ("accuracy", "balanced"):
                x = r["measures"][m]
                kept = x["decision"] == "kept"
                cells.append(f"{x['cut']}, {'kept' if kept else 'rejected'}, **{x['held_out'][h]}**" if i == 0
                             else f"**{x['held_out'][h]}**")
            head = f"{r['vault']} ({r['tuning']})" if i == 0 else ""
            lines.append(f"| {head} | {h} | {r['shipped'][h]} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vaults", default=",".join(DEFAULT_VAULTS), help=f"of: {', '.join(VAULTS)}")
    ap.add_argument("--db", action="append", default=[], help="NAME=PATH: the index of a vault")
    a = ap.parse_args()
    dbs = {name: db for name, (_, db, _, _) in VAULTS.items()}
    dbs.update(dict(x.split("=", 1) for x in a.db))
    names = a.vaults.split(",")
    unknown = [n for n in names if n not in VAULTS]
    if unknown:
        raise SystemExit(f"unknown vault(s) {', '.join(unknown)}; valid: {', '.join(VAULTS)}")
    folder = ROOT / "runs" / "bench" / "threshold-rounds"
    results = [run_vault(n, dbs[n], folder) for n in names]
    print(table(results))
    print(f"written to {write_result('threshold-rounds', {'results': results})}", file=sys.stderr)


if __name__ == "__main__":
    main()
