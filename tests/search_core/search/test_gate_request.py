"""The gate a Searcher decides with is what it was given: a GateRequest to the constructor (its searches'
gate), or to one search (`rank`/`search(..., gate=...)`), which decides that search and no other."""

import pytest

from search_core.config import SearchConfig
from search_core.gate.model import sidecar_path
from tuner.gate.fit import fit_gate
from search_core.gate.request import GateRequest
from search_core.search.pipeline import Searcher
from tests.helpers.queries import QUERIES_IN, QUERIES_OUT


def _fitted(s: Searcher, scope: str = "embedder"):
    rows = [(s.search(q).gate.features, y) for qs, y in ((QUERIES_IN, 1), (QUERIES_OUT, 0)) for q in qs]
    fp = s.fingerprint["embedder"] if scope == "embedder" else s.fingerprint
    return fit_gate([r[0] for r in rows], [r[1] for r in rows], fingerprint=fp, scope=scope,
                    features=["top_cos", "term_overlap", "title_match"])


def test_a_gate_given_to_one_search_decides_that_search_only(small_index):
    s = Searcher(small_index)
    try:
        request = GateRequest(default=False, fitted=_fitted(s), fitted_source="fitted here")
        r = s.retrieve("김치찌개 레시피")
        plain = s.rank(r, SearchConfig()).gate
        assert plain.kind == "cosine"            # no gate file fits the test embedder's index
        given = s.rank(r, SearchConfig(), gate=request).gate
        assert given.kind == "model" and given.source == "fitted here" and given.probability is not None
        # the next search without one decides as before: the request was this search's, not the searcher's
        after = s.rank(r, SearchConfig()).gate
        assert after.decision == plain.decision and s.gate_request == GateRequest()
        assert s.search("김치찌개 레시피", gate=request).gate.decision == given.decision
        assert s.search("김치찌개 레시피").gate.kind == "cosine"
    finally:
        s.close()


def test_the_constructors_request_is_every_searchs_gate(small_index):
    probe = Searcher(small_index)
    model = _fitted(probe, scope="index")
    probe.close()
    model.save(sidecar_path(small_index))        # the index's own gate file: what a plain searcher decides with
    try:
        plain = Searcher(small_index)
        cosine = Searcher(small_index, gate=GateRequest.cosine("the caller sets the cosine threshold itself"))
        path_only = Searcher(small_index, gate=GateRequest(path=small_index.parent / "none.json"))
        assert plain.search("김치찌개 레시피").gate.source == str(sidecar_path(small_index))
        g = cosine.search("김치찌개 레시피", SearchConfig(reranker="none")).gate
        assert g.kind == "cosine" and g.reason == "the caller sets the cosine threshold itself"
        assert cosine.gate_for("some-reranker").reason == g.reason     # any reranker: still the cosine gate
        g = path_only.search("김치찌개 레시피").gate                    # that file alone: missing, so cosine
        assert g.kind == "cosine" and "none.json" in g.reason
        for s in (plain, cosine, path_only):
            s.close()
    finally:
        sidecar_path(small_index).unlink()


def test_a_request_is_a_frozen_value():
    r = GateRequest(path="g.json")
    assert r == GateRequest(path="g.json") and r != GateRequest()
    with pytest.raises(AttributeError):
        r.path = "other.json"
