"""The round loop: pick one variable, propose a value, evaluate on the tuning set, decide, append. Once a full
cycle of single-variable rounds against the baseline kept nothing, a round moves a coupled pair of variables
together (tuner/sweep/variables.py, COUPLED_PAIRS), proposed over the pair's 2-D grid, judged by the same rule.

Every round is one ledger row written in one transaction. A restarted sweep (--resume) rebuilds its
baseline, tried values and proposals from the ledger, so it continues exactly where it stopped.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from search_core import SearchCoreError
from search_core.config import SearchConfig

from tuner.data.gold import GoldSet, load_gold, split_gold
from tuner.evaluation.compare import compare
from tuner.evaluation.evaluate import EvalResult
from tuner.evaluation.score import load_score_config
from tuner.ledger.ledger import Ledger
from tuner.ledger.round import START, Round
from tuner.ledger.schema import RoundDecision
from tuner.ledger.sweep_record import SweepRecord
from tuner.stored_config import StoredConfig
from tuner.evaluation.cost_model import CostStore
from tuner.sweep.keep_rule import GATE_OBJECTIVES, TRUSTED_SOURCES, Rule, objective_value
from tuner.sweep.pins import check_pins, harness_pins
from tuner.sweep.propose import propose, propose_pair
from tuner.sweep.params import RecordedParams, SweepParams
from tuner.sweep.rounds import ReplayedRound, RoundOutcome, charged, replay_decisions, run_round, snap
from tuner.sweep.space import Space, load_space
from tuner.sweep.summary import Figures, HoldoutCheck, KeptStep, SweepSummary
from tuner.sweep.reasons import Reason
from tuner.sweep.variables import (COUPLED_PAIRS, DEFAULT_MOVE, GATE_SCORE, MODEL_GATE_FIELD, CoupledPair,
                                   default_move, describe_change, gate_pair, gate_reason, is_pair, kind_of,
                                   unavailable_reason, value_in)
from tuner.sweep.workbench import Workbench, fit_gate_cut

ENTITY_VARIABLE = "w_entity"      # moved only on hand-written or labelled evidence (Sweep.__init__)


class Sweep:
    def __init__(self, params: SweepParams, ledger: Ledger, *, start: SearchConfig | None = None,
                 sweep_id: str | None = None, progress=None, stop_flag=None):
        self.p = params
        self.ledger = ledger
        self.progress = progress or (lambda line: None)
        self.stop_flag = stop_flag or (lambda: False)
        self.space: Space = load_space(params.space)
        # the round to the shipped default moves every variable of the space file, the entity channel too: its value
        # comes from the default, chosen on hand-written questions, not from the made questions that left it out
        self.file_space: Space = self.space
        # said before round 1 and never proposed: a model whose package or weights are not here
        self.not_here = self.space.not_runnable_here()
        for choice, why in self.not_here.items():
            self.progress(f"skipped, cannot run here: {choice}: {why}")
        self.gold: GoldSet = load_gold(params.gold)
        self.hold_gold: GoldSet | None = load_gold(params.holdout) if params.holdout else None
        if params.split:
            self.gold, self.hold_gold = split_gold(self.gold, params.split, params.seed)
        # Questions made from the vault name notes (a masked anchor sentence names others, a heading question its
        # own), which the entity channel matches by name: nights on made questions alone kept w_entity 0.2-0.6
        # on three wikis while the hand-written questions lost by it. Without w_entity, johngrib's nights
        # recovered 67-84 % of the held-out hit@5 gap (61-83 % with it) and the demo's all of it (BENCHMARKS.md).
        # So a set with no hand-written or labelled question never moves the entity channel.
        if ENTITY_VARIABLE in self.space.names() and len(self.space.names()) > 1 and not any(
                q.source in TRUSTED_SOURCES for q in self.gold.questions if not q.is_probe):
            self.space = dataclasses.replace(self.space, variables=tuple(
                v for v in self.space.variables if v.name != ENTITY_VARIABLE))
            self.progress(f"{ENTITY_VARIABLE} left out: the tuning set has no hand-written or labelled question, "
                          "and questions made from the vault name the notes the entity channel matches")
        if sweep_id is None and params.default_round:
            # once a ledger: a night that starts from a config an earlier night tuned (the daemon's promoted one)
            # is not moved back to the shipped default on weaker evidence than that night's gain stood on
            earlier = ledger.first_round_named(DEFAULT_MOVE)
            if earlier is not None:
                params = self.p = dataclasses.replace(params, default_round=False)
                self.progress(f"no round to the shipped default: sweep {earlier[0]} tried it (round {earlier[1]}, "
                              f"{earlier[2]}), once a ledger")
        if sweep_id is not None and params.recalibrate:
            raise SearchCoreError("a resumed sweep keeps the cost calibration its rounds were charged with, so its "
                                  "decisions stay comparable; drop --recalibrate, or start a new sweep with it")
        self.bench = Workbench(params.db, vault=params.vault, index_dir=params.index_dir,
                               score_cfg=load_score_config(params.score_config),
                               cost_store=CostStore(params.cost_folder()),
                               calibration_queries=[q.query for q in self.gold.questions],
                               recalibrate=params.recalibrate, progress=self.progress)
        self.bench.stop = stop_flag            # a model round's index build stops between batches too
        base_emb = self.bench.base_embedder
        base_notes = self.bench.searchers[base_emb].view.notes.keys()
        self.gold.check_against(base_notes)
        if self.hold_gold is not None:       # before round 1, not after round 119
            self.hold_gold.check_against(base_notes)
        self.evidence_step = None
        if sweep_id is None and self._grows_evidence():
            self._spend_on_evidence((start or SearchConfig()).replace(embedder=base_emb), base_notes)
            params = self.p
        self.pins = harness_pins(params, self.bench.score_cfg, self.bench.searchers[base_emb].fingerprint_key)
        # time spent by earlier runs of this sweep, and by the evidence step (the budget is the sweep's)
        self.spent_before_s = self.evidence_step.seconds if self.evidence_step else 0.0
        if sweep_id is None:
            start = (start or SearchConfig()).replace(embedder=base_emb)
            if start.threshold is None:    # the ledger records explicit values, never "the default"
                start = start.replace(threshold=self.bench.searchers[base_emb].embedder.default_threshold)
            model = self._ensure_gate(start)   # the gate `search` would use, else one fitted on the tuning set
            if model is not None and getattr(start, MODEL_GATE_FIELD) is None:
                start = start.replace(**{MODEL_GATE_FIELD: self._on_grid(MODEL_GATE_FIELD, model.threshold)})
            self.space.check_config(start)
            self.id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
            self.start = start
            ledger.new_sweep(self.id, RecordedParams(params, self.pins, self.evidence_step), StoredConfig(start))
            self.rows: list[Round] = []
        else:
            info = ledger.sweep(sweep_id)
            if info is None:
                raise SearchCoreError(f"no sweep {sweep_id!r} in {ledger.path}; `autoresearch ledger` lists them")
            check_pins(sweep_id, info.pins, self.pins)
            self.id = sweep_id
            self.start = info.start
            self.rows = ledger.rounds(sweep_id)
            self.spent_before_s = sum((r.eval_s or 0) + (r.reindex_s or 0) for r in self.rows)
            self.bench.use_recorded_costs(self.rows)   # the calibrations the run charged its rounds with

    # -- the evidence step before round 1 --------------------------------------------------------------------
    def _grows_evidence(self) -> bool:
        """A new sweep with a time budget, a vault to read and questions from it in its tuning set (the person
        asked for made questions); not with `split`, which a resumed sweep would split again from the file."""
        p = self.p
        vault = p.vault or self.bench.vault          # the vault the index was built from, when not given
        return bool(p.grow_evidence and p.time_budget_s is not None and vault and Path(vault).is_dir()
                    and not p.split and any(q.source == "vault" for q in self.gold.questions))

    def _spend_on_evidence(self, start: SearchConfig, base_notes) -> None:
        from tuner.sweep.evidence_budget import spend_on_evidence
        p = self.p
        step = spend_on_evidence(self.bench, p.gold, self.gold, start, self.space, vault=p.vault or self.bench.vault,
                                 rounds=p.rounds,
                                 budget_s=p.time_budget_s, objective=p.objective,
                                 alpha=p.noise_alpha if p.noise_alpha is not None and p.noise_alpha < 1 else 0.05,
                                 folder=Path(p.index_dir).parent / "evidence", seed=p.seed,
                                 known_notes=set(base_notes), progress=self.progress, stop=self.stop_flag)
        self.progress(f"evidence step: {step.describe()}")
        self.evidence_step = step
        if step.gold_after != p.gold:
            self.p = dataclasses.replace(p, gold=step.gold_after)
            self.gold = load_gold(step.gold_after)
            self.gold.check_against(base_notes)
            self.bench.calibration_queries = [q.query for q in self.gold.questions]

    # -- state derived from the ledger ---------------------------------------------------------------------
    def _baseline(self) -> tuple[SearchConfig, EvalResult | None]:
        kept = [r for r in self.rows if r.kept]
        if not kept:
            return self.start, None
        return kept[-1].search_config, kept[-1].result

    def _tried(self, baseline_hash: str, variable: str) -> list[Round]:
        return [r for r in self.rows if r.baseline_hash == baseline_hash and r.variable == variable]

    def _unavailable(self) -> set:
        return ({r.new for r in self.rows if r.decision == RoundDecision.UNAVAILABLE and not is_pair(r.variable)}
                | set(self.not_here))

    # -- one round -----------------------------------------------------------------------------------------
    def _probes(self) -> int:
        return sum(q.level == "probe" for q in self.gold.questions)

    def _on_grid(self, name: str, value: float) -> float:
        """A fitted threshold on the space's grid when the space turns it (optuna refuses a history value
        off its grid), else rounded to 4 places."""
        return snap(self.space, name, value)

    def _ensure_gate(self, cfg: SearchConfig):
        """The gate model for cfg's (embedder, reranker), chosen the first time the pair is met: the one
        `search` would use on that index (Workbench.fit_gate_for), else one fitted on the tuning set, on the
        config of the pair's first ledger row when there is one, so a resumed sweep gates exactly as the
        run it continues (thresholds do not change the features)."""
        pair = gate_pair(cfg)
        if pair not in self.bench.gate_models:
            first = next((c for c in (r.search_config for r in getattr(self, "rows", []))
                          if gate_pair(c) == pair), cfg)
            self.bench.fit_gate_for(first, self.gold)
        return self.bench.gate_models[pair]

    def _why_unavailable(self, name: str, baseline: SearchConfig) -> Reason | None:
        why = unavailable_reason(name, probes=self._probes())
        if why is not None or name not in GATE_SCORE:
            return why
        return gate_reason(name, probes=self._probes(), model_fitted=self._ensure_gate(baseline) is not None)

    def _crash_loop(self, n: int = 3) -> str | None:
        """The reason shared by the last n rounds, when all n crashed with it."""
        last = self.rows[-n:]
        if len(last) == n and all(r.decision == RoundDecision.CRASHED for r in last) and len({r.reason for r in last}) == 1:
            return last[0].reason
        return None

    def run(self) -> SweepSummary:
        t_start = time.perf_counter()
        status = "finished"
        try:
            baseline, base_metrics = self._baseline()
            self._ensure_gate(baseline)                     # a resumed sweep: the model the run had
            if base_metrics is None:                        # round 0: measure the starting point
                t0 = time.perf_counter()
                res = charged(self.bench, baseline,
                              self.bench.evaluate(baseline, self.gold, timing_samples=self.p.timing_samples), "start")
                for w in res.warnings:                      # e.g. a set that cannot discriminate: say so now,
                    self.progress(f"warning: {w}")          # not after 119 rounds that could keep nothing
                self._record(0, START, None, None, baseline,
                             RoundOutcome(baseline, res, RoundDecision.KEPT, "starting point",
                                          objective_value(res, self.p.objective)), time.perf_counter() - t0)
            next_round = max(r.round for r in self.rows) + 1
            while next_round <= self.p.rounds:
                if self.stop_flag():
                    status = "stopped"
                    break
                spent = self.spent_before_s + time.perf_counter() - t_start
                if self.p.time_budget_s is not None and spent > self.p.time_budget_s:
                    status = "stopped: time budget"
                    break
                crash = self._crash_loop()
                if crash is not None:
                    status = f"stopped: crash loop (3 rounds in a row crashed with: {crash})"
                    self.progress(status)
                    break
                baseline, base_metrics = self._baseline()
                if not self._round(next_round, baseline, base_metrics):
                    status = "finished: space exhausted"
                    break
                next_round += 1
        except KeyboardInterrupt:
            self.ledger.set_status(self.id, "interrupted")
            raise
        summary = self.summary()
        if self.hold_gold is not None and status != "stopped":    # a stopped sweep resumes; the holdout waits
            summary = dataclasses.replace(summary, holdout=self.run_holdout())
        self.ledger.set_status(self.id, status, summary)
        return summary.ended(status)

    def _pick(self, round_no: int, baseline: SearchConfig, bhash: str):
        """(variable or pair name, value) for the next round; (name, None) logs a variable once as unavailable;
        (None, None): nothing left to try. Once a full cycle of single-variable rounds against this baseline kept
        nothing, pair rounds (`pairs`) and single ones take turns (`_pair_due`); single ones alone once no pair has
        a point left. With `default_round`, the sweep's first round moves every search variable that differs from the
        shipped default to it (once a sweep)."""
        if self.p.default_round and all(r.is_start for r in self.rows):
            move = default_move(self.file_space, baseline)
            if move is not None:
                return move
        if self.p.pairs and self._pair_due(bhash) and self._stalled(baseline, bhash):
            name, value = self._pick_pair(baseline, bhash)
            if name is not None:
                return name, value
        names = self.space.names()
        unavailable = self._unavailable()
        start = (round_no - 1) % len(names)
        for i in range(len(names)):
            v = self.space.get(names[(start + i) % len(names)])
            why = self._why_unavailable(v.name, baseline)
            if why is not None:
                if not any(r.variable == v.name and r.decision == RoundDecision.UNAVAILABLE for r in self.rows):
                    return v.name, None        # logged once as unavailable, with the reason, then skipped
                continue
            value = self._single_value(v, baseline, bhash, unavailable)
            if value is not None:
                return v.name, value
        if self.p.pairs and self._stalled(baseline, bhash):     # no single value left: a pair, turn or not
            return self._pick_pair(baseline, bhash)
        return None, None

    def _single_value(self, v, baseline: SearchConfig, bhash: str, unavailable: set):
        """The next value of one variable against this baseline, or None when it has none left."""
        kind = kind_of(v.name)
        hist = self._tried(bhash, v.name)
        tried = {r.new for r in hist}
        base_value = getattr(baseline, v.name)
        history = [(r.new, r.objective) for r in hist if r.objective is not None]
        base_metrics = self._baseline()[1]
        if kind.closed_form:
            # the gate does not move the ranking, so its best value on the tuning set has a closed
            # form: try that first, then let optuna explore around it
            fitted = fit_gate_cut(base_metrics.per_query, self.p.gate_measure, GATE_SCORE.get(v.name, "top_score"))
            if fitted is not None:
                fitted = snap(self.space, v.name, fitted)
                if fitted not in tried and fitted != base_value:
                    return fitted
        objective = kind.objective or self.p.objective
        if objective in GATE_OBJECTIVES:
            objective = self.p.rule().gate_objective()
        base_obj = objective_value(base_metrics, objective)
        return propose(v, seed=self.p.seed, baseline_hash=bhash, baseline_value=base_value,
                       baseline_objective=base_obj, history=history, tried=tried, unavailable=unavailable)

    def _pair_due(self, bhash: str) -> bool:
        """After a stalled cycle, pair and single rounds take turns: a pair round is due while the pair rounds against
        this baseline are no more than its single rounds beyond each variable's first. On johngrib, nights that gave
        every round after the cycle to pairs never tried a single variable again, and one of them missed the step a
        single round took at round 26 without pairs (w_ngram 0.05: held-out MRR 0.844 -> 0.859)."""
        against = [r for r in self.rows if r.baseline_hash == bhash and not r.is_start]
        pairs = sum(1 for r in against if is_pair(r.variable))
        singles = [r.variable for r in against if not is_pair(r.variable)]
        return pairs <= len(singles) - len(set(singles))

    def _stalled(self, baseline: SearchConfig, bhash: str) -> bool:
        """Whether a full cycle of single-variable rounds against this baseline kept nothing: every variable of the
        space has had a round against it (a kept one would have made a new baseline), or cannot have one (it is
        unavailable, or has no value left to try)."""
        against = {r.variable for r in self.rows if r.baseline_hash == bhash and not r.is_start}
        unavailable = self._unavailable()
        for v in self.space.variables:
            if v.name in against or self._why_unavailable(v.name, baseline) is not None:
                continue
            if self._single_value(v, baseline, bhash, unavailable) is not None:
                return False
        return True

    def _pairs_here(self, baseline: SearchConfig) -> list[CoupledPair]:
        """The coupled pairs whose two variables this sweep's space turns and can judge, in the table's order."""
        names = set(self.space.names())
        return [p for p in COUPLED_PAIRS.values() if all(
            n in names and self._why_unavailable(n, baseline) is None for n in p.variables)]

    def _pick_pair(self, baseline: SearchConfig, bhash: str):
        """(pair name, its two values) for a pair round, the pairs taken in turn against this baseline; (None, None)
        when no pair has a point left."""
        pairs = self._pairs_here(baseline)
        done = sum(1 for r in self.rows if r.baseline_hash == bhash and is_pair(r.variable))
        base_obj = objective_value(self._baseline()[1], self.p.objective)
        for i in range(len(pairs)):
            p = pairs[(done + i) % len(pairs)]
            hist = self._tried(bhash, p.name)
            value = propose_pair(self.space.get(p.first), self.space.get(p.second), seed=self.p.seed,
                                 baseline_hash=bhash, baseline_values=tuple(value_in(baseline, p.name)),
                                 baseline_objective=base_obj,
                                 history=[(tuple(r.new), r.objective) for r in hist if r.objective is not None],
                                 tried={tuple(r.new) for r in hist})
            if value is not None:
                return p.name, value
        return None, None

    def _round(self, round_no: int, baseline: SearchConfig, base_metrics: EvalResult) -> bool:
        bhash = baseline.config_hash()
        name, value = self._pick(round_no, baseline, bhash)
        if name is None:
            return False
        old = value_in(baseline, name)
        why_unavailable = self._why_unavailable(name, baseline)
        if why_unavailable is not None:
            why = why_unavailable.message()
            self._record(round_no, name, old, None, baseline,
                         RoundOutcome(baseline, None, RoundDecision.UNAVAILABLE, why, None), 0.0)
            self.progress(f"round {round_no}/{self.p.rounds}  {name} unavailable: {why}")
            return True
        t0 = time.perf_counter()
        out = run_round(self.bench, self.gold, baseline, base_metrics, name, value, self.p.rule(),
                        space=self.space, ensure_gate=self._ensure_gate, timing_samples=self.p.timing_samples)
        eval_s = time.perf_counter() - t0 - out.reindex_s
        self._record(round_no, name, old, value, baseline, out, eval_s)
        best = objective_value(self._baseline()[1], self.p.objective)
        self.progress(f"round {round_no}/{self.p.rounds}  {describe_change(name, old, value)}  {out.decision}  "
                      f"best {self.p.objective} {best:.4f}")
        return True

    def _record(self, round_no: int, variable: str, old, new, baseline: SearchConfig, out: RoundOutcome,
                eval_s: float) -> None:
        """One round into the ledger (and self.rows): what was tried against which baseline, and its outcome."""
        cand = out.candidate
        s = self.bench.searchers.get(cand.embedder)
        self.rows.append(self.ledger.append_round(Round(
            self.id, round_no, variable, old, new, StoredConfig(cand), cand.config_hash(), baseline.config_hash(),
            s.fingerprint_key if s else None, out.result, out.objective, out.decision, out.reason, round(eval_s, 4),
            round(out.reindex_s, 3))))

    # -- the end of a sweep ----------------------------------------------------------------------------------
    def summary(self) -> SweepSummary:
        final, metrics = self._baseline()
        counts: dict[RoundDecision, int] = {}
        for r in self.rows[1:]:
            counts[r.decision] = counts.get(r.decision, 0) + 1
        start_m = self.rows[0].result if self.rows else None
        obj = self.p.objective

        def figures(m: EvalResult | None) -> Figures:
            return Figures(m.overall.get("hit@5") if m else None, obj, objective_value(m, obj) if m else None)
        return SweepSummary(self.id, len(self.rows) - 1, counts, StoredConfig(self.start), StoredConfig(final),
                            figures(start_m), figures(metrics),
                            tuple(KeptStep(r.round, r.variable, r.old, r.new, r.reason) for r in self.rows[1:] if r.kept),
                            not_here=dict(self.not_here))

    def run_holdout(self) -> HoldoutCheck:
        """Starting and final config on the holdout set, with the paired test: does the gain carry over?"""
        hold = self.hold_gold
        final, _ = self._baseline()
        a = self.bench.evaluate(self.start, hold)
        b = self.bench.evaluate(final, hold)
        c = compare(a, b, seed=self.p.seed)
        obj = self.p.objective
        tuning = self.summary()
        tune_gain = (tuning.final.value or 0) - (tuning.start.value or 0)
        hold_gain = objective_value(b, obj) - objective_value(a, obj)

        def figures(m: EvalResult) -> Figures:
            return Figures(m.overall["hit@5"], obj, objective_value(m, obj), m.overall["mrr"], with_mrr=True)
        result = HoldoutCheck(hold.name, figures(a), figures(b), round(tune_gain, 4), round(hold_gain, 4),
                              bool(tune_gain > 0 and (hold_gain < 0 or b.overall["hit@5"] < a.overall["hit@5"])),
                              c.within_noise, c)
        self.ledger.record_holdout(self.id, result)
        return result


def replay_sweep(info: SweepRecord, rows: list[Round]) -> list[ReplayedRound]:
    """replay_decisions for a sweep as the ledger records it (its params give the rule and the rubric)."""
    p = info.params.sweep
    return replay_decisions(rows, p.rule(), load_score_config(p.score_config))
