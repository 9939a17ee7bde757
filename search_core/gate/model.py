"""The gate model: an L2 logistic regression over gate features, with calibrated probabilities.

Stored as plain JSON (features, scaler, coefficients, a Platt calibration, the threshold and the
fingerprint/config it was fitted for), so loading needs no pickle and a file can be read by eye.

probability p = sigmoid(a * z + b), z = the regression's decision value on standardised features;
(a, b) are fitted on cross-validated decision values, so p is calibrated on rows the regression did
not see. The gate injects when p >= threshold; three bands say how sure it is:
  inject  p >= threshold + caveat_width
  caveat  threshold <= p < threshold + caveat_width   (inject, with a caveat)
  skip    p < threshold

A model for another embedder (or another index, for a calibrated one) or a broken file is never used:
the search falls back to the cosine gate and says why.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from search_core import SearchCoreError
from search_core.files import atomic_write_text
from search_core.gate.features import FEATURE_NAMES

GATE_FORMAT = "autoresearch-gate/1"
BANDS = ("inject", "caveat", "skip")
DEFAULT_CAVEAT_WIDTH = 0.15
DEFAULT_GATE_FILE = Path(__file__).with_name("gate_default.json")
# How a row names the shipped default as the gate that decided: the file inside the package, not where this
# machine installed it, so two reports of the same gate agree and a saved report carries no machine path.
DEFAULT_GATE_SOURCE = "search_core/gate/gate_default.json"


class GateFileError(SearchCoreError):
    pass


class GateFitError(SearchCoreError):
    pass


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


@dataclass(frozen=True)
class GateModel:
    features: tuple
    mean: tuple
    scale: tuple
    coef: tuple
    intercept: float
    calib_a: float
    calib_b: float
    threshold: float
    fingerprint: dict            # the embedder fingerprint (scope "embedder") or the index's (scope "index")
    scope: str = "embedder"
    reranker: str = "none"       # features read the reranker's score; another reranker means another model
    caveat_width: float = DEFAULT_CAVEAT_WIDTH
    fitted_on: dict = field(default_factory=dict)

    def decision_value(self, feats: dict) -> float:
        x = np.array([feats.get(n, 0.0) for n in self.features], dtype=np.float64)
        return float(((x - np.asarray(self.mean)) / np.asarray(self.scale)) @ np.asarray(self.coef) + self.intercept)

    def probability(self, feats: dict) -> float:
        return sigmoid(self.calib_a * self.decision_value(feats) + self.calib_b)

    def band(self, p: float, threshold: float | None = None) -> str:
        t = self.threshold if threshold is None else threshold
        if not p >= t:           # a NaN probability compares false both ways: it skips, it never injects
            return "skip"
        return "caveat" if p < t + self.caveat_width else "inject"

    def mismatch(self, fingerprint: dict, reranker: str = "none") -> str | None:
        """Why this model may not gate a search over an index with `fingerprint` (None: it may)."""
        mine = self.fingerprint.get("embedder", self.fingerprint)
        theirs = fingerprint.get("embedder", fingerprint)
        if self.scope == "index" and self.fingerprint != fingerprint:
            return f"the gate was fitted for another index ({_fp_text(self.fingerprint)}, this is {_fp_text(fingerprint)})"
        if mine != theirs:
            return f"the gate was fitted for embedder {_fp_text(self.fingerprint)}, this index uses {_fp_text(fingerprint)}"
        if self.reranker != reranker:
            return f"the gate was fitted with reranker {self.reranker!r}, this search uses {reranker!r}"
        return None

    def provenance(self) -> str:
        """What this gate was made from, in a line (`search --explain`, `calibrate`): the rows its weights were
        fitted on, and, when labels moved its threshold for one vault, from where to where and on how many."""
        fo = self.fitted_on or {}
        if fo.get("vaults"):
            base = (f"weights fitted on {fo.get('rows', '?')} labelled questions of {', '.join(map(str, fo['vaults']))}"
                    + (f" ({str(fo['at'])[:10]})" if fo.get("at") else ""))
        elif isinstance(fo.get("labelled"), dict):
            lab = fo["labelled"]
            base = (f"weights fitted on {lab.get('answerable', '?')} relevant + {lab.get('probes', '?')} irrelevant "
                    f"labels" + (f" ({', '.join(map(str, fo['sources']))})" if fo.get("sources") else ""))
        elif fo.get("rows"):
            base = f"weights fitted on {fo['rows']} labelled rows"
        else:
            base = "no record of what its weights were fitted on"
        moved = fo.get("recalibrated")
        if not isinstance(moved, dict):
            return f"{base}; threshold {self.threshold:.3f}, the fit's own"
        lab = moved.get("labels") or {}
        return (f"this vault's threshold {self.threshold:.3f}, moved from {float(moved.get('from', 0)):.3f} by "
                f"{lab.get('answerable', '?')} relevant + {lab.get('probes', '?')} irrelevant labels"
                + (f" (to {str(moved['at'])[:10]})" if moved.get("at") else "") + f"; {base}")

    def as_json(self) -> dict:
        d = asdict(self)
        d = {"format": GATE_FORMAT, **{k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}}
        return d

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        return atomic_write_text(p, json.dumps(self.as_json(), ensure_ascii=False, indent=1))


def _fp_text(fp: dict) -> str:
    e = fp.get("embedder", fp)
    return f"{e.get('name', '?')}/{e.get('dim', '?')}d" if isinstance(e, dict) else str(e)


MAX_GATE_WEIGHT = 1e6        # |every number| in a gate file; with MIN_GATE_SCALE no sum can overflow
MIN_GATE_SCALE = 1e-9


def load_gate(path: str | Path) -> GateModel:
    """Read and check a gate file; anything wrong is a GateFileError that names the file and the fix."""
    p = Path(path)
    fix = "re-fit it with `autoresearch calibrate apply`, or delete it to use the cosine gate"
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GateFileError(f"gate file {p} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise GateFileError(f"gate file {p} is not readable JSON ({e}); {fix}") from None
    if not isinstance(d, dict) or d.get("format") != GATE_FORMAT:
        raise GateFileError(f"gate file {p} is not a {GATE_FORMAT} file; {fix}")
    try:
        m = GateModel(features=tuple(d["features"]), mean=tuple(map(float, d["mean"])),
                      scale=tuple(map(float, d["scale"])), coef=tuple(map(float, d["coef"])),
                      intercept=float(d["intercept"]), calib_a=float(d["calib_a"]), calib_b=float(d["calib_b"]),
                      threshold=float(d["threshold"]), fingerprint=dict(d["fingerprint"]),
                      scope=str(d.get("scope", "embedder")), reranker=str(d.get("reranker", "none")),
                      caveat_width=float(d.get("caveat_width", DEFAULT_CAVEAT_WIDTH)),
                      fitted_on=dict(d.get("fitted_on", {})))
    except (KeyError, TypeError, ValueError) as e:
        raise GateFileError(f"gate file {p} lacks or garbles a field ({e}); {fix}") from None
    numbers = {"mean": m.mean, "scale": m.scale, "coef": m.coef, "intercept": (m.intercept,),
               "calib_a": (m.calib_a,), "calib_b": (m.calib_b,), "threshold": (m.threshold,),
               "caveat_width": (m.caveat_width,)}
    bad = [k for k, vals in numbers.items() if not all(math.isfinite(v) for v in vals)]
    if bad:   # a NaN weight made every P(answerable) NaN: every search injected, and JSON output broke
        raise GateFileError(f"gate file {p}: {', '.join(bad)} must be finite numbers (found NaN or infinity); {fix}")
    # Finite but huge weights overflow to inf - inf = NaN inside the sum just the same; a fitted logistic
    # model on standardised features has weights of a few units (the shipped default: at most 1.3).
    huge = [k for k, vals in numbers.items() if any(abs(v) > MAX_GATE_WEIGHT for v in vals)]
    if huge or any(s < MIN_GATE_SCALE for s in m.scale):
        raise GateFileError(f"gate file {p}: {', '.join(huge) or 'scale'} out of range (every number at most "
                            f"{MAX_GATE_WEIGHT:g} in size, every scale at least {MIN_GATE_SCALE:g}); {fix}")
    n = len(m.features)
    unknown = [f for f in m.features if f not in FEATURE_NAMES]
    if unknown:
        raise GateFileError(f"gate file {p} uses unknown features {unknown}; known: {', '.join(FEATURE_NAMES)}")
    if not n or not (len(m.mean) == len(m.scale) == len(m.coef) == n) or any(s <= 0 for s in m.scale):
        raise GateFileError(f"gate file {p}: features, mean, scale and coef must have one positive-scale entry "
                            f"per feature; {fix}")
    if not 0.0 < m.threshold < 1.0:
        raise GateFileError(f"gate file {p}: threshold {m.threshold} is not a probability in (0, 1); {fix}")
    if m.scope not in ("embedder", "index"):
        raise GateFileError(f"gate file {p}: scope {m.scope!r} is not one of embedder, index")
    return m


# ---- the choice a searcher makes, and the decision per search ----------------------------------------

WHICH_GATE = ("kind", "source", "threshold")     # the part of a decision that says which gate decided


@dataclass(frozen=True)
class GateDecision:
    """What the gate decided for one search, and which gate decided: `kind` model or cosine, `source` the
    gate file (or "cosine"), `threshold` the cut it applied (a probability for a model, a cosine for the
    cosine gate). Every per-question row (search --json, eval --json, the recall log) carries it."""
    inject: bool
    probability: float | None    # the model's calibrated P(answerable); None when the cosine gate decided
    band: str                    # inject / caveat / skip
    kind: str                    # model or cosine; keyword on a fast-path answer (search_core/search/pipeline.py)
    source: str                  # the gate file, or "cosine"
    threshold: float
    reason: str = ""

    def to_json(self) -> dict:
        return {"inject": self.inject, "probability": None if self.probability is None else round(self.probability, 4),
                "band": self.band, "kind": self.kind, "source": self.source, "threshold": round(self.threshold, 4),
                "reason": self.reason}


@dataclass(frozen=True)
class GateChoice:
    """The gate a searcher decides with: a model (None: the cosine gate), the file it came from, the
    reranker it was chosen for, and, for the cosine gate, why no model."""
    model: GateModel | None
    source: str                  # the file, or "cosine"
    reason: str = ""
    reranker: str = "none"

    @property
    def kind(self) -> str:
        return "cosine" if self.model is None else "model"

    def describe(self) -> dict:
        """Which gate this is, for a report or a row: kind, file and the model's own threshold."""
        return {"kind": self.kind, "source": self.source,
                "threshold": None if self.model is None else round(self.model.threshold, 4), "reason": self.reason}

    def decide(self, feats: dict, top_cos: float, cos_threshold: float, has_hits: bool,
               reranker: str = "none", p_threshold: float | None = None) -> GateDecision:
        if self.model is not None and self.model.reranker != reranker:
            why = self.model.mismatch(self.model.fingerprint, reranker)
            return GateChoice(None, "cosine", f"{self.source}: {why}; using the cosine gate", reranker).decide(
                feats, top_cos, cos_threshold, has_hits, reranker)
        if self.model is None or not has_hits:
            band = "skip"
            if has_hits and top_cos >= cos_threshold:
                width = max((1.0 - cos_threshold) / 4, 0.01)       # confidence_label's quarter of the room above
                band = "inject" if top_cos >= cos_threshold + width else "caveat"
            if self.model is None:
                return GateDecision(band != "skip", None, band, "cosine", "cosine", float(cos_threshold), self.reason)
            t = self.model.threshold if p_threshold is None else p_threshold
            return GateDecision(False, None, "skip", "model", self.source, float(t), "no results")
        p = self.model.probability(feats)
        band = self.model.band(p, p_threshold)
        t = self.model.threshold if p_threshold is None else p_threshold
        if not math.isfinite(p):
            return GateDecision(False, None, "skip", "model", self.source, float(t), f"model {self.source}: its "
                                "probability is not a number here (the gate file's weights overflow); skipped")
        return GateDecision(band != "skip", p, band, "model", self.source, float(t), f"model {self.source}")


