"""The A/B as a Report (tuner.reports): verdict, costs, quality overall and per level, the pairwise
tests, the questions won and lost, score histograms and the cost-quality plot."""

from __future__ import annotations

import json
import time
from pathlib import Path

from search_core import SearchCoreError

from tuner.ab.compare import AB_METRICS, PairComparison
from tuner.ab.verdicts import ab_verdict
from tuner.data.gold import LEVELS
from tuner.reports import Para, Plot, Report, Section, Table
from tuner.reports.plots import histograms, labelled_scatter

METRIC_NAMES = {"hit@1": "hit@1", "hit@5": "hit@5", "mrr": "MRR@10", "p@5": "P@5", "recall@5": "recall@5",
                "ndcg@10": "nDCG@10"}
MAX_MOVED_ROWS = 40    # per pair and direction; the JSON keeps them all


def _lat(c, stage, q):
    return c["latency"].get(stage, {}).get(q)


def _setup(d: dict) -> Section:
    p = d["params"]
    lines = [
        Para(f"Vault: {p['vault']}. Candidates: {', '.join(c['label'] for c in d['candidates'])}."),
        Para(f"Tuning questions {p['tune']} ({p['tune_n']} questions, {p['tune_probes']} probes: a candidate "
             "whose index no gate file fits gets a gate fitted on them; the Quality table says which gate decided); "
             f"metrics on "
             f"{p['eval']} ({p['eval_n']} questions, {p['eval_probes']} probes)"
             + (" — the SAME questions: no holdout was given, so gate accuracy is optimistic." if p["same_questions"]
                else f". {p['split']}" if p["split"] else ".")),
        Para(f"Each embedder has its own index built only from its own vectors (work dir {p['work']}; the embedding "
             f"cache is reused by content hash). Latency: every evaluation question searched once, no retrieval "
             f"cache, after {d['candidates'][0]['latency'].get('warmup', 5) if d['candidates'] else 5} warm-up "
             f"queries; samples per candidate are in the cost table. The whole A/B took {d['seconds']:.1f} s."),
    ]
    if d["interrupted"]:
        lines.append(Para(f"Interrupted (Ctrl-C): cut before finishing: {', '.join(d['cut'])}. The finished "
                          "candidates are reported below.", "bad"))
    return Section("Setup", tuple(lines))


def _costs(ok: list) -> Section:
    rows = []
    for c in ok:
        b = c["build"]
        built = "reused (already built)" if b.get("reused") else "built now"
        if b.get("model_loaded") is False:
            built = "reused (vault unchanged; model not loaded)"
        if b.get("shared_with_previous_candidate"):
            built = "same index as above"
        measured = f"reused, measured {c['reused_from']}" if c.get("reused_from") else "measured now"
        rows.append((c["label"], built, measured, b.get("seconds"), b.get("first_build_seconds"), b.get("embedded_now"),
                     b.get("vectors"), b.get("size_mb"), _lat(c, "embed", "p50"), _lat(c, "embed", "p95"),
                     _lat(c, "rerank", "p95"), _lat(c, "total", "p50"), _lat(c, "total", "p95"),
                     c["latency"].get("samples"), c["memory_mb"].get("growth"), c["memory_mb"].get("process_peak")))
    return Section("Cost", (Table(
        ("candidate", "index", "evaluation", "build s (this run)", "build s (first build)", "vectors embedded now",
         "vectors in index", "index MB", "query embed p50 ms", "query embed p95 ms", "rerank p95 ms",
         "total p50 ms", "total p95 ms", "latency samples", "RSS growth MB", "process peak RSS MB"),
        tuple(rows), "memory: resident-set growth of the A/B process while this candidate loaded and ran, and "
                     "the process's peak so far (one process runs every candidate). An evaluation of the same index content, "
                     "config and questions made by an earlier A/B is reused (latency included); --fresh re-measures"),))


