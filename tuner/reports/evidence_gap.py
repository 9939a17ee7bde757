"""Why a sweep kept nothing, and what evidence would decide, from the ledger's per-question rows.

A report reads the ledger and never searches, so everything here stands on what each evaluated round's
row keeps of each tuning question (its first gold rank, hit@5, MRR, nDCG@10, its level):

- saturated questions: at rank 1 under every config the sweep evaluated. No config can improve them, so
  they only dilute a gain: a set of 20 with 18 of them has 2 questions a change can move, and the paired
  test needs 6 moving up (none down) before it can say p < 0.05 (2 x 0.5^6 = 0.03);
- the gains seen: each candidate's objective delta against the baseline it was judged on, with the paired
  randomization p-value the keep rule uses (tuner/sweep/evidence.py), against the smallest gain the set
  can detect at its size (`detectable_gain`);
- where the configs disagreed: the spread of each question's rank across the configs visited; those
  questions, and the notes they point at, are where a hand-written question is worth most.

`detectable_gain` is a simple estimate by simulation with the test in tuner/evaluation/stats.py; a keep
rule that ships its own power calculation should be called in its place (one function, one signature).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from tuner.evaluation.discrimination import FIRST_GOLD_SET, HARDER_LEVELS
from tuner.evaluation.evaluate import EvalResult
from tuner.evaluation.score import ScoreConfig
from tuner.evaluation.stats import paired_randomization
from tuner.ledger.round import Round
from tuner.ledger.sweep_record import SweepRecord
from tuner.reasons import Reason
from tuner.sweep.reasons import (ADD_LEVEL, ADD_PROBES, BELOW_DETECTABLE, EMPTY_NIGHT, GAIN_NEEDS_QUESTIONS,
                                 GAIN_OUT_OF_REACH, HOW_TO_WRITE, MIN_RISING, NIGHT_ADVICE, NOTHING_MOVED,
                                 SATURATED_QUESTIONS, TOO_FEW_CAN_RISE, UNTESTED_GAINS, WHERE_CONFIGS_DISAGREED,
                                 WITHIN_NOISE, advice_paragraph)
from tuner.sweep.evidence import answerable_rows, question_value, ranking_evidence
from tuner.sweep.variables import kind_of

NOT_FOUND_RANK = 11          # a question whose gold is not in the ranked top 10 (K_LIST) counts as rank 11
MAX_QUESTIONS = 2000         # questions_needed says "more than this" rather than search on
DRAWS = 31                   # simulated sets per size: questions_needed is where their median p crosses alpha
DISAGREEMENTS_SHOWN = 10
GAINS_SHOWN = 5
GAINS_TESTED = 40


# -- what a gold set of this size can detect -----------------------------------------------------------------

@dataclass(frozen=True)
class DetectableGain:
    """What the paired test can say at this set's size. Gains are mean per-question shares of the
    objective (0..1: multiply by the rubric's quality points for score100).

    min_rising: how many questions must move up, none down, before the test can reach p < alpha;
    headroom: how many questions are below the ceiling under the baseline (the rest cannot rise);
    smallest_gain: the smallest mean gain the test calls beyond noise when every question moves by the same
      amount on top of the candidate's own ups and downs (None: no shift can, e.g. too little headroom,
      or the candidate moved nothing, so there is no noise to measure it against);
    questions_needed: how many questions with the candidate's pattern of changes half of the sets drawn
      like it would need for p < alpha (None: the candidate gained nothing; above searched_up_to: more
      than that many)."""
    n: int
    alpha: float
    min_rising: int | None
    headroom: int
    observed_gain: float
    smallest_gain: float | None
    questions_needed: int | None
    searched_up_to: int = MAX_QUESTIONS

    @property
    def out_of_reach(self) -> bool:
        return self.questions_needed is not None and self.questions_needed > self.searched_up_to


def _p(a, b, resamples: int = 10_000, seed: int = 0) -> float:
    return paired_randomization(a, b, n_resamples=resamples, seed=seed)


def detectable_gain(baseline: Sequence[float], candidate: Sequence[float], alpha: float = 0.05, *,
                    ceiling: float = 1.0, seed: int = 0) -> DetectableGain:
    """Per-question values of the objective (baseline and candidate, in the same question order) ->
    what the paired randomization test can detect at this n."""
    base = np.asarray(baseline, float)
    cand = np.asarray(candidate, float)
    n = int(base.size)
    d = cand - base
    headroom = int(np.sum(base < ceiling - 1e-9))
    # all-up differences of equal size: only "all +" and "all -" of 2^k sign flips reach the observed mean
    min_rising = next((k for k in range(1, n + 1) if _p(np.zeros(k), np.ones(k), seed=seed) < alpha), None)
    observed = float(d.mean()) if n else 0.0

    smallest = None
    if n and np.any(np.abs(d) > 1e-12):
        def shifted(c: float) -> np.ndarray:
            return np.minimum(cand + c, ceiling)

        def detected(c: float) -> bool:
            s = shifted(c)
            return float((s - base).mean()) > 0 and _p(base, s, seed=seed) < alpha   # as the keep rule tests

        if detected(0.0):
            smallest = observed
        elif detected(ceiling):
            lo, hi = 0.0, ceiling            # not detected at lo, detected at hi
            for _ in range(16):
                mid = (lo + hi) / 2
                lo, hi = (lo, mid) if detected(mid) else (mid, hi)
            smallest = float((shifted(hi) - base).mean())

    needed = None
    if n and observed > 0:
        # DRAWS sets of `cap` differences drawn from the observed ones; a set of m questions is the
        # first m of each, so a larger m extends the same sets and the answer does not jump with the draw
        cap = max(MAX_QUESTIONS, n)
        picks = np.random.default_rng(seed).integers(0, n, size=(DRAWS, cap))

        def half_detect(m: int) -> bool:
            """Is the median p of the DRAWS sets of m below alpha? (stops once either side holds the median)"""
            below = 0
            for j in range(DRAWS):
                below += _p(np.zeros(m), d[picks[j, :m]], 1000, seed) < alpha
                if below > DRAWS // 2 or (j + 1 - below) > DRAWS // 2:
                    break
            return below > DRAWS // 2

        lo, hi = n, n
        found = half_detect(n)
        while not found and hi < cap:
            lo, hi = hi, min(hi * 2, cap)
            found = half_detect(hi)
        if not found:
            needed = cap + 1
        else:
            while hi - lo > max(1, lo // 20):     # to within 5%: the estimate is no finer than that
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if half_detect(mid) else (mid, hi)
            needed = hi
    return DetectableGain(n, alpha, min_rising, headroom, round(observed, 6),
                          None if smallest is None else round(smallest, 6), needed, max(MAX_QUESTIONS, n))


# -- the evidence a night had, and what it lacked ---------------------------------------------------------------

@dataclass(frozen=True)
class QuestionSpread:
    """One tuning question's rank across the configs a sweep evaluated (None: not in the top 10)."""
    id: str
    level: str
    best_rank: int | None
    worst_rank: int | None
    spread: int                  # worst - best, a miss counted as rank NOT_FOUND_RANK
    query: str = ""              # from the gold file, when it is the one the sweep pinned
    gold: tuple[str, ...] = ()


