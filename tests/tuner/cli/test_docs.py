"""The docs that are generated from the code stay as the code makes them."""

from __future__ import annotations

from tests.helpers import ROOT
from tuner.cli import main as cli
from tuner.cli.reference import cli_reference


def test_cli_reference_is_up_to_date():
    text = cli_reference(cli)
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == text, \
        "docs/cli.md is out of date: run python docs/make_cli_reference.py"
    for name in cli.list_commands(None):           # every verb has its section
        assert f"\n## autoresearch {name}\n" in text