def _gate_accuracy(gate: dict):
    """Accuracy over answerable questions alone only says every one was injected: with no probes there is
    nothing to measure a gate on, and the table says so instead of printing 1.0."""
    if not gate.get("probes"):
        return "n/a: no probes"
    return gate.get("gate_accuracy")


def _which_gate(c: dict) -> tuple[str, str, str]:
    """(which gate decided, its cut, where the cut came from) for one candidate, from its rows' own gate
    decision: a model's cut is a probability, the cosine gate's a cosine, and the two are not comparable."""
    rows = c["result"].get("per_query") or []
    g = next((q["gate"] for q in rows if q.get("gate")), None)
    t = c["threshold"]
    if g is None:                       # a report saved before the rows said which gate decided
        return "not recorded", f"{t}", "fitted" if c["threshold_fitted"] else "the gate's own"
    source = str(g["source"])
    if g["kind"] == "cosine":
        return ("cosine (no gate model fits this index)", f"cosine ≥ {round(g['threshold'], 4)}",
                "fitted on the tuning questions" if c["threshold_fitted"] else "the embedder's default")
    if source.endswith("gate_default.json"):
        name = "model: the shipped default"
    elif source.endswith(".gate.json"):
        name = f"model: the index's gate file ({Path(source).name})"
    else:
        name = f"model {source}"
    cut = f"P ≥ {round(g['threshold'], 4)}"
    return name, cut, "fitted with the model" if c["threshold_fitted"] else "the model's own"


def _quality(ok: list) -> Section:
    rows = tuple((c["label"], c["result"]["n"], *(c["result"]["overall"].get(m) for m in AB_METRICS),
                  *_which_gate(c), _gate_accuracy(c["result"]["gate"]), c["result"]["gate"].get("probes"),
                  c["result"]["gate"].get("probes_injected")) for c in ok)
    cols = ("candidate", "questions", *(METRIC_NAMES[m] for m in AB_METRICS), "gate that decided", "gate threshold",
            "threshold from", "gate accuracy", "probes", "probes injected")
    level_rows = []
    for lvl in [x for x in LEVELS if x != "probe"]:
        for c in ok:
            bl = c["result"]["by_level"].get(lvl)
            if bl and bl.get("n"):
                level_rows.append((lvl + (" (cross-lingual)" if lvl == "XL" else ""), c["label"], bl["n"],
                                   *(bl.get(m) for m in AB_METRICS)))
    blocks = [Table(cols, rows, "answerable questions of the evaluation set; gate accuracy over answerable + probes")]
    if level_rows:
        blocks.append(Table(("level", "candidate", "questions", *(METRIC_NAMES[m] for m in AB_METRICS)),
                            tuple(level_rows), "per level; the cross-lingual level (XL) on its own lines"
                            + ("" if any(r[0].startswith("XL") for r in level_rows)
                               else "; this evaluation set has no XL (cross-lingual) questions")))
    return Section("Quality", tuple(blocks))


def _pairs(d: dict) -> list[Section]:
    out = []
    for pr in map(PairComparison.from_json, d["pairs"]):
        rows = []
        for m in AB_METRICS:
            v = pr.metrics[m]
            dq = v.delta_questions if m in ("hit@1", "hit@5") else None
            rows.append((METRIC_NAMES[m], v.a, v.b, v.delta, dq, v.p_value, f"[{v.ci95[0]:+.3f}, {v.ci95[1]:+.3f}]",
                         v.verdict))
        blocks = [Para(f"A = {pr.a}, B = {pr.b}, {pr.n} answerable questions; one question moves hit@5 by "
                       f"{1 / pr.n:.3f}. Paired randomization test (10,000 sign flips) and bootstrap 95% "
                       "interval of the mean difference B − A."),
                  Table(("metric", "A", "B", "B − A", "in questions", "p", "95% CI", "verdict (α = 0.05)"),
                        tuple(rows))]
        for moved, word in ((pr.b_wins, f"{pr.b} ranks the gold higher"), (pr.b_loses, f"{pr.a} ranks the gold higher")):
            rows = tuple((m.id, m.level, m.query, m.rank_a or "> 10", m.rank_b or "> 10")
                         for m in moved[:MAX_MOVED_ROWS])
            more = f" (first {MAX_MOVED_ROWS} shown; all in the JSON)" if len(moved) > MAX_MOVED_ROWS else ""
            blocks.append(Table(("question", "level", "query", f"gold rank, {pr.a}", f"gold rank, {pr.b}"),
                                rows, f"{len(moved)} questions where {word}{more}") if moved
                          else Para(f"No question where {word}."))
        blocks.append(Para(f"{pr.ties} questions have the gold at the same rank in both."))
        out.append(Section(f"{pr.b} vs {pr.a}", tuple(blocks)))
    return out