@dataclass(frozen=True)
class GainSeen:
    """A candidate against the baseline it was judged on: its objective delta (in the objective's units)
    and the paired test over the per-question shares."""
    round: int
    variable: str
    value: str
    decision: str
    delta: float
    moved: int
    better: int
    worse: int
    p_value: float


@dataclass(frozen=True)
class LevelCount:
    level: str
    questions: int
    saturated: int
    never_found: int


@dataclass(frozen=True)
class EvidenceGap:
    objective: str
    alpha: float | None
    configs: int                      # distinct configs evaluated on the tuning set
    answerable: int
    probes: int
    saturated: tuple[str, ...]        # at rank 1 under every config evaluated
    never_found: tuple[str, ...]      # in the top 10 under none
    levels: tuple[LevelCount, ...]
    gains: tuple[GainSeen, ...]       # the largest deltas first
    detectable: DetectableGain | None  # for the best gain seen (or the baseline against itself)
    points_per_share: float           # objective units per mean per-question share (60 for score100)
    disagreements: tuple[QuestionSpread, ...]
    advice: tuple[Reason, ...]        # values of NIGHT_ADVICE (tuner.sweep.reasons): a paragraph each
    reason: Reason                    # why nothing was kept (tuner.sweep.reasons.EMPTY_NIGHT): message and fix

    @property
    def headline(self) -> str:
        """The morning report's first line: why nothing was kept, and what to add."""
        return f"{self.reason.message()}; {self.reason.fix()}"

    def to_json(self) -> dict:
        """The report's `evidence_gap`: every finding, and the headline the reason renders (not the reason's table)."""
        out = dataclasses.asdict(dataclasses.replace(self, reason=None, advice=()))
        del out["reason"]
        out["advice"] = [advice_paragraph(a) for a in self.advice]
        return {**out, "headline": self.headline}


