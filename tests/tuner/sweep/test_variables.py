"""The table of variable kinds."""

import dataclasses

from search_core.config import SearchConfig
from tests.helpers import ROOT
from tuner.sweep.variables import VARIABLE_KINDS, gate_field, kind_of, unavailable_fix, unavailable_reason, unchanged_reason


def test_every_config_field_has_a_kind():
    assert set(VARIABLE_KINDS) == {f.name for f in dataclasses.fields(SearchConfig)}
    assert kind_of("embedder").reindex and kind_of("embedder").refit_gate
    assert kind_of("threshold").objective == "gate_accuracy" and gate_field() == "threshold"
    assert kind_of("reranker").refit_gate and not kind_of("w_dense").refit_gate and not kind_of("depth").reindex


def test_provably_unchanged_rankings():
    base = SearchConfig()
    assert "reranker none" in unchanged_reason("rerank_depth", base, base.replace(rerank_depth=35))
    on = base.replace(reranker="BAAI/bge-reranker-base", rerank_depth=3, top_k=5)
    assert "stays max(rerank_depth, top_k) = 5" in unchanged_reason("rerank_depth", on, on.replace(rerank_depth=4))
    assert unchanged_reason("rerank_depth", on, on.replace(rerank_depth=20)) is None
    assert unchanged_reason("rrf_k", base, base.replace(rrf_k=10)) is None


def test_gate_rounds_need_probes():
    assert "level: probe" in unavailable_reason("threshold", probes=0)
    assert unavailable_reason("threshold", probes=3) is None and unavailable_reason("w_dense", probes=0) is None


def test_the_sweep_names_no_variable():
    for module in ("loop.py", "rounds.py"):          # the loop and the one round runner
        text = (ROOT / "tuner" / "sweep" / module).read_text()
        for name in ('"embedder"', '"threshold"', '"rerank_depth"', '"reranker"'):
            assert name not in text, (module, name)


def test_the_fix_for_an_unavailable_round_follows_the_kind():
    # a threshold round is unavailable for want of probes, not of model weights (the autorag morning
    # report told the reader to make the threshold "loadable offline")
    assert unavailable_fix("threshold", probes=0).startswith("add probes to the tuning set")
    for name in ("embedder", "reranker"):
        assert unavailable_fix(name, probes=0).startswith("make the model loadable offline")


def test_the_fix_for_an_unavailable_gate_round_follows_the_evidence():
    # a set with probes: the cosine threshold is unavailable because a gate model decides, and telling the
    # reader to "add probes" sends them to write what they already have
    fix = unavailable_fix("threshold", probes=12)
    assert "add probes" not in fix and fix.startswith("nothing to add: the tuning set has 12 probes")
    assert "gate_threshold" in fix and "Remove `threshold` from the space" in fix
    # gate_threshold with probes is unavailable when no gate model could be fitted on them
    fix = unavailable_fix("gate_threshold", probes=3)
    assert fix.startswith("the tuning set has 3 probes, but no gate model could be fitted")
    assert unavailable_fix("gate_threshold", probes=0).startswith("add probes")
