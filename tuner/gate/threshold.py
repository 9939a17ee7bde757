"""Whether a gate model's threshold moves to where a few labels put it: the rules `calibrate` chooses between.

search_core.gate.threshold gives the cut the labels point to (threshold_from_labels, the bagged best
balanced-accuracy cut), the exact sign test's tail and the count of labelled calls a move flips; this module
decides whether the gate moves there.

Whether the gate moves is a second question (decide_threshold). A move flips the decisions of the calls between
the two cuts, so the labels are evidence for it only through those calls. THRESHOLD_RULE, "scan-sign-test", tests
every move the labels can tell apart (the k labelled calls nearest the cut, on either side) with an exact
one-sided sign test against the break-even share of the traffic (traffic_share), and holds the whole scan to a
chance SCAN_ALPHA of a false move by simulating the least favourable labelling of a cut that is already the best
(scan_level); the gate moves to the passing band with the largest estimated gain, no further than its labels.
A call nobody labelled is no evidence either way. Synthetic weeks with a known right cut and the demo's weeks
(benchmarks/bench_gate_labels.py synthetic, sets; docs/lab-notes/gate-2026-12.md) chose it and its alpha over the
rule before ("labelled-sign-test": one cut, the labels' bagged best, at alpha 0.05), which moved in 0 of 100
synthetic weeks from the right cut but in only 7 % of them at 10 labels from a cut 1 logit off.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from search_core.gate.threshold import binomial_tail, flipped_labels, threshold_from_labels


# ---- whether to move: the rules `calibrate` chooses between ---------------------------------------------

SIGN_TEST_ALPHA = 0.05        # a move that helps no more than break-even passes 1 time in 20
THRESHOLD_RULE = "scan-sign-test"


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
    alpha: float = SIGN_TEST_ALPHA      # the level `p_value` was held to (a rule that tries two cuts halves it)

    @property
    def threshold(self) -> float:
        return self.proposed if self.move else self.current


def decide_threshold(probabilities, labels, current: float, *, rule: str = THRESHOLD_RULE,
                     level: float = 0.90, alpha: float | None = None, seed: int = 0,
                     traffic=None, unlabelled=None, repeats=None) -> ThresholdDecision:
    """Whether the labels move the cut from `current`, by `rule` (THRESHOLD_RULES). Every rule proposes the
    bagged best balanced-accuracy cut (threshold_from_labels), but the scan, whose cut is its chosen band's;
    they differ in when the gate moves to it. alpha: None for the rule's own level (SCAN_ALPHA, SIGN_TEST_ALPHA)."""
    base, _, a_text = rule.partition("@")       # "sign-test@0.2": the rule at another alpha
    base, _, share_from = base.partition(":")  # "labelled-sign-test/gap:traffic": where the break-even share comes from
    if (base.partition("/")[0] not in THRESHOLD_RULES or base.partition("/")[2] not in ("", *SHRINKS)
            or share_from not in ("", *SHARES)):
        raise ValueError(f"unknown threshold rule {rule!r}; valid: {', '.join(THRESHOLD_RULES)}")
    if a_text:
        alpha = float(a_text)
    if alpha is None:               # each rule's own level: the scan holds all its moves to SCAN_ALPHA at once
        alpha = SCAN_ALPHA if base == "scan-sign-test" else SIGN_TEST_ALPHA
    t, (lo, hi) = threshold_from_labels(probabilities, labels, level=level, seed=seed)
    if base == "scan-sign-test":
        p_all, y_all = list(probabilities), list(labels)
        if repeats is not None:         # a call asked again carries its label into the count of flips
            p_all += list(repeats[0])
            y_all += list(repeats[1])
        share = traffic_share(probabilities, labels, traffic if traffic is not None and len(traffic) else probabilities)
        return scan_sign_test(rule, p_all, y_all, current, share, (lo, hi), alpha, seed=seed)
    if base.startswith("labelled-sign-test"):
        p_all, y_all = list(probabilities), list(labels)
        if repeats is not None:         # a call asked again carries its label into the count of flips
            p_all += list(repeats[0])
            y_all += list(repeats[1])
        shrink = base.partition("/")[2] or LABELLED_SHRINK
        share = None
        if (share_from or LABELLED_SHARE) == "traffic" and traffic is not None and len(traffic):
            share = traffic_share(probabilities, labels, traffic)
        return _labelled_sign_test(rule, p_all, y_all, current, min(max(t, 0.01), 0.99), (lo, hi), alpha, shrink,
                                   share)
    if base.startswith("calibration-lr"):
        share = traffic_share(probabilities, labels, traffic if traffic is not None and len(traffic) else probabilities)
        cut, pv = calibration_test(probabilities, labels, current, share)
        w, l, _ = flipped_labels(probabilities, labels, current, cut)
        br = share if cut < current else 1 - share
        move = pv <= alpha and (w + l == 0 or w / (w + l) > br)
        why = (f"the labels' calibration puts the best cut at {cut:.3f} (likelihood-ratio test that {current:.3f} is "
               f"it: p = {pv:.3f}{', at most ' if pv <= alpha else ', over '}{alpha:g}); of the {w + l} labelled calls "
               f"the move flips, {w} would be decided right")
        return ThresholdDecision(rule, float(current), cut, (float(lo), float(hi)), bool(move), w, l, br, pv, why, alpha)
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
                             share, pv, why, alpha)


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
                             w, l, sh, pv, why, a)


