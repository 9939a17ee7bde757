"""Do questions made from the vault's own text judge a change as hand-written questions do? The measurement
behind how the keep rule combines kinds of evidence (docs/tuner.md, "Evidence by kind").

    python benchmarks/bench_keep_rule_kinds.py measure --db runs/keep-rule/demo.sqlite \
        --hand tuner/experiments/gold/demo-tune.yaml,... --vault VAULT_QUESTIONS.yaml      # per-question rows
    python benchmarks/bench_keep_rule_kinds.py analyse                                      # the comparison

`measure` evaluates both sets under the two baselines and the one-variable changes of
benchmarks/bench_keep_rule.py and writes each question's ledger row (hit@5, MRR, nDCG@10, first rank) per
evaluation to runs/bench/keep-rule-kinds-rows.json. `analyse` reads them and, per change: questions out of
and into the top 5 and the mean change of score100's quality share, for each kind; whether the kinds agree
on the direction; and what the keep decision would be with the hit@5 guard and the gain test on the
hand-written questions, on the vault's, and on both pooled.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
from benchmarks.common import ROOT  # noqa: E402

ROWS = ROOT / "runs" / "bench" / "keep-rule-kinds-rows.json"
BASELINES = {"shipped": {}, "vector-start": {"w_dense": 1.0, "w_sparse": 0.0, "w_decomposed": 0.0, "w_entity": 0.0,
                                             "rrf_k": 60}}
CHANGES = {"w_sparse=0.1": {"w_sparse": 0.1}, "w_sparse=0.3": {"w_sparse": 0.3}, "w_sparse=1.0": {"w_sparse": 1.0},
           "w_dense=0.8": {"w_dense": 0.8}, "w_dense=0.1": {"w_dense": 0.1}, "rrf_k=60": {"rrf_k": 60},
           "rrf_k=12": {"rrf_k": 12}, "w_entity=0.5": {"w_entity": 0.5}, "w_decomposed=0.5": {"w_decomposed": 0.5},
           "depth=20": {"depth": 20}}


def measure(db: Path, hand: list[Path], vault: Path) -> None:
    from search_core.config import SearchConfig
    from search_core.search.pipeline import Searcher
    from tuner.data.gold import GoldSet, load_gold
    from tuner.evaluation.evaluate import RetrievalCache, evaluate
    hs = [load_gold(p) for p in hand]
    qs = [dataclasses.replace(q, id=f"hand:{g.name}:{q.id}") for g in hs for q in g.questions if not q.is_probe]
    qs += [dataclasses.replace(q, id=f"vault:{q.id}") for q in load_gold(vault).questions if not q.is_probe]
    gold = GoldSet("kinds", "kinds", tuple(qs))
    s, cache = Searcher(db), RetrievalCache()
    out = {}
    for b_label, b in BASELINES.items():
        start = SearchConfig().replace(**b)
        for label, change in {"(baseline)": {}, **CHANGES}.items():
            res = evaluate(s, gold, start.replace(**change), cache=cache, audit=False)
            out[f"{b_label} {label}"] = {q.id: {"id": q.id, "level": q.level, "first_rank": q.first_rank,
                                                **{m: q.metrics.get(m, 0.0) for m in ("hit@5", "mrr", "ndcg@10")}}
                                         for q in res.per_query}
            print(f"{b_label} {label}: hit@5 {res.overall['hit@5']:.3f}", file=sys.stderr, flush=True)
    ROWS.parent.mkdir(parents=True, exist_ok=True)
    ROWS.write_text(json.dumps(out))


def analyse() -> dict:
    from tuner.evaluation.evaluate import EvalResult, QuestionResult
    from tuner.evaluation.score import ScoreConfig
    from tuner.sweep.evidence import question_value, ranking_evidence
    from tuner.sweep.keep_rule import hit5_evidence
    weights = ScoreConfig().quality_weights
    rows = json.loads(ROWS.read_text())

    def result(rs):
        return EvalResult.from_ledger({"overall": {"n": len(rs)}, "per_query": rs})

    out = []
    for b_label in BASELINES:
        base = rows[f"{b_label} (baseline)"]
        for label in CHANGES:
            cand = rows[f"{b_label} {label}"]
            entry = {"change": f"{b_label} {label}"}
            for kind, pick in (("hand", "hand:"), ("vault", "vault:"), ("pooled", "")):
                ids = sorted(i for i in base if i.startswith(pick))
                b, c = result([base[i] for i in ids]), result([cand[i] for i in ids])
                h = hit5_evidence(b, c)
                ev = ranking_evidence(b, c, "score100", weights)
                entry[kind] = {"n": h.n, "out": h.lost, "in": h.gained, "drop_bound": round(h.drop_bound, 2),
                               "guard_holds": h.holds(2.0), "gain": round(ev.delta * 100, 3),
                               "p": round(ev.p_value, 4), "gain_passes": ev.delta > 0 and (ev.p_value < 0.05)}
            hd, vd = entry["hand"], entry["vault"]
            entry["hit5_direction_agrees"] = (hd["in"] - hd["out"]) * (vd["in"] - vd["out"]) >= 0
            entry["gain_direction_agrees"] = hd["gain"] * vd["gain"] >= 0
            out.append(entry)
    moved = [e for e in out if e["hand"]["gain"] or e["vault"]["gain"]]
    print("| change | hand out/in | hand gain (p) | vault out/in | vault gain (p) | pooled bound | keep: hand / vault / "
          "pooled / guard hand + gain pooled |")
    print("|---|---|---|---|---|---|---|")
    for e in moved:
        h, v, p = e["hand"], e["vault"], e["pooled"]
        keep = lambda g, t: "keep" if g["guard_holds"] and t["gain_passes"] else "-"   # noqa: E731
        print(f"| {e['change']} | {h['out']}/{h['in']} | {h['gain']:+.2f} ({h['p']:.3f}) | {v['out']}/{v['in']} | "
              f"{v['gain']:+.2f} ({v['p']:.3f}) | {p['drop_bound']:.1f} | {keep(h, h)} / {keep(v, v)} / {keep(p, p)} / "
              f"{keep(h, p)} |")
    summary = {"changes": len(moved),
               "gain_direction_agrees": sum(e["gain_direction_agrees"] for e in moved),
               "hit5_direction_agrees": sum(e["hit5_direction_agrees"] for e in moved),
               "vault_gain_passes_hand_loses": sum(e["vault"]["gain_passes"] and e["hand"]["gain"] < 0 for e in moved),
               "pooled_keeps_hand_loses_hit5": sum(e["pooled"]["guard_holds"] and e["pooled"]["gain_passes"]
                                                   and e["hand"]["out"] > e["hand"]["in"] for e in moved)}
    print(summary)
    (ROWS.parent / "keep-rule-kinds.json").write_text(json.dumps({"summary": summary, "changes": out}, indent=2))
    return summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--db", type=Path, required=True)
    m.add_argument("--hand", required=True, help="Comma-separated hand-written gold files.")
    m.add_argument("--vault", type=Path, required=True, help="Questions made from the vault's text.")
    sub.add_parser("analyse")
    a = ap.parse_args(argv)
    if a.cmd == "measure":
        measure(a.db, [Path(p) for p in a.hand.split(",")], a.vault)
    else:
        analyse()


if __name__ == "__main__":
    main()
