"""Whether a gate model's threshold moves to where a few labels put it: the rules `calibrate` chooses between.

search_core.gate.threshold gives the cut the labels point to (threshold_from_labels, the bagged best
balanced-accuracy cut), the exact sign test's tail and the count of labelled calls a move flips; this module
decides whether the gate moves there.

Whether the gate moves to that cut is a second question (decide_threshold). A move flips the decisions of the
calls between the two cuts, so the labels are evidence for it only through those calls: the move is made when
an exact sign test over them says it decides better (THRESHOLD_RULE, "covered-sign-test": an unlabelled call it
flips counts against it). Simulated weeks on spent sets (benchmarks/bench_gate_labels.py rules; BENCHMARKS.md,
the gate) chose it among the rules in THRESHOLD_RULES: from the default of its day it made 2 of 200 test halves
worse at 30 labels (by 0.023 and 0.015), the interval rule (move when the bagged interval leaves the current cut
out) 5 to 14 of 40 per pool; from a cut that was off it still recovered part of the gap. Rerun from the
cross-script default, with all five spent johngrib sets in the johngrib pool: 8 of 200 worse (at most by 0.058,
on the demo gate sets, where even the best cut scores only 0.04 above the default's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from search_core.gate.threshold import binomial_tail, flipped_labels, threshold_from_labels


# ---- whether to move: the rules `calibrate` chooses between ---------------------------------------------

SIGN_TEST_ALPHA = 0.05        # a move that helps no more than break-even passes 1 time in 20
THRESHOLD_RULE = "covered-sign-test"


@dataclass(frozen=True)
class ThresholdDecision:
    """What a rule made of the labels: the cut they point to (`proposed`, with the bagged interval), whether
    the gate should move to it, and the paired evidence: of the labelled calls whose decision the move flips,
    `wins` it would decide right and `losses` wrong; `p_value` is the exact one-sided chance of that many wins
    or more if the move did not help balanced accuracy (`null_share`: the share of wins that only breaks even)."""
    rule: str
    current: float
    proposed: float
    interval: tuple[float, float]
    move: bool
    wins: int
    losses: int
    null_share: float
    p_value: float
    why: str

    @property
    def threshold(self) -> float:
        return self.proposed if self.move else self.current


def decide_threshold(probabilities, labels, current: float, *, rule: str = "covered-sign-test",
                     level: float = 0.90, alpha: float = SIGN_TEST_ALPHA, seed: int = 0,
                     traffic=None, unlabelled=None, repeats=None) -> ThresholdDecision:
    """Whether the labels move the cut from `current`, by `rule` (THRESHOLD_RULES). Every rule proposes the
    bagged best balanced-accuracy cut (threshold_from_labels); they differ in when the gate moves to it."""
    base, _, a_text = rule.partition("@")       # "sign-test@0.2": the rule at another alpha
    if base not in THRESHOLD_RULES:
        raise ValueError(f"unknown threshold rule {rule!r}; valid: {', '.join(THRESHOLD_RULES)}")
    if a_text:
        alpha = float(a_text)
    t, (lo, hi) = threshold_from_labels(probabilities, labels, level=level, seed=seed)
    if base == "covered-sign-test":
        p_all, y_all = list(probabilities), list(labels)
        if repeats is not None:         # a call asked again carries its label into the count of flips
            p_all += list(repeats[0])
            y_all += list(repeats[1])
        return _covered_sign_test(rule, p_all, y_all, current, min(max(t, 0.01), 0.99), (lo, hi),
                                  unlabelled if unlabelled is not None else (), alpha)
    if base.startswith(("platt", "intercept")):
        t = platt_cut(probabilities, labels, traffic if traffic is not None else probabilities,
                      slope=base.startswith("platt"))
    t = min(max(t, 0.01), 0.99)
    wins, losses, share = flipped_labels(probabilities, labels, current, t)
    pv = binomial_tail(wins, wins + losses, share)
    inside = lo <= current <= hi
    significant = wins + losses > 0 and pv <= alpha
    move = {"always": True, "interval": not inside, "sign-test": significant,
            "interval+sign-test": significant and not inside, "platt": True, "platt+sign-test": significant,
            "intercept": True, "intercept+sign-test": significant}[base]
    why = (f"of the {wins + losses} labelled calls the move flips, {wins} would be decided right and {losses} "
           f"wrong (one-sided exact sign test against break-even share {share:.2f}: p = {pv:.3f}"
           f"{', at most ' if pv <= alpha else ', over '}{alpha:g})")
    return ThresholdDecision(rule, float(current), float(t), (float(lo), float(hi)), bool(move), wins, losses,
                             share, pv, why)


def _covered_sign_test(rule, probabilities, labels, current, proposed, interval, unlabelled, alpha):
    """The sign test with every unlabelled call the move would flip counted as a loss: a call nobody
    labelled is no evidence for the move, and `suggest` labels the calls nearest the cut first, so a far move
    flips calls it never saw. Tried at the labels' cut, then at that cut pulled back to the last labelled call
    before the first unlabelled one (alpha halved for the two tries); the gate moves to the first that passes."""
    p = np.asarray(probabilities, dtype=np.float64)
    u = np.asarray(unlabelled, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    share = float(np.clip(y.mean(), 0.2, 0.8))
    down = proposed < current
    covered = proposed
    between_u = u[(u >= proposed) & (u < current)] if down else u[(u >= current) & (u < proposed)]
    if len(between_u):
        first_u = between_u.max() if down else between_u.min()
        lab = p[(p > first_u) & (p < current)] if down else p[(p >= current) & (p < first_u)]
        covered = (float((lab.min() + first_u) / 2) if down else float((lab.max() + first_u) / 2)) if len(lab) else current
    tries = []
    for cut in dict.fromkeys((proposed, covered)):
        if cut == current:
            continue
        w, l, sh = flipped_labels(p, y, current, cut)
        lo_c, hi_c = min(current, cut), max(current, cut)
        n_u = int(((u >= lo_c) & (u < hi_c)).sum())
        tries.append((cut, w, l + n_u, sh, binomial_tail(w, w + l + n_u, sh), n_u))
    a = alpha / max(len(tries), 1)
    ok = [t for t in tries if t[2] + t[1] > 0 and t[4] <= a]
    cut, w, l, sh, pv, n_u = (ok or tries or [(proposed, 0, 0, share, 1.0, 0)])[0]
    why = (f"of the {w + l} calls the move flips, {w} labelled would be decided right and {l} would not or are not "
           f"labelled ({n_u}); one-sided exact sign test against break-even share {sh:.2f}: p = {pv:.3f}"
           f"{', at most ' if ok else ', over '}{a:g}")
    return ThresholdDecision(rule, float(current), float(cut), (float(interval[0]), float(interval[1])), bool(ok),
                             w, l, sh, pv, why)


MAX_MORE_LABELS = 1_000       # past this many more labels (weeks of traffic between two cuts) the answer is "more than"


@dataclass(frozen=True)
class LabelsToDecide:
    """How many more labels would let the sign test decide a move the labels point to but do not yet show:
    `more` labels on calls between the two cuts, if they split as the labelled ones there did (`win_share`
    of them decided right by the move); None when no number would (the labelled calls between the cuts split
    no better than break-even), 0 when the labels already decide."""
    more: int | None
    win_share: float | None
    text: str


def labels_to_decide(wins: int, losses: int, unlabelled: int, null_share: float, *,
                     alpha: float = SIGN_TEST_ALPHA / 2) -> LabelsToDecide:
    """`wins` and `losses`: the labelled calls the move flips, decided right and wrong by it; `unlabelled`: the
    flipped calls nobody labelled, which the covered sign test counts against the move. Labelling one of those
    turns a counted loss into a win with chance `win_share` (the labelled calls' own split); once they are all
    labelled, more traffic between the cuts has to be labelled. alpha: the covered test's per-try level."""
    n_lab = wins + losses
    if n_lab == 0:
        return LabelsToDecide(None, None, "no labelled call lies between the two cuts: label the calls "
                              "`recall-log suggest` picks near them")
    share = wins / n_lab
    if binomial_tail(wins, n_lab + unlabelled, null_share) <= alpha:
        return LabelsToDecide(0, share, "the labels decide already")
    if share <= null_share:
        return LabelsToDecide(None, share, f"no number of labels would: of the {n_lab} labelled calls the move "
                              f"flips, {wins} are decided right, no better than break-even ({null_share:.2f})")
    for k in range(1, MAX_MORE_LABELS + 1):
        w = wins + share * k
        n = n_lab + max(unlabelled, k)          # unlabelled calls first, then new traffic between the cuts
        if binomial_tail(math.floor(w + 1e-9), n, null_share) <= alpha:
            return LabelsToDecide(k, share, f"about {k} more labels on calls between the two cuts would decide "
                                  f"it, if they split as the {n_lab} labelled there did ({wins} decided right)")
    return LabelsToDecide(None, share, f"more than {MAX_MORE_LABELS} labels: the labelled calls between the cuts "
                          f"split too close to break-even ({wins} of {n_lab} decided right)")


THRESHOLD_RULES = {
    "covered-sign-test": "the sign test with the unlabelled calls the move flips counted against it",
    "always": "move to the labels' cut whatever they say",
    "interval": "move when the labels' interval leaves the current cut out",
    "sign-test": "move when the labelled calls the move flips show, by an exact sign test, that it decides better",
    "interval+sign-test": "both",
    "platt": "move to where a refit of the calibration's slope and intercept on the labels puts the cut",
    "platt+sign-test": "the Platt cut, when the sign test says it decides better",
    "intercept": "move to where a refit of the calibration's intercept alone (slope kept) puts the cut",
    "intercept+sign-test": "the intercept cut, when the sign test says it decides better",
}


def platt_cut(probabilities, labels, traffic, *, slope: bool = True) -> float:
    """The cut a recalibration of P on the labels gives: q = sigmoid(a * logit(P) + b) fitted to the labels
    (selection by P, as `suggest` picks, leaves this fit unbiased), and the cut where q equals the share of
    answerable calls in the traffic (its mean q over every call): balanced accuracy's best cut for a
    calibrated score. A fit whose slope is not positive says nothing: the bagged cut instead."""
    from sklearn.linear_model import LogisticRegression

    p = np.clip(np.asarray(probabilities, dtype=np.float64), 1e-6, 1 - 1e-6)
    y = np.asarray(labels, dtype=int)
    z = np.log(p / (1 - p))
    if slope:
        lr = LogisticRegression(C=1.0, max_iter=1000).fit(z.reshape(-1, 1), y)
        a, b = float(lr.coef_[0, 0]), float(lr.intercept_[0])
    else:                       # the intercept alone, slope 1: Newton steps on the log loss of sigmoid(z + b)
        a, b = 1.0, 0.0
        for _ in range(50):
            q = 1 / (1 + np.exp(-(z + b)))
            step = float((y - q).sum() / max((q * (1 - q)).sum(), 1e-9))
            b = float(np.clip(b + step, -10, 10))
            if abs(step) < 1e-8:
                break
    if a <= 0:
        return threshold_from_labels(p, y, resamples=100)[0]
    pt = np.clip(np.asarray(traffic, dtype=np.float64), 1e-6, 1 - 1e-6)
    q = 1 / (1 + np.exp(-(a * np.log(pt / (1 - pt)) + b)))
    prior = float(np.clip(q.mean(), 0.05, 0.95))
    z_cut = (math.log(prior / (1 - prior)) - b) / a
    return float(1 / (1 + math.exp(-z_cut)))
