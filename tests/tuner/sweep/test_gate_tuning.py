"""The tuner gates with the gate `search` would use (the index's gate file, else the shipped default), fits
a model on the tuning set for an embedder or reranker no file fits, and tunes its probability threshold in
gate rounds."""

import dataclasses
import hashlib
import json

import pytest
import yaml

from search_core.config import ADDED_LATER, SearchConfig
from tuner.gate.fit import fit_gate
from search_core.gate.request import GateRequest
from search_core.search.pipeline import Searcher
from tests.helpers.queries import QUERIES_IN, QUERIES_OUT
from tests.helpers.sweeps import DEMO_TUNE as TUNE
from tests.helpers.sweeps import run_sweep as sweep
from tuner.sweep.variables import GATE_SCORE, RERANK, kind_of
from tuner.evaluation.evaluate import QuestionResult
from tuner.sweep.workbench import fit_threshold

GATE_SPACE = ('[gate_threshold]\nkind = "float"\nlow = 0.05\nhigh = 0.95\nstep = 0.01\n'
              '[threshold]\nkind = "float"\nlow = 0.4\nhigh = 0.95\nstep = 0.005\n')


def test_gate_threshold_is_a_gate_variable_and_leaves_old_hashes_alone():
    assert kind_of("gate_threshold").name == "gate" and kind_of("gate_threshold").needs_probes
    assert GATE_SCORE == {"threshold": "top_score", "gate_threshold": "gate_probability"}
    assert RERANK.refit_gate and kind_of("embedder").refit_gate
    # a config as recorded before the later keys existed: each holds the value every config had then
    cfg = SearchConfig().replace(**ADDED_LATER)
    old = {k: v for k, v in cfg.as_dict().items() if k not in ADDED_LATER}
    assert cfg.config_hash() == hashlib.sha256(json.dumps(old, sort_keys=True, ensure_ascii=False)
                                               .encode()).hexdigest()[:12]
    assert cfg.replace(gate_threshold=0.5).config_hash() != cfg.config_hash()
    assert SearchConfig.from_stored(old).config_hash() == cfg.config_hash()


def test_the_config_threshold_decides_for_the_model(small_index):
    s = Searcher(small_index)
    rows = [(s.search(q).gate.features, y) for qs, y in ((QUERIES_IN, 1), (QUERIES_OUT, 0)) for q in qs]
    m = fit_gate([r[0] for r in rows], [r[1] for r in rows], fingerprint=s.fingerprint["embedder"],
                 features=["top_cos", "term_overlap", "title_match"])
    m = dataclasses.replace(m, calib_a=0.01, calib_b=0.0)     # a flat calibration: p near 0.5, not 1.0
    gate = GateRequest(default=False, fitted=m, fitted_source="test")
    r = s.retrieve("김치찌개 레시피")
    p = s.rank(r, SearchConfig(), gate=gate).gate.probability
    assert 0.2 < p < 0.8
    assert s.rank(r, SearchConfig(gate_threshold=p + 0.01), gate=gate).gate.inject is False
    low = s.rank(r, SearchConfig(gate_threshold=p - 0.01), gate=gate).gate
    assert low.inject is True and low.probability == pytest.approx(p)


def test_fit_threshold_reads_the_probability_when_asked():
    rows = [QuestionResult.from_json(q) for q in ({"id": "a", "level": "L1", "top_score": 0.80, "gate_probability": 0.9},
                                                     {"id": "p", "level": "probe", "top_score": 0.85, "gate_probability": 0.2},
                                                     {"id": "b", "level": "L1", "top_score": 0.90, "gate_probability": None})]
    assert fit_threshold(rows, "gate_probability") == pytest.approx(0.55)
    assert fit_threshold(rows) != pytest.approx(0.55)


