"""How large a change a tuning set can tell from noise: the power side of the keep rule's two tests.

- The gain test (the paired randomization test on each question's share of the objective,
  tuner/sweep/evidence.py) at two-sided level alpha detects, with the given power, a mean per-question
  gain of about (z[1 - alpha/2] + z[power]) * spread / sqrt(n), where spread is the standard deviation of
  the per-question changes the kind of change makes (normal approximation to the sign-flip test, whose
  null variance is the same sum of squared changes).
- The noninferior hit@5 guard (tuner/sweep/keep_rule.py) passes a change whose true rates of questions
  leaving and entering the top 5 are (l, g) with the given power once
  n >= ((z[1 - alpha] + z[power]) * sqrt(l + g - (l - g)^2) / (margin - (l - g)))^2.

Checked by simulation on real changes (benchmarks/bench_keep_rule.py): at the gain detectable_gain states
for 200 and 1,000 questions the test detected it in 74-92 % of draws (mean 81 %); at the size
guard_questions_needed states the guard passed 73-81 % (mean 77 %: with few crossings the normal
approximation is a little optimistic).

A report calls detectable_gain / questions_needed for "the smallest gain this set could have detected"
and "how many questions would detect the gains seen", and gain_power for one round's pair of evaluations.
benchmarks/bench_keep_rule.py checks these figures against simulated decisions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tuner.evaluation.stats import normal_quantile

POWER = 0.8


def _z_sum(alpha: float, power: float, sides: int) -> float:
    return normal_quantile(1.0 - alpha / sides) + normal_quantile(power)


def detectable_gain(n: int, spread: float, *, alpha: float = 0.05, power: float = POWER) -> float:
    """The smallest true mean per-question gain the gain test detects with probability `power` on n
    questions whose per-question changes have standard deviation `spread` (same unit as spread)."""
    if n <= 0:
        raise ValueError("detectable_gain needs at least one question")
    return _z_sum(alpha, power, 2) * spread / math.sqrt(n)


def questions_needed(gain: float, spread: float, *, alpha: float = 0.05, power: float = POWER) -> int | None:
    """Questions the gain test needs to detect a true mean gain `gain` with probability `power`; None for
    no gain (nothing to detect)."""
    if gain <= 0:
        return None
    if spread <= 0:
        return 1
    return math.ceil((_z_sum(alpha, power, 2) * spread / gain) ** 2)


def guard_questions_needed(lost_rate: float, gained_rate: float, margin: float, *, alpha: float = 0.05,
                           power: float = POWER) -> int | None:
    """Questions the noninferior guard needs to pass, with probability `power`, a change that moves a
    share lost_rate of the questions out of the top 5 and gained_rate in; margin in points of hit@5.
    None when the drop is the margin or more (the guard should not pass it at any size)."""
    m = margin / 100.0
    d = lost_rate - gained_rate
    if d >= m:
        return None
    var = lost_rate + gained_rate - d * d
    if var <= 0:
        return 1
    return math.ceil((_z_sum(alpha, power, 1) * math.sqrt(var) / (m - d)) ** 2)


@dataclass(frozen=True)
class GainPower:
    n: int                   # answerable questions both evaluated
    gain: float              # observed mean per-question gain (candidate - baseline)
    spread: float            # standard deviation of the per-question changes
    detectable: float        # smallest gain this set detects at `power`, at this spread
    needed: int | None       # questions that would detect the observed gain at `power` (None: no gain)


def gain_power(base, cand, objective: str, quality_weights, *, alpha: float = 0.05, power: float = POWER) -> GainPower:
    """One round's power: its per-question changes (RankingEvidence) read as the spread of its kind of change."""
    from tuner.sweep.evidence import ranking_evidence
    ev = ranking_evidence(base, cand, objective, quality_weights)
    det = detectable_gain(ev.n, ev.spread, alpha=alpha, power=power) if ev.n else math.inf
    return GainPower(ev.n, ev.delta, ev.spread, det, questions_needed(ev.delta, ev.spread, alpha=alpha, power=power))
