"""The gates before the search: pure functions of (query, config). Each names the reason a message is not
searched: kill_switch, too_short, small_talk (in that order); in_flight and threshold come after, in the engine.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache

from search_core.recall.config import RECALL_ENV, SMALL_TALK, RecallConfig

GATES = ("kill_switch", "too_short", "small_talk", "in_flight", "threshold")
_FILLER = " \t\n!?.~,;:^*'\"()[]{}…"


@lru_cache(maxsize=16)
def _small_talk_re(patterns: tuple[str, ...]) -> re.Pattern:
    one = "|".join(f"(?:{p})" for p in patterns)
    # one phrase or several in a row ("안녕하세요 좋은 아침이에요", "ok thanks!")
    return re.compile(rf"(?:{one})(?:[\s,!.~]+(?:{one}))*", re.IGNORECASE)


def is_small_talk(query: str, patterns: tuple[str, ...] = SMALL_TALK) -> bool:
    text = re.sub(r"\s+", " ", query.lower()).strip(_FILLER)
    return bool(text) and _small_talk_re(tuple(patterns)).fullmatch(text) is not None


def kill_switch_on(cfg: RecallConfig) -> bool:
    return not cfg.enabled or os.environ.get(RECALL_ENV, "1").strip().lower() in ("0", "false", "off", "no")


PRE_SEARCH_GATES = (
    ("kill_switch", lambda q, cfg: kill_switch_on(cfg)),
    ("too_short", lambda q, cfg: len(q.strip()) < cfg.min_chars),
    ("small_talk", lambda q, cfg: is_small_talk(q, cfg.small_talk)),
)


def first_closed_gate(query: str, cfg: RecallConfig) -> str | None:
    """The first pre-search gate that stops `query`, or None (it goes on to in_flight and threshold)."""
    for name, closed in PRE_SEARCH_GATES:
        if closed(query or "", cfg):
            return name
    return None