SHRINKS = ("none", "gap", "edge")
LABELLED_SHRINK = "gap"
SHARES = ("labels", "traffic")
LABELLED_SHARE = "traffic"


def traffic_share(probabilities, labels, traffic) -> float:
    """The share of answerable calls in the whole traffic, which is where a move breaks even on balanced
    accuracy: the labels' own share is not it, since `suggest` picks half of them near the cut. A logistic fit
    of the labels on logit(P) (unbiased when the picks depend on P alone) gives each call a chance of being
    answerable; the share is their mean over the traffic, kept within 0.2-0.8 as the labels' share is."""
    from sklearn.linear_model import LogisticRegression

    y = np.asarray(labels, dtype=int)
    if not 0 < y.sum() < len(y):
        return float(np.clip(y.mean() if len(y) else 0.5, 0.2, 0.8))
    z = _logit(np.asarray(probabilities, dtype=np.float64)).reshape(-1, 1)
    lr = LogisticRegression(C=1.0, max_iter=1000).fit(z, y)
    q = lr.predict_proba(_logit(np.asarray(traffic, dtype=np.float64)).reshape(-1, 1))[:, 1]
    return float(np.clip(q.mean(), 0.2, 0.8))


def _logit(p):
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def _labelled_sign_test(rule, probabilities, labels, current, proposed, interval, alpha, shrink, share=None):
    """The exact sign test over the labelled calls the move flips, and nothing else: a call nobody labelled is
    no evidence either way, so it does not count against the move (counted as a loss it vetoed every move a
    week of 60-75 calls pointed to). The cut the gate moves to is shrunk toward the current one, so the move
    reaches no further than the labels do: `gap` puts it halfway (on the logit scale) between the last
    labelled call it flips and the next labelled call beyond, `edge` right at that last flipped call (the
    smallest move that flips the same labelled calls), `none` leaves the labels' bagged cut."""
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    down = proposed < current
    lo, hi = min(current, proposed), max(current, proposed)
    flipped = p[(p >= lo) & (p < hi)]
    cut = proposed
    if len(flipped) and shrink != "none":
        if down:            # the lowest flipped call stays flipped at a cut on it (P >= cut injects)
            edge, beyond = float(flipped.min()), p[p < flipped.min()]
            far = float(beyond.max()) if len(beyond) else None
        else:               # the highest flipped call: a cut just above it stops it
            edge, beyond = float(np.nextafter(flipped.max(), 1.0)), p[p > flipped.max()]
            far = float(beyond.min()) if len(beyond) else None
        if shrink == "edge" or far is None:
            cut = edge
        else:
            cut = _logit_midpoint(edge, far)
        cut = min(max(cut, 0.01), 0.99)
        if (cut < current) != down or cut == current:
            cut = proposed
    w, l, label_share = flipped_labels(p, y, current, cut)
    if share is None:
        share = label_share
    elif cut > current:              # raising the cut: its wins are probes, break-even at their share
        share = 1.0 - share
    pv = binomial_tail(w, w + l, share) if w + l else 1.0
    move = w + l > 0 and pv <= alpha
    why = (f"of the {w + l} labelled calls the move flips, {w} would be decided right and {l} wrong (one-sided "
           f"exact sign test against break-even share {share:.2f}: p = {pv:.3f}{', at most ' if move else ', over '}"
           f"{alpha:g}; calls nobody labelled are no evidence either way)")
    return ThresholdDecision(rule, float(current), float(cut), (float(interval[0]), float(interval[1])), bool(move),
                             w, l, share, pv, why, alpha)


