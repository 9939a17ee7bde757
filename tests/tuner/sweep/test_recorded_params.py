"""RecordedParams: a sweep's params as its ledger row keeps them read as the SweepParams it ran with, and
write back the text they were read from (the sweep's genesis hash covers it)."""

import dataclasses
import json
import sqlite3

from tests.helpers import ROOT
from tuner.sweep.params import RecordedParams, SweepParams

OLD = ROOT / "tests/tuner/ledger/data/schema2-demo-sweep.sqlite"


def test_params_recorded_before_later_settings_read_as_what_the_sweep_ran_and_write_the_same_text():
    with sqlite3.connect(OLD) as c:
        (text,) = c.execute("SELECT params FROM sweeps").fetchone()
    assert "hit5_guard" not in json.loads(text) and "noise_alpha" not in json.loads(text)
    p = RecordedParams.from_json(json.loads(text))
    assert p.sweep.rounds == 6 and p.sweep.objective == "score100" and p.sweep.hit5_guard == "count"
    assert p.sweep.noise_alpha is None            # decided without the noise test, which it predates
    assert set(p.pins) == {"gold", "holdout", "space", "score_rubric", "index"} and p.evidence_step is None
    assert json.dumps(p.to_json(), ensure_ascii=False) == text


def test_a_key_of_an_older_version_is_kept_and_read_for_what_it_meant():
    recorded = {"db": "i", "gold": "g", "space": "s", "question_guard": True, "pins": None}
    p = RecordedParams.from_json(recorded)
    assert p.sweep.hit5_guard == "question" and p.older == (("question_guard", True),)
    assert p.to_json() == recorded and list(p.to_json()) == list(recorded)


def test_params_recorded_today_are_every_setting_then_the_pins():
    sweep = SweepParams(db="i", gold="g", space="s", rounds=3, noise_alpha=0.1)
    fresh = RecordedParams(sweep, {"gold": "abc"})
    assert fresh.to_json() == {**dataclasses.asdict(sweep), "pins": {"gold": "abc"}}
    assert RecordedParams.from_json(fresh.to_json()).to_json() == fresh.to_json()
    assert RecordedParams(sweep).to_json() == dataclasses.asdict(sweep)      # a re-test records no pins
