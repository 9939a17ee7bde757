"""The sweep's settings table (tuner/sweep/settings.py): the `sweep` verb's options and the daemon's [sweep] keys come
from it, with the same names, ranges and defaults."""

import pytest
from click.testing import CliRunner

from search_core import SearchCoreError
from tuner.cli import main
from tuner.daemon.config import SWEEP_KEYS, load_daemon_config
from tuner.daemon.jobs import sweep_params
from tuner.sweep.loop import SweepParams
from tuner.sweep.settings import SETTING_NAMES, SWEEP_SETTINGS, SweepTable, given_settings


def _sweep_option_names():
    return {p.name for p in main.commands["sweep"].params}


def test_every_setting_is_a_sweep_option_and_a_daemon_key_with_the_library_default():
    assert set(SETTING_NAMES) <= _sweep_option_names()
    assert set(SETTING_NAMES) <= SWEEP_KEYS
    fields = {f for f in SweepParams.__dataclass_fields__}
    assert set(SETTING_NAMES) <= fields
    for s in SWEEP_SETTINGS:
        assert s.default == getattr(SweepParams(db="d", gold="g", space="s"), s.name)


@pytest.mark.parametrize("name,bad", [("hit5_margin", 0.0), ("noise_alpha", 1.5), ("split", 1.0),
                                      ("timing_samples", -1), ("rounds", 0), ("objective", "precision"),
                                      ("gate_epsilon", 2.0)])
def test_one_range_refuses_alike_on_the_command_line_and_in_a_daemon_config(tmp_path, name, bad):
    s = next(x for x in SWEEP_SETTINGS if x.name == name)
    f = tmp_path / "daemon.toml"
    f.write_text(f'[daemon]\ntimezone = "UTC"\n[sweep]\n{name} = {bad!r}\n[jobs.report]\nevery = "1h"\n'
                 .replace("'", '"'))
    with pytest.raises(SearchCoreError) as e:
        load_daemon_config(f)
    assert f"[sweep] {name} = {bad!r}" in str(e.value), str(e.value)
    r = CliRunner().invoke(main, ["sweep", "--gold", "g.yaml", s.option, str(bad)])
    assert r.exit_code == 2 and s.option in r.output, r.output       # click refuses it before any work


def test_a_daemon_setting_reaches_the_night_and_one_left_out_takes_the_default(tmp_path):
    night = sweep_params(SweepTable.of({"gold": "g.yaml", "space": "s.toml", "gate_epsilon": 0.02, "seed": 4}),
                         "x.sqlite", tmp_path, None)
    assert (night.gate_epsilon, night.seed, night.rounds, night.hit5_guard) == (0.02, 4, 119, "noninferior")
    table = SweepTable.of({"gold": "g.yaml", "seed": 4, "level_guard": False})
    assert table.settings == {"seed": 4} and (table.gold, table.holdout) == ("g.yaml", None)
    assert (table.setting("seed"), table.setting("split"), table.setting("rounds")) == (4, None, 119)
    assert given_settings({"level_guard": False, "rounds": None, "epsilon": 0}) == {"epsilon": 0.0}


def test_a_bool_with_an_off_flag_is_given_when_turned_off(tmp_path):
    """`--no-pairs` is a setting given (False), not a flag left out; `--pairs` is given too."""
    assert given_settings({"pairs": False}) == {"pairs": False}
    assert given_settings({"pairs": True}) == {"pairs": True}
    assert given_settings({"pairs": None}) == {}
    options = {o for p in main.commands["sweep"].params for o in p.opts + p.secondary_opts}
    assert {"--pairs", "--no-pairs"} <= options
    assert sweep_params(SweepTable.of({"gold": "g.yaml", "space": "s.toml", "pairs": False}), "x.sqlite", tmp_path,
                        None).pairs is False
