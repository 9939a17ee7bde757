"""The morning report of one sweep, read from the ledger (never searching): verdict first, then the
progress plot, kept changes, rejections by reason, per-level start vs final, holdout flips, and the
rounds that need a fix. A night that kept nothing says why, with numbers, and what evidence would
decide (tuner/reports/evidence_gap.py)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from search_core import SearchCoreError
from search_core.index.store import connect

from tuner.sweep.keep_rule import objective_value
from tuner.ledger.ledger import Ledger
from tuner.data.gold import GoldSet
from tuner.evaluation.evaluate import EvalResult
from tuner.evaluation.score import ScoreConfig
from tuner.ledger.round import Round
from tuner.ledger.schema import RoundDecision
from tuner.ledger.sweep_record import SweepRecord
from tuner.sweep.summary import HoldoutCheck
from tuner.promotion.promote import History, PromotionEvent, holdout_verdict, runs_dir
from tuner.reports import Para, Plot, Report, Section, Table
from tuner.reports.evidence_gap import EvidenceGap, evidence_gap, is_empty_night, spread_label, tuning_gold
from tuner.reports.night_evidence import KIND_WORDS, NightEvidence, night_evidence
from tuner.reports.plots import progress_plot
from tuner.sweep.reasons import (DRIFT_VERDICT, DRIFTED, LATENCY_DRIFT, WITHIN_CALIBRATION,
                                 advice_paragraph)
from tuner.sweep.variables import describe_change, round_reason

# columns a report reads; a ledger written before them is refused with the fix instead of half-read
REQUIRED_COLUMNS = {"sweeps": {"id", "created", "params", "start_config", "status", "summary"},
                    "rounds": {"sweep", "round", "variable", "old", "new", "config", "config_hash", "baseline_hash",
                               "index_fingerprint", "metrics", "objective", "decision", "reason"}}


def open_ledger(path: str | Path) -> Ledger:
    """The ledger at `path`, after checking that it exists and has the columns reports read."""
    path = Path(path)
    if not path.exists():
        raise SearchCoreError(f"no ledger at {path}; run `autoresearch sweep` (or the daemon) first, or pass --ledger")
    conn = connect(path, readonly=True)
    try:
        for table, need in REQUIRED_COLUMNS.items():
            have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
            missing = need - have
            if not have:
                raise SearchCoreError(f"{path} is not a ledger (it has no {table} table); pass the file "
                                      "`autoresearch sweep --ledger` wrote (default runs/ledger.sqlite)")
            if missing:
                raise SearchCoreError(f"{path} has an older ledger schema ({table} lacks {', '.join(sorted(missing))}); "
                                      "it cannot be reported on: start a new ledger with --ledger NEW.sqlite "
                                      "(the old file is left as it is)")
    except SearchCoreError:
        raise
    except Exception as e:
        raise SearchCoreError(f"{path} is not a readable ledger: {e}") from None
    finally:
        conn.close()
    return Ledger(path)


def pick_sweep(lg: Ledger, sweep_id: str | None) -> SweepRecord:
    info = lg.sweep(sweep_id)
    if info is None:
        ids = [s.id for s in lg.sweeps()][-8:]
        known = f"; sweeps in it: {', '.join(ids)}" if ids else "; it has no sweeps yet"
        raise SearchCoreError((f"no sweep {sweep_id!r} in {lg.path}" if sweep_id else f"no sweep in {lg.path}") + known)
    return info


def _fmt(v, digits=4) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


# measured p95 over predicted, median over a sweep's evaluated rounds, outside [1 / DRIFT, DRIFT]: the
# machine ran much busier (or quieter) than when the cost model was calibrated. 1.5: on a quiet machine
# the ratio stayed within 0.8-1.25 on the three sets measured (BENCHMARKS.md, the cost model).
DRIFT = 1.5


@dataclass(frozen=True)
class CalibrationUsed:
    key: str
    embedder: str
    taken_at: str
    rerankers: tuple[str, ...]

    def to_json(self) -> dict:
        return {"key": self.key, "embedder": self.embedder, "taken_at": self.taken_at, "rerankers": list(self.rerankers)}


@dataclass(frozen=True)
class LatencyDrift:
    """How far the stopwatch ran from the cost model over a sweep's evaluated rounds."""
    calibrations: tuple[CalibrationUsed, ...]
    median_ratio: float | None         # measured p95 / predicted p95, the median over the rounds
    rounds: int                        # rounds with both figures
    drifted: bool

    def to_json(self) -> dict:
        return {"calibrations": [c.to_json() for c in self.calibrations], "median_ratio": self.median_ratio,
                "rounds": self.rounds, "drifted": self.drifted}


