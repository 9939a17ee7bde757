"""Write a SearchConfig as TOML that load_config reads back (flat scalars and string lists only)."""

from __future__ import annotations

import json

from search_core.config import SearchConfig


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)   # a JSON string is a valid TOML basic string


def config_toml(cfg: SearchConfig, comment: str = "") -> str:
    lines = [f"# {comment}"] if comment else []
    lines.append("[search]")
    for k, v in cfg.as_dict().items():
        if v is None:
            continue        # TOML has no null: an absent key means the default
        lines.append(f"{k} = {_value(v)}")
    return "\n".join(lines) + "\n"
