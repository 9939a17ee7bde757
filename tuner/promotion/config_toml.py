"""Write a SearchConfig as TOML that load_config reads back (tomli-w writes it; flat scalars and lists)."""

from __future__ import annotations

import tomli_w

from search_core.config import SearchConfig


def toml_table(name: str, values: dict, comment: str = "") -> str:
    """One TOML table; keys whose value is None are left out (TOML has no null: absent means the default)."""
    head = f"# {comment}\n" if comment else ""
    return head + tomli_w.dumps({name: {k: v for k, v in values.items() if v is not None}})


def config_toml(cfg: SearchConfig, comment: str = "") -> str:
    return toml_table("search", cfg.as_dict(), comment)