def latency_drift(rounds: list[Round]) -> LatencyDrift:
    """How far the stopwatch ran from the cost model over a sweep (it never decides; this says whether the
    night was like the calibration): the calibrations used, the median ratio, and whether it drifted."""
    charges = [r.result.latency_charge for r in rounds if r.result is not None and
               r.result.latency_charge is not None and r.result.latency_charge.by_cost_model]
    ratios = sorted(c.measured_over_predicted for c in charges if c.measured_over_predicted)
    cals = {}
    for c in charges:
        cal = c.calibration                 # the calibration's JSON as the row stores it
        cals.setdefault(cal["key"], CalibrationUsed(cal["key"], cal["embedder"], cal["taken_at"],
                                                    tuple(sorted(cal.get("rerank_per_pair", {})))))
    med = ratios[len(ratios) // 2] if ratios else None
    return LatencyDrift(tuple(cals.values()), med, len(ratios), med is not None and not (1 / DRIFT <= med <= DRIFT))


def _promotion(sweep_id: str, runs) -> PromotionEvent | None:
    p = runs_dir(runs) / "promotions.sqlite"
    if not p.exists():
        return None
    h = History(runs)
    try:
        evs = [e for e in h.events() if e.sweep == sweep_id and e.kind in ("promoted", "declined")]
    finally:
        h.close()
    return evs[-1] if evs else None


@dataclass(frozen=True)
class SweepData:
    """What the morning report reads of one sweep."""
    sweep: SweepRecord
    rounds: list[Round]
    holdout: HoldoutCheck | None
    promotion: PromotionEvent | None   # the promotion history's last event naming the sweep
    gold: GoldSet | None = None        # the tuning questions' text, for an empty night's disagreements
    score_config: ScoreConfig | None = None


def sweep_data(ledger_path: str | Path, sweep_id: str | None = None, runs=None) -> SweepData:
    lg = open_ledger(ledger_path)
    try:
        info = pick_sweep(lg, sweep_id)
        rounds = lg.rounds(info.id)
        holdout = lg.holdout(info.id)
    finally:
        lg.close()
    return SweepData(info, rounds, holdout, _promotion(info.id, runs),
                     tuning_gold(info) if is_empty_night(rounds) else None, _score_config(info))


def _score_config(info: SweepRecord):
    """The rubric the sweep scored with (its [score] file), else the default one."""
    from tuner.evaluation.score import ScoreConfig, load_score_config
    try:
        return load_score_config(info.score_config)
    except (SearchCoreError, OSError):
        return ScoreConfig()


def tuning_probes(rounds: list[Round]) -> int:
    """How many probes the tuning set has, from the evaluated rows' questions."""
    return max((sum(q.level == "probe" for q in r.result.per_query) for r in rounds if r.result is not None),
               default=0)


def evidence_section(gap: EvidenceGap) -> Section:
    """Why nothing was kept, in numbers, and what to add."""
    obj, k = gap.objective, gap.points_per_share
    blocks = [Table(("level", "questions", "at rank 1 under every config", "in the top 10 under none"),
                    tuple((lv.level, lv.questions, lv.saturated, lv.never_found) for lv in gap.levels)
                    + (("all", gap.answerable, len(gap.saturated), len(gap.never_found)),),
                    f"{gap.answerable} answerable tuning questions and {gap.probes} probes, over the "
                    f"{gap.configs} configs evaluated")]
    d = gap.detectable
    if gap.gains:
        blocks.append(Table(("round", "variable", "value", "decision", f"{obj} delta",
                             f"questions whose {obj} moved (up/down)", "paired p"),
                            tuple((g.round, g.variable, g.value, g.decision, g.delta,
                                   f"{g.moved} ({g.better}/{g.worse})", g.p_value) for g in gap.gains),
                            "the largest gains seen, each against the baseline it was judged on"))
    if d is not None:
        smallest = ("none: " + (f"only {d.headroom} questions have room to rise" if d.headroom < (d.min_rising or 0)
                                else "no config moved any question, so there is no noise to measure a gain against")
                    if d.smallest_gain is None else f"{d.smallest_gain * k:+.2f} {obj}")
        needed = ("–" if d.questions_needed is None else
                  f"more than {d.searched_up_to}" if d.out_of_reach else str(d.questions_needed))
        blocks.append(Table(("questions", "must rise (none falling) for p < alpha", f"with room to rise in {obj}",
                             "smallest gain detectable", "questions to detect the best gain seen"),
                            ((d.n, d.min_rising, d.headroom, smallest, needed),),
                            f"what the paired test can detect at this size (alpha {d.alpha:g})"))
    if gap.disagreements:
        blocks.append(Table(("question", "level", "best rank", "worst rank", "spread", "query", "gold notes"),
                            tuple((s.id, s.level, spread_label(s.best_rank), spread_label(s.worst_rank), s.spread,
                                   s.query or "–", ", ".join(s.gold) or "–") for s in gap.disagreements),
                            "where the configs tried disagreed most: the questions, and notes, worth another "
                            "hand-written question"))
    else:
        blocks.append(Para(f"No question's rank differed across the {gap.configs} configs tried."))
    blocks += [Para(advice_paragraph(a)) for a in gap.advice]
    return Section("Why nothing was kept, and what evidence would decide", tuple(blocks))


def night_evidence_section(ev: NightEvidence) -> Section:
    """How many tuning questions of each kind the night stood on, and which of them decided each kept change."""
    blocks = [Table(("kind", "answerable", "probes"),
                    tuple((KIND_WORDS[k.source], k.answerable, k.probes) for k in ev.kinds),
                    "the tuning questions, by where they came from: the hit@5 guard reads the hand-written and "
                    "labelled ones alone when there are any; the gain test reads every kind")]
    if ev.kept:
        blocks.append(Table(("round", "variable", "old -> new", "decided by", "moved, by kind (up/down; out/in the top 5)",
                             "hit@5 guard read"),
                            tuple((k.round, k.variable, describe_change(k.variable, k.old, k.new), k.why,
                                   "; ".join(f"{KIND_WORDS[m.source]} {m.up}/{m.down}; {m.out_of_top5}/{m.into_top5}"
                                             for m in k.by_kind if m.up or m.down) or "–", k.guard)
                                  for k in ev.kept)))
    if ev.lookups_only():
        blocks.append(Para(ev.lookups_only()))
    blocks += [Para(why) for why in ev.left_out]
    if ev.time is not None:
        blocks.append(Para(f"How the night was spent: {ev.time.describe()}."))
    return Section("The evidence the night stood on", tuple(blocks))


@dataclass(frozen=True)
class NightFacts:
    """What every section of the morning report reads, computed once from the ledger's rounds."""
    d: SweepData
    objective: str
    evaluated: tuple[Round, ...]
    kept: tuple[Round, ...]                 # round 0 (the start) first
    failed: tuple[Round, ...]               # unavailable or crashed
    by_reason: dict[RoundDecision, tuple[Round, ...]]   # rejected and failed rounds by decision, in the order first met
    start: EvalResult | None
    final: EvalResult | None
    gap: EvidenceGap | None                 # a night that kept nothing: why, and what evidence would decide
    night: NightEvidence | None
    probes: int
    drift: LatencyDrift

    @property
    def info(self) -> SweepRecord:
        return self.d.sweep


def night_facts(d: SweepData) -> NightFacts:
    info, rounds = d.sweep, d.rounds
    evaluated = tuple(r for r in rounds if r.result is not None)
    kept = tuple(r for r in rounds if r.kept)
    empty = bool(evaluated) and is_empty_night(rounds) and info.status != "running"
    score_cfg = d.score_config or _score_config(info)
    reasons: dict[RoundDecision, list] = {}
    for r in rounds[1:]:
        if not r.kept:
            reasons.setdefault(r.decision, []).append(r)
    return NightFacts(d, info.objective, evaluated, kept, tuple(r for r in rounds if not r.decision.evaluated),
                      {k: tuple(v) for k, v in reasons.items()},
                      rounds[0].result if rounds else None, kept[-1].result if kept else None,
                      evidence_gap(info, rounds, d.gold, score_cfg) if empty else None,
                      night_evidence(info, rounds, score_cfg), tuning_probes(rounds), latency_drift(rounds))


def _holdout_line(f: NightFacts) -> str:
    hold, obj = f.d.holdout, f.objective
    if hold:
        hm = hold.compare.metrics["hit@5"]
        return (f"holdout hit@5 {_fmt(hold.start.hit5, 3)} -> {_fmt(hold.final.hit5, 3)}, "
                f"{obj} {_fmt(hold.start.value, 3)} -> {_fmt(hold.final.value, 3)} "
                f"(p={hm.p_value:.3f}, 95% CI [{hm.ci95[0]:+.3f}, {hm.ci95[1]:+.3f}])")
    if f.info.holds_out:
        return "holdout not measured yet (it is, when the sweep ends)"
    return "no holdout"


def verdict_line(f: NightFacts) -> str:
    """The report's first line: tuning and holdout figures and what became of the night; an empty night leads
    with why nothing was kept and what to add, not with the unchanged numbers."""
    info, obj, start_m, final_m = f.info, f.objective, f.start, f.final

    def pair(m0, m1, key):
        if not m0 or not m1:
            return "–"
        return f"{_fmt(objective_value(m0, key) if key != 'hit@5' else m0.overall['hit@5'], 3)} -> " \
               f"{_fmt(objective_value(m1, key) if key != 'hit@5' else m1.overall['hit@5'], 3)}"
    tuning = f"tuning hit@5 {pair(start_m, final_m, 'hit@5')}, {obj} {pair(start_m, final_m, obj)}"
    holdout = _holdout_line(f)
    promo = f.d.promotion
    if promo and promo.kind == "promoted":
        outcome = f"promoted (#{promo.id})"
    elif promo:
        outcome = f"not promoted: {promo.reason}"
    elif info.status == "running":
        outcome = "still running (or stopped without a status: it resumes at the next window)"
    elif f.gap:
        outcome = ""            # the headline says why and what to add
    else:
        v = holdout_verdict(info.start, (final_m and f.kept[-1].search_config) or info.start, f.d.holdout)
        outcome = f"a proposal, not decided yet ({'would be promoted' if v.promote else v.reason})"
    verdict = (f"{f.gap.headline}. {tuning}; {holdout}" + (f"; {outcome}" if outcome else "")) if f.gap else \
        f"{tuning}; {holdout}; {outcome}"
    if f.drift.drifted:
        verdict += "; " + LATENCY_DRIFT(DRIFT_VERDICT, ratio=f.drift.median_ratio).message()
    return verdict


def progress_section(f: NightFacts) -> Section:
    """The objective per round, the running best, the kept changes labelled."""
    rounds, obj = f.d.rounds, f.objective
    points, best, labels = [], [], []
    running = None
    for r in rounds:
        if r.result is not None:
            y = objective_value(r.result, obj)
            if r.kept:
                running = y
                if r.round > 0:
                    labels.append((r.round, y, describe_change(r.variable, r.old, r.new)))
            points.append((r.round, y, "kept" if r.kept else "rejected"))
        elif running is not None:
            points.append((r.round, running, "failed"))
        if running is not None:
            best.append((r.round, running))
    n_rej = sum(1 for r in rounds if r.decision.rejected)
    alt = (f"{len(rounds) - 1} rounds: {len(f.kept) - 1 if f.kept else 0} kept, {n_rej} rejected, {len(f.failed)} "
           f"unavailable or crashed; running best {obj} {_fmt(best[0][1] if best else None, 3)} -> "
           f"{_fmt(best[-1][1] if best else None, 3)}")
    plot = Plot(f"{obj} per round", progress_plot(points, best, labels[-12:], ylabel=obj), alt) if points else \
        Para("no evaluated round yet", "note")
    return Section("Progress", (plot,))


def _kept_rows(f: NightFacts) -> tuple:
    obj, rows, prev = f.objective, [], f.start
    for r in f.kept[1:]:
        m = r.result
        rows.append((r.round, r.variable, str(r.old), str(r.new), objective_value(prev, obj), objective_value(m, obj),
                     prev.overall["hit@5"], m.overall["hit@5"]))
        prev = m
    return tuple(rows)


def _level_rows(f: NightFacts) -> tuple:
    if not (f.start and f.final):
        return ()
    rows = []
    for lv in sorted(set(f.start.by_level) | set(f.final.by_level)):
        a, b = (f.start.by_level[lv].metrics if lv in f.start.by_level else {},
                f.final.by_level[lv].metrics if lv in f.final.by_level else {})
        rows.append((lv, a.get("n"), a.get("hit@5"), b.get("hit@5"), a.get("mrr"), b.get("mrr")))
    return tuple(rows)


def _fail_rows(f: NightFacts) -> tuple:
    return tuple((r.round, r.variable, str(r.new), r.decision.value, r.reason,
                  round_reason(r.decision, r.variable, r.reason, probes=f.probes).fix()) for r in f.failed)


def latency_section(drift: LatencyDrift) -> Section:
    return Section("Latency: the cost model and the stopwatch", (
        Para("Each round's p50/p95 is predicted from the work its searches did, charged with unit costs "
             "measured once on this machine for each model (the calibration below, stored in every round's "
             "ledger row): `autoresearch ledger --replay` recomputes every decision from the ledger. "
             "The measured p95 is recorded beside it and decides nothing."),
        Table(("calibration", "embedder", "taken at", "rerankers"),
              tuple((c.key, c.embedder, c.taken_at, ", ".join(c.rerankers) or "–") for c in drift.calibrations)),
        Para(LATENCY_DRIFT(DRIFTED if drift.drifted else WITHIN_CALIBRATION, rounds=drift.rounds,
                           ratio=_fmt(drift.median_ratio, 2)).message(), "bad" if drift.drifted else "")))


def report_sections(f: NightFacts) -> tuple[Section, ...]:
    obj, hold = f.objective, f.d.holdout
    kept_rows, level_rows, fail_rows = _kept_rows(f), _level_rows(f), _fail_rows(f)
    flips = hold.compare.flipped if hold else ()
    reason_rows = tuple((dec.value, len(rs), ", ".join(sorted({x.variable for x in rs})))
                        for dec, rs in sorted(f.by_reason.items(), key=lambda t: -len(t[1])))
    return ((evidence_section(f.gap),) if f.gap else ()) + (
        progress_section(f),
        Section("Kept changes, in order", (Table(("round", "variable", "old", "new", f"{obj} before", f"{obj} after",
                                                  "hit@5 before", "hit@5 after"), kept_rows),)
                if kept_rows else (Para("no change was kept: the starting config stands"),)),
    ) + ((night_evidence_section(f.night),) if f.night else ()) + (
        Section("Rejected and failed rounds by reason", (Table(("decision", "rounds", "variables"), reason_rows),)),
        Section("Per level on the tuning set, start vs final",
                (Table(("level", "questions", "hit@5 start", "hit@5 final", "MRR start", "MRR final"), level_rows),)),
        Section("Questions that flipped on the holdout",
                (Table(("question", "rank before", "rank after", "now", "query"),
                       tuple((x.id, x.a_rank, x.b_rank, x.now, x.query) for x in flips)),)
                if flips else (Para("none" if hold else _holdout_line(f)),)),
        Section("Rounds that were unavailable or crashed",
                (Table(("round", "variable", "value", "decision", "reason", "fix"), fail_rows),)
                if fail_rows else (Para("none"),)),
        latency_section(f.drift),
    )


def _report_data(f: NightFacts) -> dict:
    """The report's machine-readable part (its JSON form)."""
    obj, hold, start_m, final_m, kept = f.objective, f.d.holdout, f.start, f.final, f.kept
    promo = f.d.promotion
    return {"sweep": f.info.id, "status": f.info.status, "objective": obj, "rounds": len(f.d.rounds) - 1,
            "start": {"hit@5": start_m.overall["hit@5"] if start_m else None,
                      obj: objective_value(start_m, obj) if start_m else None},
            "final": {"hit@5": final_m.overall["hit@5"] if final_m else None,
                      obj: objective_value(final_m, obj) if final_m else None, "config": kept[-1].config.to_json() if kept else None},
            "holdout": {k: v for k, v in hold.to_json().items() if k in ("gold", "start", "final")}
            | {"hit@5_test": hold.compare.to_json()["metrics"]["hit@5"]} if hold else None,
            "promotion": promo and {"id": promo.id, "kind": promo.kind, "reason": promo.reason},
            "kept": [{"round": r.round, "variable": r.variable, "old": r.old, "new": r.new} for r in kept[1:]],
            "decisions": {k.value: len(v) for k, v in f.by_reason.items()},
            "failed": [{"round": r[0], "variable": r[1], "value": r[2], "decision": r[3], "reason": r[4], "fix": r[5]}
                       for r in _fail_rows(f)],
            "holdout_flips": [x.to_json() for x in (hold.compare.flipped if hold else ())],
            "evaluated_rounds": len(f.evaluated), "latency": f.drift.to_json(),
            "evidence_gap": f.gap.to_json() if f.gap else None,
            "evidence": dataclasses.asdict(f.night) if f.night else None}


def build_sweep_report(d: SweepData) -> Report:
    f = night_facts(d)
    return Report("sweep", f"Sweep {f.info.id}", verdict_line(f), report_sections(f), _report_data(f),
                  generated=time.strftime("%Y-%m-%d %H:%M %Z"))


def sweep_report(ledger_path: str | Path, sweep_id: str | None = None, runs=None) -> Report:
    return build_sweep_report(sweep_data(ledger_path, sweep_id, runs))
