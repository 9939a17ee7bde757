"""The main job on the embedded default, as a library function: index the demo vault, evaluate the
default config, sweep, report. `autoresearch demo` prints what this returns; tests call it directly."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from search_core.config import load_config
from search_core.index.indexer import index_vault
from search_core.search.pipeline import Searcher
from tuner.data.bundled import default_space, demo_gold, demo_start, demo_vault
from tuner.data.gold import load_gold
from tuner.evaluation.evaluate import evaluate
from tuner.ledger.ledger import Ledger
from tuner.reports.text import format_eval
from tuner.sweep.loop import Sweep, SweepParams
from tuner.sweep.summary import SweepSummary


@dataclass(frozen=True)
class DemoRun:
    db: Path
    index_report: object
    eval_start: dict
    summary: SweepSummary
    reports: dict          # format -> path of the morning report ("md", "html")


def run_demo(out: str | Path, *, rounds: int = 119, seed: int = 0, echo=print, progress=None,
             index_progress=None, cache: str | Path | None = None) -> DemoRun:
    """echo(line): the steps as they happen; progress(line): one line per sweep round."""
    out = Path(out)
    db = out / "index.sqlite"
    vault, space = demo_vault(), default_space()
    report = index_vault(vault, db, progress=index_progress, cache=cache)
    echo(f"1. indexed {report.notes} notes / {report.chunks} chunks from {vault} into {db} "
         f"in {report.seconds:.1f}s ({report.embedded} embedded now)")
    searcher = Searcher(db)
    start = load_config(demo_start()).replace(embedder=searcher.embedder_name)
    res = evaluate(searcher, load_gold(demo_gold("demo-tune.yaml")), start)
    (out / "eval-start.json").write_text(json.dumps(res.to_json(), ensure_ascii=False, indent=1))
    echo(f"2. the starting config ({demo_start().name}: vector search alone, RRF k = 60) on the tuning set:")
    echo("   " + format_eval(res).replace("\n", "\n   "))
    ledger = Ledger(out / "ledger.sqlite")
    try:
        params = SweepParams(db=str(db), gold=str(demo_gold("demo-tune.yaml")),
                             holdout=str(demo_gold("demo-holdout.yaml")), space=str(space), rounds=rounds,
                             seed=seed, vault=str(vault), index_dir=str(out / "indexes"))
        sw = Sweep(params, ledger, start=start, progress=progress)
        echo(f"3. sweep {sw.id}: {rounds} rounds over {space.name}")
        summary = sw.run()
    finally:
        ledger.close()
    from tuner.reports import emit
    from tuner.reports.sweep import sweep_report
    rep = sweep_report(out / "ledger.sqlite", sw.id, None)
    reports = {fmt: Path(emit(rep, fmt, out / f"morning-report.{fmt}")) for fmt in ("md", "html")}
    return DemoRun(db, report, res.to_json(), summary, reports)


def decision_counts(counts: dict) -> str:
    """{decision: n} as words, most first: "111 rejected:no_gain, 1 kept" (a decision may be a RoundDecision)."""
    return ", ".join(f"{n} {str(d)}" for d, n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0]))))


def format_summary(s: SweepSummary, ledger=None) -> str:
    """A sweep summary (Sweep.run's return) as terminal lines; `ledger`: the file it was written to."""
    lines = [f"sweep {s.sweep}: {s.rounds} rounds, {s.status or ''}; "
             f"decisions: {decision_counts(s.decisions) or 'none'}"]
    obj = s.objective
    lines.append(f"tuning  {obj}: {s.start.value:.4f} -> {s.final.value:.4f}; hit@5 {s.start.hit5:.4f} -> "
                 f"{s.final.hit5:.4f}")
    for step in s.path:
        lines.append(f"  kept round {step.round}: {step.variable} {step.old!r} -> {step.new!r} ({step.reason})")
    if not s.path and s.rounds:
        lines.append("nothing kept; why, and which questions would decide: autoresearch report sweep "
                     f"--sweep {s.sweep}" + (f" --ledger {ledger}" if ledger else ""))
    h = s.holdout
    if h:
        flag = "HOLDOUT REGRESSED: the tuning gain did not carry over" if h.holdout_regressed else "holdout ok"
        if h.within_noise:
            flag += " (every holdout difference is within noise)"
        p = h.compare.metrics["hit@5"]
        lines.append(f"holdout {h.gold}: hit@5 {h.start.hit5:.4f} -> {h.final.hit5:.4f} "
                     f"(p={p.p_value:.3f}, {p.verdict}); {obj} {h.start.value:.4f} -> {h.final.value:.4f}; "
                     f"{flag}")
    return "\n".join(lines)