def test_fit_threshold_balanced_weighs_each_class_by_one_over_its_size():
    """Eight answerable questions at 0.1-0.8, two probes at 0.45 and 0.55. Most rows right: below every score,
    8 of 10 (above both probes, at 0.575: 3 + 2 = 5). Balanced: below every score (8/8 + 0/2) / 2 = 0.5; at 0.575
    (3/8 + 2/2) / 2 = 0.6875, the best (0.475: 0.5; 0.65: 0.625)."""
    scores = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    rows = ([QuestionResult.from_json({"id": f"a{i}", "level": "L1", "top_score": s}) for i, s in enumerate(scores)]
            + [QuestionResult.from_json({"id": f"p{i}", "level": "probe", "top_score": s})
               for i, s in enumerate((0.45, 0.55))])
    assert fit_threshold(rows) == pytest.approx(0.099)
    assert fit_threshold(rows, balanced=True) == pytest.approx(0.575)


def test_gate_rounds_tune_the_models_probability_threshold(demo_index, tmp_path):
    summary, rounds = sweep(tmp_path, demo_index, GATE_SPACE, 6)
    start = rounds[0]
    assert start.search_config.gate_threshold is not None                 # the fitted model's own threshold
    assert all(q.gate_probability is not None for q in start.result.per_query)
    cosine = [r for r in rounds[1:] if r.variable == "threshold"]
    assert len(cosine) == 1 and cosine[0].decision == "unavailable"    # the model decides, not the cosine
    assert "gate model" in cosine[0].reason
    gate = [r for r in rounds[1:] if r.variable == "gate_threshold"]
    assert len(gate) >= 3 and all(r.decision not in ("unavailable", "crashed") for r in gate)
    for r in gate:      # the ledger's gate numbers are the model's decisions at the round's threshold
        per = r.result.per_query
        assert all(q.inject == (q.gate_probability >= r.new) for q in per), r.new
        assert r.result.gate.probes_injected == sum(q.inject for q in per if q.level == "probe")


def test_gate_threshold_rounds_without_probes_are_unavailable(demo_mini_index, tmp_path):
    demo_index = demo_mini_index            # the round starts from the shipped default, fitted for e5-small
    data = yaml.safe_load(TUNE.read_text(encoding="utf-8"))
    data["questions"] = [q for q in data["questions"] if q["level"] != "probe"]
    gold = tmp_path / "no-probes.yaml"
    gold.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    summary, rounds = sweep(tmp_path, demo_index, GATE_SPACE, 4, gold=gold)
    # no probes, so nothing to fit on: the shipped default decides, at its own threshold, as in `search`
    from search_core.gate.model import DEFAULT_GATE_FILE, DEFAULT_GATE_SOURCE, load_gate
    assert rounds[0].search_config.gate_threshold == round(load_gate(DEFAULT_GATE_FILE).threshold, 2)
    assert {q.gate.source for q in rounds[0].result.per_query} == {DEFAULT_GATE_SOURCE}
    by_var = {r.variable: r for r in rounds[1:]}
    assert by_var["gate_threshold"].decision == "unavailable" and "no probes" in by_var["gate_threshold"].reason
    assert len(rounds) == 3                                               # each logged once, then the space is spent


def test_the_sweeps_fitted_gate_decides_its_evaluations_and_no_other_search(demo_index, tmp_path):
    """The workbench hands its gate to each evaluation: the searcher it shares keeps deciding like `search`."""
    from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
    from tests.helpers.sweeps import HAND_SET_UNITS, hand_set_calibrations
    from tuner.data.gold import load_gold
    from tuner.evaluation.cost_model import CostStore
    from tuner.sweep.workbench import Workbench
    hand_set_calibrations(tmp_path / "costs", units_by_embedder={FAKE_EMBEDDER: HAND_SET_UNITS["e5-small"]})
    bench = Workbench(demo_index, index_dir=tmp_path / "indexes", cost_store=CostStore(tmp_path / "costs"))
    gold = load_gold(TUNE)
    cfg = SearchConfig(embedder=bench.base_embedder)
    model = bench.fit_gate_for(cfg, gold)
    assert model is not None and (cfg.embedder, "none") in bench.gate_fitted    # no gate file fits the test embedder
    res = bench.evaluate(cfg, gold)
    assert {q.gate.source for q in res.per_query} == {"fitted by the sweep on the tuning set"}
    s = bench.searchers[cfg.embedder]
    assert s.gate_request == GateRequest()
    assert s.search(gold.questions[0].query, cfg).gate.kind == "cosine"      # what `search` decides with here