COSINE = GateChoice(None, "cosine", "no gate model attached")


def choose_gate(fingerprint: dict, reranker: str = "none", *, path: str | Path | None = None,
                db: str | Path | None = None, default: bool = True, fitted: GateModel | None = None,
                fitted_source: str = "fitted on the tuning set") -> GateChoice:
    """The one choice of gate, for every path that searches (search, eval, the sweep, ab, recall, the
    servers): `path` if given, else `<db>.gate.json` (written by `calibrate apply`), else the shipped
    default, else `fitted` (a model fitted in this process for an index no file fits: the sweep's and
    the A/B's model for another embedder or reranker), else the cosine gate with the reason. A file
    that does not fit, or does not load, is passed over with its reason; a search never fails over its gate."""
    candidates = []
    if path is not None:
        candidates.append(Path(path))
    else:
        if db is not None:
            side = sidecar_path(db)
            if side.exists():
                candidates.append(side)
        if default:
            candidates.append(DEFAULT_GATE_FILE)
    reasons = []
    for c in candidates:
        try:
            m = load_gate(c)
        except GateFileError as e:
            reasons.append(str(e))
            continue
        why = m.mismatch(fingerprint, reranker)
        name = DEFAULT_GATE_SOURCE if c == DEFAULT_GATE_FILE else str(c)
        if why is None:
            return GateChoice(m, name, "", reranker)
        reasons.append(f"{name}: {why}")
    if fitted is not None and path is None:
        why = fitted.mismatch(fingerprint, reranker)
        if why is None:
            return GateChoice(fitted, fitted_source, "; ".join(reasons), reranker)
        reasons.append(f"{fitted_source}: {why}")
    reason = "; ".join(reasons) if reasons else "no gate model"
    return GateChoice(None, "cosine", reason + "; using the cosine gate", reranker)


