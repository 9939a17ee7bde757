"""What each daemon job does. Every job is `fn(daemon, spec, scheduled, run_id) -> (outcome, detail)`;
the table below is the only list of jobs (an unknown name lists these)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from search_core import SearchCoreError, StopRequested
from search_core.config import load_config

if TYPE_CHECKING:
    from tuner.sweep.settings import SweepTable
    from tuner.promotion.promote import Promotion

log = logging.getLogger("autoresearch.daemon")

RESUMABLE = ("running", "stopped", "interrupted")   # killed or signalled mid-sweep; a time budget end is final


def _ledger(d):
    from tuner.ledger.ledger import Ledger
    return Ledger(d.cfg.ledger)


def write_reports(d, sweep_id: str) -> dict[str, str]:
    """The morning report and the audit of `sweep_id`, in every format, under runs/reports/. Both are read
    from the ledger and rendered in the six formats before any file is written, with the stop flag asked
    between the steps (reading a 1,000-round sweep takes seconds): a stop ends it with StopRequested and
    writes none of them, so a night's reports are all there or all from the run before. Returns
    "<kind>.<format>" -> the file written (a mapping: the run table records it as it is)."""
    from tuner.sweep.rejected_audit import audit_report
    from tuner.reports.sweep import sweep_report
    from tuner.reports import plots
    from tuner.reports.render import FORMATS, render, save

    def check(step: str):
        if d.stop.is_set():
            raise StopRequested(f"the reports of sweep {sweep_id} were not written: stopped {step}")

    out = Path(d.cfg.runs) / "reports"
    check("before loading the plotting library")
    plots.load()
    check("after loading the plotting library")
    rep = sweep_report(d.cfg.ledger, sweep_id, d.cfg.runs)
    log.info("report: read the morning report of sweep %s", sweep_id)
    check("after reading the morning report")
    aud = audit_report(d.cfg.ledger, sweep_id, runs=d.cfg.runs)
    log.info("report: read the audit of sweep %s", sweep_id)
    texts = {}
    for fmt in FORMATS:
        for kind, report in (("sweep", rep), ("audit", aud)):
            check(f"with {len(texts)} of {2 * len(FORMATS)} rendered")
            texts[(kind, fmt)] = render(report, fmt)
    check(f"with all {len(texts)} rendered, before writing")
    return {f"{kind}.{fmt}": save(text, out / f"{kind}-{sweep_id}.{fmt}") for (kind, fmt), text in texts.items()}


def _reports_after_sweep(d, sweep_id: str) -> dict[str, str]:
    """The sweep job's reports, or why there are none: a stop while they render leaves the promotion decided
    (it is recorded) and the reports to the report job."""
    try:
        return write_reports(d, sweep_id)
    except StopRequested as e:
        return {"not_written": f"{e}; `autoresearch report sweep` or the report job writes them"}


def sweep_params(s: SweepTable, db: str, runs: Path, budget: float | None):
    """The night's SweepParams from the config's [sweep] table (validated by load_daemon_config): a setting it
    leaves out takes SweepParams' default, as one the `sweep` verb is not given does (tuner/sweep/settings.py)."""
    from tuner.sweep.loop import SweepParams
    return SweepParams(db=db, gold=s.gold, space=s.space, holdout=s.holdout, time_budget_s=budget,
                       vault=s.vault, index_dir=str(runs / "indexes"), score_config=s.score_config, **s.settings)


def job_index(d, spec, scheduled, rid):
    from tuner.promotion.promote import read_active
    from search_core.index.indexer import index_vault
    s = d.cfg.sweep
    done = {}
    rep = index_vault(s.vault, s.db, stop=d.stop.is_set)
    done[s.db] = {"added": rep.added, "changed": rep.changed, "deleted": rep.deleted, "embedded": rep.embedded,
                     "seconds": round(rep.seconds, 1)}
    active = read_active(d.cfg.runs)
    if active and active.index and str(active.index) != s.db:
        rep = index_vault(s.vault, active.index, embedder=active.config.embedder, stop=d.stop.is_set)
        done[str(active.index)] = {"added": rep.added, "changed": rep.changed, "deleted": rep.deleted}
    return "ok", {"indexes": done}


def _daemon_sweeps(d) -> list[str]:
    ids = []
    for r in d.table.rows("sweep"):
        sid = (r.detail or {}).get("sweep")
        if sid and sid not in ids:
            ids.append(sid)
    return ids


def _vault_db(d) -> str:
    """The index of the vault a night starts from: the active one (promoted), else the config's."""
    from tuner.promotion.promote import read_active
    active = read_active(d.cfg.runs)
    return str(active.index) if active and active.index else d.cfg.sweep.db


