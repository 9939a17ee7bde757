"""Plain-text tables for the terminal."""

from __future__ import annotations

from tuner.evaluation.evaluate import EvalResult

COLS = ("n", "hit@1", "hit@5", "mrr", "p@5", "recall@5", "ndcg@10", "coverage")


def format_eval(res: EvalResult) -> str:
    lines = [f"{res.gold} with config {res.config_hash} on {res.index.db if res.index else '(no index)'} "
             f"(embedder {res.index.embedder if res.index else None}, reranker {res.config.search.reranker})",
             "level    " + " ".join(f"{c:>8}" for c in COLS)]
    rows = [("overall", res.overall)] + [(lv, r.metrics) for lv, r in res.by_level.items()]
    for name, m in rows:
        if not m.get("n"):
            continue
        lines.append(f"{name:<8} " + " ".join(f"{m['n']:>8d}" if c == "n" else f"{m.get(c, 0):>8.3f}" for c in COLS))
    lat = res.latency_ms
    if "total" in lat:
        total = lat["total"]
        lines.append(f"latency  total p50 {total.p50:.1f} ms, p95 {total.p95:.1f} ms"
                     + (f" over {total.n} timings" if total.n else "") + "; " +
                     ", ".join(f"{k} {v.p95:.1f}" for k, v in lat.items() if k != "total") + " (p95 ms)")
    s = res.score100
    if s:
        # a sweep scores speed from the cost model's prediction (the same on a busy machine), `eval` from this
        # run's stopwatch: the two scores of one config differ by that, and the line says which it is
        by = ("the cost model's predicted p95" if res.measured_latency_ms is not None else
              "this run's measured p95; a sweep charges the cost model's prediction, so its score differs")
        lines.append(f"score    {s.total:.1f}/100 (quality {s.quality:.1f}/60, speed {s.speed:.1f}/40 from "
                     f"{by}) {'PASS' if s.passed else 'below the pass line 80'}")
    g = res.gate
    if g.probes:
        lines.append(f"gate     probes injected {g.probes_injected}/{g.probes} "
                     f"(false inject {g.probe_false_inject_rate:.2f}); answerable injected "
                     f"{g.answerable_inject_rate:.2f}; gate accuracy {g.gate_accuracy:.2f}")
    misses = [q for q in res.per_query if q.level != "probe" and not q.metrics.get("hit@5")]
    if misses:
        lines.append(f"misses   {len(misses)}: " + ", ".join(q.id for q in misses[:30]) +
                     (" ..." if len(misses) > 30 else ""))
    for gap in res.possible_gold_gaps[:20]:
        lines.append(f"possible gold gap  {gap.question} -> {gap.note_id} (rank {gap.rank}): "
                     + "; ".join(gap.reasons))
    for w in res.warnings:
        lines.append(f"warning  {w}")
    return "\n".join(lines)
