"""The daemon config's values, refused when the config is read (not when the night's sweep starts),
each message naming the file, the table, the key and what is allowed."""

import pytest

from search_core import SearchCoreError
from tuner.daemon.config import load_daemon_config

REPORT = '[jobs.report]\nevery = "1h"\n'


@pytest.mark.parametrize("body, message", [
    ('[daemon]\ntimezone = "UTC"\nbogus = 1\n' + REPORT, "unknown key(s) in [daemon]: 'bogus'"),
    ('[daemon]\ntimezone = "UTC"\nrun = "x"\n' + REPORT, "did you mean 'runs'"),
    ("[daemon]\ntimezone = 5\n" + REPORT, "[daemon] timezone = 5"),
    ('[daemon]\ntimezone = "UTC"\nruns = 5\n' + REPORT, "[daemon] runs = 5"),
    ('[daemon]\ntimezone = "UTC"\n[sweep]\nrounds = "many"\n' + REPORT, "[sweep] rounds = 'many'"),
    ('[daemon]\ntimezone = "UTC"\n[sweep]\nrounds = -3\n' + REPORT, "from 1 to"),
    ('[daemon]\ntimezone = "UTC"\n[sweep]\nseed = 1.5\n' + REPORT, "[sweep] seed = 1.5"),
    ('[daemon]\ntimezone = "UTC"\n[jobs.report]\nevery = "1e-9s"\n', "shorter than 1 s"),
    ('[daemon]\ntimezone = "UTC"\n[jobs.report]\ncron = "0 0 31 4 *"\n', "never fires"),
    ('[daemon]\ntimezone = "UTC"\n[jobs.report]\nevery = "99999999999d"\n', "[jobs.report] every: '99999999999d' is longer"),
    ('[daemon]\ntimezone = "UTC"\n[jobs.report]\nevery = "1h"\ngrace = "-5s"\n', "[jobs.report] grace: '-5s' is not a"),
    ('jobs = 5\n[daemon]\ntimezone = "UTC"\n', "[jobs] = 5"),
    ('jobs = ["report"]\n[daemon]\ntimezone = "UTC"\n', "[jobs] = ['report']"),
    ('[daemon]\ntimezone = "UTC"\n[jobs]\n', "[jobs] enables no job"),      # it started, and did nothing
    ('[daemon]\ntimezone = "UTC"\n[jobs.sweep]\ncron = "0 1 * * *"\nuntil = "07:00:30"\n', "hours and minutes"),
])
def test_bad_daemon_values_are_refused_when_read(tmp_path, body, message):
    f = tmp_path / "daemon.toml"
    f.write_text(body)
    with pytest.raises(SearchCoreError) as e:
        load_daemon_config(f)
    assert message in str(e.value) and str(f) in str(e.value)


def test_a_daemon_config_that_is_not_utf8_is_a_clear_error(tmp_path):
    f = tmp_path / "daemon.toml"
    f.write_bytes(b'[daemon]\ntimezone = "UTC" # \xe9t\xe9\n')
    with pytest.raises(SearchCoreError, match="not UTF-8"):
        load_daemon_config(f)


def test_a_sweep_cron_that_never_fires_with_until_is_a_clear_error(tmp_path):
    # A complete [sweep], so that the config gets as far as the window: its length was computed from the
    # next fire time, None for 31 April, and loading ended in an AttributeError traceback.
    for name in ("tune.yaml", "hold.yaml", "space.toml", "index.sqlite"):
        (tmp_path / name).write_text("")
    f = tmp_path / "daemon.toml"
    f.write_text('[daemon]\ntimezone = "Asia/Seoul"\n[sweep]\ngold = "tune.yaml"\nholdout = "hold.yaml"\n'
                 'space = "space.toml"\ndb = "index.sqlite"\n[jobs.sweep]\ncron = "0 1 31 4 *"\nuntil = "07:00"\n')
    with pytest.raises(SearchCoreError, match=r"\[jobs.sweep\] cron '0 1 31 4 \*' never fires"):
        load_daemon_config(f)
    f.write_text(f.read_text().replace("0 1 31 4 *", "0 1 30 4 *"))
    assert load_daemon_config(f).job("sweep").grace_s == 6 * 3600         # 01:00 to 07:00: the window
