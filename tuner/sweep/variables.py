"""One table of variable kinds: per SearchConfig field, what a change needs and how a round is judged.

kind        what a change needs                     judged on
fusion      re-fuse cached channel lists in memory  the sweep's objective
rerank      re-fuse + reranker over cached lists    the sweep's objective, after re-fitting the gate
retrieval   new channel lists                       the sweep's objective
index       another index (full reindex)            the sweep's objective, after re-fitting the gate
gate        re-fit the gate only                    gate accuracy (own epsilon), needs probes

Latency is charged alike for every kind: predicted by the cost model (tuner/evaluation/cost_model.py) from the
work each question's search does. A fusion or gate change does no other work, so its predicted p95 is
the baseline's; a reranker's pairs, a deeper candidate list, another model's embedding cost are charged.

Kinds that re-fit the gate (index, rerank) re-fit the cosine threshold and, for a new (embedder,
reranker) pair, the gate model on the tuning set before judging; `gate_threshold` rounds then move the
model's probability threshold, `threshold` rounds the cosine one.

The sweep asks this table; it never names a variable itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from search_core.config import SearchConfig


@dataclass(frozen=True)
class Kind:
    name: str
    needs: str                 # what a change needs, for the ledger and the docs
    objective: str | None      # None: the sweep's objective
    reindex: bool = False
    refit_gate: bool = False   # score scales differ between models: re-fit the gate before judging
    needs_probes: bool = False
    closed_form: bool = False  # its best value on the tuning set has a closed form (fit_threshold)


FUSION = Kind("fusion", "re-fuse cached channel lists in memory", None)
RERANK = Kind("rerank", "re-fuse and rerank cached channel lists", None, refit_gate=True)
RETRIEVAL = Kind("retrieval", "new channel lists", None)
INDEX = Kind("index", "another index (full reindex)", None, reindex=True, refit_gate=True)
GATE = Kind("gate", "re-fit the gate only", "gate_accuracy", needs_probes=True, closed_form=True)

VARIABLE_KINDS: dict[str, Kind] = {
    "w_dense": FUSION, "w_sparse": FUSION, "w_decomposed": FUSION, "w_entity": FUSION, "rrf_k": FUSION,
    "w_ngram": FUSION,          # the sparse channel runs the n-gram list whatever its weight
    "community_boost": FUSION, "top_k": FUSION, "exclude_nav": FUSION, "nav_globs": FUSION,
    "rerank_depth": RERANK, "reranker": RERANK,
    "depth": RETRIEVAL, "keyword_index": RETRIEVAL, "fast_path_margin": RETRIEVAL,
    "embedder": INDEX,
    "threshold": GATE,          # the cosine gate's (decides when no gate model fits)
    "gate_threshold": GATE,     # the gate model's probability threshold
}
# the score each gate variable thresholds, in an evaluation's per-question rows
GATE_SCORE = {"threshold": "top_score", "gate_threshold": "gate_probability"}
MODEL_GATE_FIELD = "gate_threshold"     # the gate model's; the other gate field is the cosine gate's


def gate_pair(cfg: SearchConfig) -> tuple[str, str]:
    """What a gate model is fitted for: the embedder (its score scale) and the reranker (its score)."""
    return cfg.embedder, cfg.reranker

def kind_of(name: str) -> Kind:
    try:
        return VARIABLE_KINDS[name]
    except KeyError:
        raise KeyError(f"variable {name!r} has no kind; kinds are set in tuner/sweep/variables.py for: "
                       f"{', '.join(sorted(VARIABLE_KINDS))}") from None


def unchanged_reason(name: str, baseline: SearchConfig, cand: SearchConfig) -> str | None:
    """Why `cand` provably ranks every question exactly as `baseline` does, with the same work (None when
    it may not). Such a round is rejected:no_gain without being evaluated."""
    if name == "rerank_depth":
        if baseline.reranker == "none" and cand.reranker == "none":
            return "with reranker none, rerank_depth changes no ranked list"
        if max(baseline.rerank_depth, baseline.top_k) == max(cand.rerank_depth, cand.top_k):
            return f"the rerank window stays max(rerank_depth, top_k) = {max(cand.rerank_depth, cand.top_k)}"
    for field in ("w_dense", "w_sparse", "w_decomposed", "w_entity", "w_ngram"):
        if name == field and getattr(baseline, field) == getattr(cand, field):
            return f"{field} is unchanged"
    return None


def unavailable_reason(name: str, *, probes: int) -> str | None:
    """Why rounds over `name` cannot be judged on this tuning set (None when they can)."""
    if kind_of(name).needs_probes and probes == 0:
        return (f"{name} is judged on gate accuracy, and the tuning set has no probes (questions whose "
                "answer is not in the vault): on answerable questions alone every lower threshold looks "
                "better. Add questions with `level: probe` and no gold to the tuning set")
    return None


def unavailable_fix(name: str, *, probes: int) -> str:
    """What a person does about an `unavailable` round over `name`, given the evidence the sweep had: why
    such a round can be unavailable depends on the variable's kind (probes for a gate, weights for a model)
    and, for a gate, on whether the tuning set has probes (`probes`: how many)."""
    try:
        kind = kind_of(name)
    except KeyError:
        kind = None
    if kind is not None and kind.needs_probes:
        if probes == 0:
            return ("add probes to the tuning set (`level: probe`, no gold; `autoresearch probes make` holds out "
                    "whole documents to make them), or remove the variable from the space")
        if name == MODEL_GATE_FIELD:
            # probes are there, yet no gate model could be fitted (unavailable_reason's other case)
            return (f"the tuning set has {probes} probes, but no gate model could be fitted on it (it needs at "
                    "least 2 answerable questions, 2 probes and gate features that vary between them): add "
                    "probes that look like real questions (`autoresearch probes make`), or give the index a "
                    "gate file (`autoresearch calibrate` from labelled recall calls)")
        return (f"nothing to add: the tuning set has {probes} probes and a gate model decides, so the cosine "
                f"`{name}` moves no decision; `{MODEL_GATE_FIELD}` rounds tune the model's threshold. Remove "
                f"`{name}` from the space to skip these rounds")
    return ("make the model loadable offline (a pip package with its weights, a local folder, or a local "
            "server), or remove the value from the space")


def gate_field() -> str:
    """The cosine gate's config field (the one a model change re-fits with fit_threshold)."""
    return next(n for n, k in VARIABLE_KINDS.items() if k is GATE)
