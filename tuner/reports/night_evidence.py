"""Which evidence a night stood on, read from the ledger: how many tuning questions of each kind (hand-written,
labelled recall calls, made from the vault's text) and, for each kept change, which of them decided it.

The keep rule reads the kinds apart (docs/tuner.md, "Evidence by kind"): the hit@5 guard reads the
hand-written and labelled questions alone whenever the set has any, and the paired gain test reads every
kind. So a kept change that moved the ranking was decided by the hand-written questions when they alone
pass the gain test, and by the vault's (or the log's) when the hand-written alone do not: their p-value is
said beside the pooled one. A change that moved no rank (a gate threshold, a faster config) was decided by
its objective alone. Nothing here searches: every figure comes from the rounds' per-question rows.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field

from tuner.data.night_gold import KindCount, kind_counts, left_out_of
from tuner.data.vault_questions import MADE_KINDS, lookups_only_warning, made_kind
from tuner.evaluation.evaluate import EvalResult
from tuner.evaluation.score import ScoreConfig
from tuner.ledger.round import Round
from tuner.ledger.sweep_record import SweepRecord
from tuner.sweep.evidence import ranking_evidence
from tuner.sweep.evidence_budget import EvidenceStep
from tuner.sweep.keep_rule import GATE_OBJECTIVES, TRUSTED_SOURCES, hit5_evidence
from tuner.sweep.variables import describe_change, is_default_move, kind_of

KIND_WORDS = {"hand": "hand-written", "log": "labelled recall calls", "vault": "from the vault's text"}
QUESTIONS_OF = {"hand": "the hand-written questions", "log": "the labelled recall calls",
                "vault": "the questions from the vault's text"}
DEFAULT_DECIDES = "default"     # a kept move to the shipped default: decided by no question set, refuted by none


@dataclass(frozen=True)
class KindMoves:
    """One kind's questions in one kept change: how many moved up and down in the objective's share, how many
    crossed the top-5 border each way, and the paired test on that kind alone (None: none of it moved)."""
    source: str
    n: int
    up: int
    down: int
    out_of_top5: int
    into_top5: int
    p_value: float | None


@dataclass(frozen=True)
class KeptEvidence:
    round: int
    variable: str
    old: object
    new: object
    by_kind: tuple[KindMoves, ...]
    p_value: float | None          # the gain test over every kind (None: no rank moved)
    guard: str                     # what the hit@5 guard read
    decided_by: tuple[str, ...]    # the sources that decided it ("objective" when no rank moved, DEFAULT_DECIDES
    # for the move to the shipped default, kept unless shown worse)
    why: str                       # the same, as a sentence


@dataclass(frozen=True)
class NightTime:
    """How a sweep spent its time, from its rounds' recorded seconds (evaluation and index builds)."""
    rounds: int
    eval_s: float
    reindex_s: float
    budget_s: float | None          # the time budget it was started with (the daemon's window), if any
    status: str
    evidence: EvidenceStep | None = None    # what it did before round 1 (tuner/sweep/evidence_budget.py)

    @property
    def unused_s(self) -> float | None:
        """Budget left when the rounds ran out (None: no budget, or the budget ended the sweep)."""
        if self.budget_s is None or "time budget" in self.status or self.status in ("running", "stopped"):
            return None
        return max(0.0, self.budget_s - self.eval_s - self.reindex_s - (self.evidence.seconds if self.evidence else 0.0))

    def describe(self) -> str:
        text = (f"before the rounds, {self.evidence.describe()}; then " if self.evidence else "") + (
            f"{self.rounds} rounds: {self.eval_s:.0f} s evaluating, {self.reindex_s:.0f} s building indexes"
            + (f", of a {self.budget_s:.0f} s budget" if self.budget_s is not None else ""))
        left = self.unused_s
        if left is not None and left > 0.5 * self.budget_s and not (self.evidence and self.evidence.outcome == "grown"):
            text += (f"; {left:.0f} s of it unused when the rounds ran out: more questions from the vault "
                     "([evidence] vault_questions) give the gain test more power in that time")
        return text


@dataclass(frozen=True)
class NightEvidence:
    kinds: tuple[KindCount, ...]   # the tuning set, per source
    kept: tuple[KeptEvidence, ...]
    alpha: float
    time: NightTime | None = None
    made_kinds: dict[str, int] = field(default_factory=dict)   # the vault's answerable questions: how made -> count
    left_out: tuple[str, ...] = ()  # evidence the night could have had and was not given, each with why (the gold file's)

    def describe(self) -> str:
        return ", ".join(f"{k.answerable} {KIND_WORDS[k.source]}" + (f" (+{k.probes} probes)" if k.probes else "")
                         for k in self.kinds)

    def lookups_only(self) -> str | None:
        """When the vault's questions hold no anchor (its links sit in lists, or it has none) and no cloze question:
        what that set is, and what it means for the changes the night kept on it. None when anchors or cloze
        questions are there, or no vault question is."""
        made = sum(self.made_kinds.values())
        if not made or self.made_kinds.get("anchor") or self.made_kinds.get("cloze"):
            return None
        by_vault = [k for k in self.kept if k.decided_by == ("vault",)]
        counts = ", ".join(f"{k} {n}" for k, n in sorted(self.made_kinds.items(),
                                                         key=lambda kv: MADE_KINDS.index(kv[0]) if kv[0] in MADE_KINDS else 99))
        meaning = (f"{len(by_vault)} of the {len(self.kept)} changes kept ("
                   + ", ".join(describe_change(k.variable, k.old, k.new) for k in by_vault)
                   + ") were decided by these lookups alone: check them on questions of your own before trusting "
                   "them (on a wiki whose links sat only in lists, nights on 600 such lookups kept the keyword and "
                   "entity channels and lowered held-out hit@5 below the start on 3 of 3 seeds)"
                   if by_vault else "no change the night kept was decided by them alone")
        return f"The vault gave no anchor question ({counts}): {lookups_only_warning(made)}. {meaning}."