SCAN_ALPHA = 0.20            # the chance that a cut which is already the best moves (the least favourable case)
SCAN_SIMULATIONS = 4000      # null draws behind the level; its Monte Carlo error at alpha 0.20 is about 0.006


@dataclass(frozen=True)
class Band:
    """The labelled calls a move from the current cut would flip: `down` (a lower cut lets them through, so an
    answerable one is a win) or up (a higher cut stops them, so a probe is a win); `size` of them, `wins`
    decided right by the move; `cut` where the gate would move (inside the gap past the band's last call)."""
    down: bool
    size: int
    wins: int
    p_value: float
    cut: float
    edge: float           # the P of the band's last labelled call (nearest the cut the move goes to)


def scan_bands(probabilities, labels, current: float, share: float) -> list[Band]:
    """Every move the labels can tell apart, both ways from `current`: a band is the k labelled calls nearest
    the cut on one side (k = 1, 2, ..., ending between two distinct P values), with the exact one-sided sign
    test of its wins against break-even (`share` of answerable calls in the traffic going down, 1 - share
    going up: the share at which the move leaves balanced accuracy where it is)."""
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    bands = []
    for down in (True, False):
        side = p < current if down else p >= current
        order = np.argsort(-p[side] if down else p[side], kind="stable")
        ps, ys = p[side][order], y[side][order]
        wins = np.cumsum(ys if down else ~ys)
        null = share if down else 1.0 - share
        for k in range(1, len(ps) + 1):
            if k < len(ps) and ps[k] == ps[k - 1]:
                continue                # a cut cannot part two calls of the same P
            edge = float(ps[k - 1])
            far = float(ps[k]) if k < len(ps) else None
            if down:
                cut = _logit_midpoint(edge, far) if far is not None else edge
            else:
                cut = _logit_midpoint(edge, far) if far is not None else float(np.nextafter(edge, 1.0))
            bands.append(Band(down, k, int(wins[k - 1]), binomial_tail(int(wins[k - 1]), k, null),
                              min(max(cut, 0.01), 0.99), edge))
    return bands


def scan_level(sizes_down: int, sizes_up: int, share: float, alpha: float, *,
               simulations: int = SCAN_SIMULATIONS, seed: int = 0) -> float:
    """The per-band level that holds the whole scan to `alpha`: under the least favourable null for "the
    current cut is the best" (every labelled call on either side decided right by a move exactly at break-even,
    which is what a best cut means on a monotone score), the alpha quantile of the smallest band p-value over
    `simulations` draws. A band whose p-value is at most this level moves the gate; the chance that any band
    does when the current cut is right is at most alpha (up to the simulation's error)."""
    from scipy.stats import binom

    rng = np.random.default_rng(seed)
    smallest = np.ones(simulations)
    for n, null in ((sizes_down, share), (sizes_up, 1.0 - share)):
        if n == 0:
            continue
        wins = np.cumsum(rng.random((simulations, n)) < null, axis=1)
        k = np.arange(1, n + 1)
        tail = binom.sf(np.arange(n + 1)[None, :] - 1, k[:, None], null)     # tail[k - 1, w] = P(X >= w | k)
        smallest = np.minimum(smallest, tail[k - 1, wins].min(axis=1))
    smallest.sort()
    i = int(math.floor(alpha * simulations)) - 1
    return float(smallest[i]) if i >= 0 else 0.0