def job_sweep(d, spec, scheduled, rid):
    from tuner.daemon.evidence import index_to_promote, is_cloze_index
    from tuner.promotion.promote import decide_promotion, read_active
    from tuner.sweep.loop import Sweep

    s = d.cfg.sweep
    now = dt.datetime.now(d.cfg.tz)
    end = d.cfg.window_end(spec, scheduled if isinstance(scheduled, dt.datetime) else now)
    budget = (end - now).total_seconds() if end else None
    if budget is not None and budget <= 0:
        return "missed", {"why": f"the window ended at {end.isoformat(timespec='minutes')}"}
    lg = _ledger(d)
    try:
        late = decide_undecided(d, lg)
        if late is not None:                # killed after its last round, before its promotion was decided
            return ("promoted" if late.promotion.promoted else "declined"), late.to_json()
        resume = None
        for sid in _daemon_sweeps(d):       # newest first: a sweep killed or stopped mid-way resumes
            info = lg.sweep(sid)
            if info and info.status in RESUMABLE:
                resume = info
                break
        progress = lambda line: log.info(line)   # noqa: E731
        if resume:
            params = dataclasses.replace(resume.params.sweep, time_budget_s=budget, recalibrate=False)
            sw = Sweep(params, lg, sweep_id=resume.id, progress=progress, stop_flag=d.stop.is_set)
            how = "resumed"
            evidence = None       # it stands on the gold file it was started with (pinned)
        else:
            from tuner.daemon.evidence import prepare_night_gold
            active = read_active(d.cfg.runs)
            start = active.config if active else load_config(s.start_config)
            db = _vault_db(d)
            night = prepare_night_gold(d.cfg, db, progress=progress)
            if d.stop.is_set():         # making the vault's questions took a while; the sweep has not begun
                raise StopRequested("the sweep had not begun (the night's questions were made; the next night "
                                    "reuses them)")
            evidence = night.to_json()
            params = dataclasses.replace(sweep_params(s, db, Path(d.cfg.runs), budget), gold=night.gold,
                                         holdout=night.holdout, split=None)
            if night.cloze is not None:     # the whole night on the copy without the cloze lines
                params = dataclasses.replace(params, db=night.db, vault=str(night.cloze.vault),
                                             index_dir=str(night.cloze.folder / "indexes"))
            sw = Sweep(params, lg, start=start, progress=progress, stop_flag=d.stop.is_set)
            how = "started"
        if sw.evidence_step is not None:        # what the budget bought before round 1 (more questions, or why not)
            evidence = {**(evidence or {}), "step": sw.evidence_step.to_json()}
            log.info("evidence step: %s", sw.evidence_step.describe())
        d.table.note(rid, {"sweep": sw.id, "how": how, **({"evidence": evidence} if evidence else {})})
        log.info("sweep %s %s (budget %s s)", sw.id, how, None if budget is None else round(budget))
        summary = sw.run()
        detail = {"sweep": sw.id, "how": how, "status": summary.status, "rounds": summary.rounds,
                  "decisions": summary.decision_words(), **({"evidence": evidence} if evidence else {})}
        if summary.status == "stopped":
            return "stopped", {**detail, "note": "stopped at a round boundary; resumes at the next window"}
        final = summary.final_config.search
        searcher = sw.bench.searchers.get(final.embedder)
        index = searcher.db if searcher else None
        if index is not None and is_cloze_index(d.cfg.runs, sw.p.db):
            index = index_to_promote(_vault_db(d), s.vault, final.embedder, Path(d.cfg.runs) / "indexes",
                                     stop=d.stop.is_set)
        promo = decide_promotion(sw.id, summary.start_config.search, final, summary.holdout, index, d.cfg.runs,
                                 gate_model=sw.bench.gate_models.get((final.embedder, final.reranker)))
        detail["promotion"] = promo.to_json()
        detail["reports"] = _reports_after_sweep(d, sw.id)
        return ("promoted" if promo.promoted else "declined"), detail
    finally:
        lg.close()


@dataclass(frozen=True)
class LateDecision:
    """The promotion of a sweep that ended before its promotion was decided, decided after a restart; its
    `to_json` is the sweep job's detail in the run table."""
    sweep: str
    status: str
    promotion: Promotion
    reports: dict[str, str]         # as write_reports returns them, or why they were not written

    def to_json(self) -> dict:
        return {"sweep": self.sweep, "how": "decided after a restart", "status": self.status,
                "promotion": self.promotion.to_json(), "reports": self.reports}