def _only(res: EvalResult, sources) -> EvalResult:
    return dataclasses.replace(res, per_query=[q for q in res.per_query if q.source in sources])


def kept_evidence(row: Round, base: EvalResult, cand: EvalResult, objective: str, weights, alpha: float,
                  guard_alpha: float = 0.05) -> KeptEvidence:
    present = [k.source for k in kind_counts(q for q in cand.per_query)]
    judged_on = kind_of(row.variable).objective or objective
    by_kind = []
    for s in present:
        b, c = _only(base, (s,)), _only(cand, (s,))
        ev = ranking_evidence(b, c, objective, weights)
        h = hit5_evidence(b, c, guard_alpha)
        if ev.n:
            by_kind.append(KindMoves(s, ev.n, ev.better, ev.worse, h.lost, h.gained, ev.p_value if ev.moved else None))
    pooled = ranking_evidence(base, cand, objective, weights)
    h = hit5_evidence(base, cand, guard_alpha)
    guard = (f"{h.n} hand-written or labelled questions ({h.set_aside} from the vault's text set aside): "
             f"{h.lost} out of the top 5, {h.gained} in" if h.set_aside else
             f"all {h.n} questions: {h.lost} out of the top 5, {h.gained} in")
    if is_default_move(row.variable):
        # kept unless shown worse (tuner/sweep/keep_rule.py): no question set decided it, none refuted it
        moved = (f"all kinds together: p = {pooled.p_value:.4f}, {pooled.better} up, {pooled.worse} down"
                 if pooled.moved else "no question's rank moved")
        said = "show better" if pooled.moved and pooled.beyond_noise(alpha) else "did not show worse"
        return KeptEvidence(row.round, row.variable, row.old, row.new, tuple(by_kind),
                            pooled.p_value if pooled.moved else None, guard, (DEFAULT_DECIDES,),
                            f"the shipped default, which the tuning questions {said} ({moved})")
    if judged_on != objective or not pooled.moved:
        what = ("the gate's decisions on the questions and probes (the round's reason says how many flipped)"
                if judged_on in GATE_OBJECTIVES else f"{objective} alone")
        return KeptEvidence(row.round, row.variable, row.old, row.new, tuple(by_kind), None, guard,
                            ("objective",), f"{what}: no question's rank moved")
    trusted = [k for k in by_kind if k.source in TRUSTED_SOURCES]
    others = [k for k in by_kind if k.source not in TRUSTED_SOURCES and k.p_value is not None]
    t_ev = ranking_evidence(_only(base, TRUSTED_SOURCES), _only(cand, TRUSTED_SOURCES), objective, weights) \
        if trusted else None
    pooled_p = f"all kinds together: p = {pooled.p_value:.4f}, {pooled.better} up, {pooled.worse} down"
    if not others:
        names = " and ".join(QUESTIONS_OF[k.source] for k in by_kind if k.p_value is not None)
        return KeptEvidence(row.round, row.variable, row.old, row.new, tuple(by_kind), pooled.p_value,
                            guard, tuple(k.source for k in by_kind if k.p_value is not None),
                            f"{names} ({pooled_p})")
    if t_ev is not None and t_ev.moved and t_ev.beyond_noise(alpha):
        return KeptEvidence(row.round, row.variable, row.old, row.new, tuple(by_kind), pooled.p_value,
                            guard, tuple(k.source for k in trusted),
                            f"the hand-written questions, which alone would have kept it (p = {t_ev.p_value:.4f}, "
                            f"{t_ev.better} up, {t_ev.worse} down; {pooled_p})")
    alone = (f"the hand-written alone: p = {t_ev.p_value:.4f}, {t_ev.better} up, {t_ev.worse} down, not enough"
             if t_ev is not None and t_ev.moved else
             "no hand-written question's rank moved" if t_ev is not None else "the set has no hand-written questions")
    return KeptEvidence(row.round, row.variable, row.old, row.new, tuple(by_kind), pooled.p_value, guard,
                        tuple(k.source for k in others),
                        f"{' and '.join(QUESTIONS_OF[k.source] for k in others)} ({alone}; {pooled_p})")


def night_evidence(info: SweepRecord, rounds: list[Round], score_cfg: ScoreConfig = ScoreConfig()) -> NightEvidence | None:
    """The evidence of a sweep's rounds; None before its starting point was evaluated."""
    evaluated = [r for r in rounds if r.result is not None]
    if not evaluated:
        return None
    params = info.params.sweep
    objective = info.objective
    alpha = params.noise_alpha or 0.05
    guard_alpha = params.guard_alpha or 0.05
    start = evaluated[0].result
    kept, base = [], start
    for r in rounds[1:]:
        if not r.kept or r.result is None:
            continue
        cand = r.result
        kept.append(kept_evidence(r, base, cand, objective, score_cfg.quality_weights, alpha, guard_alpha))
        base = cand
    spent = NightTime(len(rounds) - 1, sum(r.eval_s or 0.0 for r in rounds),
                      sum(r.reindex_s or 0.0 for r in rounds), params.time_budget_s,
                      info.status or "",
                      info.params.evidence_step)
    made = Counter(made_kind(q.id) or "other" for q in start.per_query if q.source == "vault" and q.level != "probe")
    return NightEvidence(kind_counts(start.per_query), tuple(kept), alpha, spent, dict(made),
                         left_out_of(params.gold))
