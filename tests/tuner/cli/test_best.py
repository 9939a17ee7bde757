"""`best`: a ledger path that does not exist is an error and creates nothing."""

from click.testing import CliRunner

from tuner.cli import main


def test_best_with_a_mistyped_ledger_path_creates_nothing(tmp_path):
    missing = tmp_path / "ledgr.sqlite"
    r = CliRunner().invoke(main, ["best", "--ledger", str(missing)])
    assert r.exit_code != 0 and "no ledger at" in r.output
    assert not missing.exists()