def decide_undecided(d, lg) -> LateDecision | None:
    """The newest daemon sweep, when it ended (its summary and holdout are in the ledger) but no promotion
    decision names it (the process died in between): decide it now, from the ledger, instead of starting a
    new sweep over it. Its winner's gate model is not kept, so a gate_threshold is not promoted with it
    (decide_promotion says so); a winner of another embedder than the sweep's index is left undecided."""
    from tuner.daemon.evidence import is_cloze_index
    from tuner.promotion.promote import History, decide_promotion
    ids = _daemon_sweeps(d)
    if not ids:
        return None
    info = lg.sweep(ids[0])
    summary = info.sweep_summary if info and info.status not in RESUMABLE else None
    if summary is None:
        return None
    hist = History(d.cfg.runs)
    try:
        if any(e.sweep == info.id for e in hist.events()):
            return None
    finally:
        hist.close()
    start, final = summary.start_config.search, summary.final_config.search
    if final.embedder != start.embedder:
        log.warning("sweep %s ended undecided with a winner on another embedder; its index is not kept, so it "
                    "is not promoted", info.id)
        return None
    index = _vault_db(d) if is_cloze_index(d.cfg.runs, info.db) else info.db   # same embedder: the vault's own
    try:
        promo = decide_promotion(info.id, start, final, summary.holdout, index, d.cfg.runs)
    except SearchCoreError as e:     # e.g. its index is gone: a new sweep starts rather than failing every night
        log.warning("sweep %s ended undecided and cannot be decided now (%s); a new sweep starts", info.id, e)
        return None
    log.info("sweep %s had ended without a promotion decision (the daemon died after its last round): %s",
             info.id, promo.reason)
    return LateDecision(info.id, info.status, promo, _reports_after_sweep(d, info.id))


class NoSweepYet(SearchCoreError):
    """The runs folder's ledger holds no tuning sweep: the report and the retest have nothing to read yet (a first
    start, whose caught-up report slot comes before its first night's sweep), which is no failure."""


def _latest_tuning_sweep(d) -> str:
    ids = [sid for sid in _daemon_sweeps(d)]
    lg = _ledger(d)
    try:
        sweeps = [s for s in lg.sweeps() if not s.is_retest]
    finally:
        lg.close()
    if ids:
        return ids[0]
    if not sweeps:
        raise NoSweepYet(f"no sweep in {d.cfg.ledger} yet; the report follows the first sweep")
    return sweeps[-1].id


def job_report(d, spec, scheduled, rid):
    try:
        sid = _latest_tuning_sweep(d)
    except NoSweepYet as e:
        return "skipped", {"why": str(e)}
    return "ok", {"sweep": sid, "reports": write_reports(d, sid)}


def job_retest(d, spec, scheduled, rid):
    from tuner.sweep.rejected_audit import audit_report
    from tuner.reports import emit
    try:
        sid = _latest_tuning_sweep(d)
    except NoSweepYet as e:
        return "skipped", {"why": str(e).replace("the report follows", "the retest follows")}
    rep = audit_report(d.cfg.ledger, sid, do_retest=True, runs=d.cfg.runs, progress=log.info, stop=d.stop.is_set)
    path = emit(rep, "html", Path(d.cfg.runs) / "reports" / f"retest-{sid}.html")
    emit(rep, "md", Path(d.cfg.runs) / "reports" / f"retest-{sid}.md")
    return "ok", {"sweep": sid, "retest": rep.data["retest"] and {k: rep.data["retest"][k] for k in ("sweep", "tested", "kept")},
                  "report": path}


def job_calibrate(d, spec, scheduled, rid):
    try:
        from tuner.gate.calibrate import daemon_job
    except ImportError as e:        # a dependency of the calibration is missing from this install
        return "unavailable", {"why": f"tuner.gate.calibrate cannot be imported: {e}"}
    job = daemon_job(d.cfg, stop=d.stop.is_set, progress=log.info)
    return ("declined" if job.declined else "ok"), job.to_json()


def job_labels(d, spec, scheduled, rid):
    """Weekly: recall calls a person labelled become gold questions and probes beside the gold set."""
    from tuner.daemon.evidence import labels_to_gold
    out = labels_to_gold(d.cfg, stop=d.stop.is_set)
    log.info("labels: %s new question(s) and probes in %s%s", out.added, out.file, f" ({out.why})" if out.why else "")
    return "ok", out.to_json()


# The night's chain, in order: `daemon --start-in` runs these once.
NIGHT = ("index", "sweep", "report")
JOBS = {"index": job_index, "sweep": job_sweep, "report": job_report, "retest": job_retest,
        "calibrate": job_calibrate, "labels": job_labels}

