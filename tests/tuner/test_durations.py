"""One duration grammar for the CLI (--time-budget, --since, --older-than, --retention) and the daemon config."""

import click
import pytest

from tuner.cli.options import duration
from tuner.daemon.config import DaemonConfigError, parse_duration as config_duration
from tuner.durations import DurationError, parse_duration


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("30m", 1800), ("8h", 28800), ("7d", 604800),
                                           ("2w", 1209600), ("1.5h", 5400), ("45", 45), (" 7D ", 604800), (12, 12.0)])
def test_every_unit(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "7x", "abc", "0", "0s", "-5m", "nan", "infs", "all", True])
def test_refused_with_the_grammar_in_the_message(text):
    with pytest.raises(DurationError, match="is not a duration like 90s, 30m, 8h, 7d or 2w"):
        parse_duration(text)


def test_all_only_where_allowed():
    assert parse_duration("all", allow_all=True) is None
    with pytest.raises(DurationError, match=r"\(or all\)"):
        parse_duration("zz", allow_all=True)


def test_every_caller_speaks_the_same_grammar():
    # the four parsers this replaced disagreed: `7d` failed as a --time-budget, `2w` in the daemon config,
    # a bare number was refused as a --since window
    window = lambda text: duration(text, allow_all=True)   # noqa: E731  (--since of calibrate)
    for f in (duration, window, config_duration):
        assert f("7d") == 604800 and f("2w") == 1209600 and f("90") == 90
    for f in (duration, window):
        with pytest.raises(click.BadParameter, match="not a duration"):
            f("7x")
    with pytest.raises(DaemonConfigError, match="not a duration"):
        config_duration("0m")
    assert window("all") is None
    with pytest.raises(click.BadParameter):
        duration("all")