def _rank(q) -> int:
    r = q.first_rank
    return r if r is not None and r < NOT_FOUND_RANK else NOT_FOUND_RANK


def _shares(res: EvalResult, ids: list[str], objective: str, weights) -> list[float]:
    rows = answerable_rows(res)
    return [question_value(rows[i], objective, weights) for i in ids]


def _fmt_p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else "< 0.001"


def _scorable(res: EvalResult, weights) -> bool:
    """Do its per-question rows carry every metric the objective's share reads? Ledgers written before the
    rows kept nDCG@10 (schema 2) do not: their gains are listed nowhere rather than tested on a guess."""
    need = {m for m, _ in weights if m != "mrr"}
    return all(need <= set(q.metrics) for q in answerable_rows(res).values())


def evidence_gap(info: SweepRecord, rounds: list[Round], gold=None, score_cfg: ScoreConfig = ScoreConfig()) -> EvidenceGap:
    """What the ledger rows of one sweep say about its evidence. gold: the sweep's tuning GoldSet when it is
    the file the sweep pinned (queries and gold notes for the questions it lists), else None."""
    obj = info.objective
    alpha = info.params.sweep.noise_alpha
    weights = score_cfg.quality_weights
    per_share = score_cfg.quality_points if obj == "score100" else 1.0
    evaluated = [r for r in rounds if r.result is not None and r.result.per_query]
    results = {}                                   # config hash -> its evaluation (one per config visited)
    for r in evaluated:
        results.setdefault(r.config_hash, r.result)
    ranks: dict[str, list[int]] = {}
    levels: dict[str, str] = {}
    probes = 0
    for res in results.values():
        probes = max(probes, sum(q.level == "probe" for q in res.per_query))
        for q in answerable_rows(res).values():
            ranks.setdefault(q.id, []).append(_rank(q))
            levels[q.id] = q.level
    ids = sorted(ranks)
    saturated = tuple(i for i in ids if max(ranks[i]) == 1)
    never = tuple(i for i in ids if min(ranks[i]) == NOT_FOUND_RANK)
    level_rows = tuple(LevelCount(lv, sum(levels[i] == lv for i in ids), sum(levels[i] == lv for i in saturated),
                                  sum(levels[i] == lv for i in never))
                       for lv in sorted(set(levels.values())))
    questions = {q.id: q for q in gold.questions} if gold is not None else {}

    def spread_of(i: str) -> QuestionSpread:
        lo, hi = min(ranks[i]), max(ranks[i])
        q = questions.get(i)
        return QuestionSpread(i, levels[i], lo if lo < NOT_FOUND_RANK else None, hi if hi < NOT_FOUND_RANK else None,
                              hi - lo, q.query if q else "", tuple(q.gold) if q else ())
    spreads = sorted((spread_of(i) for i in ids if max(ranks[i]) > min(ranks[i])),
                     key=lambda s: (-s.spread, s.best_rank or NOT_FOUND_RANK, s.id))

    # -- the gains seen, each against the baseline it was judged on ---------------------------------------
    kept_by_hash = {r.config_hash: r for r in rounds if r.kept and r.result is not None}
    candidates = []
    for r in evaluated:
        if r.round == 0 or r.objective is None or kind_of(r.variable).objective is not None:
            continue
        base_row = kept_by_hash.get(r.baseline_hash)
        if base_row is not None and base_row.objective is not None:
            candidates.append((round(r.objective - base_row.objective, 4), r.round, r, base_row))
    candidates.sort(key=lambda t: (-t[0], t[1]))
    # the paired test for the largest gains, until GAINS_SHOWN are listed and one of them moved any question (at
    # most GAINS_TESTED tests: on 1,000 questions one test resamples 10 million signs)
    gains, pairs, untested = [], {}, 0
    for delta, _, r, base_row in candidates[:GAINS_TESTED]:
        if len(gains) >= GAINS_SHOWN and any(g.moved for g in gains):
            break
        b, c = base_row.result, r.result
        if not (_scorable(b, weights) and _scorable(c, weights)):
            untested += 1
            continue
        ev = ranking_evidence(b, c, obj, weights)
        gains.append(GainSeen(r.round, r.variable, str(r.new), str(r.decision), delta,
                              ev.moved, ev.better, ev.worse, ev.p_value))
        pairs[r.round] = (b, c)
    moving = [g for g in gains if g.moved]
    detect = None
    start = results.get(rounds[0].config_hash) if rounds and rounds[0].result is not None else None
    if start is not None and not _scorable(start, weights):
        start = None
    if moving or start is not None:
        b, c = pairs[moving[0].round] if moving else (start, start)    # the best gain that moved any question
        common = sorted(set(answerable_rows(b)) & set(answerable_rows(c)))
        if common:
            detect = detectable_gain(_shares(b, common, obj, weights), _shares(c, common, obj, weights),
                                     alpha if alpha is not None and alpha < 1 else 0.05)

    advice = night_advice(len(ids), saturated, level_rows, probes, spreads, detect, gains, obj)
    why = empty_night_reason(len(ids), saturated, probes, level_rows, gains, detect, per_share, obj, untested)
    return EvidenceGap(obj, alpha, len(results), len(ids), probes, saturated, never, level_rows, tuple(gains),
                       detect, per_share, tuple(spreads[:DISAGREEMENTS_SHOWN]), advice, why)


