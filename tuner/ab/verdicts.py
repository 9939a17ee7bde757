"""What an A/B found, as a value (tuner.reasons): a kind and its fields, whose message (the report's verdict
line, and the error `ab` exits with when nothing was compared) and fix (what to do next) come from one
table, so the advice fits the result: a difference within noise is never told to switch models."""

from __future__ import annotations

from tuner.ab.compare import PairComparison
from tuner.reasons import Reason, ReasonTable, Wording

NOTHING_COMPARED = "nothing_compared"   # fewer than two candidates measured
WITHIN_NOISE = "within_noise"           # every candidate within noise of the first on hit@5 and MRR
DIFFERS = "differs"                     # at least one candidate beyond noise of the first

VERDICTS = ReasonTable("A/B verdict", {
    NOTHING_COMPARED: Wording(
        "no comparison: {finished} candidate(s) finished{tail}",
        "an A/B needs two candidates that run: make the others loadable here (each one's reason above says "
        "what is missing) or leave them out of --embedders/--rerankers, then run `autoresearch ab` again"),
    WITHIN_NOISE: Wording(
        "{pairs}{tail}",
        "no candidate differs from {first} beyond noise on these {n} questions: keep the one you use (or the "
        "cheaper one, by the cost table), or add questions (`autoresearch gold make`) so a smaller difference "
        "can show"),
    DIFFERS: Wording(
        "{pairs}{tail}",
        "{beyond} differ(s) from {first} beyond noise: read the questions each one moved before switching; to "
        "switch, set the model in your config (`embedder`, `reranker`) and rebuild the index for a new embedder "
        "(`autoresearch index --full`)"),
})


def ab_verdict(data: dict) -> Reason:
    """The verdict of an A/B's data (ABRun.to_json, as the report and a saved report hold it)."""
    ok = [c for c in data["candidates"] if c["status"] == "ok"]
    others = [c for c in data["candidates"] if c["status"] != "ok"]
    tail = f"; not compared: {', '.join(c['label'] + ' (' + c['status'] + ')' for c in others)}" if others else ""
    if len(ok) < 2:
        return VERDICTS(NOTHING_COMPARED, finished=len(ok), tail=tail)
    parts, beyond = [], []
    pairs = [PairComparison.from_json(p) for p in data["pairs"]]
    for pr in pairs:
        h, mrr = pr.metrics["hit@5"], pr.metrics["mrr"]
        dq = int(round(h.delta_questions))
        noise = h.within_noise and mrr.within_noise
        if not noise:
            beyond.append(pr.b)
        parts.append(f"{pr.b} vs {pr.a}: hit@5 {dq:+d} of {pr.n} questions ({h.a:.3f} -> {h.b:.3f}, "
                     f"p={h.p_value:.3f}), MRR@10 {mrr.delta:+.3f} (p={mrr.p_value:.3f}): "
                     + ("within noise" if noise else "NOT within noise"))
    fields = dict(pairs="; ".join(parts), tail=tail, first=pairs[0].a if pairs else ok[0]["label"],
                  n=pairs[0].n if pairs else 0)
    if beyond:
        return VERDICTS(DIFFERS, **fields, beyond=", ".join(beyond))
    return VERDICTS(WITHIN_NOISE, **fields)