def scan_sign_test(rule, probabilities, labels, current, share, interval, alpha, *, seed: int = 0) -> ThresholdDecision:
    """The sign test over every band of labelled calls next to the current cut (scan_bands), held to the level
    that makes a false move (from a cut that is already the best) happen with chance at most `alpha`
    (scan_level). Among the bands that pass, the gate moves to the one with the largest gain in balanced
    accuracy its labels estimate (a win counts 1 - break-even, a loss break-even); when none passes, that band
    among all is what the labels point to, and what the count of labels still needed is about."""
    p = np.asarray(probabilities, dtype=np.float64)
    bands = scan_bands(p, labels, current, share)
    level = scan_level(int((p < current).sum()), int((p >= current).sum()), share, alpha, seed=seed)

    def gain(b):
        null = share if b.down else 1.0 - share
        return b.wins * (1 - null) - (b.size - b.wins) * null

    passing = [b for b in bands if b.p_value <= level and gain(b) > 0]
    pointing = [b for b in bands if gain(b) > 0]
    best = max(passing or pointing, key=lambda b: (gain(b), -b.p_value), default=None)
    if best is None:
        return ThresholdDecision(rule, float(current), float(current), (float(interval[0]), float(interval[1])),
                                 False, 0, 0, share, 1.0, "no move the labels can tell apart decides better than the "
                                 f"current cut by its labelled calls (break-even share {share:.2f})", level)
    null = share if best.down else 1.0 - share
    move = bool(passing)
    why = (f"of the {best.size} labelled calls a move {'down' if best.down else 'up'} to {best.cut:.3f} flips, "
           f"{best.wins} would be decided right and {best.size - best.wins} wrong (one-sided exact sign test "
           f"against break-even share {null:.2f}: p = {best.p_value:.4f}, {'at most' if move else 'over'} the "
           f"level {level:.4f} that holds a false move over all {len(bands)} moves the labels tell apart to "
           f"{alpha:g}; calls nobody labelled are no evidence either way)")
    return ThresholdDecision(rule, float(current), float(best.cut), (float(interval[0]), float(interval[1])), move,
                             best.wins, best.size - best.wins, null, float(best.p_value), why, level)


def calibration_test(probabilities, labels, current: float, share: float) -> tuple[float, float]:
    """(the cut the labels' calibration puts where balanced accuracy is best, the likelihood-ratio p-value that
    the current cut is that cut). The labels are fitted as q = sigmoid(a * logit(P) + b) (unbiased when the picks
    depend on P alone, as `suggest`'s do); the best cut is where q equals `share`, the traffic's answerable
    share. H0 pins the fit through (logit(current), logit(share)), leaving the slope free: one degree of freedom."""
    from scipy.stats import chi2
    from sklearn.linear_model import LogisticRegression

    z = _logit(np.asarray(probabilities, dtype=np.float64))
    y = np.asarray(labels, dtype=int)
    if not 0 < y.sum() < len(y):
        return float(current), 1.0
    lr = LogisticRegression(C=1e4, max_iter=1000).fit(z.reshape(-1, 1), y)
    a, b = float(lr.coef_[0, 0]), float(lr.intercept_[0])
    if a <= 0:
        return float(current), 1.0
    zc, ls = float(_logit(np.array([current]))[0]), math.log(share / (1 - share))

    def loglik(u):
        return float(np.sum(y * u - np.logaddexp(0.0, u)))

    a0 = a                                     # H0: u = a0 (z - zc) + ls, a0 by Newton's method
    for _ in range(50):
        with np.errstate(over="ignore"):
            q = 1 / (1 + np.exp(-(a0 * (z - zc) + ls)))
        g, h = float(((y - q) * (z - zc)).sum()), float((q * (1 - q) * (z - zc) ** 2).sum())
        if h <= 1e-12:
            break
        step = g / h
        a0 = max(a0 + step, 1e-6)
        if abs(step) < 1e-9:
            break
    stat = max(2 * (loglik(a * z + b) - loglik(a0 * (z - zc) + ls)), 0.0)
    cut = 1 / (1 + math.exp(-((ls - b) / a)))
    return float(min(max(cut, 0.01), 0.99)), float(chi2.sf(stat, 1))