def sidecar_path(db: str | Path) -> Path:
    p = Path(db)
    return p.with_name(p.name + ".gate.json")


def gate_file_stamp(path: str | Path | None, db: str | Path | None) -> tuple | None:
    """(inode, mtime, size) of the file choose_gate reads first (`path`, else `<db>.gate.json`), None when
    there is none. `calibrate apply` and `undo` replace that file by a rename, so a new inode (or mtime)
    tells a running searcher to choose again; one stat, a few microseconds per search."""
    p = Path(path) if path is not None else (sidecar_path(db) if db is not None else None)
    if p is None:
        return None
    try:
        st = os.stat(p)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


# ---- the balanced cut (the engine places a threshold with it; fitting a model lives in tuner.gate.fit) ----

def best_balanced_threshold(scores, labels) -> tuple[float, float]:
    """(threshold, balanced accuracy): the cut on `scores` (inject when >=) that best separates
    labels 1 (answerable) from 0 (probes). Ties go to the midpoint between neighbouring scores."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    npos, nneg = int(y.sum()), int((~y).sum())
    if not npos or not nneg:
        raise GateFitError(f"a threshold needs both answerable questions ({npos}) and probes ({nneg})")
    order = np.argsort(s, kind="stable")
    s, y = s[order], y[order]
    # cut at index i: rows i.. are injected. tpr = positives at/above, tnr = negatives below
    pos_below = np.concatenate([[0], np.cumsum(y)])
    neg_below = np.concatenate([[0], np.cumsum(~y)])
    tpr = (npos - pos_below) / npos
    tnr = neg_below / nneg
    bacc = (tpr + tnr) / 2
    valid = np.concatenate([[True], s[1:] > s[:-1], [True]])     # only cut between distinct scores
    bacc = np.where(valid, bacc, -1)
    i = int(np.argmax(bacc))
    if i == 0:
        t = s[0] - 1e-6
    elif i == len(s):
        t = s[-1] + 1e-6
    else:
        t = (s[i - 1] + s[i]) / 2
    return float(t), float(bacc[i])
