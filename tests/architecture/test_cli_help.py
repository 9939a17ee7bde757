"""Every command and group of `autoresearch` says what it does, and `--help` works for each."""

import click
from click.testing import CliRunner

from tuner.cli import main


def _walk(cmd: click.Command, path=()):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from _walk(sub, path + (name,))


def test_the_tree_is_walked():
    names = {" ".join(p) for p, _ in _walk(main)}
    assert {"index", "search", "sweep", "recall-log stats", "calibrate apply", "report sweep"} <= names


def test_every_command_has_help_text():
    missing = [" ".join(p) or "autoresearch" for p, cmd in _walk(main) if not (cmd.help or "").strip()]
    assert not missing, f"commands without help text: {missing}"


def test_help_runs_for_every_command():
    runner = CliRunner()
    for path, cmd in _walk(main):
        r = runner.invoke(main, [*path, "--help"])
        assert r.exit_code == 0, (path, r.output)
        assert (cmd.help or "").strip().split("\n")[0][:40] in " ".join(r.output.split()), path
