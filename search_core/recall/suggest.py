"""Which recall calls to label: the ones whose label would most change the gate's threshold.

A person labels a few dozen calls, not hundreds, so each label must count. The threshold moves only on
labels of calls scored near it, so half the picks sit on both sides of it (of the threshold the labels so
far point to, once there are some); but the scale of a gate's probability moves between vaults (on the
johngrib wiki the vault's best threshold sat near 0.3 while the shipped one is 0.64), so a band around
today's threshold could miss where it ought to be: the other half spread over the whole score range, one
call per stratum. Near-duplicate queries (the same question asked again, or with a word more) are one
pick: a second label on the same question says nothing new.

`cover_flips=True` sends the near picks, once the labels point away from today's threshold, first to the calls
a move there would flip, nearest today's threshold first (`calibrate` moves only over flipped calls that are
labelled). Measured on simulated weeks (benchmarks/bench_gate_labels.py rules --picker), it recovered more from
a threshold that was off but made more test halves worse from the shipped default (10 of 200 against 8 at 30
labels), so it is not the default.

    picks = suggest(read_logged_calls(log), model=gate_model, threshold=0.64, n=20)
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import chain

from search_core.recall.log import LABELS, LoggedCall

NEAR_SHARE = 0.5           # the share of picks around the threshold; the rest spread over the score range
DUPLICATE_JACCARD = 0.6    # character-trigram Jaccard at or above which two queries are one question
                           # ("김치찌개 레시피" / "김치찌개 레시피 알려줘": 0.63; two different questions on one
                           # topic, "GraphRAG 커뮤니티 요약" / "GraphRAG 엔티티 추출": 0.35). A paraphrase
                           # ("떡볶이 양념 비율" / "떡볶이 양념은 어떤 비율로?": 0.27) stays two picks.
INTERVAL_MIN_LABELS = 6    # below this many labels the labels do not move the centre of the picks
FLIP_SHARE = 0.5           # with cover_flips, once labels point away from the threshold: the share of picks that
                           # go to the calls a move there would flip (the rest as above)


@dataclass(frozen=True)
class Suggestion:
    id: int
    query: str
    top_note: str | None
    probability: float | None     # P(answerable) under the gate in force; None on the cosine scale
    score: float                  # the gate's score on its scale (P, or the top cosine)
    reason: str
    duplicates: tuple[int, ...] = ()   # the near-duplicate calls this pick stands for

    def as_json(self) -> dict:
        return {"id": self.id, "query": self.query, "top_note": self.top_note,
                "probability": None if self.probability is None else round(self.probability, 4),
                "reason": self.reason}


@dataclass(frozen=True)
class Suggestions:
    picks: tuple[Suggestion, ...]
    scale: str                    # "probability" (a gate model) or "cosine"
    threshold: float              # the gate's threshold in force
    centre: float                 # where the near picks are centred: the labels' threshold, else `threshold`
    interval: tuple[float, float] | None   # the labels' threshold interval, when labels set the centre
    pool: int                     # calls that could be picked (unlabelled, searched, with query text)
    labelled: int                 # calls in the window already labelled
    left_out: dict = field(default_factory=dict)   # why other calls could not be picked: reason -> count


def normalise_query(q: str) -> str:
    q = unicodedata.normalize("NFKC", q).lower()
    return re.sub(r"[\W_]+", "", q)


def _grams(q: str) -> set:
    return _grams_of(normalise_query(q))


def _grams_of(s: str) -> set:
    """The character trigrams of a normalised query."""
    return {s[i:i + 3] for i in range(len(s) - 2)} if len(s) >= 3 else {s}


def _prefix_length(n: int) -> int:
    """How many of a set's rarest grams must be indexed and looked up: two sets of sizes n and m whose Jaccard
    reaches t share a gram among the first n - ceil(t n) + 1 of each (a hair under the threshold: a prefix one
    gram longer than needed is harmless, one too short is not)."""
    return n - math.ceil((DUPLICATE_JACCARD - 1e-9) * n) + 1


class _DuplicateFinder:
    """Near-duplicate lookup among the queries added so far: `match` names the one a query shares the most
    trigrams with among those at or above DUPLICATE_JACCARD (the first added on a tie), else None; the same
    trigrams asked again get the answer they got the first time.

    Prefix filtering keeps it in proportion to the window (a week of 100,000 calls compared each query with
    every earlier one sharing a trigram: 96 s): grams are ranked rarest first over `universe` (the trigram sets
    of every query that will be added; a gram outside it ranks after all of them), and two sets whose Jaccard
    reaches t share a gram among the first |s| - ceil(t |s|) + 1 of each. Only those prefix grams are indexed
    and looked up; each candidate is then checked exactly, so the answer is the one a comparison with every
    query would give. A query is handled as the sorted tuple of its grams' ranks (`ranks`), made once per
    query: small ints, sorted once, so its prefix is a slice (ranking the grams at each look-up and each add
    was a third of `suggest`'s time over 100,000 calls)."""

    def __init__(self, universe):
        freq = Counter(chain.from_iterable(universe))
        # any one order of the grams finds every pair that reaches the Jaccard; rarest first finds the fewest others
        self.rank = {g: i for i, g in enumerate(sorted(freq, key=freq.__getitem__))}
        self.postings: dict[int, list[int]] = defaultdict(list)
        self.sets: dict[int, tuple] = {}
        self.order: dict[int, int] = {}
        self.whole: dict[tuple, int] = {}

    def ranks(self, grams, grow: bool = False) -> tuple[tuple, int]:
        """(the sorted ranks of `grams` in the universe, how many grams): grams outside the universe are in no
        added set and are left out of the ranks, unless `grow` ranks them after it (what `add` needs)."""
        rank = self.rank
        try:
            return tuple(sorted(map(rank.__getitem__, grams))), len(grams)
        except KeyError:
            if grow:
                for g in grams:
                    if g not in rank:
                        rank[g] = len(rank)
                return tuple(sorted(map(rank.__getitem__, grams))), len(grams)
            return tuple(sorted([rank[g] for g in grams if g in rank])), len(grams)

    def match(self, ranks: tuple, n: int) -> int | None:
        """`ranks`, `n`: a query as `ranks` gives it."""
        # the same question asked again (the same trigrams) folds where it folded the first time: a busy week
        # asks most of its questions more than once
        known = self.whole.get((ranks, n))
        if known is not None:
            return known
        seen: set[int] = set()
        best, best_key = None, None
        lo, hi = DUPLICATE_JACCARD * n - 1e-9, n / DUPLICATE_JACCARD + 1e-9   # sizes that can reach the Jaccard
        sets, postings, order = self.sets, self.postings, self.order
        mine = None
        for r in ranks[:_prefix_length(n)]:
            for k in postings.get(r, ()):
                if k in seen:
                    continue
                seen.add(k)
                other = sets[k]
                if not lo <= len(other) <= hi:
                    continue
                if mine is None:
                    mine = set(ranks)
                shared = len(mine.intersection(other))
                if shared / (n + len(other) - shared) >= DUPLICATE_JACCARD:
                    key = (-shared, order[k])
                    if best is None or key < best:
                        best, best_key = key, k
        if best is not None:
            self.whole[(ranks, n)] = best_key
        return best_key

    def add(self, key: int, ranks: tuple):
        """`ranks`: every gram of the query ranked (`ranks(grams, grow=True)`)."""
        self.sets[key] = ranks
        self.order[key] = len(self.order)
        postings = self.postings
        for r in ranks[:_prefix_length(len(ranks))]:
            postings[r].append(key)


def twin_labels(labelled: list[tuple[str, bool]], queries: list[str]) -> list[bool | None]:
    """For each query, the label of the first labelled query it near-duplicates (as `suggest` folds them:
    DUPLICATE_JACCARD), else None: the same question asked again carries its label."""
    lab_grams = [(_grams(q), label) if q else (None, label) for q, label in labelled]
    finder = _DuplicateFinder([g for g, _ in lab_grams if g is not None])   # only the labelled are ever added
    label_of = {}
    for i, (g, label) in enumerate(lab_grams):
        if g is not None:
            finder.add(i, finder.ranks(g, grow=True)[0])
            label_of[i] = label
    out, answer = [], {}
    for q in queries:
        if not q:
            out.append(None)
            continue
        s = normalise_query(q)
        if s not in answer:                    # a question asked again: answered once
            k = finder.match(*finder.ranks(_grams_of(s)))
            answer[s] = None if k is None else label_of[k]
        out.append(answer[s])
    return out


def probabilities(model, feature_dicts: list[dict]) -> list[float]:
    """model.probability of every row, in one matrix product (GateModel.probability's arithmetic; one row at a
    time cost 30 us a call, 3 s of a 100,000-call week)."""
    from search_core.recall.log import feature_matrix
    if not feature_dicts:
        return []
    return matrix_probabilities(model, feature_matrix(feature_dicts, model.features))


def matrix_probabilities(model, X) -> list[float]:
    """model.probability of each row of X (the model's features, in its order)."""
    import numpy as np
    if not len(X):
        return []
    z = ((X - np.asarray(model.mean)) / np.asarray(model.scale)) @ np.asarray(model.coef) + model.intercept
    x = model.calib_a * z + model.calib_b
    with np.errstate(over="ignore"):       # the stable form of both signs, as sigmoid: no exp of a large x
        e = np.exp(-np.abs(x))
        p = np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return p.tolist()


def call_scores(calls: list[LoggedCall], model=None) -> tuple[str, dict[int, float]]:
    """The gate's score of each call that reached the gate: P(answerable) under `model` (recomputed from the
    logged features, so a label-driven threshold and these scores are on one scale), else the logged
    probability when every such call has one, else the top cosine."""
    searched = [c for c in calls if c.searched]
    if model is not None:
        return "probability", dict(zip((c.id for c in searched), probabilities(model, [c.features for c in searched])))
    if searched and all("probability" in c.features for c in searched):
        return "probability", {c.id: c.features["probability"] for c in searched}
    return "cosine", {c.id: c.top_score for c in searched if c.top_score is not None}


def labels_threshold(scores: list[float], labels: list[int], scale: str):
    """(centre, interval) the labels point to, or None when they cannot (one class, or too few)."""
    if len(labels) < INTERVAL_MIN_LABELS or not 0 < sum(labels) < len(labels):
        return None
    if scale == "probability":
        from search_core.gate.threshold import threshold_from_labels
        return threshold_from_labels(scores, labels, resamples=300)
    from search_core.gate.model import best_balanced_threshold
    return best_balanced_threshold(scores, labels)[0], None


def suggest(calls: list[LoggedCall], *, threshold: float, model=None, n: int = 20,
            fingerprint_key: str | None = None, cover_flips: bool = False) -> Suggestions:
    """Pick up to `n` unlabelled calls to label, each with the reason it was picked. `model` is the gate
    in force (None: the logged probabilities, else cosines); `threshold` its threshold on that scale;
    calls logged against another index than `fingerprint_key` are left out. `cover_flips=True` sends the near
    picks to the calls a move to where the labels point would flip (measured, not the default: see above)."""
    if n < 1:
        raise ValueError("n must be at least 1")
    scale, scores = call_scores(calls, model)
    folded = _fold(calls, lambda c: c.id in scores, fingerprint_key)
    return _pick(*folded, scale, scores, threshold, n, cover_flips)


def _fold(calls, usable, fingerprint_key):
    """(labelled, pool, kept, stands_for, left_out): the calls that can be labelled, less the near-duplicates of
    a labelled call (dropped) or of a newer call in the pool (which stands for them). `calls` need only id, ts,
    query, label and index_fingerprint (LoggedCall or CallHead); `usable(c)`: the call reached the gate."""
    left_out: Counter = Counter()
    labelled, pool = [], []
    for c in calls:
        if fingerprint_key and c.index_fingerprint and c.index_fingerprint != fingerprint_key:
            left_out["logged against another index"] += 1
        elif not usable(c):
            left_out["stopped before the gate (no search)"] += 1
        elif c.label in LABELS:
            labelled.append(c)
        elif not c.query:
            left_out["no query text (privacy = hash)"] += 1
        else:
            pool.append(c)
    # the trigrams of each distinct query, counted once for the finder's order and made again when matched (kept
    # for 100,000 calls they were 240 MB); a query asked again in the same words is answered as the first time
    norm: dict[str, str] = {}
    for c in labelled + pool:
        if c.query and c.query not in norm:
            norm[c.query] = normalise_query(c.query)
    finder = _DuplicateFinder(map(_grams_of, set(norm.values())))
    for c in labelled:
        if c.query:
            finder.add(-c.id - 1, finder.ranks(_grams_of(norm[c.query]), grow=True)[0])
    kept: dict = {}
    stands_for: dict[int, list[int]] = defaultdict(list)
    folded_to: dict[str, int] = {}
    for c in sorted(pool, key=lambda c: -c.ts):
        q = norm[c.query]
        k = folded_to.get(q)
        if k is None:
            ranks, n = finder.ranks(_grams_of(q), grow=True)
            k = finder.match(ranks, n)
            if k is None:
                kept[c.id] = c
                finder.add(c.id, ranks)
                folded_to[q] = c.id
                continue
            folded_to[q] = k
        if k < 0:
            left_out["near-duplicate of a labelled call"] += 1
        else:
            stands_for[k].append(c.id)
    dup_count = sum(len(v) for v in stands_for.values())
    if dup_count:
        left_out["near-duplicate of a picked or poolable call"] = dup_count
    return labelled, pool, kept, stands_for, left_out


def _pick(labelled, pool, kept, stands_for, left_out, scale, scores, threshold, n, cover_flips,
          top_notes=None) -> Suggestions:
    """The picks among the kept calls, scored on `scale` (`scores`: call id -> score of every labelled and kept
    call). `top_notes(ids)`: id -> top note of the picked calls (default: each call's own top_note)."""
    fit = labels_threshold([scores[c.id] for c in labelled], [int(c.label == "relevant") for c in labelled], scale)
    centre, interval = (fit if fit is not None else (threshold, None))
    cands = sorted(kept.values(), key=lambda c: scores[c.id])
    n = min(n, len(cands))
    n_near = math.ceil(n * NEAR_SHARE) if n else 0
    # the calls a move from `threshold` to `centre` would flip, nearest `threshold` first: labelled in that order,
    # they let `calibrate` move as far as the labels reach (its cut is shrunk to the last labelled call it flips)
    lo_f, hi_f = min(threshold, centre), max(threshold, centre)
    flips = sorted((c for c in cands if cover_flips and fit is not None and lo_f <= scores[c.id] < hi_f),
                   key=lambda c: abs(scores[c.id] - threshold))[:math.ceil(n * FLIP_SHARE)]
    flip_ids = {c.id for c in flips}
    below = sorted((c for c in cands if scores[c.id] < centre and c.id not in flip_ids), key=lambda c: centre - scores[c.id])
    above = sorted((c for c in cands if scores[c.id] >= centre and c.id not in flip_ids), key=lambda c: scores[c.id] - centre)
    near: list[LoggedCall] = list(flips)
    while len(near) < n_near and (below or above):          # alternate sides: both kinds of mistake
        for side in (above, below):
            if side and len(near) < n_near:
                near.append(side.pop(0))
    where = (f"the threshold the {len(labelled)} labels so far point to, {centre:.3f}"
             + (f" (90% interval {interval[0]:.3f}-{interval[1]:.3f})" if interval else "")
             if fit is not None else f"the threshold {centre:.3f}")
    unit = "P" if scale == "probability" else "top cosine"
    picks = []
    for c in near:
        s = scores[c.id]
        if c.id in flip_ids:
            why = (f"{unit} {s:.3f}, between the threshold in force {threshold:.3f} and {where}: moving there "
                   f"flips this call, and the threshold moves only over flipped calls that are labelled "
                   f"({flips.index(c) + 1} of {len(flips)} picked, nearest the threshold in force first)")
        elif s >= centre:
            why = (f"{unit} {s:.3f}, {s - centre:.3f} above {where}: an irrelevant label says the threshold "
                   f"belongs above {s:.3f}")
        else:
            why = (f"{unit} {s:.3f}, {centre - s:.3f} below {where}: a relevant label says the threshold "
                   f"belongs below {s:.3f}")
        picks.append((c, why))
    chosen = {c.id for c in near}
    rest = [c for c in cands if c.id not in chosen]
    k = n - len(near)
    for i in range(k):                                        # one call per equal-count stratum, its median
        lo_i, hi_i = len(rest) * i // k, len(rest) * (i + 1) // k
        if hi_i <= lo_i:
            continue
        c = rest[(lo_i + hi_i - 1) // 2]
        s, lo_s, hi_s = scores[c.id], scores[rest[lo_i].id], scores[rest[hi_i - 1].id]
        stratum = f"stratum {i + 1} of {k} of the score range ({lo_s:.3f}-{hi_s:.3f})"
        if s >= centre:
            why = (f"{unit} {s:.3f}, {stratum}, above {where}: checks that calls scored this high are "
                   "answered; an irrelevant label says the threshold is far too low")
        else:
            why = (f"{unit} {s:.3f}, {stratum}, below {where}: checks that calls scored this low are not "
                   "answerable; a relevant label says the threshold is far too high")
        picks.append((c, why))
    out = []
    notes = top_notes([c.id for c, _ in picks]) if top_notes else {c.id: c.top_note for c, _ in picks}
    for c, why in sorted(picks, key=lambda p: -scores[p[0].id]):
        dups = tuple(stands_for.get(c.id, ()))
        if dups:
            why += f" (stands for {len(dups)} near-duplicate call{'s' if len(dups) > 1 else ''})"
        out.append(Suggestion(c.id, c.query, notes.get(c.id), scores[c.id] if scale == "probability" else None,
                              scores[c.id], why, dups))
    return Suggestions(tuple(out), scale, float(threshold), float(centre), interval, len(pool), len(labelled),
                       dict(left_out))


@dataclass(frozen=True)
class GateInForce:
    """What the suggestions are scored against: the gate model (None: cosine), its threshold on its scale,
    the index it serves (search_core.recall.log.index_id) and where that came from."""
    model: object | None
    threshold: float
    fingerprint_key: str | None
    source: str


def gate_in_force(searcher, cfg) -> GateInForce:
    """The gate a Searcher decides with under `cfg` (a SearchConfig): the config's gate_threshold over the
    model's own; on the cosine scale, the config's threshold over the embedder's."""
    from search_core.recall.log import index_id
    choice = searcher.gate_for(cfg.reranker)
    model = choice.model
    if model is not None:
        t = cfg.gate_threshold if cfg.gate_threshold is not None else model.threshold
        return GateInForce(model, float(t), index_id(searcher.fingerprint), choice.source)
    t = cfg.threshold if cfg.threshold is not None else searcher.embedder.default_threshold
    return GateInForce(None, float(t), index_id(searcher.fingerprint), "cosine")


def logged_gate() -> GateInForce:
    """No index at hand: the probabilities the log holds, against the shipped default's threshold."""
    from search_core.gate.model import DEFAULT_GATE_FILE, load_gate
    return GateInForce(None, load_gate(DEFAULT_GATE_FILE).threshold, None,
                       f"the logged probabilities, the shipped default's threshold ({DEFAULT_GATE_FILE.name})")


def suggest_from_log(log_path, *, since_s: float | None = None, n: int = 20, db=None, config_path=None,
                     gate_path=None) -> tuple[Suggestions, GateInForce]:
    """suggest() over a log window, scored by the gate in force on `db` (its gate file, else the shipped
    default; the config's thresholds) or, without `db`, by the logged probabilities."""
    from search_core.recall.log import read_call_heads, read_gate_inputs, read_logged_calls

    if db is None:
        gate = logged_gate()
    else:
        from search_core.config import load_config
        from search_core.gate.request import GateRequest
        from search_core.recall.config import active_config_path
        from search_core.search.pipeline import Searcher

        searcher = Searcher(db, gate=GateRequest(path=gate_path))
        try:
            cfg = load_config(active_config_path(config_path))
            gate = gate_in_force(searcher, cfg)
        finally:
            searcher.close()
    if gate.model is None:          # the scale depends on every call's logged probability: all are read
        return suggest(read_logged_calls(log_path, since_s), threshold=gate.threshold, model=None, n=n,
                       fingerprint_key=gate.fingerprint_key), gate
    # with a gate model, only the calls that are labelled or could be picked need their features, and only the
    # picks their hits: the near-duplicates (most of a busy week) are folded from what the row says without its
    # JSON decoded
    labelled, pool, kept, stands_for, left_out = _fold(read_call_heads(log_path, since_s), lambda c: c.searched,
                                                       gate.fingerprint_key)
    ids, X = read_gate_inputs(log_path, [c.id for c in labelled] + list(kept), gate.model.features)
    scores = dict(zip(ids, matrix_probabilities(gate.model, X)))
    labelled = [c for c in labelled if c.id in scores]
    kept = {i: c for i, c in kept.items() if i in scores}

    def top_notes(picked):
        return {c.id: c.top_note for c in read_logged_calls(log_path, ids=picked)}

    return _pick(labelled, pool, kept, stands_for, left_out, "probability", scores, float(gate.threshold), n,
                 False, top_notes), gate
