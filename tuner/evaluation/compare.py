"""Compare two evaluation runs: the one paired comparison behind `compare`, the holdout check and the A/B.

Per metric, over the answerable questions both runs answered: each run's mean, the difference, the paired
randomization p-value and a bootstrap 95% interval; then the questions that moved.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.evaluation.evaluate import EvalResult, QuestionResult
from tuner.evaluation.metrics import metric_names
from tuner.evaluation.stats import bootstrap_ci, paired_randomization

ALPHA = 0.05
METRICS = metric_names("hit@5", "mrr", "ndcg@10", "p@5", "recall@5")     # `compare` and the holdout check


# The verdicts of one paired comparison of B against A, and the words reports print for them: code compares the
# keys, never the words (JSON written before the keys existed carries the words, read back through this table)
WITHIN_NOISE, B_BETTER, A_BETTER = "within_noise", "b_better", "a_better"
PAIRED_VERDICTS = {WITHIN_NOISE: "within noise", B_BETTER: "B better", A_BETTER: "A better"}


@dataclass(frozen=True)
class PairedMetric:
    """B against A on one metric over n paired questions; positive deltas mean B is better."""
    a: float | None
    b: float | None
    delta: float
    delta_questions: float | None   # in questions (for a 0/1 metric, questions gained); None: read from JSON
    p_value: float
    ci95: tuple[float, float]
    within_noise: bool           # p >= ALPHA, decided on the unrounded p-value

    @property
    def verdict_key(self) -> str:
        """The paired test's verdict as a key of PAIRED_VERDICTS (what code compares; `verdict` is its text)."""
        return WITHIN_NOISE if self.within_noise else (B_BETTER if self.delta > 0 else A_BETTER)

    @property
    def verdict(self) -> str:
        return PAIRED_VERDICTS[self.verdict_key]


def answerable(per_query: list[QuestionResult]) -> dict[str, QuestionResult]:
    """id -> question, probes left out (they have no ranking metrics)."""
    return {q.id: q for q in per_query if q.level != "probe"}


def paired_metrics(qa: dict, qb: dict, ids: list, metrics, *, seed: int = 0) -> dict[str, PairedMetric]:
    """Per metric, B against A on the questions `ids` (in that order: the resampling follows it)."""
    n = len(ids)
    out = {}
    for m in metrics:
        xa, xb = [qa[i][m] for i in ids], [qb[i][m] for i in ids]
        p = paired_randomization(xa, xb, seed=seed)
        lo, hi = bootstrap_ci(xa, xb, seed=seed)
        out[m] = PairedMetric(round(sum(xa) / n, 4) if n else None, round(sum(xb) / n, 4) if n else None,
                              round((sum(xb) - sum(xa)) / n, 4) if n else 0.0, round(sum(xb) - sum(xa), 2),
                              round(p, 4), (round(lo, 4), round(hi, 4)), p >= ALPHA)
    return out


@dataclass(frozen=True)
class FlippedQuestion:
    """A question whose hit@5 differs between A and B."""
    id: str
    query: str
    a_rank: int | None
    b_rank: int | None
    now: str                     # "hit" or "miss": what B does with it

    def to_json(self) -> dict:
        return {"id": self.id, "query": self.query, "a_rank": self.a_rank, "b_rank": self.b_rank, "now": self.now}


@dataclass(frozen=True)
class Comparison:
    """Two evaluations of one gold set, B against A: per metric the paired test, the reciprocal-rank wins,
    ties and losses, and the questions that flipped."""
    gold: str
    n: int                       # answerable questions both runs answered
    a: str                       # each run's config hash
    b: str
    metrics: dict[str, PairedMetric]
    wins: int
    ties: int
    losses: int
    flipped: tuple[FlippedQuestion, ...]
    one_question_moves_hit5_by: float

    @property
    def within_noise(self) -> bool:
        return all(m.within_noise for m in self.metrics.values())

    def to_json(self) -> dict:
        """`compare --json`'s document, and the `compare` of a holdout check in the ledger."""
        return {"gold": self.gold, "n": self.n, "a": self.a, "b": self.b,
                "metrics": {m: {"a": t.a, "b": t.b, "delta": t.delta, "p_value": t.p_value, "ci95": list(t.ci95),
                                "verdict": t.verdict} for m, t in self.metrics.items()},
                "wins": self.wins, "ties": self.ties, "losses": self.losses,
                "flipped": [f.to_json() for f in self.flipped],
                "one_question_moves_hit5_by": self.one_question_moves_hit5_by}

    @classmethod
    def from_json(cls, d: dict) -> "Comparison":
        """What to_json wrote; a metric's change in questions is not written, so it reads back as None."""
        metrics = {m: PairedMetric(v["a"], v["b"], v["delta"], None, v["p_value"], tuple(v["ci95"]),
                                   v["verdict"] == PAIRED_VERDICTS[WITHIN_NOISE]) for m, v in d["metrics"].items()}
        return cls(d["gold"], d["n"], d["a"], d["b"], metrics, d["wins"], d["ties"], d["losses"],
                   tuple(FlippedQuestion(**f) for f in d["flipped"]), d["one_question_moves_hit5_by"])


def compare(a: EvalResult, b: EvalResult, *, seed: int = 0) -> Comparison:
    """a, b: two evaluations of the same gold set (an `eval` file: EvalResult.from_json). Positive deltas
    mean B is better."""
    if a.gold != b.gold:
        raise ValueError(f"runs are on different gold sets ({a.gold} vs {b.gold}); compare like with like")
    qa, qb = answerable(a.per_query), answerable(b.per_query)
    ids = sorted(set(qa) & set(qb))
    if not ids:
        raise ValueError("the two runs share no answerable question")
    ma, mb = {i: q.metrics for i, q in qa.items()}, {i: q.metrics for i, q in qb.items()}
    rr = [(mb[i]["mrr"] - ma[i]["mrr"]) for i in ids]
    flipped = tuple(FlippedQuestion(i, qa[i].query, qa[i].first_rank, qb[i].first_rank,
                                    "hit" if mb[i]["hit@5"] else "miss")
                    for i in ids if ma[i]["hit@5"] != mb[i]["hit@5"])
    return Comparison(a.gold, len(ids), a.config_hash, b.config_hash, paired_metrics(ma, mb, ids, METRICS, seed=seed),
                      sum(d > 0 for d in rr), sum(d == 0 for d in rr), sum(d < 0 for d in rr), flipped,
                      round(1 / len(ids), 4))


def format_compare(c: Comparison) -> str:
    lines = [f"{c.gold}: {c.n} questions, A={c.a} B={c.b} "
             f"(one question moves hit@5 by {c.one_question_moves_hit5_by:.3f})",
             f"{'metric':<10} {'A':>7} {'B':>7} {'delta':>7} {'p':>7}  95% CI            verdict"]
    for m, v in c.metrics.items():
        lines.append(f"{m:<10} {v.a:>7.3f} {v.b:>7.3f} {v.delta:>+7.3f} {v.p_value:>7.4f}  "
                     f"[{v.ci95[0]:+.3f}, {v.ci95[1]:+.3f}]  {v.verdict}")
    lines.append(f"per-question reciprocal rank: {c.wins} wins, {c.ties} ties, {c.losses} losses (B vs A)")
    for f in c.flipped:
        lines.append(f"  flipped {f.id}: rank {f.a_rank} -> {f.b_rank} ({f.now} now)  {f.query}")
    return "\n".join(lines)
