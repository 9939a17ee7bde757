"""The recall path's settings: the [recall] table of a config (the same file as --config), each value
checked when read, and where the active config lives.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from search_core import SearchCoreError
from search_core.config import read_toml
from search_core.paths import active_config_file
from search_core.validate import Where

RECALL_ENV = "AUTORESEARCH_RECALL"          # "0" turns the whole path off (the kill switch)
MAX_TIMEOUT_S = 600.0                       # a recall that takes minutes is an outage, not a setting

SMALL_TALK = (
    # English
    r"(hi|hello|hey|yo|howdy)( there| again| all| everyone| guys)?",
    r"good (morning|afternoon|evening|night)", r"how are you( doing)?( today)?", r"what'?s up",
    r"(thanks|thank you|thx|ty)( (so|very) much| a lot| again)?", r"(bye|goodbye|see (you|ya))( later| soon)?",
    r"(ok|okay|sure|yes|yep|yeah|no|nope|cool|nice|great|got it|sounds good|lol|haha|awesome|perfect)",
    # Korean
    r"안녕(하세요|하십니까|히 주무세요)?", r"(고마워|고맙습니다|감사합니다|감사해요|땡큐)(요)?",
    r"(네|넵|응|ㅇㅇ|좋아|좋아요|알겠어|알겠어요|알겠습니다|오케이|ㅇㅋ|그래|그래요)",
    r"수고(하셨습니다|했어|했어요|하세요|많으셨습니다)?", r"좋은 (아침|하루|밤)(이에요|입니다|되세요)?",
    r"잘 ?자(요)?", r"반가워(요)?|반갑습니다", r"(ㅋ|ㅎ)+",
)


@dataclass(frozen=True)
class RecallConfig:
    enabled: bool = True
    min_chars: int = 8                       # shorter messages ("ok", "ㅇㅋ", "thanks") carry no topic
    small_talk: tuple[str, ...] = SMALL_TALK  # regexes; a message made only of these is not searched
    char_budget: int = 1200                  # the injected block never exceeds this many characters
    max_lines: int = 5
    timeout_s: float = 2.0                   # bounds every call, queue wait included
    query_log: str = "text"                  # "hash": the log keeps only the query's sha256

    def replace(self, **changes) -> "RecallConfig":
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise SearchCoreError(f"unknown [recall] key(s) {sorted(unknown)}; valid keys: "
                                  f"{', '.join(f.name for f in dataclasses.fields(self))}")
        if "small_talk" in changes:
            changes["small_talk"] = tuple(changes["small_talk"])
        return dataclasses.replace(self, **changes)


def active_config_path(explicit: str | Path | None) -> Path | None:
    """--config when given, else the promoted config (search_core.paths: $AUTORESEARCH_RUNS/active.toml,
    else runs/active.toml) when there is one, else None (defaults)."""
    if explicit is not None:
        return Path(explicit)
    active = active_config_file()
    return active if active.exists() else None


def load_recall_config(path: str | Path | None) -> RecallConfig:
    """The [recall] table of a TOML config (the same file as --config), onto the defaults, each value
    checked (a wrong type here would make every call end `stopped_by: error`, far from its cause)."""
    if path is None:
        return RecallConfig()
    where = Where(str(path), "[recall]")
    return RecallConfig().replace(**check_recall_values(where.table_of(read_toml(path).get("recall", {}),
                                                                       "[recall]"), where))


def check_recall_values(data: dict, where: Where) -> dict:
    where.known_keys(data, [f.name for f in dataclasses.fields(RecallConfig)])
    out = dict(data)
    if "enabled" in data:
        out["enabled"] = where.boolean("enabled", data["enabled"])
    if "min_chars" in data:
        out["min_chars"] = where.integer("min_chars", data["min_chars"], lo=0, hi=10_000)
    if "small_talk" in data:
        out["small_talk"] = where.regex_list("small_talk", data["small_talk"])
    if "char_budget" in data:
        out["char_budget"] = where.integer("char_budget", data["char_budget"], lo=100, hi=100_000)
    if "max_lines" in data:
        out["max_lines"] = where.integer("max_lines", data["max_lines"], lo=1, hi=100)
    if "timeout_s" in data:
        out["timeout_s"] = where.number("timeout_s", data["timeout_s"], lo=0.0, hi=MAX_TIMEOUT_S, lo_open=True)
    if "query_log" in data:
        out["query_log"] = where.string("query_log", data["query_log"], choices=("text", "hash"))
    return out
