"""One grammar for every duration the CLI and the daemon config take: `90s`, `30m`, `8h`, `7d`, `2w`, or a
bare number of seconds. `all` (no limit) only where the caller allows it (a log window)."""

from __future__ import annotations

import math

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
EXAMPLES = "90s, 30m, 8h, 7d or 2w"


class DurationError(ValueError):
    pass


def parse_duration(text, *, allow_all: bool = False) -> float | None:
    """Seconds for `text`; None for `all` when `allow_all`. Zero, negative and non-finite durations are
    refused: a 0 s budget or window is always a typo."""
    if isinstance(text, bool):
        raise DurationError(f"{text!r} is not a duration like {EXAMPLES}")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        s = str(text).strip().lower()
        if allow_all and s == "all":
            return None
        try:
            value = float(s[:-1]) * UNITS[s[-1]] if s and s[-1] in UNITS else float(s)
        except (ValueError, IndexError):
            value = math.nan
    if not math.isfinite(value) or value <= 0:
        hint = f"like {EXAMPLES}" + (" (or all)" if allow_all else "")
        raise DurationError(f"{text!r} is not a duration {hint}")
    return value