def _levels_to_add(level_rows: tuple[LevelCount, ...], probes: int) -> list[str]:
    """The harder levels worth adding: those the set lacks or has only saturated questions of; probes if none."""
    have = {lv.level: lv for lv in level_rows}
    out = [f"{lv} {name}" for lv, name, _ in HARDER_LEVELS
           if lv not in have or have[lv].saturated == have[lv].questions]
    if not out:        # every harder level is there and moves: more of them is still what helps
        out = [f"{lv} {name}" for lv, name, _ in HARDER_LEVELS]
    if probes == 0:
        out.append("probes")
    return out


def empty_night_reason(n, saturated, probes, level_rows, gains, detect, per_share, obj,
                       untested: int = 0) -> Reason:
    """The strongest reason the rows give for a night that kept nothing, as a value of EMPTY_NIGHT."""
    common = dict(saturated=len(saturated), n=n, objective=obj, levels=", ".join(_levels_to_add(level_rows, probes)))
    best = next((g for g in gains if g.moved), None)
    if detect is not None and detect.min_rising is not None and detect.headroom < detect.min_rising:
        # the strongest reason: too few questions can move for the test to ever say "beyond noise"
        return EMPTY_NIGHT(TOO_FEW_CAN_RISE, **common, headroom=detect.headroom, min_rising=detect.min_rising,
                           alpha=f"{detect.alpha:g}")
    if best is None and untested and not gains:
        return EMPTY_NIGHT(UNTESTED_GAINS, **common, untested=untested)
    if best is None:
        return EMPTY_NIGHT(NOTHING_MOVED, **common)
    seen = dict(delta=f"{best.delta:+.2f}", p=_fmt_p(best.p_value))
    if detect is not None and detect.smallest_gain is not None:
        delta, smallest = _apart(best.delta, detect.smallest_gain * per_share)
        return EMPTY_NIGHT(BELOW_DETECTABLE, **{**common, **seen, "delta": delta}, smallest=smallest)
    return EMPTY_NIGHT(WITHIN_NOISE, **common, **seen)


