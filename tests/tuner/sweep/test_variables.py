"""The table of variable kinds."""

import dataclasses

from search_core.config import SearchConfig
from tests.helpers import ROOT
from tuner.ledger.schema import RoundDecision
from tuner.sweep.reasons import MODEL_DECIDES, NO_GATE_MODEL, NO_PROBES, REASONS
from tuner.sweep.variables import (GATE_SCORE, MODEL_GATE_FIELD, VARIABLE_KINDS, gate_field, gate_reason, kind_of,
                                   round_reason, unavailable_reason, unchanged_reason)


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
    assert "level: probe" in unavailable_reason("threshold", probes=0).message()
    assert unavailable_reason("threshold", probes=3) is None and unavailable_reason("w_dense", probes=0) is None


def test_the_sweep_names_no_variable():
    for module in ("loop.py", "rounds.py"):          # the loop and the one round runner
        text = (ROOT / "tuner" / "sweep" / module).read_text()
        for name in ('"embedder"', '"threshold"', '"rerank_depth"', '"reranker"'):
            assert name not in text, (module, name)


UNAVAILABLE = RoundDecision.UNAVAILABLE


def test_a_reason_renders_its_message_and_its_fix_from_one_table_and_reads_back_from_the_ledger_text():
    # a threshold round is unavailable for want of probes, not of model weights (the autorag morning
    # report told the reader to make the threshold "loadable offline")
    why = unavailable_reason("threshold", probes=0)
    assert why.kind == NO_PROBES and why.message() == REASONS[NO_PROBES].message.format(name="threshold")
    back = round_reason(UNAVAILABLE, "threshold", why.message(), probes=0)
    assert back == why and back.fix().startswith("add probes to the tuning set")
    for name in ("embedder", "reranker"):
        missing = round_reason(UNAVAILABLE, name, "weights for 'BAAI/bge-m3' are not on this machine", probes=0)
        assert missing.message() == "weights for 'BAAI/bge-m3' are not on this machine"
        assert missing.fix().startswith("make the model loadable offline")
    crash = round_reason(RoundDecision.CRASHED, "w_dense", "ValueError: bad", probes=3)
    assert crash.message() == "ValueError: bad" and crash.fix().startswith("a bug or bad input")
    # a set with probes: the cosine threshold moves nothing because a gate model decides
    decides = gate_reason("threshold", probes=12, model_fitted=True)
    assert decides.kind == MODEL_DECIDES and round_reason(UNAVAILABLE, "threshold", decides.message(), probes=12) == decides
    assert decides.fix().startswith("nothing to add: the tuning set has 12 probes")
    assert "gate_threshold" in decides.fix() and "Remove `threshold` from the space" in decides.fix()
    # gate_threshold with probes moves nothing when no gate model could be fitted on them
    unfitted = gate_reason("gate_threshold", probes=3, model_fitted=False)
    assert unfitted.kind == NO_GATE_MODEL
    assert unfitted.fix().startswith("the tuning set has 3 probes, but no gate model could be fitted")
    assert gate_reason("threshold", probes=3, model_fitted=False) is None
    assert gate_reason("gate_threshold", probes=3, model_fitted=True) is None


def test_a_set_with_probes_is_never_told_to_add_probes():
    """Whatever a round over any variable recorded (each reason the sweep gives a set with probes, an older
    version's wording, a model's error), the fix the report gives a set with probes never asks for probes."""
    for probes in (1, 3, 12):
        for name in VARIABLE_KINDS:
            texts = ["an older version's wording of why", "weights for 'BAAI/bge-m3' are not on this machine"]
            assert unavailable_reason(name, probes=probes) is None
            for fitted in (True, False):
                why = gate_reason(name, probes=probes, model_fitted=fitted) if name in GATE_SCORE else None
                texts += [why.message()] if why is not None else []
            for text in texts:
                for decision in (UNAVAILABLE, RoundDecision.CRASHED):
                    fix = round_reason(decision, name, text, probes=probes).fix()
                    assert "add probes" not in fix, (name, probes, text, fix)
    assert MODEL_GATE_FIELD in GATE_SCORE and "add probes" in round_reason(
        UNAVAILABLE, "threshold", "an older version's wording of why", probes=0).fix()
