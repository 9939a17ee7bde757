"""Error rates of the keep rule's hit@5 guards at 20, 50, 200 and 1,000 questions, and a check of the power
figures (tuner/sweep/power.py) against the decisions they predict.

Where the rows come from: real evaluations. Each set is indexed with e5-small and evaluated under the
shipped config (the baseline) and under a few one-variable changes a sweep proposes (fusion weights, RRF k,
candidate depth); each (baseline, change) pair gives one row per answerable question: the baseline's and
the change's hit@5, MRR, nDCG@10 and first rank, as a ledger row keeps them.

How a true effect is set: the set is the population, and a simulated tuning set of n questions is n
questions drawn from it with replacement. A question's pair of rows can be taken as it is or swapped
(the change's row as the baseline's and back), which turns every per-question gain into the same loss,
so the true effect is set by the chance of each orientation while the questions, and how far a change
moves them, stay real:
  null          every question swapped with chance 1/2: no true effect on hit@5 nor on the objective
  flat-gain     questions that cross the top-5 border swapped with chance 1/2 (no true hit@5 effect);
                the others as the change has them, oriented so that the objective rises: a change that
                helps and shuffles the border (what the per-question veto cannot keep)
  hit-gain      border questions oriented "came in" with the chance that makes the true hit@5 gain 2 points
  regress-1x    border questions oriented "left" with the chance that makes the true hit@5 drop the margin
                (2 points), the others oriented to gain: a regression the objective would reward
  regress-2x    the same at twice the margin
Rules (each with the paired gain test at p < 0.05, as the sweep runs them):
  veto          no question in the baseline's top 5 may leave it (the old default, --question-guard)
  count         the number of questions hit must not fall (--count-guard)
  noninferior   the upper 95 % bound of the true hit@5 drop below 2 points (the default)
Rates: false-reject = rejected `hit5_regressed` although the true drop is <= 0 (null, flat-gain, hit-gain);
keep = kept; false-keep = kept although the true drop is >= the margin (regress-1x, -2x).

The decisions are the keep rule's own pieces (tuner.sweep.keep_rule.hit5_evidence's bound, the paired
randomization test of tuner.sweep.evidence, with its seed-0 sign flips, so its p-values are the rule's);
for n > 50 the p-value is its normal approximation (sum of changes over the root of their sum of squares:
10,000 sign flips of 1,000 questions per draw would take hours here). Three draws per cell up to 50
questions are decided again by keep_rule.decide itself, which must agree (the count is printed and written).

    python benchmarks/bench_keep_rule.py                        # AutoRAG-ko and the demo sets
    python benchmarks/bench_keep_rule.py --sets autorag-ko,demo,johngrib --reps 400
Indexes go under runs/keep-rule/ (built on first use); results to runs/bench/keep-rule-margin<M>.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import DATA, ROOT, write_result  # noqa: E402
DATA = Path(os.environ.get("AUTORESEARCH_DATA", DATA))   # a git worktree sits one level deeper than ../shared
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # spinning OpenMP threads on a loaded machine: 50x slower

from search_core.config import SearchConfig  # noqa: E402
from tuner.evaluation.evaluate import EvalResult  # noqa: E402
from tuner.evaluation.score import ScoreConfig  # noqa: E402
from tuner.evaluation.stats import paired_drop_upper_bound  # noqa: E402
from tuner.sweep.evidence import question_value  # noqa: E402
from tuner.sweep.keep_rule import Rule, decide, hit5_evidence  # noqa: E402
from tuner.sweep.power import detectable_gain, guard_questions_needed  # noqa: E402

OUT = ROOT / "runs" / "keep-rule"      # indexes (--index-dir)
SIZES = (20, 50, 200, 1000)
MARGIN = 2.0                      # points
ALPHA = 0.05                      # the gain test's (noise_alpha) and the guard's level
MIN_BORDER = 0.02                 # a change that moves fewer questions across the top-5 border is left out
EXACT_UP_TO = 50                  # randomization p-values up to this many questions, the normal approximation above
QUALITY = ScoreConfig().quality_weights
BASELINES = {                     # where a sweep starts: the shipped config, and the demo's hand-set start
    "shipped": {},                # (tuner/experiments/demo-start.toml: vector search alone, RRF k = 60)
    "vector-start": {"w_dense": 1.0, "w_sparse": 0.0, "w_decomposed": 0.0, "w_entity": 0.0, "rrf_k": 60},
}
CHANGES = {                       # one variable at a time from a baseline, as sweep rounds propose them
    "w_sparse=0.1": {"w_sparse": 0.1}, "w_sparse=0.3": {"w_sparse": 0.3}, "w_sparse=1.0": {"w_sparse": 1.0},
    "w_dense=0.8": {"w_dense": 0.8}, "w_dense=0.1": {"w_dense": 0.1},
    "rrf_k=60": {"rrf_k": 60}, "rrf_k=12": {"rrf_k": 12},
    "w_entity=0.5": {"w_entity": 0.5}, "w_decomposed=0.5": {"w_decomposed": 0.5},
    "depth=20": {"depth": 20},
}
RULES = {"veto": "question", "count": "count", "noninferior": "noninferior"}
JOHNGRIB_SPENT = ("tune", "holdout", "blind", "week", "final", "last")     # never `next`: it is unread


def sets_available() -> dict:
    demo = ROOT / "tuner" / "experiments"
    return {
        "autorag-ko": (DATA / "autorag-ko" / "beir", [DATA / "autorag-ko" / "beir"]),
        "demo": (demo / "demo-vault", [demo / "gold" / f"demo-{s}.yaml"
                                       for s in ("tune", "holdout", "gate-tune", "gate-holdout", "gate-holdout2")]),
        "johngrib": (DATA / "johngrib-wiki" / "_wiki",
                     [ROOT / "benchmarks" / "sets" / f"johngrib-{s}.yaml" for s in JOHNGRIB_SPENT]),
    }


# -- real rows ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pair:
    """One answerable question under the baseline and under a change, as ledger rows."""
    base: dict
    cand: dict


def ledger_row(q) -> dict:
    return {"id": q.id, "level": q.level, "first_rank": q.first_rank, "hit@5": q.metrics.get("hit@5", 0.0),
            "mrr": q.metrics.get("mrr", 0.0), "ndcg@10": q.metrics.get("ndcg@10", 0.0)}


def real_pairs(name: str, vault: Path, golds: list[Path], index_dir: Path, progress) -> dict[str, list[Pair]]:
    from search_core.index.indexer import index_vault
    from search_core.search.pipeline import Searcher
    from tuner.data.gold import GoldSet, load_gold
    from tuner.evaluation.evaluate import RetrievalCache, evaluate
    index_dir.mkdir(parents=True, exist_ok=True)
    db = index_dir / f"{name}.sqlite"
    if not db.exists():
        progress(f"{name}: indexing {vault} (e5-small) into {db}")
        index_vault(vault, db, embedder="e5-small", cache=index_dir / "embed-cache.sqlite")
    searcher = Searcher(db)
    sets = [load_gold(g) for g in golds]
    # one set of every file's answerable questions (ids made unique by file: the demo files reuse some)
    gold = GoldSet(name, name, tuple(dataclasses.replace(q, id=f"{g.name}:{q.id}")
                                     for g in sets for q in g.questions if not q.is_probe))
    cache = RetrievalCache()
    out = {}
    for b_label, b_change in BASELINES.items():
        t0 = time.perf_counter()
        start = SearchConfig().replace(**b_change)
        base = evaluate(searcher, gold, start, cache=cache, audit=False)
        progress(f"{name}: {len(gold.questions)} answerable questions, {b_label} hit@5 {base.overall['hit@5']:.3f} "
                 f"({time.perf_counter() - t0:.0f} s)")
        for label, change in CHANGES.items():
            res = evaluate(searcher, gold, start.replace(**change), cache=cache, audit=False)
            b, c = {q.id: q for q in base.per_query}, {q.id: q for q in res.per_query}
            pairs = [Pair(ledger_row(b[i]), ledger_row(c[i])) for i in sorted(b)]
            out[f"{b_label} {label}"] = pairs
            lost = sum(bool(p.base["hit@5"]) and not p.cand["hit@5"] for p in pairs)
            came = sum(bool(p.cand["hit@5"]) and not p.base["hit@5"] for p in pairs)
            progress(f"  {b_label} {label}: hit@5 {res.overall['hit@5']:.3f}, {lost} out, {came} in")
    return out


# -- the decision, from the keep rule's own pieces ---------------------------------------------------------

def value(row: dict) -> float:
    from tuner.evaluation.evaluate import QuestionResult
    return question_value(QuestionResult.from_json(row), "score100", QUALITY)


@dataclass(frozen=True)
class Population:
    """A (set, change) pair's questions as arrays, oriented so that the questions that do not cross the
    top-5 border gain on the objective (a change whose other moves help: what tempts a keep); border
    questions are stored "lost" (in the baseline's top 5, not the change's), to be swapped as a scenario says."""
    rows: list            # [(base_row, cand_row)] in that orientation
    hb: np.ndarray
    hc: np.ndarray
    vb: np.ndarray
    vc: np.ndarray
    border: np.ndarray
    changes: np.ndarray   # each question's change of the objective as the change was evaluated, turned to gain

    @classmethod
    def of(cls, pairs: list[Pair]) -> "Population":
        rows = [(p.base, p.cand) for p in pairs]
        vals = [(value(b), value(c)) for b, c in rows]
        changes = np.array([vc - vb for vb, vc in vals])
        changes = changes if changes.sum() >= 0 else -changes
        inner = sum(vc - vb for (b, c), (vb, vc) in zip(rows, vals) if bool(b["hit@5"]) == bool(c["hit@5"]))
        if inner < 0:
            rows, vals = [(c, b) for b, c in rows], [(vc, vb) for vb, vc in vals]
        out_r, out_v = [], []
        for (b, c), (vb, vc) in zip(rows, vals):
            if c["hit@5"] and not b["hit@5"]:      # a border question, stored as lost
                b, c, vb, vc = c, b, vc, vb
            out_r.append((b, c))
            out_v.append((vb, vc))
        hb = np.array([float(bool(b["hit@5"])) for b, _ in out_r])
        hc = np.array([float(bool(c["hit@5"])) for _, c in out_r])
        return cls(out_r, hb, hc, np.array([v[0] for v in out_v]), np.array([v[1] for v in out_v]), hb != hc, changes)

    @property
    def border_share(self) -> float:
        return float(self.border.mean())

    def inner_gain(self) -> float:
        return float(np.where(self.border, 0.0, self.vc - self.vb).mean())

    def border_gain_if_lost(self) -> float:
        return float(np.where(self.border, self.vc - self.vb, 0.0).mean())


@dataclass(frozen=True)
class Draws:
    """reps simulated tuning sets of n questions: indexes into the population and which are swapped."""
    idx: np.ndarray       # reps x n
    swap: np.ndarray      # reps x n, bool

    def arrays(self, pop: Population):
        hb, hc = pop.hb[self.idx], pop.hc[self.idx]
        vb, vc = pop.vb[self.idx], pop.vc[self.idx]
        return (np.where(self.swap, hc, hb), np.where(self.swap, hb, hc),
                np.where(self.swap, vc, vb), np.where(self.swap, vb, vc))

    def rows(self, pop: Population, r: int) -> list[tuple]:
        return [(c, b) if s else (b, c) for (b, c), s in zip((pop.rows[i] for i in self.idx[r]), self.swap[r])]


_SIGNS: dict = {}


def p_values(d: np.ndarray) -> np.ndarray:
    """The paired randomization test's two-sided p for each row of d (reps x n), as
    tuner.evaluation.stats.paired_randomization computes it: its sign flips are drawn from seed 0, so one
    sign matrix per n serves every draw. Above EXACT_UP_TO questions, the normal approximation."""
    n = d.shape[1]
    s1, s2 = d.sum(axis=1), (d * d).sum(axis=1)
    if n > EXACT_UP_TO:
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.abs(s1) / np.sqrt(s2)
        return np.where(s2 > 0, np.array([math.erfc(x / math.sqrt(2)) if np.isfinite(x) else 1.0 for x in z]), 1.0)
    if n not in _SIGNS:
        _SIGNS[n] = np.random.default_rng(0).choice((-1.0, 1.0), size=(10_000, n))
    obs = np.abs(d.mean(axis=1))
    null = np.abs(_SIGNS[n] @ d.T) / n                 # 10,000 x reps
    p = (1 + (null >= obs - 1e-12).sum(axis=0)) / 10_001
    return np.where(np.any(d != 0, axis=1), p, 1.0)


@lru_cache(maxsize=None)
def hit5_bound(lost: int, gained: int, n: int) -> float:
    return 100 * paired_drop_upper_bound(lost, gained, n, alpha=ALPHA)


def decisions(pop: Population, draws: Draws) -> dict[str, np.ndarray]:
    """Per rule, each draw's decision: 'regressed', 'kept' or 'no_gain' (the keep rule's order: the hit@5
    guard first, then a gain that moved the ranking must pass the paired test)."""
    hb, hc, vb, vc = draws.arrays(pop)
    lost = ((hb == 1) & (hc == 0)).sum(axis=1)
    gained = ((hb == 0) & (hc == 1)).sum(axis=1)
    n = hb.shape[1]
    d = vc - vb
    delta = d.mean(axis=1)
    moved = (np.abs(d) > 1e-12).sum(axis=1)
    p = p_values(d)
    gain_ok = (delta > 1e-12) & ((moved == 0) | (p < ALPHA))
    bound = np.array([hit5_bound(int(l), int(g), n) for l, g in zip(lost, gained)])
    guard = {"veto": lost > 0, "count": lost > gained, "noninferior": (lost > 0) & (bound >= MARGIN)}
    return {r: np.where(guard[r], "regressed", np.where(gain_ok, "kept", "no_gain")) for r in RULES}


def as_results(rows: list[tuple]) -> tuple[EvalResult, EvalResult]:
    def res(rs, total):
        rs = [{**r, "id": f"q{i:05d}"} for i, r in enumerate(rs)]
        n = len(rs)
        return EvalResult.from_ledger({"overall": {"n": n, "hit@5": sum(r["hit@5"] for r in rs) / n,
                                                   "mrr": sum(r["mrr"] for r in rs) / n, "ndcg@10": 0.0},
                                       "score100": {"total": total}, "gate": {}, "latency_ms": {"p95": 1.0},
                                       "per_query": rs})
    delta = sum(value(c) - value(b) for b, c in rows) / len(rows)
    return res([b for b, _ in rows], 70.0), res([c for _, c in rows], 70.0 + 100 * delta)


def decided_by_the_rule(rows: list[tuple]) -> dict[str, str]:
    base, cand = as_results(rows)
    out = {}
    for label, guard in RULES.items():
        d = decide(base, cand, Rule(hit5_guard=guard, noise_alpha=ALPHA, hit5_margin=MARGIN, guard_alpha=ALPHA))[0]
        out[label] = {"kept": "kept", "rejected:hit5_regressed": "regressed"}.get(d.decision.value, "no_gain")
    return out


# -- scenarios ----------------------------------------------------------------------------------------------

SCENARIOS = ("null", "flat-gain", "hit-gain", "regress-1x", "regress-2x")
TARGET_DROP = {"null": 0.0, "flat-gain": 0.0, "hit-gain": -MARGIN, "regress-1x": MARGIN, "regress-2x": 2 * MARGIN}


def draw(pop: Population, scenario: str, n: int, reps: int, rng) -> tuple[Draws, float] | None:
    """reps draws of n questions under the scenario, and its true objective gain (None: the change moves
    too few questions across the border for the scenario's drop)."""
    idx = rng.integers(0, len(pop.rows), size=(reps, n))
    u = rng.random((reps, n))
    if scenario == "null":
        return Draws(idx, u < 0.5), 0.0
    target = TARGET_DROP[scenario] / 100
    share = pop.border_share
    if share < abs(target) or share == 0:
        return None
    p_lost = 0.5 + target / (2 * share)
    swap = pop.border[idx] & (u >= p_lost)
    return Draws(idx, swap), pop.inner_gain() + pop.border_gain_if_lost() * (2 * p_lost - 1)


def simulate(pops: dict, sizes, reps: int, seed: int, progress) -> dict:
    rng = np.random.default_rng(seed)
    cells, checks = {}, {"draws": 0, "disagree": 0}
    for (set_name, change), pop in pops.items():
        for scen in SCENARIOS:
            for n in sizes:
                got = draw(pop, scen, n, reps, rng)
                if got is None:
                    continue
                draws, gain = got
                dec = decisions(pop, draws)
                if n <= EXACT_UP_TO:                   # the keep rule itself, on a sample of the draws
                    for r in range(3):
                        checks["draws"] += 1
                        checks["disagree"] += decided_by_the_rule(draws.rows(pop, r)) != {k: v[r] for k, v in dec.items()}
                cells[(set_name, change, scen, n)] = {
                    "true_drop": TARGET_DROP[scen], "true_gain": gain,
                    "counts": {r: {k: int((v == k).sum()) for k in ("kept", "regressed", "no_gain")} for r, v in dec.items()}}
        progress(f"  simulated {set_name} {change}")
    return {"cells": cells, "checks": checks}


def rates(sim: dict, reps: int) -> dict:
    """Per scenario, rule and size: the mean over (set, change) pairs of the hit5_regressed and keep rates."""
    out = {}
    for (set_name, change, scen, n), cell in sim["cells"].items():
        for r, c in cell["counts"].items():
            e = out.setdefault((scen, r, n), {"regressed": [], "kept": []})
            e["regressed"].append(c["regressed"] / reps)
            e["kept"].append(c["kept"] / reps)
    return {k: {"regressed": sum(v["regressed"]) / len(v["regressed"]), "kept": sum(v["kept"]) / len(v["kept"]),
                "pairs": len(v["kept"])} for k, v in out.items()}


# -- power check ----------------------------------------------------------------------------------------------

def power_check(pops: dict, sizes, reps: int, seed: int) -> list[dict]:
    """The gain test: for each pair whose change gains on the objective, at each size, the gain
    power.detectable_gain states at the pair's spread of per-question changes, made the true gain by swapping
    each question with the chance that scales the mean to it; the share of draws the test detects (mean > 0,
    p < 0.05) should be ~0.80. The guard: at the size power.guard_questions_needed states for the pair's
    border share split evenly (no true drop), the share of draws the noninferior guard passes should be ~0.80."""
    rng = np.random.default_rng(seed)
    out = []
    for (set_name, change), pop in pops.items():
        d = pop.changes
        mu, sd = float(d.mean()), float(d.std(ddof=1))
        for n in sizes:
            g = detectable_gain(n, sd, alpha=ALPHA)
            if mu <= 0 or g > mu:
                continue
            s = (1 - g / mu) / 2              # swapping with chance s scales the mean by 1 - 2s; |changes| stay
            idx = rng.integers(0, len(pop.rows), size=(reps, n))
            dd = np.where(rng.random((reps, n)) < s, -d[idx], d[idx])
            hit = float(((dd.mean(axis=1) > 0) & (p_values(dd) < ALPHA)).mean())
            out.append({"test": "gain", "set": set_name, "change": change, "n": n, "spread": round(sd, 4),
                        "stated_detectable": round(g, 4), "detected": round(hit, 3)})
        share = pop.border_share
        if share < MIN_BORDER:
            continue
        need = guard_questions_needed(share / 2, share / 2, MARGIN, alpha=ALPHA)
        draws, _ = draw(pop, "flat-gain", need, reps, rng)
        passed = float((decisions(pop, draws)["noninferior"] != "regressed").mean())
        out.append({"test": "guard", "set": set_name, "change": change, "n": need, "border_share": round(share, 4),
                    "passed": round(passed, 3)})
    return out


def main(argv=None):
    global MARGIN
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="autorag-ko,demo")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--margin", type=float, default=MARGIN, help="The noninferior guard's margin, in points.")
    ap.add_argument("--index-dir", type=Path, default=OUT, help="Where each set's index is (built if absent).")
    ap.add_argument("--min-border", type=float, default=MIN_BORDER,
                    help="Leave out a change that moves fewer than this share of questions across the top-5 border.")
    a = ap.parse_args(argv)
    MARGIN = a.margin
    TARGET_DROP.update({"hit-gain": -MARGIN, "regress-1x": MARGIN, "regress-2x": 2 * MARGIN})
    sizes = [int(x) for x in a.sizes.split(",")]
    progress = lambda line: print(line, file=sys.stderr, flush=True)   # noqa: E731
    avail = sets_available()
    all_pairs = {s: real_pairs(s, *avail[s], a.index_dir, progress) for s in a.sets.split(",")}
    pops = all_pops = {(s, ch): Population.of(pairs) for s, by in all_pairs.items() for ch, pairs in by.items()}
    left_out = sorted(f"{s} {ch} ({p.border_share:.1%})" for (s, ch), p in pops.items() if p.border_share < a.min_border)
    pops = {k: p for k, p in pops.items() if p.border_share >= a.min_border}
    progress(f"left out, fewer than {a.min_border:.0%} of questions across the top-5 border: {', '.join(left_out) or 'none'}")
    # the bound simulated is the keep rule's: hit5_evidence on a real pair gives the same figure
    for (s, ch), pop in pops.items():
        base, cand = as_results(pop.rows)
        ev = hit5_evidence(base, cand, ALPHA)
        assert abs(ev.drop_bound - hit5_bound(ev.lost, ev.gained, ev.n)) < 1e-9, (s, ch)
    t0 = time.perf_counter()
    sim = simulate(pops, sizes, a.reps, a.seed, progress)
    table = rates(sim, a.reps)
    power = power_check(all_pops, sizes, a.reps, a.seed + 1)
    print(f"\nreal pairs simulated: {len(pops)} (set x change); {a.reps} draws per cell; "
          f"decide() agreed on {sim['checks']['draws'] - sim['checks']['disagree']} of {sim['checks']['draws']} "
          f"sampled draws ({time.perf_counter() - t0:.0f} s)\n")
    print("| scenario | rule | " + " | ".join(f"n={n} rejected hit5 / kept" for n in sizes) + " |")
    print("|---|---|" + "---|" * len(sizes))
    for scen in SCENARIOS:
        for r in RULES:
            cells = [table.get((scen, r, n)) for n in sizes]
            if not any(cells):
                continue
            print(f"| {scen} | {r} | " + " | ".join(f"{c['regressed']:.2f} / {c['kept']:.2f}" if c else "-"
                                                  for c in cells) + " |")
    print("\npower check (gain test: stated detectable gain at 80 % power vs share detected; guard: stated "
          "questions needed vs share passed)")
    for row in power:
        print("  ", row)
    write_result(f"keep-rule-margin{MARGIN:g}", {
        "pairs": {f"{s} {ch}": {"questions": len(p.rows), "border_share": round(p.border_share, 4),
                                "inner_gain": round(p.inner_gain(), 5)} for (s, ch), p in pops.items()},
        "left_out": left_out,
        "reps": a.reps, "sizes": sizes, "margin": MARGIN, "alpha": ALPHA, "checks": sim["checks"],
        "rates": [{"scenario": k[0], "rule": k[1], "n": k[2], **v} for k, v in sorted(table.items())],
        "cells": [{"set": k[0], "change": k[1], "scenario": k[2], "n": k[3], **v} for k, v in sim["cells"].items()],
        "power": power})


if __name__ == "__main__":
    main()
