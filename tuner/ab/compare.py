"""The A/B's comparison of finished candidates: B against A per metric with the paired randomization test
and a bootstrap interval, the questions won and lost, and the one-line verdict."""

from __future__ import annotations

from tuner.evaluation.compare import answerable, paired_metrics
from tuner.evaluation.metrics import metric_names
from tuner.ab.records import CandidateResult

AB_METRICS = metric_names("hit@1", "hit@5", "mrr", "p@5", "recall@5", "ndcg@10")


def compare_pair(a: CandidateResult, b: CandidateResult, *, seed: int = 0) -> dict:
    """B against A on the answerable evaluation questions: per metric the mean of each, the difference
    (and in questions, for the 0/1 metrics), the paired randomization p-value and a bootstrap 95% CI."""
    qa, qb = answerable(a.result["per_query"]), answerable(b.result["per_query"])
    ids = [i for i in qa if i in qb]
    n = len(ids)
    out = {"a": a.label, "b": b.label, "n": n, "metrics": {}}
    for m, t in paired_metrics(qa, qb, ids, AB_METRICS, seed=seed).items():
        out["metrics"][m] = {"a": t.a, "b": t.b, "delta": t.delta, "delta_questions": t.delta_questions,
                             "p_value": t.p_value, "ci95": list(t.ci95), "within_noise": t.within_noise}

    def rank(q):
        return q["first_rank"] if q["first_rank"] is not None else 10 ** 6
    moved = [{"id": i, "level": qa[i]["level"], "query": qa[i]["query"], "gold": qa[i]["gold"],
              "rank_a": qa[i]["first_rank"], "rank_b": qb[i]["first_rank"]}
             for i in ids if rank(qa[i]) != rank(qb[i])]
    out["b_wins"] = [m for m in moved if rank(qb[m["id"]]) < rank(qa[m["id"]])]
    out["b_loses"] = [m for m in moved if rank(qb[m["id"]]) > rank(qa[m["id"]])]
    out["ties"] = n - len(moved)
    return out


def verdict(data: dict) -> str:
    ok = [c for c in data["candidates"] if c["status"] == "ok"]
    others = [c for c in data["candidates"] if c["status"] != "ok"]
    tail = f"; not compared: {', '.join(c['label'] + ' (' + c['status'] + ')' for c in others)}" if others else ""
    if len(ok) < 2:
        return (f"no comparison: {len(ok)} candidate(s) finished" + tail)
    parts = []
    for pr in data["pairs"]:
        h = pr["metrics"]["hit@5"]
        mrr = pr["metrics"]["mrr"]
        dq = int(round(h["delta_questions"]))
        word = "within noise" if h["within_noise"] and mrr["within_noise"] else "NOT within noise"
        parts.append(f"{pr['b']} vs {pr['a']}: hit@5 {dq:+d} of {pr['n']} questions ({h['a']:.3f} -> {h['b']:.3f}, "
                     f"p={h['p_value']:.3f}), MRR@10 {mrr['delta']:+.3f} (p={mrr['p_value']:.3f}): {word}")
    return "; ".join(parts) + tail
