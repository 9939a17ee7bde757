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

The sweep asks this table; it never names a variable itself. A second table, COUPLED_PAIRS, names the pairs of
fusion variables a round may move together once a full cycle of single-variable rounds kept nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from search_core.config import SearchConfig

from tuner.ledger.schema import RoundDecision
from tuner.sweep.reasons import MODEL_DECIDES, NO_GATE_MODEL, NO_PROBES, Reason, read_reason, reason


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
    "w_ngram_lead": FUSION, "ngram_lead_margin": FUSION,    # read off the n-gram list's scores when fusing
    "w_dense_cross": FUSION, "cross_lead_margin": FUSION,   # read off the lists and the notes' scripts when fusing
    "w_dense_lead": FUSION, "dense_lead_cos": FUSION,        # read off the dense list's cosines when fusing
    "community_boost": FUSION, "top_k": FUSION, "exclude_nav": FUSION, "nav_globs": FUSION,
    "rerank_depth": RERANK, "reranker": RERANK,
    "depth": RETRIEVAL, "keyword_index": RETRIEVAL, "fast_path_margin": RETRIEVAL, "pair_terms": RETRIEVAL,
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
    """The kind of a variable, of a coupled pair (its two variables share one kind), or of the move to the shipped
    default (retrieval when it moves a retrieval variable: new channel lists; else fusion)."""
    if is_default_move(name):
        kinds = {kind_of(n) for n in moved_variables(name)}
        return RETRIEVAL if RETRIEVAL in kinds else FUSION
    if PAIR_JOIN in name:
        return VARIABLE_KINDS[pair_of(name).first]
    try:
        return VARIABLE_KINDS[name]
    except KeyError:
        raise KeyError(f"variable {name!r} has no kind; kinds are set in tuner/sweep/variables.py for: "
                       f"{', '.join(sorted(VARIABLE_KINDS))}") from None


# -- coupled pairs: two variables a round may move together ---------------------------------------------------
PAIR_JOIN = "+"      # a pair round's variable is its two names joined: "w_ngram+rrf_k"


@dataclass(frozen=True)
class CoupledPair:
    """Two variables of one kind whose best values depend on each other, so a step of either alone can be flat or
    downhill where the step of both is not. A pair round moves both; the ledger row names both (`name`) and keeps
    the old and new values of each as a two-item list, in this order."""
    first: str
    second: str
    why: str

    @property
    def name(self) -> str:
        return f"{self.first}{PAIR_JOIN}{self.second}"

    @property
    def variables(self) -> tuple[str, str]:
        return self.first, self.second


# From the johngrib recipe night's final config (w_sparse 0.55), on its 600 made questions under its own keep rule
# (docs/lab-notes/tuner-2026-12.md, "Pair rounds"): w_ngram 0.05-0.1 with rrf_k 20 and w_ngram 0.05 with w_sparse
# 0.3-0.4 were kept where every single step of either had been rejected; rrf_k sets how much any weight counts.
COUPLED_PAIRS: dict[str, CoupledPair] = {p.name: p for p in (
    CoupledPair("w_ngram", "rrf_k", "rrf_k sets how far a list's lower ranks count, so the n-gram list's weight "
                "helps at a small k and hurts at a large one"),
    CoupledPair("w_sparse", "rrf_k", "the keyword list's weight and RRF k trade the same top ranks against each other"),
    CoupledPair("w_dense", "rrf_k", "the dense list's weight and RRF k trade the same top ranks against each other"),
    CoupledPair("w_ngram", "w_sparse", "both are keyword lists: the n-gram list's worth depends on how much the "
                "FTS5 list already counts"),
)}


def _check_pairs() -> None:
    """A pair moves two variables of one kind that re-fuse in memory (no reindex, no gate re-fit, one objective)."""
    for p in COUPLED_PAIRS.values():
        if not VARIABLE_KINDS.get(p.first) is VARIABLE_KINDS.get(p.second) is FUSION:
            raise ValueError(f"coupled pair {p.name}: both variables must be of kind fusion")


_check_pairs()


def pair_of(name: str) -> CoupledPair:
    try:
        return COUPLED_PAIRS[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a coupled pair; pairs are set in tuner/sweep/variables.py: "
                       f"{', '.join(COUPLED_PAIRS)}") from None


def is_pair(name: str) -> bool:
    return PAIR_JOIN in name and not is_default_move(name)


# -- the move to the shipped default: every search variable at once ---------------------------------------------
# A start set by hand (or by an older night) can sit far from the shipped default, which was chosen across vaults
# on hand-written questions: from `experiments/demo-start.toml` it is 8-15 points of held-out hit@5 away on real
# vaults. One round moves every variable of the space that differs from it, judged by the same rule as any round;
# its ledger row is named DEFAULT_MOVE + the fields joined ("default:w_dense+w_sparse+rrf_k") and keeps the old
# and new values of each as a list, in that order.
DEFAULT_MOVE = "default:"
DEFAULT_MOVE_KINDS = (FUSION, RETRIEVAL)     # what the move may change: no reindex, no gate re-fit, one objective


def is_default_move(name: str) -> bool:
    return name.startswith(DEFAULT_MOVE)


def default_move_name(fields) -> str:
    return DEFAULT_MOVE + PAIR_JOIN.join(fields)


