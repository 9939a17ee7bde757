"""The main job on the embedded default, as a library function: index the demo vault, make the questions its
own text supplies, evaluate the hand-set start, sweep, report. `autoresearch demo` prints what this returns;
tests call it directly.

The sweep tunes on the hand-written tuning set (24 questions, 12 probes) plus questions `gold make` cuts from
the demo vault, as the daemon's night does: on 24 questions alone the gains of the keyword and entity
channels (3-8 questions moved, p 0.12-0.75) are within noise and nothing but the gate threshold is kept. The
hit@5 guard still reads the hand-written questions alone; the gain test reads every kind (docs/tuner.md). The
holdout (demo-holdout.yaml) is hand-written and decides nothing: it only says whether the night held.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from search_core.config import load_config
from search_core.index.indexer import index_vault
from search_core.search.pipeline import Searcher
from tuner.data.bundled import default_space, demo_gold, demo_start, demo_vault
from tuner.data.gold import load_gold
from tuner.data.night_gold import NightGold, refresh_vault_questions, write_night_gold
from tuner.data.vault_questions import MADE_N
from tuner.sweep.variables import describe_change
from tuner.evaluation.evaluate import EvalResult, evaluate
from tuner.ledger.ledger import Ledger
from tuner.ledger.schema import RoundDecision
from tuner.reports.night_evidence import KIND_WORDS, NightEvidence, night_evidence
from tuner.reports.text import format_eval
from tuner.sweep.loop import Sweep, SweepParams
from tuner.sweep.summary import SweepSummary


@dataclass(frozen=True)
class DemoRun:
    db: Path
    index_report: object
    eval_start: EvalResult            # the hand-set start on the hand-written questions (eval-start.json)
    summary: SweepSummary
    reports: dict[str, Path]   # format -> path of the morning report ("md", "html")
    tuning: NightGold | None = None         # the tuning set the sweep stood on, by kind
    evidence: NightEvidence | None = None   # which kinds decided each kept change


# Questions `gold make` cuts from the demo vault for the tuning set (of about 1,100 it can make there), made
# its default way: its ~300 anchors first, each without its link, then headings and aliases
DEMO_VAULT_QUESTIONS = MADE_N


def index_lines(report, vault) -> list[str]:
    """The demo's first step as printed: what was indexed, then what the index said beside it (a damaged
    embedding cache set aside, one migrated to its compact layout, an eviction), which `index` prints too."""
    return [f"1. indexed {report.notes} notes / {report.chunks} chunks from {vault} into {report.db} "
            f"in {report.seconds:.1f}s ({report.embedded} embedded now)", *(f"   {w}" for w in report.warnings)]


def next_steps(out, db) -> str:
    """The commands the demo ends on. The winner goes to a file in the demo's folder: `best.toml` in the
    current folder is where the README puts the user's own vault's winner, and the demo's would replace it."""
    best = f"{out}/best.toml"
    return (f"next: autoresearch ledger --ledger {out}/ledger.sqlite; "
            f"autoresearch best --ledger {out}/ledger.sqlite --out {best}; "
            f"autoresearch search \"GraphRAG 커뮤니티 요약\" --db {db} --config {best} --explain")


def run_demo(out: str | Path, *, rounds: int = 119, seed: int = 0, echo=print, progress=None,
             index_progress=None, cache: str | Path | None = None,
             vault_questions: int = DEMO_VAULT_QUESTIONS) -> DemoRun:
    """echo(line): the steps as they happen; progress(line): one line per sweep round. vault_questions: how many
    questions from the vault's own text join the hand-written tuning set (0: the hand-written set alone)."""
    out = Path(out)
    db = out / "index.sqlite"
    vault, space = demo_vault(), default_space()
    report = index_vault(vault, db, progress=index_progress, cache=cache)
    for line in index_lines(report, vault):
        echo(line)
    searcher = Searcher(db)
    hand = demo_gold("demo-tune.yaml")
    tuning = None
    if vault_questions:
        made = refresh_vault_questions(vault, out / "evidence", n=vault_questions, seed=seed)
        tuning = write_night_gold([hand, made.path], out / "evidence", name="demo-tuning",
                                  known_ids=searcher.view.notes.keys())
        kinds = ", ".join(f"{k} {v}" for k, v in made.by_kind.items())
        echo(f"2. the tuning questions: {tuning.describe()} ({kinds}: `gold make`, {made.path}); the hit@5 guard "
             "reads the hand-written ones alone, the gain test all of them")
    start = load_config(demo_start()).replace(embedder=searcher.embedder_name)
    res = evaluate(searcher, load_gold(hand), start)
    (out / "eval-start.json").write_text(json.dumps(res.to_json(), ensure_ascii=False, indent=1))
    echo(f"{3 if tuning else 2}. the starting config ({demo_start().name}: vector search alone, RRF k = 60) on "
         "the hand-written tuning set:")
    echo("   " + format_eval(res).replace("\n", "\n   "))
    ledger = Ledger(out / "ledger.sqlite")
    try:
        params = SweepParams(db=str(db), gold=str(tuning.path if tuning else hand),
                             holdout=str(demo_gold("demo-holdout.yaml")), space=str(space), rounds=rounds,
                             seed=seed, vault=str(vault), index_dir=str(out / "indexes"))
        sw = Sweep(params, ledger, start=start, progress=progress)
        echo(f"{4 if tuning else 3}. sweep {sw.id}: {rounds} rounds over {space.name}")
        summary = sw.run()
        evidence = night_evidence(ledger.sweep(sw.id), ledger.rounds(sw.id), sw.bench.score_cfg)
    finally:
        ledger.close()
    from tuner.reports import emit
    from tuner.reports.sweep import sweep_report
    rep = sweep_report(out / "ledger.sqlite", sw.id, None)
    reports = {fmt: Path(emit(rep, fmt, out / f"morning-report.{fmt}")) for fmt in ("md", "html")}
    return DemoRun(db, report, res, summary, reports, tuning, evidence)


def format_evidence(ev: NightEvidence | None) -> str:
    """Which evidence the sweep stood on, and which of it decided each kept change, as terminal lines."""
    if ev is None:
        return ""
    lines = [f"evidence: {ev.describe()}"]
    for k in ev.kept:
        moved = "; ".join(f"{KIND_WORDS[m.source]} {m.up} up / {m.down} down" for m in k.by_kind if m.up or m.down)
        lines.append(f"  round {k.round} {describe_change(k.variable, k.old, k.new)}: decided by {k.why}"
                     + (f" [{moved}]" if moved else ""))
    if ev.lookups_only():
        lines.append("warning: " + ev.lookups_only())
    return "\n".join(lines)


def decision_counts(counts: dict[RoundDecision, int]) -> str:
    """{decision: n} as words, most first: "111 rejected:no_gain, 1 kept"."""
    return ", ".join(f"{n} {d.value}" for d, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].value)))


def format_summary(s: SweepSummary, ledger=None) -> str:
    """A sweep summary (Sweep.run's return) as terminal lines; `ledger`: the file it was written to."""
    lines = [f"sweep {s.sweep}: {s.rounds} rounds, {s.status or ''}; "
             f"decisions: {decision_counts(s.decisions) or 'none'}"]
    obj = s.objective
    lines.append(f"tuning  {obj}: {s.start.value:.4f} -> {s.final.value:.4f}; hit@5 {s.start.hit5:.4f} -> "
                 f"{s.final.hit5:.4f}")
    for step in s.path:
        lines.append(f"  kept round {step.round}: {describe_change(step.variable, step.old, step.new)} ({step.reason})")
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
