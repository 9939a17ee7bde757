"""The A/B's comparison of finished candidates: B against A per metric with the paired randomization test
and a bootstrap interval, the questions won and lost, and the one-line verdict."""

from __future__ import annotations

from dataclasses import dataclass

from tuner.evaluation.compare import PairedMetric, answerable, paired_metrics
from tuner.evaluation.metrics import metric_names
from tuner.ab.records import CandidateResult

AB_METRICS = metric_names("hit@1", "hit@5", "mrr", "p@5", "recall@5", "ndcg@10")


@dataclass(frozen=True)
class MovedQuestion:
    """A question whose gold sits at another rank in B than in A (None: not in the top 10)."""
    id: str
    level: str
    query: str
    gold: tuple
    rank_a: int | None
    rank_b: int | None

    def to_json(self) -> dict:
        return {"id": self.id, "level": self.level, "query": self.query, "gold": list(self.gold),
                "rank_a": self.rank_a, "rank_b": self.rank_b}

    @classmethod
    def from_json(cls, d: dict) -> "MovedQuestion":
        return cls(d["id"], d["level"], d["query"], tuple(d["gold"]), d["rank_a"], d["rank_b"])


@dataclass(frozen=True)
class PairComparison:
    """B against A over the answerable evaluation questions both answered, as the A/B's JSON keeps it."""
    a: str                      # the candidates' labels
    b: str
    n: int
    metrics: dict[str, PairedMetric]
    b_wins: tuple[MovedQuestion, ...]     # B ranks the gold higher
    b_loses: tuple[MovedQuestion, ...]
    ties: int

    def to_json(self) -> dict:
        return {"a": self.a, "b": self.b, "n": self.n,
                "metrics": {m: {"a": t.a, "b": t.b, "delta": t.delta, "delta_questions": t.delta_questions,
                                "p_value": t.p_value, "ci95": list(t.ci95), "within_noise": t.within_noise}
                            for m, t in self.metrics.items()},
                "b_wins": [m.to_json() for m in self.b_wins], "b_loses": [m.to_json() for m in self.b_loses],
                "ties": self.ties}

    @classmethod
    def from_json(cls, d: dict) -> "PairComparison":
        metrics = {m: PairedMetric(v["a"], v["b"], v["delta"], v["delta_questions"], v["p_value"], tuple(v["ci95"]),
                                   v["within_noise"]) for m, v in d["metrics"].items()}
        return cls(d["a"], d["b"], d["n"], metrics, tuple(map(MovedQuestion.from_json, d["b_wins"])),
                   tuple(map(MovedQuestion.from_json, d["b_loses"])), d["ties"])


def compare_pair(a: CandidateResult, b: CandidateResult, *, seed: int = 0) -> PairComparison:
    """B against A on the answerable evaluation questions: per metric the mean of each, the difference
    (and in questions, for the 0/1 metrics), the paired randomization p-value and a bootstrap 95% CI."""
    qa, qb = (answerable(c.result.per_query) for c in (a, b))
    ids = [i for i in qa if i in qb]

    def rank(q):
        return q.first_rank if q.first_rank is not None else 10 ** 6
    moved = [MovedQuestion(i, qa[i].level, qa[i].query, tuple(qa[i].gold), qa[i].first_rank, qb[i].first_rank)
             for i in ids if rank(qa[i]) != rank(qb[i])]
    ma, mb = {i: q.metrics for i, q in qa.items()}, {i: q.metrics for i, q in qb.items()}
    return PairComparison(a.label, b.label, len(ids), paired_metrics(ma, mb, ids, AB_METRICS, seed=seed),
                          tuple(m for m in moved if rank(qb[m.id]) < rank(qa[m.id])),
                          tuple(m for m in moved if rank(qb[m.id]) > rank(qa[m.id])), len(ids) - len(moved))