def _apart(a: float, b: float) -> tuple[str, str]:
    """a and b signed, with two decimals, or as many more (up to 4) as it takes for a smaller one not to read as
    equal to a larger: "+0.04 is below the +0.04 this set can detect" said nothing."""
    for digits in (2, 3, 4):
        fa, fb = f"{a:+.{digits}f}", f"{b:+.{digits}f}"
        if fa != fb or a == b:
            break
    return fa, fb


def night_advice(n, saturated, level_rows, probes, spreads, detect, gains, obj) -> tuple[Reason, ...]:
    """What evidence would decide, as values of NIGHT_ADVICE (each renders one paragraph: advice_paragraph)."""
    out = []
    if saturated:
        out.append(NIGHT_ADVICE(SATURATED_QUESTIONS, saturated=len(saturated), n=n))
    have = {lv.level: lv for lv in level_rows}
    for lv, name, what in HARDER_LEVELS:
        row = have.get(lv)
        now = (f"none in the set" if row is None else
               f"{row.questions} in the set, {row.saturated} of them saturated")
        out.append(NIGHT_ADVICE(ADD_LEVEL, level=lv, name=name, what=what, now=now))
    if probes == 0:
        out.append(NIGHT_ADVICE(ADD_PROBES))
    if spreads:
        notes = list(dict.fromkeys(g for s in spreads[:5] for g in s.gold))
        out.append(NIGHT_ADVICE(WHERE_CONFIGS_DISAGREED, questions=", ".join(s.id for s in spreads[:5]),
                                notes=f" (notes {', '.join(notes[:8])})" if notes else ""))
    if detect is not None and detect.min_rising is not None:
        out.append(NIGHT_ADVICE(MIN_RISING, n=n, min_rising=detect.min_rising, alpha=f"{detect.alpha:g}",
                                headroom=detect.headroom, objective=obj))
    if detect is not None and detect.questions_needed is not None:
        best = next((g for g in gains if g.moved), None)
        if detect.out_of_reach:
            out.append(NIGHT_ADVICE(GAIN_OUT_OF_REACH, delta=f"{best.delta:+.2f}", objective=obj,
                                    searched_up_to=detect.searched_up_to))
        elif best is not None and detect.questions_needed > n:
            out.append(NIGHT_ADVICE(GAIN_NEEDS_QUESTIONS, delta=f"{best.delta:+.2f}", objective=obj,
                                    needed=detect.questions_needed, n=n))
    out.append(NIGHT_ADVICE(HOW_TO_WRITE, guide=FIRST_GOLD_SET))
    return tuple(out)


def tuning_gold(info: SweepRecord, base: str | Path | None = None):
    """The sweep's tuning gold set, read from the file its params name when that file still hashes to the
    sweep's pin (else None: the report then lists question ids without their text)."""
    from search_core.hashing import hash_tree
    from tuner.data.gold import load_gold
    path, pin = info.params.sweep.gold, (info.pins or {}).get("gold")
    if not path or not pin:
        return None
    p = Path(path)
    if not p.is_absolute() and base is not None and not p.exists():
        p = Path(base) / p
    try:
        if not p.exists() or hash_tree(p) != pin:
            return None
        return load_gold(p)
    except Exception:        # a report on a moved or edited gold file still renders, without the text
        return None


def spread_label(rank: int | None) -> str:
    return "not in top 10" if rank is None else str(rank)


def is_empty_night(rounds: list[Round]) -> bool:
    """Nothing but the starting point was kept."""
    return not any(r.kept and r.round > 0 for r in rounds)


__all__ = ["DetectableGain", "EvidenceGap", "GainSeen", "LevelCount", "QuestionSpread", "detectable_gain",
           "evidence_gap", "is_empty_night", "tuning_gold"]