def _plots(ok: list) -> Section:
    blocks = []
    for c in ok:
        pq = c["result"]["per_query"]
        ans = [q["top_score"] for q in pq if q["level"] != "probe"]
        probes = [q["top_score"] for q in pq if q["level"] == "probe"]
        svg = histograms({"answerable": ans, "probes": probes}, xlabel="top hit cosine (what the gate reads)",
                         title=c["label"])
        overlap = ""
        if ans and probes:
            overlap = (f"; {sum(p >= min(ans) for p in probes)} of {len(probes)} probes score at or above the lowest "
                       f"answerable question ({min(ans):.3f})")
        blocks.append(Plot(f"top scores, {c['label']}", svg,
                           f"answerable {len(ans)}: {min(ans, default=0):.3f}–{max(ans, default=0):.3f}; probes "
                           f"{len(probes)}: {min(probes, default=0):.3f}–{max(probes, default=0):.3f}; gate: "
                           f"{_which_gate(c)[0]}, {_which_gate(c)[1]}{overlap}"))
    pts = [(_lat(c, "total", "p95") or 0.0, c["result"]["overall"].get("hit@5") or 0.0,
            c["build"].get("size_mb") or 0.0, c["label"]) for c in ok]
    if pts:
        svg = labelled_scatter(pts, xlabel="p95 search latency (ms)", ylabel="hit@5", title="cost vs quality",
                               size_label="index MB")
        blocks.append(Plot("cost vs quality", svg, "; ".join(f"{p[3]}: hit@5 {p[1]:.3f} at p95 {p[0]:.1f} ms, "
                                                               f"index {p[2]:.1f} MB" for p in pts)))
    return Section("Plots", tuple(blocks))


def _not_compared(others: list) -> Section:
    return Section("Not compared", (Table(("candidate", "status", "why, and what to do"),
                                          tuple((c["label"], c["status"], c["message"]) for c in others)),))


def ab_report(d: dict, generated: str = "") -> Report:
    ok = [c for c in d["candidates"] if c["status"] == "ok"]
    others = [c for c in d["candidates"] if c["status"] != "ok"]
    title = "A/B: " + " vs ".join(c["label"] for c in d["candidates"])
    sections = [_setup(d)]
    if others:
        sections.append(_not_compared(others))
    if ok:
        sections += [_costs(ok), _quality(ok)]
    sections += _pairs(d)
    if ok:
        sections.append(_plots(ok))
    v = ab_verdict(d)
    sections.append(Section("What to do", (Para(v.fix()),)))
    return Report("ab", title, v.message(), tuple(sections), data=d,
                  generated=generated or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))


def render_saved(path: Path, fmt: str, out: Path | None):
    """A report saved with --format json, rendered again in another format (no model is loaded)."""
    from tuner.reports import emit

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SearchCoreError(f"cannot read the saved A/B report {path}: {e}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "ab":
        kind = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
        raise SearchCoreError(f"{path} is not an A/B report saved with --format json (kind {kind!r})")
    return emit(ab_report(doc["data"], generated=doc.get("generated", "")), fmt, out)
