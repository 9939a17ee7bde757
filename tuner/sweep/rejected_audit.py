"""The rejected-candidate audit: every rejected round with the baseline and index it was judged against,
its metric deltas, the questions it broke and fixed, grouped by variable; and which candidates deserve a
re-test because a kept change since then moved a variable that interacts with theirs.

`retest` re-runs the marked candidates against today's baseline (the active config, else the sweep's
winner) and appends them to the ledger as a new sweep whose rounds name the round they re-test.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from search_core import StopRequested

from tuner.ledger.ledger import Ledger
from tuner.ledger.round import START, Round
from tuner.ledger.schema import RoundDecision
from tuner.ledger.sweep_record import RETEST_ID, SweepRecord
from tuner.promotion.promote import read_active
from tuner.reports import Para, Report, Section, Table
from tuner.reports.sweep import open_ledger, pick_sweep
from tuner.stored_config import ConfigChange, StoredConfig
from tuner.sweep.summary import RetestResult, RetestRound, RetestStopped
from tuner.sweep.keep_rule import objective_value
from tuner.sweep.variables import moved_variables, value_in

# rule name -> variables that move the same quantity: a kept change to one can change the best value
# of another, so a candidate rejected before that change was judged on a baseline that no longer exists
INTERACTIONS = {
    "fusion": frozenset({"w_dense", "w_sparse", "w_decomposed", "w_entity", "rrf_k", "community_boost", "depth"}),
    "rerank": frozenset({"reranker", "rerank_depth", "depth"}),
    "score scale": frozenset({"embedder", "threshold", "reranker"}),
    "dense channel": frozenset({"embedder", "w_dense", "depth"}),
}
RETEST_MARK = "retest of "


def interaction_rules(a: str, b: str) -> list[str]:
    """Names of the rules under which a change to `b` makes a rejected `a` worth re-testing; either may be a coupled
    pair (its variables are read one by one)."""
    if a == b:
        return []     # the same variable kept at another value supersedes the candidate
    va, vb = moved_variables(a), moved_variables(b)
    return [name for name, vs in INTERACTIONS.items() if vs.intersection(va) and vs.intersection(vb)]


@dataclass(frozen=True)
class RejectedRound:
    """A rejected round, against the baseline and index it was judged on, and whether to re-test it."""
    round: int
    variable: str
    old: Any
    new: Any
    decision: RoundDecision
    reason: str
    baseline_hash: str
    baseline_config: ConfigChange    # where the baseline differs from the sweep's start
    index_fingerprint: str | None
    deltas: dict[str, float]         # metric -> candidate minus baseline (hit@5, MRR, the objective)
    broke: tuple[str, ...]           # question ids the candidate lost from the top 5
    fixed: tuple[str, ...]
    worth_retest: bool
    retest_why: tuple[str, ...]
    retested_in: str | None          # SWEEP#ROUND of its re-test, if any

    def to_json(self) -> dict:
        return {"round": self.round, "variable": self.variable, "old": self.old, "new": self.new,
                "decision": self.decision, "reason": self.reason, "baseline_hash": self.baseline_hash,
                "baseline_config": self.baseline_config.to_json(), "index_fingerprint": self.index_fingerprint,
                "deltas": self.deltas, "broke": list(self.broke), "fixed": list(self.fixed),
                "worth_retest": self.worth_retest, "retest_why": list(self.retest_why), "retested_in": self.retested_in}


@dataclass(frozen=True)
class AuditData:
    sweep: SweepRecord
    objective: str
    rejected: tuple[RejectedRound, ...]


def _hits(m) -> dict:
    return {q.id: bool(q.metrics.get("hit@5")) for q in m.per_query if q.level != "probe"} if m else {}


def audit_data(ledger_path: str | Path, sweep_id: str | None = None) -> AuditData:
    lg = open_ledger(ledger_path)
    try:
        info = pick_sweep(lg, sweep_id)
        sid = info.id
        rounds = lg.rounds(sid)
        all_sweeps = lg.sweeps()
        later = [s for s in all_sweeps if s.created >= info.created and s.id != sid]
        later_kept = [r for s in later for r in lg.rounds(s.id) if r.kept and r.round > 0]
        retested = {}
        for s in all_sweeps:
            for r in lg.rounds(s.id):
                if r.reason.startswith(RETEST_MARK):
                    retested[r.reason[len(RETEST_MARK):].split(":")[0]] = f"{s.id}#{r.round}"
    finally:
        lg.close()
    obj = info.objective
    by_hash = {r.config_hash: r for r in rounds if r.kept}
    start = rounds[0].config if rounds else info.start_config
    out = []
    for r in rounds:
        if not r.decision.rejected:
            continue
        base = by_hash.get(r.baseline_hash)
        bm, cm = base.result if base else None, r.result
        deltas = {}
        if bm and cm:
            deltas = {"hit@5": cm.overall["hit@5"] - bm.overall["hit@5"],
                      "mrr": cm.overall["mrr"] - bm.overall["mrr"],
                      obj: objective_value(cm, obj) - objective_value(bm, obj)}
        bh, ch = _hits(bm), _hits(cm)
        since = [k for k in rounds if k.kept and k.round > r.round] + later_kept
        why = []
        for k in since:
            for rule in interaction_rules(r.variable, k.variable):
                why.append(f"{rule}: {k.variable} {k.old}→{k.new} kept in {k.sweep}#{k.round}")
        key = f"{sid}#{r.round}"
        out.append(RejectedRound(
            r.round, r.variable, r.old, r.new, r.decision, r.reason, r.baseline_hash,
            ConfigChange.between(start, base.config) if base else ConfigChange(), r.index_fingerprint,
            {k: round(v, 4) for k, v in deltas.items()},
            tuple(sorted(q for q, hit in bh.items() if hit and ch.get(q) is False)),
            tuple(sorted(q for q, hit in bh.items() if not hit and ch.get(q))),
            bool(why) and key not in retested, tuple(why[:3]), retested.get(key)))
    return AuditData(info, obj, tuple(out))


def build_audit_report(d: AuditData, retest_result: RetestResult | None = None) -> Report:
    sid, obj, rej = d.sweep.id, d.objective, d.rejected
    marked = [x for x in rej if x.worth_retest]
    verdict = (f"{len(rej)} rejected rounds in sweep {sid}; {len(marked)} worth re-testing "
               f"(a kept change since then touched an interacting variable)")
    if retest_result:
        verdict += f"; re-tested {retest_result.tested} as sweep {retest_result.sweep}: {retest_result.kept} would now be kept"
    groups: dict[str, list] = {}
    for x in rej:
        groups.setdefault(x.variable, []).append(x)
    sections = []
    for var, xs in sorted(groups.items()):
        rows = tuple((x.round, f"{x.old} → {x.new}", x.baseline_hash, (x.index_fingerprint or "–")[:12],
                      x.deltas.get("hit@5"), x.deltas.get("mrr"), x.deltas.get(obj),
                      ", ".join(x.broke[:6]) + (" …" if len(x.broke) > 6 else ""),
                      ", ".join(x.fixed[:6]) + (" …" if len(x.fixed) > 6 else ""), x.reason,
                      ("yes: " + "; ".join(x.retest_why)) if x.worth_retest
                      else (f"re-tested in {x.retested_in}" if x.retested_in else "no"))
                     for x in xs)
        sections.append(Section(f"{var} ({len(xs)} rejected)", (Table(
            ("round", "value", "baseline", "index", "Δ hit@5", "Δ MRR", f"Δ {obj}", "broke", "fixed", "reason",
             "worth re-testing"), rows),)))
    bases = {}
    for x in rej:
        bases.setdefault(x.baseline_hash, x.baseline_config)
    sections.append(Section("Baselines the candidates were judged against", (Table(
        ("baseline", "differs from the sweep's start in"),
        tuple((h, ", ".join(f"{k}={v}" for k, v in c.changes) or "(the start)") for h, c in bases.items())),
        Para("interaction rules: " + "; ".join(f"{n} = {', '.join(sorted(v))}" for n, v in INTERACTIONS.items())))))
    if retest_result:
        sections.insert(0, Section("Re-test against today's baseline", (Table(
            ("re-tests", "variable", "value", "decision", "reason"),
            tuple((t.of, t.variable, t.new, t.decision, t.reason) for t in retest_result.rounds)),)))
    data = {"sweep": sid, "objective": obj, "rejected": [x.to_json() for x in rej],
            "interaction_rules": {k: sorted(v) for k, v in INTERACTIONS.items()},
            "retest": retest_result.to_json() if retest_result else None}
    return Report("audit", f"Rejected-candidate audit of sweep {sid}", verdict, tuple(sections), data,
                  generated=time.strftime("%Y-%m-%d %H:%M %Z"))


def retest(ledger_path: str | Path, sweep_id: str | None = None, runs=None, progress=None, stop=None) -> RetestResult:
    """Re-run every candidate marked worth re-testing against today's baseline; each becomes a round of a
    new sweep in the same ledger, its reason starting with "retest of SWEEP#ROUND". `stop()`, asked before
    each round (and between a model round's embedding batches), ends it with StopRequested; the rounds
    done stay in the ledger."""
    from tuner.data.gold import load_gold, split_gold
    from tuner.evaluation.score import load_score_config
    from tuner.evaluation.cost_model import CostStore
    from tuner.sweep.params import RecordedParams
    from tuner.sweep.rounds import charged, run_round
    from tuner.sweep.space import load_space
    from tuner.sweep.variables import gate_pair
    from tuner.sweep.workbench import Workbench

    d = audit_data(ledger_path, sweep_id)
    marked = [x for x in d.rejected if x.worth_retest]
    info = d.sweep
    p = info.params.sweep
    active = read_active(runs)
    lg = Ledger(ledger_path)
    try:
        if active is not None:
            baseline, db = active.config, str(active.index or p.db)
        else:
            kept = [r for r in lg.rounds(info.id) if r.kept]
            baseline, db = kept[-1].search_config, p.db
        gold = load_gold(p.gold)
        if p.split:
            gold, _ = split_gold(gold, p.split, p.seed)
        space = load_space(p.space)
        bench = Workbench(db, vault=p.vault, index_dir=p.index_dir, score_cfg=load_score_config(p.score_config),
                          cost_store=CostStore(p.cost_folder()), calibration_queries=[q.query for q in gold.questions],
                          progress=progress)
        bench.stop = stop
        bench.use_recorded_costs(lg.rounds(info.id))     # charged as the sweep it re-tests was
        new_id = time.strftime("%Y%m%d-%H%M%S") + RETEST_ID + uuid.uuid4().hex[:4]

        def gate_model(cfg):     # gate as the sweep does: a model fitted on the tuning set per pair
            if gate_pair(cfg) not in bench.gate_models:
                bench.fit_gate_for(cfg, gold)
            return bench.gate_models[gate_pair(cfg)]

        gate_model(baseline)
        base_res = charged(bench, baseline, bench.evaluate(baseline, gold), "start")
        lg.new_sweep(new_id, RecordedParams(p), StoredConfig(baseline))
        s = bench.searchers.get(baseline.embedder)
        lg.append_round(Round(new_id, 0, START, None, None, StoredConfig(baseline), baseline.config_hash(),
                              baseline.config_hash(), s.fingerprint_key if s else None, base_res,
                              objective_value(base_res, p.objective), RoundDecision.KEPT,
                              f"today's baseline for re-testing sweep {info.id}"))
        out_rounds = []
        for i, x in enumerate(marked, 1):
            if stop is not None and stop():
                lg.set_status(new_id, "retest stopped", RetestStopped(i - 1, len(marked)))
                raise StopRequested(f"the re-test stopped after {i - 1} of {len(marked)} rounds")
            of = f"{info.id}#{x.round}"
            t0 = time.perf_counter()
            try:
                out = run_round(bench, gold, baseline, base_res, x.variable, x.new, p.rule(), space=space,
                                ensure_gate=gate_model, timing_samples=p.timing_samples)
            except StopRequested:   # a model round's index build or gate fit, stopped: the round is not written
                lg.set_status(new_id, "retest stopped", RetestStopped(i - 1, len(marked)))
                raise
            cand, res = out.candidate, out.result
            s = bench.searchers.get(cand.embedder)
            lg.append_round(Round(new_id, i, x.variable, value_in(baseline, x.variable), x.new, StoredConfig(cand),
                                  cand.config_hash(), baseline.config_hash(), s.fingerprint_key if s else None, res,
                                  out.objective, out.decision, f"{RETEST_MARK}{of}: {out.reason}",
                                  round(time.perf_counter() - t0 - out.reindex_s, 4), round(out.reindex_s, 3)))
            out_rounds.append(RetestRound(of, x.variable, x.new, out.decision, out.reason))
            if progress:
                progress(f"retest {of}: {x.variable} -> {x.new!r}: {out.decision}")
        result = RetestResult(new_id, info.id, len(marked), sum(r.decision == "kept" for r in out_rounds),
                              tuple(out_rounds))
        lg.set_status(new_id, "retest finished", result)
        return result
    finally:
        lg.close()


def audit_report(ledger_path: str | Path, sweep_id: str | None = None, *, do_retest: bool = False, runs=None,
                 progress=None, stop=None) -> Report:
    result = retest(ledger_path, sweep_id, runs, progress, stop) if do_retest else None
    return build_audit_report(audit_data(ledger_path, sweep_id), result)
