"""`serve` and `mcp` options a hostile user passes are refused by click before any model loads (exit 2,
no traceback), and both follow $AUTORESEARCH_RUNS for the active config and the recall log."""

import pytest
from click.testing import CliRunner

from tuner.cli import main


@pytest.mark.parametrize("verb", ["serve", "mcp"])
@pytest.mark.parametrize("args, message", [
    (["--timeout", "0"], "0<x<=600"), (["--timeout", "-5"], "0<x<=600"), (["--timeout", "nan"], "not a finite"),
    (["--timeout", "inf"], "not a finite"), (["--retention", ""], "not a duration"),
    (["--retention", "soon"], "not a duration"),
])
def test_bad_serve_and_mcp_options_are_usage_errors(tmp_path, verb, args, message):
    r = CliRunner().invoke(main, [verb, "--db", str(tmp_path / "x.sqlite"), *args])
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output


@pytest.mark.parametrize("args, message", [(["--port", "99999"], "1<=x<=65535"), (["--token", ""], "token is empty"),
                                           (["--token", "  "], "token is empty")])
def test_bad_port_and_an_empty_token_are_refused(tmp_path, args, message):
    r = CliRunner().invoke(main, ["serve", "--db", str(tmp_path / "x.sqlite"), *args])
    assert r.exit_code == 2 and message in r.output, r.output


def test_serve_and_mcp_follow_the_runs_folder_of_the_environment(tmp_path, monkeypatch):
    from search_core.recall.config import active_config_path
    from tuner.cli.recall import _LOG_OPT
    runs = tmp_path / "elsewhere"
    runs.mkdir()
    (runs / "active.toml").write_text("[search]\ntop_k = 3\n")
    monkeypatch.setenv("AUTORESEARCH_RUNS", str(runs))
    assert active_config_path(None) == runs / "active.toml"
    import click

    @click.command()
    @_LOG_OPT
    def probe(log_path):
        click.echo(str(log_path))
    assert CliRunner().invoke(probe, []).output.strip() == str(runs / "recall-log.sqlite")
