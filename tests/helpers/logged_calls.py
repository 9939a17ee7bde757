"""Recall-log calls for calibration tests: made by hand (a gate model whose P is set through each call's top_cos,
and vaults of such calls labelled around a boundary), and real searches of the small vault to log (6 answerable
questions, 6 probes)."""

import math

import numpy as np

from search_core.gate.model import GateModel
from search_core.recall.log import LoggedCall, index_id

FP = {"embedder": {"name": "e5-small", "dim": 384}}


def gate_model(threshold=0.64) -> GateModel:
    # P = sigmoid(top_cos): a call's probability is set by hand through its top_cos
    return GateModel(("top_cos", "title_match"), (0.0, 0.0), (1.0, 1.0), (1.0, 0.0), 0.0, 1.0, 0.0, threshold, FP,
                     fitted_on={"sets": {"demo": 10}})


def logged_call(i, p, label=None, title_match=0.0, fingerprint="idx-A"):
    z = math.log(p / (1 - p))
    return LoggedCall(i, 1000.0 + i, "s", "default", f"질문 {i}", "h", ({"note_id": f"n/{i}", "cosine": 0.8},),
                      {"top_cos": z, "title_match": title_match, "hit_cos": 0.8}, {}, 0.82, fingerprint, p >= 0.64,
                      None if p >= 0.64 else "threshold", 20.0, None, label, None)


def vault_with_boundary_at(boundary, n_labels, n_unlabelled=200, seed=0):
    """Calls whose P is uniform on (0.02, 0.98); this vault answers those above `boundary` (a few flipped)."""
    rng = np.random.default_rng(seed)
    calls = []
    for i in range(n_labels + n_unlabelled):
        p = float(rng.uniform(0.02, 0.98))
        lab = None
        if i < n_labels:
            relevant = (p >= boundary) != (rng.random() < 0.1)      # 10 % label noise
            lab = "relevant" if relevant else "irrelevant"
        calls.append(logged_call(i + 1, p, lab))
    return calls


def vault_labelled_near(boundary, lo=0.2, hi=0.75, n=120, seed=0):
    """Calls whose P is uniform on (0.02, 0.98); those with P in [lo, hi] are labelled, as `suggest` labels the
    calls nearest the cut first; the vault answers those above `boundary`."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        p = float(rng.uniform(0.02, 0.98))
        out.append(logged_call(i + 1, p, ("relevant" if p >= boundary else "irrelevant") if lo <= p <= hi else None))
    return out


def cosine_call(i, cos, label=None, error=None):
    """A logged call whose top cosine is `cos` (no gate model); `error`: a call that never searched (no features)."""
    feats = {} if error else {"top_cos": cos, "hit_cos": cos}
    return LoggedCall(i, 1000.0 + i, "s", "default", f"q{i}", "h", (), feats, {}, 0.82, "idx-A", False,
                      "error" if error else "threshold", 20.0, error, label, None)


ANSWERABLE = ["김치찌개 레시피", "GraphRAG 커뮤니티 요약", "RRF 점수 k 값", "그래프 RAG 엔티티 추출", "돼지 앞다리살 두부",
              "Leiden 알고리즘 커뮤니티"]
PROBES = ["양자 컴퓨터 큐비트 오류 정정", "LightRAG 설치", "축구 월드컵 우승국", "파리 에펠탑 높이", "주식 배당금 세금",
          "비트코인 반감기"]


def label_of(query: str) -> str:
    """The label of one of ANSWERABLE + PROBES, as a person gives it."""
    return "relevant" if query in ANSWERABLE else "irrelevant"


def searched_small_vault(tmp_path, shared_cache):
    """The small vault indexed under `tmp_path`, and each of ANSWERABLE + PROBES searched on it once: (index, the
    index's fingerprint key, query -> its SearchResult), for a recall log to hold."""
    from search_core.index.indexer import index_vault
    from search_core.search.pipeline import Searcher
    from tests.helpers import SMALL_VAULT, write_vault
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(write_vault(tmp_path / "vault", SMALL_VAULT), db, cache=shared_cache)
    s = Searcher(db)
    try:
        return db, index_id(s.fingerprint), {q: s.search(q) for q in ANSWERABLE + PROBES}
    finally:
        s.close()