def _logit_midpoint(a: float, b: float) -> float:
    """The point halfway between two probabilities on the logit scale (where the gate's score is linear)."""
    a, b = (min(max(x, 1e-6), 1 - 1e-6) for x in (a, b))
    z = (math.log(a / (1 - a)) + math.log(b / (1 - b))) / 2
    return 1 / (1 + math.exp(-z))


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
    of_kind: int | None = None      # how many of the `more` must be decided right by the move (its kind: below)


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
                                  f"it, if they split as the {n_lab} labelled there did ({wins} decided right)",
                                  math.floor(w + 1e-9) - wins)
    return LabelsToDecide(None, share, f"more than {MAX_MORE_LABELS} labels: the labelled calls between the cuts "
                          f"split too close to break-even ({wins} of {n_lab} decided right)")


def labels_to_decide_for(decision: ThresholdDecision, unlabelled_between: int) -> LabelsToDecide:
    """How many more labels would decide the move `decision` declined, by its own rule: the labelled-call sign
    test counts only labelled calls, so only new labels between the cuts count; the covered one also counts
    the `unlabelled_between` calls nobody labelled against the move."""
    if decision.proposed == decision.current:
        return LabelsToDecide(None, None, "the labels point nowhere else: on either side of the cut, no run of labelled "
                              "calls next to it is decided better by a move than by the cut in force")
    covered = decision.rule.startswith("covered-sign-test")
    labelled = decision.wins + (max(decision.losses - unlabelled_between, 0) if covered else decision.losses)
    if labelled == 0 and unlabelled_between == 0:
        # "label the calls suggest picks" would send the user to a list with no call between the cuts in it
        lo, hi = sorted((decision.current, decision.proposed))
        return LabelsToDecide(None, None, f"no logged call lies between the two cuts ({lo:.3f} and {hi:.3f}), "
                              "labelled or not: only calls scored there can decide the move, and they come with use "
                              "(`recall-log suggest` picks them once they are logged)")
    if decision.rule.startswith("scan-sign-test"):
        d = labels_to_decide(decision.wins, decision.losses, 0, decision.null_share, alpha=decision.alpha)
        if not d.more:
            return d
        lo, hi = sorted((decision.current, decision.proposed))
        down = decision.proposed < decision.current
        kind = (f"calls the gate now stops with P from {lo:.3f} to {hi:.3f}, at least {d.of_kind} of them labelled "
                "relevant (answerable)" if down else
                f"calls the gate now injects with P from {lo:.3f} to {hi:.3f}, at least {d.of_kind} of them labelled "
                "irrelevant (probes)")
        return dataclasses.replace(d, text=f"{d.text}: {kind}, would move it {'down' if down else 'up'} to "
                                          f"{decision.proposed:.3f}")
    if decision.rule.startswith("labelled-sign-test"):
        return labels_to_decide(decision.wins, decision.losses, 0, decision.null_share, alpha=decision.alpha)
    if covered:                                           # its losses hold the unlabelled calls it flips
        return labels_to_decide(decision.wins, max(decision.losses - unlabelled_between, 0), unlabelled_between,
                                decision.null_share, alpha=decision.alpha)
    return labels_to_decide(decision.wins, decision.losses, 0, decision.null_share, alpha=decision.alpha)


THRESHOLD_RULES = {
    "scan-sign-test": "the exact sign test over every band of labelled calls next to the current cut, held by "
                      "simulation to a chance of a false move of alpha (SCAN_ALPHA, 0.20) over all of them; the gate moves to the "
                      "passing band with the largest estimated gain",
    "calibration-lr": "move to where a logistic calibration of P on the labels puts the best cut, when a "
                      "likelihood-ratio test rejects the current cut as that cut",
    "labelled-sign-test": "the exact sign test over the labelled calls the move flips (unlabelled ones are no "
                          "evidence); the cut shrunk toward the current one, as far as the labels reach",
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