def _one_value(name: str) -> bool:
    """Whether the ledger keeps a round over `name` as one value (a single variable), not a list (a pair, or the
    move to the shipped default whatever its number of fields)."""
    return PAIR_JOIN not in name and not is_default_move(name)


def default_move(space, baseline: SearchConfig) -> tuple[str, list] | None:
    """(the move's name, the shipped values) for the variables of `space` whose kind is in DEFAULT_MOVE_KINDS, whose
    value at `baseline` differs from the shipped default's and whose shipped value the space holds; None when no
    variable differs."""
    shipped = SearchConfig()
    fields = [v.name for v in space.variables
              if VARIABLE_KINDS.get(v.name) in DEFAULT_MOVE_KINDS and v.contains(getattr(shipped, v.name))
              and getattr(baseline, v.name) != getattr(shipped, v.name)]
    if not fields:
        return None
    return default_move_name(fields), [getattr(shipped, n) for n in fields]


def moved_variables(name: str) -> tuple[str, ...]:
    """The config fields a round over `name` (a variable, a pair or the move to the shipped default) moves."""
    if is_default_move(name):
        return tuple(name[len(DEFAULT_MOVE):].split(PAIR_JOIN))
    return pair_of(name).variables if is_pair(name) else (name,)


def with_change(cfg: SearchConfig, name: str, value) -> SearchConfig:
    """`cfg` with the change a round over `name` makes; a pair's value is its two values in order, the move to the
    shipped default's its fields' values in order."""
    if _one_value(name):
        return cfg.replace(**{name: value})
    names = moved_variables(name)
    if not isinstance(value, (list, tuple)) or len(value) != len(names):
        raise ValueError(f"a {name} round's value is a list of {len(names)} values ({', '.join(names)}), not {value!r}")
    return cfg.replace(**dict(zip(names, value)))


def value_in(cfg: SearchConfig, name: str):
    """The config's value of a variable, or of a pair as the ledger keeps it (a list, in the pair's order)."""
    return getattr(cfg, name) if _one_value(name) else [getattr(cfg, n) for n in moved_variables(name)]


def describe_change(name: str, old, new) -> str:
    """`w_sparse 0.0 -> 0.55`, for a pair `w_ngram 0.0 -> 0.1, rrf_k 60 -> 20`, for the move to the shipped default
    `the shipped default: w_dense 1.0 -> 0.3, rrf_k 60 -> 2`."""
    if _one_value(name) or not isinstance(old, (list, tuple)) or not isinstance(new, (list, tuple)):
        return f"{name} {old} -> {new}"
    moves = ", ".join(f"{n} {o} -> {v}" for n, o, v in zip(moved_variables(name), old, new))
    return f"the shipped default: {moves}" if is_default_move(name) else moves


def unchanged_reason(name: str, baseline: SearchConfig, cand: SearchConfig) -> str | None:
    """Why `cand` provably ranks every question exactly as `baseline` does, with the same work (None when
    it may not). Such a round is rejected:no_gain without being evaluated."""
    if name == "rerank_depth":
        if baseline.reranker == "none" and cand.reranker == "none":
            return "with reranker none, rerank_depth changes no ranked list"
        if max(baseline.rerank_depth, baseline.top_k) == max(cand.rerank_depth, cand.top_k):
            return f"the rerank window stays max(rerank_depth, top_k) = {max(cand.rerank_depth, cand.top_k)}"
    for field in ("w_dense", "w_sparse", "w_decomposed", "w_entity", "w_ngram", "w_ngram_lead", "ngram_lead_margin",
                  "w_dense_cross", "cross_lead_margin", "w_dense_lead", "dense_lead_cos"):
        if name == field and getattr(baseline, field) == getattr(cand, field):
            return f"{field} is unchanged"
    return None


def unavailable_reason(name: str, *, probes: int) -> Reason | None:
    """Why rounds over `name` cannot be judged on this tuning set (None when they can)."""
    if kind_of(name).needs_probes and probes == 0:
        return reason(NO_PROBES, name=name, probes=probes, model_field=MODEL_GATE_FIELD)
    return None


def gate_reason(name: str, *, probes: int, model_fitted: bool) -> Reason | None:
    """Why a gate variable moves nothing with the gate this tuning set has (None when it can move it): the
    model's threshold without a model, the cosine threshold under one."""
    if name not in GATE_SCORE or (name == MODEL_GATE_FIELD) == model_fitted:
        return None
    return reason(NO_GATE_MODEL if name == MODEL_GATE_FIELD else MODEL_DECIDES, name=name, probes=probes,
                  model_field=MODEL_GATE_FIELD)


def round_reason(decision: RoundDecision, name: str, text: str, *, probes: int) -> Reason:
    """The recorded reason of a round over `name` that was not judged, as a value (its fix included)."""
    try:
        gate_variable = kind_of(name).needs_probes
    except KeyError:            # a variable an older space had
        gate_variable = False
    return read_reason(decision, name, text, probes=probes, model_field=MODEL_GATE_FIELD, gate_variable=gate_variable)


def gate_field() -> str:
    """The cosine gate's config field (the one a model change re-fits with fit_threshold)."""
    return next(n for n, k in VARIABLE_KINDS.items() if k is GATE)
