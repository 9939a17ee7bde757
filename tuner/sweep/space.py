"""The search space file: each variable with its kind and range or choices, validated on load."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from search_core import SearchCoreError
from search_core.config import SearchConfig, read_toml

KINDS = ("float", "int", "categorical")
# what a change of each variable needs, and how its rounds are timed and judged: tuner/sweep/variables.py


@dataclass(frozen=True)
class Variable:
    name: str
    kind: str
    low: float | None = None
    high: float | None = None
    step: float | None = None
    choices: tuple = ()

    def contains(self, value) -> bool:
        if self.kind == "categorical":
            return value in self.choices
        if value is None:
            return self.name in ("threshold", "gate_threshold")   # None = the embedder's / the model's own
        return self.low - 1e-9 <= float(value) <= self.high + 1e-9

    def grid_size(self) -> float:
        if self.kind == "categorical":
            return len(self.choices)
        if self.step:
            return int(round((self.high - self.low) / self.step)) + 1
        if self.kind == "int":
            return int(self.high - self.low) + 1
        return float("inf")


MODEL_VARIABLES = ("embedder", "reranker")     # their choices are model names the registry knows


@dataclass(frozen=True)
class Space:
    path: str
    variables: tuple[Variable, ...]

    def names(self) -> list[str]:
        return [v.name for v in self.variables]

    def get(self, name: str) -> Variable:
        return next(v for v in self.variables if v.name == name)

    def not_runnable_here(self) -> dict[str, str]:
        """{model choice: why it cannot run on this machine} for the embedder and reranker variables,
        found without loading a model (a package not installed, hub weights not cached). A sweep never
        spends a round on these."""
        from search_core.models import unavailable_here
        out = {}
        for v in self.variables:
            if v.kind == "categorical" and v.name in MODEL_VARIABLES:
                for c in v.choices:
                    why = unavailable_here(v.name, str(c))
                    if why is not None:
                        out[str(c)] = why
        return out

    def check_config(self, cfg: SearchConfig) -> None:
        for v in self.variables:
            value = getattr(cfg, v.name)
            if not v.contains(value):
                raise SearchCoreError(f"the starting config has {v.name} = {value!r}, outside the space "
                                      f"{self.path} allows ({_describe(v)})")


def _describe(v: Variable) -> str:
    return f"one of {list(v.choices)}" if v.kind == "categorical" else f"{v.low}..{v.high}"


def load_space(path: str | Path) -> Space:
    p = Path(path)
    data = read_toml(p, "space file")
    fields = {f.name: f for f in dataclasses.fields(SearchConfig)}
    variables = []
    for name, spec in data.items():
        where = f"{p} [{name}]"
        if name not in fields:
            raise SearchCoreError(f"{where}: unknown variable; variables are SearchConfig fields: "
                                  f"{', '.join(sorted(fields))}")
        if not isinstance(spec, dict):
            raise SearchCoreError(f"{where}: a variable is a table with kind and low/high or choices")
        kind = spec.get("kind")
        if kind not in KINDS:
            raise SearchCoreError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
        unknown = set(spec) - {"kind", "low", "high", "step", "choices"}
        if unknown:
            raise SearchCoreError(f"{where}: unknown keys {sorted(unknown)}")
        if kind == "categorical":
            choices = spec.get("choices")
            if not isinstance(choices, list) or not choices:
                raise SearchCoreError(f"{where}: a categorical variable needs a non-empty `choices` list")
            if len(set(map(str, choices))) != len(choices):
                raise SearchCoreError(f"{where}: duplicate choices")
            if name in MODEL_VARIABLES:
                _check_model_names(where, name, choices)
            variables.append(Variable(name, kind, choices=tuple(choices)))
            continue
        try:
            low, high = float(spec["low"]), float(spec["high"])
        except (KeyError, TypeError, ValueError):
            raise SearchCoreError(f"{where}: a {kind} variable needs numeric `low` and `high`") from None
        if low > high:
            raise SearchCoreError(f"{where}: low {low} is above high {high}")
        step = spec.get("step")
        if step is not None and (not isinstance(step, (int, float)) or step <= 0):
            raise SearchCoreError(f"{where}: step must be a positive number")
        if name.startswith("w_") and low < 0:
            raise SearchCoreError(f"{where}: a channel weight cannot be negative (low = {low})")
        if name == "rrf_k" and low < 0:
            raise SearchCoreError(f"{where}: RRF k cannot be negative (low = {low})")
        if kind == "int":
            low, high, step = int(low), int(high), int(step) if step else None
        variables.append(Variable(name, kind, low, high, step))
    if not variables:
        raise SearchCoreError(f"{p}: the space has no variables")
    return Space(str(p), tuple(variables))


def _check_model_names(where: str, name: str, choices) -> None:
    """Names must be ones the registry knows (loading them is for the sweep: unavailable is a result)."""
    from search_core.models import check_model_name
    kind = "embedder" if name == "embedder" else "reranker"
    for c in choices:
        try:
            check_model_name(kind, str(c))
        except SearchCoreError as e:
            raise SearchCoreError(f"{where}: {e}") from None
