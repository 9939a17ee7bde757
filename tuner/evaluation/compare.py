"""Compare two evaluation runs of the same gold set: deltas, a paired test, wins/ties/losses, flips."""

from __future__ import annotations

from tuner.evaluation.stats import bootstrap_ci, paired_randomization

ALPHA = 0.05
METRICS = ("hit@5", "mrr", "ndcg@10", "p@5", "recall@5")


def compare(a: dict, b: dict, *, seed: int = 0) -> dict:
    """a, b: EvalResult.as_json() of the same gold set. Positive deltas mean B is better."""
    if a.get("gold") != b.get("gold"):
        raise ValueError(f"runs are on different gold sets ({a.get('gold')} vs {b.get('gold')}); compare like with like")
    qa = {q["id"]: q for q in a["per_query"] if q["level"] != "probe"}
    qb = {q["id"]: q for q in b["per_query"] if q["level"] != "probe"}
    ids = sorted(set(qa) & set(qb))
    if not ids:
        raise ValueError("the two runs share no answerable question")
    out = {"gold": a["gold"], "n": len(ids), "a": a.get("config_hash"), "b": b.get("config_hash"), "metrics": {}}
    for m in METRICS:
        xa, xb = [qa[i][m] for i in ids], [qb[i][m] for i in ids]
        p = paired_randomization(xa, xb, seed=seed)
        lo, hi = bootstrap_ci(xa, xb, seed=seed)
        delta = sum(xb) / len(ids) - sum(xa) / len(ids)
        out["metrics"][m] = {"a": round(sum(xa) / len(ids), 4), "b": round(sum(xb) / len(ids), 4),
                             "delta": round(delta, 4), "p_value": round(p, 4), "ci95": [round(lo, 4), round(hi, 4)],
                             "verdict": "within noise" if p >= ALPHA else ("B better" if delta > 0 else "A better")}
    rr = [(qb[i]["mrr"] - qa[i]["mrr"]) for i in ids]
    out["wins"] = sum(d > 0 for d in rr)
    out["ties"] = sum(d == 0 for d in rr)
    out["losses"] = sum(d < 0 for d in rr)
    out["flipped"] = [{"id": i, "query": qa[i]["query"], "a_rank": qa[i]["first_rank"], "b_rank": qb[i]["first_rank"],
                       "now": "hit" if qb[i]["hit@5"] else "miss"}
                      for i in ids if qa[i]["hit@5"] != qb[i]["hit@5"]]
    one_q = 1 / len(ids)
    out["one_question_moves_hit5_by"] = round(one_q, 4)
    return out


def format_compare(c: dict) -> str:
    lines = [f"{c['gold']}: {c['n']} questions, A={c['a']} B={c['b']} "
             f"(one question moves hit@5 by {c['one_question_moves_hit5_by']:.3f})",
             f"{'metric':<10} {'A':>7} {'B':>7} {'delta':>7} {'p':>7}  95% CI            verdict"]
    for m, v in c["metrics"].items():
        lines.append(f"{m:<10} {v['a']:>7.3f} {v['b']:>7.3f} {v['delta']:>+7.3f} {v['p_value']:>7.4f}  "
                     f"[{v['ci95'][0]:+.3f}, {v['ci95'][1]:+.3f}]  {v['verdict']}")
    lines.append(f"per-question reciprocal rank: {c['wins']} wins, {c['ties']} ties, {c['losses']} losses (B vs A)")
    for f in c["flipped"]:
        lines.append(f"  flipped {f['id']}: rank {f['a_rank']} -> {f['b_rank']} ({f['now']} now)  {f['query']}")
    return "\n".join(lines)
