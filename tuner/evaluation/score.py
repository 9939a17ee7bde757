"""The 100-point score our users grade a search setup with: quality 60 + speed 40, pass line 80.

    quality = 60 x (0.5 hit@5 + 0.3 MRR + 0.2 nDCG@10)
    speed   = 40 x clamp((slow_ms - p95_ms) / (slow_ms - fast_ms), 0, 1)     fast 50 ms, slow 500 ms
    score   = quality + speed;  passed = score >= 80

All weights live in ScoreConfig, so a team can set its own rubric in the sweep file.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.evaluation.metrics import METRICS


@dataclass(frozen=True)
class ScoreConfig:
    quality_points: float = 60.0
    speed_points: float = 40.0
    quality_weights: tuple = (("hit@5", 0.5), ("mrr", 0.3), ("ndcg@10", 0.2))
    fast_ms: float = 50.0       # p95 at or under this earns every speed point
    slow_ms: float = 500.0      # p95 at or over this earns none
    pass_line: float = 80.0


@dataclass(frozen=True)
class Score100:
    """One evaluation's 100-point score; `to_json` is its shape in an evaluation and a ledger row."""
    quality: float
    speed: float
    total: float
    passed: bool

    def to_json(self) -> dict:
        return {"quality": self.quality, "speed": self.speed, "total": self.total, "passed": self.passed}

    @classmethod
    def from_json(cls, d: dict | None) -> "Score100 | None":
        """None for an evaluation without answerable questions (it has no score: `{}`)."""
        return cls(d["quality"], d["speed"], d["total"], d["passed"]) if d else None


def score100(metrics: dict[str, float], p95_ms: float, cfg: ScoreConfig = ScoreConfig()) -> Score100:
    wsum = sum(w for _, w in cfg.quality_weights)
    quality = cfg.quality_points * sum(metrics[m] * w for m, w in cfg.quality_weights) / wsum
    frac = (cfg.slow_ms - p95_ms) / (cfg.slow_ms - cfg.fast_ms)
    speed = cfg.speed_points * min(max(frac, 0.0), 1.0)
    total = quality + speed
    return Score100(round(quality, 3), round(speed, 3), round(total, 3), total >= cfg.pass_line)


def load_score_config(path) -> ScoreConfig:
    """The [score] table of a TOML file (the same file `--config` takes), onto the defaults:

        [score]
        quality_points = 60
        speed_points = 40
        quality_weights = { "hit@5" = 0.5, mrr = 0.3, "ndcg@10" = 0.2 }
        fast_ms = 50
        slow_ms = 500
        pass_line = 80
    """
    import dataclasses

    from search_core import SearchCoreError
    from search_core.config import read_toml

    if path is None:
        return ScoreConfig()
    data = read_toml(path).get("score", {})
    fields = {f.name for f in dataclasses.fields(ScoreConfig)}
    unknown = set(data) - fields
    if unknown:
        raise SearchCoreError(f"{path} [score]: unknown keys {sorted(unknown)}; valid: {sorted(fields)}")
    if "quality_weights" in data:
        qw = data["quality_weights"]
        allowed = set(METRICS)
        if not isinstance(qw, dict) or not qw or set(qw) - allowed:
            raise SearchCoreError(f"{path} [score]: quality_weights maps metrics ({', '.join(sorted(allowed))}) to weights")
        data["quality_weights"] = tuple((k, float(v)) for k, v in qw.items())
    cfg = ScoreConfig(**data)
    if cfg.slow_ms <= cfg.fast_ms:
        raise SearchCoreError(f"{path} [score]: slow_ms must be above fast_ms")
    return cfg
